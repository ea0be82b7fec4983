//! Wire framing: the 16-byte message header, `OP_MSG` (kind 0 body and kind 1 document
//! sequences, the checksum flag), the legacy `OP_QUERY` that drivers use for their first
//! `hello`/`isMaster`, `OP_COMPRESSED` (zstd, snappy, zlib, noop) and the replies (`OP_MSG`,
//! and `OP_REPLY` to an `OP_QUERY`). BSON itself is the `bson` crate's.
//!
//! Reading checks every length against the bytes present, so a malformed message is an
//! error, never a panic.

use std::io::{Read as _, Write as _};

use bson::raw::{CStr, RawBsonRef};
use bson::{Bson, Document, RawArrayBuf, RawBson, RawDocument, RawDocumentBuf};

use crate::error::MongoError;

pub const OP_REPLY: i32 = 1;
pub const OP_QUERY: i32 = 2004;
pub const OP_COMPRESSED: i32 = 2012;
pub const OP_MSG: i32 = 2013;

/// `OP_MSG` flag bits.
pub const CHECKSUM_PRESENT: u32 = 1;
pub const MORE_TO_COME: u32 = 1 << 1;
pub const EXHAUST_ALLOWED: u32 = 1 << 16;

/// The largest message accepted and announced (`maxMessageSizeBytes`).
pub const MAX_MESSAGE_SIZE: usize = 48_000_000;
/// The largest document accepted and announced (`maxBsonObjectSize`).
pub const MAX_BSON_SIZE: usize = 16 * 1024 * 1024;
/// The deepest nesting a message may hold (MongoDB's default BSON depth limit); checked
/// before a document is decoded, since decoding recurses.
pub const MAX_DEPTH: usize = 200;

/// Room a command body may take beyond one maximal document (MongoDB's
/// `BSONObjMaxInternalSize`).
pub const MAX_COMMAND_SIZE: usize = MAX_BSON_SIZE + 16 * 1024;

/// A message header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub length: usize,
    pub request_id: i32,
    pub response_to: i32,
    pub op_code: i32,
}

impl Header {
    pub const SIZE: usize = 16;

    /// Parses a header; a length below the header's own size or above the limit is an
    /// error (the caller then skips the message's bytes).
    pub fn parse(bytes: &[u8; 16]) -> Header {
        let word =
            |i: usize| i32::from_le_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
        Header {
            length: usize::try_from(word(0)).unwrap_or(0),
            request_id: word(4),
            response_to: word(8),
            op_code: word(12),
        }
    }
}

/// A compressor of `OP_COMPRESSED`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compressor {
    Noop,
    Snappy,
    Zlib,
    Zstd,
}

