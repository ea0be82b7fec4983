//! Bringing a view index up to date from the `_changes` sequence.
//!
//! [`Database::update_view`] holds the index's build lock and repeats, one page of
//! [`BATCH`] changes at a time, on one snapshot per page:
//! 1. read the `Seq` keys after the checkpoint, and each document's winning body;
//! 2. map the bodies in one `map_batch_json` call;
//! 3. for each document, delete the rows its back-index lists that it no longer emits,
//!    put its new rows and its new back-index;
//! 4. store the checkpoint (the page's last seq and the row counts) in the same commit.
//!
//! Each document has one `Seq` entry, at its latest change, so a document changed several
//! times since the checkpoint is mapped once. A restart resumes from the stored
//! checkpoint. After every write the background indexer (`Database::spawn_view_indexer`)
//! updates every registered index, so views are usually warm when queried.

use std::collections::HashSet;
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bunko_doc::id::{DocKind, kind, partition_of};
use bunko_storage::{Batch, Snapshot};
use serde_json::{Map, Value, json};

use super::entries::{self, BackIndex, ViewMeta};
use super::{GroupDef, Index, order, runtime};
use crate::database::Database;
use crate::keys::{self, Key};
use crate::{Error, Result, records};

/// Changes mapped per commit.
pub const BATCH: usize = 500;

/// Rows whose key is longer than this are not indexed (the store's key limit is 64 KiB).
const MAX_ROW_KEY: usize = 60_000;

impl Database {
    /// Registers the view group of every design document, dropping groups no design
    /// document defines any more, and starts the background indexer.
    pub(crate) fn load_views(&self) -> Result<()> {
        let mut live = Vec::new();
        for (_, def) in self.design_groups()? {
            live.push(def.sig.clone());
            self.view_index(def)?;
        }
        self.views.retain(&live);
        Ok(())
    }

    /// The view group of every design document that has views: `(ddoc id, group)`.
    pub fn design_groups(&self) -> Result<Vec<(String, GroupDef)>> {
        let db = self.id();
        let snapshot = self.store.snapshot();
        let range = keys::doc_prefix(db, "_design/");
        let mut groups = Vec::new();
        for (key, _) in snapshot.scan(&range, false, usize::MAX)? {
            let id = keys::decode_doc(&key)?;
            if let Some(body) = design_body(&snapshot, db, &id)?
                && let Some(def) = GroupDef::from_ddoc(&body, self.is_partitioned())
            {
                groups.push((id, def));
            }
        }
        Ok(groups)
    }

    /// The view group of design document `ddoc`: `404 missing` if the document does not
    /// exist, `None` if it has no views.
    pub fn design_group(&self, ddoc: &str) -> Result<Option<GroupDef>> {
        let snapshot = self.store.snapshot();
        let body = design_body(&snapshot, self.id(), ddoc)?.ok_or_else(crate::error::missing)?;
        Ok(GroupDef::from_ddoc(&body, self.is_partitioned()))
    }

    /// The registered index of `def`, registering it (with its stored checkpoint) if new.
    pub fn view_index(&self, def: GroupDef) -> Result<Arc<Index>> {
        if let Some(index) = self.views.get(&def.sig) {
            return Ok(index);
        }
        let meta = match self.store.get(&entries::meta_key(self.id(), &def.sig))? {
            Some(bytes) => records::decode(&bytes)?,
            None => ViewMeta { seq: 0, rows: vec![0; def.maps.len()] },
        };
        Ok(self.views.insert(def, meta))
    }

    /// After a write: re-reads the view groups if design documents changed, then wakes
    /// the background indexer.
    pub(crate) fn views_after_write(self: &Arc<Self>, ddocs_changed: bool) {
        if ddocs_changed {
            self.views.designs.clear();
        }
        if ddocs_changed && let Err(err) = self.load_views() {
            tracing::warn!(%err, "loading view definitions failed");
        }
        self.spawn_view_indexer();
    }

