//! `$listLocalSessions` as the first stage of an `aggregate: 1`: the server sessions
//! Bunko keeps (those that ran a transaction or a retryable write; see [`crate::sessions`]),
//! each `{_id: {id, uid}, lastUse, user: {name}}` as MongoDB lists them (`uid` is the SHA-256
//! of `user@admin`). `{}` lists the caller's sessions, `{allUsers: true}` everybody's (server
//! admins only); `users` is `NotImplemented`. The stage becomes `$documents` and the rest of
//! the pipeline runs over it.

use bson::spec::BinarySubtype;
use bson::{Binary, Bson, DateTime, doc};
use sha2::{Digest, Sha256};

use super::{Ctx, admin::user};
use crate::error::MongoError;

/// The pipeline with a leading `$listLocalSessions` replaced by `$documents`.
pub(super) fn rewrite(
    ctx: &Ctx,
    stages: &[Bson],
    collectionless: bool,
) -> Result<Option<Vec<Bson>>, MongoError> {
    let first = stages.first().and_then(Bson::as_document);
    let Some(spec) = first.and_then(|s| s.get("$listLocalSessions")) else { return Ok(None) };
    let Bson::Document(spec) = spec else {
        return Err(MongoError::type_mismatch("$listLocalSessions must take a nested object"));
    };
    if !collectionless {
        return Err(MongoError::invalid_namespace(
            "$listLocalSessions must be run with {aggregate: 1}",
        ));
    }
    let me = user(ctx);
    let mut all = false;
    for (key, value) in spec {
        match key.as_str() {
            "allUsers" => all = value.as_bool() == Some(true),
            "users" => return Err(MongoError::not_implemented("$listLocalSessions users")),
            _ => return Err(MongoError::unknown_field(&format!("$listLocalSessions.{key}"))),
        }
    }
    if all && !me.is_server_admin() {
        return Err(MongoError::unauthorized("not authorized to list the sessions of all users"));
    }
    let mine = me.name.clone().unwrap_or_default();
    let now = (std::time::Instant::now(), DateTime::now());
    let mut sessions = Vec::new();
    for (id, owner, last) in ctx.server.sessions.list() {
        if !all && owner != mine {
            continue;
        }
        let ago = now.0.saturating_duration_since(last).as_millis() as i64;
        let name = format!("{owner}@admin");
        let uid = Sha256::digest(name.as_bytes()).to_vec();
        sessions.push(Bson::Document(doc! {
            "_id": {
                "id": Binary { subtype: BinarySubtype::Uuid, bytes: id },
                "uid": Binary { subtype: BinarySubtype::Generic, bytes: uid },
            },
            "lastUse": DateTime::from_millis(now.1.timestamp_millis() - ago),
            "user": {"name": name},
        }));
    }
    let mut rewritten = vec![Bson::Document(doc! {"$documents": sessions})];
    rewritten.extend(stages[1..].iter().cloned());
    Ok(Some(rewritten))
}
