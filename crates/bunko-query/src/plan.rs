//! The planner: which index answers a selector, and which key ranges of it to scan.
//!
//! An index is **usable** when every document the selector can match has an entry in it:
//! each indexed field (other than sort fields and `_id`/`_rev`) must be required by a
//! top-level condition (every condition but `$exists: false` requires its field), and the
//! index must have no partial filter unless `use_index` names it. `sort` must follow the
//! index order after its equality fields.
//!
//! **Ranges** come from the index's fields in order: an equality (`$eq`, or each value of
//! an `$in`) fixes a field and moves to the next; a range (`$gt`…`$lte`, `$beginsWith`, a
//! `$regex` with a literal prefix) bounds the field and ends the walk. A condition inside
//! `$elemMatch`/`$allMatch` on an array `a` bounds the index field `a.x` it names, because
//! multikey entries pair the fields of one array element.
//!
//! Among usable indexes the planner prefers the longest equality prefix, then a range on
//! the next field, then one that gives the sort order, then fewer fields. The result is a
//! [`Plan`]; every candidate carries the reason it lost, for `_explain`.

use serde_json::{Value, json};

use crate::path::FieldPath;
use crate::selector::{Cond, Node, Selector};

/// The most ranges one query may scan (each `$in` value multiplies them).
pub const MAX_RANGES: usize = 256;

/// What the planner needs to know about one index.
#[derive(Debug, Clone)]
pub struct IndexInfo {
    pub ddoc: String,
    pub name: String,
    pub fields: Vec<FieldPath>,
    pub has_partial_filter: bool,
}

/// One bound of a range on the field after the equality prefix.
#[derive(Debug, Clone, PartialEq)]
pub struct Bound {
    pub value: Value,
    pub inclusive: bool,
}

/// A contiguous part of an index: entries whose first fields equal `eq`, and whose next
/// field lies between `lower` and `upper` (unbounded where `None`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct KeyRange {
    pub eq: Vec<Value>,
    pub lower: Option<Bound>,
    pub upper: Option<Bound>,
}

impl KeyRange {
    pub fn to_json(&self) -> Value {
        let bound = |b: &Option<Bound>| match b {
            Some(b) => json!({"value": b.value, "inclusive": b.inclusive}),
            None => Value::Null,
        };
        json!({"eq": self.eq, "lower": bound(&self.lower), "upper": bound(&self.upper)})
    }
}

/// Why an index was not chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    /// Some indexed field is not required by the selector (CouchDB's `field_mismatch`).
    FieldMismatch,
    /// The sort cannot follow the index order (`sort_order_mismatch`).
    SortOrderMismatch,
    /// The index has a partial filter and `use_index` does not name it.
    PartialFilter,
    /// Another usable index ranks higher (`less_overlap`/`too_many_fields` in CouchDB).
    Outranked,
    /// `use_index` names another index.
    NotRequested,
}

impl Rejection {
    pub fn name(&self) -> &'static str {
        match self {
            Rejection::FieldMismatch => "field_mismatch",
            Rejection::SortOrderMismatch => "sort_order_mismatch",
            Rejection::PartialFilter => "excluded_by_partial_filter",
            Rejection::Outranked => "less_overlap",
            Rejection::NotRequested => "unfavored_index",
        }
    }
}

/// The planner's answer.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The chosen index (position in the list given), or `None`: scan every document.
    pub index: Option<usize>,
    pub ranges: Vec<KeyRange>,
    /// Every index considered: position, and why it lost (`None` for the chosen one).
    pub candidates: Vec<(usize, Option<Rejection>)>,
    /// Whether the index order gives the requested sort.
    pub sorted: bool,
}

/// Plans `selector` over `indexes`; `sort` is the list of sort fields (one direction).
/// `use_index` restricts the choice to one design document (and optionally one name).
pub fn plan(
    selector: &Selector,
    sort: &[FieldPath],
    indexes: &[IndexInfo],
    use_index: Option<(&str, Option<&str>)>,
) -> Plan {
    let conds = top_level(selector.root());
    let mut best: Option<(usize, Score, Vec<KeyRange>, bool)> = None;
    let mut candidates = Vec::new();
    for (i, index) in indexes.iter().enumerate() {
        let named =
            use_index.is_some_and(|(d, n)| index.ddoc == d && n.is_none_or(|n| n == index.name));
        if use_index.is_some() && !named {
            candidates.push((i, Some(Rejection::NotRequested)));
            continue;
        }
        if index.has_partial_filter && !named {
            candidates.push((i, Some(Rejection::PartialFilter)));
            continue;
        }
        if let Err(why) = usable(index, &conds, sort) {
            candidates.push((i, Some(why)));
            continue;
        }
        let (ranges, score) = ranges(index, &conds, sort);
        let sorted = score.sorted;
        candidates.push((i, None));
        if best.as_ref().is_none_or(|(_, s, _, _)| score > *s) {
            best = Some((i, score, ranges, sorted));
        }
    }
    let chosen = best.as_ref().map(|(i, ..)| *i);
    for (i, why) in &mut candidates {
        if why.is_none() && Some(*i) != chosen {
            *why = Some(Rejection::Outranked);
        }
    }
    match best {
        Some((i, _, ranges, sorted)) => Plan { index: Some(i), ranges, candidates, sorted },
        None => Plan { index: None, ranges: Vec::new(), candidates, sorted: false },
    }
}

