//! A MongoDB-dialect query as a stream of documents read from one storage snapshot
//! (the aggregation pipeline's input: documents are read as the pipeline pulls them, and
//! every collection a pipeline reads is read from the same snapshot).
//!
//! The plan is [`Database::find_mongo`]'s: an index a filter can use, else an index that
//! yields the sort's order, else the documents themselves (one document for an `_id`
//! equality). Only a sort no index serves makes the stream read every match first (a
//! blocking sort in MongoDB's order); otherwise `skip` and `limit` apply as documents
//! stream.
//!
//! A stream is logged for the advisor as `find` is (`Database::observe_query`: the query's
//! shape, the index used, documents and keys examined, results) when it ends or is dropped,
//! so aggregation pipelines reach the query log too.

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use bunko_doc::id::{DocKind, kind};
use bunko_query::{Dialect, Direction, FieldPath, Selector};
pub use bunko_storage::Snapshot;
use bunko_storage::{Iter, Range};
use serde_json::Value;

use super::mongo::{compare, id_range, matching_fields, parse_list};
use super::mongo_index::MongoScan;
use super::mongo_merge::{Merged, Merging};
use super::{ExecStats, FindQuery};
use crate::database::Database;
use crate::index::{Index, entries, mongo};
use crate::keys::{self, Key};
use crate::read_gate::Sight;
use crate::security::UserCtx;
use crate::{Result, records};

/// Matching documents, in their MongoDB form.
pub type MongoDocs = Box<dyn Iterator<Item = Result<Value>> + Send>;

/// Entries read per storage page.
const PAGE: usize = 256;

impl Database {
    /// The documents `query` selects (Mongo dialect; its `skip`, `limit` and index hint),
    /// ordered by `order`, read from `snap` as the stream is consumed, as `reader` sees them
    /// (`crate::read_gate`). With `wanted`, a document holds `_id` and at least those
    /// top-level members (and those the filter and sort read): the other members of the
    /// stored body are not parsed.
    pub fn stream_mongo(
        &self,
        reader: &UserCtx,
        snap: &Snapshot,
        query: &FindQuery,
        order: &[(FieldPath, Direction)],
        wanted: Option<&[String]>,
    ) -> Result<MongoDocs> {
        let parse: Option<Arc<[String]>> =
            parse_list(&query.selector, order, wanted).map(Into::into);
        let hint = query.use_index.as_ref().map(|(name, _)| name.as_str());
        let scan = self.mongo_access(&query.selector, hint, order)?;
        let sight = self.sight(reader)?;
        let in_order = order.is_empty() || scan.as_ref().is_some_and(|s| s.sorted);
        let counts = Arc::new(Examined::default());
        let docs: MongoDocs = match &scan {
            Some(scan) => {
                let covered = query
                    .fields
                    .as_deref()
                    .is_some_and(|f| sight.is_whole() && scan.covered(&query.selector, f, order));
                let mut stream = IndexStream::new(self, snap, scan, &query.selector, sight);
                stream.counts = Some(counts.clone());
                stream.parse = parse;
                stream.covered = covered;
                Box::new(stream)
            }
            None => self.doc_stream(snap, &query.selector, parse, counts.clone(), sight)?,
        };
        let docs = if in_order { docs } else { sorted(docs, order)? };
        Ok(Box::new(Logged {
            docs: Box::new(docs.skip(query.skip).take(query.limit)),
            db: self.weak(),
            query: Some(query.clone()),
            index: scan.map(|s| s.index),
            counts,
            results: 0,
        }))
    }

