//! [`Fjall`]: the embedded on-disk store, fjall keyspaces driven by group commit.
//!
//! # Writes
//!
//! [`Store::apply`] turns a [`Batch`] into one fjall `WriteBatch` (fjall batches are atomic
//! and get one sequence number) with `durability(None)`: fjall appends it to its journal's
//! userspace buffer and inserts it into the memtable, but neither flushes nor fsyncs.
//! The database is opened with `manual_journal_persist(true)`, and fjall 3 has no
//! background journal fsync, so the only syncs of new data are ours ([`Store::sync`], via
//! the group commit in `group.rs`). fjall also fsyncs a journal when it seals it (every
//! ~64 MiB of memtable), which only makes data durable earlier.
//!
//! # Syncing
//!
//! `Database::persist(PersistMode::SyncAll)` would hold fjall's journal lock through the
//! fsync, and every apply needs that lock: applies would stall during each sync, and the
//! next sync would cover only the one or two batches that slipped in between. Worse, the
//! engine applies under a per-database writer lock, so one database's writers would get
//! one commit per sync (measured with `examples/limit.rs`, 64 writers on one lock: 11k
//! commits/s at 2 commits per sync, against 75k at 35 per sync as done here). So a sync is
//! two steps:
//!
//! 1. `persist(PersistMode::Buffer)`: under the journal lock, write fjall's buffer to the
//!    OS (one `write(2)`). Every batch applied before is now in a journal file.
//! 2. Without any fjall lock, fsync every `*.jnl` file in the database directory
//!    ([`sync_journals`]); applies go on meanwhile and wait for the next sync.
//!
//! This relies on fjall 3's layout: journals are `<dir>/<n>.jnl`, a journal is fsynced
//! before the next is created, and one is deleted only once its data is in fsynced
//! tables. If no journal is found (the layout changed), the sync falls back to
//! `persist(SyncAll)`. `tests/crash.rs` kills a writer process and checks every
//! acknowledged commit survived.
//!
//! # Reads
//!
//! Through a fjall snapshot: `fjall_read.rs`.
//!
//! # Keyspaces
//!
//! A store of format 4 spreads its keys over several keyspaces by their first byte
//! (`layout.rs`); older formats keep one. Writes, syncs and snapshots are the database's,
//! so they span every keyspace; memtables and compactions are each keyspace's own, and
//! the memtable bounds below take them all into account.
//!
//! # Lifetime
//!
//! fjall locks `<dir>/lock` (an OS file lock) for as long as anything of the database is
//! alive: this store, and every snapshot or [`crate::Iter`] taken from it. Opening a
//! directory that is locked, by another process or by a still-live store in this one,
//! fails (after fjall retries for ~200 ms) with [`Error::Io`] ("... is locked ..."). Once every
//! handle is dropped, the same process can open the directory again. Dropping the store
//! stops fjall's background threads (waiting for a running flush or compaction to
//! finish) and fsyncs the journal. For a clean shutdown call [`Store::close`] first: it
//! lets in-flight commits finish and refuses new ones.

use crate::fjall_options::FjallOptions;
use crate::fjall_read::{FjallSnapshot, Keyspaces, get_at, scan_at};
use crate::group::Group;
use crate::journal;
use crate::layout::Layout;
use crate::value::{Part, ValueCodec};
use crate::{Batch, Bulk, Durable, Entry, Error, Op, Range, Read, Result, Snapshot, Store, Ticket};
use fjall::{AbstractTree, Database, Keyspace, PersistMode};
use std::collections::HashSet;
use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A key no one writes (tag `0x00`, which no engine key uses), whose removal is the write
/// [`Store::reclaim`] flushes last.
const RECLAIM_MARK: &[u8] = b"\x00reclaim";

/// How long a writer sleeps between two looks at the memtables while they are over their
/// share (fjall's own wait at four sealed memtables sleeps 100 ms).
/// How many snapshots fjall's snapshot tracker closes between two recomputations of its
/// garbage-collection watermark (fjall 3.1, `snapshot_tracker.rs`).
const SNAPSHOTS_PER_GC: usize = 10_000;

const FLUSH_WAIT: std::time::Duration = std::time::Duration::from_millis(5);

/// A [`Store`] on disk, backed by fjall. See the module docs.
pub struct Fjall {
    group: Group,
    keyspaces: Arc<Keyspaces>,
    codec: ValueCodec,
    /// The directory's storage format (`format.rs`).
    format: u32,
    db: Database,
    path: PathBuf,
    /// Size at which the active memtable is sealed (in a store created before session 31,
    /// fjall seals at the size the store was created with if that is smaller).
    memtable_bytes: u64,
    /// What all memtables may hold together; see [`Fjall::bound_memtables`].
    memtables_bytes: u64,
    /// [`Fjall::memtable_bytes`] while a [`Bulk`] lease is held.
    bulk_memtable_bytes: u64,
    /// [`Bulk`] leases held now.
    bulk: Arc<AtomicUsize>,
}

