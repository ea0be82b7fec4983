//! Mango index management: `GET/POST /{db}/_index`, `DELETE /{db}/_index/{ddoc}/json/{name}`
//! (and `…/text/{name}`) and `POST /{db}/_index/_bulk_delete`, with `mango_opts`'
//! validation and error names. The engine keeps each index in its design document
//! ([`bunko_engine::index::manage`], [`bunko_engine::index::text`]); `text` indexes need
//! the search service (`503` without it, as CouchDB without Clouseau).

use axum::extract::{Path, RawQuery, State as AxState};
use axum::http::Method;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{any, get};
use axum::{Extension, Router};
use bunko_engine::index::IndexField;
use bunko_engine::index::def::parse_fields;
use bunko_engine::index::manage::{Created, IndexRequest};
use bunko_engine::index::text::TextIndexRequest;
use serde_json::{Map, Value, json};

use crate::body::RawBody;
use crate::db::{Access, open};
use crate::error::{ApiError, ApiResult};
use crate::params::Params;
use crate::{State, UserCtx, blocking, render};

pub fn routes() -> Router<State> {
    Router::new()
        .route("/{db}/_index", get(list).post(create))
        .route("/{db}/_index/{*rest}", any(dispatch))
}

/// `_bulk_delete`, `{ddoc}/json/{name}` and `_design/{ddoc}/json/{name}`; anything else
/// under `_index/` is `404`.
async fn dispatch(
    st: AxState<State>,
    ctx: Extension<UserCtx>,
    method: Method,
    Path((db, rest)): Path<(String, String)>,
    body: RawBody,
) -> ApiResult<Response> {
    let parts: Vec<&str> = rest.split('/').collect();
    let target = match parts.as_slice() {
        ["_bulk_delete"] => {
            if method != Method::POST {
                return Err(method_not_allowed("POST"));
            }
            return bulk_delete(st, ctx, Path(db), body).await;
        }
        ["_design", ddoc, kind, name] | [ddoc, kind, name] if !ddoc.is_empty() => {
            (format!("_design/{ddoc}"), kind.to_string(), name.to_string())
        }
        _ => return Err(ApiError::not_found("missing")),
    };
    if method != Method::DELETE {
        return Err(method_not_allowed("DELETE"));
    }
    let (ddoc, kind, name) = target;
    let db = st.engine.db(&db)?;
    match kind.as_str() {
        "json" => blocking(move || Ok(db.delete_index(&ctx, &ddoc, &name)?)).await?,
        "text" => blocking(move || Ok(db.delete_text_index(&ctx, &ddoc, &name)?)).await?,
        _ => return Err(ApiError::not_found("missing")),
    }
    Ok(render::json(StatusCode::OK, json!({"ok": true})))
}

fn method_not_allowed(allowed: &str) -> ApiError {
    ApiError::Other(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!("Only {allowed} allowed"),
    )
}

/// A 400 with one of Mango's error names.
pub fn mango_error(error: &'static str, reason: impl Into<String>) -> ApiError {
    ApiError::Other(StatusCode::BAD_REQUEST, error, reason.into())
}

async fn list(
    st: AxState<State>,
    ctx: Extension<UserCtx>,
    Path(db): Path<String>,
    q: RawQuery,
) -> ApiResult<Response> {
    let db = open(&st, &ctx, &db, Access::Member)?;
    let p = Params::parse(q.0.as_deref());
    let special = json!({"ddoc": null, "name": "_all_docs", "type": "special",
        "def": {"fields": [{"_id": "asc"}]}});
    let mut defs: Vec<(String, String, Value)> =
        db.list_indexes().iter().map(|d| (d.ddoc.clone(), d.name.clone(), d.to_json())).collect();
    if st.engine.has_text_search() {
        let texts = blocking({
            let db = db.clone();
            move || Ok(db.text_indexes()?)
        })
        .await?;
        defs.extend(texts.iter().map(|d| (d.ddoc.clone(), d.name.clone(), d.to_json())));
        defs.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    }
    let mut all = vec![special];
    all.extend(defs.into_iter().map(|(_, _, json)| json));
    let total = all.len();
    let bad = || {
        ApiError::Other(
            StatusCode::INTERNAL_SERVER_ERROR,
            "invalid_list_index_params",
            "Index parameter ranges: limit > 1, skip > 0".into(),
        )
    };
    let limit = match p.str("limit") {
        Some(v) => v.parse::<i64>().ok().filter(|l| *l >= 1).ok_or_else(bad)? as usize,
        None => total,
    };
    let skip = match p.str("skip") {
        Some(v) => v.parse::<i64>().ok().filter(|s| *s >= 0).ok_or_else(bad)? as usize,
        None => 0,
    };
    let page: Vec<Value> = all.into_iter().skip(skip).take(limit).collect();
    Ok(render::json(StatusCode::OK, json!({"total_rows": total, "indexes": page})))
}

