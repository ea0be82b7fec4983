//! What CouchDB's `chttpd` decides about a request before routing it, done here before
//! [`crate::router`] routes it (so every route, and authentication, sees the result):
//!
//! - `+` in the path is a space, as CouchDB decodes path segments (`chttpd:unquote` under
//!   `chttpd/decode_plus_to_space`, `true` by default): `PUT /db/a+b` writes document
//!   `a b`, and `%2B` is a `+`. With the setting `false`, a `+` stays a `+`.
//! - A `POST` with `X-HTTP-Method-Override: GET|HEAD|POST|PUT|DELETE|TRACE|CONNECT|COPY`
//!   is served as that method (for clients that can only send `GET` and `POST`); the header
//!   is ignored on other methods.

use axum::extract::Request;
use axum::http::{Method, Uri};

use crate::State;

/// The methods `X-HTTP-Method-Override` may name.
const OVERRIDES: [&str; 8] = ["GET", "HEAD", "POST", "PUT", "DELETE", "TRACE", "CONNECT", "COPY"];

/// Decodes `+` in the path and applies `X-HTTP-Method-Override`.
/// A plain function of the request, so that it runs as a `tower` map (no boxed future or
/// service per request, as an `axum::middleware::from_fn` layer has).
pub fn prepare(state: &State, mut req: Request) -> Request {
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
    req
}
