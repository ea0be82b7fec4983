//! The TTL monitor: every `ttl_monitor_sleep` (MongoDB's `ttlMonitorSleepSecs`, 60 s by
//! default) each collection's TTL indexes delete their expired documents
//! (`Database::expire_ttl`, the engine's normal write path).

use std::sync::Arc;

use bunko_engine::Engine;

use crate::names::Namespace;

/// Runs until the runtime stops.
pub async fn monitor(engine: Arc<Engine>, every: std::time::Duration) {
    let mut ticks = tokio::time::interval(every);
    ticks.tick().await;
    loop {
        ticks.tick().await;
        let engine = engine.clone();
        if let Err(err) = tokio::task::spawn_blocking(move || pass(&engine)).await {
            tracing::warn!(%err, "TTL pass failed");
        }
    }
}

/// One pass over every collection.
fn pass(engine: &Engine) {
    let now = bson::DateTime::now().timestamp_millis();
    for name in engine.db_names() {
        if Namespace::from_engine(&name).is_none() {
            continue;
        }
        let Some(db) = engine.get_db(&name) else { continue };
        match db.expire_ttl(now) {
            Ok(0) => {}
            Ok(n) => tracing::debug!(collection = name, deleted = n, "TTL"),
            Err(err) => tracing::warn!(%err, collection = name, "TTL deletion failed"),
        }
    }
}
