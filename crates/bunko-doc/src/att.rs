//! Attachments as a client sends them in a document's `_attachments` (CouchDB's
//! `couch_att:from_json`): inline base64 `data`, or `stub: true` to keep the stored one.
//! Digests are CouchDB's: `md5-` followed by the base64 of the MD5 of the stored bytes.

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
    /// Inline `data`, decoded, with its MD5.
    Data { bytes: Vec<u8>, md5: [u8; 16] },
    /// `stub: true`: the stored attachment of that name is kept; a replicated stub also
    /// names its `digest` and `length`.
    Stub { digest: Option<[u8; 16]>, length: Option<u64> },
    /// `follows: true`: the data comes in a later part of a `multipart/related` body.
    Follows,
    /// Data received as a stream and stored already under the upload's `token` (the
    /// engine's `upload` module), with its MD5 and length.
    Staged { token: [u8; 16], md5: [u8; 16], length: u64 },
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
            AttBody::Follows
        } else {
            let bytes = text("data")
                .and_then(|b64| STANDARD.decode(b64.as_bytes()).ok())
                .ok_or_else(|| Error::BadRequest(format!("Invalid attachment data for {name}")))?;
            let md5 = md5(&bytes);
            AttBody::Data { bytes, md5 }
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
    fn inline_data_is_decoded_with_couchdbs_digest() -> Result<()> {
        let map = json!({"a.txt": {"content_type": "text/plain", "data": "aGVsbG8="},
                         "b": {"stub": true}});
        let Value::Object(map) = map else { unreachable!() };
        let atts = parse(map)?;
        assert_eq!(atts[0].name, "a.txt");
        let AttBody::Data { bytes, md5 } = &atts[0].body else { panic!("data") };
        assert_eq!(bytes, b"hello");
        // md5("hello") in base64, as CouchDB shows it.
        assert_eq!(digest_text(md5), "md5-XUFAKrxLKna5cZ2REBfFkg==");
        assert_eq!(atts[1].content_type, DEFAULT_TYPE);
        assert!(matches!(atts[1].body, AttBody::Stub { digest: None, .. }));
        let bad = json!({"x": {"data": "not base64!"}});
        let Value::Object(bad) = bad else { unreachable!() };
        let err = parse(bad).err().map(|e| e.to_string());
        assert_eq!(err.as_deref(), Some("Invalid attachment data for x"));
        Ok(())
    }
}
