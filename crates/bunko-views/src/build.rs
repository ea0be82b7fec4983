//! Bringing a view group's map indexes up to date from the `_changes` sequence.
//!
//! [`update_view`] holds the group's build lock and the build locks of its map
//! indexes, and repeats, one page of at most [`BATCH`] changes (fewer for large documents:
//! `PAGE_COST`) at a time, each page read from one snapshot (shared by consecutive pages,
//! see `GroupBuild`):
//! 1. take the map indexes at the lowest checkpoint (`Step`); read the `Seq` keys after
//!    it, up to the next higher checkpoint of the group, so a lagging index catches up to
//!    the others and is then mapped together with them;
//! 2. split the page among the build workers (one per core, each with its own QuickJS
//!    runtime, `workers`); each reads its documents' winning bodies, maps them through
//!    the step's map indexes in one `map_batch_json_select` call, and prepares, per
//!    document and map index, the deletion of the rows its back-index lists that it no
//!    longer emits, its new rows and its new back-index (`PageWrite::replace_rows`);
//! 3. apply the workers' writes and each map index's checkpoint (seq and row count) in one
//!    batch, in `apply_page`: the one place a page's rows change. Pages are pipelined:
//!    while one is applied, the workers map the next one of the same snapshot
//!    (`GroupBuild`).
//!
//! A first build (map indexes with no rows, at checkpoint 0) reads the documents in id order
//! instead of the `Seq` keys (`Scan`): reads by seq land on a different storage block for
//! nearly every document, reads in key order on the block before. While it runs, the store
//! may hold more of its writes in memory (`Store::bulk`: fewer, larger flushes, so fewer
//! tables for fjall to merge).
//!
//! Batches are applied without waiting for durability and synced every `SYNC_EVERY`
//! pages and at the end: rows and checkpoints share each batch, so a crash only loses
//! progress, which the next update redoes. Each document has one `Seq` entry, at its
//! latest change, so a document changed several times since a checkpoint is mapped once,
//! and the documents of one page are distinct, so the workers never write the same key.
//! A new map index starts at seq 0 and catches up while the group's other indexes stay as
//! they are; a restart resumes from the stored checkpoints. After every write the
//! background indexer (`spawn_view_indexer`) updates every registered group, so
//! views are usually warm when queried.
//!
//! Cost per document, measured on the `view` benchmark before the workers (200k documents,
//! CPU time): reading the bodies 26 %, mapping (JSON in and out of QuickJS included) 35 %,
//! preparing rows and back-index 18 %, applying 12 %, syncing every page 10 %.

use std::collections::{HashMap, HashSet};
use std::fmt::Write;
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bunko_doc::id::{DocKind, kind, partition_of};
use bunko_js::CompiledViews;
use bunko_storage::{Batch, Snapshot, Ticket};
use serde_json::{Map, Value, json};

use crate::entries::{self, BackIndex, MapMeta};
use crate::purge::apply_view_purges;
use crate::{GroupDef, Index, MapIndex, Progress, Registry, order, registry, runtime};
use bunko_engine::Database;
use bunko_engine::keys::{self, Key};
use bunko_engine::purge::purge_seq_in;
use bunko_engine::read::body_of;
use bunko_engine::{Error, Result, records};
use bunko_indexer::Background;

/// Changes mapped per commit, at most.
pub const BATCH: usize = 1000;

/// A page's memory per byte of document: the body read, its copy in QuickJS, the rows
/// emitted and their encoded keys. A page holds as many documents as fit in the memory
/// budget's view page share at this cost (`Database::view_page_docs`), from [`MIN_SHARE`]
/// to [`BATCH`]: 1000 documents of 1 KB take ~4 MB, 1000 of 100 KB would take ~400 MB.
const PAGE_COST: u64 = 4;

/// Pages in memory at once: one being applied while the next is mapped (`GroupBuild`), so
/// each gets half of the budget's view page share.
const PAGES_IN_FLIGHT: u64 = 2;

/// Pages applied between two syncs. Rows and checkpoint share each batch, so a crash
/// loses at most the unsynced pages' progress, which the next update redoes.
const SYNC_EVERY: usize = 32;

/// Most build workers (QuickJS runtimes) one group update uses.
const MAX_WORKERS: usize = 4;

/// Fewest documents worth handing to another worker.
const MIN_SHARE: usize = 64;

/// Build workers: one per core, up to [`MAX_WORKERS`].
fn workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()).min(MAX_WORKERS)
}

/// Rows whose key is longer than this are not indexed (the store's key limit is 64 KiB).
const MAX_ROW_KEY: usize = 60_000;

/// One page's work: the map indexes at the group's lowest checkpoint, and the seqs to read.
#[derive(Debug, Clone)]
struct Step {
    /// Positions in the group's maps.
    maps: Vec<usize>,
    /// The lowest checkpoint: read the changes after it...
    after: u64,
    /// ...up to the next higher checkpoint of the group, if any.
    upto: Option<u64>,
    /// A first build read in document id order instead of by seq ([`Scan`]).
    scan: Option<Scan>,
}

/// A first build of map indexes that hold no rows: the documents read in id order (`Doc`
/// keys, then each winning body beside the one before it) instead of by seq, so that
/// storage blocks are read once each rather than once per document (reads by seq land on
/// a different block for almost every document). Snapshots are renewed as for pages by seq;
/// `seq` is the last seq of the first one, and documents changed after it are left out of
/// the scan (no rows), to be read by seq after it like any change. The checkpoint stays at
/// 0 until the last page, which sets it to `seq`; each page keeps where the scan stands
/// beside its rows ([`entries::scan_key`]), so a scan cut short (an error, a restart)
/// resumes there ([`cut_scan`]).
#[derive(Debug, Clone)]
struct Scan {
    /// The last seq of the scan's first snapshot: the checkpoint once the scan ends.
    seq: u64,
    /// The last document id read, if any.
    after: Option<String>,
}

impl Step {
    fn plan(index: &Index) -> Step {
        let seqs: Vec<u64> = index.maps.iter().map(|m| m.meta().seq).collect();
        let after = seqs.iter().copied().min().unwrap_or(0);
        let maps = (0..seqs.len()).filter(|&m| seqs.get(m) == Some(&after)).collect();
        let upto = seqs.iter().copied().filter(|&s| s > after).min();
        Step { maps, after, upto, scan: None }
    }

    /// This step as a [`Scan`] of `snapshot` when it is a first build (checkpoint 0, no
    /// rows in any of its map indexes) of a database with changes.
    fn scanned(mut self, db: u64, index: &Index, snapshot: &Snapshot) -> Result<Step> {
        if self.first(index) {
            let last = snapshot.scan(&keys::seq_range(db), true, 1)?;
            if let Some((key, _)) = last.first() {
                self.scan = Some(Scan { seq: keys::decode_seq(key)?, after: None });
            }
        }
        Ok(self)
    }

    /// Whether this step is a first build: checkpoint 0, no rows in any of its map indexes.
    fn first(&self, index: &Index) -> bool {
        let empty = |m: &usize| index.maps.get(*m).is_some_and(|m| m.meta().rows == 0);
        self.after == 0 && self.maps.iter().all(empty)
    }