impl Compressor {
    /// The names Bunko offers in `hello`, in its order of preference.
    pub const OFFERED: [&'static str; 3] = ["zstd", "snappy", "zlib"];

    pub fn id(self) -> u8 {
        match self {
            Self::Noop => 0,
            Self::Snappy => 1,
            Self::Zlib => 2,
            Self::Zstd => 3,
        }
    }

    fn from_id(id: u8) -> Result<Self, MongoError> {
        match id {
            0 => Ok(Self::Noop),
            1 => Ok(Self::Snappy),
            2 => Ok(Self::Zlib),
            3 => Ok(Self::Zstd),
            other => Err(MongoError::bad_value(format!("unsupported compressor id {other}"))),
        }
    }

    fn compress(self, data: &[u8]) -> Result<Vec<u8>, MongoError> {
        let fail = |e: String| MongoError::internal(format!("compression failed: {e}"));
        match self {
            Self::Noop => Ok(data.to_vec()),
            Self::Snappy => {
                snap::raw::Encoder::new().compress_vec(data).map_err(|e| fail(e.to_string()))
            }
            Self::Zlib => {
                let mut out = flate2::write::ZlibEncoder::new(
                    Vec::with_capacity(data.len() / 2),
                    flate2::Compression::default(),
                );
                out.write_all(data).and_then(|()| out.finish()).map_err(|e| fail(e.to_string()))
            }
            Self::Zstd => zstd::bulk::compress(data, 0).map_err(|e| fail(e.to_string())),
        }
    }

    fn decompress(self, data: &[u8], size: usize) -> Result<Vec<u8>, MongoError> {
        let bad = |e: String| MongoError::bad_value(format!("could not decompress message: {e}"));
        let out = match self {
            Self::Noop => data.to_vec(),
            Self::Snappy => {
                let len = snap::raw::decompress_len(data).map_err(|e| bad(e.to_string()))?;
                if len != size {
                    return Err(bad("size mismatch".to_string()));
                }
                snap::raw::Decoder::new().decompress_vec(data).map_err(|e| bad(e.to_string()))?
            }
            Self::Zlib => {
                // At most one byte past the announced size: enough to tell it was wrong.
                let mut out = Vec::with_capacity(size);
                flate2::read::ZlibDecoder::new(data)
                    .take(size as u64 + 1)
                    .read_to_end(&mut out)
                    .map_err(|e| bad(e.to_string()))?;
                out
            }
            Self::Zstd => zstd::bulk::decompress(data, size).map_err(|e| bad(e.to_string()))?,
        };
        if out.len() != size {
            return Err(bad("size mismatch".to_string()));
        }
        Ok(out)
    }
}

/// A request, decoded.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub request_id: i32,
    pub kind: Kind,
    /// The command: the `OP_MSG` body with kind 1 sequences added as arrays, or the
    /// `OP_QUERY` query (unwrapped from `$query`).
    pub command: Document,
    /// How the request came compressed (the reply uses the same).
    pub compressor: Option<Compressor>,
    /// `OP_MSG`'s `exhaustAllowed` flag: the client reads further replies the server sends
    /// with `moreToCome` without asking again (an exhaust cursor's `getMore`).
    pub exhaust_allowed: bool,
    /// Whether every document the request carries is known to be within
    /// [`MAX_BSON_SIZE`]: its body is no larger, and the documents of kind 1 sequences were
    /// checked as they were read. An insert then need not encode its documents to size them.
    pub sized: bool,
    /// An `insert`'s kind 1 `documents` sequence, kept as the bytes that came (each checked
    /// against [`MAX_BSON_SIZE`] and [`MAX_DEPTH`], not decoded): the insert writes each as
    /// its stored JSON in one pass. `command` then holds no `documents`.
    pub documents: Option<Vec<RawDocumentBuf>>,
}

/// Which opcode a request came as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `OP_MSG`; `more_to_come`: the client wants no reply.
    Msg { more_to_come: bool },
    /// Legacy `OP_QUERY` on a `$cmd` collection.
    Query,
}

/// Decodes one message (`body`: the bytes after the header).
pub fn decode(header: &Header, body: &[u8]) -> Result<Request, MongoError> {
    match header.op_code {
        OP_COMPRESSED => {
            let mut r = Reader::new(body);
            let op_code = r.i32()?;
            let size = usize::try_from(r.i32()?).map_err(|_| malformed("negative size"))?;
            if size > MAX_MESSAGE_SIZE {
                return Err(MongoError::too_large(size, MAX_MESSAGE_SIZE));
            }
            let compressor = Compressor::from_id(r.u8()?)?;
            let inner = compressor.decompress(r.rest(), size)?;
            let inner_header = Header { op_code, length: size + Header::SIZE, ..*header };
            let mut request = decode(&inner_header, &inner)?;
            request.compressor = Some(compressor);
            Ok(request)
        }
        OP_MSG => decode_msg(header, body),
        OP_QUERY => decode_query(header, body),
        other => Err(MongoError::bad_value(format!("unsupported opCode {other}"))),
    }
}

fn malformed(what: &str) -> MongoError {
    MongoError::invalid_bson(format!("malformed message: {what}"))
}

