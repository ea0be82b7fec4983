//! Queries over a time-series collection moved onto its stored form, so that an index on
//! `m.<field>` (the default `{meta: 1, time: 1}` index, or one `createIndexes` made,
//! [`super::timeseries_index`]) can serve them.
//!
//! A measurement is stored as `{_id: <key>, m: <measurement>}` ([`super::timeseries`]) and
//! read through `[{$replaceRoot: {newRoot: "$m"}}]`. A filter on a field path `p` of the
//! measurement is the same filter on `m.p` of the stored document (`m` is always a
//! document, so paths, arrays and missing fields resolve the same way): [`exact`] rewrites
//! a filter whose every part is on field paths (through `$and`, `$or`, `$nor`). What
//! cannot be rewritten so (`$expr`, `$jsonSchema`, `$text`, `$where`, …) is left where it
//! was: [`implied`] keeps the parts that can be rewritten, a filter every matching
//! measurement passes, and the original `$match` stays after the `$replaceRoot`, so the
//! answer is the same with or without the rewrite. [`pipeline`] does this to the stages a
//! read runs after the `$replaceRoot`: their leading `$match` becomes a stored-form
//! `$match` in front (the planner's pushed-down filter), and when it is exact, the
//! `$sort`/`$skip`/`$limit` after it move in front too (a sort on field paths only).
//! [`measurement_plan`] (and for an aggregation [`measurement_stages`]) names the fields of
//! an `explain` of such a query as the measurements' again. A leading `$indexStats` or `$collStats` runs as on any collection.

use bson::{Bson, Document, doc};

/// The stored document's field holding the measurement.
const FIELD: &str = "m";

/// `path` of a measurement as a path of its stored document.
pub(super) fn stored_path(path: &str) -> String {
    format!("{FIELD}.{path}")
}

/// A path of the stored document as the measurement's path (`None` outside `m`).
pub(super) fn measurement_path(path: &str) -> Option<&str> {
    path.strip_prefix(FIELD)?.strip_prefix('.')
}

/// Leading stages about the collection, not its documents: run without the `$replaceRoot`.
const STATISTICS: &[&str] = &["$indexStats", "$collStats"];

/// Top-level operators that hold filters (rewritten inside).
const LOGICAL: &[&str] = &["$and", "$or", "$nor"];

/// Top-level operators that read no field and stay as they are.
const KEPT: &[&str] = &["$alwaysTrue", "$alwaysFalse", "$comment"];

/// `filter` over the stored documents, when every part of it can be moved there exactly.
pub(super) fn exact(filter: &Document) -> Option<Document> {
    let mut out = Document::new();
    for (key, value) in filter {
        if LOGICAL.contains(&key.as_str()) {
            out.insert(key, Bson::Array(exact_list(value)?));
        } else if KEPT.contains(&key.as_str()) {
            out.insert(key, value.clone());
        } else if key.is_empty() || key.starts_with('$') {
            return None;
        } else {
            out.insert(stored_path(key), value.clone());
        }
    }
    Some(out)
}

/// The filters of `$and`/`$or`/`$nor`, each moved exactly.
fn exact_list(value: &Bson) -> Option<Vec<Bson>> {
    let Bson::Array(items) = value else { return None };
    let each = |item: &Bson| match item {
        Bson::Document(d) => exact(d).map(Bson::Document),
        _ => None,
    };
    items.iter().map(each).collect()
}

/// A filter over the stored documents that every stored document whose measurement matches
/// `filter` matches: the parts of `filter` that can be moved exactly (its conjuncts,
/// through `$and`), the rest left out.
pub(super) fn implied(filter: &Document) -> Document {
    if let Some(all) = exact(filter) {
        return all;
    }
    let mut conjuncts = Vec::new();
    for (key, value) in filter {
        let part = doc! {key: value.clone()};
        match (key.as_str(), value) {
            ("$and", Bson::Array(items)) => {
                let each = items.iter().filter_map(Bson::as_document).map(implied);
                conjuncts.extend(each.filter(|d| !d.is_empty()).map(Bson::Document));
            }
            _ => {
                if let Some(moved) = exact(&part).filter(|d| !d.is_empty()) {
                    conjuncts.push(Bson::Document(moved));
                }
            }
        }
    }
    match conjuncts.len() {
        0 => Document::new(),
        1 => match conjuncts.pop() {
            Some(Bson::Document(only)) => only,
            _ => Document::new(),
        },
        _ => doc! {"$and": conjuncts},
    }
}

