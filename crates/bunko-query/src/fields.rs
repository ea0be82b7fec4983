//! The `fields` argument (`mango_fields`) and projection (`mango_doc` `get_field` and
//! `set_field`).
//!
//! `fields` is an array of field paths; `[]` (like an absent `fields`) returns whole
//! documents. A projection starts from an empty object and copies each listed path that
//! the document has, in the order listed, building nested objects on the way: `"a.b"` gives
//! `{"a": {"b": ...}}`, and `"a.0"` on an array gives `{"a": {"0": ...}}`. `_id` and `_rev`
//! appear only when listed.
//!
//! Deviations: CouchDB accepts an object entry in `fields` and then fails while projecting;
//! here it is `invalid_field` at once. CouchDB writes into an array already copied (for
//! `["a", "a.1"]`) one position off; here the element lands where it came from.

use serde_json::{Map, Value};

use crate::error::Error;
use crate::path::{FieldPath, Lookup, array_index};

/// A parsed `fields` argument.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Fields {
    /// Whole documents.
    #[default]
    All,
    /// Only these paths.
    Only(Vec<FieldPath>),
}

impl Fields {
    /// Parses `fields` with CouchDB's errors: shapes first, then field names.
    pub fn parse(fields: &Value) -> Result<Self, Error> {
        let items = fields.as_array().ok_or_else(|| Error::InvalidFieldsJson(fields.clone()))?;
        if items.is_empty() {
            return Ok(Self::All);
        }
        let names = items
            .iter()
            .map(|item| item.as_str().ok_or_else(|| Error::InvalidFieldJson(item.clone())))
            .collect::<Result<Vec<_>, _>>()?;
        let paths = names.into_iter().map(FieldPath::parse).collect::<Result<_, _>>()?;
        Ok(Self::Only(paths))
    }

    /// The listed paths; `None` for whole documents.
    pub fn paths(&self) -> Option<&[FieldPath]> {
        match self {
            Self::All => None,
            Self::Only(paths) => Some(paths),
        }
    }

    /// The part of `doc` the client asked for.
    pub fn project(&self, doc: &Value) -> Value {
        let Self::Only(paths) = self else {
            return doc.clone();
        };
        let mut out = Value::Object(Map::new());
        for path in paths {
            if let Lookup::Found(value) = path.get(doc) {
                set(&mut out, path.segments(), value.clone());
            }
        }
        out
    }
}

/// The document made of `values` at their paths: what a covering index knows of a
/// document, in the shape the selector and [`Fields::project`] read.
pub fn assemble<'a>(values: impl IntoIterator<Item = (&'a FieldPath, Value)>) -> Value {
    let mut out = Value::Object(Map::new());
    for (path, value) in values {
        set(&mut out, path.segments(), value);
    }
    out
}

/// Stores `value` at `segments` under `target`, creating objects for missing members and
/// leaving `target` alone where the path runs into a scalar or a bad array position.
fn set(target: &mut Value, segments: &[String], value: Value) {
    let Some((first, rest)) = segments.split_first() else {
        *target = value;
        return;
    };
    match target {
        Value::Object(map) => match map.get_mut(first) {
            Some(child) if !rest.is_empty() => set(child, rest, value),
            _ => {
                map.insert(first.clone(), nested(rest, value));
            }
        },
        Value::Array(items) => {
            if let Some(item) = array_index(first).and_then(|i| items.get_mut(i)) {
                set(item, rest, value);
            }
        }
        _ => {}
    }
}

fn nested(segments: &[String], value: Value) -> Value {
    segments.iter().rev().fold(value, |inner, name| {
        let mut map = Map::new();
        map.insert(name.clone(), inner);
        Value::Object(map)
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn project(fields: Value, doc: Value) -> Result<Value, Error> {
        Ok(Fields::parse(&fields)?.project(&doc))
    }

    #[test]
    fn projection() -> Result<(), Error> {
        let doc =
            json!({"_id": "x", "_rev": "1-a", "a": {"b": 1, "c": 2}, "l": [10, 20], "s": "t"});
        assert_eq!(project(json!([]), doc.clone())?, doc);
        assert_eq!(project(json!(["a.b"]), doc.clone())?, json!({"a": {"b": 1}}));
        assert_eq!(project(json!(["s", "_id"]), doc.clone())?, json!({"s": "t", "_id": "x"}));
        assert_eq!(project(json!(["l.1"]), doc.clone())?, json!({"l": {"1": 20}}));
        assert_eq!(project(json!(["l", "l.1"]), doc.clone())?, json!({"l": [10, 20]}));
        assert_eq!(project(json!(["a.b", "a"]), doc.clone())?, json!({"a": {"b": 1, "c": 2}}));
        assert_eq!(project(json!(["a", "a.b"]), doc.clone())?, json!({"a": {"b": 1, "c": 2}}));
        assert_eq!(project(json!(["nope", "s.x", "l.5"]), doc.clone())?, json!({}));
        assert_eq!(project(json!(["a\\.b"]), json!({"a.b": 1}))?, json!({"a.b": 1}));
        Ok(())
    }

    #[test]
    fn errors_as_couchdb() {
        let err = |v: Value| Fields::parse(&v).err().map(|e| (e.error_name(), e.reason()));
        assert_eq!(
            err(json!("a")),
            Some(("invalid_fields", "Fields must be an array of strings, not: <<97>>".into()))
        );
        assert_eq!(
            err(json!(["a", 1])),
            Some(("invalid_field", "Invalid JSON for field spec: 1".into()))
        );
        assert_eq!(
            err(json!(["a..b", 1])),
            Some(("invalid_field", "Invalid JSON for field spec: 1".into()))
        );
        assert_eq!(
            err(json!(["a..b"])),
            Some(("invalid_field_name", "Invalid field name: a..b".into()))
        );
    }
}
