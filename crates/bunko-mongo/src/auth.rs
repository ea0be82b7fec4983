//! Authentication: SCRAM-SHA-256 (RFC 7677) and SCRAM-SHA-1 (RFC 5802 with MongoDB's
//! password digest), as MongoDB runs them through `saslStart` and `saslContinue`, against
//! the same users as the HTTP API.
//!
//! - Server admins (configured with a password) get a credential per mechanism with a
//!   random salt and MongoDB's default iterations (15,000 and 10,000) on first use.
//! - `_users` users: the `scram_sha_256` and `scram_sha_1` credentials the engine stores
//!   beside CouchDB's PBKDF2 fields whenever a password is set ([`bunko_engine::scram`]):
//!   `StoredKey` and `ServerKey` only, which check a proof but cannot make one. A user
//!   document without one (replicated from CouchDB, or written before it existed: SCRAM-SHA-1
//!   came later than SCRAM-SHA-256) fails that mechanism with `AuthenticationFailed` until
//!   its password is set again.
//!
//! An unknown user gets a well-formed exchange with a salt derived from the name, and then
//! `AuthenticationFailed`, so that user names cannot be probed.

use std::collections::HashMap;

use parking_lot::Mutex;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bunko_engine::Engine;
use bunko_engine::login::constant_time_eq;
use bunko_engine::scram::{Mechanism, ScramKeys, hmac};
use bunko_engine::security::UserCtx;
use bunko_engine::users::{USER_PREFIX, roles_of};
use rand::Rng;
use serde_json::Value;

use crate::error::MongoError;

/// What SCRAM needs of a user: their keys, and who they are (`None` for the decoy).
#[derive(Clone)]
struct Credentials {
    keys: ScramKeys,
    ctx: Option<UserCtx>,
}

/// A configured admin's name and a mechanism's name.
type AdminKey = (String, &'static str);

/// The users the MongoDB front end knows: server admins, then `_users`.
pub struct Auth {
    /// (Admin name, mechanism) → (their configured password, its credential), derived on
    /// first use.
    admins: Mutex<HashMap<AdminKey, (String, Credentials)>>,
    secret: [u8; 32],
}

impl Default for Auth {
    fn default() -> Auth {
        Auth { admins: Mutex::default(), secret: rand::rng().random() }
    }
}

impl Auth {
    /// The credential of `name`: a server admin as the engine knows them now (so one added
    /// or removed through `_config` is at once), then `_users`, else a decoy.
    fn credentials(&self, engine: &Engine, name: &str, mech: Mechanism) -> Credentials {
        let admins = engine.logins().admins();
        if let Some((_, secret)) = admins.iter().find(|(n, _)| n == name) {
            return self.admin_credentials(name, secret, mech);
        }
        user_credentials(engine, name, mech).unwrap_or_else(|| self.decoy(name, mech))
    }

    /// The mechanisms `name` can log in with (`hello`'s `saslSupportedMechs`): both for a
    /// server admin with a password and a user document with both credentials, else
    /// SCRAM-SHA-256 only (also for an unknown name, so that names cannot be probed).
    pub fn mechanisms(&self, engine: &Engine, name: &str) -> Vec<&'static str> {
        let sha1 = self.credentials(engine, name, Mechanism::Sha1).ctx.is_some();
        let mechs = if sha1 { &Mechanism::ALL[..] } else { &Mechanism::ALL[..1] };
        mechs.iter().map(|m| m.name()).collect()
    }

    /// An admin configured with a plain password gets a credential derived from it (and
    /// kept while the password stays). One stored as CouchDB's `-pbkdf2-` hash (added through
    /// `_config`) has no SCRAM credential: the hash must not serve as one.
    fn admin_credentials(&self, name: &str, secret: &str, mech: Mechanism) -> Credentials {
        if secret.starts_with("-pbkdf2") || secret.starts_with("-hashed-") {
            return self.decoy(name, mech);
        }
        let mut admins = self.admins.lock();
        let key = (name.to_string(), mech.name());
        if let Some((known, creds)) = admins.get(&key)
            && known == secret
        {
            return creds.clone();
        }
        let keys = mech.new_keys(name, secret);
        let creds = Credentials { keys, ctx: Some(UserCtx::admin(name)) };
        admins.insert(key, (secret.to_string(), creds.clone()));
        creds
    }

    /// Credentials no proof matches, with a stable salt per name and mechanism.
    fn decoy(&self, name: &str, mech: Mechanism) -> Credentials {
        let seed = format!("{}:{name}", mech.name());
        let salt = hmac(&self.secret, seed.as_bytes()).get(..16).unwrap_or_default().to_vec();
        let iterations = mech.iterations();
        let keys = ScramKeys { salt, iterations, stored_key: vec![], server_key: vec![] };
        Credentials { keys, ctx: None }
    }
}

