//! Queries in the MongoDB dialect (the MongoDB front end's `find`, `count`, `delete`).
//!
//! Documents are seen in their MongoDB form: the stored body (JSON text with Extended JSON
//! wrappers, `bunko_doc::ejson`) with `_id` first as the MongoDB value its document id maps
//! to. The selector is matched against that form itself: numbers compare by value across
//! int32, int64, double and Decimal128, and `$type` tells the four apart.
//!
//! A filter that a MongoDB index serves is answered by an index scan ([`super::mongo_index`]);
//! otherwise an equality on a non-numeric `_id` reads that one document, and everything else
//! scans the database's documents (in `_id` order, or for a capped database without a
//! sort in natural order, `find/mongo_natural.rs`). The filter's index scan yields the
//! sort's order itself when the sort's fields follow, in the index, fields the filter fixes
//! ([`MongoScan::serve_order`]; to several points: one scan per point, merged,
//! `find/mongo_merge.rs`): it then stops at `skip + limit`. A sort that
//! no filter index serves, on
//! the leading fields of an index (all ascending or all descending), is an index scan in
//! that order which stops at `skip + limit` ([`Database::mongo_sort_plan`]); any other sort is done
//! in memory after the scan (MongoDB's "blocking sort") in MongoDB's order
//! (`bunko_query::bson_order`); a missing field sorts as `null`, an array as its smallest
//! (ascending) or largest (descending) element.

use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::Arc;

use bunko_doc::ejson;
use bunko_query::bson_order;
use bunko_query::path::Lookup;
use bunko_query::{Cond, Direction, Node, Selector};
use bunko_query::{Dialect, FieldPath};
use bunko_storage::Range;
use serde_json::{Map, Value};

use super::mongo_index::MongoScan;
use super::{ExecStats, FindQuery, FindResult};
use crate::database::Database;
use crate::index::Index;
use crate::keys::Key;
use crate::security::UserCtx;
use crate::{Error, Result};
use bunko_query::plan::{Choice, Plan};

impl Database {
    /// Runs a MongoDB-dialect query ([`FindQuery::dialect`] must be [`Dialect::Mongo`],
    /// with no Mango `sort`), ordered by `order` (per-field directions) when given, over the
    /// documents as `reader` sees them (`crate::read_gate`).
    pub fn find_mongo(
        &self,
        reader: &UserCtx,
        query: &FindQuery,
        order: &[(FieldPath, Direction)],
    ) -> Result<FindResult> {
        if query.dialect != Dialect::Mongo || !query.sort.is_empty() {
            return Err(Error::BadRequest("find_mongo needs a Mongo query".to_string()));
        }
        // A `{$natural: ±1}` sort: natural order on a capped database, else none.
        if let [(path, dir)] = order
            && path.segments() == ["$natural"]
        {
            if self.scans_naturally(&query.selector)? {
                let query = &FindQuery { use_index: None, ..query.clone() };
                return self.find_mongo_natural(reader, query, *dir == Direction::Desc);
            }
            return self.find_mongo(reader, query, &[]);
        }
        let hint = query.use_index.as_ref().map(|(name, _)| name.as_str());
        if let Some(scan) = self.mongo_access(&query.selector, hint, order)? {
            return self.find_mongo_indexed(reader, query, order, &scan);
        }
        let query = &FindQuery { use_index: None, ..query.clone() };
        if order.is_empty() && self.scans_naturally(&query.selector)? {
            return self.find_mongo_natural(reader, query, false);
        }
        if order.is_empty() {
            return self.find(reader, query);
        }
        let all = FindQuery { skip: 0, limit: usize::MAX, ..query.clone() };
        let mut result = self.find(reader, &all)?;
        let views: &[Value] = &result.docs;
        let mut order_of: Vec<usize> = (0..views.len()).collect();
        order_of.sort_by(|&a, &b| compare(order, &views[a], &views[b]));
        let mut docs: Vec<Option<Value>> = result.docs.into_iter().map(Some).collect();
        result.docs = order_of
            .into_iter()
            .skip(query.skip)
            .take(query.limit)
            .filter_map(|i| docs.get_mut(i).and_then(Option::take))
            .collect();
        result.stats.results_returned = result.docs.len() as u64;
        Ok(result)
    }
}

impl Database {
    /// [`Database::find_mongo`] over the index `scan` chose.
    pub fn find_mongo_indexed(
        &self,
        reader: &UserCtx,
        query: &FindQuery,
        order: &[(FieldPath, Direction)],
        scan: &MongoScan,
    ) -> Result<FindResult> {
        let in_order = order.is_empty() || scan.sorted;
        let sight = self.sight(reader)?;
        let covered =
            query.fields.as_deref().is_some_and(|f| scan.covered(&query.selector, f, order));
        let (mut docs, mut stats) =
            self.scan_mongo_index(query, scan, (in_order, covered), &sight)?;
        if !in_order {
            let views: &[Value] = &docs;
            let mut order_of: Vec<usize> = (0..views.len()).collect();
            order_of.sort_by(|&a, &b| compare(order, &views[a], &views[b]));
            let mut taken: Vec<Option<Value>> = docs.into_iter().map(Some).collect();
            docs = order_of
                .into_iter()
                .filter_map(|i| taken.get_mut(i).and_then(Option::take))
                .collect();
        }
        let docs: Vec<Value> = docs.into_iter().skip(query.skip).take(query.limit).collect();
        stats.results_returned = docs.len() as u64;
        // The advisor's query log: unused-index and missing-index see MongoDB queries too
        // (the unindexed ones are logged by `find`).
        self.observe_query(query, Some(&scan.index), &stats);
        Ok(answer(docs, stats, Some(scan.index.clone())))
    }
}

