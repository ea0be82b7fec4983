//! The figures of `GET /{db}/_design/{ddoc}/_info` for a view group: its sizes and the
//! changes it has yet to index, counted by reading the group's keys (the endpoint is
//! rare, so nothing is kept up to date for it).

use bunko_storage::Iter;

use crate::purge::view_purge_seq;
use crate::{Index, entries};
use bunko_engine::Database;
use bunko_engine::Result;

/// Sizes in bytes and pending changes of a view group.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ViewInfo {
    /// Bytes of every key and value the group's map indexes store (rows, back-index,
    /// checkpoints): CouchDB's `sizes.active` (and `file`, as the store is shared).
    pub active: u64,
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
        for range in entries::map_ranges(db.id(), &map.sig) {
            for entry in Iter::new(snapshot.clone(), range, false, 1024) {
                let (key, value) = entry?;
                info.active += (key.len() + value.len()) as u64;
                if key.first() == Some(&entries::VIEW_ROW) {
                    info.external += value.len() as u64;
                }
            }
        }
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
