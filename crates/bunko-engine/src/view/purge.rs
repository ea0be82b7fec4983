//! Applying `_purge` to view rows: a purged document leaves no `Seq` entry to map again,
//! so each map index keeps a purge checkpoint, CouchDB's `_local/purge-mrview-{sig}`
//! document (`type`, `purge_seq`, `updated_on`, `signature`), and an update first removes
//! the rows of every document purged after it (through the back-index), then moves the
//! checkpoint, in one commit. A document that kept revisions got a new seq with its purge,
//! so the change pages that follow map its new winner.
//!
//! A map index without a checkpoint that starts from seq 0 has no purged rows and starts
//! at the current purge seq; one that has rows (built before purges were tracked) applies
//! every purge record still kept.

use std::collections::BTreeSet;

use bunko_storage::Snapshot;
use serde_json::json;

use super::build::PageWrite;
use super::{Index, MapIndex, entries, registry};
use crate::Result;
use crate::database::Database;
use crate::keys::Key;
use crate::purge::{PURGE_CHECKPOINT_PREFIX, checkpoint_seq, purge_seq_in, purges_after};
use crate::records::{self, LocalDoc};

impl Database {
    /// The purge seq map index `sig` has applied (its checkpoint; 0 without one).
    pub(super) fn view_purge_seq(&self, snapshot: &Snapshot, sig: &str) -> Result<u64> {
        let (_, local) = self.purge_checkpoint(snapshot, sig)?;
        Ok(local.and_then(|l| checkpoint_seq(&l.body)).unwrap_or(0))
    }

    /// The id of map index `sig`'s purge checkpoint document, and the document if any.
    fn purge_checkpoint(
        &self,
        snapshot: &Snapshot,
        sig: &str,
    ) -> Result<(String, Option<LocalDoc>)> {
        let local_id = format!("{PURGE_CHECKPOINT_PREFIX}mrview-{sig}");
        let local = match snapshot.get(&Key::Local(self.id(), &local_id).encode())? {
            Some(bytes) => Some(records::decode(&bytes)?),
            None => None,
        };
        Ok((local_id, local))
    }

    /// Brings every map index of `index` to the database's purge seq (the caller holds
    /// their build locks).
    pub(super) fn apply_view_purges(&self, index: &Index) -> Result<()> {
        let snapshot = self.store.snapshot();
        let latest = purge_seq_in(snapshot.as_ref(), self.id())?;
        for map in &index.maps {
            self.apply_map_purges(index, map, &snapshot, latest)?;
        }
        Ok(())
    }

    fn apply_map_purges(
        &self,
        index: &Index,
        map: &MapIndex,
        snapshot: &Snapshot,
        latest: u64,
    ) -> Result<()> {
        let db = self.id();
        let (local_id, local) = self.purge_checkpoint(snapshot, &map.sig)?;
        let checkpoint = local.as_ref().and_then(|l| checkpoint_seq(&l.body));
        let mut meta = map.meta();
        let from = match checkpoint {
            Some(seq) if seq >= latest => return Ok(()),
            Some(seq) => seq,
            None if latest == 0 => return Ok(()),
            None if meta.seq == 0 => latest,
            None => 0,
        };
        let ids: BTreeSet<String> =
            purges_after(snapshot, db, from)?.into_iter().map(|(_, info)| info.id).collect();
        let mut write = PageWrite::new(db, snapshot, &index.def);
        let mut count = (0, 0);
        for id in &ids {
            write.replace_rows(&map.sig, &mut count, id, Default::default())?;
        }
        meta.rows = meta.rows.saturating_sub(count.1);
        let mut batch = write.batch;
        batch.put(entries::meta_key(db, &map.sig), records::encode(&meta));
        let body = json!({
            "type": "mrview",
            "purge_seq": latest,
            "updated_on": crate::catalog::now_us() / 1_000_000,
            "signature": map.sig,
        });
        let generation = local.map_or(0, |l| l.generation) + 1;
        let doc = LocalDoc { generation, body: body.to_string() };
        batch.put(Key::Local(db, &local_id).encode(), records::encode(&doc));
        let base = |sig: &str| entries::row_base(db, sig, None);
        let ticket =
            registry(self).order.apply(self.store.as_ref(), batch, &write.changes, base)?;
        *map.meta.lock() = meta;
        self.store.sync(ticket)?;
        Ok(())
    }
}
