//! Document updates: single `PUT`s, `_bulk_docs`, and replication writes.
//!
//! [`Database::update_docs`] is the one write path. Under the writer lock it reads each
//! document's revision tree, computes the edit ([`edit_new`] for `new_edits=true`,
//! [`edit_replicated`] for `new_edits=false`), and adds to one batch: the `Doc` record, the
//! new body (`Rev`), removal of bodies stemmed away by `revs_limit`, the move of the
//! document's `Seq` entry to the new seq, the change journal's `Event` entry (`events.rs`),
//! and the database (and partition) counters.
//! A database with triggers takes the same path through [`crate::triggers`], which fires
//! them under the writer lock before staging.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use bunko_doc::RevId;
use bunko_doc::body::ParsedDoc;
use bunko_doc::id::{DocKind, kind, partition_of, validate_doc_id};
use bunko_storage::{Batch, Ticket};

use crate::attachments::AttMeta;
use crate::database::{Database, Writer};
use crate::ids::IdChanges;
use crate::index::{DdocChanges, Index, MultikeyMarks, Winner};
use crate::keys::Key;
use crate::records::{self, DocInfo, Stats};
use crate::revtree::RevTree;
use crate::security::{Security, UserCtx};
use crate::validators::Stored;
use crate::{Error, Result, design, user_doc, users};

/// How a write treats revisions.
#[derive(Debug, Clone, Copy)]
pub struct WriteOptions {
    /// `true` (the default): edits must name the current leaf and get a new revision.
    /// `false`: replication; revisions are stored as given, conflicts are kept.
    pub new_edits: bool,
    /// Commit all documents or none (fails whole on any error).
    pub all_or_nothing: bool,
    /// MongoDB's `bypassDocumentValidation`: the collection validator is not checked (the
    /// `validate_doc_update` functions still are). Only for database admins; anyone else
    /// is refused ([`Error::Forbidden`]).
    pub bypass_document_validation: bool,
    /// MongoDB's replacement of a whole document (`replaceOne`, `findAndModify` with a
    /// replacement): the change journal records it, so change streams report `replace`
    /// (the revisions alone cannot tell it from an update that keeps some fields).
    pub replacement: bool,
}

impl Default for WriteOptions {
    fn default() -> Self {
        Self {
            new_edits: true,
            all_or_nothing: false,
            bypass_document_validation: false,
            replacement: false,
        }
    }
}

/// The outcome for one document of a bulk write.
#[derive(Debug)]
pub struct DocResult {
    pub id: String,
    pub result: Result<RevId>,
}

/// The security object a write is checked against, read once per write.
pub(crate) struct Checks {
    security_json: String,
    pub(crate) security: Security,
}

impl Checks {
    pub(crate) fn load(db: &Database) -> Result<Checks> {
        let security_json = db.security();
        let security = Security::parse(&security_json)?;
        Ok(Checks { security_json, security })
    }
}

/// A new set of Mango indexes and the index numbers it drops.
pub(crate) type IndexPlan = (Vec<Arc<Index>>, Vec<u64>);

/// The edits of one database, added to a batch but not applied.
pub(crate) struct Staged {
    pub results: Vec<DocResult>,
    /// The update seq and counters once the batch is applied.
    pub seq: u64,
    pub stats: Stats,
    /// Present when design documents changed.
    pub plan: Option<IndexPlan>,
    /// The documents written, for the order statistics of ids.
    pub ids: IdChanges,
    /// MongoDB indexes the edits make multikey, installed with the commit.
    pub multikey: MultikeyMarks,
}

impl Staged {
    pub(crate) fn failed(&self) -> bool {
        self.results.iter().any(|r| r.result.is_err())
    }
}

/// What remains to do once a commit is durable.
#[derive(Default)]
pub(crate) struct AfterCommit {
    ddocs_changed: bool,
    dropped: Vec<u64>,
}

/// An applied commit waiting for its sync.
pub(crate) struct Unsynced {
    ticket: Ticket,
    seq: u64,
    after: AfterCommit,
}

/// Writes applied (visible to readers) but not yet durable, from [`Database::write_docs`].
/// Their results may be reported only once [`Written::durable`] returned them.
#[must_use = "writes are acknowledged only once durable"]
pub struct Written {
    results: Vec<DocResult>,
    unsynced: Option<(Arc<Database>, Unsynced)>,
}

impl Written {
    /// Waits, without holding a thread, until the writes are durable, and returns the
    /// results; fails as [`Database::update_docs`] does if the sync failed.
    pub async fn durable(self) -> Result<Vec<DocResult>> {
        let (results, durability) = self.split();
        durability.wait().await?;
        Ok(results)
    }

