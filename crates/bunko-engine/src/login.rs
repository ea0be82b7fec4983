//! Logging in: who a name and password are, for every protocol (HTTP Basic and cookies,
//! and the MongoDB front end's SCRAM), in one place.
//!
//! [`Logins`] knows the server admins (from the configuration) and reads users from
//! `_users`. It keeps two pieces of state beside the store:
//! - a **credential cache**: a verified password is remembered as an HMAC under a key
//!   drawn at start-up (never the password, never an unkeyed hash), bound to the user
//!   document's revision, so Basic auth pays PBKDF2 (600,000 rounds by default) once per
//!   password change instead of on every request;
//! - a **lockout** as CouchDB 3.4's `[chttpd_auth_lockout]`: failures are counted per peer
//!   address, name and salt; once `threshold` failures are counted, that peer is refused for
//!   that account (`403`, even with the right password) until `max_lifetime` has passed since
//!   the first counted failure. A new salt (a password change) starts a new count.
//!
//! Both are rebuildable (a restart forgets them), as DESIGN §8 asks of in-memory state.
//! With `[chttpd_auth] upgrade_hash_on_auth` a login also re-hashes a password stored with
//! older settings ([`Logins::verify`]).
//!
//! A [`Login`] carries the user's salt: session cookies are signed with the server secret
//! *and* the salt, so a password change (new salt) or a deleted user voids every cookie.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use parking_lot::{Mutex, RwLock};
use rand::Rng;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::catalog::Engine;
use crate::security::UserCtx;
use crate::users::{USER_PREFIX, password_matches, roles_of};
use crate::write::WriteOptions;
use crate::{Error, Result};

/// What a lockout does (CouchDB's `[chttpd_auth_lockout] mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockoutMode {
    Off,
    /// Counts and logs, never refuses.
    Warn,
    Enforce,
}

/// Lockout settings, with CouchDB 3.4's defaults.
#[derive(Debug, Clone)]
pub struct LockoutConfig {
    pub mode: LockoutMode,
    /// Failures after which the account is locked for that peer.
    pub threshold: u32,
    /// How long a count lives, from its first failure.
    pub max_lifetime: Duration,
    /// Most (peer, name, salt) counts kept; the oldest go first.
    pub max_objects: usize,
}

impl Default for LockoutConfig {
    fn default() -> Self {
        Self {
            mode: LockoutMode::Enforce,
            threshold: 5,
            max_lifetime: Duration::from_millis(300_000),
            max_objects: 10_000,
        }
    }
}

/// A verified user: their context and the salt their cookies are bound to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Login {
    pub ctx: UserCtx,
    pub salt: String,
}

/// The outcome of checking a name and password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Granted(Login),
    /// Unknown name or wrong password (told apart nowhere, as CouchDB does).
    Denied,
    /// Too many failures from this peer for this account.
    LockedOut,
}

/// The reason CouchDB gives a locked-out login.
pub const LOCKOUT_REASON: &str =
    "Account is temporarily locked due to multiple authentication failures";

/// How long a password hash upgrade waits for the request that logged in.
const UPGRADE_DELAY: Duration = Duration::from_millis(500);

/// Why a user whose document has conflicts cannot log in (CouchDB's `chttpd_auth_cache`).
pub const CONFLICTED_REASON: &str = "User document conflicts must be resolved before the document is used for authentication purposes.";

/// Server admins, the credential cache and the lockout.
pub struct Logins {
    /// name → the configured password, or its `-pbkdf2…` hash (admins added through
    /// `_config`, or a config file holding CouchDB's hashed form).
    admins: RwLock<Vec<Admin>>,
    /// The hashes `_config` shows for admins configured with a plain password.
    shown: Mutex<HashMap<String, String>>,
    /// Key of the cache's password fingerprints, drawn at start-up.
    cache_key: [u8; 32],
    /// name → (user document revision, fingerprint of the verified password).
    cache: Mutex<HashMap<String, (String, [u8; 32])>>,
    lockout: RwLock<LockoutConfig>,
    failures: Mutex<Failures>,
    /// Names whose stored password hash a login is re-hashing ([`Logins::upgrade_hash`]).
    upgrading: Arc<Mutex<HashSet<String>>>,
}

