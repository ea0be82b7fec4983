//! Rule 6, denormalized copies: fields copied from a referenced document of the same
//! database, found in two shapes —
//!
//! - an embedded object that refers to another document (a member such as `id`,
//!   `author_id` or `target` holding that document's id) and copies some of its fields
//!   (`{"author": {"id": "a1", "name": "Ada"}}`; top-level objects and elements of top-level
//!   arrays);
//! - top-level siblings of a reference field that share its prefix (`author_id` beside
//!   `author_name`, `authorId` beside `authorName`: copies of the source's `name`).
//!
//! Each copy is compared with the document it refers to. Copied values that differ from
//! their source have drifted (`drifted-copy`); copies of documents that were edited many
//! times (their revision generation) are expensive to keep in sync and better referenced
//! (`changing-copy-source`). A self-reference (a product's embedded reviews naming the
//! product) compares nothing; references to other databases cannot be followed.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Map, Value, json};

use super::sample::Sample;
use super::{Finding, Severity, Thresholds, guides};
use crate::database::Database;

pub const RULE: &str = "drifted-copy";
pub const CHANGING_RULE: &str = "changing-copy-source";

/// Referenced documents read at most per run.
const MAX_LOOKUPS: usize = 2000;
/// Examples shown per copied field.
const EXAMPLES: usize = 3;
/// Longest value shown in an example.
const SHOWN: usize = 64;
/// Longest copied string compared (longer ones are not kept).
const MAX_COPIED: usize = 256;

/// Fields of one document copied from the document `target` refers to.
#[derive(Debug, Clone)]
pub struct Copy {
    pub doc: String,
    pub target: String,
    /// (the copy's path, the source's top-level field, the copied value).
    pub fields: Vec<(String, String, Value)>,
}

/// Copies kept per sampled document, and in all.
pub const PER_DOC: usize = 8;
pub const MAX_COPIES: usize = 20_000;

/// The copies in a body's top-level fields and embedded objects.
pub fn collect(id: &str, body: &Value, out: &mut Vec<Copy>) {
    let Value::Object(map) = body else { return };
    let mut found = top_level(id, map);
    for (key, value) in map {
        let objects: Vec<&Map<String, Value>> = match value {
            Value::Object(o) => vec![o],
            Value::Array(items) => items.iter().filter_map(Value::as_object).collect(),
            _ => continue,
        };
        found.extend(objects.into_iter().filter_map(|object| embedded(id, key, object)));
    }
    let room = MAX_COPIES.saturating_sub(out.len()).min(PER_DOC);
    out.extend(found.into_iter().filter(|c| c.target != id).take(room));
}

fn embedded(doc: &str, path: &str, object: &Map<String, Value>) -> Option<Copy> {
    let (ref_key, target) = object.iter().find_map(|(k, v)| match v {
        Value::String(s) if is_reference(k) && !s.is_empty() => Some((k, s)),
        _ => None,
    })?;
    let fields: Vec<(String, String, Value)> = object
        .iter()
        .filter(|(k, v)| *k != ref_key && is_copyable(v))
        .map(|(k, v)| (format!("{path}.{k}"), k.clone(), v.clone()))
        .collect();
    (!fields.is_empty()).then(|| Copy { doc: doc.to_string(), target: target.clone(), fields })
}

/// `author_id` + `author_name` → a copy of the source's `name`; `authorId` + `authorName` too.
fn top_level(doc: &str, map: &Map<String, Value>) -> Vec<Copy> {
    let mut out = Vec::new();
    for (key, value) in map {
        let Value::String(target) = value else { continue };
        let Some(prefix) = key
            .strip_suffix("_id")
            .map(|p| format!("{p}_"))
            .or_else(|| key.strip_suffix("Id").filter(|p| !p.is_empty()).map(str::to_string))
        else {
            continue;
        };
        if target.is_empty() || prefix.len() < 2 {
            continue;
        }
        let fields: Vec<(String, String, Value)> = map
            .iter()
            .filter(|(k, v)| *k != key && is_copyable(v))
            .filter_map(|(k, v)| Some((k.clone(), source_field(k, &prefix)?, v.clone())))
            .collect();
        if !fields.is_empty() {
            out.push(Copy { doc: doc.to_string(), target: target.clone(), fields });
        }
    }
    out
}

