//! CouchDB's multipart bodies, as its replicator and PouchDB use them:
//! - **`multipart/related` uploads** (`PUT /{db}/{doc}`): the document's JSON first, its
//!   attachments marked `"follows": true`, then one part per such attachment, in the
//!   order they appear in `_attachments` (`couch_doc:doc_from_multi_part_stream`). The body
//!   is parsed as it arrives with `multer` (parts without any header line, which CouchDB
//!   accepts, get one first: `part_headers.rs`), each attachment part streamed into temporary
//!   storage (`receive.rs`), the whole counted against `max_http_request_size`.
//! - **`multipart/mixed` answers** to `GET /{db}/{doc}?open_revs=…` with
//!   `Accept: multipart/mixed` (`chttpd_db:send_docs_multipart`): one part per revision,
//!   plain JSON, or a nested `multipart/related` with the attachments' bytes streamed from
//!   their chunks, so memory does not grow with them. Bodies stored gzipped go as stored,
//!   with `Content-Encoding: gzip` (CouchDB's `encode_multipart_stream`).
//! - **`multipart/related` answers** to `GET /{db}/{doc}?attachments=true` with `Accept:
//!   multipart/related` (`chttpd_db:send_doc_efficiently`), with their `Content-Length`.

use axum::body::{Body, Bytes};
use axum::extract::{FromRequest, Request};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use bunko_doc::att::{self, AttBody};
use bunko_doc::body::ParsedDoc;
use bunko_engine::Database;
use bunko_engine::read::{DocOut, OpenRev};
use bunko_engine::upload::Uploaded;
use futures::StreamExt;
use std::sync::Arc;

use crate::State;
use crate::attachment::Following;
use crate::body::RawBody;
use crate::error::{ApiError, ApiResult};
use crate::receive::{OffRuntime, receive};
use crate::render::{self, DocOpts};
use crate::stream::{self, Gone, Sink};

/// A document write's body: JSON, read whole, or `multipart/related`, read as it arrives.
pub enum DocBody {
    Json(RawBody),
    Related { boundary: Option<String>, body: Body, limit: usize },
}

impl FromRequest<State> for DocBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &State) -> Result<Self, ApiError> {
        let related = content_type(req.headers())
            .filter(|t| t.to_ascii_lowercase().starts_with("multipart/related"));
        match related {
            Some(t) => Ok(DocBody::Related {
                boundary: boundary(t),
                limit: state.max_request_size.load(std::sync::atomic::Ordering::Relaxed),
                body: req.into_body(),
            }),
            None => Ok(DocBody::Json(RawBody::from_request(req, state).await?)),
        }
    }
}

impl DocBody {
    /// The body of a write that takes JSON only (`multipart/related` read whole).
    pub async fn into_raw(self) -> ApiResult<RawBody> {
        match self {
            DocBody::Json(raw) => Ok(raw),
            DocBody::Related { body, limit, .. } => {
                let bytes =
                    axum::body::to_bytes(body, limit).await.map_err(|_| ApiError::too_large())?;
                Ok(RawBody(bytes))
            }
        }
    }
}

fn content_type(headers: &HeaderMap) -> Option<&str> {
    headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok())
}

/// The document of a `multipart/related` body, parsed from its first part by `parse`, with
/// each `follows` attachment streamed from the next part into temporary storage
/// (`receive.rs`); the returned uploads must live until the write returns. The whole
/// body counts against `max_http_request_size` (`413 too_large`).
pub async fn read_related(
    db: &Database,
    boundary: Option<String>,
    body: Body,
    limit: usize,
    parse: impl FnOnce(&[u8]) -> ApiResult<ParsedDoc>,
) -> ApiResult<(ParsedDoc, Vec<OffRuntime<Uploaded>>)> {
    let boundary = boundary.ok_or_else(|| bad("no boundary"))?;
    // CouchDB ends a body at the closing `--boundary--` without a line break, which multer
    // reads as truncated; a line break after it is an epilogue, which multer ignores.
    let tail = futures::stream::once(async { Ok(Bytes::from_static(b"\r\n")) });
    let stream =
        crate::part_headers::with_part_headers(body.into_data_stream().chain(tail), &boundary);
    let limits = multer::SizeLimit::new().whole_stream(limit as u64);
    let constraints = multer::Constraints::new().size_limit(limits);
    let mut multipart = multer::Multipart::with_constraints(stream, boundary, constraints);
    let json = match multipart.next_field().await.map_err(multer_error)? {
        Some(field) => field.bytes().await.map_err(multer_error)?,
        None => return Err(bad("no document part")),
    };
    let mut doc = parse(&json)?;
    let mut uploads = Vec::new();
    for att in doc.attachments.iter_mut().flatten() {
        let AttBody::Follows { gzip } = att.body else { continue };
        let field = multipart.next_field().await.map_err(multer_error)?.ok_or_else(|| {
            ApiError::bad_request(format!("No multipart part for attachment {}", att.name))
        })?;
        if gzip {
            // CouchDB's replicator pushes the compressible attachments it stores gzipped:
            // kept so and digested as they came, as CouchDB does (inflated only to count
            // what they stand for, at most the request limit; the engine then checks
            // `max_attachment_size`).
            let encoded = field.bytes().await.map_err(multer_error)?;
            att.body = att::from_gzip(&att.name, encoded.to_vec(), limit as u64)?;
            continue;
        }
        let upload = db.upload(&att.name, &att.content_type);
        let uploaded = receive(upload, Box::pin(field), multer_error).await?;
        att.body = uploaded.body();
        uploads.push(uploaded);
    }
    Ok((doc, uploads))
}

