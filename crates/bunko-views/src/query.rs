//! View queries: `GET/POST /{db}/_design/{ddoc}/_view/{view}` and its partition form.
//!
//! [`query_view`] checks the request against the view (map-only or reduce,
//! partitioned or global), updates the index unless `update=false`, then reads one
//! snapshot:
//! - a map query turns `startkey`/`endkey` (with their doc ids, `inclusive_end`,
//!   `descending`) or each of `keys` into a byte range of collated keys
//!   ([`crate::entries`]); the rows are a lazy iterator over the snapshot ([`RowIter`]),
//!   with `skip` and `limit` applied while scanning, so the answer can stream;
//! - a reduce query reads the rows of the range(s), groups consecutive rows whose keys
//!   (cut to `group_level` elements) collate equal, and reduces each group
//!   (`reduce.rs`).
//!
//! `include_docs=true` loads the emitting document, or the linked one when the row's
//! value is an object with an `_id` (and optionally `_rev`).

use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::Ordering as AtomicOrdering;

use bunko_doc::collate::Collation;
use bunko_storage::{Iter, Range, Snapshot, prefix_range};
use serde_json::Value;

use crate::build::{design_group, spawn_view_update, update_view, view_index};
use crate::entries;
use crate::order::Cut;
use crate::rows::{RowIter, decode_row};
use crate::{Index, Update, ViewDef, registry};
use bunko_engine::Database;
use bunko_engine::read::DocOut;
use bunko_engine::security::UserCtx;
use bunko_engine::{Error, Result};

/// A view query's parameters, parsed.
#[derive(Debug, Clone)]
pub struct ViewQuery {
    pub key: Option<Value>,
    pub keys: Option<Vec<Value>>,
    pub start_key: Option<Value>,
    pub end_key: Option<Value>,
    pub start_key_doc_id: Option<String>,
    pub end_key_doc_id: Option<String>,
    pub inclusive_end: bool,
    pub descending: bool,
    pub limit: Option<u64>,
    pub skip: u64,
    pub include_docs: bool,
    /// `None`: reduce if the view has a reduce function.
    pub reduce: Option<bool>,
    pub group: Option<bool>,
    pub group_level: Option<u64>,
    pub update: Update,
    pub update_seq: bool,
}

impl Default for ViewQuery {
    fn default() -> Self {
        ViewQuery {
            key: None,
            keys: None,
            start_key: None,
            end_key: None,
            start_key_doc_id: None,
            end_key_doc_id: None,
            inclusive_end: true,
            descending: false,
            limit: None,
            skip: 0,
            include_docs: false,
            reduce: None,
            group: None,
            group_level: None,
            update: Update::True,
            update_seq: false,
        }
    }
}

/// One row of a view answer. Reduce rows have no `id`.
#[derive(Debug)]
pub struct ViewRow {
    pub id: Option<String>,
    pub key: Value,
    pub value: Value,
    /// With `include_docs`: the document, `None` if it is missing or deleted.
    pub doc: Option<Option<DocOut>>,
    /// A reduce row whose reduction did not shrink enough: the `reduce_overflow_error`
    /// reason, shown instead of `value` (which is then `null`).
    pub error: Option<String>,
}

/// A view answer. Reduce answers have no `total_rows` or `offset`.
pub struct ViewResult {
    pub total_rows: Option<u64>,
    pub offset: Option<u64>,
    /// With `update_seq=true`: the seq the index had reached.
    pub update_seq: Option<u64>,
    pub rows: RowIter,
}

impl std::fmt::Debug for ViewResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ViewResult")
            .field("total_rows", &self.total_rows)
            .field("offset", &self.offset)
            .finish_non_exhaustive()
    }
}

/// How reduce rows are grouped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Grouping {
    /// One group for the whole range (`group=false`).
    All,
    /// Keys cut to this many array elements (`group_level`).
    Level(u64),
    /// Exact keys (`group=true`).
    Exact,
}

/// A row as read from storage: key, emitting document id, value.
pub(crate) type RawRow = (Value, String, Value);

fn parse_error(reason: &str) -> Error {
    Error::QueryParse(reason.to_string())
}

