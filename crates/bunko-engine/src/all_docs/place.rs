//! Where the rows of an `_all_docs` range query start, and how many live documents of its
//! base range (the database, a partition, the design documents) come before them: the
//! `offset`, which CouchDB reads from its by-id B-tree's reductions.
//!
//! Each seek into the store costs about as much as reading a short page (it looks into
//! every table of the LSM tree, more of them as the database grows), so a page is placed
//! with the seek that reads it and as few others as possible:
//!
//! - A range that starts where its base starts (a partition's first page) has nothing
//!   before it: one seek.
//! - Before the order statistics of ids (`crate::ids`) are built, documents before the
//!   range that fit in one page of `COUNT_PAGE` are counted, and a `skip` up to
//!   `SKIP_DIRECT` is passed by reading rows: the structure is not built for them.
//! - With them and no `skip`, the scan starts at the first key of the id bucket holding
//!   the range's start (at most `2 × ids::TARGET` keys before it) and counts the live
//!   documents it passes on its way into the range (the *lead-in*); the buckets before
//!   it are counted by their prefix sum. One seek, where ranking the start apart took a
//!   second and ranking the end a third (issue 20 point 7: at 1M documents the global page
//!   cost 1.3 times the partition page).
//! - With `skip`, the start is ranked (one seek), the live document `skip` places further
//!   is found in the Fenwick tree, and the scan starts at its bucket's first key and passes
//!   the live documents before it there: two seeks, whatever `skip`.
//!
//! Descending queries do the same from the range's end down.

use std::ops::Bound;

use bunko_storage::{Range, Read, Snapshot};

use super::AllDocsQuery;
use crate::Result;
use crate::database::Database;
use crate::ids::{Ranks, is_live};
use crate::keys::Key;

/// How many `Doc` entries counting reads at a time.
const COUNT_PAGE: usize = 1024;

/// The largest `skip` passed by reading rows rather than by the order statistics of ids
/// (before they are built).
const SKIP_DIRECT: u64 = 1024;

/// Where a query's rows start.
pub(super) struct Start {
    /// The snapshot `before` describes, which the rows are read from.
    pub snapshot: Snapshot,
    /// The scan that reads the rows; `None` when no row can follow.
    pub scan: Option<Scan>,
    /// The live documents of the base range before the first row (not counting `skip`),
    /// but for those the scan's lead-in passes.
    pub before: u64,
}

/// The scan that reads a query's rows.
pub(super) struct Scan {
    pub range: Range,
    /// Entries before this key in scan order are not rows but documents before them (the
    /// lead-in), to be counted.
    pub lead_in: Option<Vec<u8>>,
    /// Live documents to pass before the first row.
    pub skip: u64,
    /// The most entries, besides `skip` live ones, the scan reads before its first row.
    pub extra: usize,
}

impl Scan {
    fn plain(range: Range, skip: u64) -> Scan {
        Scan { range, lead_in: None, skip, extra: 0 }
    }
}

impl Database {
    /// Places query `q` on `range`, the part of `base` it reads (see the module docs).
    pub(super) fn start(&self, base: &Range, range: Range, q: &AllDocsQuery) -> Result<Start> {
        let before_range = outside(base, &range, q.descending);
        if q.skip == 0 && is_empty(&before_range) {
            return Ok(Start {
                snapshot: self.snapshot(),
                scan: Some(Scan::plain(range, 0)),
                before: 0,
            });
        }
        if !self.ids.is_built() && q.skip <= SKIP_DIRECT {
            let snapshot = self.snapshot();
            if let Some(before) = count_live_within(snapshot.as_ref(), &before_range, 1)? {
                return Ok(Start { snapshot, scan: Some(Scan::plain(range, q.skip)), before });
            }
        }
        self.ids.read(self.store.as_ref(), self.id(), |ranks| place(ranks, base, range, q))
    }
}

/// Places a query with the order statistics of ids.
fn place(ranks: &Ranks<'_>, base: &Range, range: Range, q: &AllDocsQuery) -> Result<Start> {
    let snapshot = ranks.snapshot.clone();
    let (before, scan) = if is_empty(&range) {
        (ranks_before(ranks, base, &range, q.descending)?, None)
    } else {
        match (q.descending, q.skip) {
            (false, 0) => lead_up(ranks, base, range)?,
            (true, 0) => lead_down(ranks, base, range)?,
            (false, skip) => skip_up(ranks, base, range, skip)?,
            (true, skip) => skip_down(ranks, base, range, skip)?,
        }
    };
    Ok(Start { snapshot, scan, before })
}

