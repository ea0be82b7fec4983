//! The state of a `_replicator` document's job written back into the document, as
//! CouchDB 3's `couch_replicator_docs` does for the states that end a job: `completed`
//! (with `_replication_stats`) and `failed` (with `_replication_state_reason`), each with
//! `_replication_state_time` (ISO 8601) when the state changes. The write is an ordinary
//! edit through the engine's write gate, as a server admin with the `_replicator` role
//! (whose writes keep the document's `owner`). The scheduler ignores these fields when it
//! compares a document with the one its job started from, and does not start a document
//! already `completed` or `failed` again (CouchDB's doc processor), so the write-back
//! restarts nothing.

use bunko_engine::replicator_doc::{REPLICATOR_DB, REPLICATOR_ROLE};
use bunko_engine::security::UserCtx;
use bunko_engine::{Engine, Error as EngineError, WriteOptions};
use serde_json::{Map, Value, json};

use crate::job::{iso8601, unix_now};

/// The fields the replicator writes, which say nothing about what to replicate.
pub const STATE_FIELDS: &[&str] = &[
    "_replication_state",
    "_replication_state_time",
    "_replication_state_reason",
    "_replication_id",
    "_replication_stats",
];

/// How a job ended.
#[derive(Debug, Clone)]
pub enum Ended {
    Completed(Map<String, Value>),
    Failed(String),
}

/// `body` without the replicator's state fields.
pub fn without_state(body: &Map<String, Value>) -> Map<String, Value> {
    let mut body = body.clone();
    body.retain(|key, _| !STATE_FIELDS.contains(&key.as_str()));
    body
}

/// Whether a document says its job already ended (`completed` or `failed`).
pub fn has_ended(body: &Map<String, Value>) -> bool {
    matches!(body.get("_replication_state").and_then(Value::as_str), Some("completed" | "failed"))
}

/// Writes `ended` into `_replicator/{doc_id}` (retrying on a conflicting edit; a deleted
/// document is left alone).
pub fn record(engine: &Engine, doc_id: &str, ended: &Ended) {
    let ctx = UserCtx { name: None, roles: vec!["_admin".into(), REPLICATOR_ROLE.into()] };
    for _ in 0..5 {
        let Some(db) = engine.get_db(REPLICATOR_DB) else { return };
        let Ok(doc) = db.get(&ctx, doc_id, None) else { return };
        let Ok(mut body) = serde_json::from_slice::<Map<String, Value>>(&doc.body) else { return };
        if doc.deleted || !update(&mut body, ended) {
            return;
        }
        body.insert("_id".into(), json!(doc_id));
        body.insert("_rev".into(), json!(doc.rev.to_string()));
        let parsed = match bunko_doc::body::from_value(Value::Object(body), &Default::default()) {
            Ok(parsed) => parsed,
            Err(err) => return tracing::warn!(%err, doc_id, "replication state not recorded"),
        };
        match db.put(&ctx, parsed, WriteOptions::default()) {
            Err(EngineError::Conflict) => continue,
            Err(err) => return tracing::warn!(%err, doc_id, "replication state not recorded"),
            Ok(_) => return,
        }
    }
}

/// Sets the fields of `ended` on `body`; whether anything changed.
fn update(body: &mut Map<String, Value>, ended: &Ended) -> bool {
    let before = body.clone();
    let (state, stats, reason) = match ended {
        Ended::Completed(stats) => ("completed", Some(Value::Object(stats.clone())), None),
        Ended::Failed(reason) => ("failed", None, Some(json!(reason))),
    };
    if body.get("_replication_state").and_then(Value::as_str) != Some(state) {
        body.insert("_replication_state".into(), json!(state));
        body.insert("_replication_state_time".into(), json!(iso8601(unix_now())));
    }
    let mut set = |key: &str, value: Option<Value>| match value {
        Some(value) => body.insert(key.into(), value),
        None => body.remove(key),
    };
    set("_replication_stats", stats);
    set("_replication_state_reason", reason);
    *body != before
}