/// A server admin: name, configured password (or hash), and the salt of its cookies,
/// derived once here rather than on every request that shows a cookie.
struct Admin {
    name: String,
    password: String,
    salt: String,
}

impl Admin {
    fn new((name, password): (String, String)) -> Self {
        let salt = hex::encode(Sha256::digest(format!("admin:{name}:{password}")));
        Self { name, password, salt }
    }
}

fn admin_list(admins: Vec<(String, String)>) -> Vec<Admin> {
    admins.into_iter().map(Admin::new).collect()
}

/// (peer, name, salt) → (failures counted, when the first was).
type Failures = HashMap<(IpAddr, String, String), (u32, Instant)>;

impl Logins {
    pub fn new(admins: Vec<(String, String)>, lockout: LockoutConfig) -> Self {
        Self {
            admins: RwLock::new(admin_list(admins)),
            shown: Mutex::default(),
            cache_key: rand::rng().random(),
            cache: Mutex::default(),
            lockout: RwLock::new(lockout),
            failures: Mutex::default(),
            upgrading: Arc::default(),
        }
    }

    /// The server admins' names and passwords (or password hashes).
    pub fn admins(&self) -> Vec<(String, String)> {
        self.admins.read().iter().map(|a| (a.name.clone(), a.password.clone())).collect()
    }

    /// Replaces the server admins (after a `_config` change).
    pub(crate) fn set_admins(&self, admins: Vec<(String, String)>) {
        *self.admins.write() = admin_list(admins);
    }

    /// Sets how failed logins are counted (after a `_config` change).
    pub(crate) fn set_lockout(&self, lockout: LockoutConfig) {
        *self.lockout.write() = lockout;
    }

    /// CouchDB's hashed form of an admin password, `-pbkdf2:sha256-{key},{salt},{iterations}`
    /// (`couch_passwords:hash_admin_password`); a value already hashed is kept.
    pub fn hash_admin(&self, password: &str, iterations: u32) -> String {
        if is_hashed(password) {
            return password.to_string();
        }
        let salt = hex::encode(rand::rng().random::<[u8; 16]>());
        let key = crate::users::derive_sha256(password, &salt, iterations);
        format!("-pbkdf2:sha256-{key},{salt},{iterations}")
    }

    /// What `_config` shows for an admin: never the password, always a hash (computed once
    /// for an admin configured with a plain password).
    pub fn shown(&self, name: &str, value: &str, iterations: u32) -> String {
        if is_hashed(value) {
            return value.to_string();
        }
        let mut shown = self.shown.lock();
        shown.entry(name.to_string()).or_insert_with(|| self.hash_admin(value, iterations)).clone()
    }

    /// Checks `name` and `password` for a login from `peer` (`None` when the peer is unknown,
    /// e.g. in-process callers: those are never counted or locked out).
    pub fn verify(
        &self,
        engine: &Engine,
        name: &str,
        password: &str,
        peer: Option<IpAddr>,
    ) -> Result<Verdict> {
        let Some(user) = self.find(engine, name)? else {
            return Ok(self.fail(peer, name, ""));
        };
        let counted = peer.map(|ip| (ip, name.to_string(), user.login.salt.clone()));
        if let Some(key) = &counted
            && self.is_locked(key)
        {
            return Ok(Verdict::LockedOut);
        }
        if !self.password_ok(&user, password) {
            return Ok(self.fail(peer, name, &user.login.salt));
        }
        if let Some((rev, body)) = &user.doc {
            self.upgrade_hash(engine, name, rev, body, password);
        }
        Ok(Verdict::Granted(user.login))
    }