/// The live documents of `base` before `range` in iteration order, from two ranks.
fn ranks_before(ranks: &Ranks<'_>, base: &Range, range: &Range, descending: bool) -> Result<u64> {
    Ok(if descending {
        ranks.rank(&end_cut(&base.1))?.saturating_sub(ranks.rank(&end_cut(&range.1))?)
    } else {
        ranks.rank(&start_cut(&range.0))?.saturating_sub(ranks.rank(&start_cut(&base.0))?)
    })
}

/// Ascending, no `skip`: the scan starts at the first key of the bucket holding the
/// range's start, or at the base's start if that is later, and counts what it passes.
fn lead_up(ranks: &Ranks<'_>, base: &Range, range: Range) -> Result<(u64, Option<Scan>)> {
    let cut = start_cut(&range.0);
    let Some(span) = ranks.span_at(&cut, false) else {
        return Ok((ranks_before(ranks, base, &range, false)?, Some(Scan::plain(range, 0))));
    };
    let base_cut = start_cut(&base.0);
    let (from, known) = if base_cut >= start_cut(&span.range.0) {
        (base.0.clone(), 0)
    } else {
        (span.range.0, span.live_before.saturating_sub(ranks.rank(&base_cut)?))
    };
    let scan = Scan { range: (from, range.1), lead_in: Some(cut), skip: 0, extra: span.keys };
    Ok((known, Some(scan)))
}

/// Descending, no `skip`: [`lead_up`] from the range's end down, in the bucket holding the
/// keys just below it.
fn lead_down(ranks: &Ranks<'_>, base: &Range, range: Range) -> Result<(u64, Option<Scan>)> {
    let cut = end_cut(&range.1);
    let Some(span) = ranks.span_at(&cut, true) else {
        return Ok((ranks_before(ranks, base, &range, true)?, Some(Scan::plain(range, 0))));
    };
    let base_cut = end_cut(&base.1);
    let (to, known) = if base_cut <= end_cut(&span.range.1) {
        (base.1.clone(), 0)
    } else {
        (span.range.1, ranks.rank(&base_cut)?.saturating_sub(span.live_before + span.live))
    };
    let scan = Scan { range: (range.0, to), lead_in: Some(cut), skip: 0, extra: span.keys };
    Ok((known, Some(scan)))
}

/// Ascending past `skip` live documents: the scan starts in the bucket of the first row.
fn skip_up(
    ranks: &Ranks<'_>,
    base: &Range,
    range: Range,
    skip: u64,
) -> Result<(u64, Option<Scan>)> {
    let cut = start_cut(&range.0);
    let low = ranks.rank(&cut)?;
    let before = low.saturating_sub(ranks.rank(&start_cut(&base.0))?);
    let Some((span, pos)) = low.checked_add(skip).and_then(|n| ranks.span_of_nth(n)) else {
        return Ok((before, None));
    };
    let scan = if start_cut(&span.range.0) <= cut {
        Scan { range, lead_in: None, skip, extra: span.keys }
    } else {
        Scan { range: (span.range.0, range.1), lead_in: None, skip: pos, extra: span.keys }
    };
    Ok((before, Some(scan)))
}

/// Descending past `skip` live documents: [`skip_up`] from the range's end down.
fn skip_down(
    ranks: &Ranks<'_>,
    base: &Range,
    range: Range,
    skip: u64,
) -> Result<(u64, Option<Scan>)> {
    let cut = end_cut(&range.1);
    let high = ranks.rank(&cut)?;
    let before = ranks.rank(&end_cut(&base.1))?.saturating_sub(high);
    let first = skip.checked_add(1).and_then(|s| high.checked_sub(s));
    let Some((span, pos)) = first.and_then(|n| ranks.span_of_nth(n)) else {
        return Ok((before, None));
    };
    let scan = if end_cut(&span.range.1) >= cut {
        Scan { range, lead_in: None, skip, extra: span.keys }
    } else {
        let skip = span.live.saturating_sub(pos + 1);
        Scan { range: (range.0, span.range.1), lead_in: None, skip, extra: span.keys }
    };
    Ok((before, Some(scan)))
}

/// Narrows `base` by the query's start and end keys (which swap roles when descending).
pub(super) fn narrow(base: Range, db: u64, q: &AllDocsQuery) -> Range {
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
pub(super) fn count_live(read: &dyn Read, range: &Range) -> Result<u64> {
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
        let page = read.scan_heads(&page_range, false, COUNT_PAGE)?;
        for (_, value) in &page {
            count += u64::from(is_live(value)?);
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
