//! Bringing a view group's map indexes up to date from the `_changes` sequence.
//!
//! [`Database::update_view`] holds the group's build lock and the build locks of its map
//! indexes, and repeats, one page of at most [`BATCH`] changes at a time, on one snapshot
//! per page:
//! 1. take the map indexes at the lowest checkpoint ([`Step`]); read the `Seq` keys after
//!    it (up to the next higher checkpoint of the group, so a lagging index catches up to
//!    the others and is then mapped together with them), and each document's winning body;
//! 2. map the bodies through those map indexes in one `map_batch_json_select` call;
//! 3. for each document and map index, delete the rows its back-index lists that it no
//!    longer emits, put its new rows and its new back-index ([`Database::replace_rows`]);
//! 4. store each map index's checkpoint (seq and row count) in the same commit.
//!
//! Each document has one `Seq` entry, at its latest change, so a document changed several
//! times since a checkpoint is mapped once. A new map index starts at seq 0 and catches
//! up while the group's other indexes stay as they are; a restart resumes from the stored
//! checkpoints. After every write the background indexer (`Database::spawn_view_indexer`)
//! updates every registered group, so views are usually warm when queried.

use std::collections::HashSet;
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bunko_doc::id::{DocKind, kind, partition_of};
use bunko_js::CompiledViews;
use bunko_storage::{Batch, Snapshot};
use serde_json::{Map, Value, json};

use super::entries::{self, BackIndex, MapMeta};
use super::{GroupDef, Index, MapIndex, runtime};
use crate::database::Database;
use crate::keys::{self, Key};
use crate::{Error, Result, records};

/// Changes mapped per commit.
pub const BATCH: usize = 500;

/// Rows whose key is longer than this are not indexed (the store's key limit is 64 KiB).
const MAX_ROW_KEY: usize = 60_000;

/// One page's work: the map indexes at the group's lowest checkpoint, and the seqs to read.
#[derive(Debug)]
struct Step {
    /// Positions in the group's maps.
    maps: Vec<usize>,
    /// The lowest checkpoint: read the changes after it...
    after: u64,
    /// ...up to the next higher checkpoint of the group, if any.
    upto: Option<u64>,
}

impl Step {
    fn plan(index: &Index) -> Step {
        let seqs: Vec<u64> = index.maps.iter().map(|m| m.meta().seq).collect();
        let after = seqs.iter().copied().min().unwrap_or(0);
        let maps = (0..seqs.len()).filter(|&m| seqs.get(m) == Some(&after)).collect();
        let upto = seqs.iter().copied().filter(|&s| s > after).min();
        Step { maps, after, upto }
    }