    /// With `[chttpd_auth] upgrade_hash_on_auth`, a login whose user document was hashed
    /// with other settings (`iterations`, `pbkdf2_prf`) re-hashes the password it proved,
    /// keeping the salt, on a thread of its own (CouchDB's `couch_password_hasher`), once
    /// at a time per user.
    fn upgrade_hash(&self, engine: &Engine, name: &str, rev: &str, body: &Value, password: &str) {
        let config = engine.config();
        if !config.upgrade_hash_on_auth || !crate::users::needs_upgrade(body, config.hashing()) {
            return;
        }
        let (Some(users), Value::Object(fields)) = (engine.get_db(&config.users_db), body) else {
            return;
        };
        if !self.upgrading.lock().insert(name.to_string()) {
            return;
        }
        let mut doc = fields.clone();
        doc.insert("_id".into(), format!("{USER_PREFIX}{name}").into());
        doc.insert("_rev".into(), rev.into());
        doc.insert("password".into(), password.into());
        doc.insert("preserve_salt".into(), true.into());
        let (upgrading, name, limits) = (self.upgrading.clone(), name.to_string(), config.limits);
        std::thread::spawn(move || {
            // After the request that logged in, which may itself change the password (its
            // write then wins, and this one conflicts), as CouchDB's hasher comes later.
            std::thread::sleep(UPGRADE_DELAY);
            let written = bunko_doc::body::from_value(Value::Object(doc), &limits)
                .map_err(Error::from)
                .and_then(|doc| users.put(&UserCtx::system(), doc, WriteOptions::default()));
            match written {
                Ok(_) => tracing::info!(user = name, "upgraded the stored password hash"),
                Err(Error::Conflict) => tracing::debug!(user = name, "user document changed"),
                Err(err) => tracing::warn!(user = name, %err, "password hash upgrade failed"),
            }
            upgrading.lock().remove(&name);
        });
    }

    /// For protocols that check a proof themselves (MongoDB's SCRAM): whether `peer` is
    /// locked out of `name`'s account. Such a protocol calls [`Logins::record_failure`] for
    /// every proof that fails, so both protocols share one count.
    pub fn is_locked_out(&self, engine: &Engine, name: &str, peer: Option<IpAddr>) -> Result<bool> {
        let (Some(ip), Some(user)) = (peer, self.find(engine, name)?) else { return Ok(false) };
        Ok(self.is_locked(&(ip, name.to_string(), user.login.salt)))
    }

    /// Counts a failed proof of `name` from `peer` (see [`Logins::is_locked_out`]).
    pub fn record_failure(&self, engine: &Engine, name: &str, peer: Option<IpAddr>) -> Result<()> {
        let salt = self.find(engine, name)?.map(|user| user.login.salt).unwrap_or_default();
        self.fail(peer, name, &salt);
        Ok(())
    }

    /// The login of an existing user or admin, without a password (for cookie sessions).
    pub fn lookup(&self, engine: &Engine, name: &str) -> Result<Option<Login>> {
        Ok(self.find(engine, name)?.map(|user| user.login))
    }

    /// The login of server admin `name`, if it is one: no storage read, so an async caller
    /// can ask without a blocking thread before falling back to [`Logins::lookup`].
    pub fn admin_login(&self, name: &str) -> Option<Login> {
        let salt = self.admins.read().iter().find(|a| a.name == name)?.salt.clone();
        Some(Login { ctx: UserCtx::admin(name), salt })
    }

    fn find(&self, engine: &Engine, name: &str) -> Result<Option<User>> {
        if let Some(login) = self.admin_login(name) {
            return Ok(Some(User { login, doc: None }));
        }
        let config = engine.config();
        let Some(users) = engine.get_db(&config.users_db) else { return Ok(None) };
        let doc = match users.get_stored(&format!("{USER_PREFIX}{name}"), None) {
            Ok(doc) => doc,
            Err(Error::NotFound(_)) => return Ok(None),
            Err(err) => return Err(err),
        };
        if !config.allow_conflicted_user_docs && !doc.info.tree.conflicts().0.is_empty() {
            return Err(Error::Unauthorized(CONFLICTED_REASON.to_string()));
        }
        let body: Value = serde_json::from_slice(&doc.body).unwrap_or(Value::Null);
        let salt = body.get("salt").and_then(Value::as_str).unwrap_or_default().to_string();
        let ctx = UserCtx { name: Some(name.to_string()), roles: roles_of(&body) };
        Ok(Some(User { login: Login { ctx, salt }, doc: Some((doc.rev.to_string(), body)) }))
    }

