//! `distinct` from a MongoDB index (MongoDB's `DISTINCT_SCAN`): the scan reads the first
//! entry of each key value of the distinct field, takes that value, and seeks past every
//! other entry holding it, so it reads about one entry per distinct value, not one per
//! document.
//!
//! Planning ([`Database::distinct_plan`]): with an empty filter, the index with the fewest
//! fields whose first field is the distinct key (not partial, not hashed, and under the
//! query's collation or none), or the hinted one if its first field is the key; with a
//! filter, the index the query plans when its bounds answer the filter exactly
//! ([`MongoScan::counts_exactly`]) and the key is one of its fields. A filter whose
//! bounds say it for each entry but not for each document ([`MongoScan::selects_exactly`]:
//! an equality or `$in` on a multikey field other than the key, as MongoDB's
//! `jstests/core/query/distinct/distinct_multikey.js` answers `distinct("b", {a: 3})` over
//! `{a: 1, b: 1}` with `a` multikey) is answered too, reading the documents (index keys
//! flatten nested arrays, so an entry within the bounds may belong to a document the
//! filter does not match: `{a: [[3]]}`).
//!
//! An index multikey at the key is used when the filter is empty, as MongoDB 8's planner
//! uses one (`jstests/core/query/distinct/distinct_multikey.js`: `DISTINCT_SCAN` +
//! `PROJECTION_COVERED`; with a predicate on the key, `IXSCAN` + `FETCH`, so not here
//! either): its keys are the elements of the arrays one level down, which are `distinct`'s
//! values, and each key's value is the element of the document's array it encodes (read
//! from the document: entries keep no arrays, so where MongoDB's plan is covered, Bunko's
//! is `PROJECTION_DEFAULT` over a fetching `DISTINCT_SCAN`, one document per value). Bunko's
//! keys are the elements of arrays nested in arrays too, where `distinct` returns the
//! nested array whole, so the index is used only while its state says no document has
//! held a nested array at the key (`IndexMeta::flat_at`; an index stored before that was
//! kept says nothing, and is not used).
//!
//! Values: an index whose entries keep their documents' values
//! (`crate::index::mongo::covered_fields`) gives each value from the entry itself
//! (MongoDB's `PROJECTION_COVERED` over `DISTINCT_SCAN`). Otherwise (a collated index:
//! keys are sort keys; a filter only the documents say) the entry's document is read and the value is the one at the key
//! whose encoding is the entry's (`FETCH` over `DISTINCT_SCAN`). A key whose first entry
//! gives no value (a missing field indexed as `null`, an entry the filter's numeric check
//! rejects) reads the next entry of the same key, so the values are those a collection scan
//! finds; the caller still drops values equal under the query's collation.

use std::sync::Arc;

use bunko_query::mongo_index::{encode, encoded_len};
use bunko_query::path::Lookup;
use bunko_query::{FieldPath, Node, Selector, collation};
use bunko_storage::{Iter, Snapshot, prefix_range};
use serde_json::Value;

use super::ExecStats;
use super::mongo::matching_doc;
use super::mongo_count::CountCheck;
use super::mongo_index::{FieldBounds, MongoScan, NATURAL};
use crate::database::Database;
use crate::index::{Index, entries, mongo};
use crate::keys::Key;
use crate::security::UserCtx;
use crate::{Result, records};

/// Entries read per seek (most keys give their value at their first entry).
const PAGE: usize = 4;

/// A distinct scan: the index scan, the position of the key among its fields, and how
/// values are read.
#[derive(Debug, Clone)]
pub struct DistinctScan {
    pub scan: MongoScan,
    field: usize,
    /// Values come from the documents (`FETCH`), not from the entries.
    pub fetch: bool,
    check: CountCheck,
}

