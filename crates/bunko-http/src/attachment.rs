//! Attachment routes, `GET/HEAD/PUT/DELETE /{db}/{doc}/{name}` (also under `_design/`),
//! and inline attachment data in documents (`attachments=true`, `atts_since`).
//!
//! Attachments stored gzipped (`bunko_doc::gzip`) go to clients whose `Accept-Encoding`
//! takes gzip as stored, with `Content-Encoding: gzip`, and to the others inflated as they
//! stream; `Range` gets the whole of them, as in CouchDB.
//!
//! Downloads stream chunk by chunk from a storage snapshot ([`crate::stream`]), so memory
//! does not grow with the attachment; `Range: bytes=a-b` answers `206` with that slice
//! (several ranges: `206 multipart/byteranges`, as CouchDB), and
//! the `ETag` is the body's MD5 (base64), so `If-None-Match` answers `304`. Uploads stream
//! into temporary storage as they arrive (`receive.rs`; `max_attachment_size` is
//! checked as the bytes come, the write gate before the first), then are written through
//! the engine's write path (one commit with the document).

use axum::body::Body;
use axum::extract::{FromRequestParts, MatchedPath, Path, RawQuery, State as AxState};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Router};
use bunko_doc::RevId;
use bunko_doc::att::{self, DEFAULT_TYPE};
use std::io::Read;
use std::sync::Arc;

use bunko_engine::Database;
use bunko_engine::attachments::{AttMeta, of_body};
use bunko_engine::read::DocOut;
use serde_json::{Map, Value, json};

use crate::doc::{merge_rev, open_for_read, written};
use crate::encoding::Inflated;
use crate::error::{ApiError, ApiResult};
use crate::headers::{created_at, url_encode};
use crate::params::Params;
use crate::receive::receive;
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
    inflated: Option<Extension<Inflated>>,
    body: Body,
) -> ApiResult<Response> {
    let db = state.engine.db(&db_name)?;
    let rev = merge_rev(None, &Params::parse(query.as_deref()), &headers)?;
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or(DEFAULT_TYPE)
        .to_string();
    // Refused before the body is read: a user who may not write sends it for nothing.
    db.admit_attachment(&ctx, &id, &name)?;
    let bad = |err: axum::Error| match inflated {
        Some(_) => ApiError::bad_request("Request body is not properly gzipped."),
        None => ApiError::bad_request(err.to_string()),
    };
    let uploaded = receive(db.upload(&name, &content_type), body.into_data_stream(), bad).await?;
    let doc_id = id.clone();
    // CouchDB leaves the database name as it is here.
    let location = format!("/{db_name}/{}/{}", url_encode(&id), url_encode(&name));
    let rev = blocking(move || {
        let rev = db.put_attachment(&ctx, &doc_id, rev, &name, &content_type, uploaded.body());
        drop(uploaded);
        Ok(rev?)
    })
    .await?;
    Ok(created_at(written(StatusCode::CREATED, &id, &rev), location))
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
    let (meta, gzip_length) = {
        let db = db.clone();
        blocking(move || {
            let meta = db.attachment(&id, rev.as_ref(), &name)?;
            let gzip_length = db.attachment_gzip(&meta.md5)?;
            Ok((meta, gzip_length))
        })
        .await?
    };
    // Stored gzipped, it is sent so to clients that accept gzip, inflated to the others,
    // and never in ranges (`chttpd_db:db_attachment_req`).
    let send_gzip = gzip_length.is_some() && accepts_gzip(&headers);
    let length = if send_gzip { gzip_length.unwrap_or(meta.length) } else { meta.length };
    let etag = format!("\"{}\"", att::digest_base64(&meta.md5));
    let matches = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    if matches {
        return Ok(with_headers(StatusCode::NOT_MODIFIED.into_response(), &[("etag", &etag)]));
    }
    let ranges = match ranges(&headers, length) {
        Ok(ranges) => ranges,
        Err(Unsatisfiable) => {
            let response = ApiError::Other(
                StatusCode::RANGE_NOT_SATISFIABLE,
                "requested_range_not_satisfiable",
                "Requested range not satisfiable".to_string(),
            )
            .into_response();
            let all = format!("bytes */{length}");
            return Ok(with_headers(response, &[("content-range", &all)]));
        }
    };
    let (status, start, end) = match ranges.as_slice() {
        _ if gzip_length.is_some() => (StatusCode::OK, 0, length),
        [(first, last)] => (StatusCode::PARTIAL_CONTENT, *first, last + 1),
        [_, _, ..] => return Ok(byteranges(db, meta, ranges)),
        [] => (StatusCode::OK, 0, length),
    };
    let md5 = meta.md5;
    let inflate = gzip_length.is_some() && !send_gzip;
    let response =
        stream::response(status, "application/octet-stream", move |sink| match inflate {
            true => write_inflated(sink, &db, &md5),
            false => write_slice(sink, &db, &md5, start, end),
        });
    let mut extra = vec![
        ("content-type", meta.content_type.clone()),
        ("content-length", (end - start).to_string()),
        ("accept-ranges", if gzip_length.is_some() { "none" } else { "bytes" }.to_string()),
        ("etag", etag),
        ("cache-control", "must-revalidate".to_string()),
    ];
    if send_gzip {
        extra.push(("content-encoding", "gzip".to_string()));
    }
    if status == StatusCode::PARTIAL_CONTENT {
        extra.push(("content-range", format!("bytes {start}-{}/{length}", end - 1)));
    }
    let pairs: Vec<(&str, &str)> = extra.iter().map(|(k, v)| (*k, v.as_str())).collect();
    Ok(with_headers(response, &pairs))
}

