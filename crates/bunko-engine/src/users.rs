//! The `_users` database: user documents `org.couchdb.user:{name}`, password hashing on
//! write, and verifying a name and password.
//!
//! On write a user document's `password` is replaced by `password_scheme: "pbkdf2"`,
//! `pbkdf2_prf` (`[chttpd_auth] pbkdf2_prf`: `sha256`, or `sha512`), `iterations`, `salt`
//! and `derived_key`, as CouchDB 3.4 stores it (a new salt unless the document says
//! `preserve_salt: true`); no plain password is ever stored. Verification also accepts
//! CouchDB's older PBKDF2-SHA1 documents. Logging in with them is [`crate::login`]'s, and
//! so is the upgrade of an outdated hash on login (`needs_upgrade`).

use bunko_doc::body::ParsedDoc;
use rand::Rng;
use serde_json::{Map, Value, json};
use sha2::{Sha256, Sha512};

use crate::database::Database;
use crate::login::constant_time_eq;
use crate::security::UserCtx;
use crate::write::WriteOptions;
use crate::{Error, Result};

/// The users database.
pub const USERS_DB: &str = "_users";
/// The id prefix of user documents.
pub const USER_PREFIX: &str = "org.couchdb.user:";

/// Hashes the `password` of a document written to `_users` (before the writer lock: PBKDF2
/// is slow). Who may write it, and what it may hold, is decided by the write gate
/// ([`crate::gate`], [`crate::user_doc`]).
///
/// The SCRAM credentials are the server's to derive: a write without a `password` by
/// someone who is not an admin of `_users` keeps those of the revision it edits (what the
/// client sent in their place is ignored), or none if it changes the PBKDF2 fields (the
/// credentials would then stand for another password than the document's).
pub(crate) fn prepare(
    db: &Database,
    admin: bool,
    doc: &mut ParsedDoc,
    hashing: Hashing,
) -> Result<()> {
    if !db.is_users_db() || doc.deleted {
        return Ok(());
    }
    let password = match doc.body.get("password") {
        None | Some(Value::Null) if admin => return Ok(()),
        None | Some(Value::Null) => return keep_scram(db, doc),
        Some(Value::String(password)) => password.clone(),
        Some(_) => return Err(Error::Forbidden("doc.password must be a string".to_string())),
    };
    crate::password_rules::check(&password, db.config.get().password_regexp.as_deref())?;
    hash_into(doc, &password, hashing);
    Ok(())
}

/// Sets the SCRAM credentials of `doc` (written without a password) to those of the
/// revision it edits, unless its PBKDF2 fields differ from that revision's.
fn keep_scram(db: &Database, doc: &mut ParsedDoc) -> Result<()> {
    let fields = [crate::scram::FIELD, crate::scram::FIELD_SHA1];
    let mut edited = Map::new();
    if let (Some(id), Some(rev)) = (&doc.id, &doc.rev) {
        match db.get_stored(id, Some(rev)) {
            Ok(found) => {
                edited = serde_json::from_slice(&found.body).unwrap_or_default();
            }
            // The write then fails as a conflict; keep nothing meanwhile.
            Err(Error::NotFound(_)) => {}
            Err(err) => return Err(err),
        }
    }
    let hash_fields = ["password_scheme", "pbkdf2_prf", "iterations", "salt", "derived_key"];
    let same_hash = hash_fields.iter().all(|f| doc.body.get(*f) == edited.get(*f));
    for field in fields {
        match edited.get(field).filter(|_| same_hash) {
            Some(value) => doc.body.insert(field.to_string(), value.clone()),
            None => doc.body.shift_remove(field),
        };
    }
    Ok(())
}

/// How new password hashes are made (`[chttpd_auth] iterations` and `pbkdf2_prf`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hashing {
    pub iterations: u32,
    pub prf: Prf,
}

/// The PBKDF2 pseudo-random function of new hashes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Prf {
    #[default]
    Sha256,
    Sha512,
}

impl Prf {
    /// `sha256` or `sha512`, as the setting and the stored field name it.
    pub fn parse(text: &str) -> Option<Prf> {
        match text.trim() {
            "sha256" => Some(Prf::Sha256),
            "sha512" => Some(Prf::Sha512),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Prf::Sha256 => "sha256",
            Prf::Sha512 => "sha512",
        }
    }
}

