//! The replies of retryable writes, kept in the store so that a write retried after a
//! restart of the server is answered, not done again (an insert would then fail with a
//! duplicate key, an `$inc` would apply twice). MongoDB keeps them in `config.transactions`
//! for the same reason (a failover).
//!
//! One record per server session (`lsid` and user) under the engine's server-wide
//! `Meta("mongo_retry/<lsid hex>/<user>")`: `{key, txnNumber, reply, ms}`, the session's last
//! retryable write. It is written after the write is applied (a retry answered from it
//! waits for the sync first, `Engine::sync_applied`) and made durable with the next commit
//! (a crash right after a write may lose it; a clean restart does not). A session's record
//! goes with `endSessions`; records of sessions unused for longer than the session timeout
//! are removed when the server starts.

use std::time::{SystemTime, UNIX_EPOCH};

use bson::{Document, doc};
use bunko_engine::Engine;

use crate::sessions::{Key, TIMEOUT};

const PREFIX: &str = "mongo_retry/";

fn name(key: &Key) -> String {
    let hex: String = key.0.iter().map(|b| format!("{b:02x}")).collect();
    format!("{PREFIX}{hex}/{}", key.1)
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// The stored reply of session `key`'s last retryable write: its `txnNumber` and reply.
pub(crate) fn load(engine: &Engine, key: &Key) -> Option<(i64, Document)> {
    let name = name(key);
    let values = engine.metas(&name).ok()?;
    values.iter().filter_map(|v| Document::from_reader(v.as_slice()).ok()).find_map(|record| {
        if record.get_str("key").ok()? != name {
            return None;
        }
        Some((record.get_i64("txnNumber").ok()?, record.get_document("reply").ok()?.clone()))
    })
}

/// Stores `reply` as session `key`'s answer to its retryable write `n`.
pub(crate) fn store(engine: &Engine, key: &Key, n: i64, reply: &Document) {
    let name = name(key);
    let record = doc! {"key": &name, "txnNumber": n, "reply": reply, "ms": now_ms()};
    if let Ok(bytes) = record.to_vec()
        && let Err(err) = engine.set_meta(&name, Some(bytes))
    {
        tracing::warn!(%err, "could not keep a retryable write's reply");
    }
}

/// Forgets the replies of the sessions `keys` (ended).
pub(crate) fn forget(engine: &Engine, keys: &[Key]) {
    for key in keys {
        let _ = engine.set_meta(&name(key), None);
    }
}

/// Removes the records of sessions unused for longer than the session timeout.
pub(crate) fn forget_expired(engine: &Engine) {
    let oldest = now_ms() - TIMEOUT.as_millis() as i64;
    let Ok(values) = engine.metas(PREFIX) else { return };
    for value in values {
        let Ok(record) = Document::from_reader(value.as_slice()) else { continue };
        if record.get_i64("ms").is_ok_and(|ms| ms < oldest)
            && let Ok(key) = record.get_str("key")
        {
            let _ = engine.set_meta(key, None);
        }
    }
}
