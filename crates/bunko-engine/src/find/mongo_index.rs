//! MongoDB queries served by MongoDB-semantics indexes (`crate::index::mongo`).
//!
//! Planning, in MongoDB's terms: an index is a candidate when its first field has an
//! indexable condition in the filter's top-level `$and` (an equality on a non-array value,
//! `$in` of such values, a range `$gt`/`$gte`/`$lt`/`$lte` on a number, string, date or
//! ObjectId, an anchored regex `/^abc/` without the `i` flag as the range of strings with
//! that prefix, also inside `$elemMatch`), or when `hint` names it. Sparse and partial
//! indexes (which lack some documents) are used unhinted only when the filter implies that
//! every match is in them (`holds_every_match`). The index fields are walked in
//! order: equalities (each `$in` value is its own range) fix a field and move on; a range
//! bounds the next field and ends the walk. Among candidates the one with the most fixed
//! fields, then a range, then fewer fields wins; the others are `rejectedPlans`.
//!
//! On the hashed field of a hashed index, equalities and `$in` values become points of their
//! hashes (`bunko_query::mongo_index::hashed`, in hash order) and ranges bound nothing; a
//! sort is not served by an index whose hashed field is among its leading fields.
//!
//! A collated index (`collation` on `createIndexes`) holds sort keys for strings, so its
//! bounds are computed under its collation (`bunko_query::collation::with`); a query whose
//! collation differs (simple included) uses it only for bounds without strings, and a
//! regex bounds nothing on it.
//!
//! A range's bounds stay inside the bound value's type class (MongoDB's type bracketing:
//! `{$gt: 5}` matches numbers only). Every document an index names is read once and
//! matched against the whole filter, so an index only narrows what is read.

use std::ops::Bound;
use std::sync::Arc;

use bunko_query::bson_order::{Class, class};
use bunko_query::collation;
use bunko_query::mongo_index::encode;
use bunko_query::{Cond, Direction, FieldPath, Node, Selector};
use bunko_storage::{Range, prefix_range};
use serde_json::Value;

use super::mongo_merge::Merged;
use super::mongo_multikey::{Filed, file, multikey_bounds};
use super::mongo_stream::IndexStream;
use super::{ExecStats, FindQuery};
use crate::database::Database;
use crate::index::{Index, entries};
use crate::security::UserCtx;
use crate::{Error, Result};

/// The `hint` that asks for a collection scan.
pub const NATURAL: &str = "$natural";
/// The most ranges one query scans (each `$in` value multiplies them).
const MAX_RANGES: usize = 256;

/// How one indexed field is bounded.
#[derive(Debug, Clone)]
pub(super) enum FieldBounds {
    Points(Vec<Value>),
    Range {
        lower: Option<(Value, bool)>,
        upper: Option<(Value, bool)>,
        class: Class,
    },
    /// Any of several points and ranges (`$in` holding anchored regexes); ends the walk.
    Union(Vec<FieldBounds>),
    All,
}

/// The plan of a MongoDB query over one index.
#[derive(Debug, Clone)]
pub struct MongoScan {
    pub index: Arc<Index>,
    pub(super) bounds: Vec<FieldBounds>,
    /// The other candidate indexes with their bounds (`rejectedPlans`).
    pub rejected: Vec<MongoScan>,
    /// The scan runs backwards (a descending sort served by the index).
    pub reverse: bool,
    /// The scan yields documents in the query's sort order ([`Database::mongo_sort_plan`]).
    pub sorted: bool,
    /// The storage range the scan stays within besides its bounds (`find`'s `min`/`max`,
    /// [`MongoScan::clamp_to_keys`]).
    pub(super) clamp: Option<Range>,
    /// The sort is served by merging one scan per point of the fields the filter fixes to
    /// several points (MongoDB's `SORT_MERGE`, [`super::mongo_merge`]).
    pub merged: Option<Merged>,
}

impl MongoScan {
    /// A forward scan of `index` within `bounds`, with no rejected plans.
    pub(super) fn unsorted(index: Arc<Index>, bounds: Vec<FieldBounds>) -> Self {
        MongoScan {
            index,
            bounds,
            rejected: Vec::new(),
            reverse: false,
            sorted: false,
            clamp: None,
            merged: None,
        }
    }

