//! Bunko's replicator: CouchDB's replication protocol as a client of two endpoints.
//!
//! How a replication moves through the crate:
//! 1. a request (`POST /_replicate` body, or a `_replicator` document) is parsed into a
//!    [`spec::Spec`], whose endpoints are [`endpoint::Endpoint`]s: URLs, or names of this
//!    server's databases reached through its own URL with the owner's credentials;
//! 2. its replication id is computed as CouchDB does ([`spec::Spec::base_id`]), naming the
//!    `_local` checkpoint documents on both sides;
//! 3. a [`job::Job`] runs the protocol ([`client::Db`] holds the requests) and keeps its
//!    [`job::Progress`] for `_active_tasks` and `_scheduler`;
//! 4. the [`Replicator`] keeps the running jobs: one-shot ones for the request's lifetime,
//!    continuous ones and those of `_replicator` documents ([`scheduler`]) as tasks retried
//!    with backoff until cancelled or the document changes; a document's job that ends is
//!    written back into it ([`state`]).
//!
//! The replicator holds no privilege: every write is a request to the target, which passes
//! that server's write gate as whoever the credentials name.

pub mod client;
mod encoded;
pub mod endpoint;
pub mod error;
pub mod job;
pub mod scheduler;
pub mod spec;
pub mod state;

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bunko_engine::Engine;
use bunko_engine::security::UserCtx;
use parking_lot::Mutex;
use serde_json::{Map, Value};
use tokio::task::JoinHandle;

pub use crate::endpoint::Local;
pub use crate::error::{Error, Result};
use crate::job::{Job, unix_now};
use crate::spec::Spec;

/// The state a job is in, as `_scheduler` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    Running,
    Crashing(String),
    Completed,
    Failed(String),
}

impl State {
    pub fn name(&self) -> &'static str {
        match self {
            State::Running => "running",
            State::Crashing(_) => "crashing",
            State::Completed => "completed",
            State::Failed(_) => "failed",
        }
    }
}

/// A job the replicator knows.
pub struct Entry {
    pub rep_id: String,
    pub job: Arc<Job>,
    /// The `_replicator` document that started it.
    pub doc_id: Option<String>,
    pub user: Option<String>,
    pub state: Mutex<State>,
    pub error_count: Mutex<u64>,
    /// (unix seconds, event) newest first: `added`, `started`, `crashed`, `stopped`.
    pub history: Mutex<Vec<(u64, String)>>,
    pub added: u64,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl Entry {
    fn event(&self, what: &str) {
        let mut history = self.history.lock();
        history.insert(0, (unix_now(), what.to_string()));
        history.truncate(20);
    }
}

/// What `POST /_replicate` answers.
pub enum Outcome {
    /// A one-shot run finished: the fields after `"ok": true`.
    Done(Map<String, Value>),
    /// A continuous job started (or was running already): its id.
    Continuous(String),
    Cancelled(String),
}

/// The running replications of this server.
pub struct Replicator {
    engine: Arc<Engine>,
    server_uuid: String,
    local: OnceLock<Local>,
    /// rep id → job (one-shot, continuous and `_replicator` jobs).
    jobs: Mutex<BTreeMap<String, Arc<Entry>>>,
    /// `_replicator` document id → its state ([`scheduler`]).
    pub(crate) docs: Mutex<BTreeMap<String, scheduler::DocState>>,
}

impl Replicator {
    pub fn new(engine: Arc<Engine>, server_uuid: String) -> Arc<Replicator> {
        Arc::new(Replicator {
            engine,
            server_uuid,
            local: OnceLock::new(),
            jobs: Mutex::default(),
            docs: Mutex::default(),
        })
    }

    /// Tells the replicator how to reach this server (once it listens).
    pub fn set_local(&self, local: Local) {
        let _ = self.local.set(local);
    }

    /// Every known job.
    pub fn jobs(&self) -> Vec<Arc<Entry>> {
        self.jobs.lock().values().cloned().collect()
    }

    /// `POST /_replicate` as `ctx`.
    pub async fn replicate(&self, body: &Map<String, Value>, ctx: &UserCtx) -> Result<Outcome> {
        let cancel = matches!(body.get("cancel"), Some(Value::Bool(true)));
        // CouchDB names a job by `_local_id`, `replication_id` or `id`
        // (`couch_replicator_parse:convert_options`); a cancel that names one needs no
        // source or target (`parse_rep_doc_without_id`).
        let named = ["_local_id", "replication_id", "id"]
            .iter()
            .find_map(|key| body.get(*key).and_then(Value::as_str));
        if let (true, Some(rep_id)) = (cancel, named) {
            return self.cancel(rep_id, ctx).map(|()| Outcome::Cancelled(rep_id.to_string()));
        }
        let given = body.get("replication_id").and_then(Value::as_str);
        let mut spec = Spec::parse(body, ctx.name.clone(), self.local.get())?;
        if given.is_none() {
            spec.resolve_filter(self.local.get()).await?;
        }
        let rep_id = given.map_or_else(|| spec.rep_id(&self.server_uuid), str::to_string);
        if cancel {
            return self.cancel(&rep_id, ctx).map(|()| Outcome::Cancelled(rep_id));
        }
        if spec.continuous {
            self.start(spec, rep_id.clone(), None)?;
            return Ok(Outcome::Continuous(rep_id));
        }
        let job = Arc::new(Job::new(spec, &self.server_uuid, self.local.get().cloned())?);
        let entry = self.register(rep_id.clone(), job.clone(), None);
        let result = job.run().await;
        self.jobs.lock().remove(&rep_id);
        drop(entry);
        result.map(Outcome::Done)
    }