    /// The keys of `db` this step reads: `Seq` keys, or `Doc` keys for a [`Scan`].
    fn read_range(&self, db: u64) -> bunko_storage::Range {
        match &self.scan {
            None => self.range(db),
            Some(Scan { after: None, .. }) => keys::doc_range(db),
            Some(Scan { after: Some(id), .. }) => {
                (Bound::Excluded(Key::Doc(db, id).encode()), keys::doc_range(db).1)
            }
        }
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

/// Registers the view group of every design document, dropping groups no design
/// document defines any more, and starts the background indexer.
pub(crate) fn load_views(db: &Database) -> Result<()> {
    let mut live = Vec::new();
    for (_, def) in design_groups(db)? {
        live.push(def.sig.clone());
        view_index(db, def)?;
    }
    registry(db).retain(&live);
    Ok(())
}

/// The view group of every design document that has views: `(ddoc id, group)`.
pub fn design_groups(db: &Database) -> Result<Vec<(String, GroupDef)>> {
    let db_id = db.id();
    let snapshot = db.store().snapshot();
    let range = keys::doc_prefix(db_id, "_design/");
    let mut groups = Vec::new();
    for (key, _) in snapshot.scan(&range, false, usize::MAX)? {
        let id = keys::decode_doc(&key)?;
        if let Some(body) = design_body(&snapshot, db_id, &id)?
            && let Some(def) = GroupDef::from_ddoc(&body, db.is_partitioned())
        {
            groups.push((id, def));
        }
    }
    Ok(groups)
}

/// The view group of design document `ddoc`: `404 missing` if the document does not
/// exist, `None` if it has no views.
pub fn design_group(db: &Database, ddoc: &str) -> Result<Option<GroupDef>> {
    let snapshot = db.store().snapshot();
    let body =
        design_body(&snapshot, db.id(), ddoc)?.ok_or_else(|| Error::NotFound("missing".into()))?;
    Ok(GroupDef::from_ddoc(&body, db.is_partitioned()))
}

/// The registered index of `def`, registering it (and its map indexes, with their
/// stored checkpoints) if new.
pub fn view_index(db: &Database, def: GroupDef) -> Result<Arc<Index>> {
    let views = registry(db);
    let _registering = views.registration.read();
    if let Some(index) = views.get(&def.sig) {
        return Ok(index);
    }
    let maps = def.maps.iter().map(|m| map_index(db, &views, &m.sig)).collect::<Result<_>>()?;
    Ok(views.insert(def, maps))
}

/// The registered map index `sig`, registering it with its stored checkpoint if new.
fn map_index(db: &Database, views: &Registry, sig: &str) -> Result<Arc<MapIndex>> {
    if let Some(map) = views.map(sig) {
        return Ok(map);
    }
    let meta = match db.store().get(&entries::meta_key(db.id(), sig))? {
        Some(bytes) => MapMeta::decode(&bytes)?,
        None => MapMeta::default(),
    };
    Ok(views.insert_map(sig, meta))
}

/// After a write: re-reads the view groups if design documents changed, then wakes
/// the background indexer.
pub(crate) fn views_after_write(db: &Arc<Database>, ddocs_changed: bool) {
    if ddocs_changed {
        registry(db).designs.clear();
    }
    if ddocs_changed && let Err(err) = load_views(db) {
        tracing::warn!(%err, "loading view definitions failed");
    }
    spawn_view_indexer(db);
}

/// Starts the background indexer unless it runs already; a running one does another
/// round, so no write is missed.
pub(crate) fn spawn_view_indexer(db: &Arc<Database>) {
    let views = registry(db);
    if views.is_empty() {
        return;
    }
    Background::wake(
        &views,
        |views| &views.background,
        |views| {
            let Some(db) = views.db() else { return false };
            for index in views.all().into_iter().filter(|i| i.def.autoupdate) {
                if let Err(err) = update_view(&db, &index) {
                    tracing::warn!(%err, sig = index.def.sig, "view update stopped");
                }
            }
            !db.is_dropped()
        },
    );
}

/// Updates one group in the background (`update=lazy`), whether or not the
/// background indexer keeps it current.
pub(crate) fn spawn_view_update(db: &Arc<Database>, index: Arc<Index>) {
    let db = db.clone();
    std::thread::spawn(move || {
        if let Err(err) = update_view(&db, &index) {
            tracing::warn!(%err, sig = index.def.sig, "view update stopped");
        }
    });
}

/// Brings every map index of `index` up to the latest change.
pub fn update_view(db: &Database, index: &Index) -> Result<()> {
    let mut compiled = index.build.lock();
    if compiled.is_empty() {
        let maps: Vec<&str> = index.def.maps.iter().map(|m| m.source.as_str()).collect();
        for _ in 0..workers() {
            compiled.push(runtime().compile_view_set(index.def.lib.as_ref(), &maps)?);
        }
    }
    // Map indexes shared with other groups are locked in signature order (after the
    // group lock, never inside another map lock), so two groups cannot deadlock.
    let mut order: Vec<&Arc<MapIndex>> = index.maps.iter().collect();
    order.sort_by(|a, b| a.sig.cmp(&b.sig));
    let _locks: Vec<_> = order.iter().map(|m| m.build.lock()).collect();
    if order.iter().any(|m| m.removed.load(Ordering::Acquire)) {
        // `_view_cleanup` removed an index of this (no longer used) group meanwhile.
        return Ok(());
    }
    let resume = cut_scan(db, index)?;
    // A first build writes every row at once and then stops: the store may buffer more of
    // it in memory meanwhile (fewer, larger flushes; `Store::bulk`).
    let _bulk = (resume.is_some() || Step::plan(index).first(index)).then(|| db.store().bulk());
    let purged = apply_view_purges(db, index)?;
    let mut build = GroupBuild {
        db,
        index,
        compiled: &mut compiled,
        applied: None,
        purged,
        pending: None,
        snapshot: None,
        scan: true,
        resume,
    };
    bunko_indexer::run(&mut build, &index.activity, SYNC_EVERY)
}

/// Where a [`Scan`] cut short (an error, a restart) stopped, to resume it: the map indexes
/// at checkpoint 0 with rows (only a scan writes rows without moving the checkpoint) all
/// with the same [`entries::ScanMark`]. Map indexes at checkpoint 0 that cannot resume
/// together (one added to the group meanwhile) are emptied and scanned from the start.
/// The caller holds their build locks.
fn cut_scan(db: &Database, index: &Index) -> Result<Option<Scan>> {
    let first: Vec<&Arc<MapIndex>> = index.maps.iter().filter(|m| m.meta().seq == 0).collect();
    if first.iter().all(|m| m.meta().rows == 0) {
        return Ok(None);
    }
    let mut marks = Vec::with_capacity(first.len());
    for map in &first {
        let mark = db.store().get(&entries::scan_key(db.id(), &map.sig))?;
        marks.push(mark.map(|m| records::decode::<entries::ScanMark>(&m)).transpose()?);
    }
    if let Some(Some((seq, after))) = marks.first()
        && marks.iter().all(|m| m.as_ref().is_some_and(|m| m.0 == *seq && m.1 == *after))
    {
        return Ok(Some(Scan { seq: *seq, after: Some(after.clone()) }));
    }
    for map in first {
        tracing::info!(sig = map.sig, "view build: a first build cut short starts over");
        for range in entries::map_ranges(db.id(), &map.sig) {
            bunko_engine::remove_range(db.store().as_ref(), &range)?;
        }
        // The order structure is rebuilt from the (now empty) rows on the next query.
        registry(db).order.forget(&map.sig);
        *map.meta.lock() = MapMeta::default();
    }
    Ok(None)
}

/// Maps and applies one page of `step` on a fresh snapshot ([`prepare_page`], then
/// [`apply_page`]); the applied batch's ticket, the changes it read and whether more steps
/// are needed, or `None` when there is nothing to do.
#[cfg(test)]
fn update_step(
    db: &Database,
    index: &Index,
    views: &mut [CompiledViews],
    step: &Step,
    purged: u64,
) -> Result<Option<(Ticket, u64, bool)>> {
    let snapshot = db.store().snapshot();
    let Some(page) = prepare_page(db, index, views, step, purged, &snapshot)? else {
        return Ok(None);
    };
    let (changes, more) = (page.changes, page.more);
    Ok(Some((apply_page(db, index, page)?, changes, more)))
}

/// One page mapped and ready to apply.
struct Prepared {
    /// The step it was read for.
    step: Step,
    /// The workers' writes.
    shares: Vec<Share>,
    /// The checkpoint the step's map indexes reach once it is applied.
    seq: u64,
    /// Changes read.
    changes: u64,
    /// Whether more steps are needed after it.
    more: bool,
    /// A [`Scan`] page's last document id.
    last: Option<String>,
}

impl Prepared {
    /// The step that continues this one on the same snapshot: the same map indexes, from
    /// this page's checkpoint; `None` when the step ends with this page (the next plan
    /// then takes in the map indexes it caught up with).
    fn next(&self) -> Option<Step> {
        let maps = self.step.maps.clone();
        if let Some(scan) = &self.step.scan {
            // A scan continues after its last document until a page sets the checkpoint.
            let scan = Scan { seq: scan.seq, after: Some(self.last.clone()?) };
            return (self.seq == 0).then_some(Step {
                maps,
                after: 0,
                upto: None,
                scan: Some(scan),
            });
        }
        let open = self.more && self.step.upto.is_none_or(|upto| self.seq < upto);
        open.then_some(Step { maps, after: self.seq, upto: self.step.upto, scan: None })
    }
}

/// Reads and maps one page of `step` from `snapshot`, its documents shared among the
/// `views` workers; `None` when the step has no change left in `snapshot`. `purged` is the
/// purge seq the step's map indexes have applied (`apply_view_purges`).
fn prepare_page(
    db: &Database,
    index: &Index,
    views: &mut [CompiledViews],
    step: &Step,
    purged: u64,
    snapshot: &Snapshot,
) -> Result<Option<Prepared>> {
    let db_id = db.id();
    let targets: Vec<&Arc<MapIndex>> =
        step.maps.iter().filter_map(|&m| index.maps.get(m)).collect();
    // A purge after the applied one may have left rows of a document written again since
    // as a first revision: then every document's back-index is read (`PageDoc::unseen`).
    // A scan's own documents are unseen: its map indexes were empty when it began, and it
    // reads each document once.
    let trust_unseen = step.scan.is_some() || purge_seq_in(snapshot.as_ref(), db_id)? == purged;
    let most = db.view_page_docs(PAGE_COST * PAGES_IN_FLIGHT).clamp(MIN_SHARE, BATCH);
    let page = snapshot.scan(&step.read_range(db_id), false, most)?;
    let (seq, more, last) = match (&step.scan, page.last()) {
        (Some(_), Some((key, _))) if page.len() == most => (0, true, Some(keys::decode_doc(key)?)),
        (Some(scan), _) => (scan.seq, true, None),
        (None, _) => match (page.last(), step.upto) {
            (Some((last, _)), _) if page.len() == most => (keys::decode_seq(last)?, true, None),
            (_, Some(upto)) => (upto, true, None),
            (Some((last, _)), None) => (keys::decode_seq(last)?, false, None),
            (None, None) => return Ok(None),
        },
    };
    let share = page.len().div_ceil(views.len().max(1)).max(MIN_SHARE);
    let shares: Vec<Result<Share>> = std::thread::scope(|scope| {
        let mut parts = page.chunks(share).zip(views.iter_mut());
        let first = parts.next();
        let workers: Vec<_> = parts
            .map(|(part, views)| {
                let targets = &targets;
                let page = Page { snapshot, step, trust_unseen };
                scope.spawn(move || map_share(db, &page, index, views, targets, part))
            })
            .collect();
        let mut shares = Vec::with_capacity(workers.len() + 1);
        if let Some((part, views)) = first {
            let page = Page { snapshot, step, trust_unseen };
            shares.push(map_share(db, &page, index, views, &targets, part));
        }
        shares.extend(
            workers
                .into_iter()
                .map(|w| w.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))),
        );
        shares
    });
    let shares = shares.into_iter().collect::<Result<_>>()?;
    let step = step.clone();
    Ok(Some(Prepared { step, shares, seq, changes: page.len() as u64, more, last }))
}