impl std::fmt::Debug for Fjall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fjall").field("path", &self.path).field("group", &self.group).finish()
    }
}

impl Fjall {
    /// Opens the store in directory `path`, creating it if absent, and replays fjall's
    /// journal so that every acknowledged commit is present.
    pub fn open(path: &Path) -> Result<Fjall> {
        Fjall::open_with(path, FjallOptions::default())
    }

    /// [`Fjall::open`] with memory and disk settings other than the defaults.
    pub fn open_with(path: &Path, options: FjallOptions) -> Result<Fjall> {
        let context = |err| in_context(&format!("opening {}", path.display()), err);
        let format = crate::format::prepare(path)?;
        let codec = options.codec(format);
        let db = options.database(path).open().map_err(context)?;
        let keyspaces = Keyspaces::open(Layout::of_format(format), |name| {
            db.keyspace(name, || options.keyspace())
        })
        .map_err(context)?;
        // Absolute: the journals are synced from the leader thread, whatever the cwd then.
        let dir = std::path::absolute(path)
            .map_err(|err| Error::Io(format!("opening {}: {err}", path.display())))?;
        let group = {
            let db = db.clone();
            Group::new(Box::new(move || sync_now(&db, &dir)))
        };
        let memtable_bytes = options.memtable_bytes;
        let memtables_bytes = options.memtables_bytes.max(2 * memtable_bytes);
        Ok(Fjall {
            group,
            keyspaces: Arc::new(keyspaces),
            codec,
            format,
            db,
            path: path.to_path_buf(),
            memtable_bytes,
            memtables_bytes,
            bulk_memtable_bytes: options.bulk_memtable_bytes.max(memtable_bytes),
            bulk: Arc::default(),
        })
    }

    /// The directory this store lives in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Syncs run so far (successful or not); far fewer than [`Fjall::commits`] under
    /// concurrent load means group commit is grouping.
    pub fn syncs(&self) -> u64 {
        self.group.syncs()
    }

    /// Writes (and removes again) enough filler for the active journal to be sealed at
    /// the next flush; see `journal.rs`. Nothing if the journal holds little.
    fn seal_journal(&self) -> Result<()> {
        let context = |err| in_context("sealing the journal", err);
        let io = |err: std::io::Error| Error::Io(format!("sealing the journal: {err}"));
        let bytes = match journal::active_journal_bytes(&self.path).map_err(io)? {
            Some(bytes) if bytes >= journal::WORTH_SEALING => bytes,
            _ => return Ok(()),
        };
        let filler = journal::filler();
        for _ in 0..journal::chunks_to_seal(bytes) {
            // Removed right away, so a flush finds the value shadowed by its removal.
            let keyspace = self.keyspaces.of_key(RECLAIM_MARK);
            keyspace.insert(RECLAIM_MARK, filler.as_slice()).map_err(context)?;
            keyspace.remove(RECLAIM_MARK).map_err(context)?;
        }
        Ok(())
    }

    /// The size at which the active memtable is sealed now, and what all memtables may hold
    /// together: larger while a [`Bulk`] lease is held (one memtable being flushed and the
    /// active one at most).
    fn memtable_limits(&self) -> (u64, u64) {
        match self.bulk.load(Ordering::Acquire) {
            0 => (self.memtable_bytes, self.memtables_bytes),
            _ => (self.bulk_memtable_bytes, self.memtables_bytes.max(2 * self.bulk_memtable_bytes)),
        }
    }

    /// Bytes of keys and values the memtables hold now (the active one and the sealed ones
    /// not yet flushed).
    pub fn memtables_size(&self) -> u64 {
        self.db.write_buffer_size()
    }