/// Writes bytes `start..end` of a stored body, read chunk by chunk.
fn write_slice(
    sink: &mut stream::Sink,
    db: &Database,
    md5: &[u8; 16],
    start: u64,
    end: u64,
) -> Result<(), stream::Gone> {
    let mut at = 0u64;
    for chunk in db.attachment_chunks(md5) {
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
}

/// Writes a gzipped body inflated, a piece at a time.
fn write_inflated(
    sink: &mut stream::Sink,
    db: &Database,
    md5: &[u8; 16],
) -> Result<(), stream::Gone> {
    let mut reader = db.attachment_reader(md5, true).map_err(|_| stream::Gone)?;
    let mut buf = vec![0; bunko_engine::attachments::CHUNK];
    loop {
        match reader.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => sink.write(buf.get(..n).unwrap_or_default())?,
            Err(err) => {
                tracing::error!(%err, "inflating a stored attachment failed");
                return Err(stream::Gone);
            }
        }
    }
}

/// Whether `Accept-Encoding` accepts gzip (by name or `*`, with a `q` above 0), as
/// mochiweb's `accepted_encodings` reads it.
fn accepts_gzip(headers: &HeaderMap) -> bool {
    let mut named = None;
    let mut any = false;
    for value in headers.get_all(header::ACCEPT_ENCODING).iter().filter_map(|v| v.to_str().ok()) {
        for item in value.split(',') {
            let mut params = item.split(';');
            let coding = params.next().unwrap_or_default().trim().to_ascii_lowercase();
            let q = params
                .filter_map(|p| p.trim().strip_prefix("q="))
                .find_map(|q| q.trim().parse::<f32>().ok())
                .unwrap_or(1.0);
            match coding.as_str() {
                "gzip" => named = Some(q > 0.0),
                "*" => any = q > 0.0,
                _ => {}
            }
        }
    }
    named.unwrap_or(any)
}

