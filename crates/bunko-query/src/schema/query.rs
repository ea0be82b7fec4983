//! Why a document fails a collection validator written with query operators, in the shape
//! MongoDB 5+ reports under `errInfo.details` of a `DocumentValidationFailure` (121).
//!
//! The validator arrives as a tree the MongoDB front end builds from the filter (JSON,
//! stored with the validator): logical nodes `{"op": "$and"|"$or"|"$nor", "clauses": [...]}`
//! and `{"op": "$not", "clause": ...}`, `{"op": "$jsonSchema", "schema": ...}`, and leaves
//! `{"op": "$gt", "path": "a.b", "specifiedAs": {...}, "selector": <selector JSON>}` whose
//! `selector` decides (through the caller's `matches`, so exactly as the validator is
//! enforced) whether the leaf holds. A top-level filter of several conditions is an
//! implicit `$and`; one of a single condition is that condition.
//!
//! A failing leaf reports `operatorName`, `specifiedAs`, `reason` (`comparison failed`,
//! `field was missing`, ...) and the `consideredValue` at its path (`consideredValues` when
//! the path crossed arrays, at most 10 of them, then `consideredValuesTruncated: true`;
//! `consideredType` for `$type`). `$all` and `$elemMatch` consider
//! the array itself (no traversal of a last array); `$elemMatch` on a value that is not an
//! array, and a bit operator (`$bitsAllSet`, ...) on one that is neither a number nor
//! binary data, report `type did not match` with `consideredType` and `expectedType(s)`, as
//! MongoDB's `doc_validation_error.cpp` does. `$and`/`$or` list their failing
//! clauses (`clausesNotSatisfied: [{index, details}]`); under `$not` and `$nor` the
//! explanation is inverted (`clausesSatisfied`, `comparison succeeded`).

use bson::{Bson, Document, doc};
use bunko_doc::ejson;
use serde_json::Value;

use crate::expr::value::type_name;

/// The most values a leaf lists as `consideredValues` (MongoDB's
/// `internalQueryMaxDocValidationErrorConsideredValues`); past it the list is cut and
/// `consideredValuesTruncated: true` follows.
const MAX_CONSIDERED: usize = 10;

/// `errInfo.details` for `doc` failing the validator `tree`; `None` when it does not fail.
pub fn query_details(
    tree: &Value,
    doc: &Document,
    matches: &dyn Fn(&Value) -> bool,
) -> Option<Document> {
    Explainer { doc, matches }.explain(tree, false)
}

struct Explainer<'a> {
    doc: &'a Document,
    matches: &'a dyn Fn(&Value) -> bool,
}

fn op(node: &Value) -> &str {
    node.get("op").and_then(Value::as_str).unwrap_or_default()
}

fn clauses(node: &Value) -> &[Value] {
    node.get("clauses").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default()
}

fn bson_of(v: Option<&Value>) -> Bson {
    v.map_or(Bson::Null, ejson::value_from_json)
}