/// Whether a stored user document's hash is not what `hashing` makes now, so that a login
/// re-hashes its password (`[chttpd_auth] upgrade_hash_on_auth`, CouchDB's
/// `couch_password_hasher:needs_upgrade`).
pub(crate) fn needs_upgrade(body: &Value, hashing: Hashing) -> bool {
    let field = |name: &str| body.get(name).and_then(Value::as_str).unwrap_or_default();
    let iterations = body.get("iterations").and_then(Value::as_u64);
    field("password_scheme") != "pbkdf2"
        || iterations != Some(u64::from(hashing.iterations))
        || field("pbkdf2_prf") != hashing.prf.name()
}

/// The fields a new password replaces (CouchDB's `remove_password_fields`).
const PASSWORD_FIELDS: [&str; 10] = [
    "password",
    "password_sha",
    "password_scheme",
    "pbkdf2_prf",
    "iterations",
    "salt",
    "derived_key",
    "preserve_salt",
    crate::scram::FIELD,
    crate::scram::FIELD_SHA1,
];

/// Replaces the password fields of `doc` with a salt (new, or the stored one with
/// `preserve_salt: true`) and PBKDF2 derived key, and SCRAM-SHA-256 and
/// SCRAM-SHA-1 credentials of their own ([`crate::scram`]; SHA-1's is derived with the
/// user's `name`, so a document without one gets none).
fn hash_into(doc: &mut ParsedDoc, password: &str, hashing: Hashing) {
    let preserve = doc.body.get("preserve_salt") == Some(&Value::Bool(true));
    let kept = doc.body.get("salt").and_then(Value::as_str).map(str::to_string);
    for field in PASSWORD_FIELDS {
        doc.body.shift_remove(field);
    }
    let salt = match kept {
        Some(salt) if preserve => salt,
        _ => hex::encode(rand::rng().random::<[u8; 16]>()),
    };
    let Hashing { iterations, prf } = hashing;
    let key = match prf {
        Prf::Sha256 => derive_sha256(password, &salt, iterations),
        Prf::Sha512 => derive_sha512(password, &salt, iterations),
    };
    for (field, value) in [
        ("password_scheme", json!("pbkdf2")),
        ("pbkdf2_prf", json!(prf.name())),
        ("iterations", json!(iterations)),
        ("salt", json!(salt)),
        ("derived_key", json!(key)),
        (crate::scram::FIELD, crate::scram::ScramKeys::new(password).to_json()),
    ] {
        doc.body.insert(field.to_string(), value);
    }
    if let Some(name) = doc.body.get("name").and_then(Value::as_str) {
        let keys = crate::scram::Mechanism::Sha1.new_keys(name, password);
        doc.body.insert(crate::scram::FIELD_SHA1.to_string(), keys.to_json());
    }
}

pub(crate) fn derive_sha256(password: &str, salt: &str, iterations: u32) -> String {
    let mut out = [0u8; 32];
    pbkdf2::pbkdf2_hmac::<Sha256>(password.as_bytes(), salt.as_bytes(), iterations, &mut out);
    hex::encode(out)
}

fn derive_sha512(password: &str, salt: &str, iterations: u32) -> String {
    let mut out = [0u8; 64];
    pbkdf2::pbkdf2_hmac::<Sha512>(password.as_bytes(), salt.as_bytes(), iterations, &mut out);
    hex::encode(out)
}

fn derive_sha1(password: &str, salt: &str, iterations: u32) -> String {
    let mut out = [0u8; 20];
    pbkdf2::pbkdf2_hmac::<sha1::Sha1>(password.as_bytes(), salt.as_bytes(), iterations, &mut out);
    hex::encode(out)
}

pub(crate) fn password_matches(body: &Value, password: &str) -> bool {
    let field = |name: &str| body.get(name).and_then(Value::as_str).unwrap_or_default();
    let iterations = body.get("iterations").and_then(Value::as_u64).unwrap_or(10) as u32;
    if field("password_scheme") != "pbkdf2" || field("derived_key").is_empty() {
        return false;
    }
    let derived = match field("pbkdf2_prf") {
        "sha256" => derive_sha256(password, field("salt"), iterations),
        "sha512" => derive_sha512(password, field("salt"), iterations),
        "" | "sha" | "sha1" => derive_sha1(password, field("salt"), iterations),
        _ => return false,
    };
    constant_time_eq(derived.as_bytes(), field("derived_key").as_bytes())
}

