//! Change events for MongoDB change streams, read from the change journal: one `Event`
//! entry per write, keyed by the write's seq (the same seq as the `_changes` entry it made)
//! and never moved, so, unlike the `Seq` entries (one per document: its latest change), a
//! reader that falls behind still sees every write in order.
//!
//! Each entry becomes one [`ChangeEvent`]: the revision written, its body, and what came
//! before it (the parent revision's body while it is stored: non-leaf bodies stay until
//! `_compact` or `revs_limit` removes them). `_compact` also trims the journal up to where
//! it started, so a stream can resume from any point after the last compaction
//! (`Database::trim_journal`); before it, [`Database::change_events`] reports the history
//! lost rather than skip writes. A `_purge` that removes a whole document journals it too,
//! as a deletion with no body (`crate::purge`).

use std::ops::Bound;

use bunko_doc::RevId;
use bunko_storage::{Iter, Read, Snapshot};

use crate::database::Database;
use crate::keys::{self, Key};
use crate::read::{body_of, doc_record_in};
use crate::records::ChangeRecord;
use crate::security::UserCtx;
use crate::{Error, Result};

/// What preceded an event's revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Before {
    /// The revision is the document's first.
    Nothing,
    /// The parent revision is a deletion (the document was re-created).
    Deleted,
    /// The parent revision's body (compact JSON).
    Body(Vec<u8>),
    /// The parent's body is no longer stored (compacted or stemmed).
    Unavailable,
}

/// One write of one document.
#[derive(Debug, Clone)]
pub struct ChangeEvent {
    pub seq: u64,
    pub id: String,
    pub rev: RevId,
    pub deleted: bool,
    /// When the write was made, milliseconds since the Unix epoch.
    pub ms: u64,
    /// The revision's body (compact JSON); `None` if it is no longer stored.
    pub body: Option<Vec<u8>>,
    pub before: Before,
    /// The write replaced the whole document (MongoDB's `replaceOne`).
    pub replacement: bool,
}

/// A batch of events and the seq they reach; `None` when writes after the asked position
/// are no longer in the journal (trimmed by `_compact`).
pub type Events = Option<(Vec<ChangeEvent>, u64)>;

impl Database {
    /// Up to `limit` change events after `since`, in seq order, from one snapshot, and the
    /// seq they reach (`since` when there are none). Only durable writes are read (an
    /// event is never reported for a write that could still be lost). Design documents
    /// are included (a MongoDB collection's indexes and options live in one, so its writes
    /// are the collection's DDL events); callers that show documents leave them out.
    ///
    /// The read gate: `reader` must be a member who sees the documents whole (the events
    /// carry every document's bodies, so the users database and `_replicator`, whose
    /// documents are filtered per reader, answer only their admins: `403 forbidden`).
    pub fn change_events(&self, reader: &UserCtx, since: u64, limit: u64) -> Result<Events> {
        self.security_object()?.check_member(reader)?;
        if !self.sight(reader)?.is_whole() {
            return Err(Error::Forbidden(format!(
                "Only admins of {} may read its change events.",
                self.name()
            )));
        }
        let durable = *self.subscribe().borrow();
        let snapshot = self.snapshot();
        let db = self.id();
        let range = (Bound::Excluded(Key::Event(db, since).encode()), keys::event_range(db).1);
        let mut reached = since;
        let mut events = Vec::new();
        for entry in Iter::new(snapshot.clone(), range, false, 256) {
            let (key, value) = entry?;
            let seq = keys::decode_event(&key)?;
            if seq > durable || events.len() as u64 >= limit {
                break;
            }
            if reached == since && seq > since + 1 && self.lost(&snapshot, since, seq)? {
                return Ok(None);
            }
            reached = seq;
            let record = ChangeRecord::decode(&value)?;
            events.push(event(snapshot.as_ref(), db, seq, record)?);
        }
        if events.is_empty() && reached == since && self.lost(&snapshot, since, durable + 1)? {
            return Ok(None);
        }
        Ok(Some((events, reached)))
    }

