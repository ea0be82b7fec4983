//! Running a Mango query (`_find`): plan, scan, fetch, match, page.
//!
//! 1. [`bunko_query::plan::plan`] picks a complete index of the right kind (partitioned
//!    indexes for a partition query, global ones otherwise) and its key ranges.
//! 2. Each range becomes one contiguous scan of the index's entries (inside the
//!    partition's prefix for a partition query); each entry names a document, read once
//!    even when several of its array elements match.
//! 3. Without a usable index the query scans the documents themselves: the database, or
//!    for a partition query only the partition's ids, never the whole database.
//! 4. Every document read is checked against the full selector, so an index only ever
//!    narrows what is read. `skip`, `limit` and the bookmark apply to matching documents.
//! 5. A **covering** query (CouchDB's rule: `fields` and every field the selector names
//!    are `_id` or indexed fields) reads no documents: each entry keeps the document's
//!    whole values at the indexed paths, and the selector is checked against those.
//!
//! `scan` holds the per-run state and the storage ranges of key ranges; `outcome`
//! covering, warnings and errors; [`text`] runs a query the planner gave to a Mango text
//! index (through the search service).

pub mod mongo;
pub mod mongo_count;
mod mongo_cover;
pub mod mongo_distinct;
pub mod mongo_index;
mod mongo_key;
pub mod mongo_merge;
mod mongo_multikey;
mod mongo_natural;
pub mod mongo_stream;
mod outcome;
mod scan;
pub mod text;

use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bunko_doc::collate;
use bunko_doc::id::{DocKind, kind};
use bunko_query::plan::{self, Choice, IndexInfo, Plan, PlanError};
use bunko_query::{Dialect, FieldPath, Selector};
use bunko_storage::{Iter, Range, Snapshot};
use serde_json::Value;

use crate::database::Database;
use crate::index::text::TextIndexDef;
use crate::index::{Index, entries};
use crate::keys::{self, Key};
use crate::security::UserCtx;
use crate::{Error, Result, records};
pub use outcome::covers;
use outcome::{covered_doc, invalid_index, no_usable_index, warnings};
use scan::{Run, byte_range, id_range};

/// CouchDB's warning when no index was used.
pub const NO_INDEX_WARNING: &str =
    "No matching index found, create an index to optimize query time.";

/// The longest a sorted query waits for an index build.
pub const BUILD_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// A validated `_find` request.
#[derive(Debug, Clone)]
pub struct FindQuery {
    pub selector: Selector,
    /// Sort fields; `descending` applies to all of them.
    pub sort: Vec<FieldPath>,
    pub descending: bool,
    pub limit: usize,
    pub skip: usize,
    /// `use_index`: a design document, optionally with an index name.
    pub use_index: Option<(String, Option<String>)>,
    pub partition: Option<String>,
    /// Where the previous page stopped (from its `bookmark`).
    pub bookmark: Option<String>,
    /// `allow_fallback`: use another index when `use_index` names no usable one.
    pub allow_fallback: bool,
    /// `fields` (`None`: whole documents), to know whether the index covers the query.
    pub fields: Option<Vec<FieldPath>>,
    /// `conflicts`: add `_conflicts` to each document.
    pub conflicts: bool,
    /// `update` (and not `stale: "ok"`): a text index is brought up to date before it is
    /// searched; `false` reads it as it is. (JSON indexes are always current.)
    pub update: bool,
    /// How the selector matches. [`Dialect::Mongo`] queries (see [`mongo`]) see documents in
    /// their MongoDB form and use no Mango index.
    pub dialect: Dialect,
    /// Who asks (`None`: not said), so that the advisor can tie the lookups by id that
    /// follow the query to it ([`crate::advisor::follow`]).
    pub client: Option<crate::advisor::Client>,
}

impl FindQuery {
    /// A query for `selector` with `_find`'s defaults: no sort, `limit` 25, any index.
    pub fn new(selector: Selector, dialect: Dialect) -> FindQuery {
        FindQuery {
            selector,
            sort: Vec::new(),
            descending: false,
            limit: 25,
            skip: 0,
            use_index: None,
            partition: None,
            bookmark: None,
            allow_fallback: true,
            fields: None,
            conflicts: false,
            update: true,
            dialect,
            client: None,
        }
    }
}

