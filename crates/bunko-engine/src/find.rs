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

use std::collections::HashSet;
use std::ops::Bound;
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bunko_doc::collate;
use bunko_doc::id::{DocKind, kind};
use bunko_query::plan::{self, IndexInfo, KeyRange, Plan};
use bunko_query::{Dialect, FieldPath, Selector};
use bunko_storage::{Iter, Range, Snapshot, prefix_range};
use serde_json::Value;

use crate::database::Database;
use crate::index::{Index, entries};
use crate::keys::{self, Key};
use crate::{Error, Result, records};

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
}

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

impl Database {
    /// Plans a query without running it (`_explain`). A sorted query that only an index
    /// still being built could answer waits for that build, as CouchDB's first query
    /// after creating an index does; other queries never wait.
    pub fn explain(&self, query: &FindQuery) -> Result<(Vec<Arc<Index>>, Plan, Vec<Range>)> {
        let partition = query.partition.is_some();
        let pinned = self.decode_bookmark(query)?.map(|(num, _)| num);
        let mut candidates = self.candidates(partition, pinned)?;
        let plan = match self.plan_query(query, &candidates) {
            Err(Error::Invalid { error: "no_usable_index", .. })
                if self.wait_for_builds(partition) =>
            {
                candidates = self.candidates(partition, pinned)?;
                self.plan_query(query, &candidates)?
            }
            other => other?,
        };
        let scanned = self.scan_ranges(query, &plan, &candidates);
        Ok((candidates, plan, scanned))
    }

    /// Waits (up to [`BUILD_WAIT`]) until no index of this kind is being built; `false` if
    /// none was.
    fn wait_for_builds(&self, partition: bool) -> bool {
        let building =
            || self.indexes.all().iter().any(|i| !i.is_ready() && i.def.partitioned == partition);
        if !building() {
            return false;
        }
        let deadline = std::time::Instant::now() + BUILD_WAIT;
        while building() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        true
    }

    /// Runs a query.
    pub fn find(&self, query: &FindQuery) -> Result<FindResult> {
        let (candidates, plan, scanned) = self.explain(query)?;
        let index = plan.index.and_then(|i| candidates.get(i).cloned());
        let snapshot = self.store.snapshot();
        let after = self.decode_bookmark(query)?.map(|(_, key)| key);
        let mut run = Run::new(query, after);
        for range in &scanned {
            let done = match &index {
                Some(_) => self.scan_index(&snapshot, range, query.descending, &mut run)?,
                None => self.scan_docs(&snapshot, range, query.descending, &mut run)?,
            };
            if done {
                break;
            }
        }
        let warning = index.is_none().then(|| NO_INDEX_WARNING.to_string());
        let bookmark = encode_bookmark(index.as_deref(), run.last_key.as_deref());
        let mut stats = run.stats;
        stats.results_returned = run.docs.len() as u64;
        Ok(FindResult { docs: run.docs, bookmark, warning, stats, index, plan, scanned })
    }

    /// The complete indexes a query of this kind may use; a bookmark pins the index its
    /// page came from (`0`: none), so that paging continues in the same order.
    fn candidates(&self, partition: bool, pinned: Option<u64>) -> Result<Vec<Arc<Index>>> {
        let all = self.indexes.all();
        let usable = |i: &&Arc<Index>| {
            i.is_ready() && i.def.partitioned == partition && pinned.is_none_or(|n| n == i.num())
        };
        let candidates: Vec<Arc<Index>> = all.iter().filter(usable).cloned().collect();
        if pinned.is_some_and(|n| n != 0) && candidates.is_empty() {
            return Err(invalid_bookmark(query_bookmark_text(pinned)));
        }
        Ok(candidates)
    }

    fn plan_query(&self, query: &FindQuery, candidates: &[Arc<Index>]) -> Result<Plan> {
        let infos: Vec<IndexInfo> = candidates
            .iter()
            .map(|i| IndexInfo {
                ddoc: i.def.ddoc.clone(),
                name: i.def.name.clone(),
                fields: i.compiled.paths().to_vec(),
                has_partial_filter: i.def.partial_filter.is_some(),
            })
            .collect();
        let use_index = query.use_index.as_ref().map(|(d, n)| (d.as_str(), n.as_deref()));
        let mut plan = plan::plan(&query.selector, &query.sort, &infos, use_index);
        if plan.index.is_none() && use_index.is_some() {
            plan = plan::plan(&query.selector, &query.sort, &infos, None);
        }
        if plan.index.is_none() && !query.sort.is_empty() {
            return Err(no_usable_index(self.is_partitioned(), query.partition.is_some()));
        }
        Ok(plan)
    }