/// Applies a prepared page with the new checkpoint and row counts of its map indexes, in
/// one batch: the one place a page's rows change. Pages are applied one at a time, in
/// order (the build lock), so the counts read here include every earlier page.
fn apply_page(db: &Database, index: &Index, page: Prepared) -> Result<Ticket> {
    let db_id = db.id();
    let targets: Vec<&Arc<MapIndex>> =
        page.step.maps.iter().filter_map(|&m| index.maps.get(m)).collect();
    let mut batch = Batch::new();
    let mut changes = order::Changes::default();
    let mut metas: Vec<MapMeta> = targets.iter().map(|m| m.meta()).collect();
    for share in page.shares {
        batch.append(share.batch);
        changes.append(share.changes);
        for ((meta, (added, removed)), bytes) in metas.iter_mut().zip(share.rows).zip(share.bytes) {
            meta.rows = meta.rows.saturating_sub(removed) + added;
            meta.file = meta.file.saturating_add(bytes);
        }
    }
    for (map, meta) in targets.iter().zip(metas.iter_mut()) {
        meta.seq = page.seq;
        batch.put(entries::meta_key(db_id, &map.sig), records::encode(meta));
        if let Some(scan) = &page.step.scan {
            // Where the scan stands, with its rows: kept until its last page.
            let mark = entries::scan_key(db_id, &map.sig);
            match &page.last {
                Some(last) => batch.put(mark, records::encode(&(scan.seq, last))),
                None => batch.delete(mark),
            }
        }
    }
    // Applied under the order structures' lock, so queries see rows and counts agree.
    let base = |sig: &str| entries::row_base(db_id, sig, None);
    let ticket = registry(db).order.apply(db.store().as_ref(), batch, &changes, base)?;
    for (map, meta) in targets.iter().zip(metas) {
        *map.meta.lock() = meta;
    }
    Ok(ticket)
}

