//! Value helpers shared by the operators: field-path lookup, MongoDB's comparison order of
//! BSON values, `$type` names, truthiness and numbers.
//!
//! Comparison follows the BSON type order (MinKey < null < numbers < strings < objects <
//! arrays < binData < ObjectId < bool < date < timestamp < regex < MaxKey); numbers compare
//! by value across int, long, double and decimal (NaN below every number); strings by
//! bytes (the `simple` collation).

use std::cmp::Ordering;

use bson::{Bson, Decimal128, Document};

use super::MISSING;

/// The value at `path` under `value`. Through an array, the path maps over its elements
/// (documents only), so `$a.b` on `{a: [{b: 1}, {b: 2}, {c: 3}]}` is `[1, 2]`.
pub fn get_path(value: &Bson, path: &[String]) -> Bson {
    let Some((first, rest)) = path.split_first() else { return value.clone() };
    match value {
        Bson::Document(doc) => match doc.get(first) {
            Some(v) => get_path(v, rest),
            None => MISSING,
        },
        Bson::Array(items) => Bson::Array(
            items
                .iter()
                .filter(|i| matches!(i, Bson::Document(_) | Bson::Array(_)))
                .map(|i| get_path(i, path))
                .filter(|v| *v != MISSING)
                .collect(),
        ),
        _ => MISSING,
    }
}

/// The type order rank (a MongoDB canonical type).
fn rank(v: &Bson) -> u8 {
    match v {
        Bson::MinKey => 0,
        Bson::Null | Bson::Undefined => 1,
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => 2,
        Bson::String(_) | Bson::Symbol(_) => 3,
        Bson::Document(_) => 4,
        Bson::Array(_) => 5,
        Bson::Binary(_) => 6,
        Bson::ObjectId(_) => 7,
        Bson::Boolean(_) => 8,
        Bson::DateTime(_) => 9,
        Bson::Timestamp(_) => 10,
        Bson::RegularExpression(_) => 11,
        Bson::DbPointer(_) => 12,
        Bson::JavaScriptCode(_) => 13,
        Bson::JavaScriptCodeWithScope(_) => 14,
        Bson::MaxKey => 15,
    }
}

/// MongoDB's order of two values.
pub fn compare(a: &Bson, b: &Bson) -> Ordering {
    let (ra, rb) = (rank(a), rank(b));
    if ra != rb {
        return ra.cmp(&rb);
    }
    match (a, b) {
        _ if ra == 2 => compare_numbers(a, b),
        (Bson::String(x) | Bson::Symbol(x), Bson::String(y) | Bson::Symbol(y)) => x.cmp(y),
        (Bson::Document(x), Bson::Document(y)) => compare_docs(x, y),
        (Bson::Array(x), Bson::Array(y)) => x
            .iter()
            .zip(y)
            .map(|(p, q)| compare(p, q))
            .find(|o| o.is_ne())
            .unwrap_or(x.len().cmp(&y.len())),
        (Bson::Binary(x), Bson::Binary(y)) => x
            .bytes
            .len()
            .cmp(&y.bytes.len())
            .then(u8::from(x.subtype).cmp(&u8::from(y.subtype)))
            .then(x.bytes.cmp(&y.bytes)),
        (Bson::ObjectId(x), Bson::ObjectId(y)) => x.bytes().cmp(&y.bytes()),
        (Bson::Boolean(x), Bson::Boolean(y)) => x.cmp(y),
        (Bson::DateTime(x), Bson::DateTime(y)) => x.cmp(y),
        (Bson::Timestamp(x), Bson::Timestamp(y)) => {
            (x.time, x.increment).cmp(&(y.time, y.increment))
        }
        (Bson::RegularExpression(x), Bson::RegularExpression(y)) => {
            (x.pattern.as_str(), x.options.as_str()).cmp(&(y.pattern.as_str(), y.options.as_str()))
        }
        (Bson::JavaScriptCode(x), Bson::JavaScriptCode(y)) => x.cmp(y),
        _ => Ordering::Equal,
    }
}

fn compare_docs(x: &Document, y: &Document) -> Ordering {
    for ((kx, vx), (ky, vy)) in x.iter().zip(y) {
        let ord = rank(vx).cmp(&rank(vy)).then_with(|| kx.cmp(ky)).then_with(|| compare(vx, vy));
        if ord.is_ne() {
            return ord;
        }
    }
    x.len().cmp(&y.len())
}

fn compare_numbers(a: &Bson, b: &Bson) -> Ordering {
    if let (Some(x), Some(y)) = (exact_int(a), exact_int(b)) {
        return x.cmp(&y);
    }
    let (x, y) = (to_f64(a).unwrap_or(f64::NAN), to_f64(b).unwrap_or(f64::NAN));
    crate::numbers::order(x, y, || {
        Some((crate::numbers::Exact::of_bson(a)?, crate::numbers::Exact::of_bson(b)?))
    })
}

fn exact_int(v: &Bson) -> Option<i64> {
    match v {
        Bson::Int32(i) => Some(i64::from(*i)),
        Bson::Int64(i) => Some(*i),
        _ => None,
    }
}