fn decode_msg(header: &Header, body: &[u8]) -> Result<Request, MongoError> {
    let mut r = Reader::new(body);
    let flags = r.u32()?;
    let mut sections = r.rest();
    if flags & CHECKSUM_PRESENT != 0 {
        let (rest, sum) = sections
            .split_at_checked(sections.len().saturating_sub(4))
            .ok_or_else(|| malformed("checksum"))?;
        let mut whole = Vec::with_capacity(Header::SIZE + body.len());
        whole.extend_from_slice(&header_bytes(header));
        whole.extend_from_slice(&body[..body.len() - 4]);
        if crc32c::crc32c(&whole).to_le_bytes() != sum {
            return Err(MongoError::new(
                ErrorCodes::CHECKSUM_MISMATCH,
                "ChecksumMismatch",
                "OP_MSG checksum does not match contents",
            ));
        }
        sections = rest;
    }
    let mut r = Reader::new(sections);
    let mut command = None;
    let mut sized = false;
    let mut sequences: Vec<(String, Vec<RawDocumentBuf>)> = Vec::new();
    while !r.is_empty() {
        match r.u8()? {
            0 if command.is_none() => {
                let before = r.bytes.len();
                command = Some(r.document(MAX_COMMAND_SIZE)?);
                sized = before - r.bytes.len() <= MAX_BSON_SIZE;
            }
            0 => return Err(malformed("more than one body section")),
            1 => {
                let size = usize::try_from(r.i32()?).map_err(|_| malformed("section size"))?;
                let mut s = Reader::new(
                    r.take(size.checked_sub(4).ok_or_else(|| malformed("section size"))?)?,
                );
                let name = s.cstring()?;
                let mut docs = Vec::new();
                while !s.is_empty() {
                    docs.push(s.raw_document(MAX_BSON_SIZE)?);
                }
                sequences.push((name, docs));
            }
            other => return Err(malformed(&format!("unknown section kind {other}"))),
        }
    }
    let mut command = command.ok_or_else(|| malformed("no body section"))?;
    let insert = command.keys().next().is_some_and(|name| name == "insert");
    let mut documents = None;
    for (name, docs) in sequences {
        if command.contains_key(&name) || (name == "documents" && documents.is_some()) {
            return Err(MongoError::bad_value(format!(
                "Duplicate field '{name}' in body and document sequence"
            )));
        }
        if insert && name == "documents" {
            documents = Some(docs);
            continue;
        }
        let docs = docs.iter().map(|raw| decoded(raw).map(Bson::Document));
        command.insert(name, docs.collect::<Result<Vec<_>, _>>()?);
    }
    let more_to_come = flags & MORE_TO_COME != 0;
    Ok(Request {
        request_id: header.request_id,
        kind: Kind::Msg { more_to_come },
        command,
        compressor: None,
        exhaust_allowed: flags & EXHAUST_ALLOWED != 0,
        sized,
        documents,
    })
}

fn decode_query(header: &Header, body: &[u8]) -> Result<Request, MongoError> {
    let mut r = Reader::new(body);
    let _flags = r.i32()?;
    let collection = r.cstring()?;
    let (_skip, _return) = (r.i32()?, r.i32()?);
    let query = r.document(MAX_COMMAND_SIZE)?;
    let Some(db) = collection.strip_suffix(".$cmd") else {
        return Err(MongoError::new(
            ErrorCodes::UNSUPPORTED_OP_QUERY,
            "UnsupportedOpQueryCommand",
            "OP_QUERY is no longer supported except for the hello/isMaster handshake",
        ));
    };
    let mut command = match query.get("$query") {
        Some(Bson::Document(inner)) => inner.clone(),
        _ => query,
    };
    let name = command.keys().next().map(String::as_str).unwrap_or_default();
    if !matches!(name, "hello" | "isMaster" | "ismaster") {
        return Err(MongoError::new(
            ErrorCodes::UNSUPPORTED_OP_QUERY,
            "UnsupportedOpQueryCommand",
            format!(
                "Unsupported OP_QUERY command: {name}. The client driver may require an upgrade."
            ),
        ));
    }
    command.insert("$db", db);
    Ok(Request {
        request_id: header.request_id,
        kind: Kind::Query,
        command,
        compressor: None,
        exhaust_allowed: false,
        sized: false,
        documents: None,
    })
}

/// Error codes used by the framing itself.
pub struct ErrorCodes;

impl ErrorCodes {
    pub const CHECKSUM_MISMATCH: i32 = 12;
    pub const UNSUPPORTED_OP_QUERY: i32 = 352;
}

fn header_bytes(h: &Header) -> [u8; 16] {
    let mut out = [0u8; 16];
    let length = i32::try_from(h.length).unwrap_or(i32::MAX);
    for (i, word) in [length, h.request_id, h.response_to, h.op_code].into_iter().enumerate() {
        out[i * 4..i * 4 + 4].copy_from_slice(&word.to_le_bytes());
    }
    out
}