    fn register(&self, rep_id: String, job: Arc<Job>, doc_id: Option<String>) -> Arc<Entry> {
        let now = unix_now();
        let entry = Arc::new(Entry {
            rep_id: rep_id.clone(),
            user: job.spec.owner.clone(),
            job,
            doc_id,
            state: Mutex::new(State::Running),
            error_count: Mutex::new(0),
            history: Mutex::new(vec![(now, "started".into()), (now, "added".into())]),
            added: now,
            task: Mutex::new(None),
        });
        self.jobs.lock().insert(rep_id, entry.clone());
        entry
    }

    /// Starts a job as a task that retries with backoff (continuous, or a document's).
    fn start(&self, spec: Spec, rep_id: String, doc_id: Option<String>) -> Result<Arc<Entry>> {
        if let Some(running) = self.jobs.lock().get(&rep_id) {
            return Ok(running.clone());
        }
        let job = Arc::new(Job::new(spec, &self.server_uuid, self.local.get().cloned())?);
        let entry = self.register(rep_id, job, doc_id);
        let task = tokio::spawn(run_retrying(entry.clone(), self.engine.clone()));
        *entry.task.lock() = Some(task);
        Ok(entry)
    }

    /// Stops a job: its owner or a server admin only.
    fn cancel(&self, rep_id: &str, ctx: &UserCtx) -> Result<()> {
        let mut jobs = self.jobs.lock();
        let entry = jobs.get(rep_id).ok_or_else(|| Error::NotFound(rep_id.to_string()))?;
        let admin = ctx.roles.iter().any(|r| r == "_admin");
        if !admin && entry.user != ctx.name {
            return Err(Error::Http {
                status: 401,
                body: serde_json::json!({"error": "unauthorized",
                    "reason": "Replication cancellation requires the owner or an admin"}),
                url: String::new(),
            });
        }
        if let Some(entry) = jobs.remove(rep_id) {
            stop(&entry);
        }
        Ok(())
    }

    /// Stops and forgets a job by id (a `_replicator` document changed or went away).
    pub(crate) fn stop_job(&self, rep_id: &str) {
        if let Some(entry) = self.jobs.lock().remove(rep_id) {
            stop(&entry);
        }
    }
}

fn stop(entry: &Entry) {
    if let Some(task) = entry.task.lock().take() {
        task.abort();
    }
    entry.event("stopped");
}

/// Runs a job until it completes (one-shot) or is aborted, retrying after errors with
/// exponential backoff (CouchDB's scheduler penalizes crashing jobs the same way). A request
/// that can never succeed (`400`) fails the job for good.
async fn run_retrying(entry: Arc<Entry>, engine: Arc<Engine>) {
    let mut wait = Duration::from_secs(1);
    loop {
        *entry.state.lock() = State::Running;
        match entry.job.run().await {
            Ok(_) => {
                *entry.state.lock() = State::Completed;
                entry.event("stopped");
                let stats = entry.job.progress.lock().rep_stats();
                return record_end(&engine, &entry, state::Ended::Completed(stats)).await;
            }
            Err(err @ (Error::Param(_) | Error::Invalid(_))) => {
                *entry.state.lock() = State::Failed(err.to_string());
                return record_end(&engine, &entry, state::Ended::Failed(err.to_string())).await;
            }
            Err(err) => {
                tracing::warn!(rep_id = %entry.rep_id, %err, "replication crashed; retrying");
                *entry.state.lock() = State::Crashing(error_text(&err));
                *entry.error_count.lock() += 1;
                entry.event("crashed");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(300));
                entry.event("started");
            }
        }
    }
}

/// Writes how a `_replicator` document's job ended into the document.
async fn record_end(engine: &Arc<Engine>, entry: &Entry, ended: state::Ended) {
    let Some(doc_id) = entry.doc_id.clone() else { return };
    let engine = engine.clone();
    let _ = tokio::task::spawn_blocking(move || state::record(&engine, &doc_id, &ended)).await;
}

/// An error as `_scheduler` shows it (`db_not_found: could not open …`).
pub fn error_text(err: &Error) -> String {
    match err {
        Error::Http { body, status, .. } => {
            let error = body.get("error").and_then(Value::as_str).unwrap_or("error");
            let reason = body.get("reason").and_then(Value::as_str).unwrap_or_default();
            if reason.is_empty() {
                format!("{error}: {status}")
            } else {
                format!("{error}: {reason}")
            }
        }
        other => other.to_string(),
    }
}
