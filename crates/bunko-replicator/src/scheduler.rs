//! The `_replicator` database: each document is a replication (`source`, `target`,
//! `continuous`, filters…), started when it is written, restarted when it changes (other
//! than in the state fields the replicator writes back, [`crate::state`]) and stopped when
//! it is deleted; one already `completed` or `failed` is not started again. The writer's
//! name is its `owner` (the engine stamps it, `bunko_engine::replicator_doc`).
//! `_scheduler/docs` shows every document's state ([`Replicator::doc_states`]).
//!
//! The watcher follows the database's `_changes` (through the engine, woken by its change
//! notification). Endpoints must be URLs carrying their own credentials: a document names
//! no user the replicator could act as (CouchDB 3 refuses local names the same way).

use std::sync::Arc;
use std::time::Duration;

use bunko_engine::changes::ChangesQuery;
use bunko_engine::security::UserCtx;
use serde_json::{Map, Value};

use crate::job::unix_now;
use crate::spec::Spec;
use crate::state::{Ended, has_ended, record, without_state};
use crate::{Entry, Replicator};

pub use bunko_engine::replicator_doc::REPLICATOR_DB;

/// A changed document: seq, id, body (`None` when deleted).
type Changed = (u64, String, Option<Map<String, Value>>);

/// One `_replicator` document as the scheduler sees it.
#[derive(Clone)]
pub struct DocState {
    pub doc_id: String,
    /// The document body the job was started from.
    pub body: Map<String, Value>,
    pub rep_id: Option<String>,
    pub source: String,
    pub target: String,
    /// Set when the document could not be parsed (state `failed`).
    pub error: Option<String>,
    pub entry: Option<Arc<Entry>>,
    pub start_time: u64,
    pub last_updated: u64,
}

impl Replicator {
    /// Follows the `_replicator` database for ever (spawn once at start-up).
    pub async fn watch_replicator_db(self: Arc<Self>) {
        let mut since = 0;
        loop {
            let Some(db) = self.engine.get_db(REPLICATOR_DB) else {
                tokio::time::sleep(Duration::from_secs(2)).await;
                continue;
            };
            let mut notified = db.subscribe();
            let me = self.clone();
            let read = tokio::task::spawn_blocking(move || me.read_changes(&db, since)).await;
            match read {
                Ok(Ok(rows)) => {
                    for (seq, id, body) in rows {
                        since = since.max(seq);
                        self.on_doc(id, body).await;
                    }
                }
                Ok(Err(err)) => tracing::warn!(%err, "cannot read _replicator changes"),
                Err(err) => tracing::warn!(%err, "_replicator reader failed"),
            }
            let _ = tokio::time::timeout(Duration::from_secs(5), notified.changed()).await;
        }
    }

    /// The changed documents after `since`: (seq, id, body or `None` when deleted).
    fn read_changes(
        &self,
        db: &bunko_engine::Database,
        since: u64,
    ) -> bunko_engine::Result<Vec<Changed>> {
        let query = ChangesQuery { since, include_docs: true, ..Default::default() };
        let mut out = Vec::new();
        // The replicator reads its documents whole, credentials included.
        for row in db.changes(&UserCtx::system(), query)? {
            let row = row?;
            let body = match (&row.doc, row.deleted) {
                (Some(doc), false) => serde_json::from_slice(&doc.body).ok(),
                _ => None,
            };
            out.push((row.seq, row.id, body));
        }
        Ok(out)
    }

    async fn on_doc(&self, id: String, body: Option<Map<String, Value>>) {
        if id.starts_with("_design/") {
            return;
        }
        let old = self.docs.lock().get(&id).cloned();
        if let Some(old) = &old {
            if body.as_ref().map(without_state) == Some(without_state(&old.body)) {
                if let (Some(body), Some(doc)) = (body, self.docs.lock().get_mut(&id)) {
                    doc.body = body;
                }
                return;
            }
            if let Some(rep_id) = &old.rep_id {
                self.stop_job(rep_id);
            }
        }
        let Some(body) = body else {
            self.docs.lock().remove(&id);
            return;
        };
        let now = unix_now();
        let shown = |key: &str| match body.get(key) {
            Some(Value::String(s)) => strip_credentials(s),
            Some(Value::Object(o)) => {
                o.get("url").and_then(Value::as_str).map(strip_credentials).unwrap_or_default()
            }
            _ => String::new(),
        };
        let mut state = DocState {
            doc_id: id.clone(),
            source: shown("source"),
            target: shown("target"),
            body: body.clone(),
            rep_id: None,
            error: None,
            entry: None,
            start_time: old.as_ref().map_or(now, |o| o.start_time),
            last_updated: now,
        };
        let owner = body.get("owner").and_then(Value::as_str).map(str::to_string);
        let parsed = match Spec::parse(&body, owner, None) {
            Ok(mut spec) => spec.resolve_filter(None).await.map(|()| spec),
            Err(err) => Err(err),
        };
        match parsed {
            Ok(spec) => {
                let rep_id = spec.rep_id(&self.server_uuid);
                state.rep_id = Some(rep_id.clone());
                if !has_ended(&body) {
                    match self.start(spec, rep_id, Some(id.clone())) {
                        Ok(entry) => state.entry = Some(entry),
                        Err(err) => state.error = Some(crate::error_text(&err)),
                    }
                }
            }
            Err(err) => {
                let reason = crate::error_text(&err);
                state.error = Some(reason.clone());
                let (engine, doc_id) = (self.engine.clone(), id.clone());
                let failed = Ended::Failed(reason);
                tokio::task::spawn_blocking(move || record(&engine, &doc_id, &failed));
            }
        }
        self.docs.lock().insert(id, state);
    }

    /// The documents of `_replicator` and their states, by id.
    pub fn doc_states(&self) -> Vec<DocState> {
        self.docs.lock().values().cloned().collect()
    }
}

/// A URL without its user and password, as `_scheduler` shows endpoints.
pub fn strip_credentials(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut parsed) => {
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
            let mut text = parsed.to_string();
            if !text.ends_with('/') {
                text.push('/');
            }
            text
        }
        Err(_) => url.to_string(),
    }
}
