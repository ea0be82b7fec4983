//! The `_users` database: user documents `org.couchdb.user:{name}`, password hashing on
//! write, and verifying a name and password.
//!
//! On write a user document's `password` is replaced by `password_scheme: "pbkdf2"`,
//! `pbkdf2_prf: "sha256"`, `iterations`, `salt` and `derived_key`, as CouchDB 3.4 stores
//! it; no plain password is ever stored. Verification also accepts CouchDB's older
//! PBKDF2-SHA1 documents. Logging in with them is [`crate::login`]'s.

use bunko_doc::body::ParsedDoc;
use rand::Rng;
use serde_json::{Value, json};
use sha2::Sha256;

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
pub(crate) fn prepare(db: &Database, doc: &mut ParsedDoc, iterations: u32) -> Result<()> {
    if !db.is_users_db() || doc.deleted {
        return Ok(());
    }
    let password = match doc.body.get("password") {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::String(password)) => password.clone(),
        Some(_) => return Err(Error::Forbidden("doc.password must be a string".to_string())),
    };
    crate::password_rules::check(&password, db.config.get().password_regexp.as_deref())?;
    hash_into(doc, &password, iterations);
    Ok(())
}

/// The fields a new password replaces (CouchDB's `remove_password_fields`).
const PASSWORD_FIELDS: [&str; 9] = [
    "password",
    "password_sha",
    "password_scheme",
    "pbkdf2_prf",
    "iterations",
    "salt",
    "derived_key",
    "preserve_salt",
    crate::scram::FIELD,
];

/// Replaces the password fields of `doc` with a new salt and PBKDF2-SHA256 derived key, and
/// a SCRAM-SHA-256 credential of its own ([`crate::scram`]).
fn hash_into(doc: &mut ParsedDoc, password: &str, iterations: u32) {
    for field in PASSWORD_FIELDS {
        doc.body.shift_remove(field);
    }
    let salt = hex::encode(rand::rng().random::<[u8; 16]>());
    let key = derive_sha256(password, &salt, iterations);
    for (field, value) in [
        ("password_scheme", json!("pbkdf2")),
        ("pbkdf2_prf", json!("sha256")),
        ("iterations", json!(iterations)),
        ("salt", json!(salt)),
        ("derived_key", json!(key)),
        (crate::scram::FIELD, crate::scram::ScramKeys::new(password).to_json()),
    ] {
        doc.body.insert(field.to_string(), value);
    }
}

pub(crate) fn derive_sha256(password: &str, salt: &str, iterations: u32) -> String {
    let mut out = [0u8; 32];
    pbkdf2::pbkdf2_hmac::<Sha256>(password.as_bytes(), salt.as_bytes(), iterations, &mut out);
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
