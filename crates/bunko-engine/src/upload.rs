//! Attachment bodies received as a stream: a standalone `PUT /{db}/{doc}/{name}` and the
//! parts of a `multipart/related` upload, so memory does not grow with the attachment.
//!
//! The MD5 that addresses a stored body (`AttChunk(db, md5, n)`) is known only once the
//! last byte has arrived, so a streamed body is stored under a random 16-byte *token*
//! instead, and the document's commit records where it is:
//!
//! 1. [`Database::upload`] opens an [`Upload`]; [`Upload::write`] digests the bytes as they
//!    arrive and applies each full [`CHUNK`] as `AttChunk(db, token, n)` (without waiting
//!    for a sync: the document's commit syncs them). Past `max_attachment_size` it fails at
//!    once (`413 attachment_too_large`).
//! 2. [`Upload::finish`] gives an [`Uploaded`], whose [`Uploaded::body`] goes into the
//!    document's `_attachments` as [`AttBody::Staged`]; the caller keeps it until the
//!    write returns.
//! 3. The write resolves it like inline data (`crate::attachments`): when no body with this
//!    MD5 is stored yet, the commit that brings the document adds `AttAlias(db, md5) →
//!    token`, and readers follow it ([`Database::attachment_chunks`]).
//! 4. Dropping an `Upload`, or an `Uploaded` that no alias names (a refused or failed
//!    write, or bytes stored already), removes its chunks. What a crash leaves behind is
//!    unreferenced, and compaction removes it (`crate::compact`), sparing the tokens of
//!    uploads still under way (`is_live`).

use std::collections::HashSet;
use std::sync::{Arc, LazyLock, Mutex};

use bunko_doc::att::AttBody;
use bunko_doc::gzip::{Encoded, Encoder};
use bunko_storage::{Batch, Store};

use crate::attachments::CHUNK;
use crate::database::Database;
use crate::keys::{self, Key};
use crate::{Error, Result};

/// The tokens of the uploads under way (not yet dropped), in every database.
static LIVE: LazyLock<Mutex<HashSet<[u8; 16]>>> = LazyLock::new(Mutex::default);

/// Whether `digest` is the token of an upload under way, whose chunks no document names
/// yet but which compaction must keep.
pub(crate) fn is_live(digest: &[u8]) -> bool {
    let live = LIVE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    digest.try_into().is_ok_and(|token: [u8; 16]| live.contains(&token))
}

/// The chunks of one streamed body, removed on drop unless an alias names them.
struct Chunks {
    store: Arc<dyn Store>,
    db: u64,
    token: [u8; 16],
    /// The MD5 whose alias keeps the chunks (known once the body is complete).
    md5: Option<[u8; 16]>,
}

/// An attachment body being received.
pub struct Upload {
    chunks: Chunks,
    name: String,
    max: u64,
    encoder: Encoder,
    length: u64,
    count: u64,
}

/// A received attachment body, stored under its token.
pub struct Uploaded {
    chunks: Chunks,
    pub encoded: Encoded,
}

impl Uploaded {
    /// The attachment body to put in a written document.
    pub fn body(&self) -> AttBody {
        let Encoded { md5, length, gzip_length } = self.encoded;
        AttBody::Staged { token: self.chunks.token, md5, length, gzip_length }
    }
}

impl Database {
    /// Starts receiving the body of attachment `name` of `content_type` (which decides
    /// whether it is stored gzipped: `[attachments]` settings, `bunko_doc::gzip`).
    pub fn upload(&self, name: &str, content_type: &str) -> Upload {
        let token: [u8; 16] = rand::random();
        LIVE.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).insert(token);
        let chunks = Chunks { store: self.store.clone(), db: self.id(), token, md5: None };
        Upload {
            chunks,
            name: name.to_string(),
            max: self.config.get().max_attachment_size,
            encoder: Encoder::new(&self.config.get().att_gzip, content_type),
            length: 0,
            count: 0,
        }
    }
}

impl Upload {
    /// Takes the next bytes of the body.
    pub fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.length += bytes.len() as u64;
        if self.length > self.max {
            return Err(Error::AttachmentTooLarge(self.name.clone()));
        }
        self.encoder.write(bytes);
        while self.encoder.output().len() >= CHUNK {
            let rest = self.encoder.output().split_off(CHUNK);
            let chunk = std::mem::replace(self.encoder.output(), rest);
            self.flush(chunk)?;
        }
        Ok(())
    }

    /// The body is complete.
    pub fn finish(self) -> Result<Uploaded> {
        let Upload { mut chunks, mut encoder, mut count, .. } = self;
        let mut stored = std::mem::take(encoder.output());
        let (encoded, tail) = encoder.finish();
        stored.extend_from_slice(&tail);
        for chunk in stored.chunks(CHUNK) {
            chunks.put(count, chunk.to_vec())?;
            count += 1;
        }
        chunks.md5 = Some(encoded.md5);
        Ok(Uploaded { chunks, encoded })
    }

    fn flush(&mut self, chunk: Vec<u8>) -> Result<()> {
        self.chunks.put(self.count, chunk)?;
        self.count += 1;
        Ok(())
    }
}