    fn password_ok(&self, user: &User, password: &str) -> bool {
        let name = user.login.ctx.name.clone().unwrap_or_default();
        let Some((rev, body)) = &user.doc else {
            let admin =
                self.admins.read().iter().find(|a| a.name == name).map(|a| a.password.clone());
            let Some(stored) = admin else { return false };
            let Some(record) = hashed_record(&stored) else {
                return constant_time_eq(stored.as_bytes(), password.as_bytes());
            };
            return self.checked(&name, &stored, password, |p| password_matches(&record, p));
        };
        self.checked(&name, rev, password, |p| password_matches(body, p))
    }

    /// Checks `password` with `matches`, remembering a success under `version` (a user
    /// document's revision, an admin's stored hash) so that PBKDF2 runs once per password.
    fn checked(
        &self,
        name: &str,
        version: &str,
        password: &str,
        matches: impl FnOnce(&str) -> bool,
    ) -> bool {
        let fingerprint = self.fingerprint(password);
        if self.cache.lock().get(name) == Some(&(version.to_string(), fingerprint)) {
            return true;
        }
        if !matches(password) {
            return false;
        }
        self.cache.lock().insert(name.to_string(), (version.to_string(), fingerprint));
        true
    }

    fn fingerprint(&self, password: &str) -> [u8; 32] {
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&self.cache_key) else { return [0; 32] };
        mac.update(password.as_bytes());
        mac.finalize().into_bytes().into()
    }

    fn is_locked(&self, key: &(IpAddr, String, String)) -> bool {
        let lockout = self.lockout.read().clone();
        if lockout.mode == LockoutMode::Off {
            return false;
        }
        let mut failures = self.failures.lock();
        let Some(&(count, first)) = failures.get(key) else { return false };
        if first.elapsed() >= lockout.max_lifetime {
            failures.remove(key);
            return false;
        }
        if count < lockout.threshold {
            return false;
        }
        tracing::warn!("authentication rejected for a locked-out user from {}", key.0);
        lockout.mode == LockoutMode::Enforce
    }

    /// Counts a failure and answers [`Verdict::Denied`].
    fn fail(&self, peer: Option<IpAddr>, name: &str, salt: &str) -> Verdict {
        let Some(ip) = peer else { return Verdict::Denied };
        let lockout = self.lockout.read().clone();
        if lockout.mode == LockoutMode::Off {
            return Verdict::Denied;
        }
        let mut failures = self.failures.lock();
        let lifetime = lockout.max_lifetime;
        if failures.len() >= lockout.max_objects {
            failures.retain(|_, (_, first)| first.elapsed() < lifetime);
        }
        if failures.len() >= lockout.max_objects
            && let Some(oldest) = failures.iter().min_by_key(|(_, (_, t))| *t).map(|(k, _)| k)
        {
            let oldest = oldest.clone();
            failures.remove(&oldest);
        }
        let now = Instant::now();
        let entry = failures.entry((ip, name.to_string(), salt.to_string())).or_insert((0, now));
        if entry.1.elapsed() >= lifetime {
            *entry = (0, now);
        }
        entry.0 += 1;
        tracing::warn!("authentication failed from {ip}");
        Verdict::Denied
    }
}

/// A found admin or user: their login, and for users the document's revision and body.
struct User {
    login: Login,
    doc: Option<(String, Value)>,
}

/// Whether an admin's configured value is a password hash rather than a password.
fn is_hashed(value: &str) -> bool {
    value.starts_with("-pbkdf2") || value.starts_with("-hashed-")
}