    /// The results, and the sync they wait for. For a caller that builds its answer from
    /// the results on one thread and waits for the sync on another (the MongoDB adapter
    /// runs a command on a blocking thread and awaits its syncs on the runtime): the
    /// answer may be sent only once [`Durability::wait`] returned `Ok`.
    pub fn split(self) -> (Vec<DocResult>, Durability) {
        (self.results, Durability(self.unsynced))
    }
}

/// The sync an applied write waits for, from [`Written::split`]. Nothing it wrote may be
/// acknowledged before [`Durability::wait`] returned `Ok`; dropping it unwaited leaves the
/// write applied but skips what follows its sync (waking `_changes` feeds, background work).
#[must_use = "writes are acknowledged only once durable"]
pub struct Durability(Option<(Arc<Database>, Unsynced)>);

impl Durability {
    /// Waits, without holding a thread, until the write is durable; fails as
    /// [`Database::update_docs`] does if the sync failed.
    pub async fn wait(self) -> Result<()> {
        if let Some((db, unsynced)) = self.0 {
            db.store.durable(unsynced.ticket).await?;
            db.finish(unsynced);
        }
        Ok(())
    }
}

/// A computed edit of one document.
struct Outcome {
    info: DocInfo,
    rev: RevId,
    body: Vec<u8>,
    /// Revisions stemmed away by `revs_limit`; their bodies are removed. (Bodies of other
    /// non-leaf revisions stay until compaction, as in CouchDB.)
    stemmed: Vec<RevId>,
}

/// What staging one batch carries from document to document.
pub(crate) struct Run<'a> {
    ctx: &'a UserCtx,
    checks: &'a Checks,
    indexes: Arc<Vec<Arc<Index>>>,
    revs_limit: usize,
    /// Whether the database is capped ([`crate::capped`]).
    capped: bool,
    /// The update seq and counters so far.
    pub(crate) seq: u64,
    pub(crate) stats: Stats,
    pub(crate) pending: Pending,
    ids: IdChanges,
}

/// Per-batch view of the documents and partitions touched so far.
#[derive(Default)]
pub(crate) struct Pending {
    docs: HashMap<String, Option<DocInfo>>,
    partitions: HashMap<String, Stats>,
    /// Whether each touched partition was full when the batch began.
    full: HashMap<String, bool>,
    /// Winning revision and body of each document written so far (for indexes).
    winners: HashMap<String, Winner>,
    /// Design documents written, with their new winning bodies.
    pub(crate) ddocs: DdocChanges,
    /// Attachment bodies whose chunks this commit writes.
    written: HashSet<[u8; 16]>,
    /// Keys of `unique` MongoDB indexes this commit adds and releases.
    unique: crate::index::mongo::UniqueKeys,
    /// MongoDB indexes this commit makes multikey.
    multikey: MultikeyMarks,
    /// Documents that became live or stopped being live (a capped database's order).
    pub(crate) natural: crate::capped::Lives,
    /// The revision and body each touched document's `Doc` record carries so far
    /// ([`records::DocRecord`]).
    carried: HashMap<String, Carried>,
}

/// The revision and body a `Doc` record carries, if any.
type Carried = Option<(RevId, Vec<u8>)>;

impl Database {
    /// Writes one document as `ctx` and returns its new revision.
    pub fn put(&self, ctx: &UserCtx, doc: ParsedDoc, opts: WriteOptions) -> Result<RevId> {
        let mut results = self.update_docs(ctx, vec![doc], opts)?;
        match results.pop() {
            Some(result) => result.result,
            None => Err(Error::Corrupt("no result for a single write".to_string())),
        }
    }

    /// Writes many documents as `ctx` in one atomic commit, with a result per document.
    /// With `new_edits=false`, documents already present report success without a change.
    /// Each document passes the write gate (`crate::gate`); a refused one gets its error
    /// in its result.
    pub fn update_docs(
        &self,
        ctx: &UserCtx,
        docs: Vec<ParsedDoc>,
        opts: WriteOptions,
    ) -> Result<Vec<DocResult>> {
        let applied = self.apply_docs(ctx, docs, opts)?;
        self.settle(applied)
    }

    /// Waits until applied writes are durable, then does what follows their sync.
    pub(crate) fn settle(
        &self,
        (results, unsynced): (Vec<DocResult>, Option<Unsynced>),
    ) -> Result<Vec<DocResult>> {
        if let Some(unsynced) = unsynced {
            self.store.sync(unsynced.ticket)?;
            self.finish(unsynced);
        }
        Ok(results)
    }

