//! One engine [`ChangeEvent`] as a MongoDB change event: `operationType` from the revision
//! (first revision or one after a deletion: `insert`; a deletion: `delete`; otherwise
//! `update` with the diff of the parent and new bodies, or `replace` when the edit removed
//! fields and kept none), `documentKey`, `fullDocument` and `fullDocumentBeforeChange` as
//! the stream asked.

use bson::{Bson, Document, doc};
use bunko_doc::ejson;
use bunko_engine::Database;
use bunko_engine::events::{Before, ChangeEvent};
use serde_json::{Map, Value};

use super::diff::Diff;
use super::{BeforeMode, FullMode};
use crate::error::MongoError;
use crate::names::Namespace;

/// What an event is rendered with.
pub(super) struct Render<'a> {
    pub db: &'a Database,
    /// Who watches: `fullDocument` lookups show documents as they may see them.
    pub user: &'a bunko_engine::security::UserCtx,
    pub ns: &'a Namespace,
    pub full: FullMode,
    pub before: BeforeMode,
    /// Whether the collection keeps pre- and post-images (`changeStreamPreAndPostImages`).
    pub images: bool,
    /// `showExpandedEvents`: events carry `collectionUUID`.
    pub expanded: bool,
}

/// The MongoDB document of a stored body (`_id` first).
pub(crate) fn stored_doc(id: &str, body: &[u8]) -> Option<Document> {
    let map: Map<String, Value> = serde_json::from_slice(body).ok()?;
    let mut doc = doc! {"_id": ejson::id_value(id)};
    doc.extend(ejson::from_json(&map));
    doc.remove("_attachments");
    Some(doc)
}

/// The common fields of every event of `ns`, for a write made at `ms` (milliseconds since
/// the Unix epoch) with `seq`. `clusterTime` is the second of the write and the seq's low
/// 32 bits, which orders the events of one collection.
pub(super) fn header(token: Document, op: &str, ns: &Namespace, ms: u64, seq: u64) -> Document {
    let time = u32::try_from(ms / 1000).unwrap_or(u32::MAX);
    let millis = i64::try_from(ms).unwrap_or(i64::MAX);
    doc! {
        "_id": token,
        "operationType": op,
        "clusterTime": bson::Timestamp { time, increment: seq as u32 },
        "wallTime": bson::DateTime::from_millis(millis),
        "ns": {"db": &ns.db, "coll": &ns.coll},
    }
}

/// Milliseconds since the Unix epoch, now.
pub(super) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default()
}

impl Render<'_> {
    pub fn event(&self, token: Document, ev: &ChangeEvent) -> Result<Document, MongoError> {
        let key = doc! {"_id": ejson::id_value(&ev.id)};
        let new = ev.body.as_deref().and_then(|b| stored_doc(&ev.id, b));
        let old = match &ev.before {
            Before::Body(body) => stored_doc(&ev.id, body),
            _ => None,
        };
        let op = match (&ev.before, ev.deleted) {
            (_, true) => "delete",
            (Before::Nothing | Before::Deleted, false) => "insert",
            (Before::Unavailable, false) => "replace",
            (Before::Body(_), false) if ev.replacement => "replace",
            (Before::Body(_), false) => match (&old, &new) {
                (Some(old), Some(new)) if !Diff::between(old, new).is_replacement(old, new) => {
                    "update"
                }
                _ => "replace",
            },
        };
        let mut out = header(token, op, self.ns, ev.ms, ev.seq);
        if self.expanded {
            out.insert("collectionUUID", super::ddl::uuid(self.db.id()));
        }
        out.insert("documentKey", key);
        match op {
            "insert" | "replace" => {
                out.insert("fullDocument", new.clone().map_or(Bson::Null, Bson::Document));
            }
            "update" => {
                if let (Some(old), Some(new)) = (&old, &new) {
                    out.insert("updateDescription", Diff::between(old, new).to_doc(self.expanded));
                }
                if let Some(full) = self.full_document(&ev.id, new)? {
                    out.insert("fullDocument", full);
                }
            }
            _ => {}
        }
        if op != "insert"
            && let Some(before) = self.before(old)?
        {
            out.insert("fullDocumentBeforeChange", before);
        }
        Ok(out)
    }

    fn full_document(&self, id: &str, post: Option<Document>) -> Result<Option<Bson>, MongoError> {
        let doc = match self.full {
            FullMode::Default => return Ok(None),
            FullMode::UpdateLookup => match self.db.get(self.user, id, None) {
                Ok(found) if !found.deleted => stored_doc(id, &found.body),
                Ok(_) | Err(bunko_engine::Error::NotFound(_)) => None,
                Err(err) => return Err(err.into()),
            },
            FullMode::WhenAvailable => post.filter(|_| self.images),
            FullMode::Required => match post.filter(|_| self.images) {
                Some(doc) => Some(doc),
                None => return Err(no_image("post-image", self.ns)),
            },
        };
        Ok(Some(doc.map_or(Bson::Null, Bson::Document)))
    }

    fn before(&self, old: Option<Document>) -> Result<Option<Bson>, MongoError> {
        let doc = match self.before {
            BeforeMode::Off => return Ok(None),
            BeforeMode::WhenAvailable => old.filter(|_| self.images),
            BeforeMode::Required => match old.filter(|_| self.images) {
                Some(doc) => Some(doc),
                None => return Err(no_image("pre-image", self.ns)),
            },
        };
        Ok(Some(doc.map_or(Bson::Null, Bson::Document)))
    }
}

/// MongoDB's `NoMatchingDocument` (47) for a required image that is not there.
fn no_image(what: &str, ns: &Namespace) -> MongoError {
    MongoError::new(
        47,
        "NoMatchingDocument",
        format!(
            "Change stream was configured to require a {what} for all update, delete and replace events, but the {what} was not available for namespace {}",
            ns.full()
        ),
    )
}