    /// The storage ranges a plan scans, in scan order.
    fn scan_ranges(&self, query: &FindQuery, plan: &Plan, candidates: &[Arc<Index>]) -> Vec<Range> {
        let db = self.id();
        let Some(index) = plan.index.and_then(|i| candidates.get(i)) else {
            let range = match &query.partition {
                Some(p) => keys::doc_prefix(db, &format!("{p}:")),
                None => keys::doc_range(db),
            };
            return vec![range];
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

    /// Reads matching documents from index entries; `true` when the page is full.
    fn scan_index(
        &self,
        snap: &Snapshot,
        range: &Range,
        reverse: bool,
        run: &mut Run,
    ) -> Result<bool> {
        let range = run.resume(range, reverse);
        for entry in Iter::new(snap.clone(), range, reverse, 256) {
            let (key, value) = entry?;
            run.stats.keys_examined += 1;
            let Some((_, id)) = entries::decode_value(&value) else { continue };
            if run.seen.insert(id.clone())
                && let Some(doc) = self.read_doc(snap, &id, run)?
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
        reverse: bool,
        run: &mut Run,
    ) -> Result<bool> {
        let range = run.resume(range, reverse);
        for entry in Iter::new(snap.clone(), range, reverse, 256) {
            let (key, _) = entry?;
            run.stats.keys_examined += 1;
            let id = keys::decode_doc(&key)?;
            if kind(&id) != DocKind::Normal {
                continue;
            }
            if let Some(doc) = self.read_doc(snap, &id, run)?
                && run.offer(doc, &key)
            {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The current winning body of `id` as Mango sees it, if it exists and matches.
    fn read_doc(&self, snap: &Snapshot, id: &str, run: &mut Run) -> Result<Option<Value>> {
        let db = self.id();
        let Some(info) = snap.get(&Key::Doc(db, id).encode())? else { return Ok(None) };
        let info: records::DocInfo = records::decode(&info)?;
        let (rev, deleted) = info.winner()?;
        if deleted {
            return Ok(None);
        }
        let rev = rev.to_string();
        let Some(body) = snap.get(&Key::Rev(db, id, &rev).encode())? else { return Ok(None) };
        run.stats.docs_examined += 1;
        let doc = entries::mango_doc(id, &rev, &body);
        Ok(run.selector.matches(&doc, Dialect::Mango).then_some(doc))
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
        let prefix =
            if num == 0 { keys::doc_range_prefix(db) } else { entries::prefix(db, num, None) };
        if !key.starts_with(&prefix) {
            return Err(invalid());
        }
        Ok(Some((num, key)))
    }
}

fn invalid_bookmark(shown: String) -> Error {
    Error::Invalid { error: "invalid_bookmark", reason: format!("Invalid bookmark value: {shown}") }
}

fn query_bookmark_text(num: Option<u64>) -> String {
    format!("index {} no longer exists", num.unwrap_or_default())
}

/// The state of one query run: the page being filled and the counters.
struct Run<'a> {
    selector: &'a Selector,
    skip: usize,
    limit: usize,
    docs: Vec<Value>,
    seen: HashSet<String>,
    stats: ExecStats,
    /// Storage key of the last document put on the page (for the next bookmark).
    last_key: Option<Vec<u8>>,
    /// Continue after this storage key (from the request's bookmark).
    after: Option<Vec<u8>>,
}

impl<'a> Run<'a> {
    fn new(query: &'a FindQuery, after: Option<Vec<u8>>) -> Self {
        Run {
            selector: &query.selector,
            skip: query.skip,
            limit: query.limit,
            docs: Vec::new(),
            seen: HashSet::new(),
            stats: ExecStats::default(),
            last_key: after.clone(),
            after,
        }
    }

    /// Takes a matching document; `true` when the page is full.
    fn offer(&mut self, doc: Value, key: &[u8]) -> bool {
        if self.docs.len() >= self.limit {
            return true;
        }
        if self.skip > 0 {
            self.skip -= 1;
        } else {
            self.docs.push(doc);
            self.last_key = Some(key.to_vec());
        }
        self.docs.len() >= self.limit
    }

    /// `range` without what the bookmark says was already returned.
    fn resume(&self, range: &Range, reverse: bool) -> Range {
        let Some(after) = &self.after else { return range.clone() };
        let (start, end) = range.clone();
        if reverse { (start, min_end(end, after)) } else { (max_start(start, after), end) }
    }
}

fn max_start(start: Bound<Vec<u8>>, after: &[u8]) -> Bound<Vec<u8>> {
    match &start {
        Bound::Included(s) | Bound::Excluded(s) if s.as_slice() > after => start,
        _ => Bound::Excluded(after.to_vec()),
    }
}

fn min_end(end: Bound<Vec<u8>>, after: &[u8]) -> Bound<Vec<u8>> {
    match &end {
        Bound::Included(e) | Bound::Excluded(e) if e.as_slice() < after => end,
        _ => Bound::Excluded(after.to_vec()),
    }
}

/// The storage range of one key range of an index whose entries start with `base`.
fn byte_range(base: &[u8], range: &KeyRange) -> Range {
    let mut fixed = base.to_vec();
    for v in &range.eq {
        collate::encode(v, &mut fixed);
    }
    let with = |v: &Value| {
        let mut key = fixed.clone();
        collate::encode(v, &mut key);
        key
    };
    let after = |key: Vec<u8>| prefix_range(&key).1;
    let start = match &range.lower {
        Some(b) if b.inclusive => Bound::Included(with(&b.value)),
        Some(b) => after(with(&b.value)),
        None => Bound::Included(fixed.clone()),
    };
    let end = match &range.upper {
        Some(b) if b.inclusive => after(with(&b.value)),
        Some(b) => Bound::Excluded(with(&b.value)),
        None => prefix_range(&fixed).1,
    };
    (start, end)
}

fn encode_bookmark(index: Option<&Index>, last: Option<&[u8]>) -> String {
    let Some(last) = last else { return "nil".to_string() };
    let num = index.map_or(0, Index::num);
    let bytes = postcard::to_stdvec(&(num, last.to_vec())).unwrap_or_default();
    URL_SAFE_NO_PAD.encode(bytes)
}

fn no_usable_index(db_partitioned: bool, partition_query: bool) -> Error {
    let reason = match (db_partitioned, partition_query) {
        (false, _) => "No index exists for this sort, try indexing by the sort fields.",
        (true, true) => {
            "No partitioned index exists for this sort, try indexing by the sort fields."
        }
        (true, false) => "No global index exists for this sort, try indexing by the sort fields.",
    };
    Error::Invalid { error: "no_usable_index", reason: reason.to_string() }
}
