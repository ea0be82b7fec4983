//! The orders Mango compares values in.

use std::cmp::Ordering;

/// CouchDB view collation (`bunko_doc::collate`: ICU root-locale strings), the order of
/// `$lt`/`$gt`/`$eq`/`$in` and of `sort`. `_id` conditions use [`crate::term::cmp_raw`].
pub(crate) fn collate(a: &serde_json::Value, b: &serde_json::Value) -> Ordering {
    bunko_doc::collate::compare(a, b)
}