/// A `-pbkdf2[:prf]-{key},{salt},{iterations}` admin hash as a user-document-like record
/// that `password_matches` checks.
fn hashed_record(value: &str) -> Option<Value> {
    let rest = value.strip_prefix("-pbkdf2")?;
    let (prf, rest) = match rest.strip_prefix(':') {
        Some(rest) => rest.split_once('-')?,
        None => ("sha1", rest.strip_prefix('-')?),
    };
    let mut parts = rest.split(',');
    let (key, salt, iterations) = (parts.next()?, parts.next()?, parts.next()?);
    Some(serde_json::json!({
        "password_scheme": "pbkdf2",
        "pbkdf2_prf": prf,
        "derived_key": key,
        "salt": salt,
        "iterations": iterations.parse::<u64>().ok()?,
    }))
}

/// Compares without an early exit, so timing does not reveal the matching prefix.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    fn setup(lockout: LockoutConfig) -> (Engine, Logins) {
        let store = std::sync::Arc::new(bunko_storage::Memory::new());
        let engine = Engine::open(store, Default::default()).expect("engine");
        (engine, Logins::new(vec![("admin".into(), "pw".into())], lockout))
    }

    const PEER: Option<IpAddr> = Some(IpAddr::V4(Ipv4Addr::LOCALHOST));

    #[test]
    fn admins_log_in_and_wrong_passwords_lock_the_account_for_that_peer() -> Result<()> {
        let (engine, logins) = setup(LockoutConfig { threshold: 3, ..Default::default() });
        assert!(matches!(logins.verify(&engine, "admin", "pw", PEER)?, Verdict::Granted(_)));
        for _ in 0..3 {
            assert_eq!(logins.verify(&engine, "admin", "bad", PEER)?, Verdict::Denied);
        }
        assert_eq!(logins.verify(&engine, "admin", "pw", PEER)?, Verdict::LockedOut);
        let other = Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)));
        assert!(matches!(logins.verify(&engine, "admin", "pw", other)?, Verdict::Granted(_)));
        assert!(matches!(logins.verify(&engine, "admin", "pw", None)?, Verdict::Granted(_)));
        Ok(())
    }

    #[test]
    fn a_lockout_ends_after_its_lifetime_and_warn_mode_never_refuses() -> Result<()> {
        let short =
            LockoutConfig { threshold: 1, max_lifetime: Duration::ZERO, ..Default::default() };
        let (engine, logins) = setup(short);
        assert_eq!(logins.verify(&engine, "admin", "bad", PEER)?, Verdict::Denied);
        assert!(matches!(logins.verify(&engine, "admin", "pw", PEER)?, Verdict::Granted(_)));
        let warn = LockoutConfig { threshold: 1, mode: LockoutMode::Warn, ..Default::default() };
        let (engine, logins) = setup(warn);
        assert_eq!(logins.verify(&engine, "admin", "bad", PEER)?, Verdict::Denied);
        assert!(matches!(logins.verify(&engine, "admin", "pw", PEER)?, Verdict::Granted(_)));
        Ok(())
    }

    #[test]
    fn an_admins_cookie_salt_follows_the_configured_password() {
        let (_engine, logins) = setup(LockoutConfig::default());
        let first = logins.admin_login("admin").expect("an admin").salt;
        assert_eq!(logins.admin_login("nobody").map(|l| l.salt), None);
        logins.set_admins(vec![("admin".into(), "other".into())]);
        let second = logins.admin_login("admin").expect("still an admin").salt;
        assert_ne!(first, second, "a new password voids the cookies signed with the old salt");
        logins.set_admins(vec![("admin".into(), "pw".into())]);
        assert_eq!(logins.admin_login("admin").expect("an admin").salt, first);
        assert_eq!(logins.admins(), vec![("admin".to_string(), "pw".to_string())]);
    }

    #[test]
    fn the_count_table_stays_bounded() -> Result<()> {
        let (engine, logins) = setup(LockoutConfig { max_objects: 4, ..Default::default() });
        for i in 0..20u8 {
            let peer = Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, i)));
            logins.verify(&engine, "nobody", "x", peer)?;
        }
        assert!(logins.failures.lock().len() <= 4);
        Ok(())
    }
}