/// The `roles` of a user document.
pub fn roles_of(body: &Value) -> Vec<String> {
    body.get("roles")
        .and_then(Value::as_array)
        .map(|roles| roles.iter().filter_map(|r| r.as_str().map(String::from)).collect())
        .unwrap_or_default()
}

/// The design document every authentication database holds, as in CouchDB (clients wait for
/// it to know the database is ready for logins).
pub const AUTH_DDOC: &str = "_design/_auth";

/// Its validation function: the users database's rules are the engine's own
/// ([`crate::user_doc`]), checked on every write path, so the function adds none.
const AUTH_VALIDATE: &str = "function(newDoc, oldDoc, userCtx, secObj) {\n  // The users database's rules (type, name, roles, password) are checked by the server.\n}";

/// Writes [`AUTH_DDOC`] into the authentication database `db` as `ctx` (a server admin),
/// unless it is there, as CouchDB's auth cache does for the database it reads users from.
/// A failure is logged, not raised: logins do not depend on the document.
pub(crate) fn ensure_auth_ddoc(db: &Database, ctx: &UserCtx) {
    match db.get_stored(AUTH_DDOC, None) {
        Err(Error::NotFound(_)) => {}
        _ => return,
    }
    let body =
        json!({"_id": AUTH_DDOC, "language": "javascript", "validate_doc_update": AUTH_VALIDATE});
    let written = bunko_doc::body::from_value(body, &db.config.get().limits)
        .map_err(Error::from)
        .and_then(|doc| db.put(ctx, doc, WriteOptions::default()));
    if let Err(err) = written {
        tracing::warn!("cannot write {AUTH_DDOC} into {}: {err}", db.name());
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bunko_doc::body::from_value;
    use bunko_storage::Memory;

    use super::*;
    use crate::scram::{FIELD, FIELD_SHA1};
    use crate::{Config, Engine};

    fn body(db: &Database, id: &str) -> Result<(String, Map<String, Value>)> {
        let doc = db.get(&UserCtx::system(), id, None)?;
        let body = serde_json::from_slice(&doc.body).map_err(|e| Error::Corrupt(e.to_string()))?;
        Ok((doc.rev.to_string(), body))
    }

    /// The SCRAM credentials are derived by the server when a password is set; a user
    /// writing their own document without one cannot replace them, and a PBKDF2 hash they
    /// set themselves drops them.
    #[test]
    fn scram_credentials_come_from_a_password_only() -> Result<()> {
        let engine = Engine::open(Arc::new(Memory::new()), Config::default())?;
        let admin = UserCtx::admin("root");
        let users = engine.create_db(&admin, USERS_DB, false)?;
        let id = "org.couchdb.user:bob";
        let new = json!({"_id": id, "name": "bob", "type": "user", "roles": [], "password": "pw"});
        users.put(&admin, from_value(new, &Default::default())?, WriteOptions::default())?;
        let (rev, mut stored) = body(&users, id)?;
        let original = (stored[FIELD].clone(), stored[FIELD_SHA1].clone());
        assert!(original.0.is_object() && original.1.is_object(), "{stored:?}");
        assert!(!stored.contains_key("password"));

        let bob = UserCtx { name: Some("bob".into()), roles: vec![] };
        let forged =
            json!({"salt": "AAAA", "iterations": 1, "stored_key": "AAAA", "server_key": "AAAA"});
        stored.insert(FIELD_SHA1.into(), forged.clone());
        stored.insert(FIELD.into(), forged.clone());
        stored.insert("_id".into(), json!(id));
        stored.insert("_rev".into(), json!(rev));
        let planted = from_value(Value::Object(stored.clone()), &Default::default())?;
        users.put(&bob, planted, WriteOptions::default())?;
        let (rev, mut kept) = body(&users, id)?;
        assert_eq!((kept[FIELD].clone(), kept[FIELD_SHA1].clone()), original);

        kept.insert("derived_key".into(), json!("00"));
        kept.insert(FIELD_SHA1.into(), forged);
        kept.insert("_id".into(), json!(id));
        kept.insert("_rev".into(), json!(rev));
        users.put(
            &bob,
            from_value(Value::Object(kept), &Default::default())?,
            Default::default(),
        )?;
        let (_, rehashed) = body(&users, id)?;
        assert!(!rehashed.contains_key(FIELD) && !rehashed.contains_key(FIELD_SHA1));
        Ok(())
    }
}
