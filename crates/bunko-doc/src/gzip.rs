//! Gzip storage of attachments, as CouchDB 3.4 stores them (`couch_db:with_stream`,
//! `couch_stream`): an attachment sent as it is whose type is one of `[attachments]
//! compressible_types` is stored gzipped by zlib at `[attachments] compression_level`
//! (8; 0 stores nothing gzipped), and its digest is the MD5 of the gzipped bytes.
//!
//! - [`Policy`] is those two settings, read at run time.
//! - [`Encoder`] turns the bytes of a body, as they arrive, into the bytes to store and
//!   their digest, so a streamed upload never holds the whole body.
//! - [`decoder`] reads a stored gzip body back as the bytes it stands for.

use std::io::{Read, Write};

use flate2::{Compression, GzBuilder};
use md5::{Digest, Md5};

/// CouchDB's default `[attachments] compressible_types`.
pub const DEFAULT_TYPES: &str = "text/*, application/javascript, application/json, application/xml";

/// CouchDB's default `[attachments] compression_level`.
pub const DEFAULT_LEVEL: u32 = 8;

/// Which attachments are stored gzipped, and how hard zlib works on them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    types: Vec<String>,
    level: u32,
}

impl Default for Policy {
    fn default() -> Self {
        Policy::new(None, None)
    }
}

impl Policy {
    /// The policy of the settings' texts (CouchDB's defaults where absent; a level that is
    /// not a number is the default, one outside 1–9 stores nothing gzipped, as
    /// `couch_stream:gzip_init`).
    pub fn new(types: Option<&str>, level: Option<&str>) -> Policy {
        let types = types.unwrap_or(DEFAULT_TYPES);
        Policy {
            types: types
                .split(',')
                .map(|t| t.trim().to_ascii_lowercase())
                .filter(|t| !t.is_empty())
                .collect(),
            level: level.and_then(|l| l.trim().parse().ok()).unwrap_or(DEFAULT_LEVEL),
        }
    }

    /// Whether an attachment of `content_type` sent as it is is stored gzipped
    /// (`couch_db:compressible_att_type`: `*` matches anything, case and parameters after
    /// `;` ignored).
    pub fn gzips(&self, content_type: &str) -> bool {
        let mime = content_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
        (1..=9).contains(&self.level) && self.types.iter().any(|t| glob(t, &mime))
    }
}