/// What the workers of one page share.
struct Page<'a> {
    snapshot: &'a Snapshot,
    step: &'a Step,
    /// Whether no purge came after the one the step's map indexes applied, so that a
    /// document's [`PageDoc::unseen`] holds.
    trust_unseen: bool,
}

/// One worker's part of a page: reads the documents of `part`, maps them through the
/// step's map indexes and prepares their rows' writes.
fn map_share(
    db: &Database,
    page: &Page,
    index: &Index,
    views: &CompiledViews,
    targets: &[&Arc<MapIndex>],
    part: &[bunko_storage::Entry],
) -> Result<Share> {
    let db_id = db.id();
    let mut docs = Vec::with_capacity(part.len());
    for (key, value) in part {
        docs.push(match page.step.scan {
            None => {
                let change = keys::decode_seq(key)?;
                let id =
                    String::from_utf8(value.clone()).map_err(|e| Error::Corrupt(e.to_string()))?;
                PageDoc::read(page.snapshot, db_id, &index.def, id, change)?
            }
            Some(Scan { seq, .. }) => {
                let id = keys::decode_doc(key)?;
                let record = records::DocRecord::decode(value)?;
                match record.info.seq <= seq {
                    true => {
                        let change = record.info.seq;
                        PageDoc::from_info(page.snapshot, db_id, &index.def, id, &record, change)?
                    }
                    // Changed since the scan began: read by seq after it.
                    false => PageDoc { id, input: None, unseen: false },
                }
            }
        });
    }
    let inputs: Vec<&str> = docs.iter().filter_map(|d| d.input.as_deref()).collect();
    let mut outputs = views.map_batch_json_select(&page.step.maps, &inputs)?.into_iter();
    let mut write = PageWrite::new(db_id, page.snapshot, &index.def);
    let mut rows = vec![(0, 0); targets.len()];
    let mut bytes = vec![0; targets.len()];
    for doc in &docs {
        let output = doc.input.as_ref().and_then(|_| outputs.next()).unwrap_or_default();
        output.trace(&index.def.sig);
        let mut emitted = output.rows.into_iter();
        let unseen = page.trust_unseen && doc.unseen;
        for ((map, count), bytes) in targets.iter().zip(rows.iter_mut()).zip(bytes.iter_mut()) {
            let new = emitted.next().unwrap_or_default();
            let before = write.batch.bytes();
            write.replace_rows(&map.sig, count, &doc.id, new, unseen)?;
            *bytes += write.batch.bytes() - before;
        }
    }
    Ok(Share { batch: write.batch, changes: write.changes, rows, bytes })
}

/// `POST /{db}/_view_cleanup`: removes the rows of every map index no design document
/// uses (and any view keys of an older layout). Returns the number of indexes removed.
pub fn view_cleanup(db: &Database) -> Result<usize> {
    let groups = design_groups(db)?;
    let live: HashSet<String> =
        groups.iter().flat_map(|(_, d)| d.maps.iter().map(|m| m.sig.clone())).collect();
    let live_groups: Vec<String> = groups.into_iter().map(|(_, d)| d.sig).collect();
    let views = registry(db);
    let _cleaning = views.registration.write();
    // Unregister first, so no new build finds the dead indexes; a build already holding
    // one finishes before its rows are removed, and one about to start sees `removed`.
    let mut dropped: HashMap<String, Arc<MapIndex>> =
        views.retain(&live_groups).into_iter().map(|m| (m.sig.clone(), m)).collect();
    let snapshot = db.store().snapshot();
    let mut removed = 0;
    for (key, _) in snapshot.scan(&entries::meta_range(db.id()), false, usize::MAX)? {
        let Some(sig) = entries::decode_meta(&key) else { continue };
        if live.contains(&sig) {
            continue;
        }
        // Dropped now, or earlier by a write that re-read the design documents while a
        // build may still hold it: either way its build finishes before the removal.
        if !dropped.contains_key(&sig)
            && let Some(retired) = views.take_retired(&sig)
        {
            dropped.insert(sig.clone(), retired);
        }
        let map = dropped.get(&sig);
        let _build = map.map(|m| m.build.lock());
        if let Some(map) = map {
            map.removed.store(true, Ordering::Release);
        }
        views.order.forget(&sig);
        for range in entries::map_ranges(db.id(), &sig) {
            bunko_engine::remove_range(db.store().as_ref(), &range)?;
        }
        let checkpoint = format!("{}mrview-{sig}", bunko_engine::purge::PURGE_CHECKPOINT_PREFIX);
        let mut batch = Batch::new();
        batch.delete(Key::Local(db.id(), &checkpoint).encode());
        db.store().commit(batch)?;
        removed += 1;
    }
    Ok(removed)
}

/// A running view update, for `GET /_active_tasks` (CouchDB's `indexer` task).
pub type ViewTask = bunko_indexer::Task;

/// The view updates mapping documents now, one per design document whose group is
/// being updated.
pub fn view_tasks(db: &Database) -> Result<Vec<ViewTask>> {
    let running: Vec<(String, Progress)> = registry(db)
        .all()
        .iter()
        .filter_map(|index| index.progress().map(|p| (index.def.sig.clone(), p)))
        .collect();
    if running.is_empty() {
        return Ok(Vec::new());
    }
    let mut tasks = Vec::new();
    for (ddoc, def) in design_groups(db)? {
        if let Some((_, progress)) = running.iter().find(|(sig, _)| *sig == def.sig) {
            let database = db.name();
            let progress = *progress;
            tasks.push(ViewTask { database, design_document: ddoc, index: None, progress });
        }
    }
    Ok(tasks)
}

/// One update of a view group, as the index framework drives it.
///
/// Map and apply are pipelined: while one page is applied (on a thread of its own), the
/// workers read and map the next page of the same step from the same snapshot. Pages of
/// one snapshot hold distinct documents, so the next page's back-index reads do not
/// depend on the page being applied. A new snapshot is taken only with no page pending
/// (every [`SNAPSHOT_PAGES`] pages, and when a step ends), so a document changed since is
/// read after its earlier rows are applied.
struct GroupBuild<'a> {
    db: &'a Database,
    index: &'a Index,
    compiled: &'a mut Vec<CompiledViews>,
    /// The last applied page's ticket, to sync.
    applied: Option<Ticket>,
    /// The purge seq the group's map indexes applied before the first page.
    purged: u64,
    /// The next page, mapped and not applied yet.
    pending: Option<Prepared>,
    /// The snapshot pages are read from, and how many were read from it.
    snapshot: Option<(Snapshot, usize)>,
    /// Whether a first build reads the documents in id order ([`Scan`]).
    scan: bool,
    /// A scan cut short, to resume ([`cut_scan`]).
    resume: Option<Scan>,
}

/// Pages read from one snapshot at most, so that the build does not hold an old snapshot
/// (and the storage versions it keeps) for long.
const SNAPSHOT_PAGES: usize = SYNC_EVERY;

