//! One replication run, the protocol's steps in order (docs.couchdb.org "Replication
//! Protocol", CouchDB's `couch_replicator_scheduler_job`):
//!
//! 1. read both databases' info (creating the target when `create_target`);
//! 2. read the checkpoint `_local/<base id>` on both sides and find the last sequence both
//!    agree on (same `session_id`, else the newest common session in their `history`);
//! 3. read `_changes` (`style=all_docs`) after it in batches; for each batch ask the target
//!    `_revs_diff`, fetch the missing revisions with their ancestry and attachments
//!    (`_bulk_get`), write them with `_bulk_docs` `new_edits: false` (a document with an
//!    attachment the source stores gzipped goes alone, as `multipart/related`: `encoded.rs`);
//! 4. checkpoint every `checkpoint_interval` and at the end, on both sides.
//!
//! A continuous job then waits on a `longpoll` feed and goes on for ever (until cancelled).

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use parking_lot::Mutex;
use serde_json::{Map, Value, json};

use crate::client::Db;
use crate::endpoint::Local;
use crate::error::{Error, Result};
use crate::spec::{REP_ID_VERSION, Spec};

/// Documents fetched and written per `_bulk_get` / `_bulk_docs` request.
const FETCH_BATCH: usize = 100;
/// How long one `longpoll` request of a continuous job waits for a change.
const LONGPOLL: Duration = Duration::from_secs(30);

/// The counters CouchDB keeps in each checkpoint's history entry.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    pub missing_checked: u64,
    pub missing_found: u64,
    pub docs_read: u64,
    pub docs_written: u64,
    pub doc_write_failures: u64,
    pub bulk_get_docs: u64,
    pub bulk_get_attempts: u64,
}

impl Stats {
    /// The counters of a checkpoint history entry (`couch_replicator_stats:new`).
    fn resumed(entry: &Value) -> Stats {
        let count = |name: &str| entry.get(name).and_then(Value::as_u64).unwrap_or(0);
        Stats {
            missing_checked: count("missing_checked"),
            missing_found: count("missing_found"),
            docs_read: count("docs_read"),
            docs_written: count("docs_written"),
            doc_write_failures: count("doc_write_failures"),
            ..Stats::default()
        }
    }
}

/// Where a running job is, for `_active_tasks` and `_scheduler`.
#[derive(Debug, Clone, Default)]
pub struct Progress {
    pub stats: Stats,
    pub source_seq: Value,
    pub through_seq: Value,
    pub checkpointed_source_seq: Value,
    pub changes_pending: Option<u64>,
    /// Unix seconds.
    pub started_on: u64,
    pub updated_on: u64,
}

pub fn unix_now() -> u64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl Progress {
    /// CouchDB's `rep_stats`: what a completed `_replicator` document gets as
    /// `_replication_stats`.
    pub fn rep_stats(&self) -> Map<String, Value> {
        let stats = json!({
            "revisions_checked": self.stats.missing_checked,
            "missing_revisions_found": self.stats.missing_found,
            "docs_read": self.stats.docs_read,
            "docs_written": self.stats.docs_written,
            "changes_pending": self.changes_pending,
            "doc_write_failures": self.stats.doc_write_failures,
            "bulk_get_docs": self.stats.bulk_get_docs,
            "bulk_get_attempts": self.stats.bulk_get_attempts,
            "checkpointed_source_seq": self.checkpointed_source_seq,
        });
        stats.as_object().cloned().unwrap_or_default()
    }

    /// The `info` object of `_scheduler` rows: the stats with `source_seq` and
    /// `through_seq`.
    pub fn info(&self) -> Value {
        let mut info = self.rep_stats();
        info.insert("source_seq".into(), self.source_seq.clone());
        info.insert("through_seq".into(), self.through_seq.clone());
        Value::Object(info)
    }
}

/// An ISO 8601 time in UTC (`2026-11-24T19:11:57Z`), as CouchDB's replicator writes them.
pub fn iso8601(unix: u64) -> String {
    let time = time::OffsetDateTime::from_unix_timestamp(i64::try_from(unix).unwrap_or(0));
    let rfc3339 = time::format_description::well_known::Rfc3339;
    time.ok().and_then(|t| t.format(&rfc3339).ok()).unwrap_or_default()
}

