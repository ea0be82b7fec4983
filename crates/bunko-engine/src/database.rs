//! One database: its metadata, its writer lock and counters, and change notification.
//!
//! Writes go through [`Database::commit_locked`]: the caller builds a batch while holding
//! the writer lock (so that reading current revisions and writing new ones is atomic), the
//! batch is applied, the lock is released, and only then does the caller wait for the sync
//! that makes it durable. Waiting outside the lock is what lets concurrent writers to one
//! database share a sync (group commit).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use bunko_storage::{Batch, Snapshot, Store, Ticket};
use parking_lot::{Mutex, MutexGuard, RwLock};
use tokio::sync::watch;

use crate::ids::IdChanges;
use crate::index::Registry;
use crate::keys::{self, Key};
use crate::records::{self, DbMeta, Stats};
use crate::security::UserCtx;
use crate::settings::Live;
use crate::{Error, Result};

/// A database handle; cheap to share (`Arc<Database>`).
pub struct Database {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) config: Arc<Live>,
    meta: RwLock<DbMeta>,
    writer: Mutex<Writer>,
    /// The latest durable update seq, for `_changes` feeds to wait on.
    changes: watch::Sender<u64>,
    dropped: AtomicBool,
    /// The update seq of the last applied commit (`Writer::seq`, readable without the
    /// writer lock): set after the commit's batch is applied.
    applied: AtomicU64,
    /// Created by a transaction that has not committed yet: in no catalog, so a change of
    /// its catalog record stays in memory until the commit writes it.
    pending: AtomicBool,
    /// The Mango indexes, maintained by every write.
    pub(crate) indexes: Registry,
    /// The order statistics of document ids (`_all_docs` `offset` and `skip`).
    pub(crate) ids: crate::ids::IdOrder,
    /// Per-database state of the indexes built above the engine (views).
    pub(crate) extensions: crate::hooks::Extensions,
    /// The hooks of those indexes, shared by the engine's databases.
    pub(crate) hooks: crate::hooks::Hooks,
    /// The compiled `validate_doc_update` functions.
    pub(crate) validators: crate::validators::Validators,
    /// The compiled triggers.
    pub(crate) triggers: crate::triggers::Triggers,
    /// A capped database's limits ([`crate::capped`]).
    pub(crate) capped: crate::capped::CapState,
    /// Compactions of this database running now (`compact_running`).
    pub(crate) compactions: Arc<std::sync::atomic::AtomicUsize>,
    /// Whether the background index builder runs.
    pub(crate) building: AtomicBool,
    /// The query log and index use counts the advisor reads (in memory only).
    pub(crate) observed: crate::advisor::Observed,
    /// Queries that read documents by `_id` (MongoDB's `_id_` index in `$indexStats`).
    pub id_accesses: crate::index::Accesses,
    /// The search service that answers text-index queries, if one is registered.
    pub(crate) text: crate::find::text::Hook,
    /// Each client's last query, shared by the engine's databases (the advisor's rule 8).
    pub(crate) clients: Arc<crate::advisor::Clients>,
    /// This handle, for starting background work from `&self`.
    me: Weak<Database>,
}

/// State owned by the writer lock.
pub(crate) struct Writer {
    pub seq: u64,
    pub stats: Stats,
}

/// What `GET /{db}` reports.
#[derive(Debug, Clone)]
pub struct DbInfo {
    pub name: String,
    pub stats: Stats,
    pub update_seq: u64,
    pub created_us: u64,
    pub partitioned: bool,
    pub disk_size: u64,
}

impl Database {
    /// Builds the handle of an existing database, reading its counters, last seq and
    /// indexes, and resumes unfinished index builds.
    pub(crate) fn load(
        store: Arc<dyn Store>,
        config: Arc<Live>,
        clients: Arc<crate::advisor::Clients>,
        meta: DbMeta,
        text: crate::find::text::Hook,
        hooks: crate::hooks::Hooks,
    ) -> Result<Arc<Self>> {
        let stats = match store.get(&Key::Stats(meta.id).encode())? {
            Some(bytes) => Stats::decode(&bytes)?,
            None => Stats::default(),
        };
        let seq = match store.scan(&keys::seq_range(meta.id), true, 1)?.first() {
            Some((key, _)) => keys::decode_seq(key)?,
            None => 0,
        };
        let seq = seq.max(crate::purge::purged_update_seq(store.as_ref(), meta.id)?);
        let (changes, _) = watch::channel(seq);
        let db = Arc::new_cyclic(|me| Database {
            store,
            config,
            meta: RwLock::new(meta),
            writer: Mutex::new(Writer { seq, stats }),
            changes,
            dropped: AtomicBool::new(false),
            applied: AtomicU64::new(seq),
            pending: AtomicBool::new(false),
            indexes: Registry::default(),
            ids: Default::default(),
            extensions: Default::default(),
            hooks,
            validators: Default::default(),
            triggers: Default::default(),
            capped: Default::default(),
            building: AtomicBool::new(false),
            compactions: Default::default(),
            observed: Default::default(),
            id_accesses: Default::default(),
            text,
            clients,
            me: me.clone(),
        });
        db.load_indexes()?;
        db.spawn_builder();
        db.notify_opened();
        Ok(db)
    }

