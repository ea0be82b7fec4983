//! MongoDB-semantics index keys: which keys a document has in an index over some fields, and
//! the order-preserving byte encoding of values in MongoDB's order ([`crate::bson_order`]),
//! so that an index range scan never decodes to compare.
//!
//! Keys (MongoDB's `BtreeKeyGenerator` rules, on the matching form of a document: its
//! stored form, `bunko_doc::ejson`):
//!
//! - every document has at least one key: a missing field (or a path running into a
//!   scalar) is indexed as `null`, so a prefix of a compound index serves a query;
//! - where a field's path crosses an array, each element gives a key (multikey); an empty
//!   array is indexed as `null` here (MongoDB: `undefined`); arrays nested in elements are
//!   expanded too;
//! - fields of one compound index crossing the *same* array (`links.target` and
//!   `links.doc_type`) pair up element by element; fields crossing *different* arrays are
//!   MongoDB's "cannot index parallel arrays" (code 171).
//!
//! Encoding: one tag byte per type class (MinKey < null < numbers < strings < objects <
//! arrays < binData < ObjectId < bool < date < timestamp < regex < MaxKey), then the value:
//! numbers as an order-preserving f64 (so int32, int64, double and Decimal128 of equal
//! value have one key; integers beyond 2^53 share keys with their neighbours and a
//! Decimal128 with its nearest double, which only widens a scan, since every document read
//! is matched again, and open numeric bounds keep the key of their value); strings as their bytes with
//! `0x00` escaped and a `0x00 0x00` terminator (under a collation, [`crate::collation::with`],
//! their ICU4X sort keys the same way: a collated index); objects and arrays element by
//! element.

use bson::Bson;
use bunko_doc::ejson;
use serde_json::{Map, Value};

use crate::bson_order::{Class, class, number};
use crate::path::FieldPath;

/// The keys of a document (values per field, in field order), or the parallel arrays.
pub fn keys(doc: &Value, fields: &[FieldPath]) -> Result<Vec<Vec<Value>>, ParallelArrays> {
    let prefixes: Vec<Option<usize>> = fields.iter().map(|f| array_prefix(doc, f)).collect();
    let mut arrays: Vec<&[String]> = Vec::new();
    for (field, prefix) in fields.iter().zip(&prefixes) {
        if let Some(n) = prefix {
            let p = &field.segments()[..*n];
            if !arrays.contains(&p) {
                arrays.push(p);
            }
        }
    }
    match arrays.as_slice() {
        [] => Ok(vec![fields.iter().map(|f| scalar_at(doc, f.segments())).collect()]),
        [shared] => Ok(multikey(doc, fields, shared)),
        [a, b, ..] => Err(ParallelArrays(a.last().cloned(), b.last().cloned())),
    }
}

/// Two indexed fields cross different arrays (named by the arrays' last path segments).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParallelArrays(pub Option<String>, pub Option<String>);

impl std::fmt::Display for ParallelArrays {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = |n: &Option<String>| n.clone().unwrap_or_default();
        write!(f, "cannot index parallel arrays [{}] [{}]", name(&self.1), name(&self.0))
    }
}

/// How many segments lead to the first array on `field`'s path, if one is crossed.
fn array_prefix(doc: &Value, field: &FieldPath) -> Option<usize> {
    let mut current = doc;
    for (i, segment) in field.segments().iter().enumerate() {
        current = match current {
            Value::Object(map) => map.get(segment)?,
            _ => return None,
        };
        if current.is_array() {
            return Some(i + 1);
        }
    }
    None
}

/// The value at a path crossing no array (`null` when missing).
fn scalar_at(doc: &Value, segments: &[String]) -> Value {
    let mut current = doc;
    for segment in segments {
        current = match current.as_object().and_then(|m| m.get(segment)) {
            Some(v) => v,
            None => return Value::Null,
        };
    }
    current.clone()
}

/// One key per element of the array at `shared`, for the fields crossing it.
fn multikey(doc: &Value, fields: &[FieldPath], shared: &[String]) -> Vec<Vec<Value>> {
    let elements = match scalar_at(doc, shared) {
        Value::Array(items) if !items.is_empty() => items,
        _ => vec![Value::Null],
    };
    let mut out: Vec<Vec<Value>> = Vec::new();
    for element in &elements {
        let mut combos: Vec<Vec<Value>> = vec![Vec::new()];
        for field in fields {
            let segments = field.segments();
            let values = if segments.starts_with(shared) {
                leaf_values(element, &segments[shared.len()..])
            } else {
                vec![scalar_at(doc, segments)]
            };
            combos = combos
                .into_iter()
                .flat_map(|c| values.iter().map(move |v| [c.clone(), vec![v.clone()]].concat()))
                .collect();
        }
        for combo in combos {
            if !out.contains(&combo) {
                out.push(combo);
            }
        }
    }
    out
}