async fn create(
    st: AxState<State>,
    ctx: Extension<UserCtx>,
    Path(db): Path<String>,
    body: RawBody,
) -> ApiResult<Response> {
    let db = st.engine.db(&db)?;
    let text_search = st.engine.has_text_search();
    let (created, id, name) = match parse_create(body.request_object()?, text_search)? {
        Create::Json(req) => blocking(move || Ok(db.create_index(&ctx, req)?)).await?,
        Create::Text(req) => blocking(move || Ok(db.create_text_index(&ctx, req)?)).await?,
    };
    let result = if created == Created::Created { "created" } else { "exists" };
    Ok(render::json(StatusCode::OK, json!({"result": result, "id": id, "name": name})))
}

/// A validated `POST /{db}/_index`.
enum Create {
    Json(IndexRequest),
    Text(TextIndexRequest),
}

/// Validates a `POST /{db}/_index` body as `mango_opts:validate_idx_create` does;
/// `text_search`: text indexes can be served.
fn parse_create(mut body: Map<String, Value>, text_search: bool) -> ApiResult<Create> {
    const KEYS: [&str; 6] = ["index", "type", "name", "ddoc", "w", "partitioned"];
    if let Some(key) = body.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(mango_error("invalid_key", format!("Invalid key {key} for this request.")));
    }
    let Some(index) = body.remove("index") else {
        return Err(mango_error("missing_required_key", "Missing required key: index"));
    };
    let text = body.get("type").and_then(Value::as_str) == Some("text");
    match body.get("type") {
        None => {}
        Some(Value::String(t)) if t == "json" => {}
        Some(Value::String(t)) if t == "text" && text_search => {}
        // CouchDB without the search service in question (dreyfus/Clouseau, nouveau).
        Some(Value::String(t)) if t == "text" || t == "nouveau" => {
            return Err(ApiError::Other(
                StatusCode::SERVICE_UNAVAILABLE,
                "required index service unavailable",
                t.clone(),
            ));
        }
        Some(Value::String(t)) => {
            return Err(mango_error("invalid_index", format!("Invalid type for index: {t}")));
        }
        Some(other) => {
            return Err(mango_error("invalid_string", format!("Invalid string: {other}")));
        }
    }
    let name = optional_name(&body, "name")?;
    let ddoc = optional_name(&body, "ddoc")?;
    if let Some(d) = &ddoc
        && d.strip_prefix("_design/").is_some_and(str::is_empty)
    {
        return Err(ApiError::Other(
            StatusCode::BAD_REQUEST,
            "illegal_docid",
            "Document id must not be empty".into(),
        ));
    }
    if let Some(w) = body.get("w")
        && w.as_u64().is_none_or(|w| w == 0)
    {
        return Err(mango_error(
            "invalid_pos_integer",
            format!("{w} is not an integer greater than zero"),
        ));
    }
    let partitioned = match body.get("partitioned") {
        None => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(other) => {
            return Err(mango_error(
                "invalid_partitioned_value",
                format!("Invalid partitioned value: {other}"),
            ));
        }
    };
    if text {
        let w = body.get("w").and_then(Value::as_u64).unwrap_or(2);
        return Ok(Create::Text(TextIndexRequest { index, name, ddoc, partitioned, w }));
    }
    let (fields, partial_filter) = parse_index_def(index)?;
    Ok(Create::Json(IndexRequest { fields, name, ddoc, partial_filter, partitioned }))
}

