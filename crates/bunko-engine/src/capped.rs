//! Capped databases (MongoDB capped collections): their limits, their insertion order
//! (MongoDB's *natural order*) and the removal of their oldest documents, all on the one
//! write path ([`Database::update_docs`], triggers and transactions stage through the same
//! code), so writes over HTTP are capped exactly as MongoDB inserts are.
//!
//! - **Limits**: a database is capped when its `_design/mongodb` holds `options` with
//!   `capped: true`, `size` (bytes) and optionally `max` (documents), as the MongoDB front
//!   end writes them at `create` and `collMod`. They are read once under the writer lock
//!   and kept until a design document is written.
//! - **Insertion order**: a normal document that becomes live (an insert, a re-creation
//!   after a deletion, a replicated winner) gets `Natural(db, n) → id` and
//!   `NaturalOf(db, id) → n` in the commit that writes it, `n` being the seq that write got;
//!   an update leaves both where they are, so the document keeps its place; a document that
//!   stops being live (deletion, purge) loses both in its commit.
//! - **Capping**: a commit that inserts at least one document removes, in the same commit,
//!   the oldest documents (by `n`, this commit's own inserts last) while the database holds
//!   more than `max` documents (design documents not counted) or more than `size` bytes of
//!   live bodies (`sizes.external`, MongoDB's `collStats` `size`). The removals are
//!   ordinary deletions by the engine itself: `_changes`, change streams, indexes and
//!   replication see them as such; no validation function runs on them. Updates and
//!   deletions never remove anything (MongoDB removes on insert only; a `collMod` that
//!   lowers the limits takes effect at the next insert). A document larger than `size` is
//!   refused ([`Error::CappedTooLarge`]).
//! - **Databases capped before the order was kept** (no `NaturalFrom(db)` marker) derive it
//!   once, from their `_changes` order (which was their insertion order: updates of capped
//!   documents were refused then), in the commit of their first write or, if a read comes
//!   first, in a commit of its own ([`Database::natural_page`]).

use std::collections::HashMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};

use bunko_doc::body::ParsedDoc;
use bunko_doc::id::{DocKind, kind};
use bunko_storage::{Batch, Iter};
use parking_lot::Mutex;
use serde_json::Value;

use crate::database::Database;
use crate::keys::{self, Key};
use crate::records::{self, DocInfo};
use crate::write::{Run, WriteOptions};
use crate::{Error, Result};

/// The design document whose `options` make a database capped.
const MONGO_DDOC: &str = "_design/mongodb";

/// A capped database's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cap {
    /// The most bytes of live bodies.
    pub size: u64,
    /// The most documents.
    pub max: Option<u64>,
}

/// What the engine keeps in memory of a capped database.
#[derive(Debug, Default)]
pub(crate) struct CapState {
    /// The limits read under the writer lock; `None` inside until read.
    loaded: Mutex<Option<Option<Cap>>>,
    /// No `Natural` key below this position is stored: the first one a scan from the
    /// start of the order found. Scans start here, so they do not step again over what
    /// removed entries leave in the store until its compaction (`n` only grows, so it
    /// stays true; rebuilt from 0 at start-up).
    first: AtomicU64,
}

/// What one batch changes in a capped database's order.
#[derive(Debug, Default)]
pub(crate) struct Lives {
    /// Documents that became live (`true`) or stopped being live, with their write's seq.
    changes: Vec<(String, u64, bool)>,
    /// The `n` this batch gives each document (derived or inserted), in `n` order.
    added: Vec<(u64, String)>,
    added_of: HashMap<String, u64>,
}

impl Lives {
    /// Records that document `id`, written with `seq`, became live or stopped being live.
    pub(crate) fn lived(&mut self, id: &str, seq: u64, live: bool) {
        self.changes.push((id.to_string(), seq, live));
    }

    fn add(&mut self, batch: &mut Batch, db: u64, id: String, n: u64) {
        batch.put(Key::Natural(db, n).encode(), id.as_bytes().to_vec());
        batch.put(Key::NaturalOf(db, &id).encode(), n.to_be_bytes().to_vec());
        self.added_of.insert(id.clone(), n);
        self.added.push((n, id));
    }
}