/// Answers a view query; `partition` is the partition of a `/_partition/{p}/` route;
/// `include_docs` shows documents as `reader` sees them (`bunko_engine::read_gate`).
pub fn query_view(
    reader: &UserCtx,
    db: &Database,
    ddoc: &str,
    view: &str,
    q: &ViewQuery,
    partition: Option<&str>,
) -> Result<ViewResult> {
    let index = view_group(db, ddoc)?;
    let def = &index.def;
    let view_def =
        def.view(view).cloned().ok_or_else(|| Error::NotFound("missing_named_view".into()))?;
    match (def.partitioned, partition) {
        (true, None) => {
            return Err(parse_error(
                "`partition` parameter is mandatory for queries to this view.",
            ));
        }
        (false, Some(_)) => {
            return Err(parse_error("`partition` parameter is not supported in this design doc"));
        }
        _ => {}
    }
    let reduce = check(q, &view_def)?;
    if q.update == Update::True {
        catch_up(db, &index)?;
    }
    let map = index.map_of(&view_def).ok_or_else(|| Error::Corrupt("view map".into()))?;
    let base = entries::row_base(db.id(), &map.sig, partition);
    let mut result = match reduce {
        Some(grouping) => {
            let snapshot = db.store().snapshot();
            reduce_query(&index, &view_def, &snapshot, &base, q, grouping)?
        }
        None => map_query(reader, db, &index, &view_def, &base, q, partition.is_some())?,
    };
    if q.update_seq {
        result.update_seq = Some(index.seq());
    }
    // `update_after`: the answer is read before the update starts, or a fast update could
    // overtake the read and the answer would not be the stale one asked for.
    if q.update == Update::Lazy
        && let Some(me) = db.arc()
    {
        spawn_view_update(&me, index);
    }
    Ok(result)
}

/// Whether query `q` of view `view` of design document `ddoc` is a short read of rows
/// already built: the group is known in memory and covers the database's update seq, the
/// view is read without reduce, documents are not included and at most `SHORT` rows
/// are asked for. Such a query reads a few cached keys, cheaper than a hop to a blocking
/// thread; anything else may update the view or read much.
pub fn is_short_read(db: &Database, ddoc: &str, view: &str, q: &ViewQuery) -> bool {
    let views = registry(db);
    let Some(index) = views.designs.get(ddoc).and_then(|sig| views.get(&sig)) else {
        return false;
    };
    let map_only = index.def.view(view).is_some_and(|v| v.reduce.is_none());
    let short = q.limit.is_some_and(|l| l <= SHORT) && q.skip <= SHORT && q.keys.is_none();
    let target = db.update_seq();
    let current = index.caught_up.load(AtomicOrdering::Acquire) >= target
        || index.seq() >= target
        || q.update == Update::False;
    (map_only || q.reduce == Some(false)) && short && !q.include_docs && current
}

/// Most rows of a query [`is_short_read`] accepts.
const SHORT: u64 = 100;

/// The index of design document `ddoc`'s views (`404 missing_named_view` if it has
/// none), through the registry's memory of design documents when it can.
fn view_group(db: &Database, ddoc: &str) -> Result<Arc<Index>> {
    let views = registry(db);
    if let Some(index) = views.designs.get(ddoc).and_then(|sig| views.get(&sig)) {
        return Ok(index);
    }
    let generation = views.designs.generation();
    let def =
        design_group(db, ddoc)?.ok_or_else(|| Error::NotFound("missing_named_view".into()))?;
    let index = view_index(db, def)?;
    views.designs.insert(ddoc, index.def.sig.clone(), generation);
    Ok(index)
}

/// Brings `index` up to the database's current update seq, unless it is known to be
/// there already (no build lock, no scan: the common case of a read-mostly view).
fn catch_up(db: &Database, index: &Index) -> Result<()> {
    let target = db.update_seq();
    if index.caught_up.load(AtomicOrdering::Acquire) >= target || index.seq() >= target {
        return Ok(());
    }
    // Every change up to `target` was applied before `update_view` takes its snapshots.
    update_view(db, index)?;
    index.caught_up.fetch_max(target, AtomicOrdering::AcqRel);
    Ok(())
}

