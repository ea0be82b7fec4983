//! Multi-document, multi-database transactions (shared/DESIGN.md §10).
//!
//! A [`Transaction`] reads from one storage snapshot plus its own buffered writes. Commit
//! takes the writer locks of every database it touched, in database id order (so two
//! transactions can never wait on each other in a cycle), then validates and applies:
//!
//! 1. **Validate** (serializable, first committer wins): every document the transaction
//!    read must still be as it saw it (the same `DocInfo` seq, or still missing), every
//!    revision it [`expect`](Transaction::expect)ed must still be the winner, and a
//!    database it scanned must have had no commit at all since the snapshot (a scan is a
//!    predicate read: any insert could be a phantom). Otherwise the commit fails whole with
//!    the retryable [`Error::TxnConflict`]. A transaction that wrote nothing commits
//!    without validating: it read one consistent snapshot, which is serializable at that
//!    snapshot's point.
//! 2. **Fire** the triggers of each database that has them on the transaction's writes
//!    ([`crate::triggers`]), adding their writes.
//! 3. **Stage** each database's writes exactly as a single write would be
//!    (`Database::stage`: revision checks, the write gate, `validate_doc_update`, counters,
//!    index entries) into **one** batch; any document failing fails the transaction.
//! 4. **Apply** that batch as one storage commit ([`crate::database::apply_parts`]) and
//!    release the locks; then wait for the group-committed sync: [`Transaction::commit`]
//!    blocks, while [`Transaction::apply`] returns an [`Applied`] whose
//!    [`Applied::durable`] future an async caller awaits without holding a thread, as a
//!    single write's [`crate::Written`] does.
//!
//! Writes inside a transaction follow CouchDB's rules: an update names the `_rev` it edits,
//! and each written document gets a new revision and a `_changes` entry, so replication
//! sees ordinary edits. A transaction past its lifetime (`Config::txn_lifetime`, 60 s like
//! MongoDB's `transactionLifetimeLimitSeconds`) or its size limit is aborted; dropping a
//! transaction without committing discards it.
//!
//! ```
//! use std::sync::Arc;
//! use bunko_doc::body::from_value;
//! use bunko_engine::security::UserCtx;
//! use bunko_engine::{Config, Engine, WriteOptions};
//! use bunko_storage::Memory;
//! use serde_json::json;
//!
//! let me = UserCtx::admin("app");
//! let engine = Engine::open(Arc::new(Memory::new()), Config::default())?;
//! let publishers = engine.create_db(&me, "publishers", false)?;
//! engine.create_db(&me, "books", false)?;
//! let doc = from_value(json!({"_id": "mspress", "countOfBooks": 0}), &Default::default())?;
//! publishers.put(&me, doc, WriteOptions::default())?;
//!
//! // A new book and its publisher's count change together, or not at all.
//! let mut txn = engine.begin(&me);
//! let publisher = txn.get("publishers", "mspress")?.expect("publisher");
//! let mut body = publisher.body.clone();
//! body["countOfBooks"] = json!(body["countOfBooks"].as_u64().unwrap_or(0) + 1);
//! body.insert("_rev".into(), json!(publisher.rev.to_string()));
//! body.insert("_id".into(), json!("mspress"));
//! txn.put("publishers", from_value(serde_json::Value::Object(body), &Default::default())?)?;
//! let book = json!({"_id": "b1", "title": "Code Complete", "pub_id": "mspress"});
//! txn.put("books", from_value(book, &Default::default())?)?;
//! let written = txn.commit()?;
//! assert_eq!(written.len(), 2);
//! let count = publishers.get(&me, "mspress", None)?;
//! assert_eq!(count.body, br#"{"countOfBooks":1}"#);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use bunko_doc::RevId;
use bunko_doc::body::ParsedDoc;
use bunko_storage::{Batch, Read, Snapshot, Store, Ticket};
use serde_json::{Map, Value};

use crate::catalog::Engine;
use crate::database::{Database, Part, apply_parts};
use crate::read::doc_record_in;
use crate::scope::Scope;
use crate::security::UserCtx;
use crate::write::{AfterCommit, Checks, WriteOptions};
use crate::{Error, Result, keys};

/// A document as a transaction reads it.
#[derive(Debug, Clone)]
pub struct TxnDoc {
    /// The stored winning revision (for a document this transaction wrote: the revision
    /// its write edits, if any).
    pub rev: RevId,
    /// The body without `_id` and `_rev`.
    pub body: Map<String, Value>,
}

