//! Attachments: their metadata lives in the revision body, their bytes in chunks.
//!
//! - **Metadata.** A revision with attachments stores them as the last member of its body,
//!   `"_attachments": {name: {"content_type", "revpos", "digest", "length", "stub": true}}`,
//!   exactly the stubs CouchDB shows, so every reader (`GET`, `_all_docs`, `_changes`,
//!   views, Mango) sees them without a second lookup, as CouchDB's map functions do.
//! - **Bodies.** The bytes are stored once per database under `AttChunk(db, md5, n)`,
//!   [`CHUNK`] bytes a key: content-addressed, so a stub (an edit that keeps an
//!   attachment) or a second document with the same bytes writes no bytes at all.
//!   New chunks go into the batch of the document write that brings them (one commit per
//!   operation), and their size is added to the database's `sizes.active`.
//! - **Reads** stream chunk by chunk from a snapshot ([`Database::attachment_chunks`]).
//! - **Compaction** (`crate::compact`) removes the chunks no leaf revision refers to.
//!
//! - **Streamed bodies** (standalone `PUT`, `multipart/related`) are stored as they arrive
//!   under an upload token, and the document's commit adds an `AttAlias(db, md5)` naming
//!   it ([`crate::upload`]); readers follow the alias.
//!
//! - **Gzip.** A body of a compressible type (`[attachments]` settings, [`gzip::Policy`])
//!   is stored gzipped as CouchDB stores it, and an `AttGzip(db, md5)` key in the same
//!   commit says so and gives the gzip's length (CouchDB's `encoding`/`encoded_length`);
//!   [`Database::attachment_reader`] inflates it for clients that want the bytes sent. A
//!   body without that key (every one written before gzip storage) is read as stored.
//!
//! The revision id covers the attachments as CouchDB's `couch_db:new_revid` does: the
//! `(name, content_type, md5)` of each, in reverse order ([`bunko_doc::RevId::next_with`]).
//! The digest is the MD5 of the bytes stored (the gzip for a compressible type), byte for
//! byte CouchDB's, so digests and revision ids are CouchDB's. The digest is also the
//! chunks' address.

use std::collections::HashSet;
use std::io::Read;

use bunko_doc::RevId;
use bunko_doc::att::{self, AttBody, AttIn};
use bunko_doc::body::ParsedDoc;
use bunko_doc::gzip;
use bunko_storage::{Batch, Iter};
use serde_json::{Map, Value, json};

use crate::database::Database;
use crate::keys::{self, Key};
use crate::security::UserCtx;
use crate::write::WriteOptions;
use crate::{Error, Result};

/// Bytes per stored chunk.
pub const CHUNK: usize = 64 * 1024;

/// One attachment of a stored revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttMeta {
    pub name: String,
    pub content_type: String,
    pub md5: [u8; 16],
    pub length: u64,
    pub revpos: u64,
}

impl AttMeta {
    /// The stub CouchDB shows (`couch_att:to_json` without data).
    pub fn stub_json(&self) -> Value {
        json!({
            "content_type": self.content_type,
            "revpos": self.revpos,
            "digest": att::digest_text(&self.md5),
            "length": self.length,
            "stub": true,
        })
    }

    fn from_json(name: &str, props: &Value) -> Option<AttMeta> {
        Some(AttMeta {
            name: name.to_string(),
            content_type: props.get("content_type")?.as_str()?.to_string(),
            md5: att::parse_digest(props.get("digest")?.as_str()?)?,
            length: props.get("length")?.as_u64()?,
            revpos: props.get("revpos")?.as_u64()?,
        })
    }
}

/// The attachments recorded in a stored body, in order.
pub fn of_body(body: &[u8]) -> Vec<AttMeta> {
    // Cheap test first: most bodies have none.
    if !body.windows(14).any(|w| w == b"\"_attachments\"") {
        return Vec::new();
    }
    let Ok(Value::Object(map)) = serde_json::from_slice::<Value>(body) else { return Vec::new() };
    match map.get("_attachments") {
        Some(Value::Object(atts)) => {
            atts.iter().filter_map(|(name, props)| AttMeta::from_json(name, props)).collect()
        }
        _ => Vec::new(),
    }
}

