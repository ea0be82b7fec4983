//! Stand-in for `bunko_doc::collate::compare` until that lands: CouchDB view collation,
//! null < false < true < numbers < strings < arrays < objects.
//!
//! Strings compare by code point here, not by the Unicode Collation Algorithm; everything
//! else is as CouchDB's `couch_ejson_compare`: numbers by value (`1 == 1.0`), arrays element
//! by element then by length, objects member by member (key, then value) then by size.
//! The crate calls it only through [`crate::cmp::collate`], so switching to the real
//! collation is a one-line change there.

use std::cmp::Ordering;

use serde_json::Value;

use crate::term::cmp_numbers;

pub(crate) fn cmp_json(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => cmp_numbers(x, y),
        (Value::String(x), Value::String(y)) => x.cmp(y),
        (Value::Array(x), Value::Array(y)) => {
            for (p, q) in x.iter().zip(y) {
                let order = cmp_json(p, q);
                if order != Ordering::Equal {
                    return order;
                }
            }
            x.len().cmp(&y.len())
        }
        (Value::Object(x), Value::Object(y)) => {
            for ((kp, vp), (kq, vq)) in x.iter().zip(y) {
                let order = kp.cmp(kq).then_with(|| cmp_json(vp, vq));
                if order != Ordering::Equal {
                    return order;
                }
            }
            x.len().cmp(&y.len())
        }
        _ => rank(a).cmp(&rank(b)),
    }
}

fn rank(v: &Value) -> u8 {
    match v {
        Value::Null => 0,
        Value::Bool(false) => 1,
        Value::Bool(true) => 2,
        Value::Number(_) => 3,
        Value::String(_) => 4,
        Value::Array(_) => 5,
        Value::Object(_) => 6,
    }
}
