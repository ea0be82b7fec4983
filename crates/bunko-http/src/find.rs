//! `POST /{db}/_find` and `/{db}/_explain` (and their `/_partition/{p}/…` forms): the
//! request is validated as CouchDB's `mango_opts:validate_find` does (keeping the
//! normalized options `_explain` shows as `opts`), then run by
//! [`bunko_engine::Database::find`]; `_explain` is rendered by [`crate::explain`].

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Path, State as AxState};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::post;
use axum::{Extension, Router};
use bunko_engine::Database;
use bunko_engine::advisor::Client;
use bunko_engine::find::{FindQuery, FindResult};
use bunko_query::{Direction, Fields, Selector, Sort};
use serde_json::{Map, Value, json};

use crate::body::RawBody;
use crate::db::{Access, open};
use crate::error::{ApiError, ApiResult, query_error};
use crate::index::mango_error;
use crate::{State, UserCtx, blocking, render};

pub use crate::explain::explain;

pub fn routes() -> Router<State> {
    Router::new()
        .route("/{db}/_find", post(find_route))
        .route("/{db}/_explain", post(explain_route))
}

async fn find_route(
    st: AxState<State>,
    ctx: Extension<UserCtx>,
    client: Extension<Client>,
    Path(db): Path<String>,
    body: RawBody,
) -> ApiResult<Response> {
    let db = open(&st, &ctx, &db, Access::Member)?;
    find(ctx.0, db, None, body, client.0).await
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
    /// The options with CouchDB's defaults filled in, as `_explain` shows them.
    pub opts: Map<String, Value>,
}

/// `_find`, for the database or one partition of it, asked by `client`.
pub async fn find(
    reader: UserCtx,
    db: Arc<Database>,
    partition: Option<String>,
    body: RawBody,
    client: Client,
) -> ApiResult<Response> {
    let req = parse(body.request_object()?, partition)?;
    let started = Instant::now();
    let query = FindQuery { client: Some(client), ..req.query.clone() };
    let result = blocking(move || Ok(db.find(&reader, &query)?)).await?;
    Ok(render::json(StatusCode::OK, find_json(&req, result, started)))
}

fn find_json(req: &Request, result: FindResult, started: Instant) -> Value {
    let docs: Vec<Value> = result.docs.iter().map(|d| req.fields.project(d)).collect();
    let mut out = json!({"docs": docs, "bookmark": result.bookmark});
    if let Some(warning) = result.warning {
        out["warning"] = json!(warning);
    }
    if req.execution_stats {
        // With `r` > 1 CouchDB reads documents by quorum, not from the index scan.
        let quorum = req.opts.get("r").and_then(Value::as_u64).unwrap_or(1) > 1;
        let (docs, quorum_docs) = match quorum {
            true => (0, result.stats.docs_examined),
            false => (result.stats.docs_examined, 0),
        };
        out["execution_stats"] = json!({
            "total_keys_examined": result.stats.keys_examined,
            "total_docs_examined": docs,
            "total_quorum_docs_examined": quorum_docs,
            "results_returned": result.stats.results_returned,
            "execution_time_ms": started.elapsed().as_secs_f64() * 1000.0,
        });
    }
    out
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
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => {
            return Err(mango_error(
                "invalid_bookmark",
                format!("Invalid bookmark value: {other}"),
            ));
        }
    };
    let r = match body.get("r") {
        None => 1,
        Some(v) => match v.as_u64().filter(|n| *n > 0 && !v.is_f64()) {
            Some(n) => n,
            None => {
                return Err(mango_error(
                    "invalid_pos_integer",
                    format!("{} is not an integer greater than zero", erl_term(v)),
                ));
            }
        },
    };
    let stale = match body.get("stale") {
        None | Some(Value::Bool(false)) => false,
        Some(Value::String(s)) if s == "ok" => true,
        // CouchDB has no message for this one and answers with its catch-all.
        Some(other) => {
            return Err(ApiError::Other(
                StatusCode::INTERNAL_SERVER_ERROR,
                "unknown_error",
                format!(
                    "Unknown Error: mango_opts :: {{invalid_ok_or_false_value,{}}}",
                    erl_term(other)
                ),
            ));
        }
    };
    let partition_opt = match (partition, body.get("partition")) {
        (Some(route), _) => route,
        (None, None) => String::new(),
        (None, Some(Value::String(p))) => p.clone(),
        (None, Some(_)) => {
            return Err(mango_error("illegal_partition", "Partition must be a string"));
        }
    };
    let use_index = use_index(body.get("use_index"))?;
    let flag = |key: &str, default: bool| body.get(key).and_then(Value::as_bool).unwrap_or(default);
    let fields_json = match fields.paths() {
        Some(paths) => json!(paths.iter().map(ToString::to_string).collect::<Vec<_>>()),
        None => json!([]),
    };
    let sort_json: Map<String, Value> = match sort.to_json() {
        Value::Array(specs) => specs
            .into_iter()
            .filter_map(|s| match s {
                Value::Object(m) => Some(m),
                _ => None,
            })
            .flatten()
            .collect(),
        _ => Map::new(),
    };
    let limit = non_neg(&body, "limit", 25)?;
    let skip = non_neg(&body, "skip", 0)?;
    let opts = json!({
        "use_index": use_index.1,
        "bookmark": bookmark.clone().unwrap_or_else(|| "nil".to_string()),
        "limit": limit,
        "skip": skip,
        "sort": sort_json,
        "fields": fields_json,
        "partition": partition_opt,
        "r": r,
        "conflicts": flag("conflicts", false),
        "stale": if stale { json!("ok") } else { json!(false) },
        "update": flag("update", true),
        "stable": flag("stable", false),
        "execution_stats": flag("execution_stats", false),
        "allow_fallback": flag("allow_fallback", true),
    });
    let opts = match opts {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    let query = FindQuery {
        selector,
        sort: sort.fields().cloned().collect(),
        descending: sort.direction() == Some(Direction::Desc),
        limit,
        skip,
        use_index: use_index.0,
        partition: (!partition_opt.is_empty()).then(|| partition_opt.clone()),
        bookmark,
        allow_fallback: flag("allow_fallback", true),
        fields: fields.paths().map(<[_]>::to_vec),
        conflicts: flag("conflicts", false),
        update: flag("update", true) && !stale,
        dialect: bunko_query::Dialect::Mango,
        client: None,
    };
    let execution_stats = flag("execution_stats", false);
    Ok(Request { query, fields, execution_stats, opts })
}

