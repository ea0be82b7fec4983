//! The headers CouchDB puts on every answer (`chttpd:basic_headers`): `X-Couch-Request-ID`,
//! a random 10-hex-digit nonce naming the request (as in CouchDB's logs), and
//! `X-CouchDB-Body-Time`, the milliseconds spent receiving the request body (`0` here: the
//! body is read by the handlers, as it streams).

use axum::extract::Request;
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;
use rand::Rng;

/// Adds both headers to the answer.
pub async fn middleware(req: Request, next: Next) -> Response {
    let nonce = hex::encode(rand::rng().random::<[u8; 5]>());
    let mut response = next.run(req).await;
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&nonce) {
        headers.insert("x-couch-request-id", value);
    }
    headers.insert("x-couchdb-body-time", HeaderValue::from_static("0"));
    response
}