/// `body` (compact JSON of the user's fields) with `_attachments` appended.
pub(crate) fn with_atts(mut body: Vec<u8>, atts: &[AttMeta]) -> Vec<u8> {
    if atts.is_empty() {
        return body;
    }
    let stubs: Map<String, Value> = atts.iter().map(|a| (a.name.clone(), a.stub_json())).collect();
    let member = format!("\"_attachments\":{}", Value::Object(stubs));
    if body.last() == Some(&b'}') {
        body.pop();
        if body.len() > 1 {
            body.push(b',');
        }
        body.extend_from_slice(member.as_bytes());
        body.push(b'}');
    }
    body
}

/// Records that the body `md5` is stored gzipped (`gzip_length` bytes of gzip).
fn mark_gzip(batch: &mut Batch, db: u64, md5: &[u8; 16], gzip_length: Option<u64>) {
    if let Some(length) = gzip_length {
        batch.put(Key::AttGzip(db, md5).encode(), crate::records::encode(&length));
    }
}

/// The chunks of a stored body as one stream of bytes.
struct ChunkReader {
    chunks: Box<dyn Iterator<Item = Result<Vec<u8>>> + Send>,
    current: Vec<u8>,
    at: usize,
}

impl Read for ChunkReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.at == self.current.len() {
            match self.chunks.next() {
                Some(chunk) => {
                    self.current = chunk.map_err(std::io::Error::other)?;
                    self.at = 0;
                }
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.current.len() - self.at);
        buf[..n].copy_from_slice(&self.current[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// What a revision id covers of one attachment: name, content type, MD5.
pub type AttHash<'a> = (&'a str, &'a str, [u8; 16]);

/// What a write's attachments resolved to.
pub(crate) struct Resolved {
    pub metas: Vec<AttMeta>,
    /// The new chunks, added to the commit only if the document's write succeeds.
    pub chunks: Batch,
    /// Their digests and total size.
    pub new: Vec<[u8; 16]>,
    pub added: u64,
}

impl Resolved {
    /// No attachments.
    pub fn none() -> Resolved {
        Resolved { metas: Vec::new(), chunks: Batch::new(), new: Vec::new(), added: 0 }
    }
}

impl Resolved {
    /// `(name, type, md5)` in the order CouchDB hashes them.
    pub fn hash_input(&self) -> Vec<AttHash<'_>> {
        self.metas.iter().rev().map(|a| (a.name.as_str(), a.content_type.as_str(), a.md5)).collect()
    }
}

impl Database {
    /// Resolves the attachments of `doc`: data becomes new chunks (unless stored already,
    /// or written earlier in this commit: `written`), a stub takes the attachment of
    /// that name from `parent` (the edited revision's body), or, in a replicated write,
    /// the stored body its digest names. `revpos` is the new revision's generation.
    pub(crate) fn resolve_atts(
        &self,
        doc: &ParsedDoc,
        parent: Option<&[u8]>,
        revpos: u64,
        new_edits: bool,
        written: &HashSet<[u8; 16]>,
    ) -> Result<Resolved> {
        let mut resolved = Resolved::none();
        let Some(atts) = &doc.attachments else { return Ok(resolved) };
        let id = doc.id.as_deref().unwrap_or_default();
        let stored = parent.map(of_body).unwrap_or_default();
        let config = self.config.get();
        let (max, policy) = (config.max_attachment_size, &config.att_gzip);
        for AttIn { name, content_type, revpos: sent_revpos, body } in atts {
            // CouchDB's `set_new_att_revpos` gives new data the new generation in an
            // interactive edit; a replicated write keeps what the source said.
            let revpos = if new_edits { revpos } else { sent_revpos.unwrap_or(revpos) };
            let meta_of = |md5: &[u8; 16], length: u64| AttMeta {
                name: name.clone(),
                content_type: content_type.clone(),
                md5: *md5,
                length,
                revpos,
            };
            let meta = match body {
                AttBody::Data { bytes } => {
                    if bytes.len() as u64 > max {
                        return Err(Error::AttachmentTooLarge(name.clone()));
                    }
                    let (encoded, stored) = gzip::encode(policy, content_type, bytes);
                    self.stage_body(&mut resolved, written, &encoded, &stored)?;
                    meta_of(&encoded.md5, encoded.length)
                }
                AttBody::Gzipped { bytes, length } => {
                    if *length > max {
                        return Err(Error::AttachmentTooLarge(name.clone()));
                    }
                    let md5 = att::md5(bytes);
                    let gzip_length = Some(bytes.len() as u64);
                    let encoded = gzip::Encoded { md5, length: *length, gzip_length };
                    self.stage_body(&mut resolved, written, &encoded, bytes)?;
                    meta_of(&md5, *length)
                }
                AttBody::Staged { token, md5, length, gzip_length } => {
                    if *length > max {
                        return Err(Error::AttachmentTooLarge(name.clone()));
                    }
                    let known = written.contains(md5) || resolved.new.contains(md5);
                    if !known && !self.has_att_body(md5, gzip_length.unwrap_or(*length))? {
                        // The chunks are stored already, under the upload's token.
                        resolved.chunks.put(Key::AttAlias(self.id(), md5).encode(), token.to_vec());
                        mark_gzip(&mut resolved.chunks, self.id(), md5, *gzip_length);
                        resolved.new.push(*md5);
                        resolved.added += gzip_length.unwrap_or(*length);
                    }
                    meta_of(md5, *length)
                }
                AttBody::Follows { .. } => {
                    return Err(Error::BadRequest(format!(
                        "Attachment {name} follows the document, but no multipart/related \
                         part carried it"
                    )));
                }
                AttBody::Stub { digest, length } => {
                    let missing = || {
                        Error::MissingStub(format!("Invalid attachment stub in {id} for {name}"))
                    };
                    if new_edits {
                        // A stub's `revpos`, when sent, must be the stored one's, as in
                        // CouchDB's `couch_att:merge_stubs`.
                        let matches = |a: &&AttMeta| {
                            a.name == *name && sent_revpos.is_none_or(|pos| pos == a.revpos)
                        };
                        stored.iter().find(matches).cloned().ok_or_else(missing)?
                    } else {
                        let (Some(md5), Some(length)) = (digest, length) else {
                            return Err(missing());
                        };
                        if !self.has_att_body(md5, *length)? {
                            return Err(missing());
                        }
                        meta_of(md5, *length)
                    }
                }
            };
            resolved.metas.push(meta);
        }
        Ok(resolved)
    }

    /// Adds the chunks of a body in memory (`stored`, gzipped when `encoded` says so) to
    /// the write, unless stored already or written earlier in this commit (`written`).
    fn stage_body(
        &self,
        resolved: &mut Resolved,
        written: &HashSet<[u8; 16]>,
        encoded: &gzip::Encoded,
        stored: &[u8],
    ) -> Result<()> {
        let md5 = &encoded.md5;
        let known = written.contains(md5) || resolved.new.contains(md5);
        if known || self.has_att_body(md5, stored.len() as u64)? {
            return Ok(());
        }
        for (n, chunk) in stored.chunks(CHUNK).enumerate() {
            let key = Key::AttChunk(self.id(), md5, n as u64).encode();
            resolved.chunks.put(key, chunk.to_vec());
        }
        mark_gzip(&mut resolved.chunks, self.id(), md5, encoded.gzip_length);
        resolved.new.push(*md5);
        resolved.added += stored.len() as u64;
        Ok(())
    }

    /// Whether the body with this digest is stored (an empty one always is).
    fn has_att_body(&self, md5: &[u8; 16], length: u64) -> Result<bool> {
        if length == 0 {
            return Ok(true);
        }
        let store = self.store.as_ref();
        Ok(store.get(&Key::AttChunk(self.id(), md5, 0).encode())?.is_some()
            || store.get(&Key::AttAlias(self.id(), md5).encode())?.is_some())
    }

    /// The attachment `name` of the document's winner or of `rev`
    /// (`404 not_found` "Document is missing attachment").
    pub fn attachment(&self, id: &str, rev: Option<&RevId>, name: &str) -> Result<AttMeta> {
        let doc = self.get_stored(id, rev)?;
        of_body(&doc.body)
            .into_iter()
            .find(|a| a.name == name)
            .ok_or_else(|| Error::NotFound("Document is missing attachment".to_string()))
    }

    /// The chunks of an attachment body, read from one snapshot as they are consumed.
    pub fn attachment_chunks(
        &self,
        md5: &[u8; 16],
    ) -> Box<dyn Iterator<Item = Result<Vec<u8>>> + Send> {
        let snapshot = self.snapshot();
        // A streamed body stays under its upload's token (`crate::upload`).
        let token = match snapshot.get(&Key::AttAlias(self.id(), md5).encode()) {
            Ok(token) => token,
            Err(err) => return Box::new(std::iter::once(Err(err.into()))),
        };
        let range = keys::att_body_range(self.id(), token.as_deref().unwrap_or(md5));
        Box::new(Iter::new(snapshot, range, false, 4).map(|entry| Ok(entry?.1)))
    }

    /// The length of the gzip the body `md5` is stored as; `None` when it is stored as it
    /// came (CouchDB's `encoding` and `encoded_length`).
    pub fn attachment_gzip(&self, md5: &[u8; 16]) -> Result<Option<u64>> {
        match self.store.get(&Key::AttGzip(self.id(), md5).encode())? {
            Some(value) => Ok(Some(crate::records::decode(&value)?)),
            None => Ok(None),
        }
    }

    /// The body `md5` as a reader: the bytes as stored, or with `decode` the bytes they
    /// stand for (a gzipped body inflated as it is read, a chunk at a time).
    pub fn attachment_reader(&self, md5: &[u8; 16], decode: bool) -> Result<Box<dyn Read + Send>> {
        let chunks =
            ChunkReader { chunks: self.attachment_chunks(md5), current: Vec::new(), at: 0 };
        Ok(match decode && self.attachment_gzip(md5)?.is_some() {
            true => Box::new(gzip::decoder(chunks)),
            false => Box::new(chunks),
        })
    }

    /// A whole attachment body as it was sent (for inline `attachments=true`).
    pub fn attachment_data(&self, md5: &[u8; 16]) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.attachment_reader(md5, true)?
            .read_to_end(&mut out)
            .map_err(|err| Error::Corrupt(format!("attachment body: {err}")))?;
        Ok(out)
    }

    /// Whether `ctx` may put attachment `name` on document `id`: the write gate and the
    /// name's rules, asked before the body is received (and again by the write).
    pub fn admit_attachment(&self, ctx: &UserCtx, id: &str, name: &str) -> Result<()> {
        // The write gate answers first, so a user who may not write learns nothing of the
        // document (`update_docs` asks it again for the write itself).
        self.admit_doc(&self.security_object()?, ctx, id)?;
        Ok(att::validate_name(name)?)
    }

    /// `PUT /{db}/{id}/{name}`: a new revision of the document (created if absent and no
    /// `rev` is given) with this attachment (inline or streamed data) added or replaced,
    /// as `ctx`.
    pub fn put_attachment(
        &self,
        ctx: &UserCtx,
        id: &str,
        rev: Option<RevId>,
        name: &str,
        content_type: &str,
        body: AttBody,
    ) -> Result<RevId> {
        self.admit_attachment(ctx, id, name)?;
        let att = AttIn {
            name: name.to_string(),
            content_type: content_type.to_string(),
            revpos: None,
            body,
        };
        self.put_with_attachments(ctx, id, None, rev, vec![att])
    }

    /// A new revision with `atts` added first (CouchDB's `chttpd_db` puts new ones first;
    /// the order is hashed), replacing those of the same names: of `doc` (an HTML form's
    /// `_doc`), else of revision `rev` of the document (a new document without one), as
    /// `ctx`. `PUT /{db}/{id}/{name}` and `POST /{db}/{id}` as `multipart/form-data`.
    pub fn put_with_attachments(
        &self,
        ctx: &UserCtx,
        id: &str,
        doc: Option<ParsedDoc>,
        rev: Option<RevId>,
        mut atts: Vec<AttIn>,
    ) -> Result<RevId> {
        for att in &atts {
            att::validate_name(&att.name)?;
        }
        let mut doc = match doc {
            Some(doc) => doc,
            None => ParsedDoc { rev: rev.clone(), ..self.editable(id, rev.as_ref())? },
        };
        doc.id = Some(id.to_string());
        let kept = doc.attachments.take().unwrap_or_default();
        let replaced = |a: &AttIn| atts.iter().any(|new| new.name == a.name);
        let kept: Vec<AttIn> = kept.into_iter().filter(|a| !replaced(a)).collect();
        atts.extend(kept);
        doc.attachments = Some(atts);
        self.put(ctx, doc, WriteOptions::default())
    }

    /// `DELETE /{db}/{id}/{name}?rev=`: a new revision without the attachment.
    pub fn delete_attachment(
        &self,
        ctx: &UserCtx,
        id: &str,
        rev: Option<RevId>,
        name: &str,
    ) -> Result<RevId> {
        self.admit_doc(&self.security_object()?, ctx, id)?;
        let Some(rev) = rev else {
            // CouchDB looks for the document and the attachment first (`404`), then finds
            // the edit names no revision (`409`).
            self.attachment(id, None, name)?;
            return Err(Error::Conflict);
        };
        let mut doc = self.editable(id, Some(&rev))?;
        let atts = doc.attachments.get_or_insert_with(Vec::new);
        let before = atts.len();
        atts.retain(|a| a.name != name);
        if atts.len() == before {
            return Err(Error::NotFound("Document is missing attachment".to_string()));
        }
        doc.rev = Some(rev);
        self.put(ctx, doc, WriteOptions::default())
    }

    /// The revision `rev` (or a new empty document when there is none) as a document to
    /// edit, its attachments as stubs. A `rev` the document does not have is `missing_rev`;
    /// one that is not current fails at the write.
    fn editable(&self, id: &str, rev: Option<&RevId>) -> Result<ParsedDoc> {
        let mut doc = ParsedDoc { id: Some(id.to_string()), ..Default::default() };
        let Some(rev) = rev else { return Ok(doc) };
        let found = match self.get_stored(id, Some(rev)) {
            Ok(found) => found,
            Err(Error::NotFound(_)) => return Err(Error::MissingRev),
            Err(err) => return Err(err),
        };
        let Ok(Value::Object(mut body)) = serde_json::from_slice::<Value>(&found.body) else {
            return Err(Error::Corrupt(format!("the body of {id} is not an object")));
        };
        let stored = body.shift_remove("_attachments");
        doc.body = body;
        if let Some(Value::Object(stubs)) = stored {
            doc.attachments = Some(att::parse(stubs)?);
        }
        Ok(doc)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bunko_doc::body::ParsedDoc;
    use bunko_storage::Store;

    use super::*;
    use crate::{Config, Engine};

    fn with_text(id: &str, text: &[u8]) -> ParsedDoc {
        let mut doc = ParsedDoc { id: Some(id.to_string()), ..Default::default() };
        doc.attachments = Some(vec![AttIn {
            name: "a.txt".to_string(),
            content_type: "text/plain".to_string(),
            revpos: None,
            body: AttBody::Data { bytes: text.to_vec() },
        }]);
        doc
    }

    /// A compressible body is stored gzipped and read back inflated; its gzip mark goes
    /// with it at compaction; a body without a mark (every one written before gzip
    /// storage) reads as stored.
    #[test]
    fn gzip_marks_go_with_their_bodies_and_unmarked_bodies_read_as_stored() -> Result<()> {
        let store: Arc<dyn Store> = Arc::new(bunko_storage::Memory::new());
        let engine = Engine::open(store.clone(), Config::default())?;
        let admin = UserCtx::admin("t");
        let db = engine.create_db(&admin, "atts", false)?;
        let text = b"hello world ".repeat(1000);
        let rev = db.put(&admin, with_text("d", &text), WriteOptions::default())?;
        let meta = db.attachment("d", None, "a.txt")?;
        assert_eq!(meta.md5, att::digest("text/plain", &text));
        let gzip_length = db.attachment_gzip(&meta.md5)?.unwrap_or_default();
        assert!(gzip_length > 0 && gzip_length < 200, "{gzip_length}");
        assert_eq!(db.attachment_data(&meta.md5)?, text);
        let stored: usize =
            db.attachment_chunks(&meta.md5).map(|c| c.map(|c| c.len())).sum::<Result<_>>()?;
        assert_eq!(stored as u64, gzip_length);

        let old = [7u8; 16];
        let mut batch = Batch::new();
        batch.put(Key::AttChunk(db.id(), &old, 0).encode(), b"as it came".to_vec());
        store.apply(batch)?;
        assert_eq!(db.attachment_gzip(&old)?, None);
        assert_eq!(db.attachment_data(&old)?, b"as it came");

        db.delete(&admin, "d", Some(rev))?;
        db.compact()?;
        assert_eq!(db.attachment_gzip(&meta.md5)?, None);
        assert!(store.scan(&keys::att_gzip_range(db.id()), false, 10)?.is_empty());
        Ok(())
    }
}