    /// Keeps the memtables within their share of the memory budget
    /// ([`FjallOptions::memtables_bytes`]). fjall seals a memtable past its size only when
    /// its one background worker gets to the request, which waits behind a running
    /// compaction, and meanwhile the active memtable grows without bound; so a writer that
    /// finds the memtables over their share seals the active one itself (if it is full),
    /// then waits until flushes bring them back under it (as fjall makes writers wait at
    /// four sealed memtables).
    fn bound_memtables(&self) -> Result<()> {
        self.release_sealed_journal()?;
        loop {
            let (memtable_bytes, memtables_bytes) = self.memtable_limits();
            if self.db.write_buffer_size() <= memtables_bytes {
                break;
            }
            if self.sealed_memtables() == 0 {
                // Nothing is being flushed (or a flush has not yet subtracted its bytes):
                // seal the largest active memtable if it holds at least its even share of
                // a memtable, else the share is kept.
                let share = memtable_bytes / self.keyspaces.all.len() as u64;
                let largest = self.keyspaces.all.iter().max_by_key(|k| active_bytes(k));
                match largest {
                    Some(keyspace) if active_bytes(keyspace) >= share.max(1) => keyspace
                        .rotate_memtable()
                        .map_err(|err| in_context("sealing a memtable", err))?,
                    _ => break,
                };
            }
            std::thread::sleep(FLUSH_WAIT);
        }
        Ok(())
    }

    /// Sealed memtables of every keyspace, waiting for their flush.
    fn sealed_memtables(&self) -> usize {
        self.keyspaces.all.iter().map(|k| k.tree.sealed_memtable_count()).sum()
    }

    /// Bytes held by the active memtables of every keyspace.
    #[cfg(test)]
    fn active_memtables_bytes(&self) -> u64 {
        self.keyspaces.all.iter().map(active_bytes).sum()
    }

    /// In a store of several keyspaces, seals every active memtable that holds anything
    /// once fjall has sealed a journal and flushed what it had to: a journal is deleted only
    /// when every keyspace's data in it is in tables, and a keyspace written seldom (the
    /// database metadata) would otherwise keep its memtable, and every sealed journal
    /// since, for as long as it takes to fill it (fjall itself seals stragglers only once
    /// its journals hold 512 MiB). One check of fjall's journal count per write.
    fn release_sealed_journal(&self) -> Result<()> {
        if self.keyspaces.all.len() == 1
            || self.db.journal_count() < 2
            || self.db.outstanding_flushes() > 0
        {
            return Ok(());
        }
        for keyspace in &self.keyspaces.all {
            if active_bytes(keyspace) > 0 {
                keyspace.rotate_memtable().map_err(|err| in_context("sealing a memtable", err))?;
            }
        }
        Ok(())
    }

    /// Seals the active memtable and waits until every sealed memtable is in a table.
    ///
    /// fjall's `rotate_memtable_and_wait` waits only for a memtable it sealed itself: when
    /// its worker had sealed a full one just before (the last write filled it), the call
    /// found the active memtable empty and returned while that flush was still writing,
    /// so `reclaim`'s major compaction ran without the newest table and left the older
    /// versions of its keys on disk (the CI run of stop 31).
    fn flush_memtables(&self) -> Result<()> {
        let context = |err| in_context("flushing the memtables", err);
        for keyspace in &self.keyspaces.all {
            keyspace.rotate_memtable_and_wait().map_err(context)?;
        }
        while self.sealed_memtables() > 0 {
            std::thread::sleep(FLUSH_WAIT);
        }
        Ok(())
    }

    /// Makes fjall recompute the sequence number below which no snapshot is open (its
    /// GC watermark), so that a compaction drops the versions older than now and the next
    /// seal lets go of the tables they were in.
    ///
    /// fjall 3.1 recomputes it only once every [`SNAPSHOTS_PER_GC`] closed snapshots, and
    /// deletes a version's replaced tables only when a seal finds that version below it.
    /// So whether `reclaim` left the tables its major compaction replaced depended on how
    /// many snapshots readers had closed in between: in `bunko-bench --workloads load`,
    /// 2 runs of 19 measured ~310 MB after `_compact` instead of 150 (docs/performance.md,
    /// session 28), and a store with few reads never deleted them before a restart.
    /// Opening and closing that many snapshots costs about a millisecond.
    fn advance_gc_watermark(&self) {
        for _ in 0..SNAPSHOTS_PER_GC {
            drop(self.db.snapshot());
        }
    }

    /// Seals the active memtable if it is full, before a batch is written into it; called
    /// with applies serialized (in the group's apply).
    ///
    /// fjall asks its worker to seal a full memtable after *every* write that finds it
    /// full (`try_send` of a rotation message into its bounded queue of 1,000). While the
    /// worker is busy with a long compaction, concurrent writers fill that queue; the
    /// worker then takes one rotation message, seals, and sends itself a flush message
    /// with a blocking `send` into its own full queue: with one worker (`WORKERS`) it waits
    /// for itself forever, no memtable is flushed again, and every writer ends up waiting
    /// in [`Fjall::bound_memtables`] (seen as a hang of `bunko-bench --workloads limit`,
    /// 64 writers, on a loaded machine). Sealing here first keeps fjall from finding a
    /// full memtable more than once per memtable, so its queue holds at most a few
    /// messages. (A store is created with fjall's own size at the larger of the two sizes
    /// of [`Fjall::memtable_limits`], so fjall asks only if a memtable outgrows both; a store
    /// created before session 31 keeps its size, and fjall's requests at it.)
    fn seal_full_memtable(&self) -> Result<()> {
        let limit = self.memtable_limits().0;
        for keyspace in &self.keyspaces.all {
            if active_bytes(keyspace) >= limit {
                keyspace.rotate_memtable().map_err(|err| in_context("sealing a memtable", err))?;
            }
        }
        Ok(())
    }