/// Several ranges: `206 multipart/byteranges`, one part per range, as CouchDB's
/// `chttpd_db:send_ranges_multipart` writes it (no line break after the closing
/// boundary).
fn byteranges(db: Arc<Database>, meta: AttMeta, ranges: Vec<(u64, u64)>) -> Response {
    let boundary = hex::encode(rand::Rng::random::<[u8; 16]>(&mut rand::rng()));
    let content_type = format!("multipart/byteranges; boundary=\"{boundary}\"");
    let status = StatusCode::PARTIAL_CONTENT;
    let response = stream::response(status, "multipart/byteranges", move |sink| {
        sink.write(format!("--{boundary}").as_bytes())?;
        for (first, last) in ranges {
            let head = format!(
                "\r\nContent-Type: {}\r\nContent-Range: bytes {first}-{last}/{}\r\n\r\n",
                meta.content_type, meta.length
            );
            sink.write(head.as_bytes())?;
            write_slice(sink, &db, &meta.md5, first, last + 1)?;
            sink.write(format!("\r\n--{boundary}").as_bytes())?;
        }
        sink.write(b"--")
    });
    with_headers(response, &[("content-type", &content_type)])
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

/// A `Range` header CouchDB answers `416` to.
#[derive(Debug, PartialEq, Eq)]
struct Unsatisfiable;

/// Ranges CouchDB serves at most in one `multipart/byteranges` answer (more get the
/// whole body).
const MAX_RANGES: usize = 9;

/// The byte ranges (first, last, inclusive) a `Range` header asks of a body of `length`
/// bytes, read as CouchDB does (mochiweb's `parse_range_request`, then
/// `chttpd_db:parse_ranges`): none (the whole body) when there is no header, it does not
/// parse, a range is `0-`, or there are more than [`MAX_RANGES`]; a last byte past the end
/// is the end; a range that ends before it starts is `416`.
fn ranges(headers: &HeaderMap, length: u64) -> Result<Vec<(u64, u64)>, Unsatisfiable> {
    let Some(spec) = headers.get(header::RANGE).and_then(|v| v.to_str().ok()) else {
        return Ok(Vec::new());
    };
    let Some(specs) = parse_range_header(spec) else { return Ok(Vec::new()) };
    let last_byte = length as i128 - 1;
    let mut out = Vec::new();
    for (first, last) in specs {
        let (first, last) = match (first, last) {
            (Some(0), None) | (None, None) => return Ok(Vec::new()),
            (Some(first), Some(last)) => (first as i128, (last as i128).min(last_byte)),
            (Some(first), None) => (first as i128, last_byte),
            (None, Some(suffix)) => ((length as i128 - suffix as i128).max(0), last_byte),
        };
        if last < first {
            return Err(Unsatisfiable);
        }
        out.push((first as u64, last as u64));
    }
    Ok(if out.len() > MAX_RANGES { Vec::new() } else { out })
}

/// `bytes=a-b, -n, a-` as `(first, last)` pairs; `None` when it does not parse.
fn parse_range_header(spec: &str) -> Option<Vec<(Option<u64>, Option<u64>)>> {
    let specs = spec.trim().strip_prefix("bytes=")?;
    let number = |s: &str| if s.is_empty() { Ok(None) } else { s.parse::<u64>().map(Some) };
    specs
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            let (a, b) = s.split_once('-')?;
            Some((number(a.trim()).ok()?, number(b.trim()).ok()?))
        })
        .collect()
}

/// How a document's attachments are shown: their data (`attachments=true`, of those
/// added after generation `since`: `atts_since`) and how they are stored
/// (`att_encoding_info=true`).
#[derive(Debug, Clone, Copy, Default)]
pub struct AttOpts {
    pub data: bool,
    pub since: u64,
    pub encoding: bool,
}

impl AttOpts {
    /// The data of every attachment.
    pub fn data() -> AttOpts {
        AttOpts { data: true, ..AttOpts::default() }
    }

    /// The options of an included document's (`_all_docs`, views, `_changes`): none
    /// unless `include_docs` (CouchDB reads them only then).
    pub fn included(include_docs: bool, p: &crate::params::Params) -> ApiResult<AttOpts> {
        Ok(AttOpts {
            data: include_docs && p.flag("attachments")?,
            since: 0,
            encoding: include_docs && p.flag("att_encoding_info")?,
        })
    }
}

/// Shows the attachments of a row's included document as `opts` asks (`_all_docs`,
/// view rows).
pub(crate) fn inline_included(
    db: &Database,
    doc: Option<&mut DocOut>,
    opts: AttOpts,
) -> bunko_engine::Result<()> {
    if let Some(doc) = doc {
        show(db, doc, opts).map_err(|e| {
            bunko_engine::Error::Corrupt(format!("attachment data: {}", e.parts().2))
        })?;
    }
    Ok(())
}

/// Replaces the stubs of `doc` by inline data (`attachments=true`): all of them, or with
/// `since` (the generation `atts_since` names), those added after it.
pub fn inline(db: &Database, doc: &mut DocOut, since: u64) -> ApiResult<()> {
    show(db, doc, AttOpts { data: true, since, encoding: false })
}