    /// [`Database::update_docs`] up to the apply: the writes are visible but not yet
    /// durable, and the returned [`Written`] tells when they are. An async caller runs
    /// this (CPU work, short locks) off its runtime and then awaits
    /// [`Written::durable`] on it, so no thread is parked while the sync runs.
    pub fn write_docs(
        self: &Arc<Self>,
        ctx: &UserCtx,
        docs: Vec<ParsedDoc>,
        opts: WriteOptions,
    ) -> Result<Written> {
        let (results, unsynced) = self.apply_docs(ctx, docs, opts)?;
        Ok(Written { results, unsynced: unsynced.map(|unsynced| (self.clone(), unsynced)) })
    }

    /// Whether writing `doc` (`bytes` long as sent) with [`Database::write_docs`] is light
    /// enough for an async worker: a small normal document without attachments, in a
    /// database other than `_users` (password hashing) known to have no validation
    /// functions or triggers (JavaScript). Such a write costs tens of microseconds of CPU,
    /// less than the hop to a blocking thread and back (issue 20: `write` with 64 clients
    /// went from ~110 to ~75 ms of server CPU per 1,000 documents without the hop). It may
    /// still wait briefly for the writer lock.
    pub fn is_light_write(&self, doc: &ParsedDoc, bytes: usize) -> bool {
        const LIGHT_BYTES: usize = 16 << 10;
        bytes <= LIGHT_BYTES
            && doc.attachments.is_none()
            && doc.id.as_deref().is_none_or(|id| kind(id) == DocKind::Normal)
            && !self.is_users_db()
            && self.known_without_validators()
            && self.known_without_triggers()
    }

    /// Stages and applies `docs`; returns the results and, if anything was applied, what
    /// waits for the sync. A database with triggers commits whole (synced) here.
    fn apply_docs(
        &self,
        ctx: &UserCtx,
        docs: Vec<ParsedDoc>,
        opts: WriteOptions,
    ) -> Result<(Vec<DocResult>, Option<Unsynced>)> {
        let checks = Checks::load(self)?;
        let prepared = self.prepare_all(&checks, ctx, docs, opts);
        let writer = self.lock_writer()?;
        self.apply_prepared(writer, &checks, ctx, prepared, opts)
    }

    /// [`Database::apply_docs`] from the writer lock on: `prepared` are staged (through
    /// the triggers if the database has any) and applied.
    pub(crate) fn apply_prepared(
        &self,
        writer: parking_lot::MutexGuard<'_, Writer>,
        checks: &Checks,
        ctx: &UserCtx,
        prepared: Vec<(String, Result<ParsedDoc>)>,
        opts: WriteOptions,
    ) -> Result<(Vec<DocResult>, Option<Unsynced>)> {
        if opts.new_edits && self.has_triggers()? {
            // Triggers read the user's fields: printed bodies are parsed for them.
            let prepared = prepared
                .into_iter()
                .map(|(id, doc)| (id, doc.and_then(|mut doc| Ok(doc.materialize().map(|()| doc)?))))
                .collect();
            return Ok((self.write_triggered(writer, checks, ctx, prepared, opts)?, None));
        }
        let mut batch = Batch::new();
        let staged = self.stage(&writer, checks, ctx, prepared, opts, &mut batch)?;
        if (opts.all_or_nothing && staged.failed()) || staged.seq == writer.seq {
            return Ok((staged.results, None));
        }
        let (seq, stats) = (staged.seq, staged.stats);
        let after = self.install(staged.plan, staged.multikey);
        let ticket = self.apply_locked(writer, batch, &staged.ids, seq, stats)?;
        Ok((staged.results, Some(Unsynced { ticket, seq, after })))
    }

    /// What follows a sync: wake `_changes` feeds, start background work.
    fn finish(&self, unsynced: Unsynced) {
        self.notify_durable(unsynced.seq);
        self.after_commit(unsynced.after);
    }

    /// Runs the checks that need no lock (ids, the write gate, design documents, password
    /// hashing) on each document.
    pub(crate) fn prepare_all(
        &self,
        checks: &Checks,
        ctx: &UserCtx,
        docs: Vec<ParsedDoc>,
        opts: WriteOptions,
    ) -> Vec<(String, Result<ParsedDoc>)> {
        docs.into_iter().map(|doc| self.prepare(&checks.security, ctx, doc, opts)).collect()
    }