/// The limits in a `_design/mongodb` `options` object (Extended JSON).
fn parse(options: Option<&Value>) -> Option<Cap> {
    let Some(Value::Object(options)) = options else { return None };
    let options = bunko_doc::ejson::from_json(options);
    if !matches!(options.get("capped"), Some(bson::Bson::Boolean(true))) {
        return None;
    }
    let number = |name: &str| match options.get(name)? {
        bson::Bson::Int32(n) => u64::try_from(*n).ok(),
        bson::Bson::Int64(n) => u64::try_from(*n).ok(),
        bson::Bson::Double(d) if *d >= 0.0 => Some(d.ceil() as u64),
        bson::Bson::Decimal128(d) => d.to_string().parse::<f64>().ok().map(|d| d.ceil() as u64),
        _ => None,
    };
    let max = number("max").filter(|m| *m > 0);
    Some(Cap { size: number("size")?, max })
}

impl Database {
    /// The limits of this database if it is capped, as stored now.
    pub fn cap(&self) -> Result<Option<Cap>> {
        Ok(self.design_body(MONGO_DDOC)?.and_then(|body| parse(body.get("options"))))
    }

    /// Whether this database is capped: the limits a write kept under the writer lock
    /// when there are some, else as stored now (readers do not keep what they read: a
    /// design document written meanwhile could leave it stale).
    pub fn is_capped(&self) -> Result<bool> {
        if let Some(cap) = *self.capped.loaded.lock() {
            return Ok(cap.is_some());
        }
        Ok(self.cap()?.is_some())
    }

    /// [`Database::cap`], kept until a design document is written; call under the writer
    /// lock.
    pub(crate) fn cap_locked(&self) -> Result<Option<Cap>> {
        let mut loaded = self.capped.loaded.lock();
        if let Some(cap) = *loaded {
            return Ok(cap);
        }
        let cap = self.cap()?;
        *loaded = Some(cap);
        Ok(cap)
    }

    /// Forgets the limits (a design document changed); called under the writer lock.
    pub(crate) fn forget_cap(&self) {
        *self.capped.loaded.lock() = None;
    }

    /// Refuses to insert a document of `size` bytes into a capped database it cannot fit.
    pub(crate) fn check_cap_size(&self, size: u64) -> Result<()> {
        match self.cap_locked()? {
            Some(cap) if size > cap.size => Err(Error::CappedTooLarge(format!(
                "document is larger than capped size {size} > {}",
                cap.size
            ))),
            _ => Ok(()),
        }
    }

    /// Adds to `batch` what a capped database's staged writes change in its order, and the
    /// removals its limits need (see the module docs).
    pub(crate) fn stage_cap(&self, run: &mut Run<'_>, batch: &mut Batch) -> Result<()> {
        let Some(cap) = self.cap_locked()? else { return Ok(()) };
        self.derive_natural(batch, &mut run.pending.natural)?;
        if self.order_lives(run, batch)? {
            self.evict(run, batch, cap)?;
            self.order_lives(run, batch)?;
        }
        Ok(())
    }

    /// Writes the order keys of the documents that became live or stopped being live;
    /// returns whether any became live.
    fn order_lives(&self, run: &mut Run<'_>, batch: &mut Batch) -> Result<bool> {
        let db = self.id();
        let lives = &mut run.pending.natural;
        let mut inserted = false;
        for (id, seq, live) in std::mem::take(&mut lives.changes) {
            if live {
                lives.add(batch, db, id, seq);
                inserted = true;
            } else if let Some(n) = self.natural_of(lives, &id)? {
                batch.delete(Key::Natural(db, n).encode());
                batch.delete(Key::NaturalOf(db, &id).encode());
                lives.added_of.remove(&id);
            }
        }
        Ok(inserted)
    }

    /// The `n` of document `id`: given by this batch, else stored.
    fn natural_of(&self, lives: &Lives, id: &str) -> Result<Option<u64>> {
        if let Some(n) = lives.added_of.get(id) {
            return Ok(Some(*n));
        }
        let stored = self.store.get(&Key::NaturalOf(self.id(), id).encode())?;
        Ok(stored.and_then(|b| <[u8; 8]>::try_from(b.as_slice()).ok()).map(u64::from_be_bytes))
    }