    /// The seq before the first write made at or after `ms` (where a stream that starts
    /// at that time begins): the journal is scanned from its start.
    pub fn seq_before(&self, ms: u64) -> Result<u64> {
        let mut before = 0;
        for entry in Iter::new(self.snapshot(), keys::event_range(self.id()), false, 256) {
            let (key, value) = entry?;
            let record = ChangeRecord::decode(&value)?;
            if record.ms >= ms {
                break;
            }
            before = keys::decode_event(&key)?;
        }
        Ok(before)
    }

    /// When the last journaled write was made (ms since the Unix epoch), if any: where a
    /// clock that must not go back across restarts (MongoDB's cluster time) resumes.
    pub fn last_write_ms(&self) -> Result<Option<u64>> {
        let entry = Iter::new(self.snapshot(), keys::event_range(self.id()), true, 1).next();
        let Some(entry) = entry else { return Ok(None) };
        let (_, value) = entry?;
        Ok(Some(ChangeRecord::decode(&value)?.ms))
    }

    /// Removes the journal entries up to `seq` (`_compact`, which removes the bodies the
    /// older events would need).
    pub(crate) fn trim_journal(&self, seq: u64) -> Result<()> {
        let db = self.id();
        let range = (keys::event_range(db).0, Bound::Included(Key::Event(db, seq).encode()));
        crate::catalog::remove_range(self.store.as_ref(), &range)
    }

    /// Whether a document changed after `since` and before `until` but the journal has no
    /// entry for it (trimmed): a `Seq` entry in between is such a change.
    fn lost(&self, snapshot: &Snapshot, since: u64, until: u64) -> Result<bool> {
        let db = self.id();
        let range = (
            Bound::Excluded(Key::Seq(db, since).encode()),
            Bound::Excluded(Key::Seq(db, until).encode()),
        );
        let Some((key, _)) = snapshot.scan(&range, false, 1)?.into_iter().next() else {
            return Ok(false);
        };
        let first = keys::decode_seq(&key)?;
        Ok(snapshot.get(&Key::Event(db, first).encode())?.is_none())
    }
}