/// How good an index is for a query; compared field by field in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Score {
    eq_fields: usize,
    has_range: bool,
    sorted: bool,
    fewer_fields: std::cmp::Reverse<usize>,
}

/// The conditions of the top-level `$and`, by field path; conditions inside an
/// `$elemMatch`/`$allMatch` on `a` are filed under `a.x`.
fn top_level(root: &Node) -> Vec<(FieldPath, Cond)> {
    let mut out = Vec::new();
    let nodes: Vec<&Node> = match root {
        Node::And(children) => children.iter().collect(),
        other => vec![other],
    };
    for node in nodes {
        if let Node::Field(path, cond) = node {
            out.push((path.clone(), cond.clone()));
            if let Cond::ElemMatch(inner) | Cond::AllMatch(inner) = cond {
                for (sub, c) in top_level(inner) {
                    let joined = path.segments().iter().chain(sub.segments());
                    out.push((FieldPath::from_segments(joined), c));
                }
            }
        }
    }
    out
}

fn conds_on<'a>(conds: &'a [(FieldPath, Cond)], path: &FieldPath) -> Vec<&'a Cond> {
    conds.iter().filter(|(p, _)| p == path).map(|(_, c)| c).collect()
}

fn usable(
    index: &IndexInfo,
    conds: &[(FieldPath, Cond)],
    sort: &[FieldPath],
) -> Result<(), Rejection> {
    for field in &index.fields {
        if sort.contains(field) || field.is_id() || field.segments() == ["_rev"] {
            continue;
        }
        let required = conds_on(conds, field).iter().any(|c| !matches!(c, Cond::Exists(false)));
        if !required {
            return Err(Rejection::FieldMismatch);
        }
    }
    if !sort.is_empty() && !sort_follows(index, conds, sort) {
        return Err(Rejection::SortOrderMismatch);
    }
    Ok(())
}

/// The sort fields are the index fields after some equality-fixed leading fields.
fn sort_follows(index: &IndexInfo, conds: &[(FieldPath, Cond)], sort: &[FieldPath]) -> bool {
    (0..=index.fields.len()).any(|skip| {
        let fixed =
            index.fields[..skip].iter().all(|f| conds_on(conds, f).iter().any(|c| is_eq(c)));
        fixed && index.fields[skip..].starts_with(sort)
    })
}

fn is_eq(cond: &Cond) -> bool {
    matches!(cond, Cond::Eq(_))
}

/// The key ranges of `index` for the conditions, and the index's score.
fn ranges(
    index: &IndexInfo,
    conds: &[(FieldPath, Cond)],
    sort: &[FieldPath],
) -> (Vec<KeyRange>, Score) {
    let mut prefixes: Vec<Vec<Value>> = vec![Vec::new()];
    let mut eq_fields = 0;
    let mut bounds = (None, None);
    for field in &index.fields {
        let on = conds_on(conds, field);
        let eq = on.iter().find_map(|c| match c {
            Cond::Eq(v) => Some(vec![v.clone()]),
            Cond::In(vs) if !vs.is_empty() && vs.len() * prefixes.len() <= MAX_RANGES => {
                Some(vs.clone())
            }
            _ => None,
        });
        if let Some(values) = eq {
            prefixes = prefixes
                .iter()
                .flat_map(|p| values.iter().map(move |v| [p.clone(), vec![v.clone()]].concat()))
                .collect();
            eq_fields += 1;
            continue;
        }
        bounds = range_bounds(&on);
        break;
    }
    let has_range = bounds.0.is_some() || bounds.1.is_some();
    let ranges = prefixes
        .into_iter()
        .map(|eq| KeyRange { eq, lower: bounds.0.clone(), upper: bounds.1.clone() })
        .collect();
    let sorted = sort.is_empty() || sort_follows(index, conds, sort);
    let score =
        Score { eq_fields, has_range, sorted, fewer_fields: std::cmp::Reverse(index.fields.len()) };
    (ranges, score)
}