/// CouchDB's warning when the index scan reads many documents per result
/// (`mango_cursor:index_scan_warning`, threshold 10).
pub const SCAN_WARNING: &str = "The number of documents examined is high in proportion to the number of results returned. Consider adding a more specific index to improve this.";

/// `execution_stats`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ExecStats {
    pub keys_examined: u64,
    pub docs_examined: u64,
    pub results_returned: u64,
}

/// The answer to a `_find`.
#[derive(Debug)]
pub struct FindResult {
    /// Matching documents, `_id` and `_rev` included.
    pub docs: Vec<Value>,
    pub bookmark: String,
    pub warning: Option<String>,
    pub stats: ExecStats,
    /// The index used (`None`: all documents were scanned).
    pub index: Option<Arc<Index>>,
    pub plan: Plan,
    /// The storage ranges scanned.
    pub scanned: Vec<Range>,
}

/// A planned query: the indexes the planner saw, its plan, and the storage ranges it reads.
#[derive(Debug)]
pub struct Planned {
    /// JSON indexes; the plan's index numbers count these first, then `text`.
    pub indexes: Vec<Arc<Index>>,
    pub text: Vec<TextIndexDef>,
    pub plan: Plan,
    pub scanned: Vec<Range>,
}

/// An index of a plan.
#[derive(Debug, Clone, Copy)]
pub enum PlannedIndex<'a> {
    Json(&'a Arc<Index>),
    Text(&'a TextIndexDef),
}

impl Planned {
    /// The index at position `i` of the plan's numbering.
    pub fn get(&self, i: usize) -> Option<PlannedIndex<'_>> {
        match self.indexes.get(i) {
            Some(ix) => Some(PlannedIndex::Json(ix)),
            None => self.text.get(i - self.indexes.len()).map(PlannedIndex::Text),
        }
    }

    /// The chosen JSON index.
    pub fn chosen_json(&self) -> Option<&Arc<Index>> {
        self.plan.index().and_then(|i| self.indexes.get(i))
    }

    /// The chosen text index.
    pub fn chosen_text(&self) -> Option<&TextIndexDef> {
        match self.plan.index().and_then(|i| self.get(i)) {
            Some(PlannedIndex::Text(def)) => Some(def),
            _ => None,
        }
    }
}

impl PlannedIndex<'_> {
    /// The entry of `GET /{db}/_index` (and of `_explain`).
    pub fn to_json(&self) -> Value {
        match self {
            PlannedIndex::Json(ix) => ix.def.to_json(),
            PlannedIndex::Text(def) => def.to_json(),
        }
    }
}

impl Database {
    /// Plans a query without running it (`_explain`). Indexes still being built are
    /// planned with too, so that `_explain` lists every index as CouchDB does; when one
    /// of them would be chosen (or nothing complete is usable) the query waits for the
    /// build, as CouchDB's first query after creating an index waits for it. A query never
    /// reads an incomplete index.
    pub fn explain(&self, query: &FindQuery) -> Result<Planned> {
        let partition = query.partition.is_some();
        let bookmark = self.decode_bookmark(query)?.map(|(num, _)| num);
        let pinned = bookmark.filter(|n| *n != text::BOOKMARK_NUM);
        let mongo = query.dialect == Dialect::Mongo;
        let texts =
            if mongo || self.text.get().is_none() { Vec::new() } else { self.text_indexes()? };
        let texts: Vec<TextIndexDef> = match bookmark {
            Some(n) if n != text::BOOKMARK_NUM => Vec::new(),
            _ => texts,
        };
        let mut candidates = if mongo || bookmark == Some(text::BOOKMARK_NUM) {
            Vec::new()
        } else {
            self.candidates(partition, pinned, true)?
        };
        let mut plan = self.plan_query(query, &candidates, &texts)?;
        let waits = match plan.choice {
            Choice::Index(i) => candidates.get(i).is_some_and(|ix| !ix.is_ready()),
            Choice::Nothing => !mongo && self.building(partition),
            Choice::AllDocs => false,
        };
        if waits {
            self.wait_for_builds(partition);
            candidates = self.candidates(partition, pinned, true)?;
            plan = self.plan_query(query, &candidates, &texts)?;
            let incomplete =
                plan.index().and_then(|i| candidates.get(i)).is_some_and(|ix| !ix.is_ready());
            if incomplete {
                candidates = self.candidates(partition, pinned, false)?;
                plan = self.plan_query(query, &candidates, &texts)?;
            }
        }
        let scanned = match plan.index() {
            Some(i) if i >= candidates.len() => Vec::new(),
            _ => self.scan_ranges(query, &plan, &candidates),
        };
        Ok(Planned { indexes: candidates, text: texts, plan, scanned })
    }