fn map_query(
    reader: &UserCtx,
    db: &Database,
    index: &Index,
    view: &ViewDef,
    base: &[u8],
    q: &ViewQuery,
    in_partition: bool,
) -> Result<ViewResult> {
    let mut ranges = ranges(raw_collation(index, view), base, q)?;
    if q.descending && q.keys.is_some() {
        // CouchDB 3.4 answers a map query's `keys` in reverse order when descending
        // (`fabric_view_map` reverses them); reduce queries keep the given order.
        ranges.reverse();
    }
    // Ranks of the map's (or partition's) bounds, for `total_rows`, and of where each
    // range's scan begins, for `offset`.
    let whole = prefix_range(base);
    let mut cuts = vec![Cut::Start(&whole.0), Cut::End(&whole.1)];
    cuts.extend(
        ranges.iter().map(|r| if q.descending { Cut::End(&r.1) } else { Cut::Start(&r.0) }),
    );
    let map = index.map_of(view).ok_or_else(|| Error::Corrupt("view map".into()))?;
    let map_base = entries::row_base(db.id(), &map.sig, None);
    let probed = registry(db).order.probe(db.store().as_ref(), &map.sig, &map_base, &cuts)?;
    let snapshot = probed.snapshot;
    let start = probed.probes[0].rank(&*snapshot)?;
    let end = probed.probes[1].rank(&*snapshot)?;
    let total = if in_partition { end.saturating_sub(start) } else { probed.total };
    let limit = usize::try_from(q.limit.unwrap_or(u64::MAX)).unwrap_or(usize::MAX);
    let skip = usize::try_from(q.skip).unwrap_or(usize::MAX);
    let page = skip.saturating_add(limit).clamp(1, 256);
    // The offset is where the first range with rows begins (CouchDB 3.4), or where the
    // last one begins if none has any.
    let mut ranges = ranges.into_iter().zip(probed.probes.into_iter().skip(2));
    let (mut rank, mut head) = (None, None);
    for (range, probe) in ranges.by_ref() {
        let (at, rows) = probe.rank_and_rows(&snapshot, range, q.descending, page)?;
        let mut rows = rows.peekable();
        rank = Some(at);
        if rows.peek().is_some() {
            head = Some(rows);
            break;
        }
    }
    let offset = match rank {
        Some(rank) if q.descending => end.saturating_sub(rank),
        Some(rank) => rank.saturating_sub(start),
        None => 0,
    };
    // CouchDB counts the skipped rows into the offset.
    let offset = offset.saturating_add(q.skip).min(total);
    let descending = q.descending;
    let rest =
        ranges.flat_map(move |(range, _)| Iter::new(snapshot.clone(), range, descending, page));
    let entries = head.into_iter().flatten().chain(rest.map(|entry| Ok(entry?)));
    let docs = if q.include_docs { db.arc().map(|db| (db, reader.clone())) } else { None };
    let entries = Box::new(entries.skip(skip).take(limit));
    Ok(ViewResult {
        total_rows: Some(total),
        offset: Some(offset),
        update_seq: None,
        rows: RowIter::stored(entries, docs),
    })
}

fn reduce_query(
    index: &Index,
    view: &ViewDef,
    snapshot: &Snapshot,
    base: &[u8],
    q: &ViewQuery,
    grouping: Grouping,
) -> Result<ViewResult> {
    let raw = raw_collation(index, view);
    let collation = if raw { Collation::Raw } else { Collation::Unicode };
    let mut groups = Vec::new();
    // Multi-key reduce queries are grouped exactly (`check`), each key's rows on
    // their own.
    let mut reducer = crate::reduce::Grouper::new(index, view, grouping, collation)?;
    for range in ranges(raw, base, q)? {
        for entry in Iter::new(snapshot.clone(), range, q.descending, 256) {
            let (_, value) = entry?;
            reducer.push(decode_row(&value)?, &mut groups)?;
        }
        if grouping != Grouping::All {
            reducer.finish(&mut groups)?;
        }
    }
    reducer.finish(&mut groups)?;
    let limit = q.limit.unwrap_or(u64::MAX) as usize;
    let rows: Vec<Result<ViewRow>> = groups
        .into_iter()
        .skip(q.skip as usize)
        .take(limit)
        .map(|(key, value)| match value {
            Ok(value) => Ok(ViewRow { id: None, key, value, doc: None, error: None }),
            Err(reason) => {
                Ok(ViewRow { id: None, key, value: Value::Null, doc: None, error: Some(reason) })
            }
        })
        .collect();
    let rows = RowIter::built(rows);
    Ok(ViewResult { total_rows: None, offset: None, update_seq: None, rows })
}