fn bad(what: &str) -> ApiError {
    ApiError::bad_request(format!("Invalid multipart/related body: {what}"))
}

fn multer_error(err: multer::Error) -> ApiError {
    match err {
        multer::Error::StreamSizeExceeded { .. } => ApiError::too_large(),
        err => bad(&err.to_string()),
    }
}

/// The `boundary` parameter of a `multipart/…` content type (`multer::parse_boundary`
/// takes only `multipart/form-data`).
fn boundary(content_type: &str) -> Option<String> {
    content_type.split(';').skip(1).find_map(|param| {
        let (name, value) = param.split_once('=')?;
        let value = value.trim().trim_matches('"');
        (name.trim().eq_ignore_ascii_case("boundary") && !value.is_empty())
            .then(|| value.to_string())
    })
}

/// Whether the client's `Accept` takes `multipart/{kind}`: `mixed` (as CouchDB's
/// replicator asks for `open_revs`) or `related`. CouchDB also answers multipart to `*/*`
/// and to no `Accept` at all; Bunko does so only for clients that name a multipart type
/// besides `*/*` (as CouchDB's test suite sends `multipart/related,*/*`), and answers
/// JSON to the others.
pub fn accepts(headers: &HeaderMap, kind: &str) -> bool {
    let wanted = format!("multipart/{kind}");
    headers.get_all(header::ACCEPT).iter().filter_map(|v| v.to_str().ok()).any(|v| {
        let v = v.to_ascii_lowercase();
        v.contains(&wanted) || (v.contains("multipart/") && v.contains("*/*"))
    })
}

/// The `open_revs` answer as `multipart/mixed`; attachments added after generation
/// `since` follow their document in a nested `multipart/related` part.
pub fn open_revs_mixed(
    db: Arc<Database>,
    found: Vec<OpenRev>,
    opts: DocOpts,
    since: u64,
) -> Response {
    let boundary = || hex::encode(rand::Rng::random::<[u8; 16]>(&mut rand::rng()));
    let (outer, inner) = (boundary(), boundary());
    let content_type = format!("multipart/mixed; boundary=\"{outer}\"");
    let mut response = stream::response(StatusCode::OK, "multipart/mixed", move |sink| {
        sink.write(format!("--{outer}").as_bytes())?;
        for entry in found {
            match entry {
                OpenRev::Ok(mut doc) => {
                    let atts = crate::attachment::follows(&db, &mut doc, since).map_err(|err| {
                        tracing::error!(err = %err.parts().2, "open_revs answer failed");
                        Gone
                    })?;
                    write_doc(sink, &db, &doc, &opts, &atts, &inner)?;
                }
                OpenRev::Missing(rev) => {
                    let json = serde_json::json!({"missing": rev.to_string()});
                    sink.write(b"\r\nContent-Type: application/json; error=\"true\"\r\n\r\n")?;
                    sink.write(json.to_string().as_bytes())?;
                }
            }
            sink.write(format!("\r\n--{outer}").as_bytes())?;
        }
        sink.write(b"--")
    });
    if let Ok(value) = HeaderValue::from_str(&content_type) {
        response.headers_mut().insert(header::CONTENT_TYPE, value);
    }
    response
}

/// One revision's part: JSON alone, or `multipart/related` with its attachments.
fn write_doc(
    sink: &mut Sink,
    db: &Database,
    doc: &DocOut,
    opts: &DocOpts,
    atts: &[Following],
    boundary: &str,
) -> Result<(), Gone> {
    let json = render::doc_json(doc, opts);
    if atts.is_empty() {
        sink.write(b"\r\nContent-Type: application/json\r\n\r\n")?;
        return sink.write(&json);
    }
    let head = format!("\r\nContent-Type: multipart/related; boundary=\"{boundary}\"\r\n\r\n");
    sink.write(head.as_bytes())?;
    write_related(sink, db, &json, atts, boundary)
}