/// Encodes the reply to `request`: `OP_REPLY` for an `OP_QUERY`, else `OP_MSG`,
/// compressed as the request was (except `no_compress` replies: the handshake and auth).
pub fn encode_reply(
    request_id: i32,
    request: &Request,
    reply: &Document,
    no_compress: bool,
) -> Result<Vec<u8>, MongoError> {
    encode_message(
        Reply { request_id, response_to: request.request_id, more_to_come: false },
        request,
        reply,
        no_compress,
    )
}

/// How one reply message is headed: its id, the message it answers and whether more
/// replies follow unasked (`moreToCome`: an exhaust cursor's stream).
#[derive(Debug, Clone, Copy)]
pub struct Reply {
    pub request_id: i32,
    pub response_to: i32,
    pub more_to_come: bool,
}

/// [`encode_reply`] with the header and flags `head` gives (an exhaust stream's replies
/// answer the reply before them).
pub fn encode_message(
    head: Reply,
    request: &Request,
    reply: &Document,
    no_compress: bool,
) -> Result<Vec<u8>, MongoError> {
    let doc = reply.to_vec().map_err(|e| MongoError::internal(e.to_string()))?;
    frame(head, request, &doc, no_compress)
}

/// [`encode_message`] of a cursor reply whose first batch is already BSON: `batch` takes the
/// place of the reply's (empty) `cursor.firstBatch`, giving the bytes the reply would have
/// encoded to with those documents in it.
pub fn encode_reply_with_batch(
    head: Reply,
    request: &Request,
    reply: &Document,
    batch: &RawArrayBuf,
    no_compress: bool,
) -> Result<Vec<u8>, MongoError> {
    let internal = |e: bson::error::Error| MongoError::internal(e.to_string());
    let raw = |value: &Bson| RawBson::try_from(value.clone()).map_err(internal);
    let mut out = RawDocumentBuf::new();
    for (name, value) in reply {
        match value {
            Bson::Document(cursor) if name == "cursor" => {
                let mut fields = RawDocumentBuf::new();
                for (field, value) in cursor {
                    match field.as_str() {
                        "firstBatch" => fields.append(cstr_of(field)?, batch),
                        _ => fields.append(cstr_of(field)?, raw(value)?),
                    }
                }
                out.append(cstr_of(name)?, fields);
            }
            _ => out.append(cstr_of(name)?, raw(value)?),
        }
    }
    frame(head, request, out.as_bytes(), no_compress)
}

fn cstr_of(key: &str) -> Result<&CStr, MongoError> {
    <&CStr>::try_from(key).map_err(|e| MongoError::internal(e.to_string()))
}

/// A reply document's bytes framed as the answer to `request`, headed as `head` says.
fn frame(
    head: Reply,
    request: &Request,
    doc: &[u8],
    no_compress: bool,
) -> Result<Vec<u8>, MongoError> {
    let (op_code, body) = match request.kind {
        Kind::Query => {
            let mut body = Vec::with_capacity(20 + doc.len());
            body.extend_from_slice(&0i32.to_le_bytes()); // responseFlags
            body.extend_from_slice(&0i64.to_le_bytes()); // cursorID
            body.extend_from_slice(&0i32.to_le_bytes()); // startingFrom
            body.extend_from_slice(&1i32.to_le_bytes()); // numberReturned
            body.extend_from_slice(doc);
            (OP_REPLY, body)
        }
        Kind::Msg { .. } => {
            let mut body = Vec::with_capacity(5 + doc.len());
            let flags = if head.more_to_come { MORE_TO_COME } else { 0 };
            body.extend_from_slice(&flags.to_le_bytes());
            body.push(0);
            body.extend_from_slice(doc);
            (OP_MSG, body)
        }
    };
    let (op_code, body) = match request.compressor.filter(|_| !no_compress) {
        Some(c) => {
            let mut out = Vec::with_capacity(9 + body.len() / 2);
            out.extend_from_slice(&op_code.to_le_bytes());
            out.extend_from_slice(&i32::try_from(body.len()).unwrap_or(i32::MAX).to_le_bytes());
            out.push(c.id());
            out.extend_from_slice(&c.compress(&body)?);
            (OP_COMPRESSED, out)
        }
        None => (op_code, body),
    };
    let header = Header {
        length: Header::SIZE + body.len(),
        request_id: head.request_id,
        response_to: head.response_to,
        op_code,
    };
    let mut out = header_bytes(&header).to_vec();
    out.extend_from_slice(&body);
    Ok(out)
}