/// The values a path reaches from an array element, expanding nested arrays.
fn leaf_values(value: &Value, rest: &[String]) -> Vec<Value> {
    match (value, rest.split_first()) {
        (Value::Array(items), _) if !items.is_empty() => {
            items.iter().flat_map(|i| leaf_values(i, rest)).collect()
        }
        (Value::Array(_), _) => vec![Value::Null],
        (v, None) => vec![v.clone()],
        (Value::Object(map), Some((first, tail))) => match map.get(first) {
            Some(v) => leaf_values(v, tail),
            None => vec![Value::Null],
        },
        _ => vec![Value::Null],
    }
}

/// MongoDB's `multiKeyPaths` of a document: for each indexed field, the (0-based) path
/// components at which the document holds an array (`a.b` over `{a: [{b: [1]}]}` gives
/// `[0, 1]`; an empty array counts, as in MongoDB). All empty: the keys cross no array.
pub fn multikey_paths(doc: &Value, fields: &[FieldPath]) -> Vec<Vec<usize>> {
    fields
        .iter()
        .map(|field| {
            let mut found = Vec::new();
            array_components(doc, field.segments(), 0, &mut found);
            found.sort_unstable();
            found.dedup();
            found
        })
        .collect()
}

/// For each indexed field, whether the document holds an array inside an array at the
/// field's end (`a` over `{a: [1, [2]]}`, `a.b` over `{a: [{b: [[1]]}]}`): its keys are
/// the inner array's elements, where MongoDB's are the inner array.
pub fn nested_leaf_arrays(doc: &Value, fields: &[FieldPath]) -> Vec<bool> {
    fields.iter().map(|field| leaf_nests(doc, field.segments())).collect()
}

fn leaf_nests(value: &Value, segments: &[String]) -> bool {
    match (segments.split_first(), value) {
        (None, Value::Array(items)) => items.iter().any(Value::is_array),
        (None, _) => false,
        (Some(_), Value::Array(items)) => items.iter().any(|i| leaf_nests(i, segments)),
        (Some((first, rest)), Value::Object(m)) => {
            m.get(first).is_some_and(|v| leaf_nests(v, rest))
        }
        (Some(_), _) => false,
    }
}

/// Adds to `found` the components from `depth` on where `value` (the value at the first
/// `depth` segments) reaches an array.
fn array_components(value: &Value, segments: &[String], depth: usize, found: &mut Vec<usize>) {
    let Some(segment) = segments.get(depth) else { return };
    let Some(next) = value.as_object().and_then(|m| m.get(segment)) else { return };
    match next {
        Value::Array(items) => {
            found.push(depth);
            for item in items {
                array_components(item, segments, depth + 1, found);
            }
        }
        other => array_components(other, segments, depth + 1, found),
    }
}

/// A value's hash as MongoDB's hashed indexes hold it (`bunko_doc::bson_hash`), as a
/// number; `value` is in its matching form (the stored form; dates may also be
/// `{"$date": ms}`).
pub fn hashed(value: &Value) -> Value {
    Value::from(bunko_doc::bson_hash::hash64(&dated(ejson::value_from_json(value))))
}

/// A BSON value read from the matching form, with its dates (`{"$date": ms}` there,
/// which reads back as an object) as dates again.
fn dated(value: Bson) -> Bson {
    match value {
        Bson::Document(doc) => {
            let ms = match (doc.len(), doc.get("$date")) {
                (1, Some(Bson::Int32(ms))) => Some(i64::from(*ms)),
                (1, Some(Bson::Int64(ms))) => Some(*ms),
                _ => None,
            };
            match ms {
                Some(ms) => Bson::DateTime(bson::DateTime::from_millis(ms)),
                None => Bson::Document(doc.into_iter().map(|(k, v)| (k, dated(v))).collect()),
            }
        }
        Bson::Array(items) => Bson::Array(items.into_iter().map(dated).collect()),
        other => other,
    }
}