    /// Adds to `batch` the removal of document `id` from the natural order, if it is in it
    /// (a purge).
    pub(crate) fn unorder(&self, batch: &mut Batch, id: &str) -> Result<()> {
        if let Some(n) = self.natural_of(&Lives::default(), id)? {
            batch.delete(Key::Natural(self.id(), n).encode());
            batch.delete(Key::NaturalOf(self.id(), id).encode());
        }
        Ok(())
    }

    /// Whether the staged counters are past `cap`, `designs` of the documents being design
    /// documents (which `max` does not count, and which are never removed).
    fn over(&self, run: &Run<'_>, cap: Cap, designs: u64) -> bool {
        let count = run.stats.doc_count.saturating_sub(designs);
        run.stats.external > cap.size || cap.max.is_some_and(|max| count > max)
    }

    /// The live design documents once the staged writes are applied.
    fn design_docs(&self, run: &Run<'_>) -> Result<u64> {
        let mut live = std::collections::HashSet::new();
        for (key, info) in
            self.store.scan_heads(&keys::doc_prefix(self.id(), "_design/"), false, usize::MAX)?
        {
            let info: DocInfo = records::decode(&info)?;
            if !info.winner()?.1 {
                live.insert(keys::decode_doc(&key)?);
            }
        }
        for (id, body) in &run.pending.ddocs {
            match body {
                Some(_) => live.insert(id.clone()),
                None => live.remove(id),
            };
        }
        Ok(live.len() as u64)
    }

    /// Stages the removal of the oldest documents while the database is past `cap`: the
    /// stored order first, then what this batch derived or inserted.
    fn evict(&self, run: &mut Run<'_>, batch: &mut Batch, cap: Cap) -> Result<()> {
        let designs = self.design_docs(run)?;
        if !self.over(run, cap, designs) {
            return Ok(());
        }
        let snapshot = self.store.snapshot();
        let mut first = true;
        for entry in Iter::new(snapshot, self.natural_from_first(), false, 256).first_page(4) {
            let (key, id) = entry?;
            let (n, id) = (keys::decode_natural(&key)?, String::from_utf8_lossy(&id).into_owned());
            if std::mem::take(&mut first) {
                self.capped.first.fetch_max(n, Ordering::Relaxed);
            }
            if self.evict_one(run, batch, n, &id)? && !self.over(run, cap, designs) {
                return Ok(());
            }
        }
        let mut own = run.pending.natural.added.clone();
        own.sort();
        for (n, id) in own {
            if self.evict_one(run, batch, n, &id)? && !self.over(run, cap, designs) {
                return Ok(());
            }
        }
        Ok(())
    }

    /// The `Natural` keys from the first one still stored on.
    pub(crate) fn natural_from_first(&self) -> bunko_storage::Range {
        let (_, end) = keys::natural_range(self.id());
        let first = self.capped.first.load(Ordering::Relaxed);
        (Bound::Included(Key::Natural(self.id(), first).encode()), end)
    }

    /// Stages the removal of the document at `n` if it is still live there.
    fn evict_one(&self, run: &mut Run<'_>, batch: &mut Batch, n: u64, id: &str) -> Result<bool> {
        if self.natural_of(&run.pending.natural, id)? != Some(n) {
            return Ok(false);
        }
        let Some(info) = self.current(&mut run.pending, self.id(), id)? else { return Ok(false) };
        let (rev, deleted) = info.winner()?;
        if deleted {
            return Ok(false);
        }
        let doc = ParsedDoc {
            id: Some(id.to_string()),
            rev: Some(rev.clone()),
            deleted: true,
            ..Default::default()
        };
        self.stage_doc(run, batch, id, doc, WriteOptions::default(), true)?;
        Ok(true)
    }