impl GroupBuild<'_> {
    /// The snapshot for the next page, fresh unless a page from the current one is pending.
    fn snapshot(&mut self, fresh: bool) -> Snapshot {
        match &mut self.snapshot {
            Some((snapshot, pages)) if !fresh && *pages < SNAPSHOT_PAGES => {
                *pages += 1;
                snapshot.clone()
            }
            slot => slot.insert((self.db.store().snapshot(), 1)).0.clone(),
        }
    }

    /// The next step to read when no page is pending, with its snapshot.
    fn plan(&mut self) -> Result<(Step, Snapshot)> {
        let mut step = Step::plan(self.index);
        if !self.scan || step.after != 0 {
            return Ok((step, self.snapshot(false)));
        }
        if let Some(scan) = self.resume.take() {
            step.scan = Some(scan);
            return Ok((step, self.snapshot(true)));
        }
        let snapshot = self.snapshot(true);
        Ok((step.scanned(self.db.id(), self.index, &snapshot)?, snapshot))
    }
}

impl bunko_indexer::Build for GroupBuild<'_> {
    type Error = Error;

    fn pending(&mut self) -> Result<u64> {
        self.db.pending_changes(self.index.seq())
    }

    fn step(&mut self) -> Result<Option<bunko_indexer::Page>> {
        let (db, index) = (self.db, self.index);
        let page = match self.pending.take() {
            Some(page) => page,
            None => {
                let (step, snapshot) = self.plan()?;
                match prepare_page(db, index, self.compiled, &step, self.purged, &snapshot)? {
                    Some(page) => page,
                    None => return Ok(None),
                }
            }
        };
        let (changes, more, scan) = (page.changes, page.more, page.step.scan.is_some());
        // A scan's next page is always read: where it stands is in no checkpoint. Its
        // documents are read once each and were never mapped, so any snapshot serves.
        let next = page.next().filter(|step| {
            step.scan.is_some() || self.snapshot.as_ref().is_some_and(|(_, n)| *n < SNAPSHOT_PAGES)
        });
        if scan && next.is_none() {
            // The scan's last page: what changed since is read from a fresh snapshot.
            self.snapshot = None;
        }
        let ticket = match next {
            None => apply_page(db, index, page)?,
            Some(step) => {
                let snapshot = self.snapshot(false);
                let (purged, compiled) = (self.purged, &mut *self.compiled);
                let (applied, prepared) = std::thread::scope(|scope| {
                    let applying = scope.spawn(move || apply_page(db, index, page));
                    let prepared = prepare_page(db, index, compiled, &step, purged, &snapshot);
                    let applied =
                        applying.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
                    (applied, prepared)
                });
                let ticket = applied?;
                self.pending = prepared?;
                ticket
            }
        };
        self.applied = Some(ticket);
        Ok(Some(bunko_indexer::Page { changes, more }))
    }

    fn sync(&mut self) -> Result<()> {
        match self.applied {
            Some(ticket) => Ok(self.db.store().sync(ticket)?),
            None => Ok(()),
        }
    }

    fn stopped(&self) -> bool {
        self.db.is_dropped()
    }
}

/// What one worker prepared for its part of a page.
struct Share {
    batch: Batch,
    /// The row keys the batch inserts and removes.
    changes: order::Changes,
    /// Per map index of the step: rows `(added, removed)`.
    rows: Vec<(u64, u64)>,
    /// Per map index of the step: bytes of its writes in the batch.
    bytes: Vec<u64>,
}

/// The writes of one page's part: rows, back-index entries and checkpoints, in one batch.
pub(crate) struct PageWrite<'a> {
    db: u64,
    /// The page's snapshot, for the back-index.
    snapshot: &'a Snapshot,
    def: &'a GroupDef,
    pub(crate) batch: Batch,
    pub(crate) changes: order::Changes,
}

impl<'a> PageWrite<'a> {
    pub(crate) fn new(db: u64, snapshot: &'a Snapshot, def: &'a GroupDef) -> Self {
        PageWrite { db, snapshot, def, batch: Batch::new(), changes: order::Changes::default() }
    }

    /// Moves one document's rows in map index `sig` from its back-index to `rows`, adding
    /// to `count` the rows `(added, removed)`. With `unseen` the document is known to have
    /// no back-index ([`PageDoc::unseen`]), which is then not read.
    pub(crate) fn replace_rows(
        &mut self,
        sig: &str,
        count: &mut (u64, u64),
        id: &str,
        rows: bunko_js::Rows,
        unseen: bool,
    ) -> Result<()> {
        let back_key = entries::back_key(self.db, sig, id);
        let old: BackIndex = match unseen {
            true => Vec::new(),
            false => match self.snapshot.get(&back_key)? {
                Some(bytes) => records::decode(&bytes)?,
                None => Vec::new(),
            },
        };
        let partition = if self.def.partitioned { partition_of(id) } else { None };
        let raw = self.def.maps.iter().any(|m| m.sig == sig && m.raw);
        let mut new: BackIndex = Vec::new();
        if !self.def.partitioned || partition.is_some() {
            let base = entries::row_base(self.db, sig, partition);
            for (n, (key, value)) in rows.into_iter().enumerate() {
                let row_key = entries::row_key(&base, &key, raw, id, n as u64);
                if row_key.len() > MAX_ROW_KEY {
                    tracing::warn!(sig, "view key too long, row skipped");
                    continue;
                }
                // `[key, id, value]`, as `json!` of the three would print it.
                let text = serde_json::to_string(&(&key, id, &value))
                    .map_err(|e| Error::Corrupt(format!("view row: {e}")))?;
                self.batch.put(row_key.clone(), text);
                new.push(row_key);
            }
        }
        self.changes.record(sig, &old, &new);
        let kept: HashSet<&Vec<u8>> = new.iter().collect();
        for key in &old {
            if !kept.contains(key) {
                self.batch.delete(key.clone());
            }
        }
        count.0 += new.len() as u64;
        count.1 += old.len() as u64;
        if new.is_empty() {
            if !old.is_empty() {
                self.batch.delete(back_key);
            }
        } else {
            self.batch.put(back_key, entries::encode_back(&new));
        }
        Ok(())
    }
}

/// The winning body of a design document, if it exists and is not deleted.
fn design_body(snapshot: &Snapshot, db: u64, id: &str) -> Result<Option<Map<String, Value>>> {
    let Some(record) = snapshot.get(&Key::Doc(db, id).encode())? else { return Ok(None) };
    let record = records::DocRecord::decode(&record)?;
    let (rev, deleted) = record.info.winner()?;
    if deleted {
        return Ok(None);
    }
    let body = body_of(snapshot.as_ref(), db, id, rev, Some(&record))?;
    Ok(body.and_then(|b| serde_json::from_slice::<Map<String, Value>>(&b).ok()))
}

/// One document of a page, as read for mapping.
struct PageDoc {
    id: String,
    /// What the map functions get ([`map_input`]); `None`: nothing to map.
    input: Option<String>,
    /// Whether no map index of the step can hold rows of the document: its revision tree
    /// is one first revision, so it had one state only, written at its seq, after the
    /// step's checkpoint. (A document purged and then written again also starts over at a
    /// first revision; its old rows are gone once `apply_view_purges` ran, which is why
    /// `Page::trust_unseen` requires that no purge came after.)
    unseen: bool,
}