/// Appends the order-preserving encoding of a value (in its matching form).
pub fn encode(value: &Value, out: &mut Vec<u8>) {
    let class = class(value);
    out.push(class as u8 + 1);
    match (class, value) {
        (Class::Number, _) => encode_f64(number(value), out),
        (Class::String, Value::String(s)) => encode_string(s, out),
        (Class::String, Value::Object(m)) => encode_string(wrapped_str(m), out),
        (Class::Object, Value::Object(map)) => {
            for (k, v) in map {
                out.push(1);
                encode_str(k, out);
                encode(v, out);
            }
            out.push(0);
        }
        (Class::Array, Value::Array(items)) => {
            for item in items {
                out.push(1);
                encode(item, out);
            }
            out.push(0);
        }
        (Class::Bool, Value::Bool(b)) => out.push(u8::from(*b)),
        (Class::Date, Value::Object(m)) => {
            let ms = match m.values().next() {
                Some(Value::Number(n)) => n.as_f64().unwrap_or(0.0),
                Some(inner) => number(inner),
                None => 0.0,
            };
            encode_f64(ms, out);
        }
        (Class::ObjectId | Class::BinData | Class::Timestamp | Class::Regex, Value::Object(m)) => {
            // The wrapper's contents, field by field, in their own order.
            encode_str(&Value::Object(m.clone()).to_string(), out);
        }
        _ => {}
    }
}

/// The encoding of a whole key (values of the index fields in order).
pub fn encode_key(values: &[Value]) -> Vec<u8> {
    let mut out = Vec::new();
    for v in values {
        encode(v, &mut out);
    }
    out
}

/// The length of the first value encoded in `bytes` by [`encode`] (`None`: not a whole
/// encoded value), so a scan can tell where one field of a key ends and skip past every
/// key sharing it (a distinct scan).
pub fn encoded_len(bytes: &[u8]) -> Option<usize> {
    let tag = *bytes.first()?;
    let body = bytes.get(1..)?;
    let number = Class::Number as u8 + 1;
    let date = Class::Date as u8 + 1;
    let len = match tag {
        t if t == number || t == date => (body.len() >= 8).then_some(8)?,
        t if t == Class::Bool as u8 + 1 => (!body.is_empty()).then_some(1)?,
        t if t == Class::Object as u8 + 1 => members(body, true)?,
        t if t == Class::Array as u8 + 1 => members(body, false)?,
        t if [Class::String, Class::ObjectId, Class::BinData, Class::Timestamp, Class::Regex]
            .iter()
            .any(|c| *c as u8 + 1 == t) =>
        {
            bytes_len(body)?
        }
        _ => 0,
    };
    Some(1 + len)
}

/// The length of an escaped byte string with its `0x00 0x00` terminator.
fn bytes_len(body: &[u8]) -> Option<usize> {
    let mut i = 0;
    loop {
        match (body.get(i)?, body.get(i + 1)) {
            (0, Some(0)) => return Some(i + 2),
            (0, Some(0xFF)) => i += 2,
            (0, _) => return None,
            _ => i += 1,
        }
    }
}

/// The length of an object's (`named`) or array's members up to their `0` end marker.
fn members(body: &[u8], named: bool) -> Option<usize> {
    let mut i = 0;
    loop {
        match body.get(i)? {
            0 => return Some(i + 1),
            1 => {
                i += 1;
                if named {
                    i += bytes_len(body.get(i..)?)?;
                }
                i += encoded_len(body.get(i..)?)?;
            }
            _ => return None,
        }
    }
}

fn wrapped_str(map: &Map<String, Value>) -> &str {
    map.values().next().and_then(Value::as_str).unwrap_or_default()
}

/// NaN first, then numbers by value (`-0.0` is `0.0`).
fn encode_f64(d: f64, out: &mut Vec<u8>) {
    if d.is_nan() {
        out.extend_from_slice(&[0; 8]);
        return;
    }
    let d = if d == 0.0 { 0.0 } else { d };
    let bits = d.to_bits();
    let ordered = if bits >> 63 == 1 { !bits } else { bits | (1 << 63) };
    out.extend_from_slice(&ordered.max(1).to_be_bytes());
}

/// A string value: its bytes, or its sort key under this thread's collation (a collated
/// index's keys are computed inside `crate::collation::with` its collation).
fn encode_string(s: &str, out: &mut Vec<u8>) {
    match crate::collation::sort_key(s) {
        Some(key) => encode_bytes(&key, out),
        None => encode_str(s, out),
    }
}

fn encode_str(s: &str, out: &mut Vec<u8>) {
    encode_bytes(s.as_bytes(), out);
}