/// One document a committed transaction wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnWrite {
    pub db: String,
    pub id: String,
    pub rev: RevId,
}

/// A transaction applied (visible to readers) but not yet durable, from
/// [`Transaction::apply`]. Its writes may be reported only once [`Applied::durable`] or
/// [`Applied::sync`] returned them.
#[must_use = "a transaction is acknowledged only once durable"]
pub struct Applied {
    written: Vec<TxnWrite>,
    pending: Option<Pending>,
}

/// What an applied transaction waits for, and what follows its sync in each database.
struct Pending {
    store: Arc<dyn Store>,
    ticket: Ticket,
    after: Vec<(Arc<Database>, u64, AfterCommit)>,
}

impl Applied {
    /// Waits, without holding a thread, until the commit is durable; returns the writes.
    pub async fn durable(self) -> Result<Vec<TxnWrite>> {
        if let Some(pending) = &self.pending {
            pending.store.durable(pending.ticket).await?;
        }
        Ok(self.finish())
    }

    /// As [`Applied::durable`], blocking the calling thread.
    pub fn sync(self) -> Result<Vec<TxnWrite>> {
        if let Some(pending) = &self.pending {
            pending.store.sync(pending.ticket)?;
        }
        Ok(self.finish())
    }

    /// What follows a sync: wake `_changes` feeds, start background work.
    fn finish(self) -> Vec<TxnWrite> {
        for (db, seq, work) in self.pending.into_iter().flat_map(|p| p.after) {
            db.notify_durable(seq);
            db.after_commit(work);
        }
        self.written
    }
}

/// What a transaction saw of one document.
#[derive(Debug, Clone)]
pub(crate) enum Seen {
    /// Read from the snapshot: the document's seq then (`None`: it did not exist).
    Seq(Option<u64>),
    /// Declared by the caller: the winning revision it depends on (`None`: absent).
    Rev(Option<RevId>),
}

/// Everything the transaction did in one database.
pub(crate) struct Touched {
    pub db: Arc<Database>,
    /// The database's update seq in the snapshot.
    pub begin_seq: u64,
    pub seen: HashMap<String, Seen>,
    /// Whether it scanned a range (validated as "no commit since the snapshot").
    pub scanned: bool,
    pub writes: Vec<ParsedDoc>,
}

impl Touched {
    /// Nothing read or written yet in `db`.
    pub(crate) fn new(db: Arc<Database>, begin_seq: u64) -> Touched {
        Touched { db, begin_seq, seen: HashMap::new(), scanned: false, writes: Vec::new() }
    }

    /// The winning revision of `id`: the last buffered write of it, else what `read`
    /// holds (recorded as read).
    pub(crate) fn get(&mut self, read: &dyn Read, id: &str) -> Result<Option<TxnDoc>> {
        if let Some(doc) = self.writes.iter().rev().find(|d| d.id.as_deref() == Some(id)) {
            return Ok((!doc.deleted).then(|| TxnDoc {
                rev: doc.rev.clone().unwrap_or(RevId { pos: 0, hash: String::new() }),
                body: doc.body.clone(),
            }));
        }
        let db_id = self.db.id();
        let record = doc_record_in(read, db_id, id)?;
        let seq = record.as_ref().map(|r| r.info.seq);
        self.seen.entry(id.to_string()).or_insert(Seen::Seq(seq));
        let Some(record) = record else { return Ok(None) };
        let (rev, deleted) = record.info.winner()?;
        if deleted {
            return Ok(None);
        }
        let body = crate::read::body_of(read, db_id, id, rev, Some(&record))?
            .ok_or_else(crate::error::missing)?;
        let body = serde_json::from_slice(&body).map_err(|e| Error::Corrupt(e.to_string()))?;
        Ok(Some(TxnDoc { rev: rev.clone(), body }))
    }

    /// The ids of the live documents in `[start, end)` that `read` holds (not the
    /// buffered writes); marks the database scanned.
    pub(crate) fn ids(&mut self, read: &dyn Read, start: &str, end: &str) -> Result<Vec<String>> {
        self.scanned = true;
        let range = keys::doc_id_range(self.db.id(), start, end);
        let mut out = Vec::new();
        for (key, value) in read.scan_heads(&range, false, usize::MAX)? {
            let info: crate::records::DocInfo = crate::records::decode(&value)?;
            if !info.winner()?.1 {
                out.push(keys::decode_doc(&key)?);
            }
        }
        Ok(out)
    }
}

