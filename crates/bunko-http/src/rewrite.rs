//! `/{db}/_design/{ddoc}/_rewrite[/{path}]`, CouchDB 3.4's `chttpd_rewrite`: the design
//! document's `rewrites` turn the request into another one under the design document
//! (`..` segments reach the database or the server), which is then served by the whole
//! router again, with the same method, headers, body and user (authenticated again from
//! the same headers). `rewrites` is an array of rules ([`crate::rewrite_rules`]) or a
//! JavaScript function of `req` answering a path or `{path, query, method, headers,
//! body}`, or `{code, headers, body}` to answer at once. A request rewritten more than
//! `chttpd/rewrite_limit` times (100) is `400` "Exceeded rewrite recursion limit".

use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;

use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, Request, State as AxState};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use axum::{Extension, Router};
use bunko_engine::show_list::Rewrites;
use bunko_js::Rewritten;
use serde_json::{Map, Value};
use tower::ServiceExt;

use crate::body::RawBody;
use crate::db::{Access, open};
use crate::error::{ApiError, ApiResult};
use crate::headers::url_encode;
use crate::listener::Peer;
use crate::rewrite_rules::{dispatch, normalize, quote_plus};
use crate::update::Call;
use crate::{State, UserCtx, blocking};

pub fn routes() -> Router<State> {
    Router::new()
        .route("/{db}/_design/{ddoc}/_rewrite", any(rewrite))
        .route("/{db}/_design/{ddoc}/_rewrite/{*path}", any(rewrite))
}

/// How many times the request has been rewritten so far.
#[derive(Debug, Clone, Copy)]
struct Depth(u64);

/// The request a rewrite produced.
struct Target {
    method: Method,
    uri: String,
    headers: HeaderMap,
    body: Bytes,
}

async fn rewrite(
    AxState(state): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    req: Request,
) -> ApiResult<Response> {
    let depth = req.extensions().get::<Depth>().map_or(0, |d| d.0);
    let settings = state.engine.settings();
    if depth >= settings.get_u64("chttpd", "rewrite_limit").unwrap_or(100) {
        return Err(ApiError::bad_request("Exceeded rewrite recursion limit"));
    }
    let secure = settings.get_bool("chttpd", "secure_rewrites").unwrap_or(true);
    let peer = req.extensions().get::<ConnectInfo<Peer>>().copied();
    let (parts, body) = req.into_parts();
    let limit = state.max_request_size.load(Relaxed);
    let body = axum::body::to_bytes(body, limit).await.map_err(|_| ApiError::too_large())?;
    let path: Vec<String> = parts
        .uri
        .path()
        .split('/')
        .filter(|s| !s.is_empty())
        .map(|s| percent_encoding::percent_decode_str(s).decode_utf8_lossy().into_owned())
        .collect();
    let (db_name, ddoc) = (path[0].clone(), path[2].clone());
    let db = open(&state, &ctx, &db_name, Access::Member)?;
    let prefix = format!("/{}/_design/{}", url_encode(&db_name), url_encode(&ddoc));
    let query = parts.uri.query().map(str::to_string);
    let call = Call {
        params: HashMap::new(),
        method: parts.method.clone(),
        query: query.clone(),
        raw_path: parts.uri.path_and_query().map_or("/", |p| p.as_str()).to_string(),
        headers: parts.headers.clone(),
        body: RawBody(body.clone()),
    };
    let req_json = crate::update::request(&state, &ctx, path.clone(), None, &call);
    let rewrites = blocking(move || Ok(db.rewrites(&ddoc, &req_json)?)).await?;
    let pairs: Vec<(String, String)> =
        form_urlencoded::parse(query.unwrap_or_default().as_bytes()).into_owned().collect();
    let original =
        Target { method: parts.method, uri: String::new(), headers: parts.headers, body };
    let target = match rewrites {
        Rewrites::Rules(rules) => {
            let method = original.method.as_str();
            let relative = dispatch(&rules, method, &path[4..], &pairs, secure)?;
            Target { uri: normalize(&format!("{prefix}/{relative}")), ..original }
        }
        Rewrites::Function(Rewritten::Rule(rule)) if rule.contains_key("code") => {
            return Ok(answer(&rule, original.body));
        }
        Rewrites::Function(Rewritten::Rule(rule)) => {
            function_target(&rule, &prefix, &pairs, original)?
        }
        Rewrites::Function(Rewritten::Failed { error, reason }) => {
            return Err(bunko_engine::Error::Render { error, reason }.into());
        }
        Rewrites::Function(Rewritten::NoRule) | Rewrites::Missing => {
            return Err(ApiError::Other(
                StatusCode::NOT_FOUND,
                "rewrite_error",
                "Invalid path.".into(),
            ));
        }
    };
    forward(state, target, Depth(depth + 1), peer).await
}

