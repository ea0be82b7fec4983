//! Rule 4, missing indexes: query shapes from the query log ([`super::observe`]) that
//! examined many documents per run and far more than they returned (CouchDB's own ratio
//! for its "examined is high" warning: more than ten per result), with the index that
//! would serve them: equality fields first (through `$elemMatch`, the element's fields, as
//! `links.target`), then `$in` fields, one range field, then the sort. The planner is asked
//! whether it would choose that index for the logged query. A query that came over the
//! MongoDB protocol gets the MongoDB call, `db.<coll>.createIndex({field: 1, …})`, checked
//! against the MongoDB planner and the collection's MongoDB indexes.

use std::sync::Arc;

use bunko_query::plan::{self, IndexInfo};
use bunko_query::{Cond, Dialect, FieldPath, Node};
use serde_json::json;

use super::observe::QueryShape;
use super::{Finding, QueryLog, Severity, guides};
use crate::find::mongo_index;
use crate::index::Index;

pub const RULE: &str = "missing-index";

/// More documents examined per result than this (CouchDB's `index_scan_warning` ratio).
const RATIO: u64 = 10;

pub fn check(log: &QueryLog) -> Vec<Finding> {
    let QueryLog { indexes, observed, t, coll } = *log;
    observed
        .shapes()
        .iter()
        .filter(|s| {
            s.docs_examined >= t.examined_per_query.saturating_mul(s.runs)
                && s.docs_examined > RATIO.saturating_mul(s.results.max(1))
        })
        .map(|s| finding(indexes, s, coll))
        .collect()
}

fn finding(indexes: &[Arc<Index>], s: &QueryShape, coll: &str) -> Finding {
    let mongo = s.dialect == Dialect::Mongo;
    let fields = suggested_fields(s);
    let chosen = !fields.is_empty()
        && match mongo {
            true => mongo_index::would_choose(&s.selector, indexes, &fields),
            false => planner_would_choose(indexes, s, &fields),
        };
    let names: Vec<String> = fields.iter().map(ToString::to_string).collect();
    let used = s.index.as_ref().map(|(d, n)| format!("{d}/{n}"));
    let suggestion = match (names.is_empty(), mongo) {
        (true, _) => "No index can narrow this selector: add an equality or range condition \
                      on an indexed field (for instance a `type` field)."
            .to_string(),
        (false, true) => mongo_suggestion(&names, chosen, coll),
        (false, false) => mango_suggestion(&names, chosen, s.partition),
    };
    Finding {
        rule: RULE,
        severity: Severity::Warning,
        summary: format!(
            "a query shape ran {} times and examined {} documents to return {}",
            s.runs, s.docs_examined, s.results
        ),
        guide: guides::INDEX_FOLLOWED_FIELDS,
        evidence: json!({
            "selector": s.shape,
            "sort": s.sort.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "partition_query": s.partition,
            "api": if mongo { "mongodb" } else { "couchdb" },
            "runs": s.runs,
            "docs_examined": s.docs_examined,
            "keys_examined": s.keys_examined,
            "results_returned": s.results,
            "index_used": used,
            "suggested_index": names,
            "planner_would_choose_it": chosen,
        }),
        suggestion,
    }
}

/// A Mango index over `names` (`POST /{db}/_index`).
fn mango_suggestion(names: &[String], chosen: bool, partition: bool) -> String {
    let partitioned = if partition { ", \"partitioned\": true" } else { "" };
    match chosen {
        true => format!(
            "Create the index the planner would choose for it: POST /{{db}}/_index \
             {{\"index\": {{\"fields\": {}}}{partitioned}}}.",
            json!(names)
        ),
        false => format!(
            "Index the fields it selects on, {}; check with _explain that the query uses it.",
            json!(names)
        ),
    }
}

/// A MongoDB index over `names`, ascending (`db.<coll>.createIndex`).
fn mongo_suggestion(names: &[String], chosen: bool, coll: &str) -> String {
    let key = |n: &String| match n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        true => format!("{n}: 1"),
        false => format!("{}: 1", json!(n)),
    };
    let spec = names.iter().map(key).collect::<Vec<_>>().join(", ");
    let call = format!("db.{coll}.createIndex({{{spec}}})");
    match chosen {
        true => format!("Create the index the planner would choose for it: {call}."),
        false => format!(
            "Index the fields it selects on: {call}; check with explain() that the query \
             uses it."
        ),
    }
}

