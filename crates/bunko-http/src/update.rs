//! `POST/PUT /{db}/_design/{ddoc}/_update/{name}[/{docid}]`: a design document's update
//! function ([`bunko_engine::update_fn`]), answered as CouchDB's
//! `chttpd_external:send_external_response`: `201` with `X-Couch-Update-NewRev` and
//! `X-Couch-Id` when it saved a document, else `200`; the body is the response's `json`
//! (as JSON), `base64` (decoded) or `body` (text, `text/html` unless its headers say).

use axum::Extension;
use axum::Router;
use std::collections::HashMap;

use axum::extract::{FromRequest, FromRequestParts, Path, Request, State as AxState};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, post};
use base64::Engine as _;
use serde_json::{Map, Value, json};

use crate::body::RawBody;
use crate::db::{Access, open};
use crate::doc::encode_segment;
use crate::error::{ApiError, ApiResult};
use crate::params::Params;
use crate::{State, UserCtx, blocking};

pub fn routes() -> Router<State> {
    Router::new()
        .route("/{db}/_design/{ddoc}/_update", any(no_function))
        .route("/{db}/_design/{ddoc}/_update/", any(no_function))
        .route("/{db}/_design/{ddoc}/_update/{name}", post(update).put(update))
        .route("/{db}/_design/{ddoc}/_update/{name}/", post(update).put(update))
        .route("/{db}/_design/{ddoc}/_update/{name}/{*docid}", post(update).put(update))
}

/// `_update` without a function name: CouchDB's `404 update_error`.
async fn no_function() -> ApiError {
    ApiError::Other(StatusCode::NOT_FOUND, "update_error", "Invalid path.".into())
}

/// The request as a design function's `req` sees it: one extractor for every route that
/// runs one (update, show and list functions).
pub(crate) struct Call {
    /// The route's path parameters (`db`, `ddoc`, `name`, `docid`, `view`…).
    pub params: HashMap<String, String>,
    pub method: Method,
    pub query: Option<String>,
    /// The path and query as requested (`req.raw_path`).
    pub raw_path: String,
    pub headers: HeaderMap,
    pub body: RawBody,
}

impl<S: Send + Sync> FromRequest<S> for Call {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let (mut parts, body) = req.into_parts();
        let Path(params) = Path::<HashMap<String, String>>::from_request_parts(&mut parts, state)
            .await
            .map_err(|e| ApiError::bad_request(e.body_text()))?;
        let (method, query) = (parts.method.clone(), parts.uri.query().map(str::to_string));
        let raw_path = parts.uri.path_and_query().map_or("/", |p| p.as_str()).to_string();
        let headers = parts.headers.clone();
        let body = RawBody::from_request(Request::from_parts(parts, body), state).await?;
        Ok(Call { params, method, query, raw_path, headers, body })
    }
}

impl Call {
    /// Path parameter `name` (empty if the route has none).
    pub fn param(&self, name: &str) -> String {
        self.params.get(name).cloned().unwrap_or_default()
    }

    /// `(db, ddoc, name, docid)` of a route to a design function.
    pub fn target(&self) -> (String, String, String, Option<String>) {
        let id = self.params.get("docid").cloned();
        (self.param("db"), self.param("ddoc"), self.param("name"), id)
    }
}

async fn update(
    AxState(state): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    call: Call,
) -> ApiResult<Response> {
    let (db_name, ddoc, name, id) = call.target();
    let db = open(&state, &ctx, &db_name, Access::Member)?;
    let mut path =
        vec![db_name.clone(), "_design".into(), ddoc.clone(), "_update".into(), name.clone()];
    path.extend(id.clone());
    let req = request(&state, &ctx, path, id.as_deref(), &call);
    let updated =
        blocking(move || Ok(db.run_update(&ctx, &ddoc, &name, id.as_deref(), &req)?)).await?;
    let status = if updated.saved.is_some() { StatusCode::CREATED } else { StatusCode::OK };
    let mut response = respond(&updated.response, status);
    if let Some((id, rev)) = &updated.saved
        && let (Ok(rev), Ok(id)) =
            (HeaderValue::from_str(rev), HeaderValue::from_str(&encode_segment(id)))
    {
        response.headers_mut().insert("x-couch-update-newrev", rev);
        response.headers_mut().insert("x-couch-id", id);
    }
    Ok(response)
}

/// CouchDB's `json_req_obj` for a request to `path` (its segments, database first) about
/// document `id`. Header names are capitalized as clients send them (`Accept`,
/// `Content-Type`), as CouchDB passes them on.
pub(crate) fn request(
    state: &State,
    ctx: &UserCtx,
    path: Vec<String>,
    id: Option<&str>,
    call: &Call,
) -> Value {
    let p = Params::parse(call.query.as_deref());
    let db = path.first().cloned().unwrap_or_default();
    let database = state.engine.db(&db).ok();
    let headers: Map<String, Value> = call
        .headers
        .iter()
        .filter_map(|(k, v)| Some((capitalized(k.as_str()), json!(v.to_str().ok()?))))
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
        "info": database.as_deref().map(crate::db::info_json),
        "id": id,
        "uuid": state.engine.uuids().next(),
        "method": call.method.as_str(),
        "requested_path": path,
        "path": path,
        "raw_path": call.raw_path,
        "query": p.to_object(),
        "headers": headers,
        "body": if call.body.0.is_empty() { "undefined".to_string() } else { text },
        "peer": "127.0.0.1",
        "form": form,
        "cookie": {},
        "userCtx": {"db": db, "name": ctx.name, "roles": ctx.roles},
        "secObj": database.map_or(json!({}), |d| serde_json::from_str(&d.security()).unwrap_or(json!({}))),
    })
}

/// `content-type` as `Content-Type`.
fn capitalized(name: &str) -> String {
    let words = name.split('-').map(|word| {
        let mut chars = word.chars();
        chars
            .next()
            .map_or_else(String::new, |c| c.to_ascii_uppercase().to_string() + chars.as_str())
    });
    words.collect::<Vec<_>>().join("-")
}

/// A design function's response object as HTTP, as CouchDB's
/// `chttpd_external:send_external_response`: `code` (else `status`), `headers`, and the
/// body from `json` (as JSON), `base64` (decoded) or `body` (text, `text/html` unless its
/// headers say); with none of them an empty `application/json` body.
pub(crate) fn respond(r: &Map<String, Value>, status: StatusCode) -> Response {
    let (mut content_type, bytes) = if let Some(value) = r.get("json") {
        ("application/json".to_string(), value.to_string().into_bytes())
    } else if let Some(Value::String(data)) = r.get("base64") {
        let bytes = base64::engine::general_purpose::STANDARD.decode(data).unwrap_or_default();
        ("application/binary".to_string(), bytes)
    } else if let Some(body) = r.get("body") {
        let body = body.as_str().map_or_else(|| body.to_string(), str::to_string);
        ("text/html; charset=utf-8".to_string(), body.into_bytes())
    } else {
        ("application/json".to_string(), Vec::new())
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
    let status = r
        .get("code")
        .and_then(Value::as_u64)
        .and_then(|code| StatusCode::from_u16(u16::try_from(code).ok()?).ok())
        .unwrap_or(status);
    if let Ok(value) = HeaderValue::from_str(&content_type) {
        headers.insert(header::CONTENT_TYPE, value);
    }
    (status, headers, bytes).into_response()
}