    /// The storage ranges of the index entries the scan reads, in ascending order (string
    /// bounds as the sort keys of the index's collation).
    pub(super) fn storage_ranges(&self, db: u64) -> Vec<Range> {
        let prefix = entries::prefix(db, self.index.num(), None);
        let ranges = collation::with(self.index.compiled.collation(), || {
            storage_ranges(&prefix, &self.bounds)
        });
        match &self.clamp {
            Some(clamp) => ranges.iter().filter_map(|r| intersect(r, clamp)).collect(),
            None => ranges,
        }
    }

    /// Keeps the scan to the index keys from `lower` to `upper` (one value per index field,
    /// `upper` excluded, compared in the index's order, each field in its direction: `find`'s
    /// `min` and `max`). Entries are stored ascending whatever the declared directions, so
    /// the range bounds the leading fields that share the first field's direction, with
    /// `upper`'s key included (numbers MongoDB tells apart may share a key): the documents
    /// read must still be checked against the exact bounds.
    pub fn clamp_to_keys(&mut self, db: u64, lower: &[Value], upper: &[Value]) {
        let Some(spec) = &self.index.def.mongo else { return };
        let Some((_, first)) = spec.key.first() else { return };
        let run = spec.key.iter().take_while(|(_, dir)| (*dir < 0) == (*first < 0)).count();
        let (lo, hi) = if *first < 0 { (upper, lower) } else { (lower, upper) };
        let at = |values: &[Value]| {
            let mut key = entries::prefix(db, self.index.num(), None);
            values.iter().take(run).for_each(|v| encode(v, &mut key));
            key
        };
        self.clamp = Some((Bound::Included(at(lo)), prefix_range(&at(hi)).1));
    }

    /// Makes this plan yield its documents in `order` when its index holds them so: the
    /// sort's fields (all ascending or all descending) are the index's fields from some
    /// position on, every field before that is fixed by the bounds, and no bound from there
    /// on is several points or a union (several ranges, each in order but not together).
    /// So `{sensor: 7}` sorted by `{ts: -1}` reads the index `{sensor: 1, ts: 1}` backwards
    /// and stops at `skip + limit`, as MongoDB's planner does. When a fixed field is fixed
    /// to several points (`$in`), each combination of points is one scan in the sort's
    /// order, and the scans are merged ([`MongoScan::merged`], MongoDB's `SORT_MERGE`). Not
    /// on a multikey index (a document's sort key is its array's smallest or largest
    /// element, not the entry within the bounds), a hashed field among the sort's, another
    /// collation, or a scan clamped to `min`/`max`. Returns whether it does.
    pub fn serve_order(&mut self, order: &[(FieldPath, Direction)]) -> bool {
        let Some((_, first)) = order.first() else { return false };
        let index = &self.index;
        let paths = index.compiled.paths();
        let query = collation::current();
        let usable = order.iter().all(|(_, d)| d == first)
            && self.clamp.is_none()
            && !index.meta().is_multikey()
            && collation::same(index.compiled.collation().as_deref(), query.as_deref());
        let spread = |b: &FieldBounds| match b {
            FieldBounds::Points(points) => points.len() > 1,
            FieldBounds::Union(_) => true,
            _ => false,
        };
        let fixed = |b: &FieldBounds| matches!(b, FieldBounds::Points(_));
        let at = (0..=paths.len().saturating_sub(order.len())).find(|&at| {
            self.bounds.len() >= at
                && paths.len() >= at + order.len()
                && self.bounds[..at].iter().all(fixed)
                && !self.bounds[at..].iter().any(spread)
                && hashed_at(index).is_none_or(|h| h < at || h >= at + order.len())
                && order.iter().zip(&paths[at..]).all(|((p, _), q)| p == q)
        });
        let Some(at) = at.filter(|_| usable) else { return false };
        self.sorted = true;
        self.reverse = *first == Direction::Desc;
        if self.bounds[..at].iter().any(spread) {
            self.merged = Some(self.merge(at, order));
        }
        true
    }

    /// How many leading index fields the bounds fix to one value.
    pub fn fixed_fields(&self) -> usize {
        let single = |b: &&FieldBounds| matches!(b, FieldBounds::Points(p) if p.len() == 1);
        self.bounds.iter().take_while(single).count()
    }

