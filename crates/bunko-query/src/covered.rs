//! Covered MongoDB queries: what an index entry keeps of its document so that a query
//! reading only the index's fields is answered from the entries alone (MongoDB's
//! `PROJECTION_COVERED`), and which filters may be evaluated on that.
//!
//! An entry keeps [`index_fields`]: the document cut down to the index's paths, in the
//! document's own field order and with its stored (typed) values, so a covered answer is
//! the very answer a projection of the fetched document gives (an int64 stays an int64, a
//! missing field stays missing, where the key alone would say `null`). A path that crosses
//! an array is left out: its index is multikey there and never covers it.
//!
//! [`filter_covered`] follows MongoDB: a filter is evaluated on the index fields when every
//! path it names is one of them, and no condition asks for `null` or about existence (the
//! index key of a missing field is `null`, which MongoDB cannot tell from a stored `null`,
//! so it fetches for those), and it has no `$expr`, `$jsonSchema` or `$where`.

use serde_json::{Map, Value};

use crate::path::FieldPath;
use crate::selector::{Cond, Node, Selector};

/// `doc` holding only the values at `paths` (and the sub-documents leading to them), in
/// the document's order; a path crossing an array, or running into a scalar, adds
/// nothing (an object on its way is kept, possibly empty, as an inclusion projection
/// keeps it).
pub fn index_fields(doc: &Map<String, Value>, paths: &[FieldPath]) -> Map<String, Value> {
    let segments: Vec<&[String]> = paths.iter().map(FieldPath::segments).collect();
    pick(doc, &segments)
}

fn pick(doc: &Map<String, Value>, paths: &[&[String]]) -> Map<String, Value> {
    let mut out = Map::new();
    for (name, value) in doc {
        let under: Vec<&[String]> = paths
            .iter()
            .filter_map(|p| p.split_first().filter(|(first, _)| *first == name).map(|(_, r)| r))
            .collect();
        if under.is_empty() || value.is_array() {
            continue;
        }
        if under.iter().any(|rest| rest.is_empty()) {
            out.insert(name.clone(), value.clone());
            continue;
        }
        if let Value::Object(inner) = value {
            out.insert(name.clone(), Value::Object(pick(inner, &under)));
        }
    }
    out
}

/// Whether `selector` can be evaluated on [`index_fields`] of `paths` (see the module doc).
pub fn filter_covered(selector: &Selector, paths: &[FieldPath]) -> bool {
    selector.reads().is_some()
        && !selector.has_predicate()
        && selector.referenced_fields().iter().all(|f| paths.contains(f))
        && node_covered(selector.root())
}

fn node_covered(node: &Node) -> bool {
    match node {
        Node::Empty => true,
        Node::And(children) | Node::Or(children) | Node::Nor(children) => {
            children.iter().all(node_covered)
        }
        Node::Not(child) => node_covered(child),
        Node::Field(_, cond) => cond_covered(cond),
    }
}

fn cond_covered(cond: &Cond) -> bool {
    match cond {
        Cond::Eq(v) | Cond::Ne(v) => !v.is_null(),
        Cond::In(vs) | Cond::Nin(vs) => !vs.iter().any(Value::is_null),
        Cond::Exists(_) | Cond::Type(_) | Cond::Text(_) => false,
        Cond::Not(inner) => cond_covered(inner),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn paths(names: &[&str]) -> Vec<FieldPath> {
        names.iter().map(|n| FieldPath::parse(n).unwrap()).collect()
    }

    #[test]
    fn index_fields_keep_the_documents_order_and_types_and_skip_arrays() {
        let doc = json!({"_id": {"$oid": "5f1d7a0b2c3d4e5f60718293"}, "z": 1,
            "b": {"$numberLong": "5"}, "a": {"y": 2.0, "x": {"$date": {"$numberLong": "0"}}},
            "c": {"d": 1}, "tags": [1, 2], "s": "text"});
        let doc = doc.as_object().unwrap();
        let out = index_fields(doc, &paths(&["a.x", "b", "c.e", "tags", "s.t", "missing"]));
        assert_eq!(
            Value::Object(out),
            json!({"b": {"$numberLong": "5"}, "a": {"x": {"$date": {"$numberLong": "0"}}},
                "c": {}})
        );
        let out = index_fields(doc, &paths(&["_id", "s"]));
        assert_eq!(out.keys().collect::<Vec<_>>(), ["_id", "s"]);
    }

    #[test]
    fn filters_on_index_fields_without_null_or_existence_are_covered() {
        let on = paths(&["a", "b.c"]);
        let covered = |filter: Value| filter_covered(&Selector::parse_mongo(&filter).unwrap(), &on);
        assert!(covered(json!({"a": {"$gt": 1}, "b.c": "x"})));
        assert!(covered(json!({"$or": [{"a": 1}, {"b.c": {"$in": [1, 2]}}]})));
        assert!(covered(json!({})));
        assert!(!covered(json!({"a": null})));
        assert!(!covered(json!({"a": {"$in": [1, null]}})));
        assert!(!covered(json!({"a": {"$exists": true}})));
        assert!(!covered(json!({"b": {"$eq": {"c": "x"}}})));
        assert!(!covered(json!({"a": 1, "d": 2})));
    }
}