    /// Starts the background indexer unless it runs already; a running one does another
    /// round, so no write is missed.
    pub(crate) fn spawn_view_indexer(self: &Arc<Self>) {
        if self.views.is_empty() {
            return;
        }
        self.views.dirty.store(true, Ordering::Release);
        if self.views.running.swap(true, Ordering::AcqRel) {
            return;
        }
        let db = self.clone();
        std::thread::spawn(move || {
            loop {
                db.views.dirty.store(false, Ordering::Release);
                for index in db.views.all() {
                    if let Err(err) = db.update_view(&index) {
                        tracing::warn!(%err, sig = index.def.sig, "view update stopped");
                    }
                }
                db.views.running.store(false, Ordering::Release);
                if db.is_dropped()
                    || !db.views.dirty.load(Ordering::Acquire)
                    || db.views.running.swap(true, Ordering::AcqRel)
                {
                    return;
                }
            }
        });
    }

    /// Brings `index` up to the latest change.
    pub fn update_view(&self, index: &Index) -> Result<()> {
        let mut compiled = index.build.lock();
        if compiled.is_none() {
            let maps: Vec<&str> = index.def.maps.iter().map(String::as_str).collect();
            *compiled = Some(runtime().compile_view_set(index.def.lib.as_ref(), &maps)?);
        }
        let Some(views) = compiled.as_ref() else { return Ok(()) };
        while !self.is_dropped() {
            let snapshot = self.store.snapshot();
            let mut meta = index.meta();
            meta.rows.resize(index.def.maps.len(), 0);
            let range = after_seq(self.id(), meta.seq);
            let page = snapshot.scan(&range, false, BATCH)?;
            let Some((last, _)) = page.last() else { return Ok(()) };
            let last = keys::decode_seq(last)?;
            let mut docs = Vec::with_capacity(page.len());
            for (key, id) in &page {
                let seq = keys::decode_seq(key)?;
                let id =
                    String::from_utf8(id.clone()).map_err(|e| Error::Corrupt(e.to_string()))?;
                let input = map_input(&snapshot, self.id(), &index.def, &id, seq)?;
                docs.push((id, input));
            }
            let inputs: Vec<&str> = docs.iter().filter_map(|(_, d)| d.as_deref()).collect();
            let mut outputs = views.map_batch_json(&inputs)?.into_iter();
            let mut batch = Batch::new();
            let mut changes = order::Changes::default();
            for (id, input) in &docs {
                let rows = match input {
                    Some(_) => outputs.next().map(|out| {
                        out.trace(&index.def.sig);
                        out.rows
                    }),
                    None => None,
                };
                let rows = rows.unwrap_or_default();
                self.replace_rows(&index.def, &mut meta, &mut batch, &mut changes, id, rows)?;
            }
            meta.seq = last;
            batch.put(entries::meta_key(self.id(), &index.def.sig), records::encode(&meta));
            let base = |map| entries::row_base(self.id(), &index.def.sig, map, None);
            index.order.commit(self.store.as_ref(), batch, changes, base)?;
            *index.meta.lock() = meta;
            if page.len() < BATCH {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Moves one document's rows from its back-index to `rows` (per map function).
    fn replace_rows(
        &self,
        def: &GroupDef,
        meta: &mut ViewMeta,
        batch: &mut Batch,
        changes: &mut order::Changes,
        id: &str,
        rows: Vec<bunko_js::Rows>,
    ) -> Result<()> {
        let db = self.id();
        let back_key = entries::back_key(db, &def.sig, id);
        let old: BackIndex = match self.store.get(&back_key)? {
            Some(bytes) => records::decode(&bytes)?,
            None => Vec::new(),
        };
        let partition = if def.partitioned { partition_of(id) } else { None };
        let mut new: BackIndex = Vec::new();
        if !def.partitioned || partition.is_some() {
            for (map, rows) in rows.into_iter().enumerate() {
                let base = entries::row_base(db, &def.sig, map as u64, partition);
                for (n, (key, value)) in rows.into_iter().enumerate() {
                    let row_key = entries::row_key(&base, &key, def.raw, id, n as u64);
                    if row_key.len() > MAX_ROW_KEY {
                        tracing::warn!(sig = def.sig, "view key too long, row skipped");
                        continue;
                    }
                    let value = json!([key, id, value]).to_string();
                    batch.put(row_key.clone(), value);
                    new.push((map as u64, row_key));
                }
            }
        }
        changes.record(&old, &new);
        let kept: HashSet<&Vec<u8>> = new.iter().map(|(_, k)| k).collect();
        for (map, key) in &old {
            if !kept.contains(key) {
                batch.delete(key.clone());
            }
            if let Some(count) = meta.rows.get_mut(*map as usize) {
                *count = count.saturating_sub(1);
            }
        }
        for (map, _) in &new {
            if let Some(count) = meta.rows.get_mut(*map as usize) {
                *count += 1;
            }
        }
        if new.is_empty() {
            if !old.is_empty() {
                batch.delete(back_key);
            }
        } else {
            batch.put(back_key, records::encode(&new));
        }
        Ok(())
    }

    /// `POST /{db}/_view_cleanup`: removes the rows of every group no design document
    /// defines. Returns the number of groups removed.
    pub fn view_cleanup(&self) -> Result<usize> {
        let live: Vec<String> = self.design_groups()?.into_iter().map(|(_, d)| d.sig).collect();
        let snapshot = self.store.snapshot();
        let mut removed = 0;
        for (key, _) in snapshot.scan(&entries::meta_range(self.id()), false, usize::MAX)? {
            let Some(sig) = entries::decode_meta(&key) else { continue };
            if live.contains(&sig) {
                continue;
            }
            for range in entries::group_ranges(self.id(), &sig) {
                crate::catalog::remove_range(self.store.as_ref(), &range)?;
            }
            removed += 1;
        }
        self.views.retain(&live);
        Ok(removed)
    }
}

/// The `Seq` keys of `db` after `seq`.
fn after_seq(db: u64, seq: u64) -> bunko_storage::Range {
    (Bound::Excluded(Key::Seq(db, seq).encode()), keys::seq_range(db).1)
}

/// The winning body of a design document, if it exists and is not deleted.
fn design_body(snapshot: &Snapshot, db: u64, id: &str) -> Result<Option<Map<String, Value>>> {
    let Some(info) = snapshot.get(&Key::Doc(db, id).encode())? else { return Ok(None) };
    let info: records::DocInfo = records::decode(&info)?;
    let (rev, deleted) = info.winner()?;
    if deleted {
        return Ok(None);
    }
    let body = snapshot.get(&Key::Rev(db, id, &rev.to_string()).encode())?;
    Ok(body.and_then(|b| serde_json::from_slice::<Map<String, Value>>(&b).ok()))
}

/// The document a map function sees, as JSON text: the winning body with `_id`, `_rev`,
/// `_conflicts` (if any) and `_local_seq` (with `options.local_seq`). `None` when the
/// document is deleted or gone, or is a design document the group does not include.
fn map_input(
    snapshot: &Snapshot,
    db: u64,
    def: &GroupDef,
    id: &str,
    seq: u64,
) -> Result<Option<String>> {
    if kind(id) == DocKind::Design && (!def.include_design || def.partitioned) {
        return Ok(None);
    }
    let Some(info) = snapshot.get(&Key::Doc(db, id).encode())? else { return Ok(None) };
    let info: records::DocInfo = records::decode(&info)?;
    let (rev, deleted) = info.winner()?;
    if deleted {
        return Ok(None);
    }
    let rev = rev.to_string();
    let Some(body) = snapshot.get(&Key::Rev(db, id, &rev).encode())? else { return Ok(None) };
    let Ok(body) = std::str::from_utf8(&body) else { return Ok(None) };
    let inner = body.trim().strip_prefix('{').and_then(|b| b.strip_suffix('}')).unwrap_or("");
    let mut text = format!("{{\"_id\":{},\"_rev\":{}", Value::from(id), Value::from(rev));
    if !inner.trim().is_empty() {
        text.push(',');
        text.push_str(inner);
    }
    let (conflicts, _) = info.tree.conflicts();
    if !conflicts.is_empty() {
        let revs: Vec<String> = conflicts.iter().map(ToString::to_string).collect();
        text.push_str(&format!(",\"_conflicts\":{}", json!(revs)));
    }
    if def.local_seq {
        text.push_str(&format!(",\"_local_seq\":{seq}"));
    }
    text.push('}');
    Ok(Some(text))
}