    /// Batches applied since the store was opened.
    pub fn commits(&self) -> u64 {
        self.group.commits()
    }
}

/// Bytes of keys and values in `keyspace`'s active memtable.
fn active_bytes(keyspace: &Keyspace) -> u64 {
    keyspace.tree.active_memtable().size()
}

/// Makes every batch applied so far durable; see "Syncing" in the module docs. Run by the
/// group's leader thread, which holds its own handle of the database.
fn sync_now(db: &Database, dir: &Path) -> Result<()> {
    let context = |err| in_context("syncing the journal", err);
    // Under fjall's journal lock, briefly: its userspace buffer goes to the OS.
    db.persist(PersistMode::Buffer).map_err(context)?;
    // Without fjall's lock: the slow part, during which applies go on.
    if sync_journals(dir)? == 0 {
        // No journal where fjall 3 keeps it: the layout changed, so let fjall do it.
        db.persist(PersistMode::SyncAll).map_err(context)?;
    }
    Ok(())
}

impl Read for Fjall {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        get_at(&self.db.snapshot(), &self.keyspaces, self.codec, key, Part::Whole)
    }

    fn scan(&self, range: &Range, reverse: bool, limit: usize) -> Result<Vec<Entry>> {
        let snapshot = self.db.snapshot();
        scan_at(&snapshot, &self.keyspaces, self.codec, range, reverse, limit, Part::Whole)
    }

    fn get_head(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        get_at(&self.db.snapshot(), &self.keyspaces, self.codec, key, Part::Head)
    }

    fn scan_heads(&self, range: &Range, reverse: bool, limit: usize) -> Result<Vec<Entry>> {
        let snapshot = self.db.snapshot();
        scan_at(&snapshot, &self.keyspaces, self.codec, range, reverse, limit, Part::Head)
    }
}

impl Store for Fjall {
    fn snapshot(&self) -> Snapshot {
        Arc::new(FjallSnapshot {
            snapshot: self.db.snapshot(),
            keyspaces: self.keyspaces.clone(),
            codec: self.codec,
        })
    }

    fn apply(&self, batch: Batch) -> Result<Ticket> {
        batch.validate()?;
        let mut write = self.db.batch().durability(None);
        // fjall gives a whole batch one sequence number, so two writes to one key in a
        // batch would be two entries with equal internal keys; which one survives is up to
        // fjall's memtable (today the last). Keep only the last ourselves, as `Batch` says.
        for (key, value) in last_writes(batch) {
            match value {
                Some((value, head)) => {
                    let encoded = self.codec.encode(value, head)?;
                    write.insert(self.keyspaces.of_key(&key), key, encoded)
                }
                None => write.remove(self.keyspaces.of_key(&key), key),
            }
        }
        let ticket = self.group.apply(|| {
            self.seal_full_memtable()?;
            write.commit().map_err(|err| in_context("writing a batch", err))
        })?;
        self.bound_memtables()?;
        Ok(ticket)
    }

    fn sync(&self, ticket: Ticket) -> Result<()> {
        self.group.sync(ticket)
    }

    fn durable(&self, ticket: Ticket) -> Durable {
        self.group.durable(ticket)
    }

    fn health(&self) -> Result<()> {
        self.group.health()
    }

    fn disk_size(&self) -> u64 {
        // An estimate for stats; a failure to stat the journal just reads as 0.
        self.db.disk_space().unwrap_or(0)
    }

