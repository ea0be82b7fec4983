//! `_all_docs`: documents in id order, as one range scan of `Doc` keys on a snapshot.
//!
//! A partition's `_all_docs` is the same scan bounded to the ids `p:…`, one contiguous range
//! ([`crate::keys::doc_prefix`]), so its cost does not depend on the rest of the database.
//! Its `total_rows` is the partition's `doc_count` (one read of its counters).
//!
//! `offset` is the number of live documents before the first row (plus `skip`), which
//! CouchDB reads from its B-tree's reductions; a key-value store has none, so:
//! - in a partition, the partition's documents before the start key are counted (bounded
//!   by the partition's size);
//! - in a global query of a partitioned database, the partitions' counters are summed and
//!   only the partition the start key falls in is counted (`count_by_partition`);
//! - otherwise every document before the start key is counted, so a start key deep in a
//!   large database costs a scan up to it.
//!
//! Rows are read in pages that start at `skip + limit` entries and grow, so a short page of
//! a long range reads little more than it returns.

use std::ops::Bound;

use bunko_doc::RevId;
use bunko_storage::{Iter, Range, Read, Snapshot};

use crate::Result;
use crate::database::Database;
use crate::keys::{self, Key};
use crate::read::{DocOut, doc_info_in, get_in};
use crate::records::{self, DocInfo, Stats};

/// How many `Doc` entries counting reads at a time.
const COUNT_PAGE: usize = 1024;

/// The parameters of an `_all_docs` range query.
#[derive(Debug, Clone)]
pub struct AllDocsQuery {
    pub start: Option<String>,
    pub end: Option<String>,
    pub inclusive_end: bool,
    pub descending: bool,
    pub skip: u64,
    pub limit: Option<u64>,
    pub include_docs: bool,
    /// Only ids starting with this (a partition's `p:`, or `_design/`).
    pub prefix: Option<String>,
}

impl Default for AllDocsQuery {
    fn default() -> Self {
        Self {
            start: None,
            end: None,
            inclusive_end: true,
            descending: false,
            skip: 0,
            limit: None,
            include_docs: false,
            prefix: None,
        }
    }
}

/// One row of `_all_docs`.
#[derive(Debug)]
pub struct Row {
    pub id: String,
    pub rev: RevId,
    pub deleted: bool,
    pub info: DocInfo,
    /// The document, with `include_docs` (absent for deleted rows of a `keys` query).
    pub doc: Option<DocOut>,
}

/// A started `_all_docs` query: header values and the streaming rows.
pub struct AllDocs {
    pub total_rows: u64,
    pub offset: u64,
    pub update_seq: u64,
    pub rows: Rows,
}

/// The rows of an `_all_docs` query, read lazily from a snapshot.
pub struct Rows {
    snapshot: Snapshot,
    db: u64,
    iter: Iter,
    skip: u64,
    remaining: u64,
    include_docs: bool,
}

impl Database {
    /// Starts an `_all_docs` range query; `total_rows` counts the live documents of the
    /// database (or of the partition named by `partition`).
    pub fn all_docs(&self, query: &AllDocsQuery, partition: Option<&str>) -> Result<AllDocs> {
        let db = self.id();
        let snapshot = self.snapshot();
        let base = match &query.prefix {
            Some(prefix) => keys::doc_prefix(db, prefix),
            None => keys::doc_range(db),
        };
        let total_rows = match (partition, &query.prefix) {
            (Some(p), _) => self.partition_stats(p)?.doc_count,
            // `_design_docs`: design documents are few, so counting them is cheap.
            (None, Some(_)) => count_live(snapshot.as_ref(), &base)?,
            (None, None) => self.info().stats.doc_count,
        };
        let range = narrow(base.clone(), db, query);
        let before_range = outside(&base, &range, query.descending);
        let before = if partition.is_none() && query.prefix.is_none() && self.is_partitioned() {
            // Counting one page directly is cheaper than reading every partition's
            // counters when the start key is near the beginning.
            match count_live_within(snapshot.as_ref(), &before_range, 1)? {
                Some(count) => count,
                None => count_by_partition(&snapshot, db, &before_range)?,
            }
        } else {
            count_live(snapshot.as_ref(), &before_range)?
        };
        let wanted = query.limit.map_or(usize::MAX, |l| l.saturating_add(query.skip) as usize);
        let iter = Iter::new(snapshot.clone(), range, query.descending, 256).first_page(wanted);
        let rows = Rows {
            snapshot,
            db,
            iter,
            skip: query.skip,
            remaining: query.limit.unwrap_or(u64::MAX),
            include_docs: query.include_docs,
        };
        let offset = (before + query.skip).min(total_rows);
        Ok(AllDocs { total_rows, offset, update_seq: self.update_seq(), rows })
    }

