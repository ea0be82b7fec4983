//! Counting from a MongoDB index without reading documents (MongoDB's `COUNT_SCAN`): a
//! `count` whose filter the index bounds answer exactly counts the entries within them.
//!
//! A filter is answered exactly ([`MongoScan::counts_exactly`]) when it is a conjunction of
//! conditions on index fields, each of which the field's bounds say whole: one equality or
//! `$in` of strings, numbers, ObjectIds, booleans or dates (never `null`, which a missing
//! field shares, nor arrays or objects), or at most one lower and one upper `$gt`/`$gte`/
//! `$lt`/`$lte` of the range's type. No condition may sit on a multikey, hashed, or
//! unbounded (past the walk) field. A multikey field without conditions is fine: the
//! entries of one document are then counted once.
//!
//! Keys hold numbers as order-preserving doubles (`bunko_query::mongo_index`), so two
//! numbers MongoDB tells apart (a Decimal128 and the double nearest it, int64s past 2^53)
//! may share a key. A count with a numeric bound therefore checks each entry's kept values
//! (`crate::index::mongo::covered_fields`) against the filter, still without reading a
//! document; an index whose entries keep none (collated, or built before they did) is
//! then not counted from. Every other count reads keys only.

use std::collections::HashSet;

use bunko_query::bson_order::{Class, class};
use bunko_query::{Cond, Dialect, Node, Selector};
use bunko_storage::Iter;
use serde_json::{Value, json};

use super::ExecStats;
use super::mongo_index::{FieldBounds, MongoScan};
use crate::Result;
use crate::database::Database;
use crate::index::{entries, mongo};
use crate::security::UserCtx;

/// Entries read per storage page.
const PAGE: usize = 512;

/// How a count reads the entries within the bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CountCheck {
    /// Every entry counts.
    Keys,
    /// Each entry's kept values are matched (a numeric bound).
    Entries,
}

/// One interval of index keys, as MongoDB's `COUNT_SCAN` shows it: the values per field in
/// their matching form (`{"$minKey": 1}`, `{"$maxKey": 1}` past the bounded fields).
#[derive(Debug, Clone, PartialEq)]
pub struct Interval {
    pub start: Vec<(String, Value)>,
    pub start_inclusive: bool,
    pub end: Vec<(String, Value)>,
    pub end_inclusive: bool,
}

impl MongoScan {
    /// How the scan counts the documents `selector` matches from its entries alone, if it
    /// can (see the module doc).
    pub fn counts_exactly(&self, selector: &Selector) -> Option<CountCheck> {
        self.exactly(selector, false)
    }

    /// Whether the bounds say `selector` whole for each entry, one of a multikey field's
    /// elements standing for the field: [`MongoScan::counts_exactly`]'s conditions, and on
    /// a multikey field one equality or `$in` (whose point bounds an element meets exactly;
    /// a range there keeps one side). A document may have several entries within them, so
    /// this does not count; it decides whether MongoDB would answer a `distinct` from the
    /// scan.
    pub fn selects_exactly(&self, selector: &Selector) -> bool {
        self.exactly(selector, true).is_some()
    }

    fn exactly(&self, selector: &Selector, multikey_points: bool) -> Option<CountCheck> {
        let spec = self.index.def.mongo.as_ref()?;
        if selector.has_predicate() {
            return None;
        }
        let nodes: Vec<&Node> = match selector.root() {
            Node::Empty => Vec::new(),
            Node::And(children) => children.iter().collect(),
            other => vec![other],
        };
        let paths = self.index.compiled.paths();
        let mut conds: Vec<Vec<&Cond>> = vec![Vec::new(); paths.len()];
        for node in nodes {
            let Node::Field(path, cond) = node else { return None };
            let i = paths.iter().position(|p| p == path)?;
            conds.get_mut(i)?.push(cond);
        }
        let meta = self.index.meta();
        let mut numeric = false;
        for (i, on) in conds.iter().enumerate().filter(|(_, c)| !c.is_empty()) {
            let multikey = meta.multikey.get(i).is_some_and(|p| !p.is_empty());
            let points = matches!(self.bounds.get(i), Some(FieldBounds::Points(_)));
            if (multikey && !(multikey_points && points)) || spec.hashed == Some(i) {
                return None;
            }
            numeric |= field_exact(self.bounds.get(i)?, on)?;
        }
        if !numeric {
            return Some(CountCheck::Keys);
        }
        let keeps = meta.covering && spec.collation.is_none() && spec.hashed.is_none();
        keeps.then_some(CountCheck::Entries)
    }

    /// The scan's bounds as one interval of keys, if they are one (MongoDB's `COUNT_SCAN`
    /// needs that; several intervals count under an `IXSCAN`).
    pub fn interval(&self) -> Option<Interval> {
        let mut out = Interval {
            start: Vec::new(),
            start_inclusive: true,
            end: Vec::new(),
            end_inclusive: true,
        };
        let mut open = false;
        for (field, bounds) in self.index.def.fields.iter().zip(&self.bounds) {
            let (lo, hi, lo_in, hi_in) = match (open, bounds) {
                (false, FieldBounds::Points(values)) if values.len() == 1 => {
                    let v = values.first()?.clone();
                    (v.clone(), v, true, true)
                }
                (false, FieldBounds::Range { lower, upper, class }) => {
                    open = true;
                    let (lo, lo_in) =
                        lower.clone().unwrap_or_else(|| (class_end(*class, false), true));
                    let end = (class_end(*class, true), *class != Class::String);
                    let (hi, hi_in) = upper.clone().unwrap_or(end);
                    (lo, hi, lo_in, hi_in)
                }
                (_, FieldBounds::All) => {
                    open = true;
                    (json!({"$minKey": 1}), json!({"$maxKey": 1}), true, true)
                }
                _ => return None,
            };
            let (lo, hi, lo_in, hi_in) =
                if field.desc { (hi, lo, hi_in, lo_in) } else { (lo, hi, lo_in, hi_in) };
            out.start.push((field.name.clone(), lo));
            out.end.push((field.name.clone(), hi));
            out.start_inclusive &= lo_in;
            out.end_inclusive &= hi_in;
        }
        Some(out)
    }
}

