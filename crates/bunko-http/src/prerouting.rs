//! What CouchDB's `chttpd` decides about a request before routing it, done here before
//! [`crate::router`] routes it (so every route, and authentication, sees the result):
//!
//! - `+` in the path is a space, as CouchDB decodes path segments (`chttpd:unquote` under
//!   `chttpd/decode_plus_to_space`, `true` by default): `PUT /db/a+b` writes document
//!   `a b`, and `%2B` is a `+`. With the setting `false`, a `+` stays a `+`.
//! - A `POST` with `X-HTTP-Method-Override: GET|HEAD|POST|PUT|DELETE|TRACE|CONNECT|COPY`
//!   is served as that method (for clients that can only send `GET` and `POST`); the header
//!   is ignored on other methods.

use axum::extract::{Request, State as AxState};
use axum::http::{Method, Uri};
use axum::middleware::Next;
use axum::response::Response;

use crate::State;

/// The methods `X-HTTP-Method-Override` may name.
const OVERRIDES: [&str; 8] = ["GET", "HEAD", "POST", "PUT", "DELETE", "TRACE", "CONNECT", "COPY"];

/// Decodes `+` in the path and applies `X-HTTP-Method-Override`.
pub async fn prepare(AxState(state): AxState<State>, mut req: Request, next: Next) -> Response {
    let path = req.uri().path();
    let decode = || state.engine.settings().get_bool("chttpd", "decode_plus_to_space");
    if path.contains('+') && decode().unwrap_or(true) {
        let path = path.replace('+', "%20");
        let target = match req.uri().query() {
            Some(query) => format!("{path}?{query}"),
            None => path,
        };
        let mut parts = req.uri().clone().into_parts();
        if let Ok(target) = target.parse() {
            parts.path_and_query = Some(target);
            if let Ok(uri) = Uri::from_parts(parts) {
                *req.uri_mut() = uri;
            }
        }
    }
    let wanted = req.headers().get("x-http-method-override").and_then(|v| v.to_str().ok());
    let wanted = wanted.filter(|m| OVERRIDES.contains(m)).map(str::as_bytes);
    if let Some(method) = wanted.filter(|_| req.method() == Method::POST)
        && let Ok(method) = Method::from_bytes(method)
    {
        *req.method_mut() = method;
    }
    next.run(req).await
}
