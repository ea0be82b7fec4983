//! The metadata `find` can return with a document: the key of the index the query found
//! it at (`returnKey`, `{$meta: "indexKey"}`) and its record id (`showRecordId`,
//! `{$meta: "recordId"}`).
//!
//! **Index keys** follow the plan `find` runs ([`KeySource::of`]): a MongoDB index scan
//! gives the document's key in that index (field names as in the key pattern, a hashed
//! field as its hash; for a multikey document the key the scan met it at,
//! `Database::mongo_key`); a query MongoDB answers from its `_id` index (an unhinted `_id`
//! condition that bounds it, a sort on `_id` alone, or a hint naming `_id_`) gives `{_id}`;
//! a collection scan gives no key (`returnKey` documents are then `{}`, as MongoDB's).
//!
//! **Record ids** are Bunko's, not MongoDB's: Bunko stores a document under its `_id` and
//! keeps no separate record number, so a document's `$recordId` is the 64-bit hash of its
//! `_id` that a `{_id: "hashed"}` index would hold. It is stable for the document's life
//! (updates keep it), distinct between documents in practice, and (unlike MongoDB's) not in
//! insertion order.

use std::sync::Arc;

use bson::{Bson, Document};
use bunko_doc::ejson;
use bunko_engine::Database;
use bunko_engine::find::mongo_index::{MongoScan, NATURAL, bounds_path};
use bunko_query::{Direction, FieldPath, Selector};

use crate::error::MongoError;

/// Where a `find` finds its documents, for their index keys.
pub(crate) enum KeySource {
    /// A scan of a MongoDB index.
    Index(Arc<Database>, MongoScan),
    /// MongoDB's `_id` index.
    Id,
    /// A collection scan: no key.
    Scan,
}

impl std::fmt::Debug for KeySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeySource::Index(_, scan) => write!(f, "Index({})", scan.index.def.name),
            KeySource::Id => f.write_str("Id"),
            KeySource::Scan => f.write_str("Scan"),
        }
    }
}

impl KeySource {
    /// The source of a `find` over `db` for `selector` sorted by `order`, as `find_mongo`
    /// plans it; `hint` is the index the find's hint names (`None` for none or the `_id`
    /// index, which `id_hinted` tells apart).
    pub(crate) fn of(
        db: &Arc<Database>,
        selector: &Selector,
        order: &[(FieldPath, Direction)],
        (hint, id_hinted): (Option<&str>, bool),
    ) -> Result<KeySource, MongoError> {
        if hint == Some(NATURAL) {
            return Ok(KeySource::Scan);
        }
        let scan = match db.mongo_plan(selector, hint)? {
            Some(scan) => Some(scan),
            None if hint.is_none() => db.mongo_sort_plan(order),
            None => None,
        };
        if let Some(scan) = scan {
            return Ok(KeySource::Index(db.clone(), scan));
        }
        let id = FieldPath::from_segments(["_id"]);
        let by_id = matches!(order, [(path, _)] if path.is_id());
        Ok(match id_hinted || by_id || (order.is_empty() && bounds_path(selector, &id)) {
            true => KeySource::Id,
            false => KeySource::Scan,
        })
    }

    /// The key `doc` was found at; `None` for a collection scan (or an index lacking it).
    pub(crate) fn key(&self, doc: &Document) -> Result<Option<Document>, MongoError> {
        match self {
            KeySource::Index(db, scan) => {
                let form = ejson::value_to_json(&Bson::Document(doc.clone()));
                let Some(values) = db.mongo_key(scan, &form)? else { return Ok(None) };
                let names = scan.index.def.fields.iter().map(|f| f.name.clone());
                Ok(Some(names.zip(values.iter().map(ejson::value_from_json)).collect()))
            }
            KeySource::Id => {
                let id = doc.get("_id").cloned().unwrap_or(Bson::Null);
                Ok(Some(bson::doc! {"_id": id}))
            }
            KeySource::Scan => Ok(None),
        }
    }
}

/// A document's record id: the hash of its `_id` (see the module doc).
pub(crate) fn record_id(doc: &Document) -> i64 {
    bunko_doc::bson_hash::hash64(doc.get("_id").unwrap_or(&Bson::Null))
}