fn optional_name(body: &Map<String, Value>, key: &str) -> ApiResult<Option<String>> {
    match body.get(key) {
        None => Ok(None),
        Some(Value::String(s)) if s.is_empty() => {
            Err(mango_error("invalid_empty_string", "Index name or ddoc cannot be empty string"))
        }
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(mango_error("invalid_string", format!("Invalid string: {other}"))),
    }
}

/// `index`: `{"fields": [...], "partial_filter_selector": {...}}`.
fn parse_index_def(index: Value) -> ApiResult<(Vec<IndexField>, Option<Value>)> {
    let Value::Object(mut index) = index else {
        return Err(mango_error(
            "invalid_index",
            format!("JSON indexes must be an object, not: {index}"),
        ));
    };
    let selector = index.remove("partial_filter_selector");
    if let Some(key) = index.keys().find(|k| k.as_str() != "fields") {
        return Err(mango_error("invalid_key", format!("Invalid key {key} for this request.")));
    }
    let Some(raw) = index.remove("fields") else {
        return Err(mango_error("missing_required_key", "Missing required key: fields"));
    };
    let fields = match (&raw, parse_fields(&raw)) {
        (Value::Array(_), Some(fields)) if valid_fields(&fields) => fields,
        _ => {
            return Err(mango_error(
                "invalid_sort_json",
                format!("Sort must be an array of sort specs, not: {raw}"),
            ));
        }
    };
    if fields.iter().any(|f| f.desc != fields[0].desc) {
        return Err(mango_error(
            "unsupported_mixed_sort",
            "Sorts currently only support a single direction for all fields.",
        ));
    }
    let partial = match selector {
        None => None,
        Some(Value::Object(s)) if s.is_empty() => None,
        Some(Value::Object(s)) => {
            let selector = Value::Object(s);
            bunko_query::Selector::parse(&selector).map_err(crate::error::query_error)?;
            Some(selector)
        }
        Some(other) => {
            return Err(mango_error(
                "invalid_selector_json",
                format!("Selector must be a JSON object, not: {other}"),
            ));
        }
    };
    Ok((fields, partial))
}

fn valid_fields(fields: &[IndexField]) -> bool {
    !fields.is_empty() && fields.iter().all(|f| !f.name.is_empty())
}

async fn bulk_delete(
    st: AxState<State>,
    ctx: Extension<UserCtx>,
    Path(db): Path<String>,
    body: RawBody,
) -> ApiResult<Response> {
    let db = st.engine.db(&db)?;
    let body = body.request_object()?;
    let ids = match body.get("docids") {
        Some(Value::Array(ids)) if ids.iter().all(Value::is_string) => ids.clone(),
        other => {
            let shown = other.cloned().unwrap_or(Value::Null);
            return Err(mango_error(
                "invalid_bulk_docs",
                format!("Bulk Delete requires an array of non-null docids. Docids: {shown}"),
            ));
        }
    };
    let out = blocking(move || {
        let (mut success, mut fail) = (Vec::new(), Vec::new());
        for id in ids.iter().filter_map(Value::as_str) {
            let ddoc =
                if id.starts_with("_design/") { id.to_string() } else { format!("_design/{id}") };
            // Every index of the design document, JSON and text (`mango_idx:delete`).
            let json: Vec<String> =
                db.list_indexes().into_iter().filter(|d| d.ddoc == ddoc).map(|d| d.name).collect();
            let text: Vec<String> = match db.text_indexes() {
                Ok(defs) => defs.into_iter().filter(|d| d.ddoc == ddoc).map(|d| d.name).collect(),
                Err(_) => Vec::new(),
            };
            let result = if json.is_empty() && text.is_empty() {
                Err("not_found".to_string())
            } else {
                json.iter()
                    .try_for_each(|n| db.delete_index(&ctx, &ddoc, n))
                    .and_then(|()| {
                        text.iter().try_for_each(|n| db.delete_text_index(&ctx, &ddoc, n))
                    })
                    .map_err(|e| e.to_string())
            };
            match result {
                Ok(()) => success.push(json!({"id": ddoc, "ok": true})),
                Err(error) => fail.push(json!({"id": ddoc, "error": error})),
            }
        }
        Ok(json!({"success": success, "fail": fail}))
    })
    .await?;
    Ok(render::json(StatusCode::OK, out))
}
