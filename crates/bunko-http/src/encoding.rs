//! Content codings of request and response bodies.
//!
//! Requests: the official Cloudant SDKs send bodies with `Content-Encoding: gzip`. Such
//! bodies are inflated as they stream in (tower-http's request decompression), before any
//! handler reads them, so every route that reads a body sees plain JSON and the request size
//! limit ([`crate::body::RawBody`]) counts *inflated* bytes: a small gzip bomb reads no
//! further than the limit and gets `413`. [`check`] refuses other codings first with
//! CouchDB's `415 bad_content_type` ("br is not a supported content encoding.") and marks the
//! request [`Inflated`] so that a corrupt stream can be answered with CouchDB's
//! `400 "Request body is not properly gzipped."`.
//!
//! Responses: [`compression`] gzips (or deflates) answers for clients that send
//! `Accept-Encoding`, when the body is large or of unknown length, except answers marked
//! [`Unbuffered`]: the waiting `_changes` feeds, whose lines must reach the client as they
//! are written (the compressor would hold them back until its buffer fills).

use axum::extract::Request;
use axum::http::{Extensions, HeaderMap, HeaderValue, StatusCode, Version, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tower_http::compression::predicate::{DefaultPredicate, Predicate, SizeAbove};
use tower_http::compression::{CompressionLayer, CompressionLevel};
use tower_http::decompression::RequestDecompressionLayer;

use crate::error::ApiError;

/// Answers smaller than this many bytes are sent as they are.
pub const MIN_COMPRESSED_SIZE: u16 = 1024;

/// Marks a request whose body arrives compressed (and is inflated on the way in).
#[derive(Debug, Clone, Copy)]
pub struct Inflated;

/// Marks a response that must not be compressed: its chunks are sent as soon as written.
#[derive(Debug, Clone, Copy)]
pub struct Unbuffered;

/// The codings CouchDB and Bunko accept in `Content-Encoding`.
fn coding(headers: &HeaderMap) -> Result<Option<&'static str>, String> {
    let Some(value) = headers.get(header::CONTENT_ENCODING) else {
        return Ok(None);
    };
    let text = String::from_utf8_lossy(value.as_bytes());
    match text.trim().to_ascii_lowercase().as_str() {
        "identity" | "" => Ok(None),
        "gzip" => Ok(Some("gzip")),
        "deflate" => Ok(Some("deflate")),
        _ => Err(text.into_owned()),
    }
}

/// Refuses unknown content codings (`415`) and marks compressed requests [`Inflated`].
/// Then passes the request on to `next` (the layers below, down to the handler). One
/// function with [`crate::jsonp::wrap`], which calls it: a layer less per request.
pub async fn check(mut req: Request, next: Next) -> Response {
    match coding(req.headers()) {
        Err(other) => {
            return ApiError::Other(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "bad_content_type",
                format!("{other} is not a supported content encoding."),
            )
            .into_response();
        }
        Ok(Some(name)) => {
            // tower-http matches the coding byte for byte: hand it the canonical spelling.
            req.headers_mut().insert(header::CONTENT_ENCODING, HeaderValue::from_static(name));
            req.extensions_mut().insert(Inflated);
        }
        Ok(None) => {
            req.headers_mut().remove(header::CONTENT_ENCODING);
        }
    }
    next.run(req).await
}

/// Inflates `gzip` and `deflate` request bodies while they stream in.
pub fn decompression() -> RequestDecompressionLayer {
    // Unknown codings never get here ([`check`] answered them).
    RequestDecompressionLayer::new().gzip(true).deflate(true).pass_through_unaccepted(true)
}

/// Which answers to compress: [`DefaultPredicate`]'s (not images, not event streams), large
/// enough, and not [`Unbuffered`].
pub fn compression() -> CompressionLayer<impl Predicate> {
    let buffered = |_: StatusCode, _: Version, _: &HeaderMap, ext: &Extensions| {
        ext.get::<Unbuffered>().is_none()
    };
    let predicate = DefaultPredicate::new().and(SizeAbove::new(MIN_COMPRESSED_SIZE)).and(buffered);
    CompressionLayer::new()
        .gzip(true)
        .deflate(true)
        .quality(CompressionLevel::Fastest)
        .compress_when(predicate)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(value: &str) -> HeaderMap {
        let mut map = HeaderMap::new();
        map.insert(header::CONTENT_ENCODING, value.parse().unwrap());
        map
    }

    #[test]
    fn codings_are_recognised_case_insensitively() {
        assert_eq!(coding(&HeaderMap::new()), Ok(None));
        assert_eq!(coding(&headers("identity")), Ok(None));
        assert_eq!(coding(&headers("GZIP")), Ok(Some("gzip")));
        assert_eq!(coding(&headers(" deflate ")), Ok(Some("deflate")));
        assert_eq!(coding(&headers("br")), Err("br".to_string()));
        assert_eq!(coding(&headers("gzip, br")), Err("gzip, br".to_string()));
    }
}