    /// Computes the edits of `prepared` under the writer lock and adds them, with the
    /// counters and index entries, to `batch`. Nothing is applied.
    pub(crate) fn stage(
        &self,
        writer: &Writer,
        checks: &Checks,
        ctx: &UserCtx,
        prepared: Vec<(String, Result<ParsedDoc>)>,
        opts: WriteOptions,
        batch: &mut Batch,
    ) -> Result<Staged> {
        let db = self.id();
        let bytes_before = batch.bytes();
        let mut run = Run {
            ctx,
            checks,
            indexes: self.indexes.all(),
            revs_limit: self.revs_limit() as usize,
            capped: self.cap_locked()?.is_some(),
            seq: writer.seq,
            stats: writer.stats,
            pending: Pending::default(),
            ids: IdChanges::default(),
        };
        let mut results = Vec::with_capacity(prepared.len());
        for (id, doc) in prepared {
            let result = doc.and_then(|doc| self.stage_doc(&mut run, batch, &id, doc, opts, false));
            results.push(DocResult { id, result });
        }
        if run.capped && !(opts.all_or_nothing && results.iter().any(|r| r.result.is_err())) {
            self.stage_cap(&mut run, batch)?;
        }
        let Run { mut stats, seq, pending, ids, .. } = run;
        for (partition, part_stats) in &pending.partitions {
            batch.put(Key::PartStats(db, partition).encode(), records::encode(part_stats));
        }
        stats.file = stats.file.saturating_add(batch.bytes().saturating_sub(bytes_before));
        batch.put(Key::Stats(db).encode(), records::encode(&stats));
        let plan = (!pending.ddocs.is_empty()).then(|| self.plan_ddocs(batch, &pending.ddocs, seq));
        Ok(Staged { results, seq, stats, plan, ids, multikey: pending.multikey })
    }

    /// Stages one document write of a batch ([`Database::stage`]); `system`: a removal the
    /// engine makes itself (a capped database's oldest documents), which no validation
    /// function sees.
    pub(crate) fn stage_doc(
        &self,
        run: &mut Run<'_>,
        batch: &mut Batch,
        id: &str,
        mut doc: ParsedDoc,
        opts: WriteOptions,
        system: bool,
    ) -> Result<RevId> {
        let db = self.id();
        let old = self.current(&mut run.pending, db, id)?;
        let atts = self.doc_atts(&run.pending, id, &doc, old.as_ref(), opts.new_edits)?;
        if kind(id) == DocKind::Normal && !system {
            // Validation reads the user's fields: a printed body is parsed for it.
            if doc.printed.is_some() && (self.is_users_db() || self.has_validators()?) {
                doc.materialize()?;
            }
            let bypass = opts.bypass_document_validation;
            let edit = (id, &doc, atts.metas.as_slice());
            self.check_update(run.ctx, run.checks, &run.pending, edit, old.as_ref(), bypass)?;
        }
        let stored = crate::attachments::with_atts(doc.body_json(), &atts.metas);
        let outcome = if opts.new_edits {
            Some(edit_new(old.as_ref(), &doc, &atts.hash_input(), stored, run.revs_limit)?)
        } else {
            edit_replicated(old.as_ref(), &doc, stored, run.revs_limit)?
        };
        let Some(mut outcome) = outcome else {
            return Ok(doc.rev.unwrap_or_else(|| RevId { pos: 0, hash: String::new() }));
        };
        outcome.info.size = self.winner_size(db, id, &outcome)?;
        let was_live = old.as_ref().map(|o| o.winner().map(|(_, d)| !d)).transpose()?;
        let now_live = !outcome.info.winner()?.1;
        let normal = run.capped && kind(id) == DocKind::Normal;
        if normal && now_live && !was_live.unwrap_or(false) {
            self.check_cap_size(outcome.info.size)?;
        }
        self.check_mongo_write(&mut run.pending, &run.indexes, id, old.as_ref(), &outcome)?;
        let limit = opts.new_edits;
        self.account(&mut run.pending, id, old.as_ref(), &outcome.info, &mut run.stats, limit)?;
        batch.append(atts.chunks);
        run.pending.written.extend(atts.new);
        run.stats.active += atts.added;
        run.seq += 1;
        outcome.info.seq = run.seq;
        let carried = run.pending.carried.entry(id.to_string()).or_default();
        let carry = self.store.format() >= 3;
        add_to_batch(batch, (db, id, carried, carry), old.as_ref(), &outcome, opts.replacement)?;
        let old_seq = old.as_ref().map(|old| old.seq);
        run.ids.record(id, was_live, now_live, old_seq, run.seq);
        if normal && was_live.unwrap_or(false) != now_live {
            run.pending.natural.lived(id, run.seq, now_live);
        }
        self.track_winner(&mut run.pending, &run.indexes, batch, id, old.as_ref(), &outcome)?;
        run.pending.docs.insert(id.to_string(), Some(outcome.info));
        Ok(outcome.rev)
    }

