//! Attachments as a client sends them in a document's `_attachments` (CouchDB's
//! `couch_att:from_json`): inline base64 `data`, or `stub: true` to keep the stored one.
//! Digests are CouchDB's: `md5-` followed by the base64 of the MD5 of the bytes stored,
//! which for compressible types are the bytes gzipped by zlib ([`crate::gzip`]), so
//! digests and revision ids agree with CouchDB's.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use md5::{Digest, Md5};
use serde_json::{Map, Value};

use crate::{Error, Result};

/// CouchDB's type for an attachment sent without `content_type`.
pub const DEFAULT_TYPE: &str = "application/octet-stream";

/// One attachment of a written document.
#[derive(Debug, Clone, PartialEq)]
pub struct AttIn {
    pub name: String,
    pub content_type: String,
    /// The `revpos` sent: kept by replicated writes, replaced by interactive ones.
    pub revpos: Option<u64>,
    pub body: AttBody,
}

/// What a written attachment carries.
#[derive(Debug, Clone, PartialEq)]
pub enum AttBody {
    /// Inline `data`, decoded (stored as the engine's [`crate::gzip::Policy`] says).
    Data { bytes: Vec<u8> },
    /// A `follows` part sent gzipped, kept as it came (its digest is theirs), standing
    /// for `length` bytes.
    Gzipped { bytes: Vec<u8>, length: u64 },
    /// `stub: true`: the stored attachment of that name is kept; a replicated stub also
    /// names its `digest` and `length`.
    Stub { digest: Option<[u8; 16]>, length: Option<u64> },
    /// `follows: true`: the data comes in a later part of a `multipart/related` body,
    /// gzipped when it says `"encoding": "gzip"` (as CouchDB's replicator sends the
    /// compressible attachments it stores gzipped).
    Follows { gzip: bool },
    /// Data received as a stream and stored already under the upload's `token` (the
    /// engine's `upload` module), with its digest, length, and the length of its gzip when
    /// stored gzipped.
    Staged { token: [u8; 16], md5: [u8; 16], length: u64, gzip_length: Option<u64> },
}

/// Parses `_attachments` in the order the client sent them.
pub fn parse(map: Map<String, Value>) -> Result<Vec<AttIn>> {
    let mut out = Vec::with_capacity(map.len());
    for (name, props) in map {
        validate_name(&name)?;
        let Value::Object(props) = props else {
            return Err(Error::BadRequest(format!("Invalid attachment stub for {name}")));
        };
        let text = |key: &str| props.get(key).and_then(Value::as_str);
        let content_type = text("content_type").unwrap_or(DEFAULT_TYPE).to_string();
        let body = if props.get("stub") == Some(&Value::Bool(true)) {
            AttBody::Stub {
                digest: text("digest").and_then(parse_digest),
                length: props.get("length").and_then(Value::as_u64),
            }
        } else if props.get("follows") == Some(&Value::Bool(true)) {
            AttBody::Follows { gzip: text("encoding") == Some("gzip") }
        } else {
            let bytes = text("data")
                .and_then(|b64| STANDARD.decode(b64.as_bytes()).ok())
                .ok_or_else(|| Error::BadRequest(format!("Invalid attachment data for {name}")))?;
            AttBody::Data { bytes }
        };
        let revpos = props.get("revpos").and_then(Value::as_u64);
        out.push(AttIn { name, content_type, revpos, body });
    }
    Ok(out)
}

/// CouchDB's rule for attachment names (`couch_httpd_db:validate_attachment_name`).
pub fn validate_name(name: &str) -> Result<()> {
    if name.starts_with('_') {
        return Err(Error::BadRequest(format!(
            "Attachment name '{name}' starts with prohibited character '_'"
        )));
    }
    if name.is_empty() {
        return Err(Error::BadRequest("Attachment name can't be empty".to_string()));
    }
    Ok(())
}

/// The MD5 of `bytes`.
pub fn md5(bytes: &[u8]) -> [u8; 16] {
    Md5::digest(bytes).into()
}

/// Whether CouchDB's default `[attachments]` settings store attachments of `content_type`
/// gzipped ([`crate::gzip::Policy`]).
pub fn compressible(content_type: &str) -> bool {
    crate::gzip::Policy::default().gzips(content_type)
}

/// The digest CouchDB's default settings give `bytes` of `content_type` sent as they are:
/// their MD5, or for a compressible type the MD5 of their gzip, byte for byte.
pub fn digest(content_type: &str, bytes: &[u8]) -> [u8; 16] {
    crate::gzip::encode(&crate::gzip::Policy::default(), content_type, bytes).0.md5
}

