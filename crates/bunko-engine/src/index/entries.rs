//! The entries one document contributes to one index, and their keys.
//!
//! An entry key is `0x0A | db | num | [partition] | collate(v1) … collate(vn) | doc_id`,
//! its value the JSON array `[[v1, …, vn], doc_id, [w1, …, wn]]`, where `wi` is `[x]` when
//! the document holds `x` at the i-th indexed path (Mango's lookup: the whole array, not
//! one element) and `[]` when it holds nothing there. [`bunko_doc::collate::encode`] is
//! order-preserving and prefix-free, so entries sort by the values in CouchDB collation,
//! then by document id, and the entries whose first values are fixed form one contiguous
//! range. String sort keys cannot be decoded, which is why the value keeps the original
//! values; the whole values let a covering query answer from the index alone.
//!
//! Which entries a document has is [`bunko_query::index_keys()`]'s rule: none if it lacks an
//! indexed field, one per array element where an indexed path crosses an array.

use std::collections::BTreeSet;
use std::sync::Arc;

use bunko_doc::collate;
use bunko_doc::keycode::KeyWriter;
use bunko_query::collation::Collation;
use bunko_query::{Dialect, FieldPath, Selector};
use bunko_storage::{Range, prefix_range};
use serde_json::{Map, Value};

use super::IndexDef;

/// Tag of index entry keys.
pub const IDX: u8 = 0x0A;

/// The entries (key, value) of one document in one index, sorted and distinct.
pub type Entries = BTreeSet<(Vec<u8>, Vec<u8>)>;

/// An index definition made ready for matching and key extraction.
#[derive(Debug)]
pub struct Compiled {
    paths: Vec<FieldPath>,
    partial: Option<Selector>,
    partitioned: bool,
    mongo: Option<super::mongo::MongoSpec>,
    /// A MongoDB index's collation (`None`: simple).
    collation: Option<Arc<Collation>>,
}

impl Compiled {
    pub fn new(def: &IndexDef) -> Result<Self, String> {
        let paths = def
            .fields
            .iter()
            .map(|f| FieldPath::parse(&f.name).map_err(|e| e.to_string()))
            .collect::<Result<Vec<_>, _>>()?;
        let partial = match &def.partial_filter {
            Some(selector) => Some(Selector::parse(selector).map_err(|e| e.to_string())?),
            None => None,
        };
        let spec = def.mongo.as_ref().and_then(|m| m.collation.as_ref());
        let collation = match spec {
            Some(spec) => Collation::parse(spec).map_err(|e| format!("collation: {e:?}"))?,
            None => None,
        };
        let (partitioned, mongo) = (def.partitioned, def.mongo.clone());
        Ok(Compiled { paths, partial, partitioned, mongo, collation })
    }

    /// A MongoDB index's collation (`None`: simple): its keys are computed under it
    /// (`bunko_query::collation::with`).
    pub fn collation(&self) -> Option<Arc<Collation>> {
        self.collation.clone()
    }

    pub fn paths(&self) -> &[FieldPath] {
        &self.paths
    }

    /// The partial filter's selector, if the index has one.
    pub fn partial(&self) -> Option<&Selector> {
        self.partial.as_ref()
    }

    /// The sorted, distinct entry keys (with values) of one document body.
    pub fn entries(&self, db: u64, num: u64, id: &str, doc: &Value) -> Entries {
        self.indexed(db, num, id, doc).0
    }

    /// [`Compiled::entries`], and for a MongoDB index the document's multikey paths
    /// (`bunko_query::mongo_index::multikey_paths`; empty when it has no entries).
    pub fn indexed(&self, db: u64, num: u64, id: &str, doc: &Value) -> (Entries, Vec<Vec<usize>>) {
        let mut out = BTreeSet::new();
        if let Some(spec) = &self.mongo {
            return bunko_query::collation::with(self.collation(), || {
                self.mongo_indexed(spec, db, num, id, doc)
            });
        }
        if let Some(partial) = &self.partial
            && !partial.matches(doc, Dialect::Mango)
        {
            return (out, Vec::new());
        }
        let partition = if self.partitioned { id.split_once(':').map(|(p, _)| p) } else { None };
        if self.partitioned && partition.is_none() {
            return (out, Vec::new());
        }
        let whole: Vec<Vec<&Value>> = self
            .paths
            .iter()
            .map(|p| match p.get(doc) {
                bunko_query::path::Lookup::Found(v) => vec![v],
                _ => Vec::new(),
            })
            .collect();
        for values in bunko_query::index_keys(doc, &self.paths) {
            let mut key = prefix(db, num, partition);
            for v in &values {
                collate::encode(v, &mut key);
            }
            let key = KeyWriter::from_bytes(key).str(id).finish();
            let value = serde_json::to_vec(&(&values, id, &whole)).unwrap_or_default();
            out.insert((key, value));
        }
        (out, Vec::new())
    }