    /// Makes a staged index plan and the multikey states a commit sets current, under the
    /// writer lock, just before the commit; returns what [`Database::after_commit`] needs.
    pub(crate) fn install(&self, plan: Option<IndexPlan>, multikey: MultikeyMarks) -> AfterCommit {
        for (index, meta) in multikey.into_values() {
            index.set_meta(meta);
        }
        let Some((next, dropped)) = plan else { return AfterCommit::default() };
        self.indexes.replace(next);
        // Still under the writer lock: the next write compiles the new functions.
        self.forget_validators();
        self.forget_triggers();
        self.forget_cap();
        AfterCommit { ddocs_changed: true, dropped }
    }

    /// Background work after a commit: dropped indexes, index builds, views.
    pub(crate) fn after_commit(&self, after: AfterCommit) {
        for num in after.dropped {
            crate::catalog::spawn_index_drop(self.store.clone(), self.id(), num);
        }
        if let Some(me) = self.arc() {
            if after.ddocs_changed {
                me.spawn_builder();
            }
            me.notify_written(after.ddocs_changed);
        }
    }

    /// Records the new winner of a written document: design documents for the index plan,
    /// other documents in every index that covers them.
    fn track_winner(
        &self,
        pending: &mut Pending,
        indexes: &[Arc<Index>],
        batch: &mut Batch,
        id: &str,
        old: Option<&DocInfo>,
        outcome: &Outcome,
    ) -> Result<()> {
        let is_design = kind(id) == DocKind::Design;
        if !is_design && indexes.is_empty() {
            return Ok(());
        }
        let new = self.winner_of(pending, id, &outcome.info, Some(outcome))?;
        if is_design {
            let body = new.as_ref().and_then(|(_, b, _)| serde_json::from_slice(b).ok());
            pending.ddocs.insert(id.to_string(), body);
        } else {
            let old = match old {
                Some(info) => self.winner_of(pending, id, info, None)?,
                None => None,
            };
            self.index_doc(indexes, (batch, &mut pending.multikey), id, &old, &new);
        }
        pending.winners.insert(id.to_string(), new.clone());
        Ok(())
    }

    /// Checks a document write against the MongoDB indexes (`unique`, parallel arrays)
    /// before anything of it is staged.
    fn check_mongo_write(
        &self,
        pending: &mut Pending,
        indexes: &[Arc<Index>],
        id: &str,
        old: Option<&DocInfo>,
        outcome: &Outcome,
    ) -> Result<()> {
        if kind(id) != DocKind::Normal || !indexes.iter().any(|i| i.def.mongo.is_some()) {
            return Ok(());
        }
        let new = self.winner_of(pending, id, &outcome.info, Some(outcome))?;
        let old = match old {
            Some(info) => self.winner_of(pending, id, info, None)?,
            None => None,
        };
        let mut unique = std::mem::take(&mut pending.unique);
        let checked = self.check_mongo_indexes(indexes, &mut unique, id, &old, &new);
        pending.unique = unique;
        checked
    }

    /// Resolves a written document's attachments against the revision it edits
    /// ([`crate::attachments`]).
    fn doc_atts(
        &self,
        pending: &Pending,
        id: &str,
        doc: &ParsedDoc,
        old: Option<&DocInfo>,
        new_edits: bool,
    ) -> Result<crate::attachments::Resolved> {
        let none = || Ok(crate::attachments::Resolved::none());
        if doc.attachments.as_ref().is_none_or(Vec::is_empty) {
            return none();
        }
        if kind(id) == DocKind::Local {
            return Err(Error::BadRequest("_local documents do not accept attachments.".into()));
        }
        let (parent, revpos) = match (&doc.rev, new_edits) {
            (Some(rev), false) => (None, rev.pos),
            (Some(rev), true) => {
                let rev_text = rev.to_string();
                let body = match pending.winners.get(id) {
                    Some(Some((r, body, _))) if *r == rev_text => Some(body.clone()),
                    _ => crate::read::body_in(self.store.as_ref(), self.id(), id, rev)?,
                };
                (body, rev.pos + 1)
            }
            (None, _) => {
                let next = match old.map(DocInfo::winner).transpose()? {
                    Some((rev, true)) => rev.pos + 1,
                    _ => 1,
                };
                (None, next)
            }
        };
        self.resolve_atts(doc, parent.as_deref(), revpos, new_edits, &pending.written)
    }