/// Equality in MongoDB's order (`1 == 1.0`).
pub fn equal(a: &Bson, b: &Bson) -> bool {
    compare(a, b).is_eq()
}

/// A number as f64 (Decimal128 through its decimal text).
pub fn to_f64(v: &Bson) -> Option<f64> {
    match v {
        Bson::Int32(i) => Some(f64::from(*i)),
        Bson::Int64(i) => Some(*i as f64),
        Bson::Double(d) => Some(*d),
        Bson::Decimal128(d) => Some(decimal_to_f64(d)),
        _ => None,
    }
}

pub fn decimal_to_f64(d: &Decimal128) -> f64 {
    match d.to_string().as_str() {
        "Infinity" => f64::INFINITY,
        "-Infinity" => f64::NEG_INFINITY,
        s => s.parse().unwrap_or(f64::NAN),
    }
}

pub fn decimal(f: f64) -> Bson {
    let text = if f.is_nan() {
        "NaN".to_string()
    } else if f.is_infinite() {
        if f > 0.0 { "Infinity".into() } else { "-Infinity".into() }
    } else {
        format!("{f}")
    };
    text.parse::<Decimal128>().map(Bson::Decimal128).unwrap_or(Bson::Double(f))
}

pub fn is_number(v: &Bson) -> bool {
    matches!(v, Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_))
}

/// Null, undefined or missing.
pub fn is_nullish(v: &Bson) -> bool {
    matches!(v, Bson::Null | Bson::Undefined)
}

/// `$type`'s name of a value (`missing` for a missing one).
pub fn type_name(v: &Bson) -> &'static str {
    match v {
        Bson::Double(_) => "double",
        Bson::String(_) => "string",
        Bson::Document(_) => "object",
        Bson::Array(_) => "array",
        Bson::Binary(_) => "binData",
        Bson::Undefined => "missing",
        Bson::ObjectId(_) => "objectId",
        Bson::Boolean(_) => "bool",
        Bson::DateTime(_) => "date",
        Bson::Null => "null",
        Bson::RegularExpression(_) => "regex",
        Bson::DbPointer(_) => "dbPointer",
        Bson::JavaScriptCode(_) => "javascript",
        Bson::Symbol(_) => "symbol",
        Bson::JavaScriptCodeWithScope(_) => "javascriptWithScope",
        Bson::Int32(_) => "int",
        Bson::Timestamp(_) => "timestamp",
        Bson::Int64(_) => "long",
        Bson::Decimal128(_) => "decimal",
        Bson::MinKey => "minKey",
        Bson::MaxKey => "maxKey",
    }
}

/// Aggregation truthiness: false, null, missing and zero are false.
pub fn truthy(v: &Bson) -> bool {
    match v {
        Bson::Boolean(b) => *b,
        Bson::Null | Bson::Undefined => false,
        Bson::Int32(i) => *i != 0,
        Bson::Int64(i) => *i != 0,
        Bson::Double(d) => *d != 0.0,
        Bson::Decimal128(d) => decimal_to_f64(d) != 0.0,
        _ => true,
    }
}

/// A number as i64 if it is integral.
pub fn to_int(v: &Bson) -> Option<i64> {
    match v {
        Bson::Int32(i) => Some(i64::from(*i)),
        Bson::Int64(i) => Some(*i),
        Bson::Double(d) if d.fract() == 0.0 && d.abs() < 9.2e18 => Some(*d as i64),
        Bson::Decimal128(d) => {
            let f = decimal_to_f64(d);
            (f.fract() == 0.0 && f.abs() < 9.2e18).then_some(f as i64)
        }
        _ => None,
    }
}

/// A value as it is stored in a field: missing becomes null.
pub fn or_null(v: Bson) -> Bson {
    if v == MISSING { Bson::Null } else { v }
}

/// The narrowest of int/long that holds `i`.
pub fn int_or_long(i: i64) -> Bson {
    i32::try_from(i).map(Bson::Int32).unwrap_or(Bson::Int64(i))
}

/// Sorts values in MongoDB's order (stable).
pub fn sort_values(values: &mut [Bson]) {
    values.sort_by(compare);
}

/// Roughly the BSON size of a document, without encoding it.
pub fn doc_size(d: &Document) -> usize {
    5 + d.iter().map(|(k, v)| 2 + k.len() + approx_size(v)).sum::<usize>()
}

/// Roughly the BSON size of a value.
pub fn approx_size(v: &Bson) -> usize {
    match v {
        Bson::Document(d) => doc_size(d),
        Bson::Array(items) => 5 + items.iter().map(|v| 4 + approx_size(v)).sum::<usize>(),
        Bson::String(s) | Bson::Symbol(s) | Bson::JavaScriptCode(s) => 5 + s.len(),
        Bson::Binary(b) => 5 + b.bytes.len(),
        Bson::RegularExpression(r) => 2 + r.pattern.len() + r.options.len(),
        Bson::Decimal128(_) => 16,
        Bson::ObjectId(_) => 12,
        Bson::Int32(_) => 4,
        Bson::Boolean(_) => 1,
        Bson::Null | Bson::Undefined | Bson::MinKey | Bson::MaxKey => 0,
        _ => 8,
    }
}
