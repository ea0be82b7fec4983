//! Run-time settings: CouchDB's `/_node/{node}/_config` over the engine.
//!
//! Settings are strings under `section/key`, as in CouchDB's ini files. Two layers make the
//! effective value:
//! 1. the **start-up values** (command-line flags and the config file, rendered as strings
//!    by `start_values`, plus what the HTTP layer [`Settings::seed`]s),
//! 2. the **changes made through `_config`**, persisted under `Config(section, key)` keys
//!    (a value, or a deletion), which override the start-up values and survive restarts.
//!
//! The typed [`Config`] every write reads is rebuilt from the effective values after each
//! change and published through [`Live`], a read-mostly cell: readers clone an `Arc` under a
//! read lock and never wait on a writer for longer than that swap. Settings Bunko does not
//! know are kept and listed like the others (`docs/config.md` lists the ones it honours).

use std::collections::BTreeMap;
use std::sync::Arc;

use bunko_storage::{Batch, Store};
use parking_lot::{Mutex, RwLock};

use crate::catalog::{Config, Engine};
use crate::keys::{self, Key};
use crate::login::LockoutMode;
use crate::records;
use crate::security::UserCtx;
use crate::uuids::Algorithm;
use crate::{Error, Result};

/// The typed settings, swapped whole when a setting changes.
#[derive(Debug)]
pub struct Live(RwLock<Arc<Config>>);

impl Live {
    pub fn new(config: Config) -> Self {
        Live(RwLock::new(Arc::new(config)))
    }

    /// The current settings (a cheap `Arc` clone).
    pub fn get(&self) -> Arc<Config> {
        self.0.read().clone()
    }

    fn set(&self, config: Config) {
        *self.0.write() = Arc::new(config);
    }
}

/// `section → key → value`.
pub type Values = BTreeMap<String, BTreeMap<String, String>>;

/// The sections CouchDB refuses to change over HTTP (`couch_util:check_config_blacklist`).
const BLACKLIST: &[&str] = &[
    "daemons",
    "external",
    "httpd_design_handlers",
    "httpd_db_handlers",
    "httpd_global_handlers",
    "native_query_servers",
    "os_daemons",
    "query_servers",
    "feature_flags",
];

/// How a known setting's value is checked.
#[derive(Clone, Copy)]
enum Kind {
    Int,
    /// An integer, or `infinity` (no limit).
    IntOrInfinity,
    Bool,
    LockoutMode,
    UuidAlgorithm,
}

/// Every setting Bunko applies, with its kind (keep `docs/config.md` in step).
const KNOWN: &[(&str, &str, Kind)] = &[
    ("couchdb", "max_document_size", Kind::Int),
    ("couchdb", "max_attachment_size", Kind::IntOrInfinity),
    ("couchdb", "max_partition_size", Kind::Int),
    ("couchdb", "users_db_security_editable", Kind::Bool),
    ("chttpd", "max_http_request_size", Kind::Int),
    ("chttpd_auth", "timeout", Kind::Int),
    ("chttpd_auth", "allow_persistent_cookies", Kind::Bool),
    ("chttpd_auth", "iterations", Kind::Int),
    ("chttpd_auth_lockout", "mode", Kind::LockoutMode),
    ("chttpd_auth_lockout", "threshold", Kind::Int),
    ("chttpd_auth_lockout", "max_lifetime", Kind::Int),
    ("chttpd_auth_lockout", "max_objects", Kind::Int),
    ("query_server_config", "partition_query_limit", Kind::Int),
    ("purge", "max_document_id_number", Kind::IntOrInfinity),
    ("purge", "max_revisions_number", Kind::IntOrInfinity),
    ("uuids", "algorithm", Kind::UuidAlgorithm),
    ("uuids", "max_count", Kind::Int),
];

/// The start-up settings and the `_config` changes over them.
pub struct Settings {
    start: Config,
    base: Mutex<Values>,
    changes: Mutex<BTreeMap<(String, String), Option<String>>>,
    live: Arc<Live>,
}

