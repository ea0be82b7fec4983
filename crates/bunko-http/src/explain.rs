//! `_explain`: CouchDB's response (`mango_cursor:explain` with `mango_cursor_view:explain`)
//! plus Bunko's `scanned_ranges`, the storage ranges the query would read.
//!
//! - `index`: the chosen index (the special `_all_docs` one when no JSON index is used,
//!   `null` when nothing is usable); `opts`: the request's options with defaults.
//! - `index_candidates`: every other index with `usable`, its first reason, `ranking`
//!   and `covering` (`null` for `_all_docs`), in CouchDB's order.
//! - `selector_hints`: the selector's fields a JSON index could bound, and the others.
//! - `mrargs`: the view arguments CouchDB would use for the chosen index
//!   ([`bunko_query::plan::view_keys`]; `"<MAX>"` for the highest key), swapped for a
//!   descending sort. Bunko's own scan may be narrower (`$in` values, `$elemMatch` on a
//!   multikey index): `scanned_ranges` shows what is read.

use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::Response;
use bunko_engine::Database;
use bunko_engine::find::{FindQuery, PlannedIndex, covers};
use bunko_engine::index::Index;
use bunko_query::plan::{Choice, KeyRange, Plan, view_keys};
use bunko_query::text::Text;
use bunko_query::{FieldPath, Node, Selector};
use serde_json::{Value, json};

use crate::body::RawBody;
use crate::error::ApiResult;
use crate::find::{Request, parse};
use crate::{blocking, render};

/// `_explain`, for the database or one partition of it.
pub async fn explain(
    db: Arc<Database>,
    partition: Option<String>,
    body: RawBody,
) -> ApiResult<Response> {
    let req = parse(body.request_object()?, partition)?;
    let name = db.name();
    let partitioned = db.is_partitioned();
    let query = req.query.clone();
    let text_search = db.has_text_search();
    let planned = blocking(move || Ok(db.explain(&query)?)).await?;
    let (plan, scanned) = (&planned.plan, &planned.scanned);
    let q = &req.query;
    let index_at = |i: usize| planned.indexes.get(i);
    let candidates: Vec<Value> = plan
        .candidates
        .iter()
        .map(|c| {
            let (index, covering) = match c.index.and_then(|i| planned.get(i)) {
                Some(PlannedIndex::Json(ix)) => (ix.def.to_json(), json!(covers(ix, q))),
                Some(text @ PlannedIndex::Text(_)) => (text.to_json(), Value::Null),
                None => (all_docs_json(), Value::Null),
            };
            json!({"index": index, "analysis": {"usable": c.usable,
                "reasons": [{"name": c.reason}], "ranking": c.ranking, "covering": covering}})
        })
        .collect();
    let mut out = json!({
        "dbname": name,
        "index": match plan.choice {
            Choice::Index(i) => planned.get(i).map_or(Value::Null, |ix| ix.to_json()),
            Choice::AllDocs => all_docs_json(),
            Choice::Nothing => Value::Null,
        },
        "partitioned": partitioned,
        "selector": q.selector.to_json(),
        "opts": req.opts,
        "limit": q.limit,
        "skip": q.skip,
        "fields": req.opts.get("fields").cloned().unwrap_or_else(|| json!([])),
        "index_candidates": candidates,
        "selector_hints": selector_hints(&q.selector, text_search),
    });
    if planned.chosen_text().is_some() {
        text_explain(&mut out, q);
        return Ok(render::json(StatusCode::OK, out));
    }
    if plan.choice != Choice::Nothing {
        let chosen = plan.index().and_then(index_at);
        out["mrargs"] = mrargs(&req, plan, chosen);
        out["covering"] = json!(chosen.is_some_and(|ix| covers(ix, q)));
    }
    out["scanned_ranges"] = scanned.iter().map(range_json).collect();
    Ok(render::json(StatusCode::OK, out))
}

fn all_docs_json() -> Value {
    json!({"ddoc": null, "name": "_all_docs", "type": "special",
        "def": {"fields": [{"_id": "asc"}]}})
}

/// CouchDB's view arguments for the plan.
fn mrargs(req: &Request, plan: &Plan, chosen: Option<&Arc<Index>>) -> Value {
    let q = &req.query;
    let covering = chosen.is_some_and(|ix| covers(ix, q));
    let r = req.opts.get("r").and_then(Value::as_u64).unwrap_or(1);
    let stale = req.opts.get("stale").is_some_and(|s| s == "ok");
    let flag = |k: &str| req.opts.get(k).and_then(Value::as_bool).unwrap_or(false);
    let (start, end) = match chosen {
        Some(ix) => {
            let (start, end) = view_keys(ix.compiled.paths(), &q.selector);
            let end = end.into_iter().map(|v| v.unwrap_or_else(|| json!("<MAX>"))).collect();
            (Value::Array(start), Value::Array(end))
        }
        None => id_keys(&q.selector, plan.ranges.first()),
    };
    let (start, end) = if q.descending { (end, start) } else { (start, end) };
    json!({
        "include_docs": r == 1 && !covering,
        "view_type": "map",
        "reduce": false,
        "partition": q.partition,
        "start_key": start,
        "end_key": end,
        "direction": if q.descending { "rev" } else { "fwd" },
        "stable": stale || flag("stable"),
        "update": !stale && req.opts.get("update").and_then(Value::as_bool).unwrap_or(true),
        "conflicts": if flag("conflicts") { json!(true) } else { json!("undefined") },
    })
}

