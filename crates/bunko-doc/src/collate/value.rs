//! The walk over JSON values shared by both collations; a [`Scheme`] supplies what differs
//! (the order of the types and how strings compare and encode).

use std::cmp::Ordering;

use serde_json::{Map, Value};

use super::number;

/// Sorts before every tag: the [`super::encode_min`] sentinel.
pub(super) const MIN: u8 = 0x00;
/// Ends an array or object; below every tag, so a shorter array sorts first.
pub(super) const END: u8 = 0x01;
/// Sorts after every tag: the [`super::encode_max`] sentinel.
pub(super) const MAX: u8 = 0xff;

/// The JSON types as collation sees them, in view-collation order (the discriminant is
/// CouchDB's type rank).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Class {
    Null,
    False,
    True,
    Number,
    String,
    Array,
    Object,
}

impl Class {
    pub(super) fn of(v: &Value) -> Self {
        match v {
            Value::Null => Self::Null,
            Value::Bool(false) => Self::False,
            Value::Bool(true) => Self::True,
            Value::Number(_) => Self::Number,
            Value::String(_) => Self::String,
            Value::Array(_) => Self::Array,
            Value::Object(_) => Self::Object,
        }
    }
}

/// What one collation decides. Tags must lie strictly between [`END`] and [`MAX`], and a
/// number's tag `t` also claims `t + 1` and `t + 2` (see [`number::encode`]).
pub(super) trait Scheme {
    /// The tag of each [`Class`], indexed by its discriminant; their order is the type order.
    const TAGS: [u8; 7];

    /// Orders two strings (also object keys).
    fn compare_str(a: &str, b: &str) -> Ordering;

    /// Appends a string's body (after its tag): self-delimiting and ordered as
    /// [`Scheme::compare_str`], equal exactly when it says `Equal`.
    fn encode_str(s: &str, out: &mut Vec<u8>);

    fn tag(class: Class) -> u8 {
        Self::TAGS.get(class as usize).copied().unwrap_or(MAX)
    }
}

/// Compares two values: type order first, then within the type.
pub(super) fn compare<S: Scheme>(a: &Value, b: &Value) -> Ordering {
    let by_type = S::tag(Class::of(a)).cmp(&S::tag(Class::of(b)));
    by_type.then_with(|| match (a, b) {
        (Value::Number(x), Value::Number(y)) => number::compare(x, y),
        (Value::String(x), Value::String(y)) => S::compare_str(x, y),
        (Value::Array(x), Value::Array(y)) => compare_arrays::<S>(x, y),
        (Value::Object(x), Value::Object(y)) => compare_objects::<S>(x, y),
        _ => Ordering::Equal,
    })
}

/// Element by element; a proper prefix sorts first.
fn compare_arrays<S: Scheme>(a: &[Value], b: &[Value]) -> Ordering {
    let first_difference = a.iter().zip(b).map(|(x, y)| compare::<S>(x, y)).find(|o| o.is_ne());
    first_difference.unwrap_or_else(|| a.len().cmp(&b.len()))
}

/// Member by member in document order, key then value; fewer members sort first.
fn compare_objects<S: Scheme>(a: &Map<String, Value>, b: &Map<String, Value>) -> Ordering {
    let first_difference = a
        .iter()
        .zip(b)
        .map(|((ka, va), (kb, vb))| S::compare_str(ka, kb).then_with(|| compare::<S>(va, vb)))
        .find(|o| o.is_ne());
    first_difference.unwrap_or_else(|| a.len().cmp(&b.len()))
}

/// Appends the encoding of `v` (module docs of [`super`] give the format).
pub(super) fn encode<S: Scheme>(v: &Value, out: &mut Vec<u8>) {
    let tag = S::tag(Class::of(v));
    match v {
        Value::Number(n) => number::encode(n, tag, out),
        Value::String(s) => {
            out.push(tag);
            S::encode_str(s, out);
        }
        Value::Array(items) => {
            encode_open_array::<S>(items, out);
            out.push(END);
        }
        Value::Object(members) => {
            out.push(tag);
            for (key, value) in members {
                out.push(S::tag(Class::String));
                S::encode_str(key, out);
                encode::<S>(value, out);
            }
            out.push(END);
        }
        Value::Null | Value::Bool(_) => out.push(tag),
    }
}

/// Appends the array tag and the elements, without the closing [`END`].
pub(super) fn encode_open_array<S: Scheme>(items: &[Value], out: &mut Vec<u8>) {
    out.push(S::tag(Class::Array));
    for item in items {
        encode::<S>(item, out);
    }
}

/// Appends `bytes` with every `00` written `00 ff`, then the terminator `00 01`. The result
/// orders as `bytes` do (a proper prefix first) and no result is a prefix of another.
pub(super) fn push_terminated(bytes: &[u8], out: &mut Vec<u8>) {
    for &b in bytes {
        out.push(b);
        if b == 0x00 {
            out.push(0xff);
        }
    }
    out.extend_from_slice(&[0x00, 0x01]);
}