/// Brings the logged-in user of a connection up to date, as MongoDB invalidates its user
/// cache when a user changes: roles granted or revoked (over either API) apply to open
/// connections at their next command, and a dropped user, or a server admin removed
/// through `_config`, is logged out. The user document is read again only when `_users`
/// changed since it was last read.
pub(crate) fn refresh(engine: &Engine, user: &mut Option<UserCtx>, seen: &mut Option<u64>) {
    let Some(name) = user.as_ref().and_then(|u| u.name.clone()) else { return };
    if engine.logins().admins().iter().any(|(n, _)| *n == name) {
        return;
    }
    let Some(users) = engine.get_db(&engine.users_db_name()) else {
        *user = None;
        return;
    };
    let seq = users.update_seq();
    if *seen == Some(seq) {
        return;
    }
    *seen = Some(seq);
    let found = users
        .get(&UserCtx::system(), &format!("{USER_PREFIX}{name}"), None)
        .ok()
        .filter(|d| !d.deleted);
    let body = found.and_then(|d| serde_json::from_slice::<Value>(&d.body).ok());
    *user = body.map(|body| UserCtx { name: Some(name), roles: roles_of(&body) });
}

fn user_credentials(engine: &Engine, name: &str, mech: Mechanism) -> Option<Credentials> {
    let users = engine.get_db(&engine.users_db_name())?;
    let doc = users.get(&UserCtx::system(), &format!("{USER_PREFIX}{name}"), None).ok()?;
    let body: Value = serde_json::from_slice(&doc.body).ok()?;
    let keys = ScramKeys::from_user_doc_as(&body, mech)?;
    let ctx = UserCtx { name: Some(name.to_string()), roles: roles_of(&body) };
    Some(Credentials { keys, ctx: Some(ctx) })
}

/// One SCRAM conversation in progress on a connection.
pub struct Conversation {
    /// The user name the client claims.
    pub name: String,
    client_first_bare: String,
    server_first: String,
    nonce: String,
    mech: Mechanism,
    creds: Credentials,
    /// Set once the proof was verified; the next (empty) step finishes.
    verified: Option<UserCtx>,
}

/// What a step of the exchange answers.
pub struct Step {
    pub payload: Vec<u8>,
    pub done: bool,
    /// The authenticated user, once `done`.
    pub user: Option<UserCtx>,
}