fn encode_bytes(bytes: &[u8], out: &mut Vec<u8>) {
    for &b in bytes {
        out.push(b);
        if b == 0 {
            out.push(0xFF);
        }
    }
    out.extend_from_slice(&[0, 0]);
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::bson_order::compare;

    #[test]
    fn encoded_lengths_delimit_every_kind_of_value() {
        let values = [
            json!(null),
            json!(1.5),
            json!("a\u{0}b"),
            json!({"x": [1, "y", {"z": null}], "w": true}),
            json!([[], {}, "s"]),
            json!({"$oid": "5f1d7a0b2c3d4e5f60718293"}),
            json!({"$date": {"$numberLong": "0"}}),
            json!(false),
            json!({"$maxKey": 1}),
        ];
        for value in &values {
            let mut key = Vec::new();
            encode(value, &mut key);
            let len = key.len();
            encode(&json!("after"), &mut key);
            assert_eq!(encoded_len(&key), Some(len), "{value}");
        }
        assert_eq!(encoded_len(&[Class::String as u8 + 1, b'a', 0]), None);
    }

    fn paths(names: &[&str]) -> Vec<FieldPath> {
        names.iter().filter_map(|n| FieldPath::parse(n).ok()).collect()
    }

    #[test]
    fn encoding_follows_mongodb_order() {
        let ascending = [
            json!({"$minKey": 1}),
            json!(null),
            json!({"$numberDouble": "NaN"}),
            json!({"$numberDouble": "-Infinity"}),
            json!(-1.5),
            json!(-0.0),
            json!(2),
            json!(2.5),
            json!("B"),
            json!("a"),
            json!("a\u{0}b"),
            json!("ab"),
            json!({"a": 1}),
            json!([1, 2]),
            json!({"$oid": "65a1b2c3d4e5f60718293a4b"}),
            json!(false),
            json!(true),
            json!({"$date": 5}),
            json!({"$date": 10}),
            json!({"$maxKey": 1}),
        ];
        for pair in ascending.windows(2) {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            encode(&pair[0], &mut a);
            encode(&pair[1], &mut b);
            assert!(a < b, "{} < {}", pair[0], pair[1]);
            assert!(compare(&pair[0], &pair[1]).is_le());
        }
        assert_eq!(encode_key(&[json!(2)]), encode_key(&[json!(2.0)]));
        assert_eq!(encode_key(&[json!(0)]), encode_key(&[json!(-0.0)]));
    }

    #[test]
    fn nested_leaf_arrays_are_arrays_inside_the_last_array() {
        let fields = paths(&["a", "a.b", "c"]);
        let nested = |doc| nested_leaf_arrays(&doc, &fields);
        assert_eq!(nested(json!({"a": [1, [2]], "c": [1]})), vec![true, false, false]);
        assert_eq!(nested(json!({"a": [{"b": [[1]]}, 2]})), vec![false, true, false]);
        assert_eq!(
            nested(json!({"a": {"b": [1, {"x": [2]}]}, "c": []})),
            vec![false, false, false]
        );
    }

    #[test]
    fn hashed_values_are_mongodb_hashes_of_the_matching_form() {
        assert_eq!(hashed(&json!(42)), json!(-944302157085130861_i64));
        assert_eq!(hashed(&json!(42.7)), hashed(&json!(42)));
        assert_eq!(hashed(&json!("string to hash")), json!(763543691661428748_i64));
        let date = bunko_doc::bson_hash::hash64(&Bson::DateTime(bson::DateTime::from_millis(5)));
        assert_eq!(hashed(&json!({"$date": 5})), json!(date));
        assert_ne!(hashed(&json!({"$date": 5})), hashed(&json!(5)));
        assert_ne!(hashed(&json!({"d": {"$date": 5}})), hashed(&json!({"d": 5})));
    }

    #[test]
    fn documents_have_mongodb_keys() -> Result<(), ParallelArrays> {
        let student = json!({"_id": "S1", "links": [
            {"target": "CS101", "doc_type": "class"}, {"target": "MA201", "doc_type": "class"}]});
        assert_eq!(
            keys(&student, &paths(&["links.target", "links.doc_type"]))?,
            vec![vec![json!("CS101"), json!("class")], vec![json!("MA201"), json!("class")]]
        );
        assert_eq!(keys(&json!({"a": 1}), &paths(&["a", "b"]))?, vec![vec![json!(1), json!(null)]]);
        assert_eq!(
            keys(&json!({"a": [1, [2, 3]], "b": 5}), &paths(&["a", "b"]))?,
            vec![vec![json!(1), json!(5)], vec![json!(2), json!(5)], vec![json!(3), json!(5)]]
        );
        assert_eq!(keys(&json!({"a": []}), &paths(&["a"]))?, vec![vec![json!(null)]]);
        let nested = json!({"a": [{"b": [1]}, {"b": 2}], "c": {"d": []}, "e": 1});
        assert_eq!(
            multikey_paths(&nested, &paths(&["a.b", "c.d", "e", "x.y"])),
            vec![vec![0, 1], vec![1], vec![], vec![]]
        );
        let parallel = keys(&json!({"a": [1], "b": [2]}), &paths(&["a", "b"])).err();
        assert_eq!(
            parallel.map(|p| p.to_string()),
            Some("cannot index parallel arrays [b] [a]".into())
        );
        Ok(())
    }
}