impl Settings {
    /// Loads the persisted changes over the start-up `config`.
    pub(crate) fn open(store: &dyn Store, start: Config) -> Result<Settings> {
        let mut changes = BTreeMap::new();
        for entry in bunko_storage::Iter::new(store.snapshot(), keys::config_range(), false, 256) {
            let (key, value) = entry?;
            changes.insert(keys::decode_config(&key)?, records::decode(&value)?);
        }
        let settings = Settings {
            base: Mutex::new(start_values(&start)),
            start,
            changes: Mutex::new(changes),
            live: Arc::new(Live::new(Config::default())),
        };
        settings.publish();
        Ok(settings)
    }

    pub(crate) fn live(&self) -> &Arc<Live> {
        &self.live
    }

    /// Adds a start-up value the engine does not hold itself (the HTTP layer's), unless
    /// already present.
    pub fn seed(&self, section: &str, key: &str, value: &str) {
        let mut base = self.base.lock();
        base.entry(section.to_string()).or_default().entry(key.to_string()).or_insert(value.into());
    }

    /// Every effective setting.
    pub fn all(&self) -> Values {
        let mut values = self.base.lock().clone();
        for ((section, key), value) in self.changes.lock().iter() {
            match value {
                Some(value) => {
                    values.entry(section.clone()).or_default().insert(key.clone(), value.clone());
                }
                None => {
                    if let Some(keys) = values.get_mut(section) {
                        keys.remove(key);
                    }
                }
            }
        }
        values.retain(|_, keys| !keys.is_empty());
        values
    }

    /// The effective value of `section/key`.
    pub fn get(&self, section: &str, key: &str) -> Option<String> {
        let change = self.changes.lock().get(&(section.to_string(), key.to_string())).cloned();
        match change {
            Some(value) => value,
            None => self.base.lock().get(section).and_then(|keys| keys.get(key)).cloned(),
        }
    }

    /// An effective integer setting, if set and valid.
    pub fn get_u64(&self, section: &str, key: &str) -> Option<u64> {
        self.get(section, key).and_then(|v| v.trim().parse().ok())
    }

    /// An effective boolean setting, if set and valid.
    pub fn get_bool(&self, section: &str, key: &str) -> Option<bool> {
        self.get(section, key).and_then(|v| v.trim().parse().ok())
    }

    /// An authentication setting: `[chttpd_auth]`, else the older `[couch_httpd_auth]`, as
    /// CouchDB's `chttpd_util:get_chttpd_auth_config` reads it.
    fn auth_setting(&self, key: &str) -> Option<String> {
        self.get("chttpd_auth", key).or_else(|| self.get("couch_httpd_auth", key))
    }

    /// Rebuilds the typed settings from the effective values.
    fn publish(&self) {
        let mut config = self.start.clone();
        let defaults = Config::default();
        let int = |section, key| self.get_u64(section, key);
        config.limits.max_document_size = int("couchdb", "max_document_size")
            .map_or(defaults.limits.max_document_size, |v| v as usize);
        let unlimited = |section, key, default| match self.get(section, key) {
            Some(v) if v.trim() == "infinity" => u64::MAX,
            _ => int(section, key).unwrap_or(default),
        };
        config.max_attachment_size =
            unlimited("couchdb", "max_attachment_size", defaults.max_attachment_size);
        config.att_gzip = bunko_doc::gzip::Policy::new(
            self.get("attachments", "compressible_types").as_deref(),
            self.get("attachments", "compression_level").as_deref(),
        );
        config.max_partition_size =
            int("couchdb", "max_partition_size").unwrap_or(defaults.max_partition_size);
        config.purge_max_ids = unlimited("purge", "max_document_id_number", defaults.purge_max_ids);
        config.purge_max_revs = unlimited("purge", "max_revisions_number", defaults.purge_max_revs);
        config.users_db_security_editable = self
            .get_bool("couchdb", "users_db_security_editable")
            .unwrap_or(defaults.users_db_security_editable);
        config.users_db = self.auth_setting("authentication_db").unwrap_or(defaults.users_db);
        config.allow_conflicted_user_docs =
            self.auth_setting("allow_conflicted_user_docs").is_some_and(|v| v.trim() == "true");
        config.password_regexp = self.auth_setting("password_regexp");
        config.pbkdf2_iterations = int("chttpd_auth", "iterations")
            .map_or(defaults.pbkdf2_iterations, |v| v.clamp(1, u32::MAX as u64) as u32);
        config.pbkdf2_prf = self
            .auth_setting("pbkdf2_prf")
            .and_then(|v| crate::users::Prf::parse(&v))
            .unwrap_or(defaults.pbkdf2_prf);
        config.upgrade_hash_on_auth =
            self.auth_setting("upgrade_hash_on_auth").is_some_and(|v| v.trim() == "true");
        let lockout = &mut config.lockout;
        lockout.mode = match self.get("chttpd_auth_lockout", "mode").as_deref() {
            Some("warn") => LockoutMode::Warn,
            Some("off") => LockoutMode::Off,
            _ => LockoutMode::Enforce,
        };
        let lock_defaults = defaults.lockout;
        lockout.threshold = int("chttpd_auth_lockout", "threshold")
            .map_or(lock_defaults.threshold, |v| v.min(u32::MAX as u64) as u32);
        lockout.max_lifetime = int("chttpd_auth_lockout", "max_lifetime")
            .map_or(lock_defaults.max_lifetime, std::time::Duration::from_millis);
        lockout.max_objects = int("chttpd_auth_lockout", "max_objects")
            .map_or(lock_defaults.max_objects, |v| (v as usize).max(1));
        config.admins = self
            .all()
            .remove("admins")
            .map(|admins| admins.into_iter().collect())
            .unwrap_or_default();
        self.live.set(config);
        let algorithm = self.get("uuids", "algorithm").as_deref().and_then(Algorithm::parse);
        let suffix = self.get("uuids", "utc_id_suffix").unwrap_or_default();
        crate::uuids::global().configure(algorithm.unwrap_or(Algorithm::Sequential), &suffix);
    }
}

