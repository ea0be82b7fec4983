//! Attachments the source stores gzipped travel gzipped, as CouchDB's replicator carries
//! them: inline (base64) attachments are always inflated, so a document with such an
//! attachment (`encoding: "gzip"` in the `att_encoding_info` of the fetch) is written with
//! its own `PUT ?new_edits=false` as `multipart/related` (`couch_doc:doc_to_multi_part_stream`),
//! each gzipped attachment a part of the bytes the source sends to a client that accepts
//! gzip, marked `"follows": true, "encoding": "gzip"`. The target stores them as they came,
//! whatever its own `[attachments]` settings, so digests and `_rev`s stay the source's.

use reqwest::header::{ACCEPT, ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_TYPE, HeaderValue};
use reqwest::{Method, StatusCode};
use serde_json::{Map, Value};

use crate::client::{Db, attachment_path, doc_path};
use crate::error::{Error, Result};

/// Whether `doc` (as fetched) has an attachment the source stores gzipped.
pub fn has_gzip_attachment(doc: &Value) -> bool {
    attachments(doc).is_some_and(|atts| atts.values().any(is_gzip_inline))
}

fn attachments(doc: &Value) -> Option<&Map<String, Value>> {
    doc.get("_attachments")?.as_object()
}

fn is_gzip_inline(att: &Value) -> bool {
    att.get("encoding").and_then(Value::as_str) == Some("gzip") && att.get("data").is_some()
}

impl Db {
    /// The bytes of an attachment as this (source) database keeps them: `Some` when it
    /// sends them gzipped to a client that accepts gzip.
    async fn encoded_attachment(&self, id: &str, rev: &str, name: &str) -> Result<Option<Vec<u8>>> {
        let url = format!("{}?rev={rev}", self.ep.join(&attachment_path(id, name)));
        let mut req = self.request(Method::GET, &url).build()?;
        req.headers_mut().insert(ACCEPT, HeaderValue::from_static("*/*"));
        req.headers_mut().insert(ACCEPT_ENCODING, HeaderValue::from_static("gzip"));
        let resp = self.client().execute(req).await?;
        if !resp.status().is_success() {
            let status = resp.status().as_u16();
            let body = serde_json::from_slice(&resp.bytes().await?).unwrap_or(Value::Null);
            return Err(Error::Http { status, body, url });
        }
        let gzipped = resp.headers().get(CONTENT_ENCODING).is_some_and(|v| v == "gzip");
        let bytes = resp.bytes().await?;
        Ok(gzipped.then(|| bytes.to_vec()))
    }

    /// Writes `doc` (fetched from `src`) to this (target) database with its gzipped
    /// attachments as they are stored at the source; returns whether the target refused it.
    pub async fn put_encoded(&self, src: &Db, mut doc: Value) -> Result<bool> {
        let id = doc.get("_id").and_then(Value::as_str).unwrap_or_default().to_string();
        let rev = doc.get("_rev").and_then(Value::as_str).unwrap_or_default().to_string();
        let mut parts = Vec::new();
        if let Some(atts) = doc.get_mut("_attachments").and_then(Value::as_object_mut) {
            for (name, att) in atts.iter_mut() {
                if !is_gzip_inline(att) {
                    continue;
                }
                let Some(att) = att.as_object_mut() else { continue };
                let Some(bytes) = src.encoded_attachment(&id, &rev, name).await? else {
                    // Sent inflated after all: it goes inline, as the target encodes it.
                    att.remove("encoding");
                    att.remove("encoded_length");
                    continue;
                };
                att.remove("data");
                att.insert("follows".into(), Value::Bool(true));
                att.insert("encoded_length".into(), bytes.len().into());
                let ctype = att.get("content_type").and_then(Value::as_str).unwrap_or_default();
                parts.push((name.clone(), ctype.to_string(), bytes));
            }
        }
        let boundary = hex::encode(rand::random::<[u8; 16]>());
        let body = related_body(&boundary, &doc, &parts);
        let url = format!("{}?new_edits=false", self.ep.join(&doc_path(&id)));
        let ctype = format!("multipart/related; boundary=\"{boundary}\"");
        let build =
            || self.request(Method::PUT, &url).header(CONTENT_TYPE, &ctype).body(body.clone());
        let (status, answer) = self.send(build).await?;
        match status {
            s if s.is_success() => Ok(false),
            StatusCode::FORBIDDEN | StatusCode::CONFLICT => Ok(true),
            s => Err(Error::Http { status: s.as_u16(), body: answer, url }),
        }
    }
}

/// The document's JSON, then one part per attachment that follows, in the order of
/// `_attachments` (which `parts` keeps).
fn related_body(boundary: &str, doc: &Value, parts: &[(String, String, Vec<u8>)]) -> Vec<u8> {
    let mut body = format!("--{boundary}\r\nContent-Type: application/json\r\n\r\n").into_bytes();
    body.extend(doc.to_string().into_bytes());
    for (name, ctype, bytes) in parts {
        let filename = serde_json::to_string(name).unwrap_or_default();
        body.extend(
            format!(
                "\r\n--{boundary}\r\nContent-Disposition: attachment; filename={filename}\r\n\
                 Content-Type: {ctype}\r\nContent-Encoding: gzip\r\nContent-Length: {}\r\n\r\n",
                bytes.len()
            )
            .into_bytes(),
        );
        body.extend(bytes);
    }
    body.extend(format!("\r\n--{boundary}--").into_bytes());
    body
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_inline_gzipped_attachments_go_as_parts() {
        let gz = json!({"_attachments": {"a": {"data": "eA==", "encoding": "gzip"}}});
        assert!(has_gzip_attachment(&gz));
        let plain = json!({"_attachments": {"a": {"data": "eA=="}}});
        assert!(!has_gzip_attachment(&plain));
        assert!(!has_gzip_attachment(&json!({"_id": "x"})));
    }

    #[test]
    fn the_related_body_has_the_json_then_each_part() {
        let doc = json!({"_id": "d"});
        let body = related_body("B", &doc, &[("a".into(), "text/plain".into(), vec![1, 2])]);
        let text = String::from_utf8_lossy(&body);
        assert!(text.starts_with(
            "--B\r\nContent-Type: application/json\r\n\r\n{\"_id\":\"d\"}\r\n--B\r\n"
        ));
        assert!(
            text.contains("filename=\"a\"\r\nContent-Type: text/plain\r\nContent-Encoding: gzip")
        );
        assert!(body.ends_with(b"\x01\x02\r\n--B--"));
    }
}