/// A JSON value as Erlang's `~w` prints the term jiffy decodes it to (in error reasons).
fn erl_term(v: &Value) -> String {
    match v {
        Value::String(s) => {
            let bytes: Vec<String> = s.bytes().map(|b| b.to_string()).collect();
            format!("<<{}>>", bytes.join(","))
        }
        Value::Array(items) => {
            format!("[{}]", items.iter().map(erl_term).collect::<Vec<_>>().join(","))
        }
        Value::Object(map) => {
            let pairs: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{{{},{}}}", erl_term(&json!(k)), erl_term(v)))
                .collect();
            format!("{{[{}]}}", pairs.join(","))
        }
        other => other.to_string(),
    }
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

/// `use_index` as `mango_opts:validate_use_index` reads it: `"ddoc"`, `"_design/ddoc"`,
/// `"ddoc/name"`, `"_design/ddoc/name"`, `[]`, `["ddoc"]` or `["ddoc", "name"]`. Returns
/// the engine's form (design document id, optional name) and the parts `_explain` shows.
#[allow(clippy::type_complexity)]
fn use_index(value: Option<&Value>) -> ApiResult<(Option<(String, Option<String>)>, Vec<String>)> {
    let design =
        |d: &str| if d.starts_with("_design/") { d.to_string() } else { format!("_design/{d}") };
    let bad = |v: &Value| {
        mango_error("invalid_index_name", format!("Invalid index name: {}", erl_term(v)))
    };
    let parts: Vec<String> = match value {
        None | Some(Value::Null) => Vec::new(),
        Some(v @ Value::String(s)) => {
            let split: Vec<&str> = s.split('/').collect();
            match split.as_slice() {
                [d] | ["_design", d] => vec![d.to_string()],
                [d, n] | ["_design", d, n] => vec![d.to_string(), n.to_string()],
                _ => return Err(bad(v)),
            }
        }
        Some(v @ Value::Array(items)) => match items.as_slice() {
            [] => Vec::new(),
            [Value::String(d)] => vec![d.clone()],
            [Value::String(d), Value::String(n)] => vec![d.clone(), n.clone()],
            _ => return Err(bad(v)),
        },
        Some(other) => return Err(bad(other)),
    };
    let engine = match parts.as_slice() {
        [d] => Some((design(d), None)),
        [d, n] => Some((design(d), Some(n.clone()))),
        _ => None,
    };
    Ok((engine, parts))
}