/// Checks the parameters against the view; `Some(grouping)` for a reduce query.
fn check(q: &ViewQuery, view: &ViewDef) -> Result<Option<Grouping>> {
    if q.group == Some(false) && q.group_level.is_some_and(|l| l > 0) {
        return Err(parse_error("Can't specify group=false and group_level>0 at the same time"));
    }
    // As CouchDB's `determine_group_level`: a `group_level` wins over `group=true`.
    let grouping = match (q.group, q.group_level) {
        (_, Some(level)) => Grouping::Level(level),
        (Some(true), None) => Grouping::Exact,
        _ => Grouping::All,
    };
    if view.reduce.is_none() && q.reduce == Some(true) {
        return Err(parse_error("Reduce is invalid for map-only views."));
    }
    if view.reduce.is_none() || q.reduce == Some(false) {
        if !matches!(grouping, Grouping::All | Grouping::Level(0)) {
            return Err(parse_error("Invalid use of grouping on a map view."));
        }
        return Ok(None);
    }
    if q.include_docs {
        return Err(parse_error("`include_docs` is invalid for reduce"));
    }
    // One key in `keys` is a `key` query (CouchDB turns it into one).
    if q.keys.as_ref().is_some_and(|keys| keys.len() > 1) && grouping != Grouping::Exact {
        return Err(parse_error("Multi-key fetches for reduce views must use `group=true`"));
    }
    Ok(Some(grouping))
}

/// The byte ranges a query scans, in answer order.
/// Whether `view`'s rows are collated raw.
fn raw_collation(index: &Index, view: &ViewDef) -> bool {
    index.def.maps.get(view.map).is_some_and(|m| m.raw)
}

fn ranges(raw: bool, base: &[u8], q: &ViewQuery) -> Result<Vec<Range>> {
    if let Some(keys) = &q.keys {
        // Each key is a `key=` query of its own, document id bounds included
        // (`couch_mrview_util:key_opts`).
        return Ok(keys.iter().map(|k| key_range(raw, base, q, Some(k), Some(k))).collect());
    }
    let (start, end) = match &q.key {
        Some(key) => (Some(key), Some(key)),
        None => (q.start_key.as_ref(), q.end_key.as_ref()),
    };
    if let (Some(s), Some(e)) = (start, end) {
        let collation = if raw { Collation::Raw } else { Collation::Unicode };
        let wrong = if q.descending { Ordering::Less } else { Ordering::Greater };
        if collation.compare(s, e) == wrong {
            let flag = if q.descending { "false" } else { "true" };
            return Err(parse_error(&format!(
                "No rows can match your key range, reverse your start_key and end_key or set \
                 descending={flag}"
            )));
        }
    }
    Ok(vec![key_range(raw, base, q, start, end)])
}

/// The range of rows from key `start` (and `startkey_docid`) to `end` (and `endkey_docid`),
/// either open, in scan order as `q` asks.
fn key_range(
    raw: bool,
    base: &[u8],
    q: &ViewQuery,
    start: Option<&Value>,
    end: Option<&Value>,
) -> Range {
    let with_key = |key: &Value| {
        let mut bytes = base.to_vec();
        entries::push_key(&mut bytes, key, raw);
        bytes
    };
    let whole = prefix_range(base);
    let start_docid = q.start_key_doc_id.as_deref().filter(|_| start.is_some());
    let end_docid = q.end_key_doc_id.as_deref().filter(|_| end.is_some());
    // The bound where scanning begins, and where it stops.
    let first = match start {
        None if q.descending => whole.1.clone(),
        None => whole.0.clone(),
        Some(key) => {
            let bytes = with_key(key);
            match (start_docid, q.descending) {
                (Some(id), false) => Bound::Included(entries::push_id(bytes, id)),
                (Some(id), true) => Bound::Included(high(entries::push_id(bytes, id))),
                (None, false) => Bound::Included(bytes),
                (None, true) => Bound::Excluded(past(bytes)),
            }
        }
    };
    let last = match end {
        None if q.descending => whole.0.clone(),
        None => whole.1.clone(),
        Some(key) => {
            let bytes = with_key(key);
            match (end_docid, q.descending, q.inclusive_end) {
                (Some(id), false, true) => Bound::Included(high(entries::push_id(bytes, id))),
                (Some(id), false, false) => Bound::Excluded(entries::push_id(bytes, id)),
                (None, false, true) => Bound::Excluded(past(bytes)),
                (None, false, false) => Bound::Excluded(bytes),
                (Some(id), true, true) => Bound::Included(entries::push_id(bytes, id)),
                (Some(id), true, false) => Bound::Excluded(high(entries::push_id(bytes, id))),
                (None, true, true) => Bound::Included(bytes),
                (None, true, false) => Bound::Included(past(bytes)),
            }
        }
    };
    if q.descending { (last, first) } else { (first, last) }
}