    /// `indexBounds` as MongoDB's explain shows them (a string bound of a collated index as
    /// `CollationKey(0x…)`, its sort key).
    pub fn index_bounds(&self) -> Vec<(String, Vec<String>)> {
        let fields = self.index.def.fields.iter().map(|f| f.name.clone());
        collation::with(self.index.compiled.collation(), || {
            fields.zip(self.bounds.iter().map(bounds_text)).collect()
        })
    }
}

impl Database {
    /// The index a MongoDB query uses (`None`: a collection scan). `hint`: an index name,
    /// or [`NATURAL`].
    pub fn mongo_plan(&self, selector: &Selector, hint: Option<&str>) -> Result<Option<MongoScan>> {
        if hint == Some(NATURAL) {
            return Ok(None);
        }
        let filed = file(selector.root());
        // A hidden index is neither chosen nor hinted (MongoDB: the hint then names no index).
        let indexes: Vec<Arc<Index>> = self.plannable_mongo_indexes();
        if let Some(name) = hint {
            let Some(index) = indexes.iter().find(|i| i.def.name == name) else {
                return Err(Error::BadRequest(
                    "error processing query: planner returned error :: caused by :: hint provided does not correspond to an existing index".into(),
                ));
            };
            let bounds = match index_bounds(index, &filed) {
                Some(bounds) => bounds,
                None => vec![FieldBounds::All; index.def.fields.len()],
            };
            let index = index.clone();
            let rejected = Vec::new();
            let (reverse, sorted, clamp, merged) = (false, false, None, None);
            return Ok(Some(MongoScan { index, bounds, rejected, reverse, sorted, clamp, merged }));
        }
        let mut ranked: Vec<(Arc<Index>, Vec<FieldBounds>)> = indexes
            .into_iter()
            .filter(|i| plannable(i) || holds_every_match(i, selector))
            .filter_map(|i| {
                let bounds = index_bounds(&i, &filed)?;
                Some((i, bounds))
            })
            .filter(|(_, b)| !matches!(b.first(), Some(FieldBounds::All) | None))
            .collect();
        ranked.sort_by_key(|(i, b)| (rank(b), i.def.name.clone()));
        let mut ranked = ranked.into_iter();
        let Some((index, bounds)) = ranked.next() else { return Ok(None) };
        let rejected = ranked.map(|(index, bounds)| MongoScan::unsorted(index, bounds)).collect();
        let mut scan = MongoScan::unsorted(index, bounds);
        scan.rejected = rejected;
        Ok(Some(scan))
    }

    /// The index scan a query sorted by `order` runs: the filter's plan ([`Database::mongo_plan`],
    /// yielding `order` where its index can, [`MongoScan::serve_order`]), else (unhinted) an
    /// index that yields `order` ([`Database::mongo_sort_plan`]), else none.
    pub fn mongo_access(
        &self,
        selector: &Selector,
        hint: Option<&str>,
        order: &[(FieldPath, Direction)],
    ) -> Result<Option<MongoScan>> {
        if let Some(mut scan) = self.mongo_plan(selector, hint)? {
            scan.serve_order(order);
            return Ok(Some(scan));
        }
        Ok(if hint.is_none() { self.mongo_sort_plan(order) } else { None })
    }

    /// An index that yields every document in the order `order` asks (its first fields are
    /// the sort's paths, and the sort's directions are all ascending or all descending:
    /// entries are stored ascending whatever the index's declared directions, so a
    /// descending sort scans backwards). Sparse and partial indexes lack documents and are
    /// not used. A multikey entry is met first at the array's smallest element forwards and
    /// at its largest backwards, which is where MongoDB sorts an array.
    pub fn mongo_sort_plan(&self, order: &[(FieldPath, Direction)]) -> Option<MongoScan> {
        let (_, first) = order.first()?;
        if order.iter().any(|(_, d)| d != first) {
            return None;
        }
        let query = collation::current();
        let index = self.plannable_mongo_indexes().into_iter().find(|i| {
            let paths = i.compiled.paths();
            i.def.mongo.as_ref().is_some_and(|s| !s.sparse && s.partial.is_none())
                && hashed_at(i).is_none_or(|h| h >= order.len())
                && collation::same(i.compiled.collation().as_deref(), query.as_deref())
                && paths.len() >= order.len()
                && order.iter().zip(paths).all(|((p, _), q)| p == q)
        })?;
        let bounds = vec![FieldBounds::All; index.def.fields.len()];
        let reverse = *first == Direction::Desc;
        let mut scan = MongoScan::unsorted(index, bounds);
        (scan.reverse, scan.sorted) = (reverse, true);
        Some(scan)
    }

