//! One query run: the page being filled, the counters, and the storage ranges a plan's
//! key ranges become.

use std::collections::HashSet;
use std::ops::Bound;

use bunko_doc::collate;
use bunko_query::Selector;
use bunko_query::plan::KeyRange;
use bunko_storage::{Range, prefix_range};
use serde_json::Value;

use super::{ExecStats, FindQuery};
use crate::keys::Key;

/// The state of one query run: the page being filled and the counters.
pub(super) struct Run<'a> {
    pub selector: &'a Selector,
    /// What the reader sees of the documents (`crate::read_gate`).
    pub sight: crate::read_gate::Sight,
    skip: usize,
    limit: usize,
    pub docs: Vec<Value>,
    pub seen: HashSet<String>,
    pub stats: ExecStats,
    /// Storage key of the last document put on the page (for the next bookmark).
    pub last_key: Option<Vec<u8>>,
    /// Continue after this storage key (from the request's bookmark).
    after: Option<Vec<u8>>,
}

impl<'a> Run<'a> {
    pub fn new(
        query: &'a FindQuery,
        after: Option<Vec<u8>>,
        sight: crate::read_gate::Sight,
    ) -> Self {
        Run {
            selector: &query.selector,
            sight,
            skip: query.skip,
            limit: query.limit,
            docs: Vec::new(),
            seen: HashSet::new(),
            stats: ExecStats::default(),
            last_key: after.clone(),
            after,
        }
    }

    /// Whether the page is full.
    pub fn full(&self) -> bool {
        self.docs.len() >= self.limit
    }

    /// How many more matches the run takes before it stops: the rest of `skip` and of the
    /// page, plus the match that ends it. Scans read about this many entries first.
    pub fn wanted(&self) -> usize {
        let rest = self.limit.saturating_sub(self.docs.len());
        self.skip.saturating_add(rest).saturating_add(1)
    }

    /// Takes a matching document; `true` when the page was already full, so the scan
    /// stops. As in CouchDB, a full page ends the scan only when the next match arrives,
    /// so `execution_stats` count the rows read up to that match.
    pub fn offer(&mut self, doc: Value, key: &[u8]) -> bool {
        if self.full() {
            return true;
        }
        if self.skip > 0 {
            self.skip -= 1;
        } else {
            self.docs.push(doc);
            self.last_key = Some(key.to_vec());
        }
        false
    }

    /// `range` without what the bookmark says was already returned.
    pub fn resume(&self, range: &Range, reverse: bool) -> Range {
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

/// The storage range of one key range of an index whose entries start with `base`. As
/// CouchDB's view `start_key`/`end_key`, both bounds include entries equal to the bound
/// value, even for `$gt`/`$lt` (the selector then drops them), so `execution_stats`
/// count the same rows.
pub(super) fn byte_range(base: &[u8], range: &KeyRange) -> Range {
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
        Some(b) => Bound::Included(with(&b.value)),
        None => Bound::Included(fixed.clone()),
    };
    let end = match &range.upper {
        Some(b) => after(with(&b.value)),
        None => prefix_range(&fixed).1,
    };
    (start, end)
}

/// The documents whose ids lie in `range` (bounds on `_id`, compared as raw bytes as
/// CouchDB's `_all_docs` does), within `outer` (the database or one partition). Like
/// CouchDB's `start_key`/`end_key`, both bounds include the bound id itself (the selector
/// then drops it), so `execution_stats` count the same rows.
pub(super) fn id_range(db: u64, outer: Range, range: &KeyRange) -> Range {
    let key = |v: &Value| v.as_str().map(|id| Key::Doc(db, id).encode());
    let lower = range.lower.as_ref().and_then(|b| Some((key(&b.value)?, true)));
    let upper = range.upper.as_ref().and_then(|b| Some((key(&b.value)?, true)));
    let start = match lower {
        Some((k, true)) => Bound::Included(k),
        Some((k, false)) => prefix_range(&k).1,
        None => Bound::Unbounded,
    };
    let end = match upper {
        Some((k, true)) => prefix_range(&k).1,
        Some((k, false)) => Bound::Excluded(k),
        None => Bound::Unbounded,
    };
    let start = match (&outer.0, &start) {
        (_, Bound::Unbounded) => outer.0.clone(),
        (Bound::Included(o) | Bound::Excluded(o), Bound::Included(s) | Bound::Excluded(s))
            if o >= s =>
        {
            outer.0.clone()
        }
        _ => start,
    };
    let end = match (&outer.1, &end) {
        (_, Bound::Unbounded) => outer.1.clone(),
        (Bound::Included(o) | Bound::Excluded(o), Bound::Included(e) | Bound::Excluded(e))
            if o <= e =>
        {
            outer.1.clone()
        }
        _ => end,
    };
    (start, end)
}