/// Above every row key that starts with `bytes` followed by a document id (whose escaped
/// bytes never start with `0xff`).
fn past(mut bytes: Vec<u8>) -> Vec<u8> {
    bytes.push(0xff);
    bytes
}

/// The highest row key starting with `bytes` that ends in a document id: `n` is 8 bytes.
fn high(mut bytes: Vec<u8>) -> Vec<u8> {
    bytes.extend_from_slice(&[0xff; 8]);
    bytes
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bunko_storage::Memory;
    use serde_json::json;

    use super::*;
    use crate::testing::{admin, put};
    use crate::{query_view, view_cleanup};
    use bunko_engine::{Config, Engine};

    /// Only a short map read of a view that covers every change skips the blocking pool.
    #[test]
    fn short_reads_are_map_lookups_of_a_current_view() -> Result<()> {
        let engine = Engine::open(Arc::new(Memory::new()), Config::default())?;
        let db = engine.create_db(&admin(), "v", false)?;
        let views = json!({"v": {"map": "function(d) { emit(d.著者, 1); }"},
                           "r": {"map": "function(d) { emit(d.著者, 1); }", "reduce": "_sum"}});
        put(&db, json!({"_id": "_design/d", "views": views}))?;
        put(&db, json!({"_id": "一", "著者": "漱石"}))?;
        let lookup =
            ViewQuery { key: Some(json!("漱石")), limit: Some(25), ..Default::default() };
        assert!(!is_short_read(&db, "_design/d", "v", &lookup), "not yet known in memory");
        run(&db, "v", &lookup)?;
        assert!(is_short_read(&db, "_design/d", "v", &lookup));
        let docs = ViewQuery { include_docs: true, ..lookup.clone() };
        let long = ViewQuery { limit: Some(10_000), ..lookup.clone() };
        let unlimited = ViewQuery { limit: None, ..lookup.clone() };
        for q in [&docs, &long, &unlimited] {
            assert!(!is_short_read(&db, "_design/d", "v", q), "{q:?}");
        }
        assert!(!is_short_read(&db, "_design/d", "r", &lookup), "reduces");
        let unreduced = ViewQuery { reduce: Some(false), ..lookup.clone() };
        assert!(is_short_read(&db, "_design/d", "r", &unreduced));
        let stale = ViewQuery { update: Update::False, ..lookup.clone() };
        assert!(is_short_read(&db, "_design/d", "v", &stale));
        Ok(())
    }

    /// The answer's rows and its offset and total.
    fn run(
        db: &Database,
        view: &str,
        q: &ViewQuery,
    ) -> Result<(Vec<ViewRow>, Option<u64>, Option<u64>)> {
        let r = query_view(&UserCtx::system(), db, "_design/d", view, q, None)?;
        let (offset, total) = (r.offset, r.total_rows);
        Ok((r.rows.collect::<Result<_>>()?, offset, total))
    }

    fn keys(rows: &[ViewRow]) -> Vec<Value> {
        rows.iter().map(|r| r.key.clone()).collect()
    }

    #[test]
    fn map_ranges_follow_collation_and_updates() -> Result<()> {
        let engine = Engine::open(Arc::new(Memory::new()), Config::default())?;
        let db = engine.create_db(&admin(), "v", false)?;
        put(
            &db,
            json!({"_id": "_design/d", "views": {
                "by_n": {"map": "function(doc) { if (doc.n !== undefined) emit(doc.n, 1); }"},
                "sum": {"map": "function(doc) { if (doc.n !== undefined) emit(doc.n, doc.n); }", "reduce": "_sum"}
            }}),
        )?;
        for (i, n) in [json!(3), json!("a"), json!(1), json!(null), json!([1, 2]), json!(2)]
            .iter()
            .enumerate()
        {
            put(&db, json!({"_id": format!("d{i}"), "n": n}))?;
        }
        let (all, _, total) = run(&db, "by_n", &ViewQuery::default())?;
        assert_eq!(
            keys(&all),
            vec![json!(null), json!(1), json!(2), json!(3), json!("a"), json!([1, 2])]
        );
        assert_eq!(total, Some(6));
        let q = ViewQuery {
            start_key: Some(json!(2)),
            end_key: Some(json!("a")),
            inclusive_end: false,
            ..Default::default()
        };
        let (rows, offset, _) = run(&db, "by_n", &q)?;
        assert_eq!((keys(&rows), offset), (vec![json!(2), json!(3)], Some(2)));
        let q = ViewQuery {
            start_key: Some(json!(3)),
            descending: true,
            limit: Some(2),
            ..Default::default()
        };
        let (rows, offset, _) = run(&db, "by_n", &q)?;
        assert_eq!((keys(&rows), offset), (vec![json!(3), json!(2)], Some(2)));
        let q =
            ViewQuery { start_key: Some(json!(0)), end_key: Some(json!(9)), ..Default::default() };
        let (sum, _, _) = run(&db, "sum", &q)?;
        assert_eq!(sum.first().map(|r| r.value.clone()), Some(json!(6)));
        let info = db.get(&bunko_engine::security::UserCtx::system(), "d0", None)?;
        db.delete(&admin(), "d0", Some(info.rev))?;
        let (rows, _, total) = run(&db, "by_n", &ViewQuery::default())?;
        assert_eq!(total, Some(5));
        assert!(!keys(&rows).contains(&json!(3)));
        Ok(())
    }

    #[test]
    fn doc_id_bounds_shared_indexes_and_cleanup() -> Result<()> {
        let engine = Engine::open(Arc::new(Memory::new()), Config::default())?;
        let db = engine.create_db(&admin(), "v", false)?;
        let views = json!({"k": {"map": "function(doc) { emit(doc.k, null); }"}});
        put(&db, json!({"_id": "_design/a", "views": views}))?;
        put(&db, json!({"_id": "_design/b", "views": views}))?;
        for id in ["x1", "x2", "x3", "y1"] {
            put(&db, json!({"_id": id, "k": &id[..1]}))?;
        }
        let ids =
            |r: ViewResult| r.rows.filter_map(|r| r.ok().and_then(|r| r.id)).collect::<Vec<_>>();
        let q = ViewQuery {
            start_key: Some(json!("x")),
            start_key_doc_id: Some("x2".into()),
            end_key: Some(json!("x")),
            end_key_doc_id: Some("x3".into()),
            ..Default::default()
        };
        assert_eq!(
            ids(query_view(&UserCtx::system(), &db, "_design/a", "k", &q, None)?),
            vec!["x2", "x3"]
        );
        let q = ViewQuery { inclusive_end: false, ..q };
        assert_eq!(
            ids(query_view(&UserCtx::system(), &db, "_design/b", "k", &q, None)?),
            vec!["x2"]
        );
        let q = ViewQuery {
            start_key: Some(json!("x")),
            start_key_doc_id: Some("x2".into()),
            descending: true,
            ..Default::default()
        };
        assert_eq!(
            ids(query_view(&UserCtx::system(), &db, "_design/a", "k", &q, None)?),
            vec!["x2", "x1"]
        );
        assert_eq!(registry(&db).all().len(), 1, "identical design documents share one index");
        let a = db.get(&bunko_engine::security::UserCtx::system(), "_design/a", None)?;
        db.delete(&admin(), "_design/a", Some(a.rev))?;
        assert_eq!(view_cleanup(&db)?, 0, "_design/b still uses the index");
        let b = db.get(&bunko_engine::security::UserCtx::system(), "_design/b", None)?;
        db.delete(&admin(), "_design/b", Some(b.rev))?;
        assert_eq!(view_cleanup(&db)?, 1);
        let left = db.snapshot().scan(&prefix_range(&[entries::VIEW_ROW]), false, 10)?;
        assert!(left.is_empty());
        Ok(())
    }
}
