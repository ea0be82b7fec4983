//! The index key a MongoDB index scan met a document at (`find`'s `returnKey` and
//! `{$meta: "indexKey"}`): of the document's keys in the scanned index, the first one in
//! the scan's direction that lies within the scan's bounds, which is the entry the scan
//! returned the document for (a multikey document is returned once, at its first entry).

use std::ops::RangeBounds;

use bunko_query::collation;
use serde_json::Value;

use super::mongo_index::MongoScan;
use crate::Result;
use crate::database::Database;
use crate::index::mongo::{doc_keys, key_prefix};

impl Database {
    /// The key (one value per index field, a hashed field as its hash) of `doc` (its
    /// MongoDB matching form) at which `scan` finds it; `None` when the index holds no key
    /// of it (a sparse or partial index that lacks it).
    pub fn mongo_key(&self, scan: &MongoScan, doc: &Value) -> Result<Option<Vec<Value>>> {
        let index = &scan.index;
        let Some(spec) = &index.def.mongo else { return Ok(None) };
        let keys = doc_keys(spec, index.compiled.paths(), index.compiled.partial(), doc)?;
        let ranges = scan.storage_ranges(self.id());
        let encoded = collation::with(index.compiled.collation(), || {
            let at = |key: Vec<Value>| (key_prefix(self.id(), index.num(), &key), key);
            keys.into_iter().map(at).collect::<Vec<_>>()
        });
        let within: Vec<&(Vec<u8>, Vec<Value>)> =
            encoded.iter().filter(|(bytes, _)| ranges.iter().any(|r| r.contains(bytes))).collect();
        // A document the bounds do not reach (none should be returned) keeps its first key.
        let candidates = if within.is_empty() { encoded.iter().collect() } else { within };
        let first = match scan.reverse {
            false => candidates.into_iter().min_by(|a, b| a.0.cmp(&b.0)),
            true => candidates.into_iter().max_by(|a, b| a.0.cmp(&b.0)),
        };
        Ok(first.map(|(_, key)| key.clone()))
    }
}
