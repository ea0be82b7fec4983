//! CouchDB's multipart bodies, as its replicator and PouchDB use them:
//! - **`multipart/related` uploads** (`PUT /{db}/{doc}`): the document's JSON first, its
//!   attachments marked `"follows": true`, then one part per such attachment, in the
//!   order they appear in `_attachments` (`couch_doc:doc_from_multi_part_stream`). The body
//!   is read whole (up to `max_http_request_size`) and parsed with `multer`, which needs
//!   at least one header line per part (CouchDB and PouchDB always send some).
//! - **`multipart/mixed` answers** to `GET /{db}/{doc}?open_revs=…` with
//!   `Accept: multipart/mixed` (`chttpd_db:send_docs_multipart`): one part per revision,
//!   plain JSON, or a nested `multipart/related` with the attachments' bytes streamed from
//!   their chunks, so memory does not grow with them.

use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use bunko_doc::att::{self, AttBody};
use bunko_doc::body::ParsedDoc;
use bunko_engine::Database;
use bunko_engine::read::{DocOut, OpenRev};
use std::sync::Arc;

use crate::error::{ApiError, ApiResult};
use crate::render::{self, DocOpts};
use crate::stream::{self, Gone, Sink};

/// Whether the request body is `multipart/related`.
pub fn is_related(headers: &HeaderMap) -> bool {
    content_type(headers).is_some_and(|t| t.to_ascii_lowercase().starts_with("multipart/related"))
}

fn content_type(headers: &HeaderMap) -> Option<&str> {
    headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok())
}

/// Splits a `multipart/related` body into the document's JSON and the attachment parts.
pub async fn read_related(headers: &HeaderMap, body: Bytes) -> ApiResult<(Bytes, Vec<Bytes>)> {
    let bad = |what: &str| ApiError::bad_request(format!("Invalid multipart/related body: {what}"));
    let boundary =
        boundary(content_type(headers).unwrap_or_default()).ok_or_else(|| bad("no boundary"))?;
    // CouchDB ends a body at the closing `--boundary--` without a line break, which multer
    // reads as truncated.
    let body =
        if body.ends_with(b"\r\n") { body } else { Bytes::from([body.as_ref(), b"\r\n"].concat()) };
    let stream = futures::stream::once(async move { Ok::<_, std::io::Error>(body) });
    let mut multipart = multer::Multipart::new(stream, boundary);
    let mut parts = Vec::new();
    while let Some(field) = multipart.next_field().await.map_err(|e| bad(&e.to_string()))? {
        parts.push(field.bytes().await.map_err(|e| bad(&e.to_string()))?);
    }
    if parts.is_empty() {
        return Err(bad("no document part"));
    }
    let json = parts.remove(0);
    Ok((json, parts))
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

/// Gives each `follows` attachment of `doc` the next part's bytes, in order.
pub fn fill_follows(doc: &mut ParsedDoc, parts: Vec<Bytes>) -> ApiResult<()> {
    let mut parts = parts.into_iter();
    for att in doc.attachments.iter_mut().flatten() {
        if att.body != AttBody::Follows {
            continue;
        }
        let bytes = parts.next().ok_or_else(|| {
            ApiError::bad_request(format!("No multipart part for attachment {}", att.name))
        })?;
        let md5 = att::md5(&bytes);
        att.body = AttBody::Data { bytes: Vec::from(bytes), md5 };
    }
    Ok(())
}

/// Whether the client asked for `multipart/mixed` (as CouchDB's replicator does).
pub fn accepts_mixed(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.to_ascii_lowercase().contains("multipart/mixed"))
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
                    let atts = crate::attachment::follows(&mut doc, since);
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
    atts: &[bunko_engine::attachments::AttMeta],
    boundary: &str,
) -> Result<(), Gone> {
    let json = render::doc_json(doc, opts);
    if atts.is_empty() {
        sink.write(b"\r\nContent-Type: application/json\r\n\r\n")?;
        return sink.write(&json);
    }
    let head = format!(
        "\r\nContent-Type: multipart/related; boundary=\"{boundary}\"\r\n\r\n\
         --{boundary}\r\nContent-Type: application/json\r\n\r\n"
    );
    sink.write(head.as_bytes())?;
    sink.write(&json)?;
    sink.write(format!("\r\n--{boundary}").as_bytes())?;
    for att in atts {
        let head = format!(
            "\r\nContent-Disposition: attachment; filename=\"{}\"\r\nContent-Type: {}\r\n\
             Content-Length: {}\r\n\r\n",
            att.name, att.content_type, att.length
        );
        sink.write(head.as_bytes())?;
        for chunk in db.attachment_chunks(&att.md5) {
            sink.write(&chunk.map_err(|_| Gone)?)?;
        }
        sink.write(format!("\r\n--{boundary}").as_bytes())?;
    }
    sink.write(b"--")
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn parts(body: &'static [u8]) -> ApiResult<(Bytes, Vec<Bytes>)> {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("multipart/related; boundary=\"abc\""),
        );
        read_related(&headers, Bytes::from_static(body)).await
    }

    #[tokio::test]
    async fn couchdb_style_bodies_split_into_json_and_parts() -> ApiResult<()> {
        // CouchDB's replicator ends the body without a line break after `--abc--`.
        let (json, rest) = parts(b"--abc\r\nContent-Type: application/json\r\n\r\n{}\r\n--abc\r\nContent-Disposition: attachment; filename=\"a\"\r\n\r\nhi\r\n--abc--").await?;
        assert_eq!((json.as_ref(), rest.len()), (&b"{}"[..], 1));
        Ok(())
    }
}