/// A `$sort` over the stored documents, when it sorts by field paths only (not `$meta`).
pub(super) fn sort(spec: &Document) -> Option<Document> {
    let mut out = Document::new();
    for (key, dir) in spec {
        let number = matches!(dir, Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_));
        if !number || key.is_empty() || key.starts_with('$') {
            return None;
        }
        out.insert(stored_path(key), dir.clone());
    }
    Some(out)
}

/// A key pattern of measurement fields as the stored documents' (`ts` → `m.ts`).
pub(super) fn stored_key(key: &Document) -> Document {
    key.iter().map(|(f, d)| (stored_path(f), d.clone())).collect()
}

/// A stored key pattern (or a filter [`exact`] made) as the measurements' (`m.ts` → `ts`).
pub(super) fn measurement_filter(filter: &Document) -> Document {
    let mut out = Document::new();
    for (key, value) in filter {
        let value = match value {
            Bson::Array(items) if LOGICAL.contains(&key.as_str()) => {
                let each = |item: &Bson| match item {
                    Bson::Document(d) => Bson::Document(measurement_filter(d)),
                    other => other.clone(),
                };
                Bson::Array(items.iter().map(each).collect())
            }
            other => other.clone(),
        };
        out.insert(measurement_path(key).unwrap_or(key), value);
    }
    out
}

/// The fields of an `explain` answer that name stored fields (keys, bounds, sorts, filters).
const PLAN_FIELDS: &[&str] = &[
    "keyPattern",
    "indexBounds",
    "startKey",
    "endKey",
    "multiKeyPaths",
    "sortPattern",
    "parsedQuery",
    "filter",
];

/// An `explain` answer of a query run over the stored documents ([`exact`]) with the
/// measurements' field names (`m.ts` → `ts`), its `command` (the user's) left as it is.
pub(super) fn measurement_plan(plan: &mut Document) {
    for (key, value) in plan.iter_mut() {
        match value {
            Bson::Document(d) if PLAN_FIELDS.contains(&key.as_str()) => {
                *d = measurement_filter(d);
                measurement_plan(d);
                if key == "multiKeyPaths" {
                    for paths in d.iter_mut().filter_map(|(_, v)| v.as_array_mut()) {
                        for path in paths.iter_mut() {
                            if let Some(p) = path.as_str().and_then(measurement_path) {
                                *path = Bson::String(p.to_string());
                            }
                        }
                    }
                }
            }
            Bson::Document(d) if key != "command" => measurement_plan(d),
            Bson::Array(items) => {
                items.iter_mut().filter_map(Bson::as_document_mut).for_each(measurement_plan);
            }
            _ => {}
        }
    }
}

/// An aggregation's `explain` over the stored documents as over the measurements: the
/// pushed-down query (`$cursor`) with the measurements' field names ([`measurement_plan`]),
/// and without the `$replaceRoot` that reads the measurements (as `find`'s explain shows
/// none); the stages after it are the user's, as given.
pub(super) fn measurement_stages(reply: &mut Document) {
    let Ok(stages) = reply.get_array_mut("stages") else { return };
    let unwraps = |stage: &Bson| {
        let root = stage.as_document().and_then(|d| d.get_document("$replaceRoot").ok());
        root.is_some_and(|r| r.get_str("newRoot").ok() == Some(&format!("${FIELD}")))
    };
    if let Some(at) = stages.iter().position(unwraps) {
        stages.remove(at);
    }
    for stage in stages.iter_mut().filter_map(Bson::as_document_mut) {
        if let Ok(cursor) = stage.get_document_mut("$cursor") {
            measurement_plan(cursor);
        }
    }
}

/// A `hint` as the stored documents' index: a key pattern moved, a name or `$natural` kept.
pub(super) fn hint(value: &Bson) -> Bson {
    match value {
        Bson::Document(key) if !key.contains_key("$natural") => Bson::Document(stored_key(key)),
        other => other.clone(),
    }
}

