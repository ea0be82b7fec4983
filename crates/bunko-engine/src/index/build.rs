//! Filling a new index from the documents that already exist, in the background.
//!
//! One thread per database walks the documents in id order, [`BATCH`] at a time. Each
//! step holds the writer lock while it reads the next documents and applies their entries
//! together with the advanced cursor, so no write can slip between what the builder read
//! and what it wrote; the lock is released before the sync, as for every commit. Writes
//! to ids at or before the cursor maintain the index themselves ([`super::Index::covers`]).
//! Removed indexes lose their entries the same way, from an `IdxDropped` marker, so both
//! jobs resume after a restart.

use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bunko_doc::id::{DocKind, kind};
use bunko_storage::{Batch, Range, Store};

use super::{Index, IndexMeta, entries};
use crate::database::Database;
use crate::keys::{self, Key};
use crate::{Result, records};

/// Documents indexed per step.
pub const BATCH: usize = 1000;

/// Progress of one index build, for `GET /_active_tasks`.
#[derive(Debug, Clone)]
pub struct BuildTask {
    pub database: String,
    pub ddoc: String,
    pub index: String,
    pub docs_done: u64,
    pub docs_total: u64,
}

impl Database {
    /// Starts the background builder if an index still needs filling.
    pub(crate) fn spawn_builder(self: &Arc<Self>) {
        let pending = |db: &Database| db.indexes.all().iter().any(|i| !i.is_ready());
        if !pending(self) || self.building.swap(true, Ordering::AcqRel) {
            return;
        }
        let db = self.clone();
        std::thread::spawn(move || {
            loop {
                while let Some(index) = db.indexes.all().iter().find(|i| !i.is_ready()).cloned() {
                    if let Err(err) = db.build_step(&index) {
                        tracing::warn!(%err, index = index.def.name, "index build stopped");
                        db.building.store(false, Ordering::Release);
                        return;
                    }
                }
                db.building.store(false, Ordering::Release);
                // An index added while this thread was finishing is built here, not lost.
                if !pending(&db) || db.building.swap(true, Ordering::AcqRel) {
                    return;
                }
            }
        });
    }

    /// Indexes the next documents after the cursor of `index`.
    fn build_step(&self, index: &Index) -> Result<()> {
        let writer = self.lock_writer()?;
        let meta = index.meta();
        if meta.ready || !self.indexes.all().iter().any(|i| std::ptr::eq(i.as_ref(), index)) {
            index.set_meta(IndexMeta { ready: true, ..meta });
            return Ok(());
        }
        let db = self.id();
        let range = after(keys::doc_range(db), meta.cursor.as_deref().map(|c| Key::Doc(db, c)));
        let page = self.store.scan(&range, false, BATCH)?;
        let mut batch = Batch::new();
        let mut cursor = meta.cursor.clone();
        let mut multikey = meta.clone();
        for (key, info) in &page {
            let id = keys::decode_doc(key)?;
            if kind(&id) == DocKind::Normal {
                let record = records::DocRecord::decode(info)?;
                let info = &record.info;
                let (rev, deleted) = info.winner()?;
                let body = crate::read::body_of(self.store.as_ref(), db, &id, rev, Some(&record))?;
                let rev = rev.to_string();
                if let (false, Some(body)) = (deleted, body) {
                    let mut doc = entries::mango_doc(&id, &rev, &body);
                    entries::add_conflicts(&mut doc, &entries::conflicts_of(info));
                    let (entries, paths) = index.compiled.indexed(db, meta.num, &id, &doc);
                    for (k, v) in entries {
                        batch.put(k, v);
                    }
                    if let Some(more) = multikey.with_multikey(&paths) {
                        multikey = more;
                    }
                }
            }
            cursor = Some(id);
        }
        let next = IndexMeta { cursor, ready: page.len() < BATCH, ..multikey };
        batch.put(
            Key::IdxMeta(db, &index.def.ddoc, &index.def.name).encode(),
            records::encode(&next),
        );
        let ticket = self.store.apply(batch)?;
        index.add_built(page.len() as u64);
        index.set_meta(next);
        drop(writer);
        self.store.sync(ticket)?;
        Ok(())
    }

    /// The builds still running, for `_active_tasks`.
    pub fn build_tasks(&self) -> Vec<BuildTask> {
        let total = self.info().stats.doc_count;
        self.indexes
            .all()
            .iter()
            .filter(|i| !i.is_ready())
            .map(|i| BuildTask {
                database: self.name(),
                ddoc: i.def.ddoc.clone(),
                index: i.def.name.clone(),
                docs_done: i.built(),
                docs_total: total,
            })
            .collect()
    }
}

/// `range` without its keys up to and including `key`.
fn after(range: Range, key: Option<Key<'_>>) -> Range {
    match key {
        Some(key) => (Bound::Excluded(key.encode()), range.1),
        None => range,
    }
}

/// Removes the entries of a dropped index, then its marker.
pub(crate) fn remove_index_entries(store: &dyn Store, db: u64, num: u64) -> Result<()> {
    crate::catalog::remove_range(store, &entries::range(db, num))?;
    let mut batch = Batch::new();
    batch.delete(Key::IdxDropped(db, num).encode());
    store.commit(batch)?;
    Ok(())
}