impl PageDoc {
    /// Reads document `id` (changed at `seq`) from `snapshot`.
    fn read(snapshot: &Snapshot, db: u64, def: &GroupDef, id: String, seq: u64) -> Result<Self> {
        let unmapped = |id| Ok(PageDoc { id, input: None, unseen: false });
        if !mapped(&id, def) {
            return unmapped(id);
        }
        let Some(record) = snapshot.get(&Key::Doc(db, &id).encode())? else {
            return unmapped(id);
        };
        let record = records::DocRecord::decode(&record)?;
        let doc = PageDoc::from_info(snapshot, db, def, id, &record, seq)?;
        let unseen = matches!(record.info.tree.nodes(), [only] if only.rev.pos == 1);
        Ok(PageDoc { unseen, ..doc })
    }

    /// Document `id` (changed at `seq`) of a [`Scan`] (no map index of the scan has rows
    /// of it), whose `Doc` record `record` the scan read.
    fn from_info(
        snapshot: &Snapshot,
        db: u64,
        def: &GroupDef,
        id: String,
        record: &records::DocRecord,
        seq: u64,
    ) -> Result<Self> {
        let input = match mapped(&id, def) {
            true => map_input(snapshot, db, def, &id, record, seq)?,
            false => None,
        };
        Ok(PageDoc { id, input, unseen: true })
    }
}

/// Whether the map functions of `def` see document `id` (design documents only with
/// `options.include_design`, and never in a partitioned database).
fn mapped(id: &str, def: &GroupDef) -> bool {
    kind(id) != DocKind::Design || (def.include_design && !def.partitioned)
}