    /// Whether some index of this kind is being built.
    fn building(&self, partition: bool) -> bool {
        let all = self.indexes.all();
        all.iter().any(|i| !i.is_ready() && i.def.partitioned == partition && i.def.mongo.is_none())
    }

    /// Waits (up to [`BUILD_WAIT`]) until no index of this kind is being built.
    fn wait_for_builds(&self, partition: bool) {
        let deadline = std::time::Instant::now() + BUILD_WAIT;
        while self.building(partition) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// Runs a query over the documents as `reader` sees them (`crate::read_gate`).
    pub fn find(&self, reader: &UserCtx, query: &FindQuery) -> Result<FindResult> {
        let sight = self.sight(reader)?;
        let planned = self.explain(query)?;
        if planned.plan.choice == Choice::Nothing {
            return Err(no_usable_index(self.is_partitioned(), query.partition.is_some()));
        }
        if let Some(def) = planned.chosen_text() {
            let offset = match self.decode_bookmark(query)? {
                Some((text::BOOKMARK_NUM, key)) => text_offset(&key),
                _ => 0,
            };
            return self.text_result(query, def, offset, planned.plan.clone(), sight);
        }
        let Planned { indexes: candidates, plan, scanned, .. } = planned;
        let index = plan.index().and_then(|i| candidates.get(i).cloned());
        // A covered query answers from index entries; a reader who may not see whole
        // documents gets them read and passed through the read gate instead.
        let covering = sight.is_whole() && index.as_deref().is_some_and(|i| covers(i, query));
        let snapshot = self.store.snapshot();
        let after = self.decode_bookmark(query)?.map(|(_, key)| key);
        let mut run = Run::new(query, after, sight);
        if !query.selector.is_noop() {
            for range in &scanned {
                let done = match &index {
                    Some(ix) => {
                        let cover = covering.then_some(ix.compiled.paths());
                        self.scan_index(&snapshot, range, query, cover, &mut run)?
                    }
                    None => self.scan_docs(&snapshot, range, query, &mut run)?,
                };
                if done {
                    break;
                }
            }
        }
        let bookmark = encode_bookmark(index.as_deref(), run.last_key.as_deref());
        let mut stats = run.stats;
        stats.results_returned = run.docs.len() as u64;
        let warning = warnings(query, &plan, &stats);
        self.observe_query(query, index.as_deref(), &stats);
        Ok(FindResult { docs: run.docs, bookmark, warning, stats, index, plan, scanned })
    }

    /// Logs a query run for the advisor, and remembers it as its client's last query; counts
    /// the use of its index (or of the `_id` index, for a MongoDB query by `_id`).
    pub(crate) fn observe_query(
        &self,
        query: &FindQuery,
        index: Option<&Index>,
        stats: &ExecStats,
    ) {
        match index {
            Some(index) => index.accesses.record(),
            None if query.dialect == Dialect::Mongo
                && mongo::id_range(self.id(), &query.selector).is_some() =>
            {
                self.id_accesses.record();
            }
            None => {}
        }
        let shape = self.observed.record(query, index, stats);
        if let Some(client) = &query.client {
            self.clients.queried(client, self.weak(), shape);
        }
    }

    /// The complete indexes (with `building`, also those being built), of either kind
    /// (the planner uses only the query's kind and lists the others); a bookmark pins the
    /// index its page came from (`0`: none), so that paging continues in the same order.
    fn candidates(
        &self,
        partition: bool,
        pinned: Option<u64>,
        building: bool,
    ) -> Result<Vec<Arc<Index>>> {
        let all = self.indexes.all();
        let usable = |i: &&Arc<Index>| {
            i.def.mongo.is_none()
                && (building || i.is_ready())
                && pinned.is_none_or(|n| n == i.num())
        };
        let candidates: Vec<Arc<Index>> = all.iter().filter(usable).cloned().collect();
        let of_kind = candidates.iter().any(|i| i.def.partitioned == partition);
        if pinned.is_some_and(|n| n != 0) && !of_kind {
            return Err(invalid_bookmark(query_bookmark_text(pinned)));
        }
        Ok(candidates)
    }

    fn plan_query(
        &self,
        query: &FindQuery,
        candidates: &[Arc<Index>],
        texts: &[TextIndexDef],
    ) -> Result<Plan> {
        let partition = query.partition.is_some();
        let mut infos: Vec<IndexInfo> = candidates
            .iter()
            .map(|i| IndexInfo {
                ddoc: i.def.ddoc.clone(),
                name: i.def.name.clone(),
                kind: plan::Kind::Json,
                fields: i.compiled.paths().to_vec(),
                has_partial_filter: i.def.partial_filter.is_some(),
                in_scope: i.def.partitioned == partition,
            })
            .collect();
        infos.extend(texts.iter().map(|t| IndexInfo {
            ddoc: t.ddoc.clone(),
            name: t.name.clone(),
            kind: plan::Kind::Text(t.columns()),
            fields: Vec::new(),
            has_partial_filter: t.partial_filter().is_some(),
            in_scope: t.partitioned == partition,
        }));
        let req = plan::Request {
            selector: &query.selector,
            sort: &query.sort,
            use_index: query.use_index.as_ref().map(|(d, n)| (d.as_str(), n.as_deref())),
            allow_fallback: query.allow_fallback,
        };
        plan::plan(&req, &infos).map_err(|e| match e {
            PlanError::InvalidIndex(parts) => invalid_index(&parts),
            PlanError::MultipleTextIndexes => Error::Invalid {
                error: "multiple_text_indexes",
                reason: "You must specify an index with the `use_index` parameter.".into(),
            },
        })
    }

    /// The storage ranges a plan scans, in scan order.
    fn scan_ranges(&self, query: &FindQuery, plan: &Plan, candidates: &[Arc<Index>]) -> Vec<Range> {
        let db = self.id();
        let Some(index) = plan.index().and_then(|i| candidates.get(i)) else {
            let outer = match &query.partition {
                Some(p) => keys::doc_prefix(db, &format!("{p}:")),
                None => keys::doc_range(db),
            };
            if query.dialect == Dialect::Mongo {
                return vec![mongo::id_range(db, &query.selector).unwrap_or(outer)];
            }
            return match plan.ranges.first() {
                Some(r) => vec![id_range(db, outer, r)],
                None => vec![outer],
            };
        };
        let base = entries::prefix(db, index.num(), query.partition.as_deref());
        let mut ranges = plan.ranges.clone();
        ranges.sort_by(|a, b| {
            collate::compare(&Value::from(a.eq.clone()), &Value::from(b.eq.clone()))
        });
        if query.descending {
            ranges.reverse();
        }
        ranges.iter().map(|r| byte_range(&base, r)).collect()
    }

    /// Reads matching documents from index entries; `true` when the page is full. With
    /// `cover` (the index's paths) the documents are assembled from the entries.
    fn scan_index(
        &self,
        snap: &Snapshot,
        range: &Range,
        query: &FindQuery,
        cover: Option<&[FieldPath]>,
        run: &mut Run,
    ) -> Result<bool> {
        let range = run.resume(range, query.descending);
        for entry in Iter::new(snap.clone(), range, query.descending, 256).first_page(run.wanted())
        {
            let (key, value) = entry?;
            run.stats.keys_examined += 1;
            crate::deadline::check()?;
            let Some((_, id, whole)) = entries::decode_full(&value) else { continue };
            if !run.seen.insert(id.clone()) {
                continue;
            }
            let doc = match (cover, whole) {
                (Some(paths), Some(whole)) => covered_doc(&id, paths, whole, run.selector),
                _ => self.read_doc_by_id(snap, &id, query, run)?,
            };
            if let Some(doc) = doc
                && run.offer(doc, &key)
            {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Reads matching documents straight from the documents; `true` when the page is full.
    fn scan_docs(
        &self,
        snap: &Snapshot,
        range: &Range,
        query: &FindQuery,
        run: &mut Run,
    ) -> Result<bool> {
        let range = run.resume(range, query.descending);
        for entry in Iter::new(snap.clone(), range, query.descending, 256).first_page(run.wanted())
        {
            let (key, record) = entry?;
            let record = records::DocRecord::decode(&record)?;
            if record.info.winner()?.1 {
                continue; // deleted: not a row of `_all_docs`
            }
            run.stats.keys_examined += 1;
            crate::deadline::check()?;
            let id = keys::decode_doc(&key)?;
            if kind(&id) != DocKind::Normal {
                // CouchDB reads design documents too, then skips them; a MongoDB collection
                // has none (its `_design/mongodb` holds index definitions).
                if query.dialect != Dialect::Mongo {
                    run.stats.docs_examined += 1;
                }
                continue;
            }
            if let Some(doc) = self.read_doc(snap, &id, &record, query, run)?
                && run.offer(doc, &key)
            {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// [`Database::read_doc`] of a document named by an index entry.
    fn read_doc_by_id(
        &self,
        snap: &Snapshot,
        id: &str,
        query: &FindQuery,
        run: &mut Run,
    ) -> Result<Option<Value>> {
        let Some(info) = snap.get(&Key::Doc(self.id(), id).encode())? else { return Ok(None) };
        self.read_doc(snap, id, &records::DocRecord::decode(&info)?, query, run)
    }

    /// The winning body of `id` (whose `Doc` record is `record`) as Mango sees it, if it
    /// is not deleted and matches.
    fn read_doc(
        &self,
        snap: &Snapshot,
        id: &str,
        record: &records::DocRecord,
        query: &FindQuery,
        run: &mut Run,
    ) -> Result<Option<Value>> {
        let (db, info) = (self.id(), &record.info);
        let (rev, deleted) = info.winner()?;
        if deleted {
            return Ok(None);
        }
        let Some(body) = crate::read::body_of(snap.as_ref(), db, id, rev, Some(record))? else {
            return Ok(None);
        };
        run.stats.docs_examined += 1;
        let Some((rev, body)) = run.sight.body(id, info, rev, false, body)? else {
            return Ok(None);
        };
        let rev = rev.to_string();
        if query.dialect == Dialect::Mongo {
            return Ok(mongo::matching_doc(id, &body, run.selector));
        }
        let mut doc = entries::mango_doc(id, &rev, &body);
        if query.conflicts {
            entries::add_conflicts(&mut doc, &entries::conflicts_of(info));
        }
        if !run.selector.matches(&doc, Dialect::Mango) {
            return Ok(None);
        }
        Ok(Some(doc))
    }

    /// The index number and storage key of the request's bookmark, if it has one.
    fn decode_bookmark(&self, query: &FindQuery) -> Result<Option<(u64, Vec<u8>)>> {
        let Some(bookmark) = query.bookmark.as_deref().filter(|b| !b.is_empty() && *b != "nil")
        else {
            return Ok(None);
        };
        let invalid = || invalid_bookmark(format!("\"{bookmark}\""));
        let bytes = URL_SAFE_NO_PAD.decode(bookmark).map_err(|_| invalid())?;
        let (num, key): (u64, Vec<u8>) = postcard::from_bytes(&bytes).map_err(|_| invalid())?;
        let db = self.id();
        let prefix = match num {
            0 => keys::doc_range_prefix(db),
            text::BOOKMARK_NUM if key.len() == 8 => Vec::new(),
            _ => entries::prefix(db, num, None),
        };
        if !key.starts_with(&prefix) || (num == text::BOOKMARK_NUM && key.len() != 8) {
            return Err(invalid());
        }
        Ok(Some((num, key)))
    }
}

/// The offset a text query's bookmark holds.
fn text_offset(key: &[u8]) -> usize {
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(key.get(..8).unwrap_or(&[0; 8]));
    u64::from_be_bytes(bytes) as usize
}

fn invalid_bookmark(shown: String) -> Error {
    Error::Invalid { error: "invalid_bookmark", reason: format!("Invalid bookmark value: {shown}") }
}

fn query_bookmark_text(num: Option<u64>) -> String {
    format!("index {} no longer exists", num.unwrap_or_default())
}

fn encode_bookmark(index: Option<&Index>, last: Option<&[u8]>) -> String {
    let Some(last) = last else { return "nil".to_string() };
    let num = index.map_or(0, Index::num);
    let bytes = postcard::to_stdvec(&(num, last.to_vec())).unwrap_or_default();
    URL_SAFE_NO_PAD.encode(bytes)
}