/// The answer of a MongoDB query that ran outside the Mango planner: its documents, what
/// it examined and the index it scanned (`None`: the documents).
pub(super) fn answer(docs: Vec<Value>, stats: ExecStats, index: Option<Arc<Index>>) -> FindResult {
    let choice = if index.is_some() { Choice::Index(0) } else { Choice::AllDocs };
    let plan =
        Plan { choice, ranges: Vec::new(), candidates: Vec::new(), use_index_ignored: false };
    FindResult {
        docs,
        bookmark: "nil".to_string(),
        warning: None,
        stats,
        index,
        plan,
        scanned: Vec::new(),
    }
}

/// The document `id` (stored body `body`) in its MongoDB form, if it matches.
pub(super) fn matching_doc(id: &str, body: &[u8], selector: &Selector) -> Option<Value> {
    matching_fields(id, body, selector, None)
}

/// [`matching_doc`] holding only `_id` and the top-level members `parse` names (all with
/// `None`): the others are skipped unparsed ([`bunko_doc::fields`]). `parse` must hold
/// every member the selector reads.
pub(super) fn matching_fields(
    id: &str,
    body: &[u8],
    selector: &Selector,
    parse: Option<&[String]>,
) -> Option<Value> {
    let mut doc = Map::new();
    doc.insert("_id".to_string(), ejson::value_to_json(&ejson::id_value(id)));
    let fields = match parse {
        Some(names) => bunko_doc::fields::parse_fields(body, names),
        None => match serde_json::from_slice::<Value>(body) {
            Ok(Value::Object(fields)) => Some(fields),
            _ => None,
        },
    };
    doc.extend(fields.unwrap_or_default());
    let doc = Value::Object(doc);
    selector.matches(&doc, Dialect::Mongo).then_some(doc)
}

/// The top-level members to parse for a query over `selector` sorted by `order` whose
/// caller needs only `wanted` (`None`: the whole document, or a selector that may read it).
pub(super) fn parse_list(
    selector: &Selector,
    order: &[(FieldPath, Direction)],
    wanted: Option<&[String]>,
) -> Option<Vec<String>> {
    let mut names = selector.reads()?;
    let sorted = order.iter().filter_map(|(path, _)| path.segments().first());
    for name in wanted?.iter().chain(sorted) {
        if !names.contains(name) {
            names.push(name.clone());
        }
    }
    Some(names)
}

/// The one document an `_id` equality names (strings and non-numeric values only: numbers
/// of different types are equal in MongoDB but map to different document ids).
pub(super) fn id_range(db: u64, selector: &Selector) -> Option<Range> {
    let id_eq = |node: &Node| match node {
        Node::Field(path, Cond::Eq(value))
            if path.is_id() && bson_order::class(value) != bson_order::Class::Number =>
        {
            Some(ejson::doc_id(&ejson::value_from_json(value)))
        }
        _ => None,
    };
    let id = match selector.root() {
        Node::And(children) => children.iter().find_map(id_eq),
        other => id_eq(other),
    }?;
    let key = Key::Doc(db, &id).encode();
    Some((Bound::Included(key.clone()), Bound::Included(key)))
}

/// Orders two documents by `order`; a missing field sorts as `null`, and an array as its
/// smallest element ascending or its largest descending (as MongoDB sorts arrays).
pub fn compare(order: &[(FieldPath, Direction)], a: &Value, b: &Value) -> Ordering {
    for (path, dir) in order {
        let get = |doc| match path.get(doc) {
            Lookup::Found(Value::Array(items)) if !items.is_empty() => {
                let pick = items.iter().reduce(|x, y| {
                    let y_wins = match dir {
                        Direction::Asc => bson_order::compare(y, x).is_lt(),
                        Direction::Desc => bson_order::compare(y, x).is_gt(),
                    };
                    if y_wins { y } else { x }
                });
                pick.cloned().unwrap_or(Value::Null)
            }
            Lookup::Found(v) => v.clone(),
            Lookup::NotFound | Lookup::BadPath => Value::Null,
        };
        let ord = bson_order::compare(&get(a), &get(b));
        let ord = if *dir == Direction::Desc { ord.reverse() } else { ord };
        if ord.is_ne() {
            return ord;
        }
    }
    Ordering::Equal
}