/// A `multipart/related` body: the document's JSON, then each attachment that follows it,
/// as stored (`couch_httpd_multipart:encode_multipart_stream`).
fn write_related(
    sink: &mut Sink,
    db: &Database,
    json: &[u8],
    atts: &[Following],
    boundary: &str,
) -> Result<(), Gone> {
    sink.write(format!("--{boundary}\r\nContent-Type: application/json\r\n\r\n").as_bytes())?;
    sink.write(json)?;
    sink.write(format!("\r\n--{boundary}").as_bytes())?;
    for att in atts {
        sink.write(part_head(att).as_bytes())?;
        for chunk in db.attachment_chunks(&att.meta.md5) {
            sink.write(&chunk.map_err(|_| Gone)?)?;
        }
        sink.write(format!("\r\n--{boundary}").as_bytes())?;
    }
    sink.write(b"--")
}

/// The head of an attachment's part (`couch_httpd_multipart:atts_to_mp`): the bytes as
/// stored, so a gzipped body says so.
fn part_head(Following { meta, gzip_length }: &Following) -> String {
    format!(
        "\r\nContent-Disposition: attachment; filename=\"{}\"\r\nContent-Type: {}\r\n\
         Content-Length: {}{}\r\n\r\n",
        meta.name,
        meta.content_type,
        gzip_length.unwrap_or(meta.length),
        if gzip_length.is_some() { "\r\nContent-Encoding: gzip" } else { "" },
    )
}

/// A document with attachments and `attachments=true` as `multipart/related`
/// (`chttpd_db:send_doc_efficiently`): the JSON with `follows` stubs, then the attachments
/// added after generation `since`, with the whole length in `Content-Length`.
pub fn doc_related(
    db: Arc<Database>,
    mut doc: DocOut,
    opts: &DocOpts,
    since: u64,
) -> ApiResult<Response> {
    let atts = crate::attachment::follows(&db, &mut doc, since)?;
    let boundary = hex::encode(rand::Rng::random::<[u8; 16]>(&mut rand::rng()));
    let json = render::doc_json(&doc, opts);
    // `--B`, the JSON part's head and the JSON, `\r\n--B`, the parts, `--`.
    let mut length = (json.len() + 2 * boundary.len() + 44) as u64;
    for att in &atts {
        let body = att.gzip_length.unwrap_or(att.meta.length);
        length += (part_head(att).len() + boundary.len() + 4) as u64 + body;
    }
    let content_type = format!("multipart/related; boundary=\"{boundary}\"");
    let mut response = stream::response(StatusCode::OK, "multipart/related", move |sink| {
        write_related(sink, &db, &json, &atts, &boundary)
    });
    for (name, value) in
        [(header::CONTENT_TYPE, content_type), (header::CONTENT_LENGTH, length.to_string())]
    {
        if let Ok(value) = HeaderValue::from_str(&value) {
            response.headers_mut().insert(name, value);
        }
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use bunko_engine::security::UserCtx;
    use bunko_engine::{Config, Engine};

    use super::*;

    #[tokio::test]
    async fn couchdb_style_bodies_give_the_document_and_stream_its_parts() -> ApiResult<()> {
        let store = std::sync::Arc::new(bunko_storage::Memory::new());
        let engine = Engine::open(store, Config::default())?;
        let db = engine.create_db(&UserCtx::admin("t"), "db", false)?;
        let limits = engine.config().limits;
        let parse = |json: &[u8]| Ok(bunko_doc::body::parse(json, &limits)?);
        // CouchDB's replicator ends the body without a line break after `--abc--`.
        let body = Body::from(
            &b"--abc\r\nContent-Type: application/json\r\n\r\n\
               {\"_attachments\":{\"a\":{\"follows\":true}}}\r\n--abc\r\n\
               Content-Disposition: attachment; filename=\"a\"\r\n\r\nhi\r\n--abc--"[..],
        );
        let boundary = Some("abc".to_string());
        let (doc, uploads) = read_related(&db, boundary, body, 1 << 20, parse).await?;
        assert_eq!(uploads.len(), 1);
        assert_eq!(uploads[0].encoded.md5, bunko_doc::att::md5(b"hi"));
        let atts = doc.attachments.unwrap_or_default();
        assert!(matches!(atts[0].body, AttBody::Staged { length: 2, .. }));
        Ok(())
    }
}