/// Start and end keys of an `_all_docs` scan: plain ids, `null`/`"<MAX>"` when the
/// selector does not name `_id`, `""`/`"<MAX>"` for a missing bound.
fn id_keys(selector: &Selector, range: Option<&KeyRange>) -> (Value, Value) {
    let id = FieldPath::from_segments(["_id"]);
    let names_id = selector.fields().contains(&id);
    match range {
        Some(r) if names_id => (
            r.lower.as_ref().map_or(json!(""), |b| b.value.clone()),
            r.upper.as_ref().map_or(json!("<MAX>"), |b| b.value.clone()),
        ),
        _ => (Value::Null, json!("<MAX>")),
    }
}

/// What `mango_cursor_text:explain` adds: the Lucene `query`, the `partition` and the
/// `sort` the search runs with (`"relevance"` without one).
fn text_explain(out: &mut Value, q: &FindQuery) {
    let text = Text::from_selector(&q.selector);
    out["query"] = json!(text.lucene());
    out["partition"] = q.partition.as_ref().map_or(Value::Null, |p| json!(p));
    let sort: Vec<Value> = q
        .sort
        .iter()
        .filter_map(|f| bunko_query::text::sort_field(&f.to_string(), &q.selector).ok())
        .map(|(name, kind)| {
            let dir = if q.descending { "-" } else { "" };
            json!(format!("{dir}{name}<{}>", kind.as_str()))
        })
        .collect();
    out["sort"] = if sort.is_empty() { json!("relevance") } else { Value::Array(sort) };
}

/// `selector_hints`: for JSON indexes, and for text indexes when the search service runs.
fn selector_hints(selector: &Selector, text_search: bool) -> Value {
    let mut hints = vec![json_hints(selector)];
    if text_search {
        let all: Vec<String> =
            selector.referenced_fields().iter().map(ToString::to_string).collect();
        let mut indexable: Vec<String> = Text::from_selector(selector)
            .indexable_fields()
            .into_iter()
            .map(|f| f.split(':').next().unwrap_or_default().to_string())
            .collect();
        indexable.sort();
        indexable.dedup();
        let mut other: Vec<String> = all.into_iter().filter(|f| !indexable.contains(f)).collect();
        other.sort();
        other.dedup();
        hints.push(json!({"type": "text", "indexable_fields": indexable,
            "unindexable_fields": other}));
    }
    Value::Array(hints)
}

/// `selector_hints` for JSON indexes: the top-level fields whose condition an index could
/// bound (`mango_idx_view:indexable_fields`), and the selector's other fields, each in
/// CouchDB's order.
fn json_hints(selector: &Selector) -> Value {
    let mut indexable: Vec<String> = Vec::new();
    let children: Vec<&Node> = match selector.root() {
        Node::And(children) => children.iter().collect(),
        other => vec![other],
    };
    for child in children {
        if let Node::Field(path, cond) = child
            && bunko_query::plan::indexable(cond)
        {
            indexable.push(path.to_string());
        }
    }
    indexable.sort();
    indexable.dedup();
    let other: Vec<String> = selector
        .referenced_fields()
        .iter()
        .map(ToString::to_string)
        .filter(|f| !indexable.contains(f))
        .collect();
    json!({"type": "json", "indexable_fields": erlang_set_order(indexable),
        "unindexable_fields": erlang_set_order(other)})
}

/// The order `sets:to_list` gives elements inserted in this order into an Erlang (v1)
/// set, as CouchDB lists `selector_hints`: by hash slot (`erlang:phash(Binary, 16)`; sets
/// of up to 80 elements have 16 slots), then by insertion.
fn erlang_set_order(mut items: Vec<String>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    items.retain(|i| seen.insert(i.clone()));
    items.sort_by_key(|i| phash(i.as_bytes()) % 16);
    items
}

/// `make_hash` of an Erlang binary (the legacy `erlang:phash/2` hash).
fn phash(bytes: &[u8]) -> u32 {
    const FUNNY_NUMBER1: u32 = 268_440_163;
    const FUNNY_NUMBER4: u32 = 268_436_141;
    let hash =
        bytes.iter().fold(0u32, |h, b| h.wrapping_mul(FUNNY_NUMBER1).wrapping_add(u32::from(*b)));
    hash.wrapping_mul(FUNNY_NUMBER4).wrapping_add(bytes.len() as u32)
}

fn range_json(range: &bunko_storage::Range) -> Value {
    use std::ops::Bound;
    let bound = |b: &Bound<Vec<u8>>| match b {
        Bound::Included(k) => json!({"included": hex::encode(k)}),
        Bound::Excluded(k) => json!({"excluded": hex::encode(k)}),
        Bound::Unbounded => Value::Null,
    };
    json!({"start": bound(&range.0), "end": bound(&range.1)})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selector_hint_fields_come_in_erlang_set_order() {
        // Orders CouchDB 3.4.3 listed for these fields.
        let fields = |v: &[&str]| v.iter().map(ToString::to_string).collect::<Vec<_>>();
        assert_eq!(erlang_set_order(fields(&["age", "name"])), ["name", "age"]);
        let order = erlang_set_order(fields(&["a", "b", "c", "d", "e", "f", "g"]));
        assert_eq!(order, ["e", "d", "c", "b", "g", "a", "f"]);
    }
}
