//! Headers every answer carries as CouchDB 3.4's do (`chttpd`): `Server`,
//! `X-CouchDB-Body-Time`, the request's
//! `X-Couch-Request-ID` (the client's own if it is a valid one, else ten random hex digits),
//! `Content-Length: 0` on a `304`, and absolute `Location`s. A handler names a created resource by its path
//! ([`created_at`]); [`middleware`] turns it into `scheme://host/path` as CouchDB's
//! `absolute_uri` does: the host from `X-Forwarded-Host` (or the header named by
//! `chttpd/x_forwarded_host`), else `Host`; `https` when `X-Forwarded-Ssl: on` or
//! `X-Forwarded-Proto: https` (header names from `x_forwarded_ssl`, `x_forwarded_proto`).

use axum::extract::{Request, State as AxState};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

use crate::State;

/// What `Server` says: the CouchDB version Bunko speaks (clients test for `CouchDB/`), then
/// Bunko's own.
const SERVER: &str = concat!("CouchDB/3.4.3 (Bunko/", env!("CARGO_PKG_VERSION"), ")");

const REQUEST_ID: HeaderName = HeaderName::from_static("x-couch-request-id");

/// CouchDB's `X-CouchDB-Body-Time` (milliseconds spent reading the request body; Bunko
/// streams bodies and reports 0, as CouchDB does for most requests).
const BODY_TIME: HeaderName = HeaderName::from_static("x-couchdb-body-time");

/// What `couch_util:url_encode` leaves as it is: letters, digits and `_ . - :`.
const URL_ENCODE: &AsciiSet = &NON_ALPHANUMERIC.remove(b'_').remove(b'.').remove(b'-').remove(b':');

/// One path segment encoded as CouchDB's `couch_util:url_encode` (a space is `%20`, `+` is
/// `%2B`, `/` is `%2F`).
pub fn url_encode(segment: &str) -> String {
    utf8_percent_encode(segment, URL_ENCODE).to_string()
}

/// The path of a created resource, made an absolute `Location` by [`middleware`].
#[derive(Clone, Debug)]
pub struct CreatedAt(pub String);

/// Marks `response` as having created the resource at `path` (already encoded).
pub fn created_at(mut response: Response, path: String) -> Response {
    response.extensions_mut().insert(CreatedAt(path));
    response
}

/// The `Location` of a document: `/{db}/{id}`, both encoded.
pub fn doc_path(db: &str, id: &str) -> String {
    format!("/{}/{}", url_encode(db), url_encode(id))
}

/// Adds `Server`, `X-Couch-Request-ID` and the absolute `Location` to every answer.
pub async fn middleware(AxState(state): AxState<State>, req: Request, next: Next) -> Response {
    if let Some(refusal) = crate::request_head::answer_malformed(&req) {
        return refusal;
    }
    let nonce = nonce(req.headers());
    // Only writes create resources ([`created_at`]): a read does not look up the settings
    // and headers a `Location` is made of.
    let reads = matches!(*req.method(), Method::GET | Method::HEAD);
    let base = (!reads).then(|| base_uri(&state, req.headers()));
    let mut response = next.run(req).await;
    let created = response.extensions_mut().remove::<CreatedAt>();
    let location = created
        .zip(base)
        .and_then(|(c, base)| HeaderValue::from_str(&format!("{base}{}", c.0)).ok());
    if let Some(location) = location {
        response.headers_mut().insert(header::LOCATION, location);
    }
    let headers = response.headers_mut();
    headers.insert(header::SERVER, HeaderValue::from_static(SERVER));
    headers.insert(BODY_TIME, HeaderValue::from_static("0"));
    if let Ok(value) = HeaderValue::from_str(&nonce) {
        headers.insert(REQUEST_ID, value);
    }
    // CouchDB says a `304` is empty (clients check it). Hyper leaves the header out when
    // the body is known to be empty, so the body is an empty stream of unknown length
    // (hyper then sends no body at all, as a `304` must).
    if response.status() == StatusCode::NOT_MODIFIED {
        response.headers_mut().insert(header::CONTENT_LENGTH, HeaderValue::from_static("0"));
        let empty = futures::stream::empty::<Result<axum::body::Bytes, std::convert::Infallible>>();
        *response.body_mut() = axum::body::Body::from_stream(empty);
    }
    response
}

/// The client's `X-Couch-Request-ID` if it has at most 36 letters, digits, `-` and `_`;
/// else a new one.
fn nonce(headers: &HeaderMap) -> String {
    let valid = |s: &&str| {
        s.len() <= 36 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    match headers.get(&REQUEST_ID).and_then(|v| v.to_str().ok()).filter(valid) {
        Some(given) => given.to_string(),
        None => hex::encode(rand::random::<[u8; 5]>()),
    }
}

/// `scheme://host` of this request as the client reached it.
fn base_uri(state: &State, headers: &HeaderMap) -> String {
    let settings = state.engine.settings();
    let configured =
        |key: &str, default: &str| settings.get("chttpd", key).unwrap_or(default.into());
    let value = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
    let host = value(&configured("x_forwarded_host", "X-Forwarded-Host"))
        .or_else(|| value("Host"))
        .unwrap_or_else(|| {
            let port = configured("port", "5984");
            format!("{}:{port}", configured("bind_address", "127.0.0.1"))
        });
    let ssl = value(&configured("x_forwarded_ssl", "X-Forwarded-Ssl"));
    let proto = value(&configured("x_forwarded_proto", "X-Forwarded-Proto"));
    let https = ssl.as_deref() == Some("on") || proto.as_deref() == Some("https");
    format!("{}://{host}", if https { "https" } else { "http" })
}