impl Chunks {
    /// Stores chunk `n` (without waiting for a sync: the document's commit syncs it).
    fn put(&self, n: u64, chunk: Vec<u8>) -> Result<()> {
        let mut batch = Batch::new();
        batch.put(Key::AttChunk(self.db, &self.token, n).encode(), chunk);
        self.store.apply(batch)?;
        Ok(())
    }

    /// Whether a committed alias names these chunks.
    fn kept(&self) -> Result<bool> {
        let Some(md5) = self.md5 else { return Ok(false) };
        let alias = self.store.get(&Key::AttAlias(self.db, &md5).encode())?;
        Ok(alias.as_deref() == Some(self.token.as_slice()))
    }

    fn remove(&self) -> Result<()> {
        let mut range = keys::att_body_range(self.db, &self.token);
        loop {
            let page = self.store.scan(&range, false, 64)?;
            let Some((last, _)) = page.last() else { return Ok(()) };
            range.0 = std::ops::Bound::Excluded(last.clone());
            let mut batch = Batch::new();
            for (key, _) in page {
                batch.delete(key);
            }
            self.store.apply(batch)?;
        }
    }
}

impl Drop for Chunks {
    fn drop(&mut self) {
        let removed = match self.kept() {
            Ok(true) => Ok(()),
            _ => self.remove(),
        };
        if let Err(err) = removed {
            tracing::warn!(%err, "removing a streamed attachment failed; compaction removes it");
        }
        LIVE.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).remove(&self.token);
    }
}

#[cfg(test)]
mod tests {
    use bunko_doc::body::ParsedDoc;
    use bunko_storage::Store;

    use super::*;
    use crate::security::UserCtx;
    use crate::{Config, Engine, WriteOptions};

    fn chunk_sizes(store: &dyn Store, db: u64) -> Result<Vec<usize>> {
        Ok(store.scan(&keys::att_range(db), false, 100)?.iter().map(|(_, v)| v.len()).collect())
    }

    #[test]
    fn a_streamed_body_is_chunked_hashed_and_kept_only_when_written() -> Result<()> {
        let store: Arc<dyn Store> = Arc::new(bunko_storage::Memory::new());
        let engine = Engine::open(store.clone(), Config::default())?;
        let admin = UserCtx::admin("t");
        let db = engine.create_db(&admin, "atts", false)?;
        let body: Vec<u8> = (0..CHUNK * 2 + 100).map(|i| (i % 251) as u8).collect();
        let receive = || -> Result<Uploaded> {
            let mut upload = db.upload("a.bin", "application/x");
            for piece in body.chunks(1000) {
                upload.write(piece)?;
            }
            upload.finish()
        };
        // Not written: its chunks go when it is dropped.
        drop(receive()?);
        assert!(chunk_sizes(store.as_ref(), db.id())?.is_empty());
        let uploaded = receive()?;
        assert_eq!(uploaded.encoded.length, body.len() as u64);
        assert_eq!(uploaded.encoded.md5, bunko_doc::att::md5(&body));
        assert_eq!(chunk_sizes(store.as_ref(), db.id())?, vec![CHUNK, CHUNK, 100]);
        let mut doc = ParsedDoc { id: Some("d".to_string()), ..Default::default() };
        doc.attachments = Some(vec![bunko_doc::att::AttIn {
            name: "a.bin".to_string(),
            content_type: "application/x".to_string(),
            revpos: None,
            body: uploaded.body(),
        }]);
        db.put(&admin, doc, WriteOptions::default())?;
        drop(uploaded);
        assert_eq!(db.attachment_data(&bunko_doc::att::md5(&body))?, body);
        // The same bytes again are stored once: the second upload's chunks go.
        let again = receive()?;
        db.put_attachment(&admin, "e", None, "b.bin", "application/x", again.body())?;
        drop(again);
        assert_eq!(chunk_sizes(store.as_ref(), db.id())?, vec![CHUNK, CHUNK, 100]);
        Ok(())
    }

    #[test]
    fn a_body_past_the_limit_fails_and_leaves_nothing() -> Result<()> {
        let store: Arc<dyn Store> = Arc::new(bunko_storage::Memory::new());
        let config = Config { max_attachment_size: CHUNK as u64 + 1, ..Config::default() };
        let engine = Engine::open(store.clone(), config)?;
        let db = engine.create_db(&UserCtx::admin("t"), "atts", false)?;
        let mut upload = db.upload("big", "application/octet-stream");
        upload.write(&vec![7; CHUNK])?;
        let err = upload.write(&[1, 2]).err();
        assert!(matches!(err, Some(Error::AttachmentTooLarge(name)) if name == "big"));
        drop(upload);
        assert!(chunk_sizes(store.as_ref(), db.id())?.is_empty());
        Ok(())
    }
}
