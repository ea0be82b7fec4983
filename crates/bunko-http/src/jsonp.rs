//! JSONP, as CouchDB 3.4's `couch_httpd` serves it when `chttpd/allow_jsonp` is `true` (off
//! by default): a JSON answer to a request with `?callback=name` is sent as
//! `/* CouchDB */name(…);` with `Content-Type: application/javascript`, streamed answers
//! (`_changes`, views) included. A callback of other than letters, digits and `._[]` is
//! `400 bad_request` `invalid_callback`.

use axum::body::{Body, Bytes};
use axum::extract::{Request, State as AxState};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use futures::stream::once;

use crate::State;
use crate::error::ApiError;

/// Wraps JSON answers in the request's `callback`, when JSONP is allowed. Inside it, the
/// request's content coding is checked ([`crate::encoding::check`]) before the layers below.
pub async fn wrap(AxState(state): AxState<State>, req: Request, next: Next) -> Response {
    let callback = req.uri().query().and_then(|q| {
        form_urlencoded::parse(q.as_bytes()).find(|(k, _)| k == "callback").map(|(_, v)| v)
    });
    let callback = callback.filter(|c| !c.is_empty()).map(|c| c.into_owned());
    let allowed = || state.engine.settings().get_bool("chttpd", "allow_jsonp").unwrap_or(false);
    let Some(callback) = callback.filter(|_| allowed()) else {
        return crate::encoding::check(req, next).await;
    };
    let valid = |b: u8| b.is_ascii_alphanumeric() || b"._[]".contains(&b);
    if !callback.bytes().all(valid) {
        return ApiError::bad_request("invalid_callback").into_response();
    }
    let response = crate::encoding::check(req, next).await;
    let json = response.headers().get(header::CONTENT_TYPE);
    if !json.is_some_and(|t| t.as_bytes().starts_with(b"application/json")) {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    parts.headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/javascript"));
    parts.headers.remove(header::CONTENT_LENGTH);
    let head = Bytes::from(format!("/* CouchDB */{callback}("));
    let stream = once(async move { Ok(head) })
        .chain(body.into_data_stream())
        .chain(once(async { Ok(Bytes::from_static(b");\n")) }));
    Response::from_parts(parts, Body::from_stream(stream))
}