    /// The `Seq` keys of `db` this step reads.
    fn range(&self, db: u64) -> bunko_storage::Range {
        let end = match self.upto {
            Some(upto) => Bound::Included(Key::Seq(db, upto).encode()),
            None => keys::seq_range(db).1,
        };
        (Bound::Excluded(Key::Seq(db, self.after).encode()), end)
    }
}

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

    /// The registered index of `def`, registering it (and its map indexes, with their
    /// stored checkpoints) if new.
    pub fn view_index(&self, def: GroupDef) -> Result<Arc<Index>> {
        if let Some(index) = self.views.get(&def.sig) {
            return Ok(index);
        }
        let maps = def.maps.iter().map(|m| self.map_index(&m.sig)).collect::<Result<_>>()?;
        Ok(self.views.insert(def, maps))
    }

    /// The registered map index `sig`, registering it with its stored checkpoint if new.
    fn map_index(&self, sig: &str) -> Result<Arc<MapIndex>> {
        if let Some(map) = self.views.map(sig) {
            return Ok(map);
        }
        let meta = match self.store.get(&entries::meta_key(self.id(), sig))? {
            Some(bytes) => records::decode(&bytes)?,
            None => MapMeta::default(),
        };
        Ok(self.views.insert_map(sig, meta))
    }

    /// After a write: re-reads the view groups if design documents changed, then wakes
    /// the background indexer.
    pub(crate) fn views_after_write(self: &Arc<Self>, ddocs_changed: bool) {
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

    /// Brings every map index of `index` up to the latest change.
    pub fn update_view(&self, index: &Index) -> Result<()> {
        let mut compiled = index.build.lock();
        if compiled.is_none() {
            let maps: Vec<&str> = index.def.maps.iter().map(|m| m.source.as_str()).collect();
            *compiled = Some(runtime().compile_view_set(index.def.lib.as_ref(), &maps)?);
        }
        let Some(views) = compiled.as_ref() else { return Ok(()) };
        // Map indexes shared with other groups are locked in signature order (after the
        // group lock, never inside another map lock), so two groups cannot deadlock.
        let mut order: Vec<&Arc<MapIndex>> = index.maps.iter().collect();
        order.sort_by(|a, b| a.sig.cmp(&b.sig));
        let _locks: Vec<_> = order.iter().map(|m| m.build.lock()).collect();
        while !self.is_dropped() {
            if !self.update_step(index, views, &Step::plan(index))? {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Maps one page of `step`; whether more steps are needed.
    fn update_step(&self, index: &Index, views: &CompiledViews, step: &Step) -> Result<bool> {
        let db = self.id();
        let snapshot = self.store.snapshot();
        let page = snapshot.scan(&step.range(db), false, BATCH)?;
        let (seq, more) = match (page.last(), step.upto) {
            (Some((last, _)), _) if page.len() == BATCH => (keys::decode_seq(last)?, true),
            (_, Some(upto)) => (upto, true),
            (Some((last, _)), None) => (keys::decode_seq(last)?, false),
            (None, None) => return Ok(false),
        };
        let mut docs = Vec::with_capacity(page.len());
        for (key, id) in &page {
            let change = keys::decode_seq(key)?;
            let id = String::from_utf8(id.clone()).map_err(|e| Error::Corrupt(e.to_string()))?;
            let input = map_input(&snapshot, db, &index.def, &id, change)?;
            docs.push((id, input));
        }
        let inputs: Vec<&str> = docs.iter().filter_map(|(_, d)| d.as_deref()).collect();
        let mut outputs = views.map_batch_json_select(&step.maps, &inputs)?.into_iter();
        let targets: Vec<&Arc<MapIndex>> =
            step.maps.iter().filter_map(|&m| index.maps.get(m)).collect();
        let mut metas: Vec<MapMeta> = targets.iter().map(|m| m.meta()).collect();
        let mut write = PageWrite { db, snapshot: &snapshot, def: &index.def, batch: Batch::new() };
        for (id, input) in &docs {
            let output = input.as_ref().and_then(|_| outputs.next()).unwrap_or_default();
            output.trace(&index.def.sig);
            let mut rows = output.rows.into_iter();
            for (map, meta) in targets.iter().zip(metas.iter_mut()) {
                write.replace_rows(&map.sig, meta, id, rows.next().unwrap_or_default())?;
            }
        }
        for (map, meta) in targets.iter().zip(metas.iter_mut()) {
            meta.seq = seq;
            write.batch.put(entries::meta_key(db, &map.sig), records::encode(meta));
        }
        self.store.commit(write.batch)?;
        for (map, meta) in targets.iter().zip(metas) {
            *map.meta.lock() = meta;
        }
        Ok(more)
    }

    /// `POST /{db}/_view_cleanup`: removes the rows of every map index no design document
    /// uses (and any view keys of an older layout). Returns the number of indexes removed.
    pub fn view_cleanup(&self) -> Result<usize> {
        let groups = self.design_groups()?;
        let live: HashSet<&str> =
            groups.iter().flat_map(|(_, d)| d.maps.iter().map(|m| m.sig.as_str())).collect();
        let snapshot = self.store.snapshot();
        let mut removed = 0;
        for (key, _) in snapshot.scan(&entries::meta_range(self.id()), false, usize::MAX)? {
            let Some(sig) = entries::decode_meta(&key) else { continue };
            if live.contains(sig.as_str()) {
                continue;
            }
            for range in entries::map_ranges(self.id(), &sig) {
                crate::catalog::remove_range(self.store.as_ref(), &range)?;
            }
            removed += 1;
        }
        let live_groups: Vec<String> = groups.into_iter().map(|(_, d)| d.sig).collect();
        self.views.retain(&live_groups);
        Ok(removed)
    }
}

/// The writes of one page: rows, back-index entries and checkpoints, in one batch.
struct PageWrite<'a> {
    db: u64,
    /// The page's snapshot, for the back-index.
    snapshot: &'a Snapshot,
    def: &'a GroupDef,
    batch: Batch,
}

impl PageWrite<'_> {
    /// Moves one document's rows in map index `sig` from its back-index to `rows`.
    fn replace_rows(
        &mut self,
        sig: &str,
        meta: &mut MapMeta,
        id: &str,
        rows: bunko_js::Rows,
    ) -> Result<()> {
        let back_key = entries::back_key(self.db, sig, id);
        let old: BackIndex = match self.snapshot.get(&back_key)? {
            Some(bytes) => records::decode(&bytes)?,
            None => Vec::new(),
        };
        let partition = if self.def.partitioned { partition_of(id) } else { None };
        let mut new: BackIndex = Vec::new();
        if !self.def.partitioned || partition.is_some() {
            let base = entries::row_base(self.db, sig, partition);
            for (n, (key, value)) in rows.into_iter().enumerate() {
                let row_key = entries::row_key(&base, &key, self.def.raw, id, n as u64);
                if row_key.len() > MAX_ROW_KEY {
                    tracing::warn!(sig, "view key too long, row skipped");
                    continue;
                }
                self.batch.put(row_key.clone(), json!([key, id, value]).to_string());
                new.push(row_key);
            }
        }
        let kept: HashSet<&Vec<u8>> = new.iter().collect();
        for key in &old {
            if !kept.contains(key) {
                self.batch.delete(key.clone());
            }
        }
        meta.rows = meta.rows.saturating_sub(old.len() as u64) + new.len() as u64;
        if new.is_empty() {
            if !old.is_empty() {
                self.batch.delete(back_key);
            }
        } else {
            self.batch.put(back_key, records::encode(&new));
        }
        Ok(())
    }
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bunko_doc::keycode::KeyWriter;
    use bunko_storage::{Memory, prefix_range};

    use super::*;
    use crate::view::ViewQuery;
    use crate::{Config, Engine, WriteOptions};

    fn put(db: &Database, doc: Value) -> Result<()> {
        let doc = bunko_doc::body::from_value(doc, &Default::default())?;
        db.put(doc, WriteOptions::default()).map(drop)
    }

    #[test]
    fn keys_of_the_older_group_layout_are_ignored_then_cleaned_up() -> Result<()> {
        let engine = Engine::open(Arc::new(Memory::new()), Config::default())?;
        let db = engine.create_db("v", false)?;
        put(
            &db,
            json!({"_id": "_design/d", "views": {"v": {"map": "function(d) { emit(d.n); }"}}}),
        )?;
        put(&db, json!({"_id": "a", "n": 1}))?;
        let Some(def) = db.design_group("_design/d")? else { panic!("the design doc has views") };
        // What an older data dir holds: keys by group signature, then the map's position.
        let old = |tag: u8| KeyWriter::new(tag).u64(db.id()).str(&def.sig);
        let mut row = old(entries::VIEW_ROW).u64(0).finish();
        entries::push_key(&mut row, &json!("stale"), false);
        let row = KeyWriter::from_bytes(row).str("a").u64(0).finish();
        let mut batch = Batch::new();
        batch.put(old(entries::VIEW_META).finish(), records::encode(&(99u64, vec![7u64])));
        batch.put(row.clone(), json!(["stale", "a", null]).to_string());
        batch.put(old(entries::VIEW_BACK).str("a").finish(), records::encode(&vec![(0u64, row)]));
        db.store.commit(batch)?;

        let r = db.query_view("_design/d", "v", &ViewQuery::default(), None)?;
        assert_eq!(r.total_rows, Some(1));
        let keys: Vec<Value> = r.rows.map(|row| row.map(|r| r.key)).collect::<Result<_>>()?;
        assert_eq!(keys, vec![json!(1)]);
        assert_eq!(db.view_cleanup()?, 1, "the old group's keys are unreferenced");
        for tag in [entries::VIEW_META, entries::VIEW_ROW, entries::VIEW_BACK] {
            let left = db.store.scan(&prefix_range(&old(tag).finish()), false, 10)?;
            assert!(left.is_empty(), "tag {tag:#x} still has old keys");
            let all = db.store.scan(&prefix_range(&[tag]), false, 10)?;
            assert_eq!(all.len(), 1, "tag {tag:#x} keeps the map index's key");
        }
        Ok(())
    }
}
