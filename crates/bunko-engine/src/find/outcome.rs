//! What a query's answer says besides its documents: whether an index covers it, the
//! documents a covering index rebuilds, CouchDB's warnings and planning errors.

use bunko_query::plan::{Choice, Plan};
use bunko_query::{Dialect, FieldPath, Selector};
use serde_json::Value;

use super::{ExecStats, FindQuery, NO_INDEX_WARNING, SCAN_WARNING};
use crate::Error;
use crate::index::Index;

/// Whether `index` holds every field the query reads: `fields` and the fields the selector
/// names, each `_id` or an indexed path (`mango_idx_view:covers`).
pub fn covers(index: &Index, query: &FindQuery) -> bool {
    let Some(fields) = &query.fields else { return false };
    if query.conflicts {
        return false;
    }
    let paths = index.compiled.paths();
    let held = |f: &FieldPath| f.is_id() || paths.contains(f);
    fields.iter().all(held) && query.selector.referenced_fields().iter().all(held)
}

/// The document a covering index knows: `_id` and the whole values at its paths, if it
/// matches.
pub(super) fn covered_doc(
    id: &str,
    paths: &[FieldPath],
    whole: Vec<Vec<Value>>,
    selector: &Selector,
) -> Option<Value> {
    let id_path = FieldPath::from_segments(["_id"]);
    let values = paths
        .iter()
        .zip(whole)
        .filter_map(|(p, mut w)| w.pop().map(|v| (p, v)))
        .chain(std::iter::once((&id_path, Value::String(id.to_string()))));
    let doc = bunko_query::fields::assemble(values);
    selector.matches(&doc, Dialect::Mango).then_some(doc)
}

/// CouchDB's warnings, one per line: `use_index` ignored, no index used, too many
/// documents read per result.
pub(super) fn warnings(query: &FindQuery, plan: &Plan, stats: &ExecStats) -> Option<String> {
    let mut out = Vec::new();
    if plan.use_index_ignored
        && let Some((ddoc, name)) = &query.use_index
    {
        let ddoc = ddoc.strip_prefix("_design/").unwrap_or(ddoc);
        out.push(match name {
            None => format!(
                "_design/{ddoc} was not used because it does not contain a valid index for this query."
            ),
            Some(name) => format!(
                "_design/{ddoc}, {name} was not used because it is not a valid index for this query."
            ),
        });
    }
    if plan.choice == Choice::AllDocs {
        out.push(NO_INDEX_WARNING.to_string());
    }
    let ratio = match stats.results_returned {
        0 => stats.docs_examined as f64,
        n => stats.docs_examined as f64 / n as f64,
    };
    if ratio > 10.0 {
        out.push(SCAN_WARNING.to_string());
    }
    (!out.is_empty()).then(|| out.join("\n"))
}

pub(super) fn invalid_index(parts: &[String]) -> Error {
    let reason = match parts {
        [] => "You must specify an index with the `use_index` parameter.".to_string(),
        [ddoc] => format!(
            "_design/{ddoc} specified by `use_index` could not be found or it is not suitable."
        ),
        [ddoc, name, ..] => format!(
            "_design/{ddoc}, {name} specified by `use_index` could not be found or it is not suitable."
        ),
    };
    Error::Invalid { error: "invalid_index", reason }
}

pub(super) fn no_usable_index(db_partitioned: bool, partition_query: bool) -> Error {
    let reason = match (db_partitioned, partition_query) {
        (false, _) => "No index exists for this sort, try indexing by the sort fields.",
        (true, true) => {
            "No partitioned index exists for this sort, try indexing by the sort fields."
        }
        (true, false) => "No global index exists for this sort, try indexing by the sort fields.",
    };
    Error::Invalid { error: "no_usable_index", reason: reason.to_string() }
}