/// The source field a sibling named `{prefix}{field}` copies (`author_name` → `name`,
/// `authorName` → `name`).
fn source_field(key: &str, prefix: &str) -> Option<String> {
    let rest = key.strip_prefix(prefix).filter(|r| !r.is_empty())?;
    if prefix.ends_with('_') {
        return Some(rest.to_string());
    }
    let mut chars = rest.chars();
    let first = chars.next().filter(char::is_ascii_uppercase)?;
    Some(first.to_ascii_lowercase().to_string() + chars.as_str())
}

fn is_copyable(value: &Value) -> bool {
    !value.is_object() && !value.is_array() && value.as_str().is_none_or(|s| s.len() <= MAX_COPIED)
}

/// Member names that hold another document's id.
fn is_reference(key: &str) -> bool {
    matches!(key, "id" | "_id" | "target" | "ref" | "posted_by")
        || key.ends_with("_id")
        || key.ends_with("Id")
        || key.ends_with("_ref")
}

/// What the copies at one path showed.
#[derive(Default)]
struct Compared {
    source_field: String,
    compared: u64,
    drifted: u64,
    examples: Vec<Value>,
    /// The revision generation of each distinct source compared.
    source_edits: BTreeMap<String, u64>,
}

/// A referenced document: its top-level fields and how many times it was written.
struct Source {
    fields: Map<String, Value>,
    generation: u64,
}

pub fn check(db: &Database, sample: &Sample, t: &Thresholds) -> Vec<Finding> {
    let mut sources: HashMap<String, Option<Source>> = HashMap::new();
    let mut paths: BTreeMap<String, Compared> = BTreeMap::new();
    for copy in &sample.copies {
        if !sources.contains_key(&copy.target) && sources.len() >= MAX_LOOKUPS {
            continue;
        }
        let source = sources.entry(copy.target.clone()).or_insert_with(|| read(db, &copy.target));
        let Some(source) = source else { continue };
        for (path, field, value) in &copy.fields {
            let Some(original) = source.fields.get(field).filter(|v| is_copyable(v)) else {
                continue;
            };
            let c = paths.entry(path.clone()).or_default();
            c.source_field.clone_from(field);
            c.compared += 1;
            c.source_edits.insert(copy.target.clone(), source.generation);
            if original != value {
                c.drifted += 1;
                if c.examples.len() < EXAMPLES {
                    c.examples.push(json!({"id": copy.doc, "refers_to": copy.target,
                        "copy": shown(value), "source": shown(original)}));
                }
            }
        }
    }
    let mut found: Vec<Finding> =
        paths.iter().filter(|(_, c)| c.drifted > 0).map(|(p, c)| drifted(p, c)).collect();
    found.extend(paths.iter().filter_map(|(p, c)| changing(p, c, t)));
    found
}

fn drifted(path: &str, c: &Compared) -> Finding {
    let field = &c.source_field;
    Finding {
        rule: RULE,
        severity: Severity::Warning,
        summary: format!(
            "`{path}` differs from the `{field}` of the document it refers to in {} of {} copies",
            c.drifted, c.compared
        ),
        guide: guides::DENORMALIZED_COPIES,
        evidence: json!({"field": path, "source_field": field, "copies_compared": c.compared,
            "copies_drifted": c.drifted, "examples": c.examples}),
        suggestion: format!(
            "Unless `{path}` is meant as a snapshot of the moment it was written (an order's \
             address), update the copies in the same transaction as their source (POST \
             /_transaction, or a trigger on the source), or keep only the reference and read \
             the source when needed."
        ),
    }
}

