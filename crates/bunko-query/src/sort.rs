//! The `sort` argument (`mango_sort`) and an order over documents.
//!
//! `sort` is an array of field names (ascending) and `{"field": "asc" | "desc"}` objects;
//! every field must sort the same way (`unsupported_mixed_sort`). Anything else is
//! `invalid_sort_field`, including an unknown direction such as `{"a": "up"}`: CouchDB 3.4's
//! `invalid_sort_dir` clause can never match an object, so that error never occurs. Field
//! names are parsed at once (`invalid_field_name`); CouchDB leaves them to index selection.
//!
//! [`Sort::compare`] orders documents as a scan of a JSON index over the sort fields would:
//! by each field in view collation (`_id` in raw byte order, as `_all_docs`), then by `_id`.
//! A document missing a sort field (or whose path runs into a scalar) sorts before every
//! present value. CouchDB never has to decide this: a JSON index holds no document missing
//! an indexed field, so such documents are simply not returned; this comparator keeps them,
//! first in ascending order and last in descending order.

use std::cmp::Ordering;

use serde_json::{Map, Value};

use crate::cmp::collate;
use crate::error::Error;
use crate::path::{FieldPath, Lookup};
use crate::term::cmp_raw;

/// A sort direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    Asc,
    Desc,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Asc => "asc",
            Self::Desc => "desc",
        }
    }
}

/// A parsed `sort` argument; empty means "no sort".
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sort {
    fields: Vec<(FieldPath, Direction)>,
}

impl Sort {
    /// Parses `sort` with CouchDB's errors.
    pub fn parse(sort: &Value) -> Result<Self, Error> {
        let items = sort.as_array().ok_or_else(|| Error::InvalidSortJson(sort.clone()))?;
        let specs = items.iter().map(spec).collect::<Result<Vec<_>, _>>()?;
        if specs.windows(2).any(|w| w[0].1 != w[1].1) {
            return Err(Error::UnsupportedMixedSort);
        }
        let fields = specs
            .into_iter()
            .map(|(name, dir)| Ok((FieldPath::parse(name)?, dir)))
            .collect::<Result<_, Error>>()?;
        Ok(Self { fields })
    }

    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// The sort fields, in order.
    pub fn fields(&self) -> impl Iterator<Item = &FieldPath> {
        self.fields.iter().map(|(path, _)| path)
    }

    /// The one direction of all fields; `None` for an empty sort.
    pub fn direction(&self) -> Option<Direction> {
        self.fields.first().map(|(_, dir)| *dir)
    }

    /// `sort` as CouchDB echoes it: `[{"field": "asc"}, ...]`.
    pub fn to_json(&self) -> Value {
        let specs = self.fields.iter().map(|(path, dir)| {
            let mut map = Map::new();
            map.insert(path.to_string(), Value::String(dir.as_str().to_owned()));
            Value::Object(map)
        });
        Value::Array(specs.collect())
    }

    /// Orders two documents; see the module documentation.
    pub fn compare(&self, a: &Value, b: &Value) -> Ordering {
        let order = self
            .fields
            .iter()
            .map(|(path, _)| compare_at(path, a, b))
            .find(|o| o.is_ne())
            .unwrap_or_else(|| compare_values(a.get("_id"), b.get("_id"), cmp_raw));
        match self.direction() {
            Some(Direction::Desc) => order.reverse(),
            _ => order,
        }
    }
}

fn spec(item: &Value) -> Result<(&str, Direction), Error> {
    let invalid = || Error::InvalidSortField(item.clone());
    match item {
        Value::String(name) if !name.is_empty() => Ok((name, Direction::Asc)),
        Value::Object(map) if map.len() == 1 => match map.iter().next() {
            Some((name, Value::String(dir))) if dir == "asc" => Ok((name, Direction::Asc)),
            Some((name, Value::String(dir))) if dir == "desc" => Ok((name, Direction::Desc)),
            _ => Err(invalid()),
        },
        _ => Err(invalid()),
    }
}