    fn reclaim(&self) -> Result<()> {
        let context = |err| in_context("compacting", err);
        // The memtable goes to a table, so that the removals in it reach the tables, and
        // the journals holding only flushed data are deleted (fjall's journal maintenance
        // after a flush). fjall marks both calls `doc(hidden)`; they are its only way to
        // flush and to compact on demand (3.1), and `reclaim_keeps_every_key` checks them.
        // Filler first, so that this flush also seals the active journal and deletes it.
        self.seal_journal()?;
        self.flush_memtables()?;
        // Every table merged into the last level: removed keys and old versions that no
        // snapshot can see are dropped. The compaction keeps every version above the GC
        // watermark, which fjall recomputes only when it seals a memtable (none was sealed
        // above if the memtable was empty) or closes its 10,000th snapshot: so it is
        // brought up to now first.
        self.advance_gc_watermark();
        for keyspace in &self.keyspaces.all {
            keyspace.major_compact().map_err(context)?;
        }
        // The tables it replaced are deleted once fjall's version history lets go of
        // them, which it checks when a memtable is sealed: so one more flush, of one
        // write that changes no key (the removal of a key no one writes).
        self.keyspaces.of_key(RECLAIM_MARK).remove(RECLAIM_MARK).map_err(context)?;
        self.advance_gc_watermark();
        self.flush_memtables()
    }

    fn close(&self) -> Result<()> {
        self.group.close()
    }

    fn format(&self) -> u32 {
        self.format
    }

    fn bulk(&self) -> Bulk {
        self.bulk.fetch_add(1, Ordering::AcqRel);
        let (bulk, keyspaces, memtable_bytes) =
            (self.bulk.clone(), self.keyspaces.clone(), self.memtable_bytes);
        Bulk::new(move || {
            // The last lease ends: a memtable past the usual size is sealed now rather
            // than held (in memory) until the next write.
            let last = bulk.fetch_sub(1, Ordering::AcqRel) == 1;
            if !last {
                return;
            }
            for keyspace in keyspaces.all.iter().filter(|k| active_bytes(k) >= memtable_bytes) {
                // A failure here (fjall poisoned) fails the next write, which reports it.
                keyspace.rotate_memtable().ok();
            }
        })
    }
}

/// Fsyncs every fjall journal (`*.jnl` in the database directory) and returns how many.
///
/// The newest journal holds the batches just flushed. An older journal was fsynced by
/// fjall when it was sealed (rotation syncs the old journal before creating the new
/// one), so syncing it again is cheap; one deleted meanwhile had its data flushed to
/// tables, which fjall fsyncs before dropping a journal.
fn sync_journals(dir: &Path) -> Result<usize> {
    let io =
        |err: std::io::Error| Error::Io(format!("syncing the journal in {}: {err}", dir.display()));
    let mut synced = 0;
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
        if path.extension().is_none_or(|ext| ext != "jnl") {
            continue;
        }
        // Opened for writing because some platforms (Windows) only sync writable handles.
        match OpenOptions::new().write(true).open(&path) {
            Ok(file) => file.sync_all().map_err(io)?,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
            Err(err) => return Err(io(err)),
        }
        synced += 1;
    }
    Ok(synced)
}

/// The batch's writes with only the last write to each key kept (`None` deletes), each
/// value with the length of its head.
fn last_writes(batch: Batch) -> impl Iterator<Item = (Vec<u8>, Option<(Vec<u8>, usize)>)> {
    let ops = batch.into_ops();
    // From the end: a key seen before (later in the batch) marks this write superseded.
    // One hash per key, where a map of the whole batch cost a comparison per tree level.
    let superseded: Vec<bool> = {
        let mut seen = HashSet::with_capacity(ops.len());
        ops.iter()
            .rev()
            .map(|op| match op {
                Op::Put(key, ..) | Op::Delete(key) => !seen.insert(key.as_slice()),
            })
            .collect()
    };
    let kept = ops.into_iter().zip(superseded.into_iter().rev()).filter(|(_, gone)| !gone);
    kept.map(|(op, _)| match op {
        Op::Put(key, value, head) => (key, Some((value, head))),
        Op::Delete(key) => (key, None),
    })
}