/// The engine a transaction belongs to: borrowed for one call, or shared for a transaction
/// that outlives it (a MongoDB session's, held between commands).
enum Handle<'e> {
    Borrowed(&'e Engine),
    Shared(Arc<Engine>),
}

impl std::ops::Deref for Handle<'_> {
    type Target = Engine;

    fn deref(&self) -> &Engine {
        match self {
            Handle::Borrowed(engine) => engine,
            Handle::Shared(engine) => engine,
        }
    }
}

/// An open transaction; see the module documentation.
pub struct Transaction<'e> {
    engine: Handle<'e>,
    ctx: UserCtx,
    snapshot: Snapshot,
    began: Instant,
    /// By database id: the order commit takes the writer locks in.
    dbs: BTreeMap<u64, Touched>,
    /// Bytes of buffered document bodies.
    size: usize,
    /// The most bytes it may buffer (`Config::txn_max_bytes` unless
    /// [`Transaction::unbounded`]).
    max_bytes: usize,
    /// The databases it creates ([`Transaction::create_db`]).
    created: Vec<Arc<Database>>,
}

impl Engine {
    /// Begins a transaction as `ctx` on a snapshot of the whole store.
    pub fn begin(&self, ctx: &UserCtx) -> Transaction<'_> {
        Transaction::new(Handle::Borrowed(self), ctx, self.store().snapshot())
    }

    /// Begins a transaction that holds its own reference to the engine, so it can be kept
    /// between requests (a MongoDB session's transaction).
    pub fn begin_shared(self: &Arc<Self>, ctx: &UserCtx) -> Transaction<'static> {
        let snapshot = self.store().snapshot();
        Transaction::new(Handle::Shared(self.clone()), ctx, snapshot)
    }

    /// Begins a shared transaction on `snapshot`, a snapshot of this engine's store taken
    /// earlier (a MongoDB snapshot read at a past cluster time). Only reads make sense in
    /// it: a commit of writes validates against everything committed since `snapshot`.
    pub fn begin_at(self: &Arc<Self>, ctx: &UserCtx, snapshot: Snapshot) -> Transaction<'static> {
        Transaction::new(Handle::Shared(self.clone()), ctx, snapshot)
    }
}

impl<'e> Transaction<'e> {
    fn new(engine: Handle<'e>, ctx: &UserCtx, snapshot: Snapshot) -> Transaction<'e> {
        let max_bytes = engine.config().txn_max_bytes;
        Transaction {
            engine,
            ctx: ctx.clone(),
            snapshot,
            began: Instant::now(),
            dbs: BTreeMap::new(),
            size: 0,
            max_bytes,
            created: Vec::new(),
        }
    }
}

impl Transaction<'_> {
    /// Lifts the size limit, for a transaction that one request runs whole over documents it
    /// holds anyway (MongoDB's `$out` into a new collection). The limit is for transactions
    /// kept open between requests, whose buffers nothing else bounds.
    pub fn unbounded(mut self) -> Self {
        self.max_bytes = usize::MAX;
        self
    }

    /// The winning revision of `id` in database `db`, as of the snapshot or as this
    /// transaction wrote it; `None` if missing or deleted.
    pub fn get(&mut self, db: &str, id: &str) -> Result<Option<TxnDoc>> {
        self.check_alive()?;
        let snapshot = self.snapshot.clone();
        self.touch(db)?.get(snapshot.as_ref(), id)
    }

    /// The ids of the live documents in `[start, end)` of database `db`, as of the
    /// snapshot. The commit then fails if anything was committed to `db` meanwhile.
    pub fn ids(&mut self, db: &str, start: &str, end: &str) -> Result<Vec<String>> {
        self.check_alive()?;
        let snapshot = self.snapshot.clone();
        self.touch(db)?.ids(snapshot.as_ref(), start, end)
    }

    /// Declares that the transaction depends on `id` in `db` having winning revision `rev`
    /// (`None`: not existing) at commit, without reading it.
    pub fn expect(&mut self, db: &str, id: &str, rev: Option<RevId>) -> Result<()> {
        self.check_alive()?;
        self.touch(db)?.seen.insert(id.to_string(), Seen::Rev(rev));
        Ok(())
    }

    /// The ids this transaction has written in database `db` (buffered, not yet committed),
    /// in the order first written.
    pub fn written(&self, db: &str) -> Vec<String> {
        let Some(touched) = self.dbs.values().find(|t| t.db.name() == db) else {
            return Vec::new();
        };
        let mut ids: Vec<String> = Vec::new();
        for id in touched.writes.iter().filter_map(|d| d.id.as_ref()) {
            if !ids.contains(id) {
                ids.push(id.clone());
            }
        }
        ids
    }

