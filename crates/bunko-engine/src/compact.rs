//! Compaction: removes the bodies of revisions that are no longer leaves, the change
//! journal entries up to where it started (`events.rs`: their events would miss bodies), and
//! the purge records past `purged_infos_limit` that every index has applied (`purge.rs`). Until
//! then a `GET ?rev=<old>` still finds them, as in CouchDB. Then the store frees the space of
//! every removed or overwritten key ([`bunko_storage::Store::reclaim`]: a major compaction of the
//! whole store, which all databases share, and the journals already in tables), so that
//! nothing reclaimable is left; `compact_running` is true meanwhile. Last, `sizes.file`
//! restarts from what the database keeps.
//!
//! Leaves only ever stop being leaves, so a body found non-leaf in a snapshot is safe to
//! remove even while writes go on; new revisions are not in the snapshot and are untouched.
//!
//! Then it removes the attachment bodies no leaf refers to. A body unreferenced in the
//! snapshot may be referenced again by a write after it (the same bytes uploaded anew
//! write no chunks: they are found stored), so the removal is decided under the writer
//! lock: the documents changed since the snapshot (their `Seq` entries) are read again
//! and their attachments spared, and no write can slip in before the removal is applied.

use std::collections::{HashMap, HashSet};
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bunko_storage::{Batch, Iter, Read, Snapshot};

use crate::Result;
use crate::database::Database;
use crate::keys::{self, Key};
use crate::records::{self, DocInfo, DocRecord};

impl Database {
    /// Starts [`Database::compact`] on a thread of its own; `compact_running`
    /// ([`Database::is_compacting`]) is true from now until it ends.
    pub fn start_compaction(self: &Arc<Self>) {
        let db = self.clone();
        let running = Running::new(self);
        std::thread::spawn(move || {
            match db.compact() {
                Ok(removed) => tracing::info!(db = db.name(), removed, "compaction finished"),
                Err(err) => tracing::warn!(db = db.name(), %err, "compaction failed"),
            }
            drop(running);
        });
    }

    /// Runs `work` (a compaction of something the database holds: a view group's) on a
    /// thread of its own; `compact_running` is true until it ends.
    pub fn run_compaction(
        self: &Arc<Self>,
        work: impl FnOnce(&Database) -> Result<()> + Send + 'static,
    ) {
        let db = self.clone();
        let running = Running::new(self);
        std::thread::spawn(move || {
            if let Err(err) = work(&db) {
                tracing::warn!(db = db.name(), %err, "compaction failed");
            }
            drop(running);
        });
    }

    /// Whether a compaction of this database is running (`compact_running`).
    pub fn is_compacting(&self) -> bool {
        self.compactions.load(Ordering::Acquire) > 0
    }

    /// Removes all non-leaf revision bodies, then frees the space of what is removed;
    /// returns how many bodies were removed.
    pub fn compact(&self) -> Result<u64> {
        let _running = Running::new(self);
        let db = self.id();
        let snapshot = self.snapshot();
        let upto = match snapshot.scan(&keys::seq_range(db), true, 1)?.first() {
            Some((key, _)) => keys::decode_seq(key)?,
            None => 0,
        };
        let mut batch = Batch::new();
        let mut removed = 0;
        for entry in Iter::new(snapshot.clone(), keys::doc_range(db), false, 256).heads() {
            let (key, value) = entry?;
            let id = keys::decode_doc(&key)?;
            let info: DocInfo = records::decode(&value)?;
            if info.tree.nodes().len() < 2 {
                continue;
            }
            let leaves: Vec<String> = info
                .tree
                .leaves()
                .into_iter()
                .filter_map(|i| info.tree.node(i))
                .map(|n| n.rev.to_string())
                .collect();
            for body in Iter::new(snapshot.clone(), keys::rev_range(db, &id), false, 64) {
                let (body_key, _) = body?;
                let is_leaf = leaves.iter().any(|rev| Key::Rev(db, &id, rev).encode() == body_key);
                if !is_leaf {
                    batch.delete(body_key);
                    removed += 1;
                }
            }
            if batch.len() >= 1000 {
                self.store.commit(std::mem::take(&mut batch))?;
            }
        }
        if !batch.is_empty() {
            self.store.commit(batch)?;
        }
        self.remove_orphan_attachments(&snapshot)?;
        self.trim_journal(upto)?;
        self.trim_purge_infos()?;
        // The removals above only mark keys dead; this frees their space on disk. An open
        // snapshot keeps the store from dropping what it can see, so this one goes first.
        drop(snapshot);
        self.store.reclaim()?;
        self.restart_file_size()?;
        Ok(removed)
    }