impl Database {
    /// The distinct scan that answers `distinct` of `key` over `selector` (see the module
    /// doc), if one does.
    pub fn distinct_plan(
        &self,
        selector: &Selector,
        key: &FieldPath,
        hint: Option<&str>,
    ) -> Result<Option<DistinctScan>> {
        if hint == Some(NATURAL) || selector.has_predicate() {
            return Ok(None);
        }
        // `fetch`: the entries alone cannot say which documents match.
        let (scan, check, mut fetch) = match selector.root() {
            Node::Empty => {
                let Some(index) = self.distinct_index(key, hint) else { return Ok(None) };
                let bounds = vec![FieldBounds::All; index.def.fields.len()];
                (MongoScan::unsorted(index, bounds), CountCheck::Keys, false)
            }
            _ => {
                let Some(scan) = self.mongo_plan(selector, hint)? else { return Ok(None) };
                match scan.counts_exactly(selector) {
                    Some(check) => (scan, check, false),
                    None if scan.selects_exactly(selector) => (scan, CountCheck::Keys, true),
                    None => return Ok(None),
                }
            }
        };
        let Some(spec) = scan.index.def.mongo.as_ref() else { return Ok(None) };
        let Some(field) = scan.index.compiled.paths().iter().position(|p| p == key) else {
            return Ok(None);
        };
        let own = scan.index.compiled.collation();
        if spec.hashed.is_some()
            || own
                .as_ref()
                .is_some_and(|c| !collation::same(Some(c), collation::current().as_deref()))
        {
            return Ok(None);
        }
        let meta = scan.index.meta();
        // Multikey at the key: only unfiltered, and only while no document holds a nested
        // array there (see the module doc).
        let multikey = meta.multikey.get(field).is_some_and(|p| !p.is_empty());
        if multikey && !(matches!(selector.root(), Node::Empty) && meta.flat_at(field)) {
            return Ok(None);
        }
        // An entry keeps no array (`bunko_query::covered`): a multikey key's value is the
        // element of its document's array the key encodes.
        fetch |= own.is_some() || !meta.covering || multikey;
        Ok(Some(DistinctScan { scan, field, fetch, check }))
    }

    /// The index an unfiltered distinct of `key` scans: its first field is `key`.
    fn distinct_index(&self, key: &FieldPath, hint: Option<&str>) -> Option<Arc<Index>> {
        let query = collation::current();
        let mut usable: Vec<Arc<Index>> = self
            .plannable_mongo_indexes()
            .into_iter()
            .filter(|i| hint.is_none_or(|h| i.def.name == h))
            .filter(|i| i.compiled.paths().first() == Some(key))
            .filter(|i| {
                i.def.mongo.as_ref().is_some_and(|s| s.partial.is_none() && s.hashed.is_none())
            })
            .filter(|i| {
                let own = i.compiled.collation();
                own.is_none() || collation::same(own.as_deref(), query.as_deref())
            })
            .collect();
        usable.sort_by_key(|i| i.def.fields.len());
        usable.into_iter().next()
    }

    /// The values of the key, one per key value of the index that holds one (see the
    /// module doc; `None`: `reader` sees documents only in part), with what was examined.
    pub fn distinct_mongo_index(
        &self,
        reader: &UserCtx,
        selector: &Selector,
        plan: &DistinctScan,
    ) -> Result<Option<(Vec<Value>, ExecStats)>> {
        if !self.sight(reader)?.is_whole() {
            return Ok(None);
        }
        let own = plan.scan.index.compiled.collation();
        collation::with(own, || {
            let mut walk = Walk {
                db: self,
                snap: self.store.snapshot(),
                plan,
                selector,
                prefix: entries::prefix(self.id(), plan.scan.index.num(), None).len(),
                path: plan.scan.index.compiled.paths().get(plan.field).cloned(),
                stats: ExecStats::default(),
                values: Vec::new(),
            };
            for range in plan.scan.storage_ranges(self.id()) {
                walk.range(range)?;
            }
            walk.stats.results_returned = walk.values.len() as u64;
            // `$indexStats` and the advisor's query log see it as they see a find.
            let query = super::FindQuery::new(selector.clone(), bunko_query::Dialect::Mongo);
            self.observe_query(&query, Some(&plan.scan.index), &walk.stats);
            Ok(Some((walk.values, walk.stats)))
        })
    }
}

/// One distinct scan under way.
struct Walk<'a> {
    db: &'a Database,
    snap: Snapshot,
    plan: &'a DistinctScan,
    selector: &'a Selector,
    /// The length of the index's entry prefix.
    prefix: usize,
    path: Option<FieldPath>,
    stats: ExecStats,
    values: Vec<Value>,
}