/// A replication being run.
pub struct Job {
    pub spec: Spec,
    pub base_id: String,
    pub src: Db,
    pub tgt: Db,
    pub progress: Arc<Mutex<Progress>>,
}

/// The checkpoint documents and the history carried between checkpoints.
struct Logs {
    src_rev: Option<String>,
    tgt_rev: Option<String>,
    history: Vec<Value>,
    session_id: String,
    start_time: String,
    start_seq: Value,
    /// The answer of a one-shot run: the last checkpoint written, or the one found.
    result: Map<String, Value>,
    committed: Value,
}

impl Job {
    pub fn new(spec: Spec, server_uuid: &str, local: Option<Local>) -> Result<Job> {
        let base_id = spec.base_id(server_uuid);
        let src = Db::new(spec.source.clone(), spec.owner.clone(), local.clone())?;
        let tgt = Db::new(spec.target.clone(), spec.owner.clone(), local)?;
        let now = unix_now();
        let progress = Progress { started_on: now, updated_on: now, ..Default::default() };
        Ok(Job { spec, base_id, src, tgt, progress: Arc::new(Mutex::new(progress)) })
    }

    /// Runs to the end (one-shot) or for ever (continuous); returns the one-shot answer's
    /// fields after `ok`.
    pub async fn run(&self) -> Result<Map<String, Value>> {
        let src_info = self.src.info().await?.ok_or_else(|| not_found(&self.src))?;
        if self.tgt.info().await?.is_none() {
            if !self.spec.create_target {
                return Err(not_found(&self.tgt));
            }
            self.tgt.create(&self.spec.create_target_params).await?;
        }
        self.progress.lock().source_seq = src_info.get("update_seq").cloned().unwrap_or_default();
        let mut logs = self.read_logs().await?;
        let filter = self.spec.changes_filter();
        let mut since = logs.start_seq.clone();
        let mut last_checkpoint = Instant::now();
        let mut caught_up = false;
        // CouchDB's checkpoint follows the changes its workers processed: a one-shot run
        // that got none (every `doc_ids` missing, a filter that passes nothing) records no
        // checkpoint and answers `no_changes`.
        let mut any_rows = false;
        loop {
            let wait = (self.spec.continuous && caught_up).then_some(LONGPOLL);
            let batch = self.src.changes(&since, self.spec.batch_size, &filter, wait).await?;
            let full = batch.rows.len() >= self.spec.batch_size;
            if !batch.rows.is_empty() {
                any_rows = true;
                self.replicate(&batch.rows).await?;
            }
            since = batch.last_seq;
            self.note_through(&since, batch.pending);
            caught_up = !full;
            if caught_up && !self.spec.continuous {
                break;
            }
            if last_checkpoint.elapsed() >= self.spec.checkpoint_interval {
                self.checkpoint(&mut logs, &since).await?;
                last_checkpoint = Instant::now();
            }
        }
        if any_rows || self.spec.continuous {
            self.checkpoint(&mut logs, &since).await?;
        }
        Ok(logs.result)
    }

    fn note_through(&self, seq: &Value, pending: Option<u64>) {
        let mut p = self.progress.lock();
        p.through_seq = seq.clone();
        p.changes_pending = pending;
        p.updated_on = unix_now();
    }