/// The start-up values of every known setting, as `_config` shows them.
fn start_values(config: &Config) -> Values {
    let mut values = Values::new();
    let mut put = |section: &str, key: &str, value: String| {
        values.entry(section.to_string()).or_default().insert(key.to_string(), value);
    };
    put("couchdb", "max_document_size", config.limits.max_document_size.to_string());
    put("couchdb", "max_attachment_size", config.max_attachment_size.to_string());
    put("couchdb", "max_partition_size", config.max_partition_size.to_string());
    put("couchdb", "users_db_security_editable", config.users_db_security_editable.to_string());
    put("purge", "max_document_id_number", config.purge_max_ids.to_string());
    put("purge", "max_revisions_number", config.purge_max_revs.to_string());
    put("chttpd_auth", "iterations", config.pbkdf2_iterations.to_string());
    put("chttpd_auth", "authentication_db", config.users_db.clone());
    let lockout = &config.lockout;
    let mode = match lockout.mode {
        LockoutMode::Enforce => "enforce",
        LockoutMode::Warn => "warn",
        LockoutMode::Off => "off",
    };
    put("chttpd_auth_lockout", "mode", mode.to_string());
    put("chttpd_auth_lockout", "threshold", lockout.threshold.to_string());
    put("chttpd_auth_lockout", "max_lifetime", lockout.max_lifetime.as_millis().to_string());
    put("chttpd_auth_lockout", "max_objects", lockout.max_objects.to_string());
    for (name, password) in &config.admins {
        put("admins", name, password.clone());
    }
    values
}

/// Checks a new value as CouchDB's `config:validate_config_update` does, and known settings
/// by their kind.
fn validate(section: &str, key: &str, value: Option<&str>) -> Result<()> {
    if BLACKLIST.contains(&section) {
        return Err(Error::Forbidden(
            "Config section blacklisted for modification over HTTP API.".to_string(),
        ));
    }
    let printable = |s: &str| s.chars().all(|c| !c.is_control() || c == '\t');
    let plain = |s: &str| printable(s) && !s.contains(['[', ']']);
    if section.is_empty() || !plain(section) {
        return Err(Error::BadRequest("Invalid configuration section".to_string()));
    }
    if key.is_empty() || !plain(key) {
        return Err(Error::BadRequest("Invalid configuration key".to_string()));
    }
    let Some(value) = value else { return Ok(()) };
    if !printable(value) {
        return Err(Error::BadRequest("Invalid configuration value".to_string()));
    }
    let Some((_, _, kind)) = KNOWN.iter().find(|(s, k, _)| *s == section && *k == key) else {
        return Ok(());
    };
    let ok = match kind {
        Kind::Int => value.parse::<u64>().is_ok(),
        Kind::IntOrInfinity => value == "infinity" || value.parse::<u64>().is_ok(),
        Kind::Bool => matches!(value, "true" | "false"),
        Kind::LockoutMode => matches!(value, "enforce" | "warn" | "off"),
        Kind::UuidAlgorithm => Algorithm::parse(value).is_some(),
    };
    if ok {
        Ok(())
    } else {
        Err(Error::BadRequest(format!("Invalid value for {section}/{key}: {value:?}")))
    }
}

