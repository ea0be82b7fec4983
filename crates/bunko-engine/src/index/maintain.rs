//! Keeping indexes in step with writes, inside the writing commit.
//!
//! [`Database::index_doc`] moves one document's entries from its old winning body to its
//! new one; [`Database::plan_ddocs`] turns the design documents a commit writes into new
//! and removed indexes. Both only add to the commit's batch; the new registry is
//! installed by the caller while it still holds the writer lock.

use std::collections::HashMap;
use std::sync::Arc;

use bunko_storage::Batch;
use serde_json::{Map, Value};

use super::{Index, IndexDef, IndexMeta, entries};
use crate::database::Database;
use crate::keys::{self, Key};
use crate::{Result, records};

/// A document's winning revision, body and live conflicting revisions, as indexes see it
/// (`None` if deleted). Like CouchDB's indexer, indexes see `_conflicts`.
pub type Winner = Option<(String, Vec<u8>, Vec<String>)>;

/// The design documents a commit changes: id → new winning body (`None`: deleted).
pub type DdocChanges = HashMap<String, Option<Map<String, Value>>>;

/// The indexes a commit makes multikey (or multikey at more paths): storage number → the
/// index and the state to install with the commit (`Database::index_doc`).
pub type MultikeyMarks = HashMap<u64, (Arc<Index>, IndexMeta)>;

impl Database {
    /// Adds to `batch` the index changes of one document going from `old` to `new`, and
    /// the new state of each MongoDB index the new body makes multikey (also in `marks`).
    pub(crate) fn index_doc(
        &self,
        indexes: &[Arc<Index>],
        (batch, marks): (&mut Batch, &mut MultikeyMarks),
        id: &str,
        old: &Winner,
        new: &Winner,
    ) {
        let db = self.id();
        let as_doc = |w: &Winner| {
            w.as_ref().map(|(rev, body, conflicts)| {
                let mut doc = entries::mango_doc(id, rev, body);
                entries::add_conflicts(&mut doc, conflicts);
                doc
            })
        };
        let (old_doc, new_doc) = (as_doc(old), as_doc(new));
        for index in indexes.iter().filter(|i| i.covers(id)) {
            let num = index.num();
            let entries_of = |doc: &Option<Value>| match doc {
                Some(doc) => index.compiled.indexed(db, num, id, doc),
                None => Default::default(),
            };
            let ((before, _), (after, paths)) = (entries_of(&old_doc), entries_of(&new_doc));
            self.mark_multikey(index, &paths, batch, marks);
            for (key, _) in before.difference(&after) {
                batch.delete(key.clone());
            }
            for (key, value) in after.difference(&before) {
                batch.put(key.clone(), value.clone());
            }
        }
    }

    /// Records in `batch` and `marks` that a document has arrays at `paths` of `index`,
    /// unless its state already says so.
    pub(crate) fn mark_multikey(
        &self,
        index: &Arc<Index>,
        paths: &[Vec<usize>],
        batch: &mut Batch,
        marks: &mut MultikeyMarks,
    ) {
        if paths.iter().all(Vec::is_empty) {
            return;
        }
        let current = marks.get(&index.num()).map_or_else(|| index.meta(), |(_, m)| m.clone());
        if let Some(next) = current.with_multikey(paths) {
            let key = Key::IdxMeta(self.id(), &index.def.ddoc, &index.def.name).encode();
            batch.put(key, records::encode(&next));
            marks.insert(next.num, (index.clone(), next));
        }
    }

    /// Plans the index changes of the design documents in a commit: returns the registry
    /// to install with the batch, and the storage numbers of removed indexes.
    pub(crate) fn plan_ddocs(
        &self,
        batch: &mut Batch,
        changes: &DdocChanges,
        seq: u64,
    ) -> (Vec<Arc<Index>>, Vec<u64>) {
        let db = self.id();
        let current = self.indexes.all();
        let mut next: Vec<Arc<Index>> =
            current.iter().filter(|i| !changes.contains_key(&i.def.ddoc)).cloned().collect();
        let (mut fresh, mut dropped) = (0u64, Vec::new());
        for (ddoc, body) in changes {
            let defs = match body {
                Some(body) => IndexDef::from_ddoc(ddoc, body, self.is_partitioned()),
                None => Vec::new(),
            };
            for old in current.iter().filter(|i| &i.def.ddoc == ddoc) {
                if !defs.iter().any(|d| d.same_entries(&old.def)) {
                    batch.delete(Key::IdxMeta(db, ddoc, &old.def.name).encode());
                    batch.put(Key::IdxDropped(db, old.num()).encode(), Vec::new());
                    dropped.push(old.num());
                }
            }
            for def in defs {
                if let Some(kept) = current.iter().find(|i| i.def == def) {
                    next.push(kept.clone());
                    continue;
                }
                // Only options changed that leave the entries as they are (`hidden`, a
                // TTL): the same storage, state and number under the new definition.
                if let Some(kept) = current.iter().find(|i| i.def.same_entries(&def)) {
                    match Index::new(def, kept.meta()) {
                        Ok(index) => next.push(Arc::new(index)),
                        Err(reason) => tracing::warn!(ddoc, reason, "index definition ignored"),
                    }
                    continue;
                }
                fresh += 1;
                let meta = IndexMeta {
                    num: (seq << 16) | fresh,
                    def_hash: def.num(),
                    cursor: None,
                    ready: false,
                    multikey: Vec::new(),
                    covering: true,
                    nested: Some(Vec::new()),
                };
                batch.put(Key::IdxMeta(db, ddoc, &def.name).encode(), records::encode(&meta));
                match Index::new(def, meta) {
                    Ok(index) => next.push(Arc::new(index)),
                    Err(reason) => tracing::warn!(ddoc, reason, "index definition ignored"),
                }
            }
        }
        (next, dropped)
    }

    /// Reads the indexes of this database from its design documents and their stored state.
    pub(crate) fn load_indexes(&self) -> Result<()> {
        let db = self.id();
        let mut loaded = Vec::new();
        let snapshot = self.store.snapshot();
        for (key, value) in snapshot.scan(&keys::idx_meta_range(db), false, usize::MAX)? {
            let meta = IndexMeta::decode(&value)?;
            let (ddoc, name) = keys::decode_idx_meta(&key)?;
            let Some(body) = self.design_body(&ddoc)? else { continue };
            let defs = IndexDef::from_ddoc(&ddoc, &body, self.is_partitioned());
            let Some(def) = defs.into_iter().find(|d| d.name == name) else { continue };
            if def.num() != meta.def_hash {
                continue;
            }
            match Index::new(def, meta) {
                Ok(index) => loaded.push(Arc::new(index)),
                Err(reason) => tracing::warn!(ddoc, reason, "index definition ignored"),
            }
        }
        self.indexes.replace(loaded);
        Ok(())
    }

    /// The winning body of a design document, if it exists and is not deleted.
    pub(crate) fn design_body(&self, id: &str) -> Result<Option<Map<String, Value>>> {
        let Some(info) = self.store.get(&Key::Doc(self.id(), id).encode())? else {
            return Ok(None);
        };
        let record = records::DocRecord::decode(&info)?;
        let (rev, deleted) = record.info.winner()?;
        if deleted {
            return Ok(None);
        }
        let body = crate::read::body_of(self.store.as_ref(), self.id(), id, rev, Some(&record))?;
        Ok(body.and_then(|b| serde_json::from_slice::<Map<String, Value>>(&b).ok()))
    }
}