/// The document a map function sees, as JSON text: the winning body with `_id`, `_rev`,
/// `_conflicts` (if any) and `_local_seq` (with `options.local_seq`). `None` when the
/// document is deleted or its body gone.
fn map_input(
    snapshot: &Snapshot,
    db: u64,
    def: &GroupDef,
    id: &str,
    record: &records::DocRecord,
    seq: u64,
) -> Result<Option<String>> {
    let info = &record.info;
    let (rev, deleted) = info.winner()?;
    if deleted {
        return Ok(None);
    }
    let Some(body) = body_of(snapshot.as_ref(), db, id, rev, Some(record))? else {
        return Ok(None);
    };
    let rev = rev.to_string();
    let Ok(body) = std::str::from_utf8(&body) else { return Ok(None) };
    let inner = body.trim().strip_prefix('{').and_then(|b| b.strip_suffix('}')).unwrap_or("");
    // Sized for the whole document at once: grown from the `_id` and `_rev` alone, it was
    // reallocated and copied for nearly every document (2.5 % of a first build's CPU).
    let mut text = String::with_capacity(body.len() + id.len() + rev.len() + 32);
    write!(text, "{{\"_id\":{},\"_rev\":{}", Value::from(id), Value::from(rev))
        .map_err(|e| Error::Corrupt(e.to_string()))?;
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
    use crate::ViewQuery;
    use crate::testing::{admin, put};
    use crate::{query_view, view_cleanup};
    use bunko_engine::{Config, Engine};

    #[test]
    fn keys_of_the_older_group_layout_are_ignored_then_cleaned_up() -> Result<()> {
        let engine = Engine::open(Arc::new(Memory::new()), Config::default())?;
        let db = engine.create_db(&admin(), "v", false)?;
        put(
            &db,
            json!({"_id": "_design/d", "views": {"v": {"map": "function(d) { emit(d.n); }"}}}),
        )?;
        put(&db, json!({"_id": "a", "n": 1}))?;
        let Some(def) = design_group(&db, "_design/d")? else { panic!("the design doc has views") };
        // What an older data dir holds: keys by group signature, then the map's position.
        let old = |tag: u8| KeyWriter::new(tag).u64(db.id()).str(&def.sig);
        let mut row = old(entries::VIEW_ROW).u64(0).finish();
        entries::push_key(&mut row, &json!("stale"), false);
        let row = KeyWriter::from_bytes(row).str("a").u64(0).finish();
        let mut batch = Batch::new();
        batch.put(old(entries::VIEW_META).finish(), records::encode(&(99u64, vec![7u64])));
        batch.put(row.clone(), json!(["stale", "a", null]).to_string());
        batch.put(old(entries::VIEW_BACK).str("a").finish(), records::encode(&vec![(0u64, row)]));
        db.store().commit(batch)?;

        let r = query_view(
            &bunko_engine::security::UserCtx::system(),
            &db,
            "_design/d",
            "v",
            &ViewQuery::default(),
            None,
        )?;
        assert_eq!(r.total_rows, Some(1));
        let keys: Vec<Value> = r.rows.map(|row| row.map(|r| r.key)).collect::<Result<_>>()?;
        assert_eq!(keys, vec![json!(1)]);
        assert_eq!(view_cleanup(&db)?, 1, "the old group's keys are unreferenced");
        for tag in [entries::VIEW_META, entries::VIEW_ROW, entries::VIEW_BACK] {
            let left = db.store().scan(&prefix_range(&old(tag).finish()), false, 10)?;
            assert!(left.is_empty(), "tag {tag:#x} still has old keys");
            let all = db.store().scan(&prefix_range(&[tag]), false, 10)?;
            assert_eq!(all.len(), 1, "tag {tag:#x} keeps the map index's key");
        }
        Ok(())
    }

    /// The keys of view `v` of `_design/d`, as a query returns them.
    fn view_keys(db: &Database) -> Result<Vec<Value>> {
        let r = query_view(
            &bunko_engine::security::UserCtx::system(),
            db,
            "_design/d",
            "v",
            &ViewQuery::default(),
            None,
        )?;
        r.rows.map(|row| row.map(|r| r.key)).collect()
    }

    /// A document purged and written again is a first revision again, which the build
    /// takes as never mapped (no back-index read): right only once the purge is applied.
    /// Here the purge comes after the update applied purges, as when it races a build.
    #[test]
    fn a_document_purged_and_written_again_loses_its_old_rows() -> Result<()> {
        let engine = Engine::open(Arc::new(Memory::new()), Config::default())?;
        let db = engine.create_db(&admin(), "v", false)?;
        let map = "function(d) { emit(d.題名, null); }";
        put(&db, json!({"_id": "_design/d", "views": {"v": {"map": map}}}))?;
        put(&db, json!({"_id": "本", "題名": "旧版"}))?;
        put(&db, json!({"_id": "他", "題名": "別冊"}))?;
        assert_eq!(view_keys(&db)?, vec![json!("別冊"), json!("旧版")]);
        let Some(def) = design_group(&db, "_design/d")? else { panic!("the design doc has views") };
        let index = view_index(&db, def)?;
        let purged = db.purge_seq()?;
        let rev = db.get(&bunko_engine::security::UserCtx::system(), "本", None)?.rev;
        db.purge(&admin(), vec![("本".to_string(), vec![rev])])?;
        put(&db, json!({"_id": "本", "題名": "新版"}))?;
        {
            let mut compiled = index.build.lock();
            let step = Step::plan(&index);
            assert!(update_step(&db, &index, &mut compiled, &step, purged)?.is_some());
        }
        assert_eq!(view_keys(&db)?, vec![json!("別冊"), json!("新版")]);
        Ok(())
    }

    /// Pipelined pages: a document changed while its page waits to be applied (mapped,
    /// not yet written) must be mapped again only from a snapshot that has that page's
    /// rows, or its old rows stay behind. Here the first document of the pending page is
    /// changed after every page, across snapshots renewed every `SNAPSHOT_PAGES` pages of
    /// 64 documents, and every document ends with exactly its latest row.
    #[test]
    fn documents_changed_while_their_page_is_pending_keep_only_their_latest_rows() -> Result<()> {
        let config = Config { view_page_bytes: 1, ..Config::default() };
        let engine = Engine::open(Arc::new(Memory::new()), config)?;
        let db = engine.create_db(&admin(), "v", false)?;
        put(
            &db,
            json!({"_id": "_design/d", "views": {"v": {"map": "function(d) { emit(d.k); }"}}}),
        )?;
        let count = 64 * (SNAPSHOT_PAGES + 3);
        let mut latest = HashMap::new();
        for n in 0..count {
            put(&db, json!({"_id": format!("d{n:05}"), "k": n}))?;
            latest.insert(format!("d{n:05}"), n);
        }
        let Some(def) = design_group(&db, "_design/d")? else { panic!("the design doc has views") };
        let index = view_index(&db, def)?;
        let mut changed = 0;
        {
            let mut compiled = index.build.lock();
            let maps: Vec<&str> = index.def.maps.iter().map(|m| m.source.as_str()).collect();
            compiled.push(crate::runtime().compile_view_set(None, &maps)?);
            let mut build = GroupBuild {
                db: &db,
                index: &index,
                compiled: &mut compiled,
                applied: None,
                purged: db.purge_seq()?,
                pending: None,
                snapshot: None,
                scan: false,
                resume: None,
            };
            use bunko_indexer::Build;
            while let Some(page) = build.step()? {
                if let Some(pending) = &build.pending {
                    let after = Bound::Excluded(Key::Seq(db.id(), pending.step.after).encode());
                    let upto = Bound::Included(Key::Seq(db.id(), pending.seq).encode());
                    let first = db.store().scan(&(after, upto), false, 1)?;
                    let id = String::from_utf8(first[0].1.clone())
                        .map_err(|e| Error::Corrupt(e.to_string()))?;
                    let rev = db.get(&bunko_engine::security::UserCtx::system(), &id, None)?.rev;
                    let k = count * 2 + changed;
                    put(&db, json!({"_id": id, "_rev": rev.to_string(), "k": k}))?;
                    latest.insert(id, k);
                    changed += 1;
                }
                if !page.more {
                    break;
                }
            }
        }
        assert!(changed > SNAPSHOT_PAGES, "{changed} pages were pending");
        update_view(&db, &index)?;
        let mut expected: Vec<usize> = latest.into_values().collect();
        expected.sort_unstable();
        let expected: Vec<Value> = expected.into_iter().map(|k| json!(k)).collect();
        assert_eq!(view_keys(&db)?, expected);
        Ok(())
    }

    /// Varied documents, written out of id order: first revisions, updates, deletions,
    /// a conflict, a design document, documents emitting no row or several. Two views,
    /// one with `options.local_seq`; `autoupdate: false`, so that only the test builds.
    fn varied_docs(db: &Database) -> Result<()> {
        let maps = json!({
            "v": {"map": "function(d) { for (var i = 0; i < d.n % 3; i++) emit([d.n % 7, i], {n: d.n, c: d._conflicts}); }"},
            "s": {"map": "function(d) { if (d.n % 5) emit(d._local_seq, d._rev); }"},
            // A new key at each mapping: a document mapped twice without its back-index
            // read keeps two rows.
            "r": {"map": "function(d) { emit(Math.random(), null); }"},
        });
        let ddoc = json!({"_id": "_design/d", "autoupdate": false, "options": {"local_seq": true}, "views": maps});
        put(db, ddoc)?;
        for n in 0..300u64 {
            // A permutation of 0..300: seq order is not id order.
            let k = (n * 7) % 300;
            put(db, json!({"_id": format!("d{k:03}"), "n": k}))?;
        }
        let system = bunko_engine::security::UserCtx::system();
        for k in (0..300u64).step_by(11) {
            let id = format!("d{k:03}");
            let rev = db.get(&system, &id, None)?.rev;
            match k % 2 {
                0 => put(db, json!({"_id": id, "_rev": rev.to_string(), "n": k + 1}))?,
                _ => drop(db.delete(&admin(), &id, Some(rev))?),
            }
        }
        let conflict =
            json!({"_id": "d005", "_rev": "1-00000000000000000000000000000005", "n": 500});
        let doc = bunko_doc::body::from_value(conflict, &Default::default())?;
        let replicated = bunko_engine::WriteOptions { new_edits: false, ..Default::default() };
        db.put(&admin(), doc, replicated)?;
        Ok(())
    }

    /// Every row of view `view` of `_design/d` (key, id, value) and `total_rows`.
    fn view_rows(db: &Database, view: &str) -> Result<(Option<u64>, Vec<Value>)> {
        let query = ViewQuery { update: crate::Update::False, ..ViewQuery::default() };
        let system = bunko_engine::security::UserCtx::system();
        let r = query_view(&system, db, "_design/d", view, &query, None)?;
        let rows = r.rows.map(|row| row.map(|r| json!([r.key, r.id, r.value])));
        Ok((r.total_rows, rows.collect::<Result<_>>()?))
    }

    /// Builds `_design/d` of `db` to the end, by seq or by a first scan, calling `between`
    /// after each page; returns the checkpoint of its first map index after the first page.
    fn build(db: &Database, scan: bool, pages: Option<usize>) -> Result<u64> {
        build_with(db, scan, pages, |_| Ok(()))
    }

    fn build_with(
        db: &Database,
        scan: bool,
        pages: Option<usize>,
        mut between: impl FnMut(usize) -> Result<()>,
    ) -> Result<u64> {
        let Some(def) = design_group(db, "_design/d")? else { panic!("the design doc has views") };
        let index = view_index(db, def)?;
        let mut compiled = index.build.lock();
        let maps: Vec<&str> = index.def.maps.iter().map(|m| m.source.as_str()).collect();
        compiled.push(crate::runtime().compile_view_set(None, &maps)?);
        let purged = db.purge_seq()?;
        let mut build = GroupBuild {
            db,
            index: &index,
            compiled: &mut compiled,
            applied: None,
            purged,
            pending: None,
            snapshot: None,
            scan,
            resume: None,
        };
        use bunko_indexer::Build;
        let mut first = None;
        let mut steps = 0;
        while let Some(page) = build.step()? {
            first.get_or_insert(index.maps[0].meta().seq);
            steps += 1;
            between(steps)?;
            if !page.more || pages == Some(steps) {
                break;
            }
        }
        build.sync()?;
        Ok(first.unwrap_or_default())
    }

    /// Two databases of an engine with pages of 64 documents, each with [`varied_docs`].
    fn two_dbs() -> Result<(Engine, Arc<Database>, Arc<Database>)> {
        let config = Config { view_page_bytes: 1, ..Config::default() };
        let engine = Engine::open(Arc::new(Memory::new()), config)?;
        let (a, b) =
            (engine.create_db(&admin(), "a", false)?, engine.create_db(&admin(), "b", false)?);
        varied_docs(&a)?;
        varied_docs(&b)?;
        Ok((engine, a, b))
    }

    /// Asserts that the three views of `_design/d` have the same rows in `got` as in
    /// `expected` (view `r`: one row per document).
    fn assert_same_rows(got: &Database, expected: &Database) -> Result<()> {
        for view in ["v", "s"] {
            let (expected, got) = (view_rows(expected, view)?, view_rows(got, view)?);
            assert!(expected.1.len() > 100, "{view}: {} rows", expected.1.len());
            assert_eq!(got, expected, "view {view}");
        }
        assert_eq!(random_view_ids(got)?, random_view_ids(expected)?);
        Ok(())
    }

    #[test]
    fn a_first_build_in_id_order_gives_the_rows_of_a_build_by_seq() -> Result<()> {
        let (_engine, by_seq, scanned) = two_dbs()?;
        assert!(build(&by_seq, false, None)? > 0, "pages by seq move the checkpoint");
        assert_eq!(build(&scanned, true, None)?, 0, "a scan keeps it at 0 to its last page");
        assert_same_rows(&scanned, &by_seq)?;
        let (_, rows) = view_rows(&scanned, "v")?;
        let conflicted = rows.iter().find(|r| r[1] == "d005").map(|r| r[2]["c"].clone());
        assert_eq!(conflicted.and_then(|c| c.as_array().map(Vec::len)), Some(1));
        assert_eq!(view_seq(&scanned)?, scanned.update_seq(), "the scan's checkpoint");
        Ok(())
    }

    /// A scan cut short leaves rows at checkpoint 0 and its position beside them: the next
    /// update resumes there, keeping the rows already written (a random key each: mapped
    /// again, a document would get a new one) and mapping every other document once.
    #[test]
    fn a_first_scan_cut_short_resumes_where_it_stopped() -> Result<()> {
        let (_engine, whole, cut) = two_dbs()?;
        build(&whole, true, None)?;
        assert_eq!(build(&cut, true, Some(2))?, 0);
        let Some(def) = design_group(&cut, "_design/d")? else {
            panic!("the design doc has views")
        };
        let index = view_index(&cut, def)?;
        assert_eq!(index.maps[0].meta().seq, 0, "the scan stopped before its last page");
        let (_, partial) = view_rows(&cut, "r")?;
        assert!(partial.len() >= 64, "two pages applied: {} rows", partial.len());
        update_view(&cut, &index)?;
        assert_same_rows(&cut, &whole)?;
        let (_, full) = view_rows(&cut, "r")?;
        for row in &partial {
            assert!(full.contains(row), "{row} was mapped again");
        }
        let mark = cut.store().get(&entries::scan_key(cut.id(), &index.maps[0].sig))?;
        assert_eq!(mark, None, "the scan's last page removes its position");
        Ok(())
    }

    /// The ids of view `r` (one random key per document mapped), sorted: an id twice is a
    /// document whose old row stayed behind.
    fn random_view_ids(db: &Database) -> Result<Vec<String>> {
        let (_, rows) = view_rows(db, "r")?;
        let mut ids: Vec<String> =
            rows.iter().map(|r| r[1].as_str().unwrap_or("").into()).collect();
        ids.sort();
        Ok(ids)
    }

    /// Round `r` of changes: a document updated, one created, one deleted.
    fn change(db: &Database, r: usize) -> Result<()> {
        let system = bunko_engine::security::UserCtx::system();
        let id = format!("f{:05}", (r * 37 + 100) % (64 * SNAPSHOT_PAGES));
        let rev = db.get(&system, &id, None)?.rev;
        put(db, json!({"_id": id, "_rev": rev.to_string(), "n": 1000 + r}))?;
        // Past the documents a scan reads, so it meets the new ones.
        put(db, json!({"_id": format!("g{r:03}"), "n": r}))?;
        let gone = format!("d{:03}", (r * 61 + 7) % 300);
        if let Ok(doc) = db.get(&system, &gone, None) {
            db.delete(&admin(), &gone, Some(doc.rev))?;
        }
        Ok(())
    }

    /// Documents changed, created and deleted while a first scan runs, across renewed
    /// snapshots: those changed after its first snapshot are left to the pages by seq that
    /// follow it, and every document ends with the rows of its latest state.
    #[test]
    fn documents_changed_during_a_first_scan_end_with_their_latest_rows() -> Result<()> {
        let (_engine, by_seq, scanned) = two_dbs()?;
        for db in [&by_seq, &scanned] {
            // 64 documents a page: enough pages for the scan to renew its snapshot.
            for n in 0..64 * SNAPSHOT_PAGES {
                put(db, json!({"_id": format!("f{n:05}"), "n": n}))?;
            }
        }
        let mut rounds = 0;
        build_with(&scanned, true, None, |_| {
            rounds += 1;
            change(&scanned, rounds)
        })?;
        assert!(rounds > SNAPSHOT_PAGES, "{rounds} pages");
        build(&scanned, true, None)?;
        for r in 1..=rounds {
            change(&by_seq, r)?;
        }
        build(&by_seq, false, None)?;
        assert_same_rows(&scanned, &by_seq)
    }

    fn view_seq(db: &Database) -> Result<u64> {
        let Some(def) = design_group(db, "_design/d")? else { panic!("the design doc has views") };
        Ok(view_index(db, def)?.seq())
    }

    #[test]
    fn pages_shared_among_workers_keep_rows_and_counts_exact() -> Result<()> {
        let engine = Engine::open(Arc::new(Memory::new()), Config::default())?;
        let db = engine.create_db(&admin(), "v", false)?;
        let map = "function(d) { for (var i = 0; i < d.n % 3; i++) emit([d.n, i], null); }";
        put(&db, json!({"_id": "_design/d", "views": {"v": {"map": map}}}))?;
        for n in 0..2500 {
            put(&db, json!({"_id": format!("d{n:04}"), "n": n}))?;
        }
        let total = |db: &Database| -> Result<(Option<u64>, usize)> {
            let r = query_view(
                &bunko_engine::security::UserCtx::system(),
                db,
                "_design/d",
                "v",
                &ViewQuery::default(),
                None,
            )?;
            Ok((r.total_rows, r.rows.count()))
        };
        // n % 3 rows per document: 833 documents emit 1 row and 833 emit 2.
        assert_eq!(total(&db)?, (Some(2499), 2499));
        for n in (0..2500).step_by(2) {
            let id = format!("d{n:04}");
            let rev = db.get(&bunko_engine::security::UserCtx::system(), &id, None)?.rev;
            if n % 4 == 0 {
                db.delete(&admin(), &id, Some(rev))?;
            } else {
                put(&db, json!({"_id": id, "_rev": rev.to_string(), "n": 2}))?;
            }
        }
        let expected: usize = (0..2500)
            .map(|n| match (n % 2, n % 4) {
                (1, _) => n % 3,
                (_, 0) => 0,
                _ => 2,
            })
            .sum();
        assert_eq!(total(&db)?, (Some(expected as u64), expected));
        Ok(())
    }
}
