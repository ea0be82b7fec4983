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

use crate::build::PageWrite;
use crate::{Index, MapIndex, entries, registry};
use bunko_engine::Database;
use bunko_engine::Result;
use bunko_engine::keys::Key;
use bunko_engine::purge::{PURGE_CHECKPOINT_PREFIX, checkpoint_seq, purge_seq_in, purges_after};
use bunko_engine::records::{self, LocalDoc};

/// The purge seq map index `sig` has applied (its checkpoint; 0 without one).
pub(crate) fn view_purge_seq(db: &Database, snapshot: &Snapshot, sig: &str) -> Result<u64> {
    let (_, local) = purge_checkpoint(db, snapshot, sig)?;
    Ok(local.and_then(|l| checkpoint_seq(&l.body)).unwrap_or(0))
}

/// The id of map index `sig`'s purge checkpoint document, and the document if any.
fn purge_checkpoint(
    db: &Database,
    snapshot: &Snapshot,
    sig: &str,
) -> Result<(String, Option<LocalDoc>)> {
    let local_id = format!("{PURGE_CHECKPOINT_PREFIX}mrview-{sig}");
    let local = match snapshot.get(&Key::Local(db.id(), &local_id).encode())? {
        Some(bytes) => Some(records::decode(&bytes)?),
        None => None,
    };
    Ok((local_id, local))
}

/// Brings every map index of `index` to the database's purge seq (the caller holds
/// their build locks), and returns that purge seq.
pub(crate) fn apply_view_purges(db: &Database, index: &Index) -> Result<u64> {
    let snapshot = db.store().snapshot();
    let latest = purge_seq_in(snapshot.as_ref(), db.id())?;
    for map in &index.maps {
        apply_map_purges(db, index, map, &snapshot, latest)?;
    }
    Ok(latest)
}

fn apply_map_purges(
    db: &Database,
    index: &Index,
    map: &MapIndex,
    snapshot: &Snapshot,
    latest: u64,
) -> Result<()> {
    let db_id = db.id();
    let (local_id, local) = purge_checkpoint(db, snapshot, &map.sig)?;
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
        purges_after(snapshot, db_id, from)?.into_iter().map(|(_, info)| info.id).collect();
    let mut write = PageWrite::new(db_id, snapshot, &index.def);
    let mut count = (0, 0);
    for id in &ids {
        write.replace_rows(&map.sig, &mut count, id, Default::default(), false)?;
    }
    meta.rows = meta.rows.saturating_sub(count.1);
    meta.file = meta.file.saturating_add(write.batch.bytes());
    let mut batch = write.batch;
    batch.put(entries::meta_key(db_id, &map.sig), records::encode(&meta));
    let body = json!({
        "type": "mrview",
        "purge_seq": latest,
        "updated_on": crate::now(),
        "signature": map.sig,
    });
    let generation = local.map_or(0, |l| l.generation) + 1;
    let doc = LocalDoc { generation, body: body.to_string() };
    batch.put(Key::Local(db_id, &local_id).encode(), records::encode(&doc));
    let base = |sig: &str| entries::row_base(db_id, sig, None);
    let ticket = registry(db).order.apply(db.store().as_ref(), batch, &write.changes, base)?;
    *map.meta.lock() = meta;
    db.store().sync(ticket)?;
    Ok(())
}