impl Auth {
    /// `saslStart`: the client-first message; answers the server-first message.
    pub fn start(
        &self,
        engine: &Engine,
        mechanism: &str,
        payload: &[u8],
    ) -> Result<(Conversation, Vec<u8>), MongoError> {
        let Some(mech) = Mechanism::from_name(mechanism) else {
            return Err(MongoError::new(
                334,
                "MechanismUnavailable",
                format!("Received authentication for mechanism {mechanism} which is not enabled"),
            ));
        };
        let text = std::str::from_utf8(payload).map_err(|_| MongoError::auth_failed())?;
        let bare = text.strip_prefix("n,,").ok_or_else(|| {
            MongoError::bad_value("SCRAM: only 'n,,' (no channel binding, no authzid) is supported")
        })?;
        let mut name = None;
        let mut client_nonce = None;
        for attr in bare.split(',') {
            if let Some(v) = attr.strip_prefix("n=") {
                name = Some(v.replace("=2C", ",").replace("=3D", "="));
            } else if let Some(v) = attr.strip_prefix("r=") {
                client_nonce = Some(v.to_string());
            }
        }
        let (Some(name), Some(client_nonce)) = (name, client_nonce) else {
            return Err(MongoError::bad_value("SCRAM: malformed client-first message"));
        };
        let creds = self.credentials(engine, &name, mech);
        let nonce = format!("{client_nonce}{}", STANDARD.encode(rand::rng().random::<[u8; 24]>()));
        let server_first = format!(
            "r={nonce},s={},i={}",
            STANDARD.encode(&creds.keys.salt),
            creds.keys.iterations
        );
        let payload = server_first.clone().into_bytes();
        let conv = Conversation {
            name,
            client_first_bare: bare.to_string(),
            server_first,
            nonce,
            mech,
            creds,
            verified: None,
        };
        Ok((conv, payload))
    }
}

impl Conversation {
    /// `saslContinue`: checks the client's proof and answers the server signature; with
    /// `skip_empty` (the driver's `skipEmptyExchange`) that already finishes.
    pub fn step(&mut self, payload: &[u8], skip_empty: bool) -> Result<Step, MongoError> {
        if let Some(user) = self.verified.take() {
            return Ok(Step { payload: Vec::new(), done: true, user: Some(user) });
        }
        let text = std::str::from_utf8(payload).map_err(|_| MongoError::auth_failed())?;
        let (without_proof, proof) = text.rsplit_once(",p=").ok_or_else(MongoError::auth_failed)?;
        let nonce_ok = without_proof.split(',').any(|a| a == format!("r={}", self.nonce));
        let binding_ok = without_proof.split(',').any(|a| a == "c=biws");
        let proof = STANDARD.decode(proof).map_err(|_| MongoError::auth_failed())?;
        let auth_message =
            format!("{},{},{}", self.client_first_bare, self.server_first, without_proof);
        let creds = &self.creds;
        let (Some(ctx), true, true) = (creds.ctx.clone(), nonce_ok, binding_ok) else {
            return Err(MongoError::auth_failed());
        };
        let (mech, stored_key) = (self.mech, &creds.keys.stored_key);
        let signature = mech.hmac(stored_key, auth_message.as_bytes());
        if proof.len() != signature.len() {
            return Err(MongoError::auth_failed());
        }
        let recovered: Vec<u8> = proof.iter().zip(&signature).map(|(p, s)| p ^ s).collect();
        if !constant_time_eq(&mech.hash(&recovered), stored_key) {
            return Err(MongoError::auth_failed());
        }
        let server_signature = mech.hmac(&creds.keys.server_key, auth_message.as_bytes());
        let payload = format!("v={}", STANDARD.encode(server_signature)).into_bytes();
        if skip_empty {
            return Ok(Step { payload, done: true, user: Some(ctx) });
        }
        self.verified = Some(ctx);
        Ok(Step { payload, done: false, user: None })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677's SCRAM-SHA-256 example, run through the server side.
    #[test]
    fn rfc7677_exchange_verifies() -> Result<(), MongoError> {
        let salt = STANDARD.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap_or_default();
        let keys = ScramKeys::derive("pencil", &salt, 4096);
        let creds = Credentials { keys, ctx: Some(UserCtx::admin("user")) };
        let mut conv = Conversation {
            name: "user".to_string(),
            client_first_bare: "n=user,r=rOprNGfwEbeRWgbNEkqO".to_string(),
            server_first: "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096".to_string(),
            nonce: "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0".to_string(),
            mech: Mechanism::Sha256,
            creds,
            verified: None,
        };
        let final_msg = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
        let step = conv.step(final_msg.as_bytes(), true)?;
        assert!(step.done);
        assert_eq!(step.payload, b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
        let bad = final_msg.replace("p=dH", "p=eH");
        assert_eq!(conv.step(bad.as_bytes(), true).err().map(|e| e.code), Some(18));
        Ok(())
    }
}