fn event(read: &dyn Read, db: u64, seq: u64, record: ChangeRecord) -> Result<ChangeEvent> {
    let ChangeRecord { id, rev, ms, replacement } = record;
    if rev.pos == ChangeRecord::PURGED {
        // Purged whole: nothing of it is left to show.
        let before = Before::Unavailable;
        let (deleted, body) = (true, None);
        return Ok(ChangeEvent { seq, id, rev, deleted, ms, body, before, replacement });
    }
    let record = doc_record_in(read, db, &id)?;
    let tree = record.as_ref().map(|r| &r.info.tree);
    let node = tree.and_then(|t| t.find(&rev).and_then(|i| t.node(i)));
    let deleted = node.is_some_and(|n| n.deleted);
    let parent = node.and_then(|n| n.parent).and_then(|p| tree.and_then(|t| t.node(p)));
    let before = match parent {
        None if rev.pos > 1 => Before::Unavailable,
        None => Before::Nothing,
        Some(node) if node.deleted => Before::Deleted,
        Some(node) => match body_of(read, db, &id, &node.rev, record.as_ref())? {
            Some(body) => Before::Body(body),
            None => Before::Unavailable,
        },
    };
    let body = body_of(read, db, &id, &rev, record.as_ref())?;
    Ok(ChangeEvent { seq, id, rev, deleted, ms, body, before, replacement })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bunko_storage::Memory;

    use super::*;
    use crate::security::UserCtx;
    use crate::{Config, Engine, WriteOptions};

    fn put(db: &Database, json: &str) -> Result<RevId> {
        let doc = bunko_doc::body::parse(json.as_bytes(), &Default::default())?;
        db.put(&UserCtx::admin("t"), doc, WriteOptions::default())
    }

    #[test]
    fn the_journal_keeps_every_write_until_compaction() -> Result<()> {
        let engine = Engine::open(Arc::new(Memory::new()), Config::default())?;
        let db = engine.create_db(&UserCtx::admin("t"), "shop$books", false)?;
        let rev = put(&db, r#"{"_id": "猫", "n": 1}"#)?;
        put(&db, &format!(r#"{{"_id": "猫", "_rev": "{rev}", "n": 2}}"#))?;
        let (events, reached) =
            db.change_events(&UserCtx::admin("t"), 0, 10)?.ok_or(Error::Corrupt("lost".into()))?;
        assert_eq!(reached, 2);
        assert_eq!(events.iter().map(|e| (e.seq, e.rev.pos)).collect::<Vec<_>>(), [(1, 1), (2, 2)]);
        assert_eq!(events[0].before, Before::Nothing);
        assert_eq!(events[1].before, Before::Body(br#"{"n":1}"#.to_vec()));
        assert_eq!(events[1].body.as_deref(), Some(br#"{"n":2}"#.as_slice()));
        let (rest, _) =
            db.change_events(&UserCtx::admin("t"), 1, 10)?.ok_or(Error::Corrupt("lost".into()))?;
        assert_eq!(rest.len(), 1);
        db.compact()?;
        assert!(
            db.change_events(&UserCtx::admin("t"), 0, 10)?.is_none(),
            "history before the compaction is lost"
        );
        let (after, reached) =
            db.change_events(&UserCtx::admin("t"), 2, 10)?.ok_or(Error::Corrupt("lost".into()))?;
        assert!(after.is_empty() && reached == 2);
        Ok(())
    }

    #[test]
    fn only_readers_who_see_documents_whole_read_the_journal() -> Result<()> {
        let engine = Engine::open(Arc::new(Memory::new()), Config::default())?;
        let admin = UserCtx::admin("t");
        let user = |name: &str| UserCtx { name: Some(name.into()), roles: Vec::new() };
        let db = engine.create_db(&admin, "people", false)?;
        db.set_security(&admin, r#"{"members": {"names": ["bob"]}}"#.to_string())?;
        put(&db, r#"{"_id": "ann"}"#)?;
        assert_eq!(db.change_events(&user("bob"), 0, 10)?.map(|(e, _)| e.len()), Some(1));
        let outsider = db.change_events(&user("eve"), 0, 10);
        assert!(matches!(outsider, Err(Error::Forbidden(_))), "{outsider:?}");
        // A member of `_replicator` sees others' documents without credentials: no journal.
        let replicator = match engine.db("_replicator") {
            Ok(db) => db,
            Err(_) => engine.create_db(&admin, "_replicator", false)?,
        };
        replicator.set_security(&admin, r#"{"members": {"names": ["bob"]}}"#.to_string())?;
        let member = replicator.change_events(&user("bob"), 0, 10);
        assert!(matches!(member, Err(Error::Forbidden(_))), "{member:?}");
        assert!(replicator.change_events(&admin, 0, 10).is_ok());
        Ok(())
    }

    #[test]
    fn a_purged_document_is_journaled_as_a_deletion() -> Result<()> {
        let engine = Engine::open(Arc::new(Memory::new()), Config::default())?;
        let db = engine.create_db(&UserCtx::admin("t"), "shop$books", false)?;
        let rev = put(&db, r#"{"_id": "猫", "n": 1}"#)?;
        put(&db, r#"{"_id": "犬", "n": 1}"#)?;
        db.purge(&UserCtx::admin("t"), vec![("猫".to_string(), vec![rev])])?;
        let (events, reached) =
            db.change_events(&UserCtx::admin("t"), 2, 10)?.ok_or(Error::Corrupt("lost".into()))?;
        assert_eq!(reached, 3);
        assert_eq!(events.len(), 1);
        let purged = &events[0];
        assert_eq!((purged.seq, purged.id.as_str(), purged.deleted), (3, "猫", true));
        assert_eq!((purged.body.as_ref(), &purged.before), (None, &Before::Unavailable));
        Ok(())
    }
}