impl Engine {
    /// Sets (`Some`) or deletes (`None`) the setting `section/key` as `ctx`, a server admin,
    /// persisting the change; answers the previous value. A new admin's password is stored
    /// hashed (`-pbkdf2:sha256-…`), never as given.
    pub fn set_config(
        &self,
        ctx: &UserCtx,
        section: &str,
        key: &str,
        value: Option<&str>,
    ) -> Result<Option<String>> {
        crate::gate::admit_server_admin(ctx)?;
        let value = value.map(str::trim);
        validate(section, key, value)?;
        let value = match value {
            Some(password) if section == "admins" => {
                Some(self.logins().hash_admin(password, self.config().pbkdf2_iterations))
            }
            other => other.map(str::to_string),
        };
        let settings = self.settings();
        let guard = self.catalog_lock();
        let old = self.config_value(section, key);
        let mut batch = Batch::new();
        batch.put(Key::Config(section, key).encode(), records::encode(&value));
        self.store().commit(batch)?;
        settings.changes.lock().insert((section.to_string(), key.to_string()), value);
        settings.publish();
        let config = self.config();
        self.logins().set_admins(config.admins.clone());
        self.logins().set_lockout(config.lockout.clone());
        drop(guard);
        // A newly named authentication database gets `_design/_auth` (and with it the
        // users-database rules, `user_doc`) when the server next follows it: after a
        // database is deleted or at start-up, as CouchDB's auth cache restarts
        // (`Engine::delete_db`). Until then an admin may load user documents into it.
        let renamed = key == "authentication_db";
        if let (false, Some(users)) = (renamed, self.get_db(&config.users_db)) {
            crate::users::ensure_auth_ddoc(&users, ctx);
        }
        Ok(old)
    }

    /// One effective setting as `_config` shows it (an admin as a password hash).
    pub fn config_value(&self, section: &str, key: &str) -> Option<String> {
        let value = self.settings().get(section, key)?;
        if section != "admins" {
            return Some(value);
        }
        Some(self.logins().shown(key, &value, self.config().pbkdf2_iterations))
    }

    /// Every effective setting as `_config` shows it: admins as password hashes.
    pub fn config_values(&self) -> Values {
        let mut values = self.settings().all();
        let iterations = self.config().pbkdf2_iterations;
        if let Some(admins) = values.get_mut("admins") {
            for (name, value) in admins.iter_mut() {
                *value = self.logins().shown(name, value, iterations);
            }
        }
        values
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_override_start_values_and_survive_a_reopen() -> Result<()> {
        let store: Arc<dyn Store> = Arc::new(bunko_storage::Memory::new());
        let admin = UserCtx::admin("a");
        let engine = Engine::open(store.clone(), Config::default())?;
        assert_eq!(engine.config().limits.max_document_size, 8_000_000);
        let old = engine.set_config(&admin, "couchdb", "max_document_size", Some("100"))?;
        assert_eq!(old.as_deref(), Some("8000000"));
        assert_eq!(engine.config().limits.max_document_size, 100);
        engine.set_config(&admin, "vendor", "anything", Some("kept"))?;
        let bad = engine.set_config(&admin, "couchdb", "max_document_size", Some("big"));
        assert!(matches!(bad, Err(Error::BadRequest(_))));
        let user = UserCtx { name: Some("u".into()), roles: vec![] };
        let refused = engine.set_config(&user, "couchdb", "max_document_size", Some("1"));
        assert!(matches!(refused, Err(Error::Unauthorized(_))));
        drop(engine);
        let engine = Engine::open(store, Config::default())?;
        assert_eq!(engine.config().limits.max_document_size, 100);
        assert_eq!(engine.settings().get("vendor", "anything").as_deref(), Some("kept"));
        engine.set_config(&admin, "couchdb", "max_document_size", None)?;
        assert_eq!(engine.settings().get("couchdb", "max_document_size"), None);
        assert_eq!(engine.config().limits.max_document_size, 8_000_000);
        Ok(())
    }
}
