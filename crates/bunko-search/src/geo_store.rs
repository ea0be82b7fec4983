//! Where a geo index is kept: in the database's store, under the tag the engine reserves for
//! it (`bunko_engine::keys::GEO`, dropped with the database), so that any node sharing the
//! store can rebuild the in-memory R*-tree without running the index function again.
//!
//! | key | value |
//! |---|---|
//! | `0x15, db, sig, 0` | the checkpoint: JSON `{"seq", "purge_seq"}` |
//! | `0x15, db, sig, 1, doc id` | the document's entry: JSON `[rev, GeoJSON geometry]` |
//!
//! Each page of changes writes its entries and the checkpoint in one commit, so the two
//! never disagree after a crash. The entries are also what queries read the geometries
//! from: memory holds only the tree of bounding boxes (`geo.rs`).

use std::ops::Bound;

use bunko_doc::keycode::{KeyReader, KeyWriter};
use bunko_engine::keys::GEO;
use bunko_engine::{Database, Error, Result};
use bunko_storage::{Batch, Iter, Range, Read, Snapshot, prefix_range};
use serde_json::{Value, json};

const CHECKPOINT: u8 = 0;
const ENTRY: u8 = 1;

/// Entries read per page when loading.
const PAGE: usize = 1000;

/// The keys of geo index `sig` of one database.
pub struct GeoKeys {
    db: u64,
    sig: String,
}

impl GeoKeys {
    pub fn new(db: u64, sig: &str) -> GeoKeys {
        GeoKeys { db, sig: sig.to_string() }
    }

    fn base(&self) -> KeyWriter {
        KeyWriter::new(GEO).u64(self.db).str(&self.sig)
    }

    /// Every key of the index.
    pub fn range(&self) -> Range {
        prefix_range(&self.base().finish())
    }

    fn checkpoint(&self) -> Vec<u8> {
        self.base().u8(CHECKPOINT).finish()
    }

    fn entry(&self, id: &str) -> Vec<u8> {
        self.base().u8(ENTRY).str(id).finish()
    }

    /// Stages the removal of document `id`'s entry.
    pub fn delete(&self, batch: &mut Batch, id: &str) {
        batch.delete(self.entry(id));
    }

    /// Stages document `id`'s entry.
    pub fn put(&self, batch: &mut Batch, id: &str, rev: &str, geometry: &Value) {
        batch.put(self.entry(id), json!([rev, geometry]).to_string());
    }

    /// Stages the checkpoint.
    pub fn put_checkpoint(&self, batch: &mut Batch, seq: u64, purge_seq: u64) {
        batch.put(self.checkpoint(), json!({"seq": seq, "purge_seq": purge_seq}).to_string());
    }

    /// The saved `(seq, purge_seq)` (zeros if the index was never written).
    pub fn checkpoint_of(&self, read: &dyn Read) -> Result<(u64, u64)> {
        let Some(value) = read.get(&self.checkpoint())? else { return Ok((0, 0)) };
        let value: Value = serde_json::from_slice(&value)
            .map_err(|e| Error::Corrupt(format!("geo index checkpoint: {e}")))?;
        Ok((value["seq"].as_u64().unwrap_or(0), value["purge_seq"].as_u64().unwrap_or(0)))
    }

    /// Document `id`'s entry: its rev and GeoJSON geometry, if it has one.
    pub fn get(&self, read: &(impl Read + ?Sized), id: &str) -> Result<Option<(String, Value)>> {
        read.get(&self.entry(id))?.map(|value| decode_entry(&value)).transpose()
    }

    /// Every document's entry, `(id, rev, geometry)` in id order, read [`PAGE`] at a time
    /// from `read`.
    pub fn entries(&self, read: Snapshot) -> impl Iterator<Item = Result<(String, String, Value)>> {
        let prefix = self.base().u8(ENTRY).finish();
        Iter::new(read, prefix_range(&prefix), false, PAGE).map(move |row| -> Result<_> {
            let (key, value) = row?;
            let id = KeyReader::new(key.get(prefix.len()..).unwrap_or_default()).string()?;
            let (rev, geometry) = decode_entry(&value)?;
            Ok((id, rev, geometry))
        })
    }

    /// Bytes of the index's keys and values.
    pub fn size(&self, db: &Database) -> u64 {
        Iter::new(db.store().snapshot(), self.range(), false, PAGE)
            .flatten()
            .map(|(k, v)| (k.len() + v.len()) as u64)
            .sum()
    }

    /// Removes the whole index.
    pub fn clear(&self, db: &Database) -> Result<()> {
        bunko_engine::remove_range(db.store().as_ref(), &self.range())
    }
}

/// An entry's value: `[rev, geometry]`.
fn decode_entry(value: &[u8]) -> Result<(String, Value)> {
    serde_json::from_slice(value).map_err(|e| Error::Corrupt(format!("geo index entry: {e}")))
}

/// The signatures of the geo indexes `db`'s store holds, one key read per index.
pub fn stored_sigs(db: &Database) -> Result<Vec<String>> {
    let mut range = prefix_range(&KeyWriter::new(GEO).u64(db.id()).finish());
    let mut sigs = Vec::new();
    while let Some((key, _)) = db.store().scan(&range, false, 1)?.pop() {
        let mut reader = KeyReader::new(&key);
        let (_, _, sig) = (reader.u8()?, reader.u64()?, reader.string()?);
        let (_, after) = GeoKeys::new(db.id(), &sig).range();
        let Bound::Excluded(next) = after else { break };
        range.0 = Bound::Included(next);
        sigs.push(sig);
    }
    Ok(sigs)
}
