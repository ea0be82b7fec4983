//! `POST /{db}/_find` and `/{db}/_explain` (and their `/_partition/{p}/…` forms): the
//! request is validated as CouchDB's `mango_opts:validate_find` does, then run by
//! [`bunko_engine::Database::find`].

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Path, State as AxState};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::post;
use axum::{Extension, Router};
use bunko_engine::Database;
use bunko_engine::find::{FindQuery, FindResult};
use bunko_query::{Direction, Fields, Selector, Sort};
use serde_json::{Map, Value, json};

use crate::body::RawBody;
use crate::db::{Access, open};
use crate::error::{ApiResult, query_error};
use crate::index::mango_error;
use crate::{State, UserCtx, blocking, render};

pub fn routes() -> Router<State> {
    Router::new()
        .route("/{db}/_find", post(find_route))
        .route("/{db}/_explain", post(explain_route))
}

async fn find_route(
    st: AxState<State>,
    ctx: Extension<UserCtx>,
    Path(db): Path<String>,
    body: RawBody,
) -> ApiResult<Response> {
    let db = open(&st, &ctx, &db, Access::Member)?;
    find(db, None, body).await
}

async fn explain_route(
    st: AxState<State>,
    ctx: Extension<UserCtx>,
    Path(db): Path<String>,
    body: RawBody,
) -> ApiResult<Response> {
    let db = open(&st, &ctx, &db, Access::Member)?;
    explain(db, None, body).await
}

/// A validated `_find` body: the engine's query plus what only the response needs.
pub struct Request {
    pub query: FindQuery,
    pub fields: Fields,
    pub execution_stats: bool,
    pub raw: Map<String, Value>,
}

/// `_find`, for the database or one partition of it.
pub async fn find(
    db: Arc<Database>,
    partition: Option<String>,
    body: RawBody,
) -> ApiResult<Response> {
    let req = parse(body.request_object()?, partition)?;
    let started = Instant::now();
    let query = req.query.clone();
    let result = blocking(move || Ok(db.find(&query)?)).await?;
    Ok(render::json(StatusCode::OK, find_json(&req, result, started)))
}

fn find_json(req: &Request, result: FindResult, started: Instant) -> Value {
    let docs: Vec<Value> = result.docs.iter().map(|d| req.fields.project(d)).collect();
    let mut out = json!({"docs": docs, "bookmark": result.bookmark});
    if let Some(warning) = result.warning {
        out["warning"] = json!(warning);
    }
    if req.execution_stats {
        out["execution_stats"] = json!({
            "total_keys_examined": result.stats.keys_examined,
            "total_docs_examined": result.stats.docs_examined,
            "total_quorum_docs_examined": 0,
            "results_returned": result.stats.results_returned,
            "execution_time_ms": started.elapsed().as_secs_f64() * 1000.0,
        });
    }
    out
}