/// A `follows` part sent gzipped, kept as it came (CouchDB stores it so and digests the
/// gzipped bytes), with the length of what it stands for: inflated only to count it, and
/// no further than `max + 1` bytes, so an oversized one fails the size check.
pub fn from_gzip(name: &str, encoded: Vec<u8>, max: u64) -> Result<AttBody> {
    let length = crate::gzip::decoded_length(&encoded, max)
        .ok_or_else(|| Error::BadRequest(format!("Invalid gzip data for attachment {name}")))?;
    Ok(AttBody::Gzipped { bytes: encoded, length })
}

/// `md5-<base64>`, as `_attachments` shows a digest.
pub fn digest_text(md5: &[u8; 16]) -> String {
    format!("md5-{}", STANDARD.encode(md5))
}

/// The base64 of a digest alone (an attachment's `ETag`).
pub fn digest_base64(md5: &[u8; 16]) -> String {
    STANDARD.encode(md5)
}

/// Reads `md5-<base64>` back.
pub fn parse_digest(text: &str) -> Option<[u8; 16]> {
    let b64 = text.strip_prefix("md5-")?;
    STANDARD.decode(b64).ok()?.try_into().ok()
}

/// Base64 of attachment data (`attachments=true`).
pub fn encode_data(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn inline_data_is_decoded() -> Result<()> {
        let map = json!({"a.txt": {"content_type": "text/plain", "data": "aGVsbG8="},
                         "b": {"stub": true}});
        let Value::Object(map) = map else { unreachable!() };
        let atts = parse(map)?;
        assert_eq!(atts[0].name, "a.txt");
        let AttBody::Data { bytes } = &atts[0].body else { panic!("data") };
        assert_eq!(bytes, b"hello");
        assert_eq!(atts[1].content_type, DEFAULT_TYPE);
        assert!(matches!(atts[1].body, AttBody::Stub { digest: None, .. }));
        let bad = json!({"x": {"data": "not base64!"}});
        let Value::Object(bad) = bad else { unreachable!() };
        let err = parse(bad).err().map(|e| e.to_string());
        assert_eq!(err.as_deref(), Some("Invalid attachment data for x"));
        Ok(())
    }

    /// Digests CouchDB 3.4.3 gave these attachments (`PUT` inline and standalone).
    #[test]
    fn digests_are_couchdbs_gzip_digests_for_compressible_types() {
        let shown = |content_type: &str, bytes: &[u8]| digest_text(&digest(content_type, bytes));
        assert_eq!(shown("text/plain", b"hello"), "md5-iMaiC8wqiFlD2NjLTemvCQ==");
        assert_eq!(
            shown("Application/JSON; charset=utf-8", b"hello"),
            shown("text/plain", b"hello")
        );
        assert_eq!(shown("application/octet-stream", b"hello"), "md5-XUFAKrxLKna5cZ2REBfFkg==");
        assert_eq!(shown("image/png", b"hello"), "md5-XUFAKrxLKna5cZ2REBfFkg==");
        assert_eq!(shown("text/plain", "ドキュメント".as_bytes()), "md5-WHkHdayoL73fG0KgcJL5Jg==");
        // 146 kB that zlib compresses to 7.6 kB: long matches, many deflate blocks.
        let text: String =
            (0..3000).map(|i| format!("{i}: ドキュメント指向データベース\n")).collect();
        assert_eq!(shown("text/plain", text.as_bytes()), "md5-Mc6cylEVo64Upaoowqe62Q==");
    }

    #[test]
    fn gzipped_follows_parts_are_kept_as_sent_with_the_length_they_stand_for() -> Result<()> {
        let policy = crate::gzip::Policy::default();
        let (_, encoded) = crate::gzip::encode(&policy, "text/plain", b"hello hello hello");
        let kept = from_gzip("a.txt", encoded.clone(), 100)?;
        assert_eq!(kept, AttBody::Gzipped { bytes: encoded.clone(), length: 17 });
        let AttBody::Gzipped { length, .. } = from_gzip("a.txt", encoded, 4)? else { panic!() };
        assert_eq!(length, 5, "inflated only past the limit");
        let err = from_gzip("a.txt", b"plain".to_vec(), 100).err().map(|e| e.to_string());
        assert_eq!(err.as_deref(), Some("Invalid gzip data for attachment a.txt"));
        Ok(())
    }
}