/// Whether `text` matches `pattern`, whose `*` stand for any run of characters.
fn glob(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = text.strip_prefix(first) else { return false };
    let mut parts: Vec<&str> = parts.collect();
    let Some(last) = parts.pop() else { return rest.is_empty() };
    for part in parts {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// A body being stored: the bytes to store come out of [`Encoder::output`] as the body
/// goes in through [`Encoder::write`].
pub struct Encoder {
    kind: Kind,
    length: u64,
}

enum Kind {
    Plain(Out),
    Gzip(Box<flate2::write::GzEncoder<Out>>),
}

/// The stored bytes not yet taken, digested and counted as they are produced.
struct Out {
    pending: Vec<u8>,
    md5: Md5,
    length: u64,
}

impl Write for Out {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.md5.update(buf);
        self.length += buf.len() as u64;
        self.pending.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A stored body: its digest, its length, and the length of its gzip if stored gzipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Encoded {
    pub md5: [u8; 16],
    pub length: u64,
    pub gzip_length: Option<u64>,
}

impl Encoder {
    /// Stores a body of `content_type` as `policy` says.
    pub fn new(policy: &Policy, content_type: &str) -> Encoder {
        let out = Out { pending: Vec::new(), md5: Md5::new(), length: 0 };
        let kind = if policy.gzips(content_type) {
            // As CouchDB's zlib writes it: no name, no time, OS byte 3.
            let gz =
                GzBuilder::new().operating_system(3).write(out, Compression::new(policy.level));
            Kind::Gzip(Box::new(gz))
        } else {
            Kind::Plain(out)
        };
        Encoder { kind, length: 0 }
    }

    /// Takes the next bytes of the body.
    pub fn write(&mut self, bytes: &[u8]) {
        self.length += bytes.len() as u64;
        match &mut self.kind {
            Kind::Plain(out) => {
                let _ = out.write_all(bytes);
            }
            // Writing into memory cannot fail.
            Kind::Gzip(gz) => {
                let _ = gz.write_all(bytes);
            }
        }
    }

    /// The bytes to store produced so far and not yet taken (the caller drains them).
    pub fn output(&mut self) -> &mut Vec<u8> {
        match &mut self.kind {
            Kind::Plain(out) => &mut out.pending,
            Kind::Gzip(gz) => &mut gz.get_mut().pending,
        }
    }

    /// The body is complete: what it was stored as, and the last bytes to store.
    pub fn finish(self) -> (Encoded, Vec<u8>) {
        let (out, gzip) = match self.kind {
            Kind::Plain(out) => (out, false),
            Kind::Gzip(gz) => match gz.finish() {
                Ok(out) => (out, true),
                // Unreachable: the writer is memory.
                Err(_) => (Out { pending: Vec::new(), md5: Md5::new(), length: 0 }, true),
            },
        };
        let encoded = Encoded {
            md5: out.md5.finalize().into(),
            length: self.length,
            gzip_length: gzip.then_some(out.length),
        };
        (encoded, out.pending)
    }
}

/// `bytes` of `content_type` as `policy` stores them, with their digest.
pub fn encode(policy: &Policy, content_type: &str, bytes: &[u8]) -> (Encoded, Vec<u8>) {
    let mut encoder = Encoder::new(policy, content_type);
    encoder.write(bytes);
    let mut stored = std::mem::take(encoder.output());
    let (encoded, tail) = encoder.finish();
    stored.extend_from_slice(&tail);
    (encoded, stored)
}

/// Reads a stored gzip body (one gzip member or several) as the bytes it stands for.
pub fn decoder<R: Read>(stored: R) -> impl Read {
    flate2::read::MultiGzDecoder::new(stored)
}

/// The length of the bytes `encoded` (a gzip stream) stands for, counting at most
/// `max + 1` of them; `None` when it is not gzip.
pub fn decoded_length(encoded: &[u8], max: u64) -> Option<u64> {
    std::io::copy(&mut decoder(encoded).take(max.saturating_add(1)), &mut std::io::sink()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_reads_couchdbs_settings() {
        let default = Policy::default();
        for (mime, gzipped) in [
            ("text/plain", true),
            ("Text/HTML; charset=utf-8", true),
            (" application/xml ", true),
            ("application/javascript;x=1", true),
            ("application/jsonx", false),
            ("image/svg+xml", false),
            ("texts/plain", false),
            ("", false),
        ] {
            assert_eq!(default.gzips(mime), gzipped, "{mime}");
        }
        let only_plain = Policy::new(Some("text/plain"), Some("8"));
        assert!(only_plain.gzips("text/plain") && !only_plain.gzips("text/html"));
        assert!(!Policy::new(None, Some("0")).gzips("text/plain"));
        assert!(Policy::new(Some("*/*xml*"), None).gzips("image/svg+xml"));
        assert!(!Policy::new(Some(""), None).gzips("text/plain"));
    }

    #[test]
    fn a_body_encoded_in_pieces_is_the_body_encoded_whole() {
        let body: Vec<u8> = (0..200_000u32).map(|i| (i % 97) as u8).collect();
        let policy = Policy::default();
        for content_type in ["text/plain", "image/png"] {
            let mut encoder = Encoder::new(&policy, content_type);
            let mut stored = Vec::new();
            for piece in body.chunks(4093) {
                encoder.write(piece);
                stored.append(encoder.output());
            }
            let (encoded, tail) = encoder.finish();
            stored.extend_from_slice(&tail);
            assert_eq!((encoded, &stored), (encode(&policy, content_type, &body).0, &stored));
            let mut back = Vec::new();
            match encoded.gzip_length {
                Some(length) => {
                    assert_eq!(length, stored.len() as u64);
                    decoder(stored.as_slice()).read_to_end(&mut back).expect("gzip");
                }
                None => back = stored,
            }
            assert_eq!(back, body, "{content_type}");
            assert_eq!(encoded.length, body.len() as u64);
        }
    }

    #[test]
    fn decoded_lengths_stop_past_the_limit() {
        let (_, stored) = encode(&Policy::default(), "text/plain", &[b'x'; 1000]);
        assert_eq!(decoded_length(&stored, 5000), Some(1000));
        assert_eq!(decoded_length(&stored, 10), Some(11));
        assert_eq!(decoded_length(b"plain", 10), None);
    }
}