    /// The matching documents of a collection scan (or of the one `_id` an equality names),
    /// in `_id` order, or in natural order for a capped database
    /// ([`super::mongo_natural`]).
    pub(super) fn doc_stream(
        &self,
        snap: &Snapshot,
        selector: &Selector,
        parse: Option<Arc<[String]>>,
        counts: Arc<Examined>,
        sight: Sight,
    ) -> Result<MongoDocs> {
        let db = self.id();
        let natural = match self.scans_naturally(selector)? {
            true => self.natural_docs(snap)?,
            false => None,
        };
        let range = id_range(db, selector).unwrap_or_else(|| keys::doc_range(db));
        let (read, selector) = (snap.clone(), selector.clone());
        let fetch = move |id: String, info: Vec<u8>| -> Result<Option<Value>> {
            crate::deadline::check()?;
            let record = records::DocRecord::decode(&info)?;
            let info = &record.info;
            let (rev, deleted) = info.winner()?;
            if deleted || kind(&id) != DocKind::Normal {
                return Ok(None);
            }
            let Some(body) = crate::read::body_of(read.as_ref(), db, &id, rev, Some(&record))?
            else {
                return Ok(None);
            };
            counts.docs.fetch_add(1, Ordering::Relaxed);
            let Some((_, body)) = sight.body(&id, info, rev, false, body)? else {
                return Ok(None);
            };
            Ok(matching_fields(&id, &body, &selector, parse.as_deref()))
        };
        if let Some(docs) = natural {
            return Ok(Box::new(docs.filter_map(move |entry| {
                entry.and_then(|(id, info)| fetch(id, info)).transpose()
            })));
        }
        let entries = Iter::new(snap.clone(), range, false, PAGE);
        Ok(Box::new(entries.filter_map(move |entry| {
            let read = || {
                let (key, info) = entry?;
                fetch(keys::decode_doc(&key)?, info)
            };
            read().transpose()
        })))
    }
}

/// Every document of `docs`, sorted by `order` (a blocking sort).
fn sorted(docs: MongoDocs, order: &[(FieldPath, Direction)]) -> Result<MongoDocs> {
    let docs: Vec<Value> = docs.collect::<Result<_>>()?;
    let views: &[Value] = &docs;
    let mut order_of: Vec<usize> = (0..views.len()).collect();
    order_of.sort_by(|&a, &b| compare(order, &views[a], &views[b]));
    let mut taken: Vec<Option<Value>> = docs.into_iter().map(Some).collect();
    let docs: Vec<Value> =
        order_of.into_iter().filter_map(|i| taken.get_mut(i).and_then(Option::take)).collect();
    Ok(Box::new(docs.into_iter().map(Ok)))
}

/// The matching documents an index scan names, each once, in index order.
pub(super) struct IndexStream {
    snap: Snapshot,
    db: u64,
    selector: Selector,
    ranges: VecDeque<Range>,
    reverse: bool,
    entries: Option<Iter>,
    seen: HashSet<String>,
    /// What the reader sees of the documents.
    sight: Sight,
    pub stats: ExecStats,
    /// Also counted here for a logged stream.
    counts: Option<Arc<Examined>>,
    /// The only top-level members to parse ([`matching_fields`]); `None`: all.
    parse: Option<Arc<[String]>>,
    /// The most index keys to read (a trial run, `Database::trial_mongo_scan`).
    pub(super) budget: Option<u64>,
    /// Documents are the values entries keep (`super::mongo_cover`), not read.
    pub(super) covered: bool,
    /// A sort served by merging per-point scans ([`super::mongo_merge`]): the plan until
    /// the first document is asked for, then the merge running.
    merged: Option<Merged>,
    merging: Option<Merging>,
}

/// Keys and documents a stream examined, shared with its [`Logged`] wrapper.
#[derive(Default)]
pub(super) struct Examined {
    keys: AtomicU64,
    pub(super) docs: AtomicU64,
}

/// A stream that logs its query for the advisor when it ends or is dropped.
struct Logged {
    docs: MongoDocs,
    db: Weak<Database>,
    /// Taken when logged (once).
    query: Option<FindQuery>,
    index: Option<Arc<Index>>,
    counts: Arc<Examined>,
    results: u64,
}

impl Logged {
    fn log(&mut self) {
        let (Some(query), Some(db)) = (self.query.take(), self.db.upgrade()) else { return };
        let stats = ExecStats {
            keys_examined: self.counts.keys.load(Ordering::Relaxed),
            docs_examined: self.counts.docs.load(Ordering::Relaxed),
            results_returned: self.results,
        };
        db.observe_query(&query, self.index.as_deref(), &stats);
    }
}

impl Iterator for Logged {
    type Item = Result<Value>;

    fn next(&mut self) -> Option<Result<Value>> {
        let next = self.docs.next();
        match &next {
            Some(Ok(_)) => self.results += 1,
            Some(Err(_)) => {}
            None => self.log(),
        }
        next
    }
}

impl Drop for Logged {
    fn drop(&mut self) {
        self.log();
    }
}

