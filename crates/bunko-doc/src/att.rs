//! Attachments as a client sends them in a document's `_attachments` (CouchDB's
//! `couch_att:from_json`): inline base64 `data`, or `stub: true` to keep the stored one.
//! Digests are CouchDB's: `md5-` followed by the base64 of the MD5 of the bytes CouchDB
//! stores, which for compressible types ([`compressible`]) are the bytes gzipped by zlib at
//! level 8 (`couch_db:with_stream`). Bunko stores the bytes as sent but digests them the
//! same way ([`digest`]), so digests and revision ids agree with CouchDB's.

use std::io::{Read, Write};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use flate2::{Compression, GzBuilder};
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
    /// `follows: true`: the data comes in a later part of a `multipart/related` body,
    /// gzipped when it says `"encoding": "gzip"` (as CouchDB's replicator sends the
    /// compressible attachments it stores gzipped).
    Follows { gzip: bool },
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
            AttBody::Follows { gzip: text("encoding") == Some("gzip") }
        } else {
            let bytes = text("data")
                .and_then(|b64| STANDARD.decode(b64.as_bytes()).ok())
                .ok_or_else(|| Error::BadRequest(format!("Invalid attachment data for {name}")))?;
            let md5 = digest(&content_type, &bytes);
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

/// CouchDB's default `[attachments] compressible_types`.
const COMPRESSIBLE_TYPES: [&str; 4] =
    ["text/*", "application/javascript", "application/json", "application/xml"];

/// CouchDB's default `[attachments] compression_level`.
const COMPRESSION_LEVEL: u32 = 8;

/// Whether CouchDB stores attachments of `content_type` gzipped: one of
/// `COMPRESSIBLE_TYPES` (`*` matches anything), ignoring case, surrounding blanks and
/// parameters after `;` (`couch_db:compressible_att_type`).
pub fn compressible(content_type: &str) -> bool {
    let mime = content_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    COMPRESSIBLE_TYPES.iter().any(|pattern| match pattern.split_once('*') {
        Some((head, tail)) => {
            mime.len() >= head.len() + tail.len() && mime.starts_with(head) && mime.ends_with(tail)
        }
        None => mime == *pattern,
    })
}

/// The digest CouchDB gives `bytes` of `content_type` sent as they are: their MD5, or for a
/// compressible type the MD5 of their gzip as CouchDB's zlib writes it (level 8, no name,
/// no time, OS byte 3), byte for byte.
pub fn digest(content_type: &str, bytes: &[u8]) -> [u8; 16] {
    let mut digester = Digester::new(content_type);
    digester.update(bytes);
    digester.finish()
}

/// [`digest`] of bytes that arrive in pieces (a streamed upload): zlib's output does not
/// depend on how its input is split, so the digest is the same.
pub struct Digester(Hashing);

enum Hashing {
    Plain(Md5),
    Gzip(Box<flate2::write::GzEncoder<Md5Writer>>),
}

impl Digester {
    pub fn new(content_type: &str) -> Self {
        Digester(if compressible(content_type) {
            let gz = GzBuilder::new()
                .operating_system(3)
                .write(Md5Writer(Md5::new()), Compression::new(COMPRESSION_LEVEL));
            Hashing::Gzip(Box::new(gz))
        } else {
            Hashing::Plain(Md5::new())
        })
    }

    pub fn update(&mut self, bytes: &[u8]) {
        match &mut self.0 {
            Hashing::Plain(md5) => md5.update(bytes),
            // Writing into a hasher cannot fail.
            Hashing::Gzip(gz) => {
                let _ = gz.write_all(bytes);
            }
        }
    }

    pub fn finish(self) -> [u8; 16] {
        match self.0 {
            Hashing::Plain(md5) => md5.finalize().into(),
            Hashing::Gzip(gz) => match gz.finish() {
                Ok(hasher) => hasher.0.finalize().into(),
                // Unreachable: the writer is a hasher.
                Err(_) => [0; 16],
            },
        }
    }
}

/// Streams compressed output into an MD5 (no buffer of the gzip).
struct Md5Writer(Md5);

impl Write for Md5Writer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A `follows` part sent gzipped: the bytes it stands for (at most `max + 1` of them, so an
/// oversized one fails the size check without being inflated whole) and its digest, which
/// CouchDB takes from the gzipped bytes as they came.
pub fn from_gzip(name: &str, encoded: &[u8], max: u64) -> Result<AttBody> {
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(encoded)
        .take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|_| Error::BadRequest(format!("Invalid gzip data for attachment {name}")))?;
    Ok(AttBody::Data { bytes, md5: md5(encoded) })
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
        // CouchDB 3.4.3 gzips text/plain: the MD5 of that gzip, as it shows it.
        assert_eq!(digest_text(md5), "md5-iMaiC8wqiFlD2NjLTemvCQ==");
        assert_eq!(atts[1].content_type, DEFAULT_TYPE);
        assert!(matches!(atts[1].body, AttBody::Stub { digest: None, .. }));
        let bad = json!({"x": {"data": "not base64!"}});
        let Value::Object(bad) = bad else { unreachable!() };
        let err = parse(bad).err().map(|e| e.to_string());
        assert_eq!(err.as_deref(), Some("Invalid attachment data for x"));
        Ok(())
    }

    /// A body digested in pieces, as a streamed upload is, gets the digest of the whole.
    #[test]
    fn a_body_digested_in_pieces_has_the_digest_of_the_whole() {
        let body: Vec<u8> = (0..200_000u32).map(|i| (i % 97) as u8).collect();
        for content_type in ["text/plain", "image/png"] {
            let mut digester = Digester::new(content_type);
            for piece in body.chunks(4093) {
                digester.update(piece);
            }
            assert_eq!(digester.finish(), digest(content_type, &body), "{content_type}");
        }
        assert_ne!(digest("text/plain", &body), md5(&body));
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
        for (mime, gzipped) in [
            ("text/html", true),
            (" application/xml ", true),
            ("application/javascript;x=1", true),
            ("application/jsonx", false),
            ("image/svg+xml", false),
            ("texts/plain", false),
            ("", false),
        ] {
            assert_eq!(compressible(mime), gzipped, "{mime}");
        }
    }

    #[test]
    fn gzipped_follows_parts_are_inflated_and_keep_the_senders_digest() -> Result<()> {
        let mut gz = GzBuilder::new().write(Vec::new(), Compression::new(6));
        gz.write_all(b"hello hello hello").map_err(|e| Error::BadRequest(e.to_string()))?;
        let encoded = gz.finish().map_err(|e| Error::BadRequest(e.to_string()))?;
        let AttBody::Data { bytes, md5: sum } = from_gzip("a.txt", &encoded, 100)? else {
            panic!("data")
        };
        assert_eq!((bytes.as_slice(), sum), (&b"hello hello hello"[..], md5(&encoded)));
        let AttBody::Data { bytes, .. } = from_gzip("a.txt", &encoded, 4)? else { panic!() };
        assert_eq!(bytes.len(), 5, "inflated only past the limit");
        let err = from_gzip("a.txt", b"plain", 100).err().map(|e| e.to_string());
        assert_eq!(err.as_deref(), Some("Invalid gzip data for attachment a.txt"));
        Ok(())
    }
}