    /// A weak handle on this database (for state that must not keep it alive).
    pub fn weak(&self) -> Weak<Database> {
        self.me.clone()
    }

    /// This database as an `Arc` (for background work).
    pub fn arc(&self) -> Option<Arc<Database>> {
        self.me.upgrade()
    }

    pub fn name(&self) -> String {
        self.meta.read().name.clone()
    }

    pub fn id(&self) -> u64 {
        self.meta.read().id
    }

    /// The store, for the index crates above the engine that keep derived data under their
    /// own tags (views, `keys::GEO`); documents are written only through the engine's methods.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    pub fn is_partitioned(&self) -> bool {
        self.meta.read().partitioned
    }

    pub fn meta(&self) -> DbMeta {
        self.meta.read().clone()
    }

    /// The database's last rename, if it was renamed.
    pub fn renamed(&self) -> Option<crate::records::Renamed> {
        self.meta.read().renamed.clone()
    }

    pub fn info(&self) -> DbInfo {
        let writer = self.writer.lock();
        let meta = self.meta.read();
        DbInfo {
            name: meta.name.clone(),
            stats: writer.stats,
            update_seq: writer.seq,
            created_us: meta.created_us,
            partitioned: meta.partitioned,
            disk_size: writer.stats.file.max(writer.stats.active),
        }
    }

    /// How many of this database's documents, at their average body size, fit in the
    /// view build page of the memory budget (`Config::view_page_bytes`) when each takes
    /// `per_doc` times its size; at least 1.
    pub fn view_page_docs(&self, per_doc: u64) -> usize {
        let stats = self.writer.lock().stats;
        let average = stats.external.checked_div(stats.doc_count).unwrap_or(0).max(1);
        let docs = self.config.get().view_page_bytes / (average * per_doc.max(1));
        usize::try_from(docs).unwrap_or(usize::MAX).max(1)
    }

    /// The current update seq (including writes not yet synced).
    pub fn update_seq(&self) -> u64 {
        self.writer.lock().seq
    }

    /// A receiver that changes whenever a write to this database becomes durable.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    pub fn snapshot(&self) -> Snapshot {
        self.store.snapshot()
    }

    /// The `_security` object as JSON text.
    pub fn security(&self) -> String {
        self.meta.read().security.clone()
    }

    /// Replaces the `_security` object (database admins only; `_users`' only when
    /// `users_db_security_editable` is set, as in CouchDB).
    pub fn set_security(&self, ctx: &UserCtx, security: String) -> Result<()> {
        self.admit_admin(ctx)?;
        if self.is_users_db() && !self.config.get().users_db_security_editable {
            return Err(Error::Forbidden(
                "You can't edit the security object of the user database.".to_string(),
            ));
        }
        crate::security::Security::parse(&security)?;
        self.update_meta(|meta| meta.security = security)
    }

    pub fn revs_limit(&self) -> u64 {
        self.meta.read().revs_limit
    }

    pub fn set_revs_limit(&self, ctx: &UserCtx, limit: u64) -> Result<()> {
        self.admit_admin(ctx)?;
        if limit == 0 {
            return Err(Error::BadRequest("revs_limit must be positive".to_string()));
        }
        self.update_meta(|meta| meta.revs_limit = limit)
    }

    /// Marks a database created by an open transaction (see `Engine::prepare_db`).
    pub(crate) fn set_pending(&self, pending: bool) {
        self.pending.store(pending, Ordering::Release);
    }

    fn update_meta(&self, change: impl FnOnce(&mut DbMeta)) -> Result<()> {
        let writer = self.lock_writer()?;
        let mut meta = self.meta.read().clone();
        change(&mut meta);
        if self.pending.load(Ordering::Acquire) {
            *self.meta.write() = meta;
            return Ok(());
        }
        let mut batch = Batch::new();
        batch.put(Key::Db(&meta.name).encode(), records::encode(&meta));
        let ticket = self.store.apply(batch)?;
        *self.meta.write() = meta;
        drop(writer);
        self.store.sync(ticket)?;
        Ok(())
    }

    /// Moves the catalog entry to `to`, recording the rename (the caller holds the catalog
    /// lock; `dropped`: the database dropped to make room).
    pub(crate) fn rename(&self, to: &str, dropped: Option<u64>) -> Result<()> {
        let writer = self.lock_writer()?;
        let mut meta = self.meta.read().clone();
        let mut batch = Batch::new();
        batch.delete(Key::Db(&meta.name).encode());
        let from = std::mem::replace(&mut meta.name, to.to_string());
        meta.renamed = Some(crate::records::Renamed { from, seq: writer.seq, dropped });
        batch.put(Key::Db(to).encode(), records::encode(&meta));
        let ticket = self.store.apply(batch)?;
        *self.meta.write() = meta;
        drop(writer);
        self.store.sync(ticket)?;
        Ok(())
    }

    /// Whether the database has been deleted.
    pub fn is_dropped(&self) -> bool {
        self.dropped.load(Ordering::Acquire)
    }

    /// Takes the writer lock; fails if the database has been deleted meanwhile.
    pub(crate) fn lock_writer(&self) -> Result<MutexGuard<'_, Writer>> {
        let guard = self.writer.lock();
        if self.dropped.load(Ordering::Acquire) {
            return Err(Error::NotFound("Database does not exist.".to_string()));
        }
        Ok(guard)
    }

    /// Applies `batch` (built under `writer`, and writing the documents `ids`), records the
    /// new seq and counters, releases the lock and waits until the batch is durable.
    /// `batch` must already contain the `Stats` key for `stats`.
    pub(crate) fn commit_locked(
        &self,
        writer: MutexGuard<'_, Writer>,
        batch: Batch,
        ids: &IdChanges,
        seq: u64,
        stats: Stats,
    ) -> Result<()> {
        let ticket = self.apply_locked(writer, batch, ids, seq, stats)?;
        self.store.sync(ticket)?;
        self.notify_durable(seq);
        Ok(())
    }

    /// The first half of [`Database::commit_locked`]: applies `batch` (whose document
    /// writes are `ids`), records the new seq and counters and releases the lock; the
    /// caller waits for `ticket`'s sync.
    pub(crate) fn apply_locked(
        &self,
        mut writer: MutexGuard<'_, Writer>,
        batch: Batch,
        ids: &IdChanges,
        seq: u64,
        stats: Stats,
    ) -> Result<Ticket> {
        let ticket = self.apply_docs_batch(batch, ids)?;
        self.set_applied(&mut writer, seq, stats);
        drop(writer);
        Ok(ticket)
    }

    /// Records, under the writer lock, the seq and counters of a commit whose batch was
    /// just applied.
    pub(crate) fn set_applied(&self, writer: &mut Writer, seq: u64, stats: Stats) {
        writer.seq = seq;
        writer.stats = stats;
        self.applied.store(seq, Ordering::Release);
    }

    /// The update seq of the last applied commit, read without waiting for the writer lock.
    /// Whoever read it and then reads the store sees every write up to it; so a reader may
    /// keep what it derived from a document (a collection's options) for as long as this
    /// stays the same.
    pub fn applied_seq(&self) -> u64 {
        self.applied.load(Ordering::Acquire)
    }

    /// Applies `batch`, which writes the documents `ids`, keeping the order statistics of
    /// document ids in step; the caller holds the writer lock.
    pub(crate) fn apply_docs_batch(&self, batch: Batch, ids: &IdChanges) -> Result<Ticket> {
        let locked = self.ids.lock();
        match self.store.apply(batch) {
            Ok(ticket) => {
                locked.record(self.store.as_ref(), self.id(), ids);
                Ok(ticket)
            }
            Err(err) => {
                locked.forget();
                Err(err.into())
            }
        }
    }

    /// Wakes `_changes` feeds: everything up to `seq` is durable.
    pub(crate) fn notify_durable(&self, seq: u64) {
        let advanced = self.changes.send_if_modified(|durable| {
            let advanced = seq > *durable;
            *durable = (*durable).max(seq);
            advanced
        });
        if advanced {
            crate::db_updates::global().note("updated", &self.name());
        }
    }

    /// Commits the catalog change that deletes this database and marks the handle dead.
    pub(crate) fn drop_with(&self, batch: Batch) -> Result<()> {
        let writer = self.lock_writer()?;
        let ticket = self.store.apply(batch)?;
        self.dropped.store(true, Ordering::Release);
        drop(writer);
        self.store.sync(ticket)?;
        Ok(())
    }
}