    /// The winning revision and body of `info` (`None` if deleted), looked up in this
    /// commit's outcome, earlier writes of this batch, or storage.
    fn winner_of(
        &self,
        pending: &Pending,
        id: &str,
        info: &DocInfo,
        outcome: Option<&Outcome>,
    ) -> Result<Winner> {
        let (rev, deleted) = info.winner()?;
        if deleted {
            return Ok(None);
        }
        let conflicts = crate::index::entries::conflicts_of(info);
        if let Some(o) = outcome
            && o.rev == *rev
        {
            return Ok(Some((rev.to_string(), o.body.clone(), conflicts)));
        }
        let rev = rev.to_string();
        if let Some(Some((r, body, _))) = pending.winners.get(id)
            && *r == rev
        {
            return Ok(Some((rev, body.clone(), conflicts)));
        }
        let body = crate::read::body_in(self.store.as_ref(), self.id(), id, info.winner()?.0)?;
        Ok(body.map(|b| (rev, b, conflicts)))
    }

    /// Deletes a document as `ctx` (a new tombstone revision under `rev`): `404 missing`
    /// if the document never existed, `409 conflict` without a `rev`. The write gate
    /// answers first, so a user who may not write learns nothing of the document.
    pub fn delete(&self, ctx: &UserCtx, id: &str, rev: Option<RevId>) -> Result<RevId> {
        self.admit_doc(&self.security_object()?, ctx, id)?;
        if self.doc_info(id)?.is_none() {
            return Err(crate::error::missing());
        }
        let rev = rev.ok_or(Error::Conflict)?;
        let doc = ParsedDoc {
            id: Some(id.to_string()),
            rev: Some(rev),
            deleted: true,
            ..Default::default()
        };
        self.put(ctx, doc, WriteOptions::default())
    }

    /// The rules that need the stored document, under the writer lock: `_users`' rules,
    /// the database's `validate_doc_update` functions and its MongoDB validator (unless a
    /// database admin bypasses it).
    fn check_update(
        &self,
        ctx: &UserCtx,
        checks: &Checks,
        pending: &Pending,
        (id, doc, atts): (&str, &ParsedDoc, &[AttMeta]),
        old: Option<&DocInfo>,
        bypass_document_validation: bool,
    ) -> Result<()> {
        if bypass_document_validation && !checks.security.is_admin(ctx) {
            return Err(Error::Forbidden(
                "not authorized to bypass document validation (database admins only)".into(),
            ));
        }
        let users = self.is_users_db();
        if !users && !self.has_validators()? {
            return Ok(());
        }
        let body = self.current_body(pending, id, old)?;
        if users {
            // The shape rules are `_design/_auth`'s, as in CouchDB: a database just named
            // the authentication database takes user documents of any shape until it has
            // one; the role rules hold regardless.
            let shaped = self.current_rev(crate::users::AUTH_DDOC)?.is_some();
            let new = (&doc.body, doc.deleted);
            user_doc::validate(ctx, &checks.security, id, new, body.as_ref(), shaped)?;
        }
        let stored = old.map(|info| Stored { info, body });
        self.run_validators(
            ctx,
            &checks.security_json,
            (doc, atts),
            stored,
            bypass_document_validation,
        )
    }

    /// The current winning body of a document as an object (`None` if missing or deleted).
    fn current_body(
        &self,
        pending: &Pending,
        id: &str,
        info: Option<&DocInfo>,
    ) -> Result<Option<serde_json::Map<String, serde_json::Value>>> {
        let Some(info) = info else { return Ok(None) };
        let winner = self.winner_of(pending, id, info, None)?;
        Ok(winner.and_then(|(_, body, _)| serde_json::from_slice(&body).ok()))
    }

    /// Assigns an id if needed, asks the write gate whether `ctx` may write it, and
    /// validates the document, all before the writer lock is taken.
    pub(crate) fn prepare(
        &self,
        security: &Security,
        ctx: &UserCtx,
        mut doc: ParsedDoc,
        opts: WriteOptions,
    ) -> (String, Result<ParsedDoc>) {
        let id = match doc.id.clone() {
            Some(id) => id,
            None if opts.new_edits => self.new_id(),
            None => {
                return (String::new(), Err(Error::BadRequest("Document id is missing".into())));
            }
        };
        doc.id = Some(id.clone());
        // Only a normal document of an ordinary database is written from a printed body
        // unread; the checks below read the others' fields.
        let plain = kind(&id) == DocKind::Normal
            && !self.is_users_db()
            && self.name() != crate::replicator_doc::REPLICATOR_DB;
        if !plain && let Err(err) = doc.materialize() {
            return (id, Err(err.into()));
        }
        let checked = validate_doc_id(&id, self.is_partitioned())
            .map_err(Error::from)
            .and_then(|()| self.admit_doc(security, ctx, &id))
            .and_then(|()| match kind(&id) {
                DocKind::Local => Err(Error::BadRequest(
                    "_local documents are written with PUT /{db}/_local/{id}".into(),
                )),
                DocKind::Design if !doc.deleted => {
                    design::validate(&doc.body, self.is_partitioned())
                }
                _ => Ok(()),
            })
            .and_then(|()| {
                if !opts.new_edits && doc.rev.is_none() {
                    Err(Error::BadRequest("new_edits=false needs a _rev".into()))
                } else {
                    Ok(())
                }
            })
            .and_then(|()| {
                let hashing = self.config.get().hashing();
                users::prepare(self, security.is_admin(ctx), &mut doc, hashing)
            })
            .and_then(|()| {
                let replication = self.name() == crate::replicator_doc::REPLICATOR_DB
                    && kind(&id) == DocKind::Normal
                    && opts.new_edits;
                if replication {
                    crate::replicator_doc::stamp_owner(security, ctx, &mut doc)
                        .and_then(|()| crate::replicator_doc::check(ctx, &doc))
                } else {
                    Ok(())
                }
            });
        (id, checked.map(|()| doc))
    }