/// Copies whose sources were typically written many times: every such write must update
/// every copy.
fn changing(path: &str, c: &Compared, t: &Thresholds) -> Option<Finding> {
    let mut edits: Vec<u64> = c.source_edits.values().copied().collect();
    edits.sort_unstable();
    let median = *edits.get(edits.len() / 2)?;
    if edits.len() < t.changing_sources || median < t.source_edits {
        return None;
    }
    let busiest: Vec<Value> = {
        let mut by: Vec<(&String, &u64)> = c.source_edits.iter().collect();
        by.sort_by_key(|(_, n)| std::cmp::Reverse(**n));
        by.iter().take(EXAMPLES).map(|(id, n)| json!({"id": id, "revisions": n})).collect()
    };
    let field = &c.source_field;
    Some(Finding {
        rule: CHANGING_RULE,
        severity: Severity::Info,
        summary: format!(
            "`{path}` copies `{field}` from documents written {median} times (median of {})",
            edits.len()
        ),
        guide: guides::DENORMALIZED_COPIES,
        evidence: json!({"field": path, "source_field": field, "sources_compared": edits.len(),
            "copies_compared": c.compared, "source_revisions": {"p50": median,
            "max": edits.last()}, "busiest_sources": busiest}),
        suggestion: format!(
            "The documents `{path}` copies from change often, and each change must be repeated \
             in every copy: keep only the reference and read the source when needed (or in \
             the same request, with a view emitting {{\"_id\": reference}} and \
             include_docs=true); copy only fields that rarely change."
        ),
    })
}

fn read(db: &Database, id: &str) -> Option<Source> {
    let doc = db.get_stored(id, None).ok()?;
    match serde_json::from_slice(&doc.body).ok()? {
        Value::Object(fields) => Some(Source { fields, generation: doc.rev.pos }),
        _ => None,
    }
}

fn shown(value: &Value) -> Value {
    match value {
        Value::String(s) if s.chars().count() > SHOWN => {
            Value::String(format!("{}…", s.chars().take(SHOWN).collect::<String>()))
        }
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_references_with_copied_fields_are_collected() {
        let body = json!({"title": "t", "author": {"author_id": "a1", "name": "Ada"},
            "links": [{"target": "S1", "doc_type": "student"}, {"target": "C1"}],
            "tags": ["x"], "publisher": {"name": "no reference"}});
        let mut copies = Vec::new();
        collect("b1", &body, &mut copies);
        let got: Vec<(&str, &str)> = copies
            .iter()
            .flat_map(|c| c.fields.iter().map(|f| (f.0.as_str(), f.1.as_str())))
            .collect();
        assert_eq!(got, [("author.name", "name"), ("links.doc_type", "doc_type")]);
    }

    #[test]
    fn top_level_siblings_of_a_reference_are_copies() {
        let body = json!({"_id": "m1", "posted_by": "u1", "author_id": "a1",
            "author_name": "Ada", "authorId": "a2", "authorEmail": "x@y", "author": 3,
            "product_id": "m1", "product_name": "self"});
        let mut copies = Vec::new();
        collect("m1", &body, &mut copies);
        let got: Vec<(&str, &str, &str)> = copies
            .iter()
            .flat_map(|c| c.fields.iter().map(|f| (c.target.as_str(), f.0.as_str(), f.1.as_str())))
            .collect();
        assert_eq!(got, [("a1", "author_name", "name"), ("a2", "authorEmail", "email")]);
    }

    #[test]
    fn reference_names() {
        for key in ["id", "author_id", "pubId", "target", "posted_by", "pub_ref"] {
            assert!(is_reference(key), "{key}");
        }
        for key in ["name", "idea", "identity"] {
            assert!(!is_reference(key), "{key}");
        }
    }
}