/// One database's share of a commit that spans several: its writer lock (taken in database
/// id order), and the seq and counters it has once the batch is applied.
pub(crate) struct Part<'a> {
    pub db: &'a Database,
    pub writer: MutexGuard<'a, Writer>,
    pub seq: u64,
    pub stats: Stats,
    /// The documents the batch writes in this database.
    pub ids: IdChanges,
}

/// Applies `batch`, which holds the writes of every part, as one atomic commit, and
/// releases the writer locks; the caller waits for the returned ticket's sync and then
/// calls [`Database::notify_durable`] with each part's seq.
pub(crate) fn apply_parts(
    store: &Arc<dyn Store>,
    parts: Vec<Part<'_>>,
    batch: Batch,
) -> Result<Ticket> {
    let locked: Vec<_> = parts.iter().map(|part| part.db.ids.lock()).collect();
    let ticket = match store.apply(batch) {
        Ok(ticket) => ticket,
        Err(err) => {
            locked.into_iter().for_each(crate::ids::Locked::forget);
            return Err(err.into());
        }
    };
    for (locked, part) in locked.into_iter().zip(&parts) {
        locked.record(store.as_ref(), part.db.id(), &part.ids);
    }
    for mut part in parts {
        part.db.set_applied(&mut part.writer, part.seq, part.stats);
    }
    Ok(ticket)
}