/// Bounds-checked little-endian reading.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Self { bytes }
    }

    fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], MongoError> {
        let (head, rest) = self.bytes.split_at_checked(n).ok_or_else(|| malformed("truncated"))?;
        self.bytes = rest;
        Ok(head)
    }

    fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.bytes)
    }

    fn u8(&mut self) -> Result<u8, MongoError> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32, MongoError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn i32(&mut self) -> Result<i32, MongoError> {
        Ok(self.u32()? as i32)
    }

    fn cstring(&mut self) -> Result<String, MongoError> {
        let end = self
            .bytes
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(|| malformed("unterminated string"))?;
        let text =
            String::from_utf8(self.take(end)?.to_vec()).map_err(|_| malformed("invalid UTF-8"))?;
        self.take(1)?;
        Ok(text)
    }

    /// One BSON document of at most `limit` bytes, validated by the `bson` crate.
    fn document(&mut self, limit: usize) -> Result<Document, MongoError> {
        decoded(&self.raw_document(limit)?)
    }

    /// One BSON document of at most `limit` bytes, its elements and nesting checked.
    fn raw_document(&mut self, limit: usize) -> Result<RawDocumentBuf, MongoError> {
        let head = self.bytes.get(..4).ok_or_else(|| malformed("truncated document"))?;
        let size = usize::try_from(i32::from_le_bytes([head[0], head[1], head[2], head[3]]))
            .map_err(|_| malformed("negative document size"))?;
        if size > limit {
            return Err(MongoError::too_large(size, limit));
        }
        let raw = RawDocumentBuf::from_bytes(self.take(size)?.to_vec())
            .map_err(|e| MongoError::invalid_bson(e.to_string()))?;
        check_depth(raw.as_ref())?;
        Ok(raw)
    }
}

/// A checked raw document ([`Reader::raw_document`]) decoded.
pub(crate) fn decoded(raw: &RawDocumentBuf) -> Result<Document, MongoError> {
    document(raw).map_err(|e| MongoError::invalid_bson(e.to_string()))
}

/// What `Document::try_from(&RawDocument)` gives, without the copy of each sub-document
/// and array the `bson` crate makes before converting it (`RawBsonRef` to `RawBson`):
/// sub-documents and arrays are converted where they lie, every other value as the crate
/// converts it. The nesting was checked ([`MAX_DEPTH`]) before.
fn document(raw: &RawDocument) -> Result<Document, bson::error::Error> {
    raw.iter()
        .map(|member| member.and_then(|(key, value)| Ok((key.as_str().to_owned(), bson(value)?))))
        .collect()
}

fn bson(value: RawBsonRef<'_>) -> Result<Bson, bson::error::Error> {
    Ok(match value {
        RawBsonRef::Document(doc) => Bson::Document(document(doc)?),
        RawBsonRef::Array(items) => {
            Bson::Array(items.into_iter().map(|item| bson(item?)).collect::<Result<_, _>>()?)
        }
        other => Bson::try_from(other)?,
    })
}

/// Walks the nesting of a raw document without recursion; deeper than [`MAX_DEPTH`] is
/// MongoDB's `Overflow` (15).
fn check_depth(doc: &RawDocument) -> Result<(), MongoError> {
    let invalid = |e: bson::error::Error| MongoError::invalid_bson(e.to_string());
    let mut stack = vec![(doc, 1usize)];
    while let Some((doc, depth)) = stack.pop() {
        if depth > MAX_DEPTH {
            return Err(MongoError::new(
                15,
                "Overflow",
                format!("BSONObj exceeds maximum nested object depth: {MAX_DEPTH}"),
            ));
        }
        for element in doc.iter() {
            let child = match element.map_err(invalid)?.1 {
                RawBsonRef::Document(d) => d,
                RawBsonRef::Array(a) => RawDocument::from_bytes(a.as_bytes()).map_err(invalid)?,
                RawBsonRef::JavaScriptCodeWithScope(c) => c.scope,
                _ => continue,
            };
            stack.push((child, depth + 1));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
