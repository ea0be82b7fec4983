//! A document sent as BSON bytes written as its stored JSON in one pass, for inserts: the
//! result is what [`to_json`](super::to_json) of the decoded `bson::Document` gives, without
//! building that document first. Documents, arrays and strings are read from the bytes
//! directly; other values (a few bytes each) go through [`Bson`] and
//! [`value_to_json`](super::value_to_json), so their wrappers are exactly the old ones.
//!
//! A key repeated in one document keeps its first position and its last value, as
//! `bson::Document` (and the `serde_json` map) keep it.

use bson::Bson;
use bson::error::Error;
use bson::raw::{RawArray, RawBsonRef, RawDocument};
use serde_json::{Map, Value};

/// One BSON value as stored JSON, with how deep its documents and arrays nest (0 for a
/// value that is neither; a code-with-scope's scope does not count, as MongoDB's stored
/// depth does not).
pub fn value(value: RawBsonRef<'_>) -> Result<(Value, usize), Error> {
    Ok(match value {
        RawBsonRef::String(s) => (Value::String(s.to_owned()), 0),
        RawBsonRef::Document(doc) => {
            let (map, depth) = document(doc)?;
            (super::object(map), depth)
        }
        RawBsonRef::Array(items) => array(items)?,
        other => (super::value_to_json(&Bson::try_from(other)?), 0),
    })
}

/// A BSON document as a stored JSON object (its members converted with [`value`]), with
/// how deep it nests (1 for a document of scalars).
pub fn document(doc: &RawDocument) -> Result<(Map<String, Value>, usize), Error> {
    let mut map = Map::new();
    let mut deepest = 0;
    for member in doc {
        let (key, item) = member?;
        let (item, depth) = value(item)?;
        deepest = deepest.max(depth);
        map.insert(key.as_str().to_owned(), item);
    }
    Ok((map, 1 + deepest))
}

fn array(items: &RawArray) -> Result<(Value, usize), Error> {
    let mut out = Vec::new();
    let mut deepest = 0;
    for item in items {
        let (item, depth) = value(item?)?;
        deepest = deepest.max(depth);
        out.push(item);
    }
    Ok((Value::Array(out), 1 + deepest))
}

#[cfg(test)]
mod tests;