impl IndexStream {
    pub fn new(
        db: &Database,
        snap: &Snapshot,
        scan: &MongoScan,
        selector: &Selector,
        sight: Sight,
    ) -> Self {
        Self::over(db.id(), snap, scan, selector, sight)
    }

    fn over(db: u64, snap: &Snapshot, scan: &MongoScan, selector: &Selector, sight: Sight) -> Self {
        let mut ranges = scan.storage_ranges(db);
        if scan.reverse {
            ranges.reverse();
        }
        IndexStream {
            snap: snap.clone(),
            db,
            selector: selector.clone(),
            ranges: ranges.into(),
            reverse: scan.reverse,
            entries: None,
            seen: HashSet::new(),
            sight,
            stats: ExecStats::default(),
            counts: None,
            parse: None,
            budget: None,
            covered: false,
            merged: scan.merged.clone(),
            merging: None,
        }
    }

    /// The next document of a merged sort ([`super::mongo_merge`]), the merge started with
    /// this stream's settings on its first call; `None` when this stream is no merge.
    fn next_merged(&mut self) -> Option<Option<Result<Value>>> {
        if let Some(plan) = self.merged.take() {
            let part = |scan: &MongoScan| {
                let mut part =
                    Self::over(self.db, &self.snap, scan, &self.selector, self.sight.clone());
                part.counts.clone_from(&self.counts);
                part.parse.clone_from(&self.parse);
                part.covered = self.covered;
                part
            };
            let parts = plan.parts.iter().map(part).collect();
            self.merging = Some(Merging::new(plan.order, parts));
        }
        let merging = self.merging.as_mut()?;
        if self.budget.is_some_and(|keys| self.stats.keys_examined >= keys) {
            return Some(None);
        }
        let next = merging.next();
        let ExecStats { keys_examined, docs_examined, .. } = merging.stats();
        (self.stats.keys_examined, self.stats.docs_examined) = (keys_examined, docs_examined);
        Some(next)
    }

    /// The document an index entry names, if it is live, not seen before and matches.
    fn read(&mut self, value: &[u8]) -> Result<Option<Value>> {
        crate::deadline::check()?;
        self.stats.keys_examined += 1;
        if let Some(counts) = &self.counts {
            counts.keys.fetch_add(1, Ordering::Relaxed);
        }
        if self.covered
            && let Some((id, Some(fields))) = mongo::decode_entry(value)
        {
            if !self.seen.insert(id) {
                return Ok(None);
            }
            let doc = Value::Object(fields);
            return Ok(self.selector.matches(&doc, Dialect::Mongo).then_some(doc));
        }
        let Some((_, id)) = entries::decode_value(value) else { return Ok(None) };
        if !self.seen.insert(id.clone()) {
            return Ok(None);
        }
        let Some(info) = self.snap.get(&Key::Doc(self.db, &id).encode())? else {
            return Ok(None);
        };
        let record = records::DocRecord::decode(&info)?;
        let info = &record.info;
        let (rev, deleted) = info.winner()?;
        let body = crate::read::body_of(self.snap.as_ref(), self.db, &id, rev, Some(&record))?;
        let (false, Some(body)) = (deleted, body) else { return Ok(None) };
        self.stats.docs_examined += 1;
        if let Some(counts) = &self.counts {
            counts.docs.fetch_add(1, Ordering::Relaxed);
        }
        let Some((_, body)) = self.sight.body(&id, info, rev, false, body)? else {
            return Ok(None);
        };
        Ok(matching_fields(&id, &body, &self.selector, self.parse.as_deref()))
    }
}

impl Iterator for IndexStream {
    type Item = Result<Value>;

    fn next(&mut self) -> Option<Result<Value>> {
        if let Some(next) = self.next_merged() {
            return next;
        }
        loop {
            if self.budget.is_some_and(|keys| self.stats.keys_examined >= keys) {
                return None;
            }
            let entries = match &mut self.entries {
                Some(entries) => entries,
                None => {
                    let range = self.ranges.pop_front()?;
                    self.entries.insert(Iter::new(self.snap.clone(), range, self.reverse, PAGE))
                }
            };
            match entries.next() {
                Some(Ok((_, value))) => match self.read(&value) {
                    Ok(None) => {}
                    found => return found.transpose(),
                },
                Some(Err(err)) => return Some(Err(err.into())),
                None => self.entries = None,
            }
        }
    }
}