    fn new_id(&self) -> String {
        crate::uuids::global().next()
    }

    pub(crate) fn current(
        &self,
        pending: &mut Pending,
        db: u64,
        id: &str,
    ) -> Result<Option<DocInfo>> {
        if let Some(info) = pending.docs.get(id) {
            return Ok(info.clone());
        }
        match crate::read::doc_record_in(self.store.as_ref(), db, id)? {
            Some(record) => {
                pending.carried.insert(id.to_string(), record.body);
                Ok(Some(record.info))
            }
            None => Ok(None),
        }
    }

    /// The body size of the new winner (usually the new revision, else read from storage).
    fn winner_size(&self, db: u64, id: &str, outcome: &Outcome) -> Result<u64> {
        let (winner, _) = outcome.info.winner()?;
        if *winner == outcome.rev {
            return Ok(outcome.body.len() as u64);
        }
        let body = crate::read::body_in(self.store.as_ref(), db, id, winner)?;
        Ok(body.map_or(0, |b| b.len() as u64))
    }

    /// Moves one document's contribution in the counters. With `limit`, refuses to grow a
    /// document in a partition that was full (at or over `max_partition_size`) when the
    /// batch began: CouchDB's rule, so the write that crosses the limit still lands and
    /// deletes and shrinking updates always do. Replicated writes are never refused, so
    /// replication into a full partition still converges.
    fn account(
        &self,
        pending: &mut Pending,
        id: &str,
        old: Option<&DocInfo>,
        new: &DocInfo,
        stats: &mut Stats,
        limit: bool,
    ) -> Result<()> {
        let mut next = *stats;
        change(&mut next, old, new)?;
        if let Some(partition) = self.partition(id) {
            let current = match pending.partitions.get(partition) {
                Some(s) => *s,
                None => {
                    let stored = self.partition_stats(partition)?;
                    let full = stored.external >= self.config.get().max_partition_size;
                    pending.full.insert(partition.to_string(), full);
                    stored
                }
            };
            let grows = new.size > old.map_or(0, |o| o.size);
            if limit && grows && pending.full.get(partition).copied().unwrap_or(false) {
                return Err(Error::PartitionOverflow(id.to_string()));
            }
            let mut updated = current;
            change(&mut updated, old, new)?;
            pending.partitions.insert(partition.to_string(), updated);
        }
        *stats = next;
        Ok(())
    }

    fn partition<'a>(&self, id: &'a str) -> Option<&'a str> {
        if self.is_partitioned() { partition_of(id) } else { None }
    }

    /// The counters of one partition of this database.
    pub fn partition_stats(&self, partition: &str) -> Result<Stats> {
        match self.store.get(&Key::PartStats(self.id(), partition).encode())? {
            Some(bytes) => Stats::decode(&bytes),
            None => Ok(Stats::default()),
        }
    }
}

fn change(stats: &mut Stats, old: Option<&DocInfo>, new: &DocInfo) -> Result<()> {
    if let Some(old) = old {
        stats.apply(old.winner()?.1, old.size, active_size(old), -1);
    }
    stats.apply(new.winner()?.1, new.size, active_size(new), 1);
    stats.writes = stats.writes.saturating_add(1);
    Ok(())
}

pub(crate) fn active_size(info: &DocInfo) -> u64 {
    info.size + 40 * info.tree.nodes().len() as u64
}

