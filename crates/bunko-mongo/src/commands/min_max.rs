//! `find`'s `min` and `max`: bounds on the keys of the hinted index, `min` inclusive and
//! `max` exclusive, compared in the index's order (each field in its direction), as MongoDB
//! bounds the index scan with them. A document is returned when one of its keys in that
//! index lies within the bounds; without a `sort` the answer comes in the index's order
//! (by the document's first key within the bounds).
//!
//! Checked as MongoDB checks them: a hint is required (51173), each bound names the index's
//! fields in its order (51174, also for a string bound under a query collation), and `min`
//! must come before `max` (51175); a bound left out is the index's open end (`MinKey` /
//! `MaxKey` by direction). The bounds narrow the hinted index's scan
//! (`MongoScan::clamp_to_keys`: its leading fields that share the first one's direction),
//! and every document it finds is checked against them exactly; the `_id` index (documents
//! are stored by their document ids, whose order is not MongoDB's for numbers) is read
//! whole and filtered. An index with a collation or a hashed field is `NotImplemented`.

use std::cmp::Ordering;

use bson::{Bson, Document};
use bunko_doc::ejson;
use bunko_engine::Database;
use bunko_query::bson_order;
use serde_json::{Value, json};

use super::doc_of;
use crate::error::MongoError;

/// The bounds of a `find` and the index they bound.
pub(super) struct Bounds {
    /// The index's key pattern: field and direction.
    pattern: Vec<(String, i32)>,
    /// `None`: the `_id` index.
    index: Option<std::sync::Arc<bunko_engine::index::Index>>,
    min: Vec<Value>,
    max: Vec<Value>,
}

/// The `min`/`max` bounds of a `find` (`None` when it has neither).
pub(super) fn bounds(db: &Database, command: &Document) -> Result<Option<Bounds>, MongoError> {
    let (min, max) = (doc_of(command, "min")?, doc_of(command, "max")?);
    if min.is_empty() && max.is_empty() {
        return Ok(None);
    }
    let hint = command.get("hint").filter(|h| !matches!(h, Bson::Null));
    let natural = matches!(hint, Some(Bson::Document(h)) if h.contains_key("$natural"));
    if hint.is_none() || natural {
        return Err(MongoError::new(
            51173,
            "Location51173",
            "When using min()/max() a hint of which index to use must be provided",
        ));
    }
    let (pattern, index) = match super::indexes::hint(db, hint)? {
        None => (vec![("_id".to_string(), 1)], None),
        Some(name) => {
            let indexes = db.plannable_mongo_indexes();
            let Some(index) = indexes.into_iter().find(|i| i.def.name == name) else {
                return Err(MongoError::bad_value(
                    "error processing query: planner returned error :: caused by :: hint provided does not correspond to an existing index",
                ));
            };
            let Some(spec) = index.def.mongo.as_ref() else { return Ok(None) };
            if spec.hashed.is_some() || spec.collation.is_some() {
                return Err(MongoError::not_implemented(
                    "min/max on a hashed index or an index with a collation is not supported yet",
                ));
            }
            (spec.key.clone(), Some(index))
        }
    };
    let collated = bunko_query::collation::current().is_some();
    for bound in [&min, &max].into_iter().filter(|b| !b.is_empty()) {
        let names = bound.keys().map(String::as_str);
        let same = names.eq(pattern.iter().map(|(f, _)| f.as_str()));
        let collatable =
            |v: &Bson| matches!(v, Bson::String(_) | Bson::Document(_) | Bson::Array(_));
        if !same || (collated && bound.values().any(collatable)) {
            return Err(MongoError::new(
                51174,
                "Location51174",
                "The index chosen is not compatible with min/max",
            ));
        }
    }
    let end = |bound: &Document, low: bool| -> Vec<Value> {
        if !bound.is_empty() {
            return bound.values().map(ejson::value_to_json).collect();
        }
        let open = |dir: i32| match (low, dir > 0) {
            (true, true) | (false, false) => json!({"$minKey": 1}),
            _ => json!({"$maxKey": 1}),
        };
        pattern.iter().map(|(_, dir)| open(*dir)).collect()
    };
    let bounds = Bounds { min: end(&min, true), max: end(&max, false), pattern, index };
    if bounds.compare(&bounds.min, &bounds.max) != Ordering::Less {
        return Err(MongoError::new(
            51175,
            "Location51175",
            "The value provided for min() does not come before the value provided for max() in the hinted index",
        ));
    }
    Ok(Some(bounds))
}