    /// For a database capped before its order was kept: adds to `batch` the order of its
    /// live documents (their `_changes` order) and the marker; nothing if it has one.
    /// Returns whether it derived. Call under the writer lock.
    fn derive_natural(&self, batch: &mut Batch, lives: &mut Lives) -> Result<bool> {
        let db = self.id();
        if self.store.get(&Key::NaturalFrom(db).encode())?.is_some() {
            return Ok(false);
        }
        let snapshot = self.store.snapshot();
        let mut last = 0;
        for entry in Iter::new(snapshot, keys::seq_range(db), false, 1000) {
            let (key, id) = entry?;
            let (seq, id) = (keys::decode_seq(&key)?, String::from_utf8_lossy(&id).into_owned());
            last = seq;
            if kind(&id) != DocKind::Normal {
                continue;
            }
            let Some(info) = self.store.get_head(&Key::Doc(db, &id).encode())? else { continue };
            let info: DocInfo = records::decode(&info)?;
            if !info.winner()?.1 {
                lives.add(batch, db, id, seq);
            }
        }
        batch.put(Key::NaturalFrom(db).encode(), records::encode(&last));
        Ok(true)
    }

    /// Derives the order of a database capped before it was kept, in a commit of its own,
    /// if no write did yet.
    pub(crate) fn ensure_natural(&self) -> Result<()> {
        if self.store.get(&Key::NaturalFrom(self.id()).encode())?.is_some() {
            return Ok(());
        }
        let writer = self.lock_writer()?;
        if self.cap_locked()?.is_none() {
            return Ok(());
        }
        let mut batch = Batch::new();
        if !self.derive_natural(&mut batch, &mut Lives::default())? {
            return Ok(());
        }
        let (seq, stats) = (writer.seq, writer.stats);
        batch.put(Key::Stats(self.id()).encode(), records::encode(&stats));
        self.commit_locked(writer, batch, &Default::default(), seq, stats)
    }

    /// One page of a capped database's natural (insertion) order: up to `limit` pairs of
    /// position and document id, after position `after` (before it when `descending`),
    /// oldest first (newest first when `descending`). Reads the latest applied state.
    pub fn natural_page(
        &self,
        after: Option<u64>,
        descending: bool,
        limit: usize,
    ) -> Result<Vec<(u64, String)>> {
        self.ensure_natural()?;
        let db = self.id();
        let mut range = match (after, descending) {
            (Some(n), _) => keys::natural_bound(db, n, !descending),
            (None, false) => self.natural_from_first(),
            (None, true) => keys::natural_range(db),
        };
        let mut out = Vec::new();
        while out.len() < limit {
            let page = self.store.scan(&range, descending, limit - out.len())?;
            let Some((last, _)) = page.last() else { break };
            let at = Bound::Excluded(last.clone());
            if descending {
                range.1 = at
            } else {
                range.0 = at
            }
            let full = page.len() == limit - out.len();
            for (key, id) in page {
                let (n, id) =
                    (keys::decode_natural(&key)?, String::from_utf8_lossy(&id).into_owned());
                // A key left by a document removed while the database was not capped.
                if self.natural_of(&Lives::default(), &id)? == Some(n) {
                    out.push((n, id));
                }
            }
            if !full {
                break;
            }
        }
        Ok(out)
    }

