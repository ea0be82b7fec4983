//! `POST/PUT /{db}/_design/{ddoc}/_update/{name}[/{docid}]`: a design document's update
//! function ([`bunko_engine::update_fn`]), answered as CouchDB's
//! `chttpd_external:send_external_response`: `201` with `X-Couch-Update-NewRev` and
//! `X-Couch-Id` when it saved a document, else `200`; the body is the response's `json`
//! (as JSON), `base64` (decoded) or `body` (text, `text/html` unless its headers say).

use axum::Extension;
use axum::Router;
use axum::extract::{Path, RawQuery, State as AxState};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use base64::Engine as _;
use bunko_engine::update_fn::Updated;
use serde_json::{Map, Value, json};

use crate::body::RawBody;
use crate::db::{Access, open};
use crate::doc::encode_segment;
use crate::error::ApiResult;
use crate::params::Params;
use crate::{State, UserCtx, blocking};

pub fn routes() -> Router<State> {
    Router::new()
        .route("/{db}/_design/{ddoc}/_update/{name}", post(without_id).put(without_id))
        .route("/{db}/_design/{ddoc}/_update/{name}/{*docid}", post(with_id).put(with_id))
}

/// The request as the function's `req` sees it.
struct Call {
    method: Method,
    query: Option<String>,
    headers: HeaderMap,
    body: RawBody,
}

async fn without_id(
    st: AxState<State>,
    ctx: Extension<UserCtx>,
    method: Method,
    Path((db, ddoc, name)): Path<(String, String, String)>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: RawBody,
) -> ApiResult<Response> {
    run(st.0, ctx.0, (db, ddoc, name, None), Call { method, query, headers, body }).await
}

async fn with_id(
    st: AxState<State>,
    ctx: Extension<UserCtx>,
    method: Method,
    Path((db, ddoc, name, id)): Path<(String, String, String, String)>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: RawBody,
) -> ApiResult<Response> {
    run(st.0, ctx.0, (db, ddoc, name, Some(id)), Call { method, query, headers, body }).await
}

async fn run(
    state: State,
    ctx: UserCtx,
    (db_name, ddoc, name, id): (String, String, String, Option<String>),
    call: Call,
) -> ApiResult<Response> {
    let db = open(&state, &ctx, &db_name, Access::Member)?;
    let req = request(&state, &ctx, &db_name, &ddoc, &name, id.as_deref(), &call);
    let updated =
        blocking(move || Ok(db.run_update(&ctx, &ddoc, &name, id.as_deref(), &req)?)).await?;
    Ok(respond(updated))
}

/// CouchDB's `json_req_obj`.
fn request(
    state: &State,
    ctx: &UserCtx,
    db: &str,
    ddoc: &str,
    name: &str,
    id: Option<&str>,
    call: &Call,
) -> Value {
    let p = Params::parse(call.query.as_deref());
    let mut path =
        vec![db.to_string(), "_design".into(), ddoc.into(), "_update".into(), name.into()];
    path.extend(id.map(str::to_string));
    let headers: Map<String, Value> = call
        .headers
        .iter()
        .filter_map(|(k, v)| Some((k.as_str().to_string(), json!(v.to_str().ok()?))))
        .collect();
    let text = String::from_utf8_lossy(&call.body.0).into_owned();
    let form_type = call.headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
    let form: Map<String, Value> = match form_type {
        Some(t) if t.starts_with("application/x-www-form-urlencoded") => {
            form_urlencoded::parse(text.as_bytes())
                .map(|(k, v)| (k.into_owned(), json!(v)))
                .collect()
        }
        _ => Map::new(),
    };
    json!({
        "info": null,
        "id": id,
        "uuid": state.engine.uuids().next(),
        "method": call.method.as_str(),
        "requested_path": path,
        "path": path,
        "raw_path": format!("/{}", path.iter().map(|s| encode_segment(s)).collect::<Vec<_>>().join("/")),
        "query": p.to_object(),
        "headers": headers,
        "body": if call.body.0.is_empty() { "undefined".to_string() } else { text },
        "peer": "127.0.0.1",
        "form": form,
        "cookie": {},
        "userCtx": {"db": db, "name": ctx.name, "roles": ctx.roles},
        "secObj": {},
    })
}

fn respond(updated: Updated) -> Response {
    let r = &updated.response;
    let (mut content_type, bytes) = if let Some(value) = r.get("json") {
        ("application/json".to_string(), value.to_string().into_bytes())
    } else if let Some(Value::String(data)) = r.get("base64") {
        let bytes = base64::engine::general_purpose::STANDARD.decode(data).unwrap_or_default();
        ("application/binary".to_string(), bytes)
    } else {
        let body = r.get("body").and_then(Value::as_str).unwrap_or_default();
        ("text/html; charset=utf-8".to_string(), body.as_bytes().to_vec())
    };
    let mut headers = HeaderMap::new();
    for (name, value) in r.get("headers").and_then(Value::as_object).into_iter().flatten() {
        let (Ok(name), Some(Ok(value))) =
            (HeaderName::from_bytes(name.as_bytes()), value.as_str().map(HeaderValue::from_str))
        else {
            continue;
        };
        if name == header::CONTENT_TYPE {
            content_type = value.to_str().unwrap_or_default().to_string();
        } else {
            headers.insert(name, value);
        }
    }
    let status = match &updated.saved {
        Some((id, rev)) => {
            if let (Ok(rev), Ok(id)) =
                (HeaderValue::from_str(rev), HeaderValue::from_str(&encode_segment(id)))
            {
                headers.insert("x-couch-update-newrev", rev);
                headers.insert("x-couch-id", id);
            }
            StatusCode::CREATED
        }
        None => StatusCode::OK,
    };
    if let Ok(value) = HeaderValue::from_str(&content_type) {
        headers.insert(header::CONTENT_TYPE, value);
    }
    (status, headers, bytes).into_response()
}