    /// Creates database `name` with this transaction, under [`Engine::create_db`]'s rules:
    /// the transaction reads and writes it at once, everyone else sees it (with the
    /// transaction's documents) from the commit on, and an abort leaves nothing. A
    /// database of that name created meanwhile by someone else fails the commit
    /// ([`Error::TxnConflict`]). Changes of its `_security` before the commit are kept
    /// with it.
    pub fn create_db(&mut self, name: &str) -> Result<Arc<Database>> {
        self.check_alive()?;
        if self.created_db(name).is_some() || self.engine.get_db(name).is_some() {
            return Err(Error::FileExists);
        }
        let db = self.engine.prepare_db(&self.ctx, name)?;
        self.created.push(db.clone());
        Ok(db)
    }

    /// The database `name` if this transaction creates it.
    pub fn created_db(&self, name: &str) -> Option<Arc<Database>> {
        self.created.iter().find(|db| db.name() == name).cloned()
    }

    /// Buffers a write (an update names its `_rev`, as any CouchDB write does; a document
    /// the transaction already wrote is named by the revision [`Transaction::get`] gives).
    pub fn put(&mut self, db: &str, mut doc: ParsedDoc) -> Result<()> {
        self.check_alive()?;
        // Reads within the transaction see the user's fields.
        doc.materialize()?;
        if doc.id.is_none() {
            return Err(Error::BadRequest("a transaction's documents need an _id".into()));
        }
        self.size += doc.body_json().len();
        let limit = self.max_bytes;
        if self.size > limit {
            return Err(Error::TxnAborted(format!(
                "transaction exceeded its size limit of {limit} bytes"
            )));
        }
        let writes = &mut self.touch(db)?.writes;
        let Some(i) = writes.iter().rposition(|d| d.id == doc.id) else {
            writes.push(doc);
            return Ok(());
        };
        // A document this transaction already wrote: the new write replaces the buffered
        // one (named by the revision `get` gave for it) and edits what that one edited.
        let base = writes[i].rev.clone();
        let pseudo = base.is_none() && doc.rev.as_ref().is_some_and(|r| r.pos == 0);
        if doc.rev != base && !pseudo {
            writes.push(doc); // a stale revision: the commit reports the conflict
        } else if base.is_none() && doc.deleted {
            writes.remove(i); // created and deleted in the transaction: nothing to write
        } else {
            writes[i] = ParsedDoc { rev: base, ..doc };
        }
        Ok(())
    }

    /// Buffers the deletion of `id` at revision `rev`.
    pub fn delete(&mut self, db: &str, id: &str, rev: RevId) -> Result<()> {
        let doc = ParsedDoc {
            id: Some(id.to_string()),
            rev: Some(rev),
            deleted: true,
            ..Default::default()
        };
        self.put(db, doc)
    }

    /// Validates and commits everything in one storage commit, and returns once it is
    /// durable; see the module docs.
    pub fn commit(self) -> Result<Vec<TxnWrite>> {
        self.apply()?.sync()
    }