    /// Runs the plan `scan` read-only for a trial period, as MongoDB's multi-planner runs
    /// every candidate plan: until `max_results` documents matched `selector`, `max_keys`
    /// index keys were read, or the scan ended. For `explain`'s `allPlansExecution`;
    /// `covered`: the plan answers from the entries (`super::mongo_cover`).
    pub fn trial_mongo_scan(
        &self,
        reader: &UserCtx,
        selector: &Selector,
        (scan, covered): (&MongoScan, bool),
        (max_results, max_keys): (u64, u64),
    ) -> Result<ExecStats> {
        let snapshot = self.store.snapshot();
        let sight = self.sight(reader)?;
        let whole = sight.is_whole();
        let mut stream = IndexStream::new(self, &snapshot, scan, selector, sight);
        stream.budget = Some(max_keys);
        stream.covered = covered && whole;
        let mut returned = 0;
        while returned < max_results {
            match stream.next() {
                Some(doc) => {
                    doc?;
                    returned += 1;
                }
                None => break,
            }
        }
        Ok(ExecStats { results_returned: returned, ..stream.stats })
    }

    /// Runs a MongoDB query over the index of `scan`: every matching document (in index
    /// order, each once, as `sight` shows it), at most `limit` after `skip` when `stop_early`;
    /// `covered`: the entries' kept values (`super::mongo_cover`) instead of documents.
    pub(crate) fn scan_mongo_index(
        &self,
        query: &FindQuery,
        scan: &MongoScan,
        (stop_early, covered): (bool, bool),
        sight: &crate::read_gate::Sight,
    ) -> Result<(Vec<Value>, ExecStats)> {
        let snapshot = self.store.snapshot();
        let mut stream = IndexStream::new(self, &snapshot, scan, &query.selector, sight.clone());
        stream.covered = covered && sight.is_whole();
        let wanted = query.skip.saturating_add(query.limit);
        let mut docs = Vec::new();
        for doc in stream.by_ref() {
            docs.push(doc?);
            if stop_early && docs.len() >= wanted {
                break;
            }
        }
        Ok((docs, stream.stats))
    }
}

/// The position of a hashed index's hashed field.
fn hashed_at(index: &Index) -> Option<usize> {
    index.def.mongo.as_ref().and_then(|s| s.hashed)
}

/// How an index's keys are made, which its bounds must follow.
#[derive(Debug, Clone, Copy, Default)]
struct KeyRules {
    /// The position of the hashed field.
    hashed: Option<usize>,
    /// String keys are a collation's sort keys (a regex bounds nothing).
    collated: bool,
}

/// The bounds of `index` for the conditions `conds`, computed under its collation; `None`
/// when the query's collation differs from the index's and a bound holds a string (its
/// keys order strings otherwise: MongoDB then uses the index only for other values).
fn index_bounds(index: &Index, filed: &Filed) -> Option<Vec<FieldBounds>> {
    let conds = &filed.conds;
    let own = index.compiled.collation();
    let query = collation::current();
    let rules = KeyRules { hashed: hashed_at(index), collated: own.is_some() };
    let same = collation::same(own.as_deref(), query.as_deref());
    let bounds = collation::with(own, || field_bounds(index.compiled.paths(), conds, rules));
    let bounds = multikey_bounds(index, bounds, filed);
    (same || bounds.iter().all(collation_free)).then_some(bounds)
}

/// Whether bounds hold no string (strings, and objects and arrays which may hold some).
fn collation_free(bounds: &FieldBounds) -> bool {
    let free = |v: &Value| !matches!(class(v), Class::String | Class::Object | Class::Array);
    match bounds {
        FieldBounds::Points(values) => values.iter().all(free),
        FieldBounds::Range { class, .. } => *class != Class::String,
        FieldBounds::Union(parts) => parts.iter().all(collation_free),
        FieldBounds::All => true,
    }
}

/// Whether the planner considers `index` unhinted (sparse and partial indexes lack some
/// documents).
fn plannable(index: &Index) -> bool {
    index.def.mongo.as_ref().is_some_and(|s| !s.sparse && s.partial.is_none())
}

