//! What one document puts in a Mango text index (`mango_native_proc:get_text_entries`):
//! every scalar reached through objects and arrays as a typed field, each array's length
//! (unless `index_array_lengths` is false), every string again in `$default` (unless the
//! default field is disabled), and the name of each of those fields in `$fieldnames`.
//! An index that lists `fields` keeps only those. Design documents and documents the
//! partial filter rejects put nothing in.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::{ARRAY, field_name};
use crate::selector::{Dialect, Selector};

/// The field carrying every string value, for `$text`.
pub const DEFAULT: &str = "$default";
/// The field carrying the names of a document's fields.
pub const FIELD_NAMES: &str = "$fieldnames";

/// The index options that decide what a document indexes.
#[derive(Debug, Clone)]
pub struct Options {
    /// Escaped names of the fields to index (`None`: all of them).
    pub fields: Option<BTreeSet<String>>,
    pub default_field: bool,
    pub array_lengths: bool,
    pub partial_filter: Option<Selector>,
}

impl Options {
    /// The escaped field name of a definition's `{"name": "a.b", "type": "string"}`.
    pub fn column_name(name: &str, kind: &str) -> String {
        let segments: Vec<String> = crate::path::FieldPath::parse(name)
            .map(|p| p.segments().to_vec())
            .unwrap_or_else(|_| vec![name.to_string()]);
        field_name(&segments, kind)
    }
}

/// The `(field, value)` pairs of document `doc` (with `_id` and `_rev`); empty when it
/// is not indexed.
pub fn entries(doc: &Value, options: &Options) -> Vec<(String, Value)> {
    let design =
        doc.get("_id").and_then(Value::as_str).is_some_and(|id| id.starts_with("_design/"));
    let filtered = options.partial_filter.as_ref().is_some_and(|s| !s.matches(doc, Dialect::Mango));
    if design || filtered {
        return Vec::new();
    }
    let mut fields = Vec::new();
    let mut path = Vec::new();
    walk(doc, &mut path, options, &mut fields);
    let names: BTreeSet<String> = fields.iter().map(|(n, _)| n.clone()).collect();
    let mut out: Vec<(String, Value)> =
        names.into_iter().map(|n| (FIELD_NAMES.to_string(), Value::String(n))).collect();
    if options.default_field {
        for (name, value) in &fields {
            if value.is_string() && name != DEFAULT {
                out.push((DEFAULT.to_string(), value.clone()));
            }
        }
    }
    out.extend(fields);
    out
}

fn walk(v: &Value, path: &mut Vec<String>, options: &Options, out: &mut Vec<(String, Value)>) {
    match v {
        Value::Object(members) => object(members, path, options, out),
        Value::Array(items) => {
            path.push(ARRAY.to_string());
            if options.array_lengths {
                let name = field_name(path, "length");
                out.push((name, Value::from(items.len())));
            }
            for item in items {
                walk(item, path, options, out);
            }
            path.pop();
        }
        Value::String(_) => scalar(path, "string", v.clone(), options, out),
        Value::Number(_) => scalar(path, "number", v.clone(), options, out),
        Value::Bool(_) => scalar(path, "boolean", v.clone(), options, out),
        Value::Null => scalar(path, "null", Value::Bool(true), options, out),
    }
}

fn object(
    members: &Map<String, Value>,
    path: &mut Vec<String>,
    options: &Options,
    out: &mut Vec<(String, Value)>,
) {
    for (key, value) in members {
        path.push(key.clone());
        walk(value, path, options, out);
        path.pop();
    }
}

fn scalar(
    path: &[String],
    kind: &str,
    value: Value,
    options: &Options,
    out: &mut Vec<(String, Value)>,
) {
    if path.is_empty() {
        return;
    }
    let name = field_name(path, kind);
    if options.fields.as_ref().is_none_or(|f| f.contains(&name)) {
        out.push((name, value));
    }
}