impl Bounds {
    /// Two keys in the index's order.
    fn compare(&self, a: &[Value], b: &[Value]) -> Ordering {
        for ((x, y), (_, dir)) in a.iter().zip(b).zip(&self.pattern) {
            let order = bson_order::compare(x, y);
            let order = if *dir < 0 { order.reverse() } else { order };
            if order != Ordering::Equal {
                return order;
            }
        }
        Ordering::Equal
    }

    /// The first key (in index order) of `doc` (its matching form) within the bounds.
    fn first_key(&self, doc: &Value) -> Result<Option<Vec<Value>>, MongoError> {
        let keys = match &self.index {
            None => vec![vec![doc.get("_id").cloned().unwrap_or(Value::Null)]],
            Some(index) => match &index.def.mongo {
                Some(spec) => bunko_engine::index::mongo::doc_keys(
                    spec,
                    index.compiled.paths(),
                    index.compiled.partial(),
                    doc,
                )?,
                None => Vec::new(),
            },
        };
        let within = |k: &Vec<Value>| {
            self.compare(k, &self.min) != Ordering::Less
                && self.compare(k, &self.max) == Ordering::Less
        };
        Ok(keys.into_iter().filter(within).min_by(|a, b| self.compare(a, b)))
    }

    /// The documents (matching forms, in the order found) with a key within the bounds; in
    /// the index's order unless `sorted` (the `find`'s own sort then stands).
    pub(super) fn filter(&self, docs: Vec<Value>, sorted: bool) -> Result<Vec<Value>, MongoError> {
        let mut kept = Vec::new();
        for doc in docs {
            if let Some(key) = self.first_key(&doc)? {
                kept.push((key, doc));
            }
        }
        if !sorted {
            kept.sort_by(|(a, _), (b, _)| self.compare(a, b));
        }
        Ok(kept.into_iter().map(|(_, doc)| doc).collect())
    }
}

/// The answer of a `find` with bounds: what the hinted index's scan finds for `selector`
/// (sorted by `order`, if given), within the bounds, then skipped, limited and projected.
pub(super) struct Within<'a> {
    pub ns: &'a str,
    pub selector: bunko_query::Selector,
    pub order: &'a [(bunko_query::FieldPath, bunko_query::Direction)],
    pub skip: usize,
    pub limit: usize,
    pub projection: Option<crate::projection::Projection>,
    pub batch: usize,
    pub single: bool,
}

pub(super) fn find(
    ctx: &mut super::Ctx,
    db: &Database,
    command: &Document,
    bounds: Bounds,
    find: Within,
) -> Result<Document, MongoError> {
    let mut query = super::crud::mongo_query(find.selector, find.skip, find.limit);
    query.use_index = super::indexes::hint(db, command.get("hint"))?.map(|h| (h, None));
    let found = run(&super::admin::user(ctx), db, query, find.order, &bounds)?;
    let mut out = Vec::new();
    for doc in &found.docs {
        let Some(map) = doc.as_object() else { continue };
        let doc = ejson::from_json(map);
        out.push(match &find.projection {
            Some(p) => p.apply(&doc)?,
            None => doc,
        });
    }
    Ok(super::cursor::answer(ctx, find.ns, out, find.batch, find.single))
}

/// Runs `query` (hinted, its `skip` and `limit` applied after the bounds) over the hinted
/// index within `bounds`: the documents (matching forms) and what the scan examined.
pub(super) fn run(
    user: &bunko_engine::security::UserCtx,
    db: &Database,
    query: bunko_engine::find::FindQuery,
    order: &[(bunko_query::FieldPath, bunko_query::Direction)],
    bounds: &Bounds,
) -> Result<bunko_engine::find::FindResult, MongoError> {
    let (skip, limit) = (query.skip, query.limit);
    let query = bunko_engine::find::FindQuery { skip: 0, limit: usize::MAX, ..query };
    let hint = query.use_index.as_ref().map(|(h, _)| h.as_str());
    let scan = match (&bounds.index, hint) {
        (Some(_), Some(hint)) => db.mongo_plan(&query.selector, Some(hint))?,
        _ => None,
    };
    let mut found = match scan {
        Some(mut scan) => {
            scan.clamp_to_keys(db.id(), &bounds.min, &bounds.max);
            db.find_mongo_indexed(user, &query, order, &scan)?
        }
        None => db.find_mongo(user, &query, order)?,
    };
    let docs = bounds.filter(std::mem::take(&mut found.docs), !order.is_empty())?;
    found.docs = docs.into_iter().skip(skip).take(limit).collect();
    found.stats.results_returned = found.docs.len() as u64;
    Ok(found)
}
