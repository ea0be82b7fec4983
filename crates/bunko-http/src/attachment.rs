//! Attachment routes, `GET/HEAD/PUT/DELETE /{db}/{doc}/{name}` (also under `_design/`),
//! and inline attachment data in documents (`attachments=true`, `atts_since`).
//!
//! Downloads stream chunk by chunk from a storage snapshot ([`crate::stream`]), so memory
//! does not grow with the attachment; `Range: bytes=a-b` answers `206` with that slice, and
//! the `ETag` is the body's MD5 (base64), so `If-None-Match` answers `304`. Uploads are read
//! whole, up to `max_http_request_size`, then written through the engine's write path (the
//! write gate, `max_attachment_size`, one commit with the document).

use axum::extract::{FromRequestParts, MatchedPath, Path, RawQuery, State as AxState};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Router};
use bunko_doc::RevId;
use bunko_doc::att::{self, DEFAULT_TYPE};
use bunko_engine::Database;
use bunko_engine::attachments::{AttMeta, of_body};
use bunko_engine::read::DocOut;
use serde_json::{Map, Value, json};

use crate::body::RawBody;
use crate::doc::{merge_rev, open_for_read, written};
use crate::error::{ApiError, ApiResult};
use crate::params::Params;
use crate::{State, UserCtx, blocking, stream};

pub fn routes() -> Router<State> {
    use axum::routing::get;
    Router::new()
        .route("/{db}/{id}/{*attachment}", get(download).put(upload).delete(remove))
        .route("/{db}/_design/{id}/{*attachment}", get(download).put(upload).delete(remove))
}

/// The attachment a request names: database, document id (`_design/{id}` on the design
/// route) and attachment name (which may contain `/`).
struct Target {
    db: String,
    id: String,
    name: String,
}

impl<S: Send + Sync> FromRequestParts<S> for Target {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path((db, id, name)) =
            Path::<(String, String, String)>::from_request_parts(parts, state)
                .await
                .map_err(|rejection| ApiError::bad_request(rejection.body_text()))?;
        let design = parts
            .extensions
            .get::<MatchedPath>()
            .is_some_and(|path| path.as_str().starts_with("/{db}/_design/"));
        let id = if design { format!("_design/{id}") } else { id };
        Ok(Target { db, id, name })
    }
}

async fn upload(
    AxState(state): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    Target { db: db_name, id, name }: Target,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: RawBody,
) -> ApiResult<Response> {
    let db = state.engine.db(&db_name)?;
    let rev = merge_rev(None, &Params::parse(query.as_deref()), &headers)?;
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or(DEFAULT_TYPE)
        .to_string();
    let doc_id = id.clone();
    // Takes the buffer over without a copy when nothing else holds it.
    let bytes = Vec::from(body.0);
    let rev =
        blocking(move || Ok(db.put_attachment(&ctx, &doc_id, rev, &name, &content_type, bytes)?))
            .await?;
    Ok(written(StatusCode::CREATED, &id, &rev))
}

async fn remove(
    AxState(state): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    Target { db: db_name, id, name }: Target,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let db = state.engine.db(&db_name)?;
    let rev = merge_rev(None, &Params::parse(query.as_deref()), &headers)?;
    let doc_id = id.clone();
    let rev = blocking(move || Ok(db.delete_attachment(&ctx, &doc_id, rev, &name)?)).await?;
    Ok(written(StatusCode::OK, &id, &rev))
}

async fn download(
    AxState(state): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    Target { db: db_name, id, name }: Target,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let db = open_for_read(&state, &ctx, &db_name, &id)?;
    let rev = Params::parse(query.as_deref()).str("rev").map(str::parse::<RevId>).transpose()?;
    let meta = {
        let db = db.clone();
        blocking(move || Ok(db.attachment(&id, rev.as_ref(), &name)?)).await?
    };
    let etag = format!("\"{}\"", att::digest_base64(&meta.md5));
    let matches = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    if matches {
        return Ok(with_headers(StatusCode::NOT_MODIFIED.into_response(), &[("etag", &etag)]));
    }
    let (status, start, end) = match range(&headers, meta.length) {
        Range::Whole => (StatusCode::OK, 0, meta.length),
        Range::Part(start, end) => (StatusCode::PARTIAL_CONTENT, start, end + 1),
        Range::Unsatisfiable => {
            let response = ApiError::Other(
                StatusCode::RANGE_NOT_SATISFIABLE,
                "range_not_satisfiable",
                "Requested range not satisfiable".to_string(),
            )
            .into_response();
            let all = format!("bytes */{}", meta.length);
            return Ok(with_headers(response, &[("content-range", &all)]));
        }
    };
    let md5 = meta.md5;
    let response = stream::response(status, "application/octet-stream", move |sink| {
        let mut at = 0u64;
        for chunk in db.attachment_chunks(&md5) {
            let Ok(chunk) = chunk else { return Err(stream::Gone) };
            let (from, to) = (at, at + chunk.len() as u64);
            at = to;
            if to <= start {
                continue;
            }
            if from >= end {
                break;
            }
            let lo = start.saturating_sub(from) as usize;
            let hi = (end.min(to) - from) as usize;
            sink.write(&chunk[lo..hi])?;
        }
        Ok(())
    });
    let length = (end - start).to_string();
    let mut extra = vec![
        ("content-type", meta.content_type.clone()),
        ("content-length", length),
        ("accept-ranges", "bytes".to_string()),
        ("etag", etag),
        ("cache-control", "must-revalidate".to_string()),
    ];
    if status == StatusCode::PARTIAL_CONTENT {
        extra.push(("content-range", format!("bytes {start}-{}/{}", end - 1, meta.length)));
    }
    let pairs: Vec<(&str, &str)> = extra.iter().map(|(k, v)| (*k, v.as_str())).collect();
    Ok(with_headers(response, &pairs))
}

