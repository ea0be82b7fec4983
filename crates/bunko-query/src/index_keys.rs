//! The entries a multikey JSON index over some fields stores for a document.
//!
//! Each field path is followed from the document root, segment by segment:
//!
//! - on an object, a segment names a member; a missing member ends the path (no value);
//! - on an array, a numeric segment takes that position (CouchDB's `"a.0"`); any other
//!   segment continues into *each* object element, choosing that element (elements that are
//!   not objects end the path);
//! - on a scalar, a remaining segment ends the path;
//! - where the path ends on an array, the field takes each element (choosing it) and also
//!   the whole array (choosing "whole"), so that equality on the whole array, `$size` and
//!   empty arrays stay answerable. Arrays nested in that array are values, not expanded.
//!
//! A field so yields a list of values, each with the array choices made to reach it. An
//! index entry picks one value per field such that any array reached by several fields is
//! chosen the same way by all of them: fields crossing the *same* array pair up element by
//! element (`links.target` with `links.doc_type` gives one entry per link, never a target
//! of one link with the type of another), while fields crossing *different* arrays combine
//! in every way (a cartesian product, which grows fast: MongoDB refuses such "parallel
//! arrays"; a caller may want a limit). Arrays are told apart by identity, not content.
//!
//! A document where some field yields no value has no entry (CouchDB's JSON indexes skip
//! documents missing an indexed field). Entries are returned in collation order without
//! duplicates (entries that collate equal, like `[1]` and `[1.0]`, count as duplicates; the
//! first in document order is kept). With no fields there is one empty entry.

use std::cmp::Ordering;

use serde_json::Value;

use crate::cmp::collate;
use crate::path::{FieldPath, array_index};

/// How a value was reached through one array.
#[derive(Clone, Copy, PartialEq)]
enum Choice {
    Element(usize),
    Whole,
}

/// The arrays crossed on the way to a value: (array, choice), compared by array identity.
type Binding<'a> = Vec<(&'a Value, Choice)>;

/// The index entries (one value per field, in field order) of `doc`; see the module
/// documentation for the rule.
pub fn index_keys(doc: &Value, fields: &[FieldPath]) -> Vec<Vec<Value>> {
    let per_field: Vec<Vec<(Binding<'_>, &Value)>> = fields
        .iter()
        .map(|field| {
            let mut out = Vec::new();
            walk(doc, field.segments(), Vec::new(), &mut out);
            out
        })
        .collect();
    let mut entries = Vec::new();
    combine(&per_field, &mut Vec::new(), &mut Vec::new(), &mut entries);
    sort_dedup(entries)
}

fn walk<'a>(
    value: &'a Value,
    segments: &[String],
    binding: Binding<'a>,
    out: &mut Vec<(Binding<'a>, &'a Value)>,
) {
    let Some((first, rest)) = segments.split_first() else {
        if let Value::Array(items) = value {
            for (i, item) in items.iter().enumerate() {
                out.push((with(&binding, value, Choice::Element(i)), item));
            }
            out.push((with(&binding, value, Choice::Whole), value));
        } else {
            out.push((binding, value));
        }
        return;
    };
    match value {
        Value::Object(map) => {
            if let Some(child) = map.get(first) {
                walk(child, rest, binding, out);
            }
        }
        Value::Array(items) => {
            if let Some(i) = array_index(first) {
                if let Some(item) = items.get(i) {
                    walk(item, rest, binding, out);
                }
                return;
            }
            for (i, item) in items.iter().enumerate().filter(|(_, item)| item.is_object()) {
                walk(item, segments, with(&binding, value, Choice::Element(i)), out);
            }
        }
        _ => {}
    }
}

fn with<'a>(binding: &Binding<'a>, array: &'a Value, choice: Choice) -> Binding<'a> {
    let mut out = binding.clone();
    out.push((array, choice));
    out
}

/// Depth-first over the fields, keeping only consistent choices.
fn combine<'a>(
    per_field: &[Vec<(Binding<'a>, &'a Value)>],
    chosen: &mut Binding<'a>,
    entry: &mut Vec<&'a Value>,
    out: &mut Vec<Vec<Value>>,
) {
    let Some((candidates, rest)) = per_field.split_first() else {
        out.push(entry.iter().map(|v| (*v).clone()).collect());
        return;
    };
    for (binding, value) in candidates {
        if !consistent(chosen, binding) {
            continue;
        }
        let mark = chosen.len();
        chosen.extend(binding.iter().copied());
        entry.push(value);
        combine(rest, chosen, entry, out);
        entry.pop();
        chosen.truncate(mark);
    }
}

fn consistent(chosen: &Binding<'_>, binding: &Binding<'_>) -> bool {
    binding.iter().all(|(array, choice)| {
        chosen.iter().all(|(other, made)| !std::ptr::eq(*array, *other) || made == choice)
    })
}

fn sort_dedup(entries: Vec<Vec<Value>>) -> Vec<Vec<Value>> {
    let mut indexed: Vec<(usize, Vec<Value>)> = entries.into_iter().enumerate().collect();
    indexed.sort_by(|(i, a), (j, b)| cmp_entries(a, b).then(i.cmp(j)));
    indexed.dedup_by(|(_, later), (_, kept)| cmp_entries(later, kept).is_eq());
    indexed.into_iter().map(|(_, entry)| entry).collect()
}

fn cmp_entries(a: &[Value], b: &[Value]) -> Ordering {
    a.iter().zip(b).map(|(x, y)| collate(x, y)).find(|o| o.is_ne()).unwrap_or(Ordering::Equal)
}
