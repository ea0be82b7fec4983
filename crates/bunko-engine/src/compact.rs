//! Compaction: removes the bodies of revisions that are no longer leaves. Until then a
//! `GET ?rev=<old>` still finds them, as in CouchDB. The LSM store reclaims the space of
//! removed keys in its own background compaction.
//!
//! Leaves only ever stop being leaves, so a body found non-leaf in a snapshot is safe to
//! remove even while writes go on; new revisions are not in the snapshot and are untouched.

use bunko_storage::{Batch, Iter};

use crate::Result;
use crate::database::Database;
use crate::keys::{self, Key};
use crate::records::{self, DocInfo};

impl Database {
    /// Removes all non-leaf revision bodies; returns how many were removed.
    pub fn compact(&self) -> Result<u64> {
        let db = self.id();
        let snapshot = self.snapshot();
        let mut batch = Batch::new();
        let mut removed = 0;
        for entry in Iter::new(snapshot.clone(), keys::doc_range(db), false, 256) {
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
        Ok(removed)
    }
}