/// `_explain`: the chosen index, every candidate with why it lost, and the key ranges.
pub async fn explain(
    db: Arc<Database>,
    partition: Option<String>,
    body: RawBody,
) -> ApiResult<Response> {
    let req = parse(body.request_object()?, partition)?;
    let name = db.name();
    let query = req.query.clone();
    let (candidates, plan, scanned) = blocking(move || Ok(db.explain(&query)?)).await?;
    let index_json = |i: Option<usize>| match i.and_then(|i| candidates.get(i)) {
        Some(index) => index.def.to_json(),
        None => json!({"ddoc": null, "name": "_all_docs", "type": "special",
            "def": {"fields": [{"_id": "asc"}]}}),
    };
    let rejected: Vec<Value> = plan
        .candidates
        .iter()
        .filter_map(|(i, why)| why.as_ref().map(|w| (i, w)))
        .map(|(i, why)| {
            json!({"index": index_json(Some(*i)), "analysis": {
            "usable": false, "reasons": [{"name": why.name()}], "ranking": 1, "covering": null}})
        })
        .collect();
    let ranges: Vec<Value> = plan.ranges.iter().map(|r| r.to_json()).collect();
    let storage: Vec<Value> = scanned.iter().map(range_json).collect();
    let q = &req.query;
    let fields = match req.fields.paths() {
        Some(paths) => json!(paths.iter().map(ToString::to_string).collect::<Vec<_>>()),
        None => json!("all_fields"),
    };
    let out = json!({
        "dbname": name,
        "index": index_json(plan.index),
        "partitioned": q.partition.is_some(),
        "selector": q.selector.to_json(),
        "opts": req.raw,
        "limit": q.limit,
        "skip": q.skip,
        "fields": fields,
        "mrargs": {"direction": if q.descending { "rev" } else { "fwd" }, "ranges": ranges},
        "covering": false,
        "index_candidates": rejected,
        "scanned_ranges": storage,
    });
    Ok(render::json(StatusCode::OK, out))
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

/// Validates a `_find` body with `mango_opts:validate_find`'s keys, defaults and errors.
pub fn parse(body: Map<String, Value>, partition: Option<String>) -> ApiResult<Request> {
    const KEYS: [&str; 15] = [
        "selector",
        "use_index",
        "bookmark",
        "limit",
        "skip",
        "sort",
        "fields",
        "partition",
        "r",
        "conflicts",
        "update",
        "stable",
        "stale",
        "execution_stats",
        "allow_fallback",
    ];
    if let Some(key) = body.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(mango_error("invalid_key", format!("Invalid key {key} for this request.")));
    }
    let selector = match body.get("selector") {
        Some(s @ Value::Object(_)) => Selector::parse(s).map_err(query_error)?,
        Some(other) => {
            return Err(mango_error(
                "invalid_selector_json",
                format!("Selector must be a JSON object, not: {other}"),
            ));
        }
        None => return Err(mango_error("missing_required_key", "Missing required key: selector")),
    };
    let sort = match body.get("sort") {
        Some(s) => Sort::parse(s).map_err(query_error)?,
        None => Sort::default(),
    };
    let fields = match body.get("fields") {
        Some(f) => Fields::parse(f).map_err(query_error)?,
        None => Fields::All,
    };
    for key in ["conflicts", "update", "stable", "execution_stats", "allow_fallback"] {
        if let Some(v) = body.get(key)
            && !v.is_boolean()
        {
            return Err(mango_error("invalid_boolean", format!("Invalid boolean value: {v}")));
        }
    }
    let bookmark = match body.get("bookmark") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => {
            return Err(mango_error(
                "invalid_bookmark",
                format!("Invalid bookmark value: {other}"),
            ));
        }
    };
    let query = FindQuery {
        selector,
        sort: sort.fields().cloned().collect(),
        descending: sort.direction() == Some(Direction::Desc),
        limit: non_neg(&body, "limit", 25)?,
        skip: non_neg(&body, "skip", 0)?,
        use_index: use_index(body.get("use_index"))?,
        partition: partition.or(body.get("partition").and_then(Value::as_str).map(String::from)),
        bookmark,
    };
    let execution_stats = body.get("execution_stats").and_then(Value::as_bool).unwrap_or(false);
    Ok(Request { query, fields, execution_stats, raw: body })
}

fn non_neg(body: &Map<String, Value>, key: &str, default: usize) -> ApiResult<usize> {
    match body.get(key) {
        None => Ok(default),
        Some(v) => v.as_u64().map(|n| n as usize).ok_or_else(|| {
            mango_error(
                "invalid_non_neg_integer",
                format!("{v} is not an integer greater than or equal to zero"),
            )
        }),
    }
}

/// `use_index`: `"ddoc"`, `"_design/ddoc"`, `["ddoc"]` or `["ddoc", "name"]`.
fn use_index(value: Option<&Value>) -> ApiResult<Option<(String, Option<String>)>> {
    let design =
        |d: &str| if d.starts_with("_design/") { d.to_string() } else { format!("_design/{d}") };
    let bad = |v: &Value| mango_error("invalid_index", format!("Invalid index name: {v}"));
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => match s.strip_prefix("_design/").unwrap_or(s).split_once('/') {
            Some((d, n)) => Ok(Some((design(d), Some(n.to_string())))),
            None => Ok(Some((design(s), None))),
        },
        Some(Value::Array(parts)) => match parts.as_slice() {
            [] => Ok(None),
            [Value::String(d)] => Ok(Some((design(d), None))),
            [Value::String(d), Value::String(n)] => Ok(Some((design(d), Some(n.clone())))),
            _ => Err(bad(value.unwrap_or(&Value::Null))),
        },
        Some(other) => Err(bad(other)),
    }
}