/// The request a rewrite function's `{path, query, method, headers, body}` names.
fn function_target(
    rule: &Map<String, Value>,
    prefix: &str,
    pairs: &[(String, String)],
    original: Target,
) -> ApiResult<Target> {
    let Some(path) = rule.get("path").and_then(Value::as_str) else {
        return Err(ApiError::Other(
            StatusCode::INTERNAL_SERVER_ERROR,
            "rewrite_error",
            "Rewrite result must produce a new path.".into(),
        ));
    };
    let text = |v: &Value| v.as_str().map_or_else(|| v.to_string(), str::to_string);
    let query: Vec<String> = match rule.get("query").and_then(Value::as_object) {
        Some(query) => query
            .iter()
            .map(|(k, v)| format!("{}={}", quote_plus(k), quote_plus(&text(v))))
            .collect(),
        None => pairs.iter().map(|(k, v)| format!("{}={}", quote_plus(k), quote_plus(v))).collect(),
    };
    let mut uri = normalize(&format!("{prefix}/{path}"));
    if !query.is_empty() {
        uri = format!("{uri}?{}", query.join("&"));
    }
    let method = match rule.get("method").and_then(Value::as_str) {
        Some(m) => Method::from_bytes(m.as_bytes())
            .map_err(|_| ApiError::bad_request("bad method in rewrite"))?,
        None => original.method,
    };
    let mut headers = original.headers;
    set_headers(&mut headers, rule);
    let body = match rule.get("body") {
        Some(body) => Bytes::from(text(body)),
        None => original.body,
    };
    Ok(Target { method, uri, headers, body })
}

/// The rule's `headers`, over `headers`.
fn set_headers(headers: &mut HeaderMap, rule: &Map<String, Value>) {
    for (name, value) in rule.get("headers").and_then(Value::as_object).into_iter().flatten() {
        let name = HeaderName::from_bytes(name.as_bytes());
        let value = value.as_str().map(HeaderValue::from_str);
        if let (Ok(name), Some(Ok(value))) = (name, value) {
            headers.insert(name, value);
        }
    }
}

/// A rewrite function's own answer: `{code, headers, body}` (the request's body if none).
fn answer(rule: &Map<String, Value>, body: Bytes) -> Response {
    let status = rule
        .get("code")
        .and_then(Value::as_u64)
        .and_then(|c| StatusCode::from_u16(u16::try_from(c).ok()?).ok())
        .unwrap_or(StatusCode::OK);
    let mut headers = HeaderMap::new();
    set_headers(&mut headers, rule);
    let body = match rule.get("body") {
        Some(Value::String(text)) => Bytes::from(text.clone()),
        Some(other) => Bytes::from(other.to_string()),
        None => body,
    };
    let typed = headers.contains_key(header::CONTENT_TYPE);
    let mut response = (status, headers, body).into_response();
    if !typed {
        // CouchDB sends only the headers the function gave.
        response.headers_mut().remove(header::CONTENT_TYPE);
    }
    response
}

/// Serves `target` through the whole router, as the same client.
async fn forward(
    state: State,
    target: Target,
    depth: Depth,
    peer: Option<ConnectInfo<Peer>>,
) -> ApiResult<Response> {
    let mut req = Request::new(Body::from(target.body.clone()));
    *req.method_mut() = target.method;
    *req.uri_mut() = target
        .uri
        .parse()
        .map_err(|_| ApiError::bad_request(format!("invalid rewritten path {}", target.uri)))?;
    *req.headers_mut() = target.headers;
    // The body was read (and inflated) already.
    req.headers_mut().remove(header::CONTENT_ENCODING);
    req.headers_mut().insert(header::CONTENT_LENGTH, HeaderValue::from(target.body.len()));
    req.extensions_mut().insert(depth);
    if let Some(peer) = peer {
        req.extensions_mut().insert(peer);
    }
    // A task of its own: nested rewrites then use one task each instead of one deeper
    // stack (a loop of 100 would overflow it).
    let served = tokio::spawn(crate::router(state).oneshot(req)).await;
    match served {
        Ok(Ok(response)) => Ok(response),
        Ok(Err(never)) => match never {},
        Err(_) => Err(ApiError::Other(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal_server_error",
            "the rewritten request failed".into(),
        )),
    }
}