/// Whether a sparse or partial index holds every document `selector` can match: the
/// query implies the partial filter (`bunko_query::plan::implies`), and, for a sparse
/// index, a value (not `null`) at one of its fields, as MongoDB plans them unhinted.
fn holds_every_match(index: &Index, selector: &Selector) -> bool {
    let Some(spec) = &index.def.mongo else { return false };
    let partial_ok = match (&spec.partial, index.compiled.partial()) {
        (None, _) => true,
        (Some(_), Some(filter)) => bunko_query::plan::implies(selector, filter),
        (Some(_), None) => false,
    };
    let paths = index.compiled.paths();
    let sparse_ok =
        !spec.sparse || paths.iter().any(|p| bunko_query::plan::requires_value(selector, p));
    partial_ok && sparse_ok
}

/// How good an index's bounds are, best first: most fixed fields, then a range, then
/// fewer fields.
fn rank(bounds: &[FieldBounds]) -> (std::cmp::Reverse<usize>, bool, usize) {
    let fixed = bounds.iter().take_while(|f| matches!(f, FieldBounds::Points(_))).count();
    let ranged =
        bounds.iter().any(|f| matches!(f, FieldBounds::Range { .. } | FieldBounds::Union(_)));
    (std::cmp::Reverse(fixed), !ranged, bounds.len())
}

/// Whether `selector` bounds `path` as the first field of an index on it would be bounded
/// (what makes an index on `path` a candidate plan, e.g. MongoDB's `_id` index).
pub fn bounds_path(selector: &Selector, path: &FieldPath) -> bool {
    let conds = file(selector.root()).conds;
    let bounds = field_bounds(std::slice::from_ref(path), &conds, KeyRules::default());
    !matches!(bounds.first(), Some(FieldBounds::All) | None)
}

/// Whether the planner would choose a (non-sparse, non-partial) index on `fields` for
/// `selector` over every index of `indexes` (the advisor's check of its suggestion).
pub(crate) fn would_choose(
    selector: &Selector,
    indexes: &[Arc<Index>],
    fields: &[FieldPath],
) -> bool {
    let conds = file(selector.root()).conds;
    let ranked = |paths: &[FieldPath]| {
        let bounds = field_bounds(paths, &conds, KeyRules::default());
        (!matches!(bounds.first(), Some(FieldBounds::All) | None)).then(|| rank(&bounds))
    };
    let Some(mine) = ranked(fields) else { return false };
    let ready = indexes.iter().filter(|i| i.is_ready() && plannable(i));
    ready.filter_map(|i| ranked(i.compiled.paths())).all(|other| mine < other)
}

/// An `$or` whose every branch is a condition on the same path (what `$in` with regexes
/// becomes), as that path and the branches (each a root-path condition): the planner files
/// it as an `$elemMatch` of an `$or` (a form no filter has at the top level of a
/// path's conditions) and [`bounds_of`] reads it as a union.
pub(super) fn one_path_or(node: &Node) -> Option<(FieldPath, Vec<Node>)> {
    let Node::Or(children) = node else { return None };
    let mut path: Option<&FieldPath> = None;
    let mut conds = Vec::new();
    for child in children {
        let Node::Field(p, cond) = child else { return None };
        if path.is_some_and(|q| q != p) {
            return None;
        }
        path = Some(p);
        conds.push(Node::Field(FieldPath::root(), cond.clone()));
    }
    Some((path?.clone(), conds))
}

/// The bounds of each index field (the hashed field's equalities become points of their
/// hashes and its ranges bound nothing; a collated index's regexes bound nothing).
fn field_bounds(
    paths: &[FieldPath],
    conds: &[(FieldPath, Cond)],
    rules: KeyRules,
) -> Vec<FieldBounds> {
    let mut out = Vec::new();
    let mut ranges = 1usize;
    let mut walking = true;
    for (i, path) in paths.iter().enumerate() {
        let on: Vec<&Cond> = conds.iter().filter(|(p, _)| p == path).map(|(_, c)| c).collect();
        let bounds = if walking { bounds_of(&on, rules.collated) } else { FieldBounds::All };
        let bounds = if rules.hashed == Some(i) { hash_bounds(bounds) } else { bounds };
        match &bounds {
            FieldBounds::Points(values) if ranges * values.len() <= MAX_RANGES => {
                ranges *= values.len();
            }
            FieldBounds::Points(_) => {
                out.push(FieldBounds::All);
                walking = false;
                continue;
            }
            _ => walking = false,
        }
        out.push(bounds);
    }
    out
}