impl Explainer<'_> {
    /// Whether `node` holds for the document.
    fn holds(&self, node: &Value) -> bool {
        match op(node) {
            "$and" => clauses(node).iter().all(|c| self.holds(c)),
            "$or" => clauses(node).iter().any(|c| self.holds(c)),
            "$nor" => !clauses(node).iter().any(|c| self.holds(c)),
            "$not" => !node.get("clause").is_some_and(|c| self.holds(c)),
            "$jsonSchema" => match bson_of(node.get("schema")) {
                Bson::Document(schema) => super::matches(&schema, self.doc),
                _ => true,
            },
            _ => node.get("selector").is_none_or(|s| (self.matches)(s)),
        }
    }

    /// Why `node` fails (or, `inverted`, why it holds); `None` when it does not.
    fn explain(&self, node: &Value, inverted: bool) -> Option<Document> {
        if self.holds(node) != inverted {
            return None;
        }
        let name = op(node);
        Some(match name {
            "$and" | "$or" | "$nor" => {
                // A `$nor` fails through the clauses that hold.
                let flip = name == "$nor";
                let key = if inverted != flip { "clausesSatisfied" } else { "clausesNotSatisfied" };
                let items: Vec<Bson> = clauses(node)
                    .iter()
                    .enumerate()
                    .filter_map(|(i, c)| {
                        let details = self.explain(c, inverted != flip)?;
                        Some(Bson::Document(doc! {"index": i as i32, "details": details}))
                    })
                    .collect();
                doc! {"operatorName": name, key: items}
            }
            "$not" => {
                let inner = node.get("clause").and_then(|c| self.explain(c, !inverted));
                doc! {"operatorName": "$not", "details": inner.unwrap_or_default()}
            }
            "$jsonSchema" => match (bson_of(node.get("schema")), inverted) {
                (Bson::Document(schema), false) => super::details(&schema, self.doc),
                (schema, _) => doc! {"operatorName": "$jsonSchema",
                "specifiedAs": {"$jsonSchema": schema}, "reason": "schema matched"},
            },
            _ => self.leaf(node, name, inverted),
        })
    }

    /// A failing (or, `inverted`, holding) leaf.
    fn leaf(&self, node: &Value, name: &str, inverted: bool) -> Document {
        let mut out = doc! {"operatorName": name, "specifiedAs": bson_of(node.get("specifiedAs"))};
        let path: Vec<&str> =
            node.get("path").and_then(Value::as_str).unwrap_or_default().split('.').collect();
        let root = Bson::Document(self.doc.clone());
        let values = match name {
            "$exists" => None,
            "$size" | "$all" | "$elemMatch" => Some(reached(&root, &path, false)),
            _ => Some(reached(&root, &path, true)),
        };
        // MongoDB reports at most `internalQueryMaxDocValidationErrorConsideredValues` (10).
        let mut truncated = false;
        let values = values.map(|found| {
            found.map(|mut found| {
                truncated = found.len() > MAX_CONSIDERED;
                found.truncate(MAX_CONSIDERED);
                found
            })
        });
        match &values {
            Some(None) => {
                out.insert("reason", "field was missing");
            }
            Some(Some(found)) if !type_expected(name, found, &mut out) => {}
            _ => {
                if let Some(reason) = reason(name, node, inverted) {
                    out.insert("reason", reason);
                }
            }
        }
        let Some(Some(values)) = values else { return out };
        match values.as_slice() {
            [one] => out.insert("consideredValue", one.clone()),
            many => out.insert("consideredValues", many.to_vec()),
        };
        if truncated {
            out.insert("consideredValuesTruncated", true);
        }
        if name == "$type" {
            considered_types(&values, &mut out);
        }
        out
    }
}

/// `consideredType` (or `consideredTypes`, sorted) of `values`.
fn considered_types(values: &[Bson], out: &mut Document) {
    let mut types: Vec<&str> = values.iter().map(type_name).collect();
    types.sort_unstable();
    types.dedup();
    match types.as_slice() {
        [] => {}
        [one] => {
            out.insert("consideredType", *one);
        }
        many => {
            out.insert("consideredTypes", many.to_vec());
        }
    }
}

/// Whether some value of `values` has a type operator `name` accepts; if none has, adds
/// MongoDB's type mismatch (`reason`, `consideredType(s)`, `expectedType(s)`) to `out`.
fn type_expected(name: &str, values: &[Bson], out: &mut Document) -> bool {
    let expected: &[&str] = match name {
        "$elemMatch" => &["array"],
        "$bitsAllSet" | "$bitsAllClear" | "$bitsAnySet" | "$bitsAnyClear" => {
            &["binData", "decimal", "double", "int", "long"]
        }
        _ => return true,
    };
    if values.iter().any(|v| expected.contains(&type_name(v))) {
        return true;
    }
    out.insert("reason", "type did not match");
    considered_types(values, out);
    match expected {
        [one] => out.insert("expectedType", *one),
        many => out.insert("expectedTypes", many.to_vec()),
    };
    false
}

