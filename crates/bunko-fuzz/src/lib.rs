//! Fuzz targets for what a request reaches first: document bodies, Mango selectors, query
//! parameters, MongoDB wire messages and stored MongoDB values, and the key encodings every index and view scan relies on (order and round
//! trip). The targets live in `tests/` as [bolero](https://docs.rs/bolero) checks:
//!
//! - `cargo test -p bunko-fuzz` runs each one for a short random run (part of CI);
//! - `scripts/fuzz.sh [seconds]` runs each under libFuzzer through `cargo bolero`, coverage
//!   guided, on the stable toolchain (no sanitizer: those need nightly).
//!
//! A crash found becomes a regression test beside the code it broke.
//!
//! This crate holds the one piece the targets share: [`json()`], which turns fuzzer bytes
//! into a JSON value, so that the targets explore values rather than mostly invalid text.

pub use bolero;
use serde_json::{Map, Number, Value, json};

/// Builds a JSON value from `bytes` (consumed from the front), nesting at most `depth`
/// levels. Strings and keys come from a small alphabet that includes Mango operators, `_`
/// fields, dots, non-ASCII and combining characters, so that selectors and collation meet
/// the cases that matter.
pub fn json(bytes: &mut &[u8], depth: u32) -> Value {
    let tag = take(bytes);
    match tag % 8 {
        0 => Value::Null,
        1 => Value::Bool(tag & 8 != 0),
        2 => integer(bytes),
        3 => float(bytes),
        4 => Value::String(text(bytes)),
        5 if depth > 0 => {
            let len = take(bytes) % 5;
            Value::Array((0..len).map(|_| json(bytes, depth - 1)).collect())
        }
        6 if depth > 0 => {
            let len = take(bytes) % 5;
            let map: Map<String, Value> =
                (0..len).map(|_| (text(bytes), json(bytes, depth - 1))).collect();
            Value::Object(map)
        }
        _ => json!(WORDS[usize::from(take(bytes)) % WORDS.len()]),
    }
}

/// Words that selectors, documents, collation and Extended JSON care about.
const WORDS: [&str; 46] = [
    "$eq",
    "$ne",
    "$gt",
    "$gte",
    "$lt",
    "$lte",
    "$in",
    "$nin",
    "$and",
    "$or",
    "$nor",
    "$not",
    "$exists",
    "$type",
    "$size",
    "$mod",
    "$regex",
    "$elemMatch",
    "$allMatch",
    "$all",
    "$keyMapMatch",
    "$text",
    "$beginsWith",
    "_id",
    "_rev",
    "a",
    "a.b",
    "b",
    "links",
    "links.target",
    "",
    "é",
    "e\u{301}",
    "A",
    "a\\.b",
    "\u{0}",
    "🦀",
    "null",
    "ε",
    "$",
    "$oid",
    "$numberLong",
    "$numberDouble",
    "$date",
    "$binary",
    "$bunkoDoc",
];

fn take(bytes: &mut &[u8]) -> u8 {
    match bytes.split_first() {
        Some((first, rest)) => {
            *bytes = rest;
            *first
        }
        None => 0,
    }
}

fn integer(bytes: &mut &[u8]) -> Value {
    let raw = i64::from_le_bytes(std::array::from_fn(|_| take(bytes)));
    json!(raw >> (take(bytes) % 64))
}

fn float(bytes: &mut &[u8]) -> Value {
    let raw = f64::from_bits(u64::from_le_bytes(std::array::from_fn(|_| take(bytes))));
    Number::from_f64(raw).map_or(Value::Null, Value::Number)
}

fn text(bytes: &mut &[u8]) -> String {
    let len = take(bytes) % 4;
    (0..len).map(|_| WORDS[usize::from(take(bytes)) % WORDS.len()]).collect()
}