/// The stages of a time-series read: `stages` (what runs after the `$replaceRoot` that
/// reads the measurements) with the `$replaceRoot` inserted, and what can run over the
/// stored documents moved in front of it (see the module docs).
pub(super) fn pipeline(replace_root: Bson, stages: &[Bson]) -> Vec<Bson> {
    // Statistics of the collection itself read no measurement.
    let leading = stages.first().and_then(Bson::as_document).and_then(|d| d.keys().next());
    if leading.is_some_and(|name| STATISTICS.contains(&name.as_str())) {
        return stages.to_vec();
    }
    let mut front = Vec::new();
    let mut moved = 0;
    for stage in stages {
        let Some((name, Bson::Document(arg))) = stage.as_document().and_then(|d| d.iter().next())
        else {
            break;
        };
        match name.as_str() {
            "$match" => match exact(arg) {
                Some(filter) => front.push(Bson::Document(doc! {"$match": filter})),
                None => {
                    let filter = implied(arg);
                    if !filter.is_empty() {
                        front.push(Bson::Document(doc! {"$match": filter}));
                    }
                    break;
                }
            },
            "$sort" => match sort(arg) {
                Some(spec) => front.push(Bson::Document(doc! {"$sort": spec})),
                None => break,
            },
            _ => break,
        }
        moved += 1;
    }
    // `$skip`/`$limit` take a number, not a document: moved in a second pass.
    let mut rest = stages[moved..].iter().peekable();
    if moved == front.len() {
        while let Some(stage) = rest.peek() {
            let name = stage.as_document().and_then(|d| d.keys().next()).map(String::as_str);
            match name {
                Some("$skip" | "$limit") => front.push((*stage).clone()),
                Some("$sort" | "$match") => {
                    // A filter or sort after a skip or limit: kept after the `$replaceRoot`.
                    break;
                }
                _ => break,
            }
            rest.next();
        }
    }
    front.push(replace_root);
    front.extend(rest.cloned());
    front
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_paths_move_exactly_and_the_rest_stays() {
        let filter = doc! {"meta": "a", "$or": [{"ts": 1}, {"v.x": {"$gt": 2}}]};
        let moved = exact(&filter).unwrap();
        assert_eq!(moved, doc! {"m.meta": "a", "$or": [{"m.ts": 1}, {"m.v.x": {"$gt": 2}}]});
        assert_eq!(measurement_filter(&moved), filter);
        let with_expr = doc! {"meta": "a", "$expr": {"$gt": ["$v", 1]}};
        assert_eq!(exact(&with_expr), None);
        assert_eq!(implied(&with_expr), doc! {"m.meta": "a"});
        let nested = doc! {"$and": [{"ts": 1}, {"$expr": true}], "$nor": [{"$expr": 1}]};
        assert_eq!(implied(&nested), doc! {"m.ts": 1});
    }

    #[test]
    fn a_read_moves_its_leading_match_sort_skip_limit() {
        let root = Bson::Document(doc! {"$replaceRoot": {"newRoot": "$m"}});
        let stages = vec![
            Bson::Document(doc! {"$match": {"meta": "a"}}),
            Bson::Document(doc! {"$sort": {"ts": -1}}),
            Bson::Document(doc! {"$skip": 1}),
            Bson::Document(doc! {"$limit": 2}),
            Bson::Document(doc! {"$project": {"v": 1}}),
        ];
        let out = pipeline(root.clone(), &stages);
        assert_eq!(out.len(), 6);
        assert_eq!(out[0], Bson::Document(doc! {"$match": {"m.meta": "a"}}));
        assert_eq!(out[1], Bson::Document(doc! {"$sort": {"m.ts": -1}}));
        assert_eq!(out[4], root);
        let inexact = vec![
            Bson::Document(doc! {"$match": {"meta": "a", "$expr": true}}),
            Bson::Document(doc! {"$limit": 2}),
        ];
        let out = pipeline(root.clone(), &inexact);
        assert_eq!(out[0], Bson::Document(doc! {"$match": {"m.meta": "a"}}));
        assert_eq!(&out[1..], &[root, inexact[0].clone(), inexact[1].clone()]);
    }
}