/// The reason a leaf gives, as MongoDB words it (normal, or `inverted`).
fn reason(name: &str, node: &Value, inverted: bool) -> Option<&'static str> {
    let (normal, opposite) = match name {
        "$eq" | "$gt" | "$gte" | "$lt" | "$lte" => ("comparison failed", "comparison succeeded"),
        "$ne" => ("comparison succeeded", "comparison failed"),
        "$in" => ("no matching value found in array", "matching value found in array"),
        "$nin" => ("matching value found in array", "no matching value found in array"),
        "$type" => ("type did not match", "type did match"),
        "$regex" => ("regular expression did not match", "regular expression did match"),
        "$size" => {
            ("array length was not equal to given size", "array length was equal to given size")
        }
        "$mod" => (
            "$mod did not evaluate to expected remainder",
            "$mod did evaluate to expected remainder",
        ),
        "$all" => {
            ("array did not contain all specified values", "array did contain all specified values")
        }
        "$elemMatch" => {
            ("array did not satisfy the child predicate", "array did satisfy the child predicate")
        }
        "$bitsAllSet" | "$bitsAllClear" | "$bitsAnySet" | "$bitsAnyClear" => {
            ("bitwise operator failed to match", "bitwise operator matched successfully")
        }
        "$exists" => {
            let wanted = node.get("specifiedAs").and_then(|s| s.as_object()).and_then(|s| {
                s.values().next().and_then(|c| c.get("$exists")).map(|v| {
                    !matches!(v, Value::Bool(false) | Value::Null)
                        && v.as_f64().is_none_or(|n| n != 0.0)
                })
            });
            match wanted.unwrap_or(true) {
                true => ("path does not exist", "path does exist"),
                false => ("path does exist", "path does not exist"),
            }
        }
        _ => return None,
    };
    Some(if inverted { opposite } else { normal })
}

/// The values `path` reaches in `v`, through arrays as MongoDB matches (`None`: missing).
/// With `expand`, an array at the end of the path stands for its elements.
fn reached(v: &Bson, path: &[&str], expand: bool) -> Option<Vec<Bson>> {
    let mut out = Vec::new();
    let found = walk(v, path, expand, &mut out);
    found.then_some(out)
}

fn walk(v: &Bson, path: &[&str], expand: bool, out: &mut Vec<Bson>) -> bool {
    let Some((first, rest)) = path.split_first() else {
        match v {
            Bson::Array(items) if expand => out.extend(items.iter().cloned()),
            other => out.push(other.clone()),
        }
        return true;
    };
    match v {
        Bson::Document(d) => d.get(*first).is_some_and(|child| walk(child, rest, expand, out)),
        Bson::Array(items) => {
            if let Some(item) = first.parse::<usize>().ok().and_then(|i| items.get(i)) {
                return walk(item, rest, expand, out);
            }
            let mut any = false;
            for item in items.iter().filter(|i| matches!(i, Bson::Document(_))) {
                any |= walk(item, path, expand, out);
            }
            any
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use bson::bson;
    use serde_json::json;

    use super::*;

    #[test]
    fn considered_values_stop_at_ten_as_mongodbs() {
        let leaf = |path: &str| json!({"op": "$gt", "path": path, "specifiedAs": {path: {"$gt": 100}}, "selector": {}});
        let doc = doc! {"a": (0..12).collect::<Vec<i32>>(), "b": [1, 2]};
        let fails = |_: &Value| false;
        let long = query_details(&leaf("a"), &doc, &fails).unwrap_or_default();
        let ten: Vec<Bson> = (0..10).map(Bson::Int32).collect();
        assert_eq!(long.get("consideredValues"), Some(&Bson::Array(ten)));
        assert_eq!(long.get("consideredValuesTruncated"), Some(&Bson::Boolean(true)));
        let short = query_details(&leaf("b"), &doc, &fails).unwrap_or_default();
        assert_eq!(short.get("consideredValues"), Some(&bson!([1, 2])));
        assert_eq!(short.get("consideredValuesTruncated"), None);
    }
}
