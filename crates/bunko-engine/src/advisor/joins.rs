//! Rule 8, too many joins per request: reading one thing takes a query plus lookups of
//! the documents it refers to, or an aggregation pipeline chaining `$lookup`s.
//!
//! - `follow-up-lookups`: a query shape whose runs were followed, from the same client
//!   within [`super::follow::WINDOW`], by at least [`Thresholds::follow_ups_per_query`]
//!   lookups by id per run on average (`_all_docs` with `keys`, `_bulk_get`), over at
//!   least [`Thresholds::join_runs`] runs.
//! - `lookup-chain`: a MongoDB aggregation pipeline with at least
//!   [`Thresholds::lookups_per_pipeline`] `$lookup`/`$graphLookup` stages (nested ones
//!   counted) that ran at least [`Thresholds::join_runs`] times.
//!
//! Both suggest embedding what is read together, or precomputing it.

use serde_json::json;

use super::observe::{Observed, PipelineShape, QueryShape};
use super::{Finding, Severity, Thresholds, follow, guides};

pub const FOLLOW_UPS: &str = "follow-up-lookups";
pub const CHAIN: &str = "lookup-chain";

/// Follow-ups per query from which the finding is a warning (an N+1 read).
const MANY_FOLLOW_UPS: f64 = 3.0;

pub fn check(observed: &Observed, t: &Thresholds) -> Vec<Finding> {
    let follow_ups = observed.shapes().into_iter().filter_map(|s| follow_ups(&s, t));
    let chains = observed.pipelines().into_iter().filter_map(|p| chain(&p, t));
    follow_ups.chain(chains).collect()
}

fn follow_ups(s: &QueryShape, t: &Thresholds) -> Option<Finding> {
    let f = &s.follow;
    let per_query = f.requests as f64 / s.runs.max(1) as f64;
    if s.runs < t.join_runs || f.requests == 0 || per_query < t.follow_ups_per_query {
        return None;
    }
    let round = |x: f64| (x * 100.0).round() / 100.0;
    let databases: Vec<&String> = f.databases.iter().collect();
    Some(Finding {
        rule: FOLLOW_UPS,
        severity: if per_query >= MANY_FOLLOW_UPS { Severity::Warning } else { Severity::Info },
        summary: format!(
            "a query shape ran {} times and was followed by {} lookups by id ({} per query)",
            s.runs,
            f.requests,
            round(per_query)
        ),
        guide: guides::READ_TOGETHER,
        evidence: json!({
            "selector": s.shape,
            "sort": s.sort.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "runs": s.runs,
            "runs_followed": f.runs_followed,
            "follow_up_requests": f.requests,
            "follow_ups_per_query": round(per_query),
            "ids_per_follow_up": round(f.ids as f64 / f.requests as f64),
            "by": f.by,
            "databases_looked_up": databases,
            "examples": f.examples,
            "window_ms": follow::WINDOW.as_millis() as u64,
        }),
        suggestion: format!(
            "Each run of this query is followed by about {} requests fetching the documents \
             it refers to (in {}): embed the fields read together in the documents the query \
             returns (copy what rarely changes, keep a bounded subset of what grows), or \
             precompute the combined result; where the references must stay, read the \
             linked documents in the same request with a view that emits \
             {{\"_id\": reference}} and include_docs=true.",
            per_query.round().max(1.0),
            databases.iter().map(|d| format!("`{d}`")).collect::<Vec<_>>().join(", ")
        ),
    })
}

fn chain(p: &PipelineShape, t: &Thresholds) -> Option<Finding> {
    if p.runs < t.join_runs || p.lookups < t.lookups_per_pipeline {
        return None;
    }
    let from: Vec<String> = p.from.iter().map(|c| format!("`{c}`")).collect();
    Some(Finding {
        rule: CHAIN,
        severity: Severity::Warning,
        summary: format!(
            "an aggregation pipeline with {} $lookup stages ({}) ran {} times",
            p.lookups,
            from.join(", "),
            p.runs
        ),
        guide: guides::READ_TOGETHER,
        evidence: json!({"pipeline": p.shape, "lookups_per_run": p.lookups,
                         "joined": p.from, "runs": p.runs}),
        suggestion: format!(
            "Every run joins {} for each document: embed the fields this read needs from {} \
             in the documents of this collection (copy what rarely changes, the extended \
             reference pattern), or precompute the joined result into a collection of its \
             own with $merge and read that in one request.",
            from.join(", "),
            from.join(", ")
        ),
    })
}