    /// [`Transaction::commit`] up to the apply: the writes are visible but not yet
    /// durable; [`Applied::durable`] (or [`Applied::sync`]) says when they are.
    pub fn apply(self) -> Result<Applied> {
        self.check_alive()?;
        if self.created.is_empty() && self.dbs.values().all(|t| t.writes.is_empty()) {
            // It read one snapshot and wrote nothing: serializable at that snapshot's point.
            return Ok(Applied { written: Vec::new(), pending: None });
        }
        let ctx = self.ctx;
        let opts = WriteOptions::default();
        let mut prepared = Vec::with_capacity(self.dbs.len());
        for touched in self.dbs.values() {
            let checks = Checks::load(&touched.db)?;
            let docs = touched.db.prepare_all(&checks, &ctx, touched.writes.clone(), opts);
            prepared.push((touched, checks, docs));
        }
        // The catalog lock (for the databases it creates) comes before the writer locks,
        // as when a database is dropped.
        let mut batch = Batch::new();
        let catalog = match self.created.is_empty() {
            true => None,
            false => Some(self.engine.attach(&self.created, &mut batch)?),
        };
        let mut locked = Vec::with_capacity(prepared.len());
        for (touched, checks, docs) in prepared {
            let writer = touched.db.lock_writer()?;
            validate(touched, writer.seq)?;
            locked.push((touched, checks, docs, writer));
        }
        let (mut parts, mut written, mut after) = (Vec::new(), Vec::new(), Vec::new());
        let mut dbs = Vec::with_capacity(locked.len());
        for (touched, checks, docs, writer) in locked {
            let db = touched.db.as_ref();
            let docs = if docs.iter().all(|(_, d)| d.is_ok()) && db.has_triggers()? {
                let docs = docs.into_iter().filter_map(|(_, d)| d.ok()).collect();
                db.fire_triggers(&ctx, &checks, docs)?
            } else {
                docs
            };
            let staged = db.stage(&writer, &checks, &ctx, docs, opts, &mut batch)?;
            for result in staged.results {
                let rev = result.result.map_err(|error| Error::InTxn {
                    db: db.name(),
                    id: result.id.clone(),
                    error: Box::new(error),
                })?;
                written.push(TxnWrite { db: db.name(), id: result.id, rev });
            }
            after.push((staged.plan, staged.multikey));
            dbs.push((touched.db.clone(), staged.seq));
            parts.push(Part { db, writer, seq: staged.seq, stats: staged.stats, ids: staged.ids });
        }
        let after: Vec<_> = dbs
            .into_iter()
            .zip(after)
            .map(|((db, seq), (plan, multikey))| {
                let work = db.install(plan, multikey);
                (db, seq, work)
            })
            .collect();
        let store = self.engine.store().clone();
        let ticket = apply_parts(&store, parts, batch)?;
        self.engine.attached(&self.created);
        drop(catalog);
        Ok(Applied { written, pending: Some(Pending { store, ticket, after }) })
    }

    /// Lends database `db` of this transaction to a procedure (`procedures.rs`).
    pub(crate) fn take_scope(&mut self, db: &str) -> Result<Scope> {
        self.check_alive()?;
        let id = self.touch(db)?.db.id();
        let touched = self.dbs.remove(&id).ok_or_else(crate::error::missing)?;
        let left = self.max_bytes.saturating_sub(self.size);
        Ok(Scope::new(touched, self.snapshot.clone(), left))
    }

    /// Takes back what [`Transaction::take_scope`] lent, with what the procedure did.
    pub(crate) fn restore_scope(&mut self, scope: Scope) {
        self.size = self.max_bytes.saturating_sub(scope.bytes_left());
        self.dbs.insert(scope.touched.db.id(), scope.touched);
    }

    /// Whether the transaction is past its lifetime (it can then only fail).
    pub fn expired(&self) -> bool {
        self.began.elapsed() > self.engine.config().txn_lifetime
    }

    fn check_alive(&self) -> Result<()> {
        let lifetime = self.engine.config().txn_lifetime;
        if self.expired() {
            return Err(Error::TxnAborted(format!(
                "transaction exceeded its lifetime limit of {} s",
                lifetime.as_secs()
            )));
        }
        Ok(())
    }

    /// The state kept for database `name`, registering it on first use.
    fn touch(&mut self, name: &str) -> Result<&mut Touched> {
        let db = match self.created_db(name) {
            Some(db) => db,
            None => self.engine.db(name)?,
        };
        if self.dbs.contains_key(&db.id()) {
            return self.dbs.get_mut(&db.id()).ok_or_else(crate::error::missing);
        }
        let begin_seq = match self.snapshot.scan(&keys::seq_range(db.id()), true, 1)?.first() {
            Some((key, _)) => keys::decode_seq(key)?,
            None => 0,
        };
        Ok(self.dbs.entry(db.id()).or_insert_with(|| Touched::new(db, begin_seq)))
    }
}

/// Checks, under the database's writer lock, that nothing the transaction saw changed.
fn validate(touched: &Touched, current_seq: u64) -> Result<()> {
    let db = &touched.db;
    let conflict = |what: String| Err(Error::TxnConflict(format!("{what} in {}", db.name())));
    if touched.scanned && current_seq != touched.begin_seq {
        return conflict("a scanned range was written".to_string());
    }
    for (id, seen) in &touched.seen {
        let info = db.doc_info(id)?;
        let unchanged = match seen {
            Seen::Seq(seq) => info.as_ref().map(|i| i.seq) == *seq,
            Seen::Rev(rev) => {
                let winner = match &info {
                    Some(info) => match info.winner()? {
                        (_, true) => None,
                        (rev, false) => Some(rev.clone()),
                    },
                    None => None,
                };
                winner == *rev
            }
        };
        if !unchanged {
            return conflict(format!("document {id} changed"));
        }
    }
    Ok(())
}
