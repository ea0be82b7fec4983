//! Rule 4, missing indexes: query shapes from the query log ([`super::observe`]) that
//! examined many documents per run and far more than they returned (CouchDB's own ratio
//! for its "examined is high" warning: more than ten per result), with the index that
//! would serve them: equality fields first (through `$elemMatch`, the element's fields, as
//! `links.target`), then `$in` fields, one range field, then the sort. The planner is asked
//! whether it would choose that index for the logged query.

use std::sync::Arc;

use bunko_query::plan::{self, IndexInfo};
use bunko_query::{Cond, FieldPath, Node};
use serde_json::json;

use super::observe::{Observed, QueryShape};
use super::{Finding, Severity, Thresholds, guides};
use crate::index::Index;

pub const RULE: &str = "missing-index";
pub const JOINS: &str = "follow-up-lookups";

/// More documents examined per result than this (CouchDB's `index_scan_warning` ratio).
const RATIO: u64 = 10;

pub fn check(indexes: &[Arc<Index>], observed: &Observed, t: &Thresholds) -> Vec<Finding> {
    observed
        .shapes()
        .iter()
        .filter(|s| {
            s.docs_examined >= t.examined_per_query.saturating_mul(s.runs)
                && s.docs_examined > RATIO.saturating_mul(s.results.max(1))
        })
        .map(|s| finding(indexes, s))
        .collect()
}

fn finding(indexes: &[Arc<Index>], s: &QueryShape) -> Finding {
    let fields = suggested_fields(s);
    let chosen = !fields.is_empty() && planner_would_choose(indexes, s, &fields);
    let names: Vec<String> = fields.iter().map(ToString::to_string).collect();
    let used = s.index.as_ref().map(|(d, n)| format!("{d}/{n}"));
    let partitioned = if s.partition { ", \"partitioned\": true" } else { "" };
    let suggestion = match (names.is_empty(), chosen) {
        (true, _) => "No JSON index can narrow this selector: add an equality or range \
                      condition on an indexed field (for instance a `type` field)."
            .to_string(),
        (false, true) => format!(
            "Create the index the planner would choose for it: POST /{{db}}/_index \
             {{\"index\": {{\"fields\": {}}}{partitioned}}}.",
            json!(names)
        ),
        (false, false) => format!(
            "Index the fields it selects on, {}; check with _explain that the query uses it.",
            json!(names)
        ),
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

/// Rule 8, too many joins per request: requests fetching documents by id
/// (`_all_docs?keys&include_docs`) at least half as often as `_find` queries run, so that
/// reading one thing takes a query plus lookups.
pub fn joins(observed: &Observed, t: &Thresholds) -> Option<Finding> {
    let s = observed.summary();
    let fires = s.queries > 0 && s.lookups >= t.lookups && s.lookups * 2 >= s.queries;
    fires.then(|| Finding {
        rule: JOINS,
        severity: Severity::Info,
        summary: format!(
            "{} requests fetched {} documents by id beside {} queries",
            s.lookups, s.looked_up, s.queries
        ),
        guide: guides::READ_TOGETHER,
        evidence: json!({"queries": s.queries, "lookup_requests": s.lookups,
            "documents_looked_up": s.looked_up,
            "lookups_per_query": (s.lookups as f64 / s.queries as f64 * 100.0).round() / 100.0,
            "ids_per_lookup": (s.looked_up as f64 / s.lookups as f64 * 10.0).round() / 10.0,
            "observed_since": s.since}),
        suggestion: "If these lookups follow references found by the queries, embed (or copy) \
                     the fields read together with the referring document, or read the linked \
                     documents in the same request with a view that emits {\"_id\": reference} \
                     and include_docs=true."
            .to_string(),
    })
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
}
