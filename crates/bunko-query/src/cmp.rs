//! The orders Mango compares values in.

use std::cmp::Ordering;

/// CouchDB view collation, the order of `$lt`/`$gt`/`$eq`/`$in` and of `sort`.
///
/// The single call site of the collation: switch to `bunko_doc::collate::compare` here.
pub(crate) fn collate(a: &serde_json::Value, b: &serde_json::Value) -> Ordering {
    bunko_doc::collate::compare(a, b)
}
