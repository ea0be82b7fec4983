//! `_all_docs`: documents in id order, as one range scan of `Doc` keys on a snapshot.
//!
//! A partition's `_all_docs` is the same scan bounded to the ids `p:…`, one contiguous range
//! ([`crate::keys::doc_prefix`]), so its cost does not depend on the rest of the database.
//! Its `total_rows` is the partition's `doc_count` (one read of its counters).
//!
//! `offset` is the number of live documents before the first row (plus `skip`), which
//! CouchDB reads from its B-tree's reductions; a key-value store has none, so when the
//! documents before the range fit in one page of `COUNT_PAGE` they are counted, and
//! otherwise the order statistics of document ids (`ids.rs`) give the count in
//! O(log n) plus one bucket read, in a partition as in the whole database. They also pass
//! a large `skip` (more than `SKIP_DIRECT`, or any once they are built) by finding the
//! first row's position instead of reading every skipped row.
//!
//! Rows are read in pages that start at `skip + limit` entries and grow, so a short page of
//! a long range reads little more than it returns.

use std::ops::Bound;

use bunko_doc::RevId;
use bunko_storage::{Iter, Range, Read, Snapshot};

use crate::Result;
use crate::database::Database;
use crate::ids::Ranks;
use crate::keys::{self, Key};
use crate::read::{DocOut, doc_info_in, get_in};
use crate::read_gate::Sight;
use crate::records::{self, DocInfo, Stats};
use crate::security::UserCtx;

/// How many `Doc` entries counting reads at a time.
const COUNT_PAGE: usize = 1024;

/// The largest `skip` passed by reading rows rather than by the order statistics of ids
/// (before they are built).
const SKIP_DIRECT: u64 = 1024;

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
    /// With `include_docs`: what the reader sees of the documents.
    docs: Option<Sight>,
}

impl Database {
    /// Starts an `_all_docs` range query; `total_rows` counts the live documents of the
    /// database (or of the partition named by `partition`). Documents (`include_docs`) are
    /// shown as `reader` may see them (`crate::read_gate`).
    pub fn all_docs(
        &self,
        reader: &UserCtx,
        query: &AllDocsQuery,
        partition: Option<&str>,
    ) -> Result<AllDocs> {
        let docs = if query.include_docs { Some(self.sight(reader)?) } else { None };
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
        // Counting one page directly is cheaper than building the order statistics of
        // ids when the start key is near the beginning and `skip` is small.
        let direct = if self.ids.is_built() || query.skip > SKIP_DIRECT {
            None
        } else {
            count_live_within(snapshot.as_ref(), &before_range, 1)?
        };
        let (snapshot, range, before, skip) = match direct {
            Some(before) => (snapshot, Some(range), before, query.skip),
            None => {
                let store = self.store.as_ref();
                self.ids.read(store, db, |ranks| place(ranks, &base, range, query))?
            }
        };
        let wanted = query.limit.map_or(usize::MAX, |l| l.saturating_add(skip) as usize);
        let (iter, remaining) = match range {
            Some(range) => (
                Iter::new(snapshot.clone(), range, query.descending, 256).first_page(wanted),
                query.limit.unwrap_or(u64::MAX),
            ),
            // `skip` passes the end: no row is read.
            None => (Iter::new(snapshot.clone(), keys::doc_range(db), false, 1), 0),
        };
        let rows = Rows { snapshot, db, iter, skip, remaining, docs };
        let offset = (before + query.skip).min(total_rows);
        Ok(AllDocs { total_rows, offset, update_seq: self.update_seq(), rows })
    }

    /// `_all_docs` with `keys`: one row per key, in the order given; `None` for an id that
    /// was never written. Deleted documents appear with `deleted` and no `doc`. With
    /// `include_docs` it is a lookup by id for the advisor, tied to `client`'s last query,
    /// and shows the documents as `reader` may see them.
    pub fn all_docs_keys(
        &self,
        reader: &UserCtx,
        ids: &[String],
        include_docs: bool,
        client: Option<&crate::advisor::Client>,
    ) -> Result<Vec<Option<Row>>> {
        if include_docs {
            self.observe_lookup("_all_docs", ids, client);
        }
        let docs = if include_docs { Some(self.sight(reader)?) } else { None };
        let snapshot = self.snapshot();
        let db = self.id();
        ids.iter()
            .map(|id| {
                let Some(info) = doc_info_in(snapshot.as_ref(), db, id)? else { return Ok(None) };
                row(snapshot.as_ref(), db, id.clone(), info, docs.as_ref()).map(Some)
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
            return Some(row(self.snapshot.as_ref(), self.db, id, info, self.docs.as_ref()));
        }
        None
    }
}

/// One row; with `docs` (`include_docs`) its document as the reader sees it.
fn row(read: &dyn Read, db: u64, id: String, info: DocInfo, docs: Option<&Sight>) -> Result<Row> {
    let (rev, deleted) = info.winner().map(|(r, d)| (r.clone(), d))?;
    let doc = match docs {
        Some(sight) if !deleted => sight.apply_listed(get_in(read, db, &id, Some(&rev))?)?,
        _ => None,
    };
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

/// Positions a query with the order statistics of ids: the live documents of `base` before
/// `range` (in iteration order), and `range` narrowed past the first `skip` live documents
/// of it, with the snapshot the counts describe. The range is `None` when `skip` passes
/// its end.
fn place(
    ranks: &Ranks<'_>,
    base: &Range,
    range: Range,
    query: &AllDocsQuery,
) -> Result<(Snapshot, Option<Range>, u64, u64)> {
    let snapshot = ranks.snapshot.clone();
    let (low, high) = (ranks.rank(&start_cut(&range.0))?, ranks.rank(&end_cut(&range.1))?);
    let before = if query.descending {
        ranks.rank(&end_cut(&base.1))? - high
    } else {
        low - ranks.rank(&start_cut(&base.0))?
    };
    if query.skip == 0 {
        return Ok((snapshot, Some(range), before, 0));
    }
    let first = if query.descending {
        high.checked_sub(query.skip + 1).filter(|&n| n >= low)
    } else {
        Some(low + query.skip).filter(|&n| n < high)
    };
    let Some(key) = first.map(|n| ranks.nth(n)).transpose()?.flatten() else {
        return Ok((snapshot, None, before, 0));
    };
    let range = if query.descending {
        (range.0, Bound::Included(key))
    } else {
        (Bound::Included(key), range.1)
    };
    Ok((snapshot, Some(range), before, 0))
}

/// The key every entry before a range starting at `bound` sorts below.
fn start_cut(bound: &Bound<Vec<u8>>) -> Vec<u8> {
    match bound {
        Bound::Included(k) => k.clone(),
        Bound::Excluded(k) => successor(k),
        Bound::Unbounded => Vec::new(),
    }
}

/// The key every entry of a range ending at `bound` sorts below.
fn end_cut(bound: &Bound<Vec<u8>>) -> Vec<u8> {
    match bound {
        Bound::Included(k) => successor(k),
        Bound::Excluded(k) => k.clone(),
        Bound::Unbounded => vec![0xff; 9],
    }
}

/// The least key above `k`.
fn successor(k: &[u8]) -> Vec<u8> {
    [k, &[0]].concat()
}

/// The live documents of `range`, counted one by one.
fn count_live(read: &dyn Read, range: &Range) -> Result<u64> {
    Ok(count_live_within(read, range, usize::MAX)?.unwrap_or_default())
}

/// [`count_live`], giving up (`None`) when `range` holds more than `pages` pages of
/// `COUNT_PAGE` documents.
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
