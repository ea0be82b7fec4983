//! The figures of `GET /{db}/_design/{ddoc}/_info` for a view group: its sizes and the
//! changes it has yet to index, counted by reading the group's keys (the endpoint is
//! rare, so nothing is kept up to date for it), and `POST /{db}/_compact/{ddoc}`
//! ([`compact_view_group`]), after which the group's `sizes.file` starts again from what
//! it keeps.

use std::sync::Arc;

use bunko_engine::{Database, Result, records};
use bunko_storage::{Batch, Iter, Snapshot};

use crate::purge::view_purge_seq;
use crate::{Index, entries};

/// Sizes in bytes and pending changes of a view group.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ViewInfo {
    /// Bytes of the keys and values of the group's rows: CouchDB's `sizes.active`, the
    /// live data of its views.
    pub active: u64,
    /// Bytes of everything the group's map indexes store (rows, back-index, checkpoints),
    /// or, when more, the bytes their updates appended to the store since the last
    /// compaction on top of what it kept: CouchDB's `sizes.file`, as the store is
    /// log-structured and keeps what an update replaced until compaction.
    pub file: u64,
    /// Bytes of the rows' JSON values (`[key, id, value]`): CouchDB's `sizes.external`.
    pub external: u64,
    /// Changes after the group's lowest checkpoint: `updates_pending.total`.
    pub pending: u64,
    /// The purge seq every map index of the group has applied (`purge_seq`).
    pub purge_seq: u64,
}

/// Counts the sizes and pending changes of `index` in one snapshot.
pub fn view_info(db: &Database, index: &Index) -> Result<ViewInfo> {
    let snapshot = db.store().snapshot();
    let mut info = ViewInfo::default();
    for map in &index.maps {
        let sizes = map_sizes(&snapshot, db.id(), &map.sig)?;
        info.active += sizes.rows;
        info.external += sizes.external;
        info.file += map.meta().file.max(sizes.stored);
    }
    info.pending = db.pending_changes(index.seq())?;
    info.purge_seq = index
        .maps
        .iter()
        .map(|map| view_purge_seq(db, &snapshot, &map.sig))
        .collect::<Result<Vec<u64>>>()?
        .into_iter()
        .min()
        .unwrap_or(0);
    Ok(info)
}

/// The sizes of one map index, read from its keys.
struct MapSizes {
    /// Every key and value it stores.
    stored: u64,
    /// Its rows' keys and values.
    rows: u64,
    /// Its rows' values.
    external: u64,
}

fn map_sizes(snapshot: &Snapshot, db: u64, sig: &str) -> Result<MapSizes> {
    let mut sizes = MapSizes { stored: 0, rows: 0, external: 0 };
    for range in entries::map_ranges(db, sig) {
        for entry in Iter::new(snapshot.clone(), range, false, 1024) {
            let (key, value) = entry?;
            sizes.stored += (key.len() + value.len()) as u64;
            if key.first() == Some(&entries::VIEW_ROW) {
                sizes.rows += (key.len() + value.len()) as u64;
                sizes.external += value.len() as u64;
            }
        }
    }
    Ok(sizes)
}

/// `POST /{db}/_compact/{ddoc}`: frees what the group's updates replaced (the store's
/// compaction, [`bunko_storage::Store::reclaim`], shared with the database's), then
/// restarts each map index's `sizes.file` from what it keeps. Runs while the database
/// shows `compact_running` ([`Database::run_compaction`]).
pub fn compact_view_group(db: &Arc<Database>, index: Arc<Index>) {
    db.run_compaction(move |db| {
        db.store().reclaim()?;
        for map in &index.maps {
            let _build = map.build.lock();
            let snapshot = db.store().snapshot();
            let stored = map_sizes(&snapshot, db.id(), &map.sig)?.stored;
            let mut meta = map.meta();
            meta.file = stored;
            let mut batch = Batch::new();
            batch.put(entries::meta_key(db.id(), &map.sig), records::encode(&meta));
            db.store().commit(batch)?;
            *map.meta.lock() = meta;
        }
        Ok(())
    });
}