/// The fields of the index that would serve the query.
pub fn suggested_fields(s: &QueryShape) -> Vec<FieldPath> {
    let (mut eq, mut within, mut range) = (Vec::new(), Vec::new(), Vec::new());
    let top: Vec<&Node> = match s.selector.root() {
        Node::And(children) => children.iter().collect(),
        node => vec![node],
    };
    for node in top {
        let Node::Field(path, cond) = node else { continue };
        match cond {
            Cond::Eq(_) => eq.push(path.clone()),
            Cond::In(_) => within.push(path.clone()),
            Cond::Lt(_) | Cond::Lte(_) | Cond::Gt(_) | Cond::Gte(_) | Cond::BeginsWith(_) => {
                range.push(path.clone())
            }
            Cond::ElemMatch(inner) => eq.extend(element_fields(path, inner)),
            _ => {}
        }
    }
    let mut fields: Vec<FieldPath> = Vec::new();
    let push = |fields: &mut Vec<FieldPath>, f: FieldPath| {
        if !fields.contains(&f) && !f.is_id() {
            fields.push(f);
        }
    };
    for f in eq.into_iter().chain(within).chain(range.into_iter().take(1)) {
        push(&mut fields, f);
    }
    for f in &s.sort {
        push(&mut fields, f.clone());
    }
    fields
}

/// `links.target` for `{"links": {"$elemMatch": {"target": …}}}`.
fn element_fields(outer: &FieldPath, inner: &Node) -> Vec<FieldPath> {
    let children: Vec<&Node> = match inner {
        Node::And(children) => children.iter().collect(),
        node => vec![node],
    };
    children
        .into_iter()
        .filter_map(|n| match n {
            Node::Field(path, Cond::Eq(_)) if !path.is_root() => Some(FieldPath::from_segments(
                outer.segments().iter().chain(path.segments()).cloned(),
            )),
            _ => None,
        })
        .collect()
}

fn planner_would_choose(indexes: &[Arc<Index>], s: &QueryShape, fields: &[FieldPath]) -> bool {
    let mut infos: Vec<IndexInfo> = indexes
        .iter()
        .filter(|i| i.def.mongo.is_none())
        .map(|i| IndexInfo {
            ddoc: i.def.ddoc.clone(),
            name: i.def.name.clone(),
            kind: plan::Kind::Json,
            fields: i.compiled.paths().to_vec(),
            has_partial_filter: i.def.partial_filter.is_some(),
            in_scope: i.def.partitioned == s.partition,
        })
        .collect();
    infos.push(IndexInfo {
        ddoc: "_design/advisor-suggestion".to_string(),
        name: "suggestion".to_string(),
        kind: plan::Kind::Json,
        fields: fields.to_vec(),
        has_partial_filter: false,
        in_scope: true,
    });
    let req = plan::Request {
        selector: &s.selector,
        sort: &s.sort,
        use_index: None,
        allow_fallback: true,
    };
    plan::plan(&req, &infos).is_ok_and(|p| p.index() == Some(infos.len() - 1))
}

#[cfg(test)]
mod tests {
    use bunko_query::Selector;
    use serde_json::json;

    use super::*;

    fn shape(selector: serde_json::Value, sort: &[&str]) -> Result<QueryShape, bunko_query::Error> {
        Ok(QueryShape {
            shape: json!({}),
            selector: Selector::parse(&selector)?,
            sort: sort.iter().map(|s| FieldPath::from_segments([*s])).collect(),
            partition: false,
            runs: 1,
            docs_examined: 1000,
            keys_examined: 1000,
            results: 1,
            index: None,
            dialect: bunko_query::Dialect::Mango,
            follow: Default::default(),
        })
    }

    fn names(fields: Vec<FieldPath>) -> Vec<String> {
        fields.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn equality_then_range_then_sort() -> Result<(), bunko_query::Error> {
        let s = shape(json!({"date": {"$gt": "2024"}, "product_id": "p1"}), &["date"])?;
        assert_eq!(names(suggested_fields(&s)), ["product_id", "date"]);
        assert!(planner_would_choose(&[], &s, &suggested_fields(&s)));
        Ok(())
    }

    #[test]
    fn elem_match_fields_name_the_elements() -> Result<(), bunko_query::Error> {
        let s = shape(json!({"links": {"$elemMatch": {"target": "S12345"}}}), &[])?;
        assert_eq!(names(suggested_fields(&s)), ["links.target"]);
        Ok(())
    }

    #[test]
    fn mongo_suggestions_are_create_index_calls() {
        let names = ["customer".to_string(), "links.target".to_string()];
        let how = mongo_suggestion(&names, true, "orders");
        assert!(
            how.contains(r#"db.orders.createIndex({customer: 1, "links.target": 1})"#),
            "{how}"
        );
    }
}
