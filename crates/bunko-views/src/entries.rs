//! View keys: the rows, the back-index and the checkpoint of each map index.
//!
//! ```text
//! 0x0D | db | sig                                   -> MapMeta (postcard)
//! 0x0E | db | sig | [partition] | collate(key) | doc_id | n  -> JSON [key, doc_id, value]
//! 0x0F | db | sig | doc_id                          -> Vec<row key> (postcard)
//! ```
//!
//! `sig` is the map index's signature ([`crate::MapDef::sig`]) and `n` the row's position
//! among the rows the document emitted (u64), so one document may emit the same key twice.
//! The collated key is one-way, hence the original key in the value; it is prefix-free, so
//! the rows of one key are one contiguous range, sorted by document id.
//!
//! Data dirs written before map indexes keyed the same tags by a design document's group
//! signature (with the map's position after it). No map signature equals such a group
//! signature (the terms hashed differ), so those keys are never read as a map index's;
//! `_view_cleanup` finds their checkpoints among the unreferenced ones and removes them.

use bunko_doc::collate;
use bunko_doc::keycode::KeyWriter;
use bunko_storage::{Range, prefix_range};
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use bunko_engine::keys::{VIEW_BACK, VIEW_META, VIEW_ROW};

/// The stored state of one map index.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MapMeta {
    /// Every change up to this seq is in the index.
    pub seq: u64,
    /// Rows in the index (`total_rows` of a global query).
    pub rows: u64,
    /// Bytes the index's updates appended to the store since its last compaction, on top
    /// of what that compaction kept (its part of `sizes.file`). Checkpoints written before
    /// this counter read as 0.
    pub file: u64,
}

impl MapMeta {
    /// Decodes a checkpoint of any version (one without `file` is shorter).
    pub fn decode(bytes: &[u8]) -> bunko_engine::Result<MapMeta> {
        bunko_engine::records::decode::<MapMeta>(bytes).or_else(|_| {
            let (seq, rows) = bunko_engine::records::decode::<(u64, u64)>(bytes)?;
            Ok(MapMeta { seq, rows, file: 0 })
        })
    }
}

/// The row keys a document has in a map index.
pub type BackIndex = Vec<Vec<u8>>;

/// A back-index as stored: what `records::encode` (postcard) writes for it, with each key
/// handed over as one byte string (`serde_bytes`), so postcard copies it whole instead of
/// taking it byte by byte as a `Vec<u8>` (a twentieth of a first build's CPU). The bytes
/// are the same either way, so stored back-indexes read back unchanged.
pub fn encode_back(index: &BackIndex) -> Vec<u8> {
    let keys: Vec<&serde_bytes::Bytes> = index.iter().map(|k| serde_bytes::Bytes::new(k)).collect();
    bunko_engine::records::encode(&keys)
}

pub fn meta_key(db: u64, sig: &str) -> Vec<u8> {
    KeyWriter::new(VIEW_META).u64(db).str(sig).finish()
}

pub fn back_key(db: u64, sig: &str, id: &str) -> Vec<u8> {
    KeyWriter::new(VIEW_BACK).u64(db).str(sig).str(id).finish()
}

/// Where a first build of map index `sig` read in id order stands: `(seq, last id)`
/// ([`ScanMark`]), kept with each of its pages until its last. It is the back-index key of
/// the empty id, which no document has, so it goes with the map index's other keys.
pub fn scan_key(db: u64, sig: &str) -> Vec<u8> {
    back_key(db, sig, "")
}

/// A first build's position: the last seq of its first snapshot and the last id it read.
pub type ScanMark = (u64, String);

/// The bytes every row of map index `sig` (in `partition`, for partitioned groups)
/// starts with.
pub fn row_base(db: u64, sig: &str, partition: Option<&str>) -> Vec<u8> {
    let w = KeyWriter::new(VIEW_ROW).u64(db).str(sig);
    match partition {
        Some(p) => w.str(p).finish(),
        None => w.finish(),
    }
}

/// Appends the collated encoding of a view key.
pub fn push_key(out: &mut Vec<u8>, key: &Value, raw: bool) {
    if raw {
        collate::encode_raw(key, out);
    } else {
        collate::encode(key, out);
    }
}

/// The full key of one row.
pub fn row_key(base: &[u8], key: &Value, raw: bool, id: &str, n: u64) -> Vec<u8> {
    // Room for a short key's sort key and the id, so that most rows are written without
    // growing the vector.
    let mut bytes = Vec::with_capacity(base.len() + 2 * id.len() + 64);
    bytes.extend_from_slice(base);
    push_key(&mut bytes, key, raw);
    KeyWriter::from_bytes(bytes).str(id).u64(n).finish()
}

/// Appends a document id as it follows the key in a row key.
pub fn push_id(out: Vec<u8>, id: &str) -> Vec<u8> {
    KeyWriter::from_bytes(out).str(id).finish()
}

/// Every key of a map index in a database (rows, back-index, checkpoint).
pub fn map_ranges(db: u64, sig: &str) -> Vec<Range> {
    [VIEW_ROW, VIEW_BACK]
        .iter()
        .map(|&tag| prefix_range(&KeyWriter::new(tag).u64(db).str(sig).finish()))
        .chain(std::iter::once(prefix_range(&meta_key(db, sig))))
        .collect()
}

/// The range of all checkpoints of a database.
pub fn meta_range(db: u64) -> Range {
    prefix_range(&KeyWriter::new(VIEW_META).u64(db).finish())
}

/// Decodes the signature of a `MapMeta` key.
pub fn decode_meta(key: &[u8]) -> Option<String> {
    let mut r = bunko_doc::keycode::KeyReader::new(key);
    (r.u8().ok()? == VIEW_META).then_some(())?;
    r.u64().ok()?;
    r.string().ok()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn checkpoints_written_before_the_file_counter_still_read() {
        let old = bunko_engine::records::encode(&(12_u64, 7_u64));
        assert_eq!(MapMeta::decode(&old).ok(), Some(MapMeta { seq: 12, rows: 7, file: 0 }));
        let new = MapMeta { seq: 12, rows: 7, file: 900 };
        assert_eq!(MapMeta::decode(&bunko_engine::records::encode(&new)).ok(), Some(new));
    }

    #[test]
    fn rows_sort_by_key_then_id_then_n() {
        let base = row_base(1, "s", None);
        let keys = [
            row_key(&base, &json!(null), false, "a", 0),
            row_key(&base, &json!(1), false, "a", 0),
            row_key(&base, &json!("a"), false, "b", 0),
            row_key(&base, &json!("a"), false, "b", 1),
            row_key(&base, &json!("b"), false, "a", 0),
            row_key(&base, &json!(["a"]), false, "a", 0),
        ];
        let mut sorted = keys.to_vec();
        sorted.sort();
        assert_eq!(sorted, keys.to_vec());
        assert_eq!(decode_meta(&meta_key(3, "sig")).as_deref(), Some("sig"));
    }

    #[test]
    fn back_indexes_encode_as_postcard_does() {
        let long = vec![7_u8; 300];
        let many: BackIndex = (0..200_u32).map(|n| n.to_be_bytes().to_vec()).collect();
        for index in [vec![], vec![vec![]], vec![b"ab".to_vec(), long.clone()], vec![long; 3], many]
        {
            assert_eq!(encode_back(&index), bunko_engine::records::encode(&index));
            let back = bunko_engine::records::decode::<BackIndex>(&encode_back(&index));
            assert_eq!(back.ok(), Some(index));
        }
    }
}