    /// After a compaction `sizes.file` starts again from the bytes the database's
    /// documents keep in the store ([`keys::document_ranges`]), plus what writes added
    /// while they were counted.
    fn restart_file_size(&self) -> Result<()> {
        let db = self.id();
        let (snapshot, before) = {
            let writer = self.lock_writer()?;
            (self.store.snapshot(), writer.stats.file)
        };
        let mut kept = 0u64;
        for range in keys::document_ranges(db) {
            for entry in Iter::new(snapshot.clone(), range, false, 1024) {
                let (key, value) = entry?;
                kept += (key.len() + value.len()) as u64;
            }
        }
        drop(snapshot);
        let writer = self.lock_writer()?;
        let mut stats = writer.stats;
        stats.file = kept.saturating_add(stats.file.saturating_sub(before));
        let mut batch = Batch::new();
        batch.put(Key::Stats(db).encode(), records::encode(&stats));
        let seq = writer.seq;
        self.commit_locked(writer, batch, &Default::default(), seq, stats)
    }

    /// Removes the attachment bodies that no leaf revision refers to; returns their size.
    fn remove_orphan_attachments(&self, snapshot: &Snapshot) -> Result<u64> {
        let db = self.id();
        let mut orphans: HashMap<Vec<u8>, u64> = HashMap::new();
        for entry in Iter::new(snapshot.clone(), keys::att_range(db), false, 64) {
            let (key, value) = entry?;
            *orphans.entry(keys::decode_att_chunk(&key)?).or_default() += value.len() as u64;
        }
        if orphans.is_empty() {
            return Ok(0);
        }
        for entry in Iter::new(snapshot.clone(), keys::doc_range(db), false, 256) {
            let (key, value) = entry?;
            let id = keys::decode_doc(&key)?;
            let record = DocRecord::decode(&value)?;
            spare(snapshot.as_ref(), db, &id, &record, &mut orphans)?;
        }
        let since = match snapshot.scan(&keys::seq_range(db), true, 1)?.first() {
            Some((key, _)) => keys::decode_seq(key)?,
            None => 0,
        };
        let writer = self.lock_writer()?;
        let later = (Bound::Excluded(Key::Seq(db, since).encode()), keys::seq_range(db).1);
        for entry in Iter::new(self.store.snapshot(), later, false, 256) {
            let (_, id) = entry?;
            let id = String::from_utf8_lossy(&id).into_owned();
            if let Some(record) = crate::read::doc_record_in(self.store.as_ref(), db, &id)? {
                spare(self.store.as_ref(), db, &id, &record, &mut orphans)?;
            }
        }
        if orphans.is_empty() {
            return Ok(0);
        }
        orphans.retain(|digest, _| !crate::upload::is_live(digest));
        let mut batch = Batch::new();
        let mut freed = 0;
        // An alias whose token's chunks go goes with them, and so does the gzip mark of
        // a body that goes.
        let mut gone: HashSet<Vec<u8>> = orphans.keys().cloned().collect();
        for entry in Iter::new(self.store.snapshot(), keys::att_alias_range(db), false, 64) {
            let (key, token) = entry?;
            if orphans.contains_key(&token) {
                gone.insert(keys::decode_att_alias(&key)?);
                batch.delete(key);
            }
        }
        for entry in Iter::new(self.store.snapshot(), keys::att_gzip_range(db), false, 64) {
            let (key, _) = entry?;
            if gone.contains(&keys::decode_att_gzip(&key)?) {
                batch.delete(key);
            }
        }
        for (md5, bytes) in &orphans {
            for entry in Iter::new(self.store.snapshot(), keys::att_body_range(db, md5), false, 8) {
                batch.delete(entry?.0);
            }
            freed += bytes;
        }
        let mut stats = writer.stats;
        stats.active = stats.active.saturating_sub(freed);
        batch.put(Key::Stats(db).encode(), records::encode(&stats));
        let seq = writer.seq;
        self.commit_locked(writer, batch, &Default::default(), seq, stats)?;
        Ok(freed)
    }
}

/// Counts one running compaction of a database while it lives.
struct Running(Arc<AtomicUsize>);

impl Running {
    fn new(db: &Database) -> Running {
        db.compactions.fetch_add(1, Ordering::AcqRel);
        Running(db.compactions.clone())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Takes the attachment bodies the leaves of `info` refer to out of `orphans`.
fn spare(
    store: &dyn Read,
    db: u64,
    id: &str,
    record: &DocRecord,
    orphans: &mut HashMap<Vec<u8>, u64>,
) -> Result<()> {
    let tree = &record.info.tree;
    for leaf in tree.leaves().into_iter().filter_map(|i| tree.node(i)) {
        let Some(body) = crate::read::body_of(store, db, id, &leaf.rev, Some(record))? else {
            continue;
        };
        for att in crate::attachments::of_body(&body) {
            orphans.remove(att.md5.as_slice());
            // A streamed body's chunks carry its upload's token (`crate::upload`).
            if let Some(token) = store.get(&Key::AttAlias(db, &att.md5).encode())? {
                orphans.remove(&token);
            }
        }
    }
    Ok(())
}