fn with_headers(mut response: Response, pairs: &[(&str, &str)]) -> Response {
    for (name, value) in pairs {
        if let (Ok(name), Ok(value)) =
            (header::HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_str(value))
        {
            response.headers_mut().insert(name, value);
        }
    }
    response
}

/// What a `Range` header asks of a body of `length` bytes.
#[derive(Debug, PartialEq, Eq)]
enum Range {
    Whole,
    /// First and last byte, inclusive.
    Part(u64, u64),
    Unsatisfiable,
}

/// One `bytes=a-b`, `bytes=a-` or `bytes=-n` range; several ranges, or a header that
/// does not parse, get the whole body (as HTTP allows).
fn range(headers: &HeaderMap, length: u64) -> Range {
    let Some(spec) = headers.get(header::RANGE).and_then(|v| v.to_str().ok()) else {
        return Range::Whole;
    };
    let Some(spec) = spec.trim().strip_prefix("bytes=") else { return Range::Whole };
    if spec.contains(',') {
        return Range::Whole;
    }
    let Some((a, b)) = spec.split_once('-') else { return Range::Whole };
    let (a, b) = (a.trim(), b.trim());
    let (start, end) = match (a.parse::<u64>(), b.parse::<u64>()) {
        (Ok(start), Ok(end)) if start <= end => (start, end.min(length.saturating_sub(1))),
        (Ok(start), Err(_)) if b.is_empty() => (start, length.saturating_sub(1)),
        (Err(_), Ok(suffix)) if a.is_empty() && suffix > 0 => {
            (length.saturating_sub(suffix), length.saturating_sub(1))
        }
        _ => return Range::Whole,
    };
    if start >= length { Range::Unsatisfiable } else { Range::Part(start, end) }
}

/// Replaces the stubs of `doc` by inline data (`attachments=true`): all of them, or with
/// `since` (the generation `atts_since` names), those added after it.
pub fn inline(db: &Database, doc: &mut DocOut, since: u64) -> ApiResult<()> {
    let atts = of_body(&doc.body);
    if atts.is_empty() {
        return Ok(());
    }
    let Ok(Value::Object(mut body)) = serde_json::from_slice::<Value>(&doc.body) else {
        return Ok(());
    };
    let mut out = Map::new();
    for meta in atts {
        let value = if meta.revpos > since { with_data(db, &meta)? } else { meta.stub_json() };
        out.insert(meta.name.clone(), value);
    }
    body.insert("_attachments".to_string(), Value::Object(out));
    doc.body = serde_json::to_vec(&Value::Object(body)).unwrap_or_default();
    Ok(())
}

/// Marks the attachments of `doc` added after generation `since` as `"follows": true`
/// (the others stay stubs) and returns them, in order, for a multipart answer.
pub fn follows(doc: &mut DocOut, since: u64) -> Vec<AttMeta> {
    let atts = of_body(&doc.body);
    let Ok(Value::Object(mut body)) = serde_json::from_slice::<Value>(&doc.body) else {
        return Vec::new();
    };
    if atts.is_empty() {
        return Vec::new();
    }
    let mut out = Map::new();
    let mut sent = Vec::new();
    for meta in atts {
        let value = if meta.revpos > since {
            let value = json!({
                "content_type": meta.content_type,
                "revpos": meta.revpos,
                "digest": att::digest_text(&meta.md5),
                "length": meta.length,
                "follows": true,
            });
            sent.push(meta.clone());
            value
        } else {
            meta.stub_json()
        };
        out.insert(meta.name.clone(), value);
    }
    body.insert("_attachments".to_string(), Value::Object(out));
    doc.body = serde_json::to_vec(&Value::Object(body)).unwrap_or_default();
    sent
}

/// An attachment with its data, as CouchDB inlines it (no `length`, no `stub`).
fn with_data(db: &Database, meta: &AttMeta) -> ApiResult<Value> {
    let data = db.attachment_data(&meta.md5)?;
    Ok(json!({
        "content_type": meta.content_type,
        "revpos": meta.revpos,
        "digest": att::digest_text(&meta.md5),
        "data": att::encode_data(&data),
    }))
}

/// The generation from which `atts_since` wants data: the newest of the given revisions
/// that is an ancestor of (or is) `doc`'s; 0 (all data) when none is.
pub fn since_pos(doc: &DocOut, atts_since: &[RevId]) -> u64 {
    let (start, hashes) = doc.revisions();
    let ancestry: Vec<RevId> = hashes
        .iter()
        .enumerate()
        .map(|(i, hash)| RevId { pos: start.saturating_sub(i as u64), hash: hash.clone() })
        .collect();
    atts_since.iter().filter(|r| ancestry.contains(r)).map(|r| r.pos).max().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_range(spec: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::RANGE, HeaderValue::from_str(spec).expect("header"));
        headers
    }

    #[test]
    fn ranges_are_read_as_http_says() {
        assert_eq!(range(&HeaderMap::new(), 10), Range::Whole);
        assert_eq!(range(&with_range("bytes=2-4"), 10), Range::Part(2, 4));
        assert_eq!(range(&with_range("bytes=2-"), 10), Range::Part(2, 9));
        assert_eq!(range(&with_range("bytes=-3"), 10), Range::Part(7, 9));
        assert_eq!(range(&with_range("bytes=5-100"), 10), Range::Part(5, 9));
        assert_eq!(range(&with_range("bytes=10-"), 10), Range::Unsatisfiable);
        assert_eq!(range(&with_range("bytes=1-2,4-5"), 10), Range::Whole);
        assert_eq!(range(&with_range("items=1-2"), 10), Range::Whole);
    }
}