/// The tightest lower and upper bounds the range conditions give.
fn range_bounds(conds: &[&Cond]) -> (Option<Bound>, Option<Bound>) {
    let mut lower: Option<Bound> = None;
    let mut upper: Option<Bound> = None;
    let bound = |v: &Value, inclusive| Some(Bound { value: v.clone(), inclusive });
    for cond in conds {
        let (lo, hi) = match cond {
            Cond::Gt(v) => (bound(v, false), None),
            Cond::Gte(v) => (bound(v, true), None),
            Cond::Lt(v) => (None, bound(v, false)),
            Cond::Lte(v) => (None, bound(v, true)),
            Cond::BeginsWith(p) => prefix_bounds(p),
            Cond::Regex(re) => match re.literal_prefix() {
                Some(p) if !p.is_empty() => prefix_bounds(p),
                _ => (None, None),
            },
            _ => (None, None),
        };
        if let Some(lo) = lo
            && lower.as_ref().is_none_or(|l| tighter_lower(&lo, l))
        {
            lower = Some(lo);
        }
        if let Some(hi) = hi
            && upper.as_ref().is_none_or(|u| tighter_upper(&hi, u))
        {
            upper = Some(hi);
        }
    }
    (lower, upper)
}

/// Strings starting with `p`: from `p` to `p` followed by the highest code point, as
/// CouchDB bounds `$beginsWith`.
fn prefix_bounds(p: &str) -> (Option<Bound>, Option<Bound>) {
    let lo = Bound { value: json!(p), inclusive: true };
    let hi = Bound { value: json!(format!("{p}\u{10FFFF}")), inclusive: true };
    (Some(lo), Some(hi))
}

fn tighter_lower(a: &Bound, b: &Bound) -> bool {
    match crate::cmp::collate(&a.value, &b.value) {
        std::cmp::Ordering::Greater => true,
        std::cmp::Ordering::Equal => !a.inclusive,
        std::cmp::Ordering::Less => false,
    }
}

fn tighter_upper(a: &Bound, b: &Bound) -> bool {
    match crate::cmp::collate(&a.value, &b.value) {
        std::cmp::Ordering::Less => true,
        std::cmp::Ordering::Equal => !a.inclusive,
        std::cmp::Ordering::Greater => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(name: &str, fields: &[&str], partial: bool) -> IndexInfo {
        IndexInfo {
            ddoc: format!("_design/{name}"),
            name: name.to_string(),
            fields: fields.iter().filter_map(|f| FieldPath::parse(f).ok()).collect(),
            has_partial_filter: partial,
        }
    }

    fn plan_for(selector: Value, sort: &[&str], indexes: &[IndexInfo]) -> Plan {
        let selector = Selector::parse(&selector).unwrap_or_else(|e| panic!("{e}"));
        let sort: Vec<FieldPath> = sort.iter().filter_map(|f| FieldPath::parse(f).ok()).collect();
        plan(&selector, &sort, indexes, None)
    }

    #[test]
    fn the_longest_equality_prefix_wins_and_bounds_the_next_field() {
        let indexes = [
            index("device", &["deviceID"], false),
            index("device-ts", &["deviceID", "ts"], false),
            index("ts", &["ts"], false),
        ];
        let selector = json!({"deviceID": "device-1", "ts": {"$gt": "2018", "$lte": "2019"}});
        let plan = plan_for(selector, &[], &indexes);
        assert_eq!(plan.index, Some(1));
        assert_eq!(
            plan.ranges,
            vec![KeyRange {
                eq: vec![json!("device-1")],
                lower: Some(Bound { value: json!("2018"), inclusive: false }),
                upper: Some(Bound { value: json!("2019"), inclusive: true }),
            }]
        );
        assert_eq!(plan.candidates[0], (0, Some(Rejection::Outranked)));
    }

    #[test]
    fn an_index_on_a_field_the_selector_does_not_require_is_unusable() {
        let indexes = [index("a", &["a"], false), index("p", &["b"], true)];
        let plan = plan_for(json!({"b": 1, "a": {"$exists": false}}), &[], &indexes);
        assert_eq!(plan.index, None);
        assert_eq!(plan.candidates[0].1, Some(Rejection::FieldMismatch));
        assert_eq!(plan.candidates[1].1, Some(Rejection::PartialFilter));
    }

    #[test]
    fn in_and_elem_match_become_ranges_of_a_multikey_index() {
        let links = [index("links", &["links.target", "links.doc_type"], false)];
        let selector = json!({"links": {"$elemMatch": {"target": "S12345", "doc_type": {"$in": ["class", "student"]}}}});
        let plan = plan_for(selector, &[], &links);
        assert_eq!(plan.index, Some(0));
        let eqs: Vec<Vec<Value>> = plan.ranges.iter().map(|r| r.eq.clone()).collect();
        assert_eq!(
            eqs,
            vec![vec![json!("S12345"), json!("class")], vec![json!("S12345"), json!("student")]]
        );
    }

    #[test]
    fn sort_needs_the_index_order_after_fixed_fields() {
        let indexes = [index("dt", &["deviceID", "ts"], false)];
        let ok = plan_for(json!({"deviceID": "d"}), &["ts"], &indexes);
        assert!(ok.index == Some(0) && ok.sorted);
        let bad = plan_for(json!({"deviceID": {"$gt": "d"}, "ts": {"$gt": 0}}), &["ts"], &indexes);
        assert_eq!(bad.index, None);
        assert_eq!(bad.candidates[0].1, Some(Rejection::SortOrderMismatch));
    }
}