/// The bounds of a hashed field: the hashes of its points, in key order (a hashed index
/// holds no order of the values, so a range reads all of it).
fn hash_bounds(bounds: FieldBounds) -> FieldBounds {
    let FieldBounds::Points(values) = bounds else { return FieldBounds::All };
    let mut hashes: Vec<i64> =
        values.iter().filter_map(|v| bunko_query::mongo_index::hashed(v).as_i64()).collect();
    hashes.sort_unstable();
    hashes.dedup();
    FieldBounds::Points(hashes.into_iter().map(Value::from).collect())
}

/// The bounds of one field (`collated`: strings are sort keys, which a regex's prefix
/// does not bound).
fn bounds_of(conds: &[&Cond], collated: bool) -> FieldBounds {
    let bounds = single_bounds(conds, collated);
    if !matches!(bounds, FieldBounds::All) || collated {
        return bounds;
    }
    conds.iter().find_map(|c| union_bounds(c)).unwrap_or(FieldBounds::All)
}

/// The union a one-path `$or` ([`one_path_or`]) bounds the field to, if every branch
/// bounds it.
fn union_bounds(cond: &Cond) -> Option<FieldBounds> {
    let Cond::ElemMatch(node) = cond else { return None };
    let Node::Or(branches) = node.as_ref() else { return None };
    let mut parts = Vec::new();
    for branch in branches {
        let Node::Field(path, cond) = branch else { return None };
        if !path.is_root() {
            return None;
        }
        match single_bounds(&[cond], false) {
            FieldBounds::All => return None,
            part => parts.push(part),
        }
    }
    let low = |b: &FieldBounds| match b {
        FieldBounds::Points(values) => values.first().cloned(),
        FieldBounds::Range { lower, .. } => lower.as_ref().map(|(v, _)| v.clone()),
        _ => None,
    };
    parts.sort_by(|a, b| match (low(a), low(b)) {
        (Some(a), Some(b)) => bunko_query::bson_order::compare(&a, &b),
        (a, b) => a.is_some().cmp(&b.is_some()),
    });
    Some(FieldBounds::Union(parts))
}

fn single_bounds(conds: &[&Cond], collated: bool) -> FieldBounds {
    let point = |v: &Value| !v.is_array();
    for cond in conds {
        match cond {
            Cond::Eq(v) if point(v) => return FieldBounds::Points(vec![v.clone()]),
            Cond::In(vs) if !vs.is_empty() && vs.iter().all(point) => {
                let mut vs = vs.clone();
                vs.sort_by(bunko_query::bson_order::compare);
                // One point per key: numbers MongoDB tells apart may share a key.
                vs.dedup_by(|a, b| key_of(a) == key_of(b));
                return FieldBounds::Points(vs);
            }
            _ => {}
        }
    }
    let mut range: Option<FieldBounds> = None;
    let sides = |cond: &Cond| -> Vec<(Value, bool, bool)> {
        match cond {
            Cond::Gt(v) => vec![(v.clone(), true, false)],
            Cond::Gte(v) => vec![(v.clone(), true, true)],
            Cond::Lt(v) => vec![(v.clone(), false, false)],
            Cond::Lte(v) => vec![(v.clone(), false, true)],
            Cond::Regex(_) if collated => Vec::new(),
            Cond::Regex(pattern) => prefix_bounds(pattern.literal_prefix()),
            _ => Vec::new(),
        }
    };
    for (value, lower, inclusive) in conds.iter().flat_map(|c| sides(c)) {
        let value = &value;
        let c = class(value);
        if !matches!(c, Class::Number | Class::String | Class::Date | Class::ObjectId) {
            continue;
        }
        let (mut lo, mut hi) = match &range {
            Some(FieldBounds::Range { lower, upper, class }) if *class == c => {
                (lower.clone(), upper.clone())
            }
            Some(_) => continue,
            None => (None, None),
        };
        let bound = Some((value.clone(), inclusive));
        if lower {
            lo = bound;
        } else {
            hi = bound;
        }
        range = Some(FieldBounds::Range { lower: lo, upper: hi, class: c });
    }
    range.or_else(|| conds.iter().find_map(|c| type_bounds(c))).unwrap_or(FieldBounds::All)
}

