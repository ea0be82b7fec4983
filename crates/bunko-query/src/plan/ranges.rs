//! Usability and key ranges of one JSON index (CouchDB's `mango_idx_view`): which indexed
//! fields the selector requires, whether the sort follows the index order, and the ranges
//! an equality prefix plus one bounded field give.

use serde_json::{Value, json};

use super::IndexInfo;
use crate::path::FieldPath;
use crate::selector::{Cond, Node, Selector};

/// The most ranges one query may scan (each `$in` value multiplies them).
pub const MAX_RANGES: usize = 256;

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

/// How good an index is for a query; compared field by field in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Score {
    pub eq_fields: usize,
    pub has_range: bool,
    pub sorted: bool,
    pub fewer_fields: std::cmp::Reverse<usize>,
}

/// The conditions of the top-level `$and`, by field path; conditions inside an
/// `$elemMatch`/`$allMatch` on `a` are filed under `a.x`.
pub(super) fn top_level(root: &Node) -> Vec<(FieldPath, Cond)> {
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

pub(super) fn conds_on<'a>(conds: &'a [(FieldPath, Cond)], path: &FieldPath) -> Vec<&'a Cond> {
    conds.iter().filter(|(p, _)| p == path).map(|(_, c)| c).collect()
}

pub(super) fn usable(
    index: &IndexInfo,
    selector: &Selector,
    conds: &[(FieldPath, Cond)],
    sort: &[FieldPath],
) -> Result<(), &'static str> {
    for field in &index.fields {
        if sort.contains(field) || field.is_id() || field.segments() == ["_rev"] {
            continue;
        }
        let in_elem_match =
            conds_on(conds, field).iter().any(|c| !matches!(c, Cond::Exists(false)));
        if !in_elem_match && !selector.implies_exists(field) {
            return Err("field_mismatch");
        }
    }
    if !sort.is_empty() && !sort_follows(index, conds, sort) {
        return Err("sort_order_mismatch");
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
pub(super) fn ranges(
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
pub(super) fn range_bounds(conds: &[&Cond]) -> (Option<Bound>, Option<Bound>) {
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

/// How far the index's leading fields fall short of the fields the selector bounds
/// (`mango_cursor_view:composite_indexes`): the number of top-level fields with an
/// indexable condition, minus the length of the run of index fields, from the first,
/// that all have one. CouchDB's first criterion for choosing among usable indexes.
pub(super) fn prefix_difference(index: &IndexInfo, selector: &Selector) -> usize {
    let children: Vec<&Node> = match selector.root() {
        Node::And(children) => children.iter().collect(),
        other => vec![other],
    };
    let mut bounded: Vec<&FieldPath> = Vec::new();
    for child in children {
        if let Node::Field(path, cond) = child
            && indexable(cond)
            && !bounded.contains(&path)
        {
            bounded.push(path);
        }
    }
    let prefix = index.fields.iter().take_while(|f| bounded.contains(f)).count();
    bounded.len().saturating_sub(prefix)
}

/// CouchDB's view `start_key` and `end_key` for an index (`mango_idx_view:start_key`,
/// `end_key`): over the leading index fields that have an indexable top-level condition,
/// the lower bounds until the first unbounded one, and the upper bounds until the first
/// unbounded one, which (like the end of the fields) becomes `None`: CouchDB's highest key.
pub fn view_keys(fields: &[FieldPath], selector: &Selector) -> (Vec<Value>, Vec<Option<Value>>) {
    let children: Vec<&Node> = match selector.root() {
        Node::And(children) => children.iter().collect(),
        other => vec![other],
    };
    let conds_of = |field: &FieldPath| -> Vec<Cond> {
        let mut out = Vec::new();
        for child in &children {
            if let Node::Field(path, cond) = child
                && path == field
                && indexable(cond)
            {
                match cond {
                    Cond::Eq(v) => out.extend([Cond::Gte(v.clone()), Cond::Lte(v.clone())]),
                    other => out.push(other.clone()),
                }
            }
        }
        out
    };
    let mut bounds = Vec::new();
    for field in fields {
        let conds = conds_of(field);
        if conds.is_empty() {
            break;
        }
        bounds.push(range_bounds(&conds.iter().collect::<Vec<_>>()));
    }
    let start = bounds.iter().map_while(|(lo, _)| lo.as_ref().map(|b| b.value.clone())).collect();
    let mut end: Vec<Option<Value>> =
        bounds.iter().map_while(|(_, hi)| hi.as_ref().map(|b| Some(b.value.clone()))).collect();
    end.push(None);
    (start, end)
}

/// Whether CouchDB can bound an index scan with `cond` (`mango_idx_view:indexable`).
pub fn indexable(cond: &Cond) -> bool {
    matches!(
        cond,
        Cond::Eq(_)
            | Cond::Lt(_)
            | Cond::Lte(_)
            | Cond::Gt(_)
            | Cond::Gte(_)
            | Cond::BeginsWith(_)
            | Cond::Exists(_)
    )
}

/// The bounds of the conditions on `_id` for `_all_docs`: equality bounds both ends.
pub(super) fn id_bounds(conds: &[&Cond]) -> (Option<Bound>, Option<Bound>) {
    let mut with_eq: Vec<Cond> = Vec::new();
    for cond in conds {
        match cond {
            Cond::Eq(v) => with_eq.extend([Cond::Gte(v.clone()), Cond::Lte(v.clone())]),
            other => with_eq.push((*other).clone()),
        }
    }
    range_bounds(&with_eq.iter().collect::<Vec<_>>())
}

/// Strings starting with `p`: from `p` to `p` followed by U+FFFF, as CouchDB bounds
/// `$beginsWith` (`mango_selector_range`).
fn prefix_bounds(p: &str) -> (Option<Bound>, Option<Bound>) {
    let lo = Bound { value: json!(p), inclusive: true };
    let hi = Bound { value: json!(format!("{p}\u{FFFF}")), inclusive: true };
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
