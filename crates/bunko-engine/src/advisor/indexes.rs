//! Rule 5, duplicate and unused indexes. Two indexes with the same fields, scope and
//! partial filter are duplicates: every write maintains both, queries need one. An index
//! that no query (`_find`, or a MongoDB query through its index) chose while the observation window saw enough queries is unused. (A
//! Mango index that is a prefix of another is not redundant by itself: an index holds only
//! documents having all its fields, so `[a, b]` cannot serve a query on `a` alone; such a
//! prefix is reported only when unused, and the finding names the longer index.)

use std::sync::Arc;

use serde_json::json;

use super::{Finding, QueryLog, Severity, guides};
use crate::index::{Index, IndexDef};

pub const DUPLICATE: &str = "duplicate-index";
pub const UNUSED: &str = "unused-index";

pub fn check(log: &QueryLog) -> Vec<Finding> {
    let QueryLog { indexes, observed, t, coll } = *log;
    let mut out = duplicates(indexes);
    let queries = observed.queries();
    if queries < t.queries_for_unused {
        return out;
    }
    for ix in indexes {
        let def = &ix.def;
        if observed.uses(&def.ddoc, &def.name) > 0 || out.iter().any(|f| names(f, def)) {
            continue;
        }
        let longer = indexes.iter().find(|o| is_prefix(def, &o.def)).map(|o| label(&o.def));
        let prefix = longer.as_ref().map_or(String::new(), |l| format!(" (a prefix of {l})"));
        out.push(Finding {
            rule: UNUSED,
            severity: Severity::Info,
            summary: format!(
                "{} was used by none of the last {queries} queries{prefix}",
                label(def)
            ),
            guide: guides::LEAN_INDEXES,
            evidence: json!({"index": def.to_json(), "queries_observed": queries,
                "observed_since": observed.summary().since, "prefix_of": longer}),
            suggestion: unused_suggestion(def, coll),
        });
    }
    out
}

/// How to delete an unused index, in the API that created it.
fn unused_suggestion(def: &IndexDef, coll: &str) -> String {
    let how = if def.mongo.is_some() {
        format!("db.{coll}.dropIndex(\"{}\")", def.name)
    } else {
        format!(
            "DELETE /{{db}}/_index/{}/json/{}",
            def.ddoc.trim_start_matches("_design/"),
            def.name
        )
    };
    format!(
        "If no query of your application needs it (the window restarts with the server), \
         delete it: {how}."
    )
}

fn duplicates(indexes: &[Arc<Index>]) -> Vec<Finding> {
    let mut out = Vec::new();
    for (i, a) in indexes.iter().enumerate() {
        for b in indexes.iter().skip(i + 1) {
            if !same(&a.def, &b.def) {
                continue;
            }
            out.push(Finding {
                rule: DUPLICATE,
                severity: Severity::Warning,
                summary: format!("{} and {} index the same fields", label(&a.def), label(&b.def)),
                guide: guides::LEAN_INDEXES,
                evidence: json!({"indexes": [a.def.to_json(), b.def.to_json()]}),
                suggestion: format!(
                    "Delete one of them (for instance DELETE /{{db}}/_index/{}/json/{}): \
                     every write maintains both.",
                    b.def.ddoc.trim_start_matches("_design/"),
                    b.def.name
                ),
            });
        }
    }
    out
}

fn names(finding: &Finding, def: &IndexDef) -> bool {
    finding.evidence["indexes"][1]["name"] == def.name.as_str()
        && finding.evidence["indexes"][1]["ddoc"] == def.ddoc.as_str()
}

fn same(a: &IndexDef, b: &IndexDef) -> bool {
    a.fields == b.fields && a.partitioned == b.partitioned && a.partial_filter == b.partial_filter
}

fn is_prefix(a: &IndexDef, b: &IndexDef) -> bool {
    a.fields.len() < b.fields.len()
        && b.fields.starts_with(&a.fields)
        && a.partitioned == b.partitioned
        && a.partial_filter == b.partial_filter
}

pub fn label(def: &IndexDef) -> String {
    let fields: Vec<&str> = def.fields.iter().map(|f| f.name.as_str()).collect();
    format!("index {}/{} [{}]", def.ddoc, def.name, fields.join(", "))
}