    /// `_all_docs` with `keys`: one row per key, in the order given; `None` for an id that
    /// was never written. Deleted documents appear with `deleted` and no `doc`. With
    /// `include_docs` it is a lookup by id for the advisor, tied to `client`'s last query.
    pub fn all_docs_keys(
        &self,
        ids: &[String],
        include_docs: bool,
        client: Option<&crate::advisor::Client>,
    ) -> Result<Vec<Option<Row>>> {
        if include_docs {
            self.observe_lookup("_all_docs", ids, client);
        }
        let snapshot = self.snapshot();
        let db = self.id();
        ids.iter()
            .map(|id| {
                let Some(info) = doc_info_in(snapshot.as_ref(), db, id)? else { return Ok(None) };
                row(snapshot.as_ref(), db, id.clone(), info, include_docs).map(Some)
            })
            .collect()
    }
}

impl Database {
    /// Every partition with its counters, in partition order, at most `limit` of them;
    /// `true` when more exist.
    pub fn partitions(&self, limit: usize) -> Result<(Vec<(String, Stats)>, bool)> {
        let snapshot = self.snapshot();
        let mut out = Vec::new();
        for entry in Iter::new(snapshot, keys::part_stats_range(self.id()), false, 1024) {
            if out.len() == limit {
                return Ok((out, true));
            }
            let (key, value) = entry?;
            out.push((keys::decode_part_stats(&key)?, Stats::decode(&value)?));
        }
        Ok((out, false))
    }
}

impl Iterator for Rows {
    type Item = Result<Row>;

    fn next(&mut self) -> Option<Result<Row>> {
        while self.remaining > 0 {
            let (key, value) = match self.iter.next()? {
                Ok(entry) => entry,
                Err(err) => return Some(Err(err.into())),
            };
            let decoded =
                keys::decode_doc(&key).and_then(|id| Ok((id, records::decode::<DocInfo>(&value)?)));
            let (id, info) = match decoded {
                Ok(pair) => pair,
                Err(err) => return Some(Err(err)),
            };
            if matches!(info.winner(), Ok((_, true))) {
                continue;
            }
            if self.skip > 0 {
                self.skip -= 1;
                continue;
            }
            self.remaining -= 1;
            return Some(row(self.snapshot.as_ref(), self.db, id, info, self.include_docs));
        }
        None
    }
}

fn row(read: &dyn Read, db: u64, id: String, info: DocInfo, include_docs: bool) -> Result<Row> {
    let (rev, deleted) = info.winner().map(|(r, d)| (r.clone(), d))?;
    let doc =
        if include_docs && !deleted { Some(get_in(read, db, &id, Some(&rev))?) } else { None };
    Ok(Row { id, rev, deleted, info, doc })
}

/// Narrows `base` by the query's start and end keys (which swap roles when descending).
fn narrow(base: Range, db: u64, q: &AllDocsQuery) -> Range {
    let key = |id: &String| Key::Doc(db, id).encode();
    let first = q.start.as_ref().map(|s| Bound::Included(key(s)));
    let last = q
        .end
        .as_ref()
        .map(|e| if q.inclusive_end { Bound::Included(key(e)) } else { Bound::Excluded(key(e)) });
    let (low, high) = if q.descending { (last, first) } else { (first, last) };
    (max_low(base.0, low), min_high(base.1, high))
}