/// The values at `path`: collation order (raw order for `_id`).
fn compare_at(path: &FieldPath, a: &Value, b: &Value) -> Ordering {
    let get = |doc| match path.get(doc) {
        Lookup::Found(v) => Some(v),
        Lookup::NotFound | Lookup::BadPath => None,
    };
    let cmp = if path.is_id() { cmp_raw } else { collate };
    compare_values(get(a), get(b), cmp)
}

/// Missing values first.
fn compare_values(
    a: Option<&Value>,
    b: Option<&Value>,
    cmp: fn(&Value, &Value) -> Ordering,
) -> Ordering {
    match (a, b) {
        (Some(x), Some(y)) => cmp(x, y),
        (x, y) => x.is_some().cmp(&y.is_some()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn parse_errors_as_couchdb() {
        let err = |v: Value| Sort::parse(&v).err().map(|e| (e.error_name(), e.reason()));
        assert_eq!(
            err(json!({"a": "asc"})),
            Some((
                "invalid_sort_json",
                "Sort must be an array of sort specs, not: {[{<<\"a\">>,<<\"asc\">>}]}".into()
            ))
        );
        assert_eq!(
            err(json!([""])),
            Some(("invalid_sort_field", "Invalid sort field: <<>>".into()))
        );
        assert_eq!(
            err(json!([{"a": "up"}])),
            Some(("invalid_sort_field", "Invalid sort field: {[{<<\"a\">>,<<\"up\">>}]}".into()))
        );
        assert_eq!(err(json!([{"a": "asc", "b": "asc"}])).map(|e| e.0), Some("invalid_sort_field"));
        assert_eq!(err(json!([1])), Some(("invalid_sort_field", "Invalid sort field: 1".into())));
        assert_eq!(
            err(json!(["a", {"b": "desc"}])),
            Some((
                "unsupported_mixed_sort",
                "Sorts currently only support a single direction for all fields.".into()
            ))
        );
        assert_eq!(
            err(json!(["a..b"])),
            Some(("invalid_field_name", "Invalid field name: a..b".into()))
        );
    }

    #[test]
    fn parse_and_echo() -> Result<(), Error> {
        let sort = Sort::parse(&json!(["a", {"b.c": "asc"}]))?;
        assert_eq!(sort.direction(), Some(Direction::Asc));
        assert_eq!(sort.to_json(), json!([{"a": "asc"}, {"b.c": "asc"}]));
        let sort = Sort::parse(&json!([{"a": "desc"}]))?;
        assert_eq!(sort.direction(), Some(Direction::Desc));
        assert!(Sort::parse(&json!([]))?.is_empty());
        Ok(())
    }

    #[test]
    fn compare_orders_documents() -> Result<(), Error> {
        let docs = [
            json!({"_id": "m"}),
            json!({"_id": "n", "a": "x"}),
            json!({"_id": "b", "a": null}),
            json!({"_id": "c", "a": 2}),
            json!({"_id": "a", "a": 10}),
            json!({"_id": "d", "a": 10}),
            json!({"_id": "e", "a": "b"}),
            json!({"_id": "f", "a": [1]}),
        ];
        let mut sorted = docs.to_vec();
        sorted.reverse();
        let asc = Sort::parse(&json!(["a"]))?;
        sorted.sort_by(|x, y| asc.compare(x, y));
        let ids: Vec<&str> = sorted.iter().filter_map(|d| d["_id"].as_str()).collect();
        assert_eq!(ids, ["m", "b", "c", "a", "d", "e", "n", "f"]);
        let desc = Sort::parse(&json!([{"a": "desc"}]))?;
        sorted.sort_by(|x, y| desc.compare(x, y));
        let ids: Vec<&str> = sorted.iter().filter_map(|d| d["_id"].as_str()).collect();
        assert_eq!(ids, ["f", "n", "e", "d", "a", "c", "b", "m"]);
        Ok(())
    }

    #[test]
    fn id_sorts_by_bytes() -> Result<(), Error> {
        let sort = Sort::parse(&json!(["_id"]))?;
        assert_eq!(sort.compare(&json!({"_id": "B"}), &json!({"_id": "a"})), Ordering::Less);
        Ok(())
    }
}