    /// Whether document `id` is still at position `n` of the natural order (a tailable
    /// cursor's position: gone once the document is removed).
    pub fn natural_holds(&self, n: u64, id: &str) -> Result<bool> {
        let found = self.store.get(&Key::Natural(self.id(), n).encode())?;
        Ok(found.as_deref() == Some(id.as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bunko_doc::body;
    use bunko_storage::Memory;

    use super::*;
    use crate::security::UserCtx;
    use crate::{Config, Engine};

    type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

    fn put(db: &Database, json: &str) -> Result<bunko_doc::RevId> {
        let doc = body::parse(json.as_bytes(), &Default::default())?;
        Ok(db.put(&UserCtx::admin("t"), doc, WriteOptions::default())?)
    }

    fn order(db: &Database) -> Result<Vec<String>> {
        Ok(db.natural_page(None, false, 100)?.into_iter().map(|(_, id)| id).collect())
    }

    /// A capped database of at most 3 documents holding `ids`, inserted in that order.
    fn capped(ids: &[&str]) -> Result<Arc<Database>> {
        let engine = Engine::open(Arc::new(Memory::new()), Config::default())?;
        let db = engine.create_db(&UserCtx::admin("t"), "shop$log", false)?;
        put(
            &db,
            r#"{"_id":"_design/mongodb","language":"mongodb","options":{"capped":true,"size":100000,"max":3}}"#,
        )?;
        for id in ids {
            put(&db, &format!(r#"{{"_id":"{id}"}}"#))?;
        }
        Ok(db)
    }

    /// Makes `db` look as capped databases looked before the order was kept.
    fn forget_order(db: &Database, ids: &[&str]) -> Result<()> {
        let mut batch = Batch::new();
        for (key, _) in db.store.scan(&keys::natural_range(db.id()), false, usize::MAX)? {
            batch.delete(key);
        }
        for id in ids {
            batch.delete(Key::NaturalOf(db.id(), id).encode());
        }
        batch.delete(Key::NaturalFrom(db.id()).encode());
        let _ = db.store.apply(batch)?;
        Ok(())
    }

    #[test]
    fn updates_keep_their_place_and_inserts_remove_the_oldest() -> Result<()> {
        let db = capped(&["m", "c", "x"])?;
        assert_eq!(order(&db)?, ["m", "c", "x"]);
        let rev = db.current_rev("m")?.ok_or("m")?;
        put(&db, &format!(r#"{{"_id":"m","_rev":"{rev}","grown":"{}"}}"#, "z".repeat(500)))?;
        assert_eq!(order(&db)?, ["m", "c", "x"]);
        put(&db, r#"{"_id":"a"}"#)?;
        assert_eq!(order(&db)?, ["c", "x", "a"], "the oldest insert goes, not the oldest write");
        let too_big = put(&db, &format!(r#"{{"_id":"big","pad":"{}"}}"#, "x".repeat(100_001)));
        assert!(matches!(
            too_big.map_err(|e| e.downcast::<Error>().map(|e| *e)),
            Err(Ok(Error::CappedTooLarge(_)))
        ));
        Ok(())
    }

    #[test]
    fn design_documents_are_not_counted_nor_removed() -> Result<()> {
        let db = capped(&["a", "b", "c"])?;
        put(&db, r#"{"_id":"_design/v","views":{"n":{"map":"function(d){emit(d._id)}"}}}"#)?;
        put(&db, r#"{"_id":"d"}"#)?;
        assert_eq!(order(&db)?, ["b", "c", "d"]);
        assert!(db.current_rev("_design/v")?.is_some());
        Ok(())
    }

    #[test]
    fn an_old_capped_database_derives_its_order_at_the_first_read() -> Result<()> {
        let db = capped(&["q", "b", "y"])?;
        forget_order(&db, &["q", "b", "y"])?;
        assert_eq!(order(&db)?, ["q", "b", "y"]);
        assert!(db.store.get(&Key::NaturalFrom(db.id()).encode())?.is_some());
        put(&db, r#"{"_id":"d"}"#)?;
        assert_eq!(order(&db)?, ["b", "y", "d"]);
        Ok(())
    }

    #[test]
    fn an_old_capped_database_derives_its_order_at_the_first_write() -> Result<()> {
        let db = capped(&["q", "b", "y"])?;
        forget_order(&db, &["q", "b", "y"])?;
        // The first write is an update: the order is derived from before it.
        let rev = db.current_rev("q")?.ok_or("q")?;
        put(&db, &format!(r#"{{"_id":"q","_rev":"{rev}","n":1}}"#))?;
        put(&db, r#"{"_id":"d"}"#)?;
        assert_eq!(order(&db)?, ["b", "y", "d"]);
        Ok(())
    }

    #[test]
    fn deletions_and_purges_leave_the_order() -> Result<()> {
        let db = capped(&["a", "b", "c"])?;
        let at = db.natural_page(None, false, 10)?;
        let rev = db.current_rev("b")?.ok_or("b")?;
        db.delete(&UserCtx::admin("t"), "b", Some(rev))?;
        assert!(!db.natural_holds(at[1].0, "b")?);
        let rev = db.current_rev("c")?.ok_or("c")?;
        db.purge(&UserCtx::admin("t"), vec![("c".to_string(), vec![rev])])?;
        assert!(!db.natural_holds(at[2].0, "c")?);
        assert_eq!(order(&db)?, ["a"]);
        put(&db, r#"{"_id":"b"}"#)?;
        assert_eq!(order(&db)?, ["a", "b"], "a re-created document is a new insert");
        Ok(())
    }
}