/// The part of `base` that comes before `range` in iteration order.
fn outside(base: &Range, range: &Range, descending: bool) -> Range {
    let flip = |b: &Bound<Vec<u8>>| match b {
        Bound::Included(k) => Bound::Excluded(k.clone()),
        Bound::Excluded(k) => Bound::Included(k.clone()),
        Bound::Unbounded => Bound::Unbounded,
    };
    if descending {
        match &range.1 {
            Bound::Unbounded => (Bound::Excluded(vec![0xff; 1]), Bound::Excluded(vec![0xff; 1])),
            high => (flip(high), base.1.clone()),
        }
    } else {
        match &range.0 {
            Bound::Unbounded => (Bound::Included(Vec::new()), Bound::Excluded(Vec::new())),
            low => (base.0.clone(), flip(low)),
        }
    }
}

/// The live documents of `range` in a partitioned database, counted with the partitions'
/// counters (`PartStats`, kept in every writing commit, so they agree with the snapshot):
/// a partition wholly inside `range` adds its `doc_count`, and only a partition cut by a
/// bound of `range` is counted document by document, as are the design documents (the only
/// documents outside partitions). So the `offset` of a global `_all_docs` costs one read
/// per partition plus the documents of at most two partitions, not one read per document
/// before it as [`count_live`] does.
fn count_by_partition(snapshot: &Snapshot, db: u64, range: &Range) -> Result<u64> {
    if is_empty(range) {
        return Ok(0);
    }
    let design = intersect(&keys::doc_prefix(db, "_design/"), range);
    let mut count = count_live(snapshot.as_ref(), &design)?;
    for entry in Iter::new(snapshot.clone(), keys::part_stats_range(db), false, 1024) {
        let (key, value) = entry?;
        let docs = keys::doc_prefix(db, &format!("{}:", keys::decode_part_stats(&key)?));
        let part = intersect(&docs, range);
        if part == docs {
            count += Stats::decode(&value)?.doc_count;
        } else {
            count += count_live(snapshot.as_ref(), &part)?;
        }
    }
    Ok(count)
}

/// The keys in both `a` and `b`.
fn intersect(a: &Range, b: &Range) -> Range {
    (max_low(a.0.clone(), Some(b.0.clone())), min_high(a.1.clone(), Some(b.1.clone())))
}

/// The live documents of `range`, counted one by one.
fn count_live(read: &dyn Read, range: &Range) -> Result<u64> {
    Ok(count_live_within(read, range, usize::MAX)?.unwrap_or_default())
}

/// [`count_live`], giving up (`None`) when `range` holds more than `pages` pages of
/// [`COUNT_PAGE`] documents.
fn count_live_within(read: &dyn Read, range: &Range, pages: usize) -> Result<Option<u64>> {
    if is_empty(range) {
        return Ok(Some(0));
    }
    let mut count = 0;
    let mut page_range = range.clone();
    for _ in 0..pages {
        let page = read.scan(&page_range, false, COUNT_PAGE)?;
        for (_, value) in &page {
            let info: DocInfo = records::decode(value)?;
            if matches!(info.winner(), Ok((_, false))) {
                count += 1;
            }
        }
        match page.last() {
            Some((last, _)) if page.len() == COUNT_PAGE => {
                page_range.0 = Bound::Excluded(last.clone());
            }
            _ => return Ok(Some(count)),
        }
    }
    Ok(None)
}

fn is_empty(range: &Range) -> bool {
    match (&range.0, &range.1) {
        (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => {
            a > b
                || (a == b
                    && !matches!((&range.0, &range.1), (Bound::Included(_), Bound::Included(_))))
        }
        _ => false,
    }
}

fn max_low(a: Bound<Vec<u8>>, b: Option<Bound<Vec<u8>>>) -> Bound<Vec<u8>> {
    let Some(b) = b else { return a };
    let key = |x: &Bound<Vec<u8>>| match x {
        Bound::Included(k) => Some((k.clone(), 0)),
        Bound::Excluded(k) => Some((k.clone(), 1)),
        Bound::Unbounded => None,
    };
    if key(&b) > key(&a) { b } else { a }
}

fn min_high(a: Bound<Vec<u8>>, b: Option<Bound<Vec<u8>>>) -> Bound<Vec<u8>> {
    let Some(b) = b else { return a };
    let key = |x: &Bound<Vec<u8>>| match x {
        Bound::Included(k) => (0, k.clone(), 1),
        Bound::Excluded(k) => (0, k.clone(), 0),
        Bound::Unbounded => (1, Vec::new(), 0),
    };
    if key(&b) < key(&a) { b } else { a }
}