/// Shows the attachments of `doc` as `opts` asks: stubs, or data, followed by `encoding`
/// and `encoded_length` for those stored gzipped when asked (`couch_att:to_json`).
pub fn show(db: &Database, doc: &mut DocOut, opts: AttOpts) -> ApiResult<()> {
    if !opts.data && !opts.encoding {
        return Ok(());
    }
    let atts = of_body(&doc.body);
    if atts.is_empty() {
        return Ok(());
    }
    let Ok(Value::Object(mut body)) = serde_json::from_slice::<Value>(&doc.body) else {
        return Ok(());
    };
    let mut out = Map::new();
    for meta in atts {
        let mut value = match opts.data && meta.revpos > opts.since {
            true => with_data(db, &meta)?,
            false => meta.stub_json(),
        };
        if opts.encoding {
            add_encoding(&mut value, db.attachment_gzip(&meta.md5)?);
        }
        out.insert(meta.name.clone(), value);
    }
    body.insert("_attachments".to_string(), Value::Object(out));
    doc.body = serde_json::to_vec(&Value::Object(body)).unwrap_or_default();
    Ok(())
}

/// Appends `"encoding": "gzip"` and `encoded_length` to an attachment stored gzipped.
fn add_encoding(value: &mut Value, gzip_length: Option<u64>) {
    if let (Some(gzip_length), Value::Object(props)) = (gzip_length, value) {
        props.insert("encoding".to_string(), json!("gzip"));
        props.insert("encoded_length".to_string(), json!(gzip_length));
    }
}

/// Marks the attachments of `doc` added after generation `since` as `"follows": true`
/// (the others stay stubs), every one with its `encoding` when stored gzipped, and
/// returns those that follow, in order, with the length of their gzip if any: a multipart
/// answer sends them as stored (`chttpd_db:send_docs_multipart`).
pub fn follows(db: &Database, doc: &mut DocOut, since: u64) -> ApiResult<Vec<Following>> {
    let atts = of_body(&doc.body);
    let Ok(Value::Object(mut body)) = serde_json::from_slice::<Value>(&doc.body) else {
        return Ok(Vec::new());
    };
    if atts.is_empty() {
        return Ok(Vec::new());
    }
    let mut out = Map::new();
    let mut sent = Vec::new();
    for meta in atts {
        let gzip_length = db.attachment_gzip(&meta.md5)?;
        let mut value = if meta.revpos > since {
            let mut value = json!({
                "content_type": meta.content_type,
                "revpos": meta.revpos,
                "digest": att::digest_text(&meta.md5),
                "length": meta.length,
                "follows": true,
            });
            // A body stored as it came (written before Bunko stored gzip) has a gzip
            // digest that is not the MD5 of the bytes sent, which CouchDB checks
            // (`couch_util:check_md5`): left out, so the receiver digests them itself.
            if gzip_length.is_none() && att::compressible(&meta.content_type) {
                value.as_object_mut().map(|v| v.shift_remove("digest"));
            }
            sent.push(Following { meta: meta.clone(), gzip_length });
            value
        } else {
            meta.stub_json()
        };
        add_encoding(&mut value, gzip_length);
        out.insert(meta.name.clone(), value);
    }
    body.insert("_attachments".to_string(), Value::Object(out));
    doc.body = serde_json::to_vec(&Value::Object(body)).unwrap_or_default();
    Ok(sent)
}

/// An attachment whose bytes follow in a multipart answer, as stored: gzipped
/// (`gzip_length` bytes) or as they came.
pub struct Following {
    pub meta: AttMeta,
    pub gzip_length: Option<u64>,
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
    fn ranges_are_read_as_couchdb_reads_them() {
        let got = |spec: &str| ranges(&with_range(spec), 10);
        assert_eq!(ranges(&HeaderMap::new(), 10), Ok(vec![]));
        assert_eq!(got("bytes=2-4"), Ok(vec![(2, 4)]));
        assert_eq!(got("bytes=2-"), Ok(vec![(2, 9)]));
        assert_eq!(got("bytes=-3"), Ok(vec![(7, 9)]));
        assert_eq!(got("bytes=5-100"), Ok(vec![(5, 9)]));
        assert_eq!(got("bytes=0-"), Ok(vec![]));
        assert_eq!(got("bytes=10-"), Err(Unsatisfiable));
        assert_eq!(got("bytes=4-2"), Err(Unsatisfiable));
        assert_eq!(got("bytes=1-2, 4-5"), Ok(vec![(1, 2), (4, 5)]));
        assert_eq!(got("bytes=1-2,0-"), Ok(vec![]));
        assert_eq!(got("bytes=0-0,1-1,2-2,3-3,4-4,5-5,6-6,7-7,8-8,9-9"), Ok(vec![]));
        assert_eq!(got("items=1-2"), Ok(vec![]));
        assert_eq!(got("bytes=a-b"), Ok(vec![]));
    }
}
