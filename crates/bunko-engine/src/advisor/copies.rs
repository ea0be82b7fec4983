//! Rule 6, denormalized copies that drifted: an embedded object that refers to another
//! document of the database (a member such as `id`, `author_id` or `target` holding that
//! document's id) and copies some of its fields (`{"author": {"id": "a1", "name": "Ada"}}`)
//! is compared with the document it refers to; copied values that differ from their source
//! have drifted. References to documents of other databases cannot be followed and are
//! skipped.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Map, Value, json};

use super::sample::Sample;
use super::{Finding, Severity, guides};
use crate::database::Database;

pub const RULE: &str = "drifted-copy";

/// Referenced documents read at most per run.
const MAX_LOOKUPS: usize = 2000;
/// Examples shown per copied field.
const EXAMPLES: usize = 3;
/// Longest value shown in an example.
const SHOWN: usize = 64;
/// Longest copied string compared (longer ones are not kept).
const MAX_COPIED: usize = 256;

/// One embedded object that refers to another document and copies some of its fields.
#[derive(Debug, Clone)]
pub struct Copy {
    pub doc: String,
    /// Where the object sits: `author`, or `links` for the elements of an array.
    pub path: String,
    pub target: String,
    /// The object's other scalar members.
    pub fields: Vec<(String, Value)>,
}

/// Copies kept per sampled document, and in all.
pub const PER_DOC: usize = 8;
pub const MAX_COPIES: usize = 20_000;

/// The embedded objects of a body's top-level fields that look like references with copies.
pub fn collect(id: &str, body: &Value, out: &mut Vec<Copy>) {
    let Value::Object(map) = body else { return };
    let mut taken = 0;
    for (key, value) in map {
        let objects: Vec<&Map<String, Value>> = match value {
            Value::Object(o) => vec![o],
            Value::Array(items) => items.iter().filter_map(Value::as_object).collect(),
            _ => continue,
        };
        for object in objects {
            if taken == PER_DOC || out.len() >= MAX_COPIES {
                return;
            }
            if let Some(copy) = copy_of(id, key, object) {
                out.push(copy);
                taken += 1;
            }
        }
    }
}

fn copy_of(doc: &str, path: &str, object: &Map<String, Value>) -> Option<Copy> {
    let (ref_key, target) = object.iter().find_map(|(k, v)| match v {
        Value::String(s) if is_reference(k) && !s.is_empty() => Some((k, s)),
        _ => None,
    })?;
    let fields: Vec<(String, Value)> = object
        .iter()
        .filter(|(k, v)| *k != ref_key && !v.is_object() && !v.is_array())
        .filter(|(_, v)| v.as_str().is_none_or(|s| s.len() <= MAX_COPIED))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    (!fields.is_empty()).then(|| Copy {
        doc: doc.to_string(),
        path: path.to_string(),
        target: target.clone(),
        fields,
    })
}

/// Member names that hold another document's id.
fn is_reference(key: &str) -> bool {
    matches!(key, "id" | "_id" | "target" | "ref" | "posted_by")
        || key.ends_with("_id")
        || key.ends_with("Id")
        || key.ends_with("_ref")
}

#[derive(Default)]
struct Drift {
    compared: u64,
    drifted: u64,
    examples: Vec<Value>,
}

pub fn check(db: &Database, sample: &Sample) -> Vec<Finding> {
    let mut sources: HashMap<String, Option<Map<String, Value>>> = HashMap::new();
    let mut drift: BTreeMap<String, Drift> = BTreeMap::new();
    for copy in &sample.copies {
        if !sources.contains_key(&copy.target) && sources.len() >= MAX_LOOKUPS {
            continue;
        }
        let source = sources.entry(copy.target.clone()).or_insert_with(|| read(db, &copy.target));
        let Some(source) = source else { continue };
        for (key, value) in &copy.fields {
            let Some(original) = source.get(key).filter(|v| !v.is_object() && !v.is_array()) else {
                continue;
            };
            let d = drift.entry(format!("{}.{key}", copy.path)).or_default();
            d.compared += 1;
            if original != value {
                d.drifted += 1;
                if d.examples.len() < EXAMPLES {
                    d.examples.push(json!({"id": copy.doc, "refers_to": copy.target,
                        "copy": shown(value), "source": shown(original)}));
                }
            }
        }
    }
    drift.into_iter().filter(|(_, d)| d.drifted > 0).map(|(path, d)| finding(&path, d)).collect()
}

fn finding(path: &str, d: Drift) -> Finding {
    let field = path.rsplit('.').next().unwrap_or(path);
    Finding {
        rule: RULE,
        severity: Severity::Warning,
        summary: format!(
            "`{path}` differs from the `{field}` of the document it refers to in {} of {} copies",
            d.drifted, d.compared
        ),
        guide: guides::DENORMALIZED_COPIES,
        evidence: json!({"field": path, "source_field": field, "copies_compared": d.compared,
            "copies_drifted": d.drifted, "examples": d.examples}),
        suggestion: format!(
            "Unless `{path}` is meant as a snapshot of the moment it was written (an order's \
             address), update the copies in the same transaction as their source (POST \
             /_transaction, or a trigger on the source), or keep only the reference and read \
             the source when needed."
        ),
    }
}

fn read(db: &Database, id: &str) -> Option<Map<String, Value>> {
    let doc = db.get(id, None).ok()?;
    match serde_json::from_slice(&doc.body).ok()? {
        Value::Object(map) => Some(map),
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
        let got: Vec<(&str, &str, usize)> =
            copies.iter().map(|c| (c.path.as_str(), c.target.as_str(), c.fields.len())).collect();
        assert_eq!(got, [("author", "a1", 1), ("links", "S1", 1)]);
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