/// A `$type` as the whole range of its type class in the index, as MongoDB bounds it (a
/// numeric type reads every number, `[-inf.0, inf.0]`; the filter keeps that type's); types
/// whose keys are not one class range (`array`, `null`, `object`, …) bound nothing.
fn type_bounds(cond: &Cond) -> Option<FieldBounds> {
    let Cond::Type(alias) = cond else { return None };
    let class = match alias.as_str() {
        "number" | "int" | "long" | "double" | "decimal" => Class::Number,
        "string" => Class::String,
        "date" => Class::Date,
        "objectId" => Class::ObjectId,
        "bool" => Class::Bool,
        "binData" => Class::BinData,
        "timestamp" => Class::Timestamp,
        _ => return None,
    };
    Some(FieldBounds::Range { lower: None, upper: None, class })
}

/// The range of strings an anchored regex (`/^abc/`, no `i` or `m` flag) can match: from
/// its literal prefix (included) to the prefix with its last character incremented
/// (excluded), as MongoDB bounds it (`["abc", "abd")`). Strings order by bytes, which is
/// code point order in UTF-8. No prefix: no bounds.
fn prefix_bounds(prefix: Option<&str>) -> Vec<(Value, bool, bool)> {
    let Some(prefix) = prefix else { return Vec::new() };
    let mut lower = vec![(Value::String(prefix.to_string()), true, true)];
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        let next = (u32::from(last) + 1..=u32::from(char::MAX)).find_map(char::from_u32);
        if let Some(next) = next {
            chars.push(next);
            lower.push((Value::String(chars.into_iter().collect()), false, false));
            break;
        }
    }
    lower
}

/// The storage ranges of the bounds, in key order.
fn storage_ranges(base: &[u8], bounds: &[FieldBounds]) -> Vec<Range> {
    let mut prefixes = vec![base.to_vec()];
    for b in bounds {
        match b {
            FieldBounds::Points(values) => {
                prefixes = prefixes
                    .iter()
                    .flat_map(|p| {
                        values.iter().map(move |v| {
                            let mut key = p.clone();
                            encode(v, &mut key);
                            key
                        })
                    })
                    .collect();
            }
            FieldBounds::Range { lower, upper, class } => {
                return prefixes.iter().map(|p| bounded(p, lower, upper, *class)).collect();
            }
            FieldBounds::Union(parts) => {
                let mut ranges: Vec<Range> = prefixes
                    .iter()
                    .flat_map(|p| {
                        parts.iter().flat_map(|part| storage_ranges(p, std::slice::from_ref(part)))
                    })
                    .collect();
                ranges.sort_by(|a, b| start_of(a).cmp(&start_of(b)));
                return ranges;
            }
            FieldBounds::All => break,
        }
    }
    prefixes.iter().map(|p| prefix_range(p)).collect()
}

/// The part of storage range `a` within `b` (`None`: none).
fn intersect(a: &Range, b: &Range) -> Option<Range> {
    // A bound's key, and whether it is excluded; `None`: unbounded.
    let key = |b: &Bound<Vec<u8>>| match b {
        Bound::Included(k) => Some((k.clone(), false)),
        Bound::Excluded(k) => Some((k.clone(), true)),
        Bound::Unbounded => None,
    };
    // The later start (at one key, an excluded start is the later one).
    let start = match (key(&a.0), key(&b.0)) {
        (Some(x), Some(y)) if x < y => b.0.clone(),
        (None, _) => b.0.clone(),
        _ => a.0.clone(),
    };
    // The earlier end (at one key, an excluded end is the earlier one).
    let end_key = |b: &Bound<Vec<u8>>| key(b).map(|(k, excluded)| (k, !excluded));
    let end = match (end_key(&a.1), end_key(&b.1)) {
        (Some(x), Some(y)) if y < x => b.1.clone(),
        (None, _) => b.1.clone(),
        _ => a.1.clone(),
    };
    let empty = match (&start, &end) {
        (Bound::Included(s), Bound::Included(e)) => s > e,
        (Bound::Included(s) | Bound::Excluded(s), Bound::Included(e) | Bound::Excluded(e)) => {
            s >= e
        }
        _ => false,
    };
    (!empty).then_some((start, end))
}