impl Walk<'_> {
    /// Every key value of the distinct field within one storage range.
    fn range(&mut self, range: bunko_storage::Range) -> Result<()> {
        let (mut from, end) = range;
        'keys: loop {
            let mut entries = Iter::new(self.snap.clone(), (from, end.clone()), false, PAGE);
            let Some(first) = entries.next() else { return Ok(()) };
            let (key, value) = first?;
            self.stats.keys_examined += 1;
            let Some((start, group)) = self.group(&key) else { return Ok(()) };
            let head = key.get(..group).unwrap_or_default().to_vec();
            let encoded = encoded_field(&head, start);
            let mut found = self.value(&encoded, &value)?;
            while found.is_none() {
                let Some(next) = entries.next() else { return Ok(()) };
                let (key, value) = next?;
                self.stats.keys_examined += 1;
                if !key.starts_with(&head) {
                    from = std::ops::Bound::Included(key);
                    continue 'keys;
                }
                found = self.value(&encoded, &value)?;
            }
            self.values.extend(found);
            from = prefix_range(&head).1;
            if matches!(from, std::ops::Bound::Unbounded) {
                return Ok(());
            }
        }
    }

    /// Where the distinct field's encoded value starts and ends in an entry key.
    fn group(&self, key: &[u8]) -> Option<(usize, usize)> {
        let mut at = self.prefix;
        for _ in 0..self.plan.field {
            at += encoded_len(key.get(at..)?)?;
        }
        Some((at, at + encoded_len(key.get(at..)?)?))
    }

    /// The value an entry gives for the key whose field encodes as `encoded`, if any.
    fn value(&mut self, encoded: &[u8], entry: &[u8]) -> Result<Option<Value>> {
        let Some(path) = self.path.clone() else { return Ok(None) };
        if !self.plan.fetch {
            let Some((_, Some(fields))) = mongo::decode_entry(entry) else { return Ok(None) };
            let doc = Value::Object(fields);
            let checked = self.plan.check == CountCheck::Keys
                || self.selector.matches(&doc, bunko_query::Dialect::Mongo);
            return Ok(match path.get(&doc) {
                Lookup::Found(v) if checked => Some(v.clone()),
                _ => None,
            });
        }
        let Some((_, id)) = entries::decode_value(entry) else { return Ok(None) };
        let Some(doc) = self.fetch(&id)? else { return Ok(None) };
        let mut reached = Vec::new();
        reach(&doc, path.segments(), &mut reached);
        Ok(reached
            .into_iter()
            .find(|v| {
                let mut bytes = Vec::new();
                encode(v, &mut bytes);
                bytes == encoded
            })
            .cloned())
    }

    /// The document `id` in its MongoDB form, if it is live and matches the filter.
    fn fetch(&mut self, id: &str) -> Result<Option<Value>> {
        let db = self.db.id();
        let Some(info) = self.snap.get(&Key::Doc(db, id).encode())? else { return Ok(None) };
        let record = records::DocRecord::decode(&info)?;
        let (rev, deleted) = record.info.winner()?;
        let body = crate::read::body_of(self.snap.as_ref(), db, id, rev, Some(&record))?;
        let (false, Some(body)) = (deleted, body) else { return Ok(None) };
        self.stats.docs_examined += 1;
        Ok(matching_doc(id, &body, self.selector))
    }
}

/// The distinct field's encoded value: `head` (a key up to the end of that field) from
/// `start` on.
fn encoded_field(head: &[u8], start: usize) -> Vec<u8> {
    head.get(start..).unwrap_or_default().to_vec()
}

/// The values a dotted path reaches, through arrays as MongoDB's `distinct` does: an array
/// at the end stands for its elements.
fn reach<'v>(value: &'v Value, path: &[String], out: &mut Vec<&'v Value>) {
    let Some((first, rest)) = path.split_first() else {
        match value {
            Value::Array(items) => out.extend(items),
            other => out.push(other),
        }
        return;
    };
    match value {
        Value::Object(doc) => {
            if let Some(child) = doc.get(first) {
                reach(child, rest, out);
            }
        }
        Value::Array(items) => {
            if let Some(item) = first.parse::<usize>().ok().and_then(|i| items.get(i)) {
                reach(item, rest, out);
            }
            for item in items.iter().filter(|i| i.is_object()) {
                reach(item, path, out);
            }
        }
        _ => {}
    }
}