/// Stages one document's new revision. `carried`: what its `Doc` record carried until
/// now, updated to what it carries after; `carry`: the store takes records that carry a
/// body (format 3). A new winner's body goes into the `Doc` record, and the body the record
/// carried before, if its revision is still in the tree, to its `Rev` key (non-leaf
/// bodies stay until `_compact`); any other new revision's body goes to its `Rev` key.
fn add_to_batch(
    batch: &mut Batch,
    (db, id, carried, carry): (u64, &str, &mut Carried, bool),
    old: Option<&DocInfo>,
    o: &Outcome,
    replacement: bool,
) -> Result<()> {
    let kept = |rev: &RevId| !o.stemmed.contains(rev) && o.info.tree.find(rev).is_some();
    if carry && *o.info.winner()?.0 == o.rev {
        if let Some((rev, body)) = carried.take()
            && rev != o.rev
            && kept(&rev)
        {
            batch.put(Key::Rev(db, id, &rev.to_string()).encode(), body);
        }
        *carried = Some((o.rev.clone(), o.body.clone()));
    } else {
        batch.put(Key::Rev(db, id, &o.rev.to_string()).encode(), o.body.clone());
        if carried.as_ref().is_some_and(|(rev, _)| !kept(rev)) {
            *carried = None;
        }
    }
    let body = carried.as_ref().map(|(rev, body)| (rev, body.as_slice()));
    let (record, head) = records::DocRecord::encode(&o.info, body);
    batch.put_with_head(Key::Doc(db, id).encode(), record, head);
    for rev in &o.stemmed {
        batch.delete(Key::Rev(db, id, &rev.to_string()).encode());
    }
    if let Some(old) = old {
        batch.delete(Key::Seq(db, old.seq).encode());
    }
    batch.put(Key::Seq(db, o.info.seq).encode(), id.as_bytes().to_vec());
    let ms = crate::catalog::now_us() / 1000;
    let record = records::ChangeRecord { id: id.to_string(), rev: o.rev.clone(), ms, replacement };
    batch.put(Key::Event(db, o.info.seq).encode(), records::encode(&record));
    Ok(())
}

/// An interactive edit: `doc.rev` must name a leaf (or be absent for a new or deleted
/// document); the new revision becomes that leaf's child.
/// The revision id covers the parsed body (without `_attachments`; hashed as its compact
/// JSON would be, without serialising it again) and `atts` as CouchDB hashes them; `body`
/// is what is stored.
fn edit_new(
    old: Option<&DocInfo>,
    doc: &ParsedDoc,
    atts: &[crate::attachments::AttHash<'_>],
    body: Vec<u8>,
    limit: usize,
) -> Result<Outcome> {
    let mut tree = old.map(|o| o.tree.clone()).unwrap_or_default();
    let parent = match (&doc.rev, old) {
        (None, None) => None,
        (None, Some(old)) => match old.winner()? {
            (rev, true) => tree.find(rev),
            (_, false) => return Err(Error::Conflict),
        },
        (Some(rev), Some(_)) => match tree.find(rev) {
            Some(idx) if tree.is_leaf(idx) => Some(idx),
            _ => return Err(Error::Conflict),
        },
        (Some(_), None) => return Err(Error::Conflict),
    };
    let parent_rev = parent.and_then(|p| tree.node(p)).map(|n| n.rev.clone());
    let rev = doc.next_rev(parent_rev.as_ref(), atts);
    tree.push(rev.clone(), parent, doc.deleted);
    let stemmed = tree.stem(limit);
    let info = DocInfo { seq: 0, tree, size: 0 };
    Ok(Outcome { info, rev, body, stemmed })
}

/// A replicated edit: the revision and its ancestry are merged into the tree as given.
/// `None` when the revision is already present.
fn edit_replicated(
    old: Option<&DocInfo>,
    doc: &ParsedDoc,
    body: Vec<u8>,
    limit: usize,
) -> Result<Option<Outcome>> {
    let path = match (&doc.revisions, &doc.rev) {
        (Some(path), _) if !path.is_empty() => path.clone(),
        (_, Some(rev)) => vec![rev.clone()],
        _ => return Err(Error::BadRequest("new_edits=false needs a _rev".into())),
    };
    let mut tree: RevTree = old.map(|o| o.tree.clone()).unwrap_or_default();
    let Some((leaf, added)) = tree.merge_path(&path, doc.deleted) else {
        return Err(Error::BadRequest("empty revision path".into()));
    };
    if !added {
        return Ok(None);
    }
    let rev =
        tree.node(leaf).map(|n| n.rev.clone()).unwrap_or_else(|| rev_or_default(path.first()));
    let stemmed = tree.stem(limit);
    Ok(Some(Outcome { info: DocInfo { seq: 0, tree, size: 0 }, rev, body, stemmed }))
}

fn rev_or_default(rev: Option<&RevId>) -> RevId {
    rev.cloned().unwrap_or(RevId { pos: 0, hash: String::new() })
}