/// A value's index key.
fn key_of(value: &Value) -> Vec<u8> {
    let mut key = Vec::new();
    encode(value, &mut key);
    key
}

/// A range's start key (`Unbounded` first).
fn start_of(range: &Range) -> Option<&Vec<u8>> {
    match &range.0 {
        Bound::Included(k) | Bound::Excluded(k) => Some(k),
        Bound::Unbounded => None,
    }
}

fn bounded(
    prefix: &[u8],
    lower: &Option<(Value, bool)>,
    upper: &Option<(Value, bool)>,
    class: Class,
) -> Range {
    let at = |v: &Value| {
        let mut key = prefix.to_vec();
        encode(v, &mut key);
        key
    };
    let class_start = [prefix, &[class as u8 + 1]].concat();
    // Keys hold numbers as doubles, which numbers MongoDB tells apart may share (int64s
    // past 2^53, a Decimal128 and its nearest double): an open numeric bound keeps the
    // key of its value, and the documents read are matched exactly again.
    let open = |inclusive: bool| inclusive || class == Class::Number;
    let start = match lower {
        Some((v, inclusive)) if open(*inclusive) => Bound::Included(at(v)),
        Some((v, _)) => prefix_range(&at(v)).1,
        None => Bound::Included(class_start.clone()),
    };
    let end = match upper {
        Some((v, inclusive)) if open(*inclusive) => prefix_range(&at(v)).1,
        Some((v, _)) => Bound::Excluded(at(v)),
        None => prefix_range(&class_start).1,
    };
    (start, end)
}

/// One field's bounds in MongoDB's explain notation.
fn bounds_text(b: &FieldBounds) -> Vec<String> {
    let show = |v: &Value| match v.as_str().and_then(collation::sort_key) {
        Some(key) => {
            let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
            format!("CollationKey(0x{hex})")
        }
        None => v.to_string(),
    };
    match b {
        FieldBounds::Points(values) => {
            values.iter().map(|v| format!("[{}, {}]", show(v), show(v))).collect()
        }
        FieldBounds::Range { lower, upper, class } => {
            let (lo, lo_in) =
                lower.as_ref().map_or((class_end(*class, false), true), |(v, i)| (show(v), *i));
            // Strings end before `{}` (objects), which MongoDB shows excluded.
            let open_end = (class_end(*class, true), *class != Class::String);
            let (hi, hi_in) = upper.as_ref().map_or(open_end, |(v, i)| (show(v), *i));
            let open = if lo_in { "[" } else { "(" };
            let close = if hi_in { "]" } else { ")" };
            vec![format!("{open}{lo}, {hi}{close}")]
        }
        FieldBounds::Union(parts) => parts.iter().flat_map(bounds_text).collect(),
        FieldBounds::All => vec!["[MinKey, MaxKey]".to_string()],
    }
}

fn class_end(class: Class, upper: bool) -> String {
    match (class, upper) {
        (Class::Number, false) => "-inf.0".into(),
        (Class::Number, true) => "inf.0".into(),
        (Class::String, false) => "\"\"".into(),
        (Class::String, true) => "{}".into(),
        (_, false) => "MinKey".into(),
        (_, true) => "MaxKey".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intersected_ranges_keep_the_inner_bounds() {
        let k = |b: &[u8]| b.to_vec();
        let a: Range = (Bound::Included(k(b"b")), Bound::Excluded(k(b"m")));
        let b: Range = (Bound::Excluded(k(b"b")), Bound::Unbounded);
        assert_eq!(intersect(&a, &b), Some((Bound::Excluded(k(b"b")), Bound::Excluded(k(b"m")))));
        let c: Range = (Bound::Unbounded, Bound::Included(k(b"c")));
        assert_eq!(intersect(&a, &c), Some((Bound::Included(k(b"b")), Bound::Included(k(b"c")))));
        let d: Range = (Bound::Included(k(b"m")), Bound::Unbounded);
        assert_eq!(intersect(&a, &d), None, "the end is excluded");
        let e: Range = (Bound::Unbounded, Bound::Unbounded);
        assert_eq!(intersect(&e, &a), Some(a.clone()));
    }
}