    /// Copies the missing revisions of one batch of changes.
    async fn replicate(&self, rows: &[(String, Vec<String>)]) -> Result<()> {
        let mut request = Map::new();
        let mut checked = 0;
        for (id, revs) in rows {
            checked += revs.len() as u64;
            let entry = request.entry(id.clone()).or_insert_with(|| json!([]));
            if let Value::Array(list) = entry {
                list.extend(revs.iter().map(|r| json!(r)));
            }
        }
        let diff = self.tgt.revs_diff(&request).await?;
        let wanted: Vec<(String, Vec<String>)> = diff
            .into_iter()
            .filter_map(|(id, entry)| {
                let missing = entry.get("missing")?.as_array()?;
                let revs: Vec<String> =
                    missing.iter().filter_map(|r| r.as_str().map(str::to_string)).collect();
                (!revs.is_empty()).then_some((id, revs))
            })
            .collect();
        let found: u64 = wanted.iter().map(|(_, r)| r.len() as u64).sum();
        self.bump(|s| {
            s.missing_checked += checked;
            s.missing_found += found;
        });
        for chunk in wanted.chunks(FETCH_BATCH) {
            let docs = self.src.fetch(chunk).await?;
            let read = docs.len() as u64;
            self.bump(|s| {
                s.bulk_get_attempts += 1;
                s.bulk_get_docs += read;
                s.docs_read += read;
            });
            let (gzipped, plain): (Vec<Value>, Vec<Value>) =
                docs.into_iter().partition(crate::encoded::has_gzip_attachment);
            let mut failed = if plain.is_empty() { 0 } else { self.tgt.bulk_docs(&plain).await? };
            for doc in gzipped {
                failed += u64::from(self.tgt.put_encoded(&self.src, doc).await?);
            }
            self.bump(|s| {
                s.docs_written += read.saturating_sub(failed);
                s.doc_write_failures += failed;
            });
        }
        Ok(())
    }

    fn bump(&self, f: impl FnOnce(&mut Stats)) {
        let mut p = self.progress.lock();
        f(&mut p.stats);
        p.updated_on = unix_now();
    }

    /// Reads both checkpoints and finds where to start (`compare_replication_logs`).
    async fn read_logs(&self) -> Result<Logs> {
        let src_log = self.src.get_local(&self.base_id).await?;
        let tgt_log = self.tgt.get_local(&self.base_id).await?;
        let session = |log: &Option<Value>| log.as_ref().and_then(|l| l.get("session_id")).cloned();
        let history = |log: &Option<Value>| {
            log.as_ref().and_then(|l| l.get("history")?.as_array().cloned()).unwrap_or_default()
        };
        let (start, history_kept) = if session(&src_log) == session(&tgt_log) {
            let seq = src_log.as_ref().and_then(|l| l.get("source_last_seq")).cloned();
            (seq.unwrap_or(json!(0)), history(&src_log))
        } else {
            compare_history(&history(&src_log), &history(&tgt_log))
        };
        let start = if start == json!(0) || start == json!("0") {
            self.spec.since_seq.clone().unwrap_or(json!(0))
        } else {
            start
        };
        let rev = |log: &Option<Value>| {
            log.as_ref().and_then(|l| l.get("_rev")?.as_str().map(str::to_string))
        };
        let mut result = Map::new();
        result.insert("no_changes".into(), json!(true));
        if let Some(Value::Object(found)) = &src_log {
            result.extend(found.clone().into_iter().filter(|(k, _)| !k.starts_with('_')));
        }
        {
            let mut p = self.progress.lock();
            p.checkpointed_source_seq = start.clone();
            p.through_seq = start.clone();
            // The counters go on from the checkpoint resumed, as CouchDB's
            // `init_state` takes them from its history (they are per replication).
            if let Some(entry) = history_kept.first() {
                p.stats = Stats::resumed(entry);
            }
        }
        Ok(Logs {
            src_rev: rev(&src_log),
            tgt_rev: rev(&tgt_log),
            history: history_kept,
            session_id: random_hex(),
            start_time: httpdate::fmt_http_date(SystemTime::now()),
            committed: start.clone(),
            start_seq: start,
            result,
        })
    }