/// Whether the bounds of one field say `conds` whole: `Some(numeric)` when they do.
fn field_exact(bounds: &FieldBounds, conds: &[&Cond]) -> Option<bool> {
    let point = |v: &Value| {
        matches!(
            class(v),
            Class::Number | Class::String | Class::ObjectId | Class::Bool | Class::Date
        )
    };
    let numeric = |v: &Value| class(v) == Class::Number;
    match (bounds, conds) {
        (FieldBounds::Points(_), [Cond::Eq(v)]) => point(v).then(|| numeric(v)),
        (FieldBounds::Points(_), [Cond::In(vs)]) => {
            vs.iter().all(point).then(|| vs.iter().any(numeric))
        }
        (FieldBounds::Range { class: range, .. }, _) => {
            let (mut lower, mut upper) = (0, 0);
            for cond in conds {
                let v = match cond {
                    Cond::Gt(v) | Cond::Gte(v) => {
                        lower += 1;
                        v
                    }
                    Cond::Lt(v) | Cond::Lte(v) => {
                        upper += 1;
                        v
                    }
                    _ => return None,
                };
                if class(v) != *range {
                    return None;
                }
            }
            let kinds = [Class::Number, Class::String, Class::Date, Class::ObjectId];
            (lower <= 1 && upper <= 1 && kinds.contains(range)).then_some(*range == Class::Number)
        }
        _ => None,
    }
}

/// The first (`upper`: last) key of a type class, as MongoDB's bounds name it.
fn class_end(class: Class, upper: bool) -> Value {
    match (class, upper) {
        (Class::Number, false) => json!({"$numberDouble": "-Infinity"}),
        (Class::Number, true) => json!({"$numberDouble": "Infinity"}),
        (Class::String, false) => json!(""),
        (Class::String, true) => json!({}),
        (_, false) => json!({"$minKey": 1}),
        (_, true) => json!({"$maxKey": 1}),
    }
}

impl Database {
    /// Counts the documents `selector` matches from the entries of `scan`'s index alone
    /// (`None`: the scan cannot, see [`MongoScan::counts_exactly`], or `reader` sees
    /// documents only in part): `results_returned` is the count.
    pub fn count_mongo_index(
        &self,
        reader: &UserCtx,
        selector: &Selector,
        scan: &MongoScan,
    ) -> Result<Option<ExecStats>> {
        let Some(check) = scan.counts_exactly(selector) else { return Ok(None) };
        if !self.sight(reader)?.is_whole() {
            return Ok(None);
        }
        let snapshot = self.store.snapshot();
        let once = scan.index.meta().is_multikey();
        let mut seen = HashSet::new();
        let mut stats = ExecStats::default();
        for range in scan.storage_ranges(self.id()) {
            for entry in Iter::new(snapshot.clone(), range, false, PAGE) {
                let (_, value) = entry?;
                stats.keys_examined += 1;
                if check == CountCheck::Entries {
                    let Some((_, Some(fields))) = mongo::decode_entry(&value) else {
                        return Ok(None);
                    };
                    if !selector.matches(&Value::Object(fields), Dialect::Mongo) {
                        continue;
                    }
                }
                if once {
                    let Some((_, id)) = entries::decode_value(&value) else { continue };
                    if !seen.insert(id) {
                        continue;
                    }
                }
                stats.results_returned += 1;
            }
        }
        // `$indexStats` and the advisor's query log see the count as they see a find.
        let query = super::FindQuery::new(selector.clone(), Dialect::Mongo);
        self.observe_query(&query, Some(&scan.index), &stats);
        Ok(Some(stats))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exact(conds: &[Cond], bounds: &FieldBounds) -> Option<bool> {
        field_exact(bounds, &conds.iter().collect::<Vec<_>>())
    }

    #[test]
    fn only_conditions_the_bounds_say_whole_count_from_keys() {
        let points = FieldBounds::Points(vec![json!("a")]);
        assert_eq!(exact(&[Cond::Eq(json!("a"))], &points), Some(false));
        assert_eq!(exact(&[Cond::Eq(json!(5))], &points), Some(true));
        assert_eq!(exact(&[Cond::Eq(Value::Null)], &points), None);
        assert_eq!(exact(&[Cond::In(vec![json!("a"), json!(null)])], &points), None);
        assert_eq!(exact(&[Cond::Eq(json!("a")), Cond::Eq(json!("b"))], &points), None);
        let range = FieldBounds::Range {
            lower: Some((json!("a"), true)),
            upper: Some((json!("c"), false)),
            class: Class::String,
        };
        assert_eq!(exact(&[Cond::Gte(json!("a")), Cond::Lt(json!("c"))], &range), Some(false));
        assert_eq!(exact(&[Cond::Gte(json!("a")), Cond::Gt(json!("b"))], &range), None);
        assert_eq!(exact(&[Cond::Gte(json!("a")), Cond::Lt(json!(5))], &range), None);
        assert_eq!(exact(&[Cond::Ne(json!("a"))], &FieldBounds::All), None);
    }
}