/// Maps a fjall error to ours, with a message fit for a log or an HTTP body
/// (fjall's own `Display` is just `FjallError: {Debug}`).
pub(crate) fn in_context(doing: &str, err: fjall::Error) -> Error {
    use fjall::{Error as F, LsmError as L};
    match err {
        F::Poisoned => Error::Poisoned,
        F::Locked => Error::Io(format!(
            "{doing}: the database directory is locked by another process (or by a store \
             still open in this one)"
        )),
        F::Io(err) | F::Storage(L::Io(err)) => Error::Io(format!("{doing}: {err}")),
        F::InvalidVersion(version) => {
            Error::Corrupt(format!("{doing}: unsupported on-disk format version {version:?}"))
        }
        F::Storage(L::InvalidVersion(version)) => {
            Error::Corrupt(format!("{doing}: unsupported table format version {version}"))
        }
        F::Storage(L::ChecksumMismatch { got, expected }) => Error::Corrupt(format!(
            "{doing}: checksum mismatch (got {got:?}, expected {expected:?})"
        )),
        F::JournalRecovery(err) => Error::Corrupt(format!("{doing}: journal recovery: {err:?}")),
        F::Unrecoverable | F::Storage(L::Unrecoverable) => {
            Error::Corrupt(format!("{doing}: database files are missing or unreadable"))
        }
        F::Decompress(_) | F::InvalidTrailer | F::InvalidTag(_) | F::Storage(_) => {
            Error::Corrupt(format!("{doing}: {err:?}"))
        }
        other => Error::Io(format!("{doing}: {other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::ops::Bound;

    use crate::{Iter, MAX_KEY_LEN};

    use super::*;

    /// The sync path assumes fjall 3's journal layout; if an upgrade changes it, this
    /// fails instead of every sync silently taking the slow fallback.
    #[test]
    fn journals_are_where_sync_expects_them() -> std::result::Result<(), Box<dyn std::error::Error>>
    {
        let dir = tempfile::tempdir()?;
        let store = Fjall::open(&dir.path().join("db"))?;
        let mut batch = Batch::new();
        batch.put(*b"k", *b"v");
        store.commit(batch)?;
        let dir = std::path::absolute(store.path())?;
        assert!(sync_journals(&dir)? >= 1, "no *.jnl journal in {}", dir.display());
        Ok(())
    }

    /// Writers keep the memtables within their share of the budget: after every commit
    /// of a fast bulk load (1 MiB memtables, at most 2 MiB together), the memtables hold
    /// no more than the share. fjall alone lets them reach four sealed memtables and an
    /// active one that grows while its worker flushes or compacts.
    #[test]
    fn memtables_keep_to_their_share() -> std::result::Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let options = FjallOptions {
            memtable_bytes: FjallOptions::MIN_MEMTABLE_BYTES,
            memtables_bytes: 2 * FjallOptions::MIN_MEMTABLE_BYTES,
            compression: crate::Compression::None,
            ..FjallOptions::default()
        };
        let store = Fjall::open_with(&dir.path().join("db"), options)?;
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        let mut most = 0;
        for round in 0..96u32 {
            let mut batch = Batch::new();
            for k in 0..64u32 {
                let value: Vec<u8> = (0..4096)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        x as u8
                    })
                    .collect();
                batch.put(format!("{round:04}{k:04}").into_bytes(), value);
            }
            store.apply(batch)?;
            most = most.max(store.memtables_size());
        }
        // A flush subtracts its bytes just after its memtables are gone: one memtable more.
        assert!(most > 0);
        assert!(most <= 3 * FjallOptions::MIN_MEMTABLE_BYTES, "memtables held {most} bytes");
        Ok(())
    }

    /// While a [`Bulk`] lease is held the active memtable grows to the bulk size before it
    /// is sealed (past the usual share of all memtables together), and the last lease to
    /// end seals it, so it is flushed instead of held in memory. Without the lease the
    /// same writes keep to the usual share.
    #[test]
    fn a_bulk_lease_widens_the_memtable_until_it_ends()
    -> std::result::Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let mib = FjallOptions::MIN_MEMTABLE_BYTES;
        let options = FjallOptions {
            memtable_bytes: mib,
            memtables_bytes: 2 * mib,
            bulk_memtable_bytes: 4 * mib,
            compression: crate::Compression::None,
            ..FjallOptions::default()
        };
        let store = Fjall::open_with(&dir.path().join("db"), options)?;
        // 12 batches of 256 KiB: 3 MiB, below the bulk size.
        let fill = |round: u32| -> Result<u64> {
            let mut most = 0;
            for n in 0..12u32 {
                let mut batch = Batch::new();
                for k in 0..64u32 {
                    batch.put(format!("{round}-{n:04}{k:04}").into_bytes(), vec![k as u8; 4096]);
                }
                store.apply(batch)?;
                most = most.max(store.active_memtables_bytes());
            }
            Ok(most)
        };
        let two = store.bulk();
        let (one, most) = (store.bulk(), fill(0)?);
        assert!(most > 5 * mib / 2, "the active memtable held at most {most} bytes");
        drop(one);
        let active = store.active_memtables_bytes();
        assert!(active > 5 * mib / 2, "sealed while a lease was left: {active} bytes");
        drop(two);
        assert_eq!(store.active_memtables_bytes(), 0, "not sealed at the end");
        let most = fill(1)?;
        assert!(most <= mib + 256 * 1024 + 64 * 64, "without a lease: {most} bytes");
        Ok(())
    }

    /// A new directory spreads its keys over the keyspaces of format 4 by their first
    /// byte; a directory created by a format 3 build keeps one keyspace.
    #[test]
    fn keys_go_to_the_keyspace_of_their_kind() -> std::result::Result<(), Box<dyn std::error::Error>>
    {
        let dir = tempfile::tempdir()?;
        let store = Fjall::open(&dir.path().join("new"))?;
        assert_eq!(store.format(), 4);
        let mut batch = Batch::new();
        for tag in [0x01u8, 0x03, 0x05, 0x0A, 0x0E, 0x20] {
            batch.put(vec![tag, 7], vec![tag]);
        }
        store.commit(batch)?;
        let names = Layout::by_kind().names();
        for (tag, name) in [(0x01, "meta"), (0x03, "docs"), (0x05, "seqs"), (0x0A, "index")] {
            let at = names.iter().position(|n| *n == name).ok_or(name)?;
            assert!(store.keyspaces.all[at].contains_key([tag, 7])?, "{tag:#x} not in {name}");
            assert!(!store.keyspaces.all[0].contains_key([0x03, 7])?, "a doc key in meta");
        }
        let old = dir.path().join("old");
        std::fs::create_dir_all(&old)?;
        std::fs::write(old.join("BUNKO_FORMAT"), "bunko storage format 3\n")?;
        let store = Fjall::open(&old)?;
        assert_eq!((store.format(), store.keyspaces.all.len()), (3, 1));
        Ok(())
    }

    /// A keyspace written once and then left alone does not keep the journals fjall seals
    /// after it: once their other data is flushed, every journal but the active one goes.
    #[test]
    fn a_quiet_keyspace_lets_sealed_journals_go()
    -> std::result::Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let options = FjallOptions {
            memtable_bytes: 4 * FjallOptions::MIN_MEMTABLE_BYTES,
            memtables_bytes: 8 * FjallOptions::MIN_MEMTABLE_BYTES,
            compression: crate::Compression::None,
            ..FjallOptions::default()
        };
        let store = Fjall::open_with(&dir.path().join("db"), options)?;
        let mut batch = Batch::new();
        batch.put(*b"\x01quiet", *b"meta");
        store.commit(batch)?;
        // ~150 MB of documents that do not compress: fjall seals a journal every 64 MB.
        let doc = |n: u32| [&[0x03u8][..], &n.to_be_bytes()].concat();
        let (mut x, mut most) = (0x9e37_79b9_7f4a_7c15_u64, 0);
        for round in 0..150u32 {
            let mut batch = Batch::new();
            for k in 0..64u32 {
                let value: Vec<u8> = (0..2048)
                    .flat_map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        x.to_le_bytes()
                    })
                    .collect();
                batch.put(doc(round * 64 + k), value);
            }
            store.apply(batch)?;
            most = most.max(store.db.journal_count());
        }
        assert!(most >= 2, "no journal was sealed");
        let mut journals = store.db.journal_count();
        for _ in 0..500 {
            if journals == 1 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
            let mut batch = Batch::new();
            batch.put(doc(u32::MAX), *b"tick");
            store.apply(batch)?;
            journals = store.db.journal_count();
        }
        assert_eq!(journals, 1, "sealed journals kept");
        assert_eq!(store.get(b"\x01quiet")?, Some(b"meta".to_vec()));
        Ok(())
    }

    /// The space allocated to the files under `dir` in bytes: `(journals, the rest)`.
    fn allocated(dir: &std::path::Path) -> std::io::Result<(u64, u64)> {
        use std::os::unix::fs::MetadataExt;
        let mut total = (0, 0);
        for entry in std::fs::read_dir(dir)? {
            let (entry, journal) = (entry?, std::ffi::OsStr::new("jnl"));
            let meta = entry.metadata()?;
            match meta.is_dir() {
                true => {
                    let (journals, rest) = allocated(&entry.path())?;
                    total = (total.0 + journals, total.1 + rest);
                }
                false if entry.path().extension() == Some(journal) => {
                    total.0 += meta.blocks() * 512
                }
                false => total.1 += meta.blocks() * 512,
            }
        }
        Ok(total)
    }

    /// `reclaim` (what `_compact` ends with) keeps every key with its latest value, across
    /// a reopen (the journals it lets go held nothing the tables lack), and frees the
    /// space of overwritten and removed values: the tables it replaced and the journal
    /// whose data is in tables.
    #[test]
    fn reclaim_keeps_every_key() -> std::result::Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("db");
        let store = Fjall::open(&path)?;
        // 1 KB of pseudo-random hex per value, which compression barely shrinks.
        let value = |k: u32, round: u32| {
            let mut x = u64::from(k) << 8 | u64::from(round);
            let hex = (0..125).map(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                format!("{:08x}", x >> 32)
            });
            hex.collect::<String>().into_bytes()
        };
        let mut model = BTreeMap::new();
        for round in 0..4 {
            for chunk in (0..4000u32).collect::<Vec<_>>().chunks(500) {
                let mut batch = Batch::new();
                for &k in chunk {
                    let key = k.to_be_bytes().to_vec();
                    if round == 3 && k % 4 == 0 {
                        batch.delete(key.clone());
                        model.remove(&key);
                    } else {
                        batch.put(key.clone(), value(k, round));
                        model.insert(key, value(k, round));
                    }
                }
                store.commit(batch)?;
            }
            // A table per round, so that the tables hold overwritten values to drop.
            store.flush_memtables()?;
        }
        let (journals, tables) = allocated(&path)?;
        store.reclaim()?;
        let (journals_after, after) = allocated(&path)?;
        let check = |store: &Fjall| -> std::result::Result<(), Box<dyn std::error::Error>> {
            let all = store.scan(&(Bound::Unbounded, Bound::Unbounded), false, usize::MAX)?;
            assert_eq!(all.len(), model.len());
            for ((key, value), (k, v)) in all.iter().zip(&model) {
                assert_eq!((key, value), (k, v));
            }
            Ok(())
        };
        check(&store)?;
        let live: usize = model.values().map(Vec::len).sum();
        assert!(after < tables, "{after} bytes after reclaim, {tables} before");
        assert!((after as usize) < live, "{after} bytes of tables for {live} live bytes");
        assert!(journals_after < journals / 4, "{journals_after} bytes of journal left");
        store.close()?;
        drop(store);
        check(&Fjall::open(&path)?)?;
        Ok(())
    }

    /// A streamed first page ([`Iter::streaming`]) gives what pages give, over keys in
    /// tables and in the memtable, overwritten and removed keys, every kind of bound
    /// (keys longer than any storable key too), both directions and pages shorter and
    /// longer than the range; and sees its snapshot, not later writes.
    #[test]
    fn streamed_pages_read_what_pages_read() -> std::result::Result<(), Box<dyn std::error::Error>>
    {
        let dir = tempfile::tempdir()?;
        let store = Fjall::open(&dir.path().join("db"))?;
        let key = |i: u32| format!("k{i:03}").into_bytes();
        let mut batch = Batch::new();
        for i in (0..100).step_by(2) {
            batch.put(key(i), format!("old {i}").into_bytes());
        }
        store.commit(batch)?;
        store.flush_memtables()?;
        let mut batch = Batch::new();
        for i in (1..100).step_by(3) {
            batch.put(key(i), format!("new {i}").into_bytes());
        }
        for i in (0..100).step_by(10) {
            batch.delete(key(i));
        }
        store.commit(batch)?;
        let snapshot = store.snapshot();
        let mut later = Batch::new();
        later.put(key(51), *b"later");
        later.delete(key(54));
        store.commit(later)?;

        let long = |i: u32| [key(i), vec![b'x'; MAX_KEY_LEN]].concat();
        let bounds = |i: u32| {
            [Bound::Unbounded, Bound::Included(key(i)), Bound::Excluded(key(i))]
                .into_iter()
                .chain([Bound::Included(long(i)), Bound::Excluded(long(i))])
        };
        let mut ranges = 0;
        for (lo, hi) in [(0, 99), (20, 21), (50, 53), (70, 30), (98, 99)] {
            for start in bounds(lo) {
                for end in bounds(hi) {
                    for reverse in [false, true] {
                        for page in [1, 3, 7, 200] {
                            let range = (start.clone(), end.clone());
                            let paged: Vec<Entry> =
                                Iter::new(snapshot.clone(), range.clone(), reverse, page)
                                    .collect::<Result<_>>()?;
                            let streamed: Vec<Entry> =
                                Iter::streaming(snapshot.clone(), range.clone(), reverse, page)
                                    .collect::<Result<_>>()?;
                            assert_eq!(streamed, paged, "{range:?} reverse {reverse} page {page}");
                            ranges += usize::from(!paged.is_empty());
                        }
                    }
                }
            }
        }
        assert!(ranges > 100, "most ranges hold keys");
        let all: Vec<Entry> =
            Iter::streaming(snapshot, (Bound::Unbounded, Bound::Unbounded), false, 5)
                .collect::<Result<_>>()?;
        assert!(all.iter().any(|(k, v)| k == &key(54) && v == b"old 54"));
        assert!(all.iter().any(|(k, v)| k == &key(52) && v == b"new 52"));
        assert!(!all.iter().any(|(k, _)| k == &key(51)), "written after the snapshot");
        assert!(!all.iter().any(|(k, _)| k == &key(50)), "removed");
        Ok(())
    }
}