    /// Records `seq` in both checkpoint documents, unless it already is.
    async fn checkpoint(&self, logs: &mut Logs, seq: &Value) -> Result<()> {
        if *seq == logs.committed {
            return Ok(());
        }
        let stats = self.progress.lock().stats.clone();
        let end_time = httpdate::fmt_http_date(SystemTime::now());
        let entry = json!({
            "session_id": logs.session_id,
            "start_time": logs.start_time,
            "end_time": end_time,
            "start_last_seq": logs.start_seq,
            "end_last_seq": seq,
            "recorded_seq": seq,
            "missing_checked": stats.missing_checked,
            "missing_found": stats.missing_found,
            "docs_read": stats.docs_read,
            "docs_written": stats.docs_written,
            "doc_write_failures": stats.doc_write_failures,
            "bulk_get_docs": stats.bulk_get_docs,
            "bulk_get_attempts": stats.bulk_get_attempts,
        });
        let mut history = vec![entry];
        history.extend(logs.history.iter().take(49).cloned());
        let mut body = Map::new();
        body.insert("session_id".into(), json!(logs.session_id));
        body.insert("source_last_seq".into(), seq.clone());
        body.insert("replication_id_version".into(), json!(REP_ID_VERSION));
        if self.spec.doc_ids.is_some() {
            body.insert("start_time".into(), json!(logs.start_time));
            body.insert("end_time".into(), json!(end_time));
            body.insert("docs_read".into(), json!(stats.docs_read));
            body.insert("docs_written".into(), json!(stats.docs_written));
            body.insert("doc_write_failures".into(), json!(stats.doc_write_failures));
        }
        body.insert("history".into(), Value::Array(history.clone()));
        // The source may be read-only for this user: its checkpoint is then skipped, and the
        // next run finds the common session in the target's history or starts over.
        match self.src.put_local(&self.base_id, &with_rev(&body, &logs.src_rev)).await {
            Ok(rev) => logs.src_rev = rev,
            Err(Error::Http { status: 401 | 403, .. }) => {}
            Err(err) => return Err(err),
        }
        logs.tgt_rev = self.tgt.put_local(&self.base_id, &with_rev(&body, &logs.tgt_rev)).await?;
        logs.history = history;
        logs.committed = seq.clone();
        logs.result = body;
        self.progress.lock().checkpointed_source_seq = seq.clone();
        Ok(())
    }
}

fn with_rev(body: &Map<String, Value>, rev: &Option<String>) -> Value {
    let mut doc = body.clone();
    if let Some(rev) = rev {
        doc.insert("_rev".into(), json!(rev));
    }
    Value::Object(doc)
}

/// The newest session both histories hold (`compare_rep_history`): its `recorded_seq` and
/// the older entries.
fn compare_history(src: &[Value], tgt: &[Value]) -> (Value, Vec<Value>) {
    let id = |e: &Value| e.get("session_id").cloned();
    let has = |list: &[Value], sid: &Option<Value>| list.iter().any(|e| id(e) == *sid);
    let recorded = |e: &Value| e.get("recorded_seq").cloned().unwrap_or(json!(0));
    let (mut s, mut t) = (src, tgt);
    while let (Some((s0, s_rest)), Some((t0, t_rest))) = (s.split_first(), t.split_first()) {
        if has(t, &id(s0)) {
            return (recorded(s0), s_rest.to_vec());
        }
        if has(s_rest, &id(t0)) {
            return (recorded(t0), t_rest.to_vec());
        }
        (s, t) = (s_rest, t_rest);
    }
    (json!(0), Vec::new())
}

fn not_found(db: &Db) -> Error {
    Error::Http {
        status: 404,
        body: json!({"error": "db_not_found", "reason": format!("could not open {}", db.ep.shown())}),
        url: db.ep.shown(),
    }
}

/// 32 random hex digits (a session id, as `couch_uuids:random`).
pub fn random_hex() -> String {
    hex::encode(rand::random::<[u8; 16]>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_common_session_in_the_histories_gives_its_recorded_seq() {
        let e = |sid: &str, seq: u64| json!({"session_id": sid, "recorded_seq": seq});
        let src = vec![e("c", 30), e("b", 20), e("a", 10)];
        let tgt = vec![e("x", 99), e("b", 20), e("a", 10)];
        assert_eq!(compare_history(&src, &tgt), (json!(20), vec![e("a", 10)]));
        assert_eq!(compare_history(&src, &[e("z", 1)]).0, json!(0));
        assert_eq!(compare_history(&[], &tgt).0, json!(0));
    }
}