    /// [`Compiled::indexed`] for a MongoDB index, under its collation.
    fn mongo_indexed(
        &self,
        spec: &super::mongo::MongoSpec,
        db: u64,
        num: u64,
        id: &str,
        doc: &Value,
    ) -> (Entries, Vec<Vec<usize>>) {
        let mut out = BTreeSet::new();
        let form = super::mongo::match_form(id, doc);
        let keys = super::mongo::doc_keys(spec, &self.paths, self.partial.as_ref(), &form);
        let keys = keys.unwrap_or_default();
        let fields = match keys.is_empty() {
            true => None,
            false => super::mongo::covered_fields(spec, &self.paths, id, doc),
        };
        for values in &keys {
            out.insert(super::mongo::entry(db, num, id, values, fields.as_ref()));
        }
        let mut paths = match keys.is_empty() {
            true => Vec::new(),
            false => bunko_query::mongo_index::multikey_paths(&form, &self.paths),
        };
        let nested = bunko_query::mongo_index::nested_leaf_arrays(&form, &self.paths);
        for (components, _) in paths.iter_mut().zip(nested).filter(|(_, n)| *n) {
            components.push(super::NESTED);
        }
        (out, paths)
    }
}

/// The values and document id of an entry (of any index: a MongoDB entry's kept fields,
/// `super::mongo::decode_entry`, are skipped).
pub fn decode_value(value: &[u8]) -> Option<(Vec<Value>, String)> {
    /// The third member is only accepted (a Mango entry's whole values, a MongoDB entry's
    /// kept fields), never read.
    #[derive(serde::Deserialize)]
    #[allow(dead_code)]
    struct Head(Vec<Value>, String, #[serde(default)] Option<serde::de::IgnoredAny>);
    let Head(values, id, _) = serde_json::from_slice(value).ok()?;
    Some((values, id))
}

/// The values, document id and whole values (`[x]` or `[]` per indexed path) of an entry.
/// Entries written before the whole values were kept have none (`None`): a covering query
/// reads their documents instead.
#[allow(clippy::type_complexity)]
pub fn decode_full(value: &[u8]) -> Option<(Vec<Value>, String, Option<Vec<Vec<Value>>>)> {
    if let Ok((values, id, whole)) = serde_json::from_slice(value) {
        return Some((values, id, Some(whole)));
    }
    let (values, id): (Vec<Value>, String) = serde_json::from_slice(value).ok()?;
    Some((values, id, None))
}

/// The document as Mango sees it: the stored body with `_id` and `_rev` in front.
pub fn mango_doc(id: &str, rev: &str, body: &[u8]) -> Value {
    let mut doc = Map::new();
    doc.insert("_id".into(), Value::String(id.to_string()));
    doc.insert("_rev".into(), Value::String(rev.to_string()));
    if let Ok(Value::Object(fields)) = serde_json::from_slice::<Value>(body) {
        doc.extend(fields);
    }
    Value::Object(doc)
}

/// Adds `_conflicts` (the live conflicting revisions, if any) to a Mango document.
pub fn add_conflicts(doc: &mut Value, conflicts: &[String]) {
    if let (false, Value::Object(map)) = (conflicts.is_empty(), doc) {
        let revs = conflicts.iter().cloned().map(Value::String).collect();
        map.insert("_conflicts".into(), Value::Array(revs));
    }
}

/// The live conflicting revisions of a document, as CouchDB lists them.
pub fn conflicts_of(info: &crate::records::DocInfo) -> Vec<String> {
    info.tree.conflicts().0.iter().map(ToString::to_string).collect()
}

/// The key prefix of an index's entries, or of one partition's entries of it.
pub fn prefix(db: u64, num: u64, partition: Option<&str>) -> Vec<u8> {
    let writer = KeyWriter::new(IDX).u64(db).u64(num);
    match partition {
        Some(p) => writer.str(p).finish(),
        None => writer.finish(),
    }
}

/// Every entry of one index.
pub fn range(db: u64, num: u64) -> Range {
    prefix_range(&prefix(db, num, None))
}

/// Every index entry of a database (for dropping it).
pub fn db_range(db: u64) -> Range {
    prefix_range(&KeyWriter::new(IDX).u64(db).finish())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn entry_values_with_and_without_whole_values_decode() {
        let new = decode_full(br#"[[1],"a",[[[1,2]],[]]]"#);
        assert_eq!(
            new,
            Some((vec![json!(1)], "a".into(), Some(vec![vec![json!([1, 2])], vec![]])))
        );
        // Written before the whole values were kept: no covering from this entry.
        assert_eq!(decode_full(br#"[[1],"a"]"#), Some((vec![json!(1)], "a".into(), None)));
    }

    #[test]
    fn mongo_entries_with_and_without_kept_fields_decode() {
        let kept = br#"[[],"a",{"v":{"$numberLong":"5"}}]"#;
        assert_eq!(decode_value(kept), Some((vec![], "a".into())));
        let (id, fields) = super::super::mongo::decode_entry(kept).unwrap();
        assert_eq!(
            (id.as_str(), fields.map(Value::Object)),
            ("a", Some(json!({"v": {"$numberLong": "5"}})))
        );
        // Written before entries kept fields (or by a hashed index): nothing to cover from.
        assert_eq!(super::super::mongo::decode_entry(br#"[[5],"a"]"#), Some(("a".into(), None)));
    }
}
