//! The planner: which index answers a selector, and which key ranges of it to scan.
//!
//! The steps follow CouchDB's `mango_idx:get_usable_indexes` and `mango_cursor:create`,
//! so that `_explain` can report every index the way CouchDB does:
//!
//! 1. **Considered** indexes: every JSON index without a partial filter, plus the ones
//!    `use_index` names (a partial index is used only when asked for by name); the
//!    others are reported as `is_partial`. The special `_all_docs` index (documents in
//!    id order) is always considered.
//! 2. **Usable** indexes (`ranges::usable`): every indexed field (other than sort
//!    fields and `_id`/`_rev`) is required by the selector, and `sort` follows the index
//!    order after its equality fields. `_all_docs` is usable without a sort, or for a
//!    sort on `_id` when the selector bounds `_id`. No usable index: a `_find` fails with
//!    `no_usable_index`, an `_explain` shows `index: null`.
//! 3. **Filtered** by `use_index`; when it names nothing usable, the query falls back
//!    to every usable index (with a warning) if `allow_fallback` is true or more than
//!    `_all_docs` is usable, and fails with `invalid_index` otherwise.
//! 4. JSON indexes are **favoured** over `_all_docs`. Among them the planner prefers the
//!    longest equality prefix, then a range on the next field, then one that gives the
//!    sort order, then fewer fields, then the first by design document and name.
//!
//! **Ranges** come from the chosen index's fields in order (`ranges::ranges`): an
//! equality (`$eq`, or each value of an `$in`) fixes a field and moves to the next; a
//! range (`$gt`…`$lte`, `$beginsWith`, a `$regex` with a literal prefix) bounds the field
//! and ends the walk. A condition inside `$elemMatch`/`$allMatch` on an array `a` bounds
//! the index field `a.x` it names, because multikey entries pair the fields of one array
//! element. For `_all_docs` the one range bounds the document id.

mod implies;
mod ranges;

use crate::path::FieldPath;
use crate::selector::Selector;

pub use implies::{implies, requires_value};
pub use ranges::{Bound, KeyRange, MAX_RANGES, indexable, view_keys};

/// The kind of an index.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Kind {
    /// A JSON index over [`IndexInfo::fields`].
    #[default]
    Json,
    /// A Mango text index with its columns (`name:type`, `$default`); `None` when it
    /// indexes every field. It serves any selector whose fields it has, in no order of
    /// its own, and is used when no JSON index is usable (`mango_cursor`'s order of
    /// cursor types: view, text, special).
    Text(Option<Vec<String>>),
}

/// What the planner needs to know about one index.
#[derive(Debug, Clone)]
pub struct IndexInfo {
    pub ddoc: String,
    pub name: String,
    pub kind: Kind,
    pub fields: Vec<FieldPath>,
    pub has_partial_filter: bool,
    /// Of the query's kind (partitioned for a partition query, global otherwise); other
    /// indexes are only listed, as `scope_mismatch`.
    pub in_scope: bool,
}

/// One index the planner looked at and did not choose, as `_explain` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Position in the list of indexes given; `None` for `_all_docs`.
    pub index: Option<usize>,
    pub usable: bool,
    /// CouchDB's reason name (`field_mismatch`, `unfavored_type`, `less_overlap`, …).
    pub reason: &'static str,
    pub ranking: usize,
}

/// What the query uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// A JSON index (position in the list given).
    Index(usize),
    /// The documents in id order (CouchDB's special `_all_docs` index).
    AllDocs,
    /// Nothing is usable (only `_explain` gets this far).
    Nothing,
}

/// The planner's answer.
#[derive(Debug, Clone)]
pub struct Plan {
    pub choice: Choice,
    /// Key ranges of the chosen index; for `_all_docs` at most one range, on `_id`.
    pub ranges: Vec<KeyRange>,
    /// Every index not chosen, in CouchDB's order (design documents descending, then
    /// `_all_docs`).
    pub candidates: Vec<Candidate>,
    /// `use_index` named no usable index and another one is used (CouchDB's warning).
    pub use_index_ignored: bool,
}

impl Plan {
    /// The chosen JSON index.
    pub fn index(&self) -> Option<usize> {
        match self.choice {
            Choice::Index(i) => Some(i),
            _ => None,
        }
    }
}

/// Why a query cannot run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanError {
    /// `use_index` names nothing usable and falling back is not allowed (CouchDB's
    /// `invalid_index`); holds the request's `use_index` parts.
    InvalidIndex(Vec<String>),
    /// More than one text index is usable and `use_index` names none of them (CouchDB's
    /// `multiple_text_indexes`).
    MultipleTextIndexes,
}

/// A request as the planner sees it.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub selector: &'a Selector,
    /// Sort fields (one direction).
    pub sort: &'a [FieldPath],
    /// `use_index`: a design document id, optionally with an index name.
    pub use_index: Option<(&'a str, Option<&'a str>)>,
    pub allow_fallback: bool,
}

/// Plans `req` over `indexes` (the complete JSON indexes of the query's kind).
pub fn plan(req: &Request, indexes: &[IndexInfo]) -> Result<Plan, PlanError> {
    let conds = ranges::top_level(req.selector.root());
    let named = |id: Id| {
        id.map(|i| &indexes[i]).is_some_and(|ix| {
            req.use_index.is_some_and(|(d, n)| ix.ddoc == d && n.is_none_or(|n| n == ix.name))
        })
    };
    let text_search = has_text(req.selector.root());
    let mut sets = Sets::default();
    for (i, ix) in indexes.iter().enumerate() {
        if ix.has_partial_filter && !named(Some(i)) {
            sets.partial.push(Some(i));
            continue;
        }
        if !ix.in_scope {
            sets.out_of_scope.push(Some(i));
            continue;
        }
        let usable = match &ix.kind {
            Kind::Json if text_search => Err("needs_text_search"),
            Kind::Json => ranges::usable(ix, req.selector, &conds, req.sort),
            Kind::Text(columns) => text_usable(req.selector, columns.as_deref()),
        };
        match usable {
            Ok(()) => sets.usable.push(Some(i)),
            Err(why) => sets.not_usable.push((Some(i), why)),
        }
    }
    match all_docs_usable(&conds, req.sort) {
        Ok(()) => sets.usable.push(None),
        Err(why) => sets.not_usable.push((None, why)),
    }
    if sets.usable.is_empty() {
        let candidates = sets.listing(indexes, &[], None);
        return Ok(Plan {
            choice: Choice::Nothing,
            ranges: Vec::new(),
            candidates,
            use_index_ignored: false,
        });
    }
    let mut filtered: Vec<Id> = sets.usable.iter().copied().filter(|&id| named(id)).collect();
    let fallback = filtered.is_empty();
    if fallback {
        let may_fall_back =
            req.allow_fallback || (req.use_index.is_none() && sets.usable.len() > 1);
        if !may_fall_back {
            return Err(PlanError::InvalidIndex(use_index_parts(req.use_index)));
        }
        filtered = sets.usable.clone();
    }
    let use_index_ignored = fallback && req.use_index.is_some();
    sets.excluded = sets.usable.iter().copied().filter(|id| !filtered.contains(id)).collect();
    let of_kind = |text: bool| -> Vec<usize> {
        let kind = |i: &usize| matches!(indexes[*i].kind, Kind::Text(_)) == text;
        filtered.iter().filter_map(|id| *id).filter(kind).collect()
    };
    let json = of_kind(false);
    let text = of_kind(true);
    if json.is_empty() && !text.is_empty() {
        if text.len() > 1 {
            return Err(PlanError::MultipleTextIndexes);
        }
        sets.unfavored = filtered.iter().copied().filter(Option::is_none).collect();
        let candidates = sets.listing(indexes, &[], Some(Some(text[0])));
        let choice = Choice::Index(text[0]);
        return Ok(Plan { choice, ranges: Vec::new(), candidates, use_index_ignored });
    }
    if json.is_empty() {
        let candidates = sets.listing(indexes, &[], Some(None));
        let ranges = all_docs_range(&conds);
        return Ok(Plan { choice: Choice::AllDocs, ranges, candidates, use_index_ignored });
    }
    sets.unfavored =
        filtered.iter().copied().filter(|id| id.is_none_or(|i| !json.contains(&i))).collect();
    // Rank the JSON indexes, best first: CouchDB's order (smallest prefix difference,
    // fewest fields, design document and name), with Bunko's score (equality prefix,
    // range, sort) breaking ties of the difference before the field count.
    let mut ranked: Vec<Ranked> = json
        .iter()
        .map(|&i| {
            let (r, score) = ranges::ranges(&indexes[i], &conds, req.sort);
            let difference = ranges::prefix_difference(&indexes[i], req.selector);
            (i, Rank { difference, score }, r)
        })
        .collect();
    ranked.sort_by(|(a, ra, _), (b, rb, _)| {
        let key = |i: &usize, r: &Rank| {
            let ix = &indexes[*i];
            (r.difference, std::cmp::Reverse(r.score), ix.fields.len(), &ix.ddoc, &ix.name)
        };
        key(a, ra).cmp(&key(b, rb))
    });
    let Some((winner, _, ranges)) = ranked.first().cloned() else {
        return Ok(Plan {
            choice: Choice::Nothing,
            ranges: Vec::new(),
            candidates: Vec::new(),
            use_index_ignored,
        });
    };
    let order: Vec<(usize, Rank)> = ranked.iter().map(|(i, r, _)| (*i, *r)).collect();
    let candidates = sets.listing(indexes, &order, Some(Some(winner)));
    Ok(Plan { choice: Choice::Index(winner), ranges, candidates, use_index_ignored })
}

fn use_index_parts(use_index: Option<(&str, Option<&str>)>) -> Vec<String> {
    use_index.map_or_else(Vec::new, |(d, n)| {
        let d = d.strip_prefix("_design/").unwrap_or(d).to_string();
        std::iter::once(d).chain(n.map(String::from)).collect()
    })
}

/// How an index ranks for a query (see [`plan`]).
#[derive(Debug, Clone, Copy)]
struct Rank {
    difference: usize,
    score: ranges::Score,
}

type Ranked = (usize, Rank, Vec<KeyRange>);

/// An index: a position in the list given, or `None` for `_all_docs`.
type Id = Option<usize>;

/// The stages of `mango_cursor:extract_candidate_indexes`, each a set of indexes.
#[derive(Debug, Default)]
struct Sets {
    partial: Vec<Id>,
    /// Partitioned indexes for a global query, global ones for a partition query.
    out_of_scope: Vec<Id>,
    not_usable: Vec<(Id, &'static str)>,
    usable: Vec<Id>,
    /// Usable, but `use_index` names another.
    excluded: Vec<Id>,
    /// Usable, but a JSON index is preferred (`_all_docs`).
    unfavored: Vec<Id>,
}

impl Sets {
    /// The candidates in CouchDB's order with CouchDB's rankings: JSON indexes by design
    /// document and name descending, `_all_docs` last; the winner (`Some(None)`:
    /// `_all_docs`) left out. `ranked` are the JSON indexes that could have won, best first.
    fn listing(
        &self,
        indexes: &[IndexInfo],
        ranked: &[(usize, Rank)],
        winner: Option<Id>,
    ) -> Vec<Candidate> {
        let unfavored_rank = ranked.len().max(1);
        let excluded_rank = unfavored_rank + usize::from(!self.unfavored.is_empty());
        let not_usable_rank = excluded_rank + usize::from(!self.excluded.is_empty());
        let out_of_scope_rank = not_usable_rank + usize::from(!self.not_usable.is_empty());
        let partial_rank = out_of_scope_rank + usize::from(!self.out_of_scope.is_empty());
        let entry = |id: Id| -> Candidate {
            let c = |usable, reason, ranking| Candidate { index: id, usable, reason, ranking };
            if self.partial.contains(&id) {
                return c(false, "is_partial", partial_rank);
            }
            if self.out_of_scope.contains(&id) {
                return c(false, "scope_mismatch", out_of_scope_rank);
            }
            if let Some((_, why)) = self.not_usable.iter().find(|(j, _)| *j == id) {
                return c(false, why, not_usable_rank);
            }
            if self.excluded.contains(&id) {
                return c(true, "excluded_by_user", excluded_rank);
            }
            if self.unfavored.contains(&id) {
                return c(true, "unfavored_type", unfavored_rank);
            }
            let pos = ranked.iter().position(|(i, _)| Some(*i) == id).unwrap_or_default();
            c(true, not_chosen_reason(indexes, ranked, pos), pos)
        };
        let mut order: Vec<usize> =
            (0..indexes.len()).filter(|i| Some(Some(*i)) != winner).collect();
        order.sort_by(|&a, &b| {
            (&indexes[b].ddoc, &indexes[b].name).cmp(&(&indexes[a].ddoc, &indexes[a].name))
        });
        let mut out: Vec<Candidate> = order.into_iter().map(|i| entry(Some(i))).collect();
        if winner != Some(None) {
            out.push(entry(None));
        }
        out
    }
}

/// Why the JSON index at `pos` of `ranked` lost to the first (`mango_cursor:
/// extract_candidate_indexes`).
fn not_chosen_reason(indexes: &[IndexInfo], ranked: &[(usize, Rank)], pos: usize) -> &'static str {
    let (Some((best, _)), Some((i, rank))) = (ranked.first(), ranked.get(pos)) else {
        return "less_overlap";
    };
    if rank.difference > 0 {
        "less_overlap"
    } else if indexes[*i].fields.len() > indexes[*best].fields.len() {
        "too_many_fields"
    } else {
        "alphabetically_comes_after"
    }
}

/// Whether the selector searches text (`mango_idx_view:is_text_search`): then no JSON
/// index may serve it.
fn has_text(node: &crate::Node) -> bool {
    use crate::{Cond, Node};
    let cond = |c: &Cond| match c {
        Cond::Text(_) => true,
        Cond::ElemMatch(sub) | Cond::AllMatch(sub) | Cond::KeyMapMatch(sub) => has_text(sub),
        _ => false,
    };
    match node {
        Node::And(items) | Node::Or(items) | Node::Nor(items) => items.iter().any(has_text),
        Node::Not(inner) => has_text(inner),
        Node::Field(_, c) => cond(c),
        Node::Empty => false,
    }
}

/// A text index serves a non-empty selector whose fields it has
/// (`mango_idx_text:is_usable`).
fn text_usable(selector: &Selector, columns: Option<&[String]>) -> Result<(), &'static str> {
    if selector.root() == &crate::Node::Empty {
        return Err("empty_selector");
    }
    let Some(columns) = columns else { return Ok(()) };
    let needed = crate::text::Text::from_selector(selector).indexable_fields();
    if needed.iter().all(|f| columns.contains(f)) { Ok(()) } else { Err("field_mismatch") }
}

/// `_all_docs` serves any selector without a sort; with a sort only `_id` ascending or
/// descending when the selector bounds `_id` (`mango_idx_special:is_usable`).
fn all_docs_usable(
    conds: &[(FieldPath, crate::Cond)],
    sort: &[FieldPath],
) -> Result<(), &'static str> {
    if sort.is_empty() {
        return Ok(());
    }
    let indexable = conds.iter().any(|(p, c)| p.is_id() && ranges::indexable(c));
    if !indexable {
        return Err("field_mismatch");
    }
    if sort.len() != 1 || !sort[0].is_id() {
        return Err("sort_order_mismatch");
    }
    Ok(())
}

/// The one range of `_all_docs`: the bounds the selector puts on `_id`.
fn all_docs_range(conds: &[(FieldPath, crate::Cond)]) -> Vec<KeyRange> {
    let on: Vec<&crate::Cond> = conds.iter().filter(|(p, _)| p.is_id()).map(|(_, c)| c).collect();
    let (lower, upper) = ranges::id_bounds(&on);
    vec![KeyRange { eq: Vec::new(), lower, upper }]
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn index(name: &str, fields: &[&str], partial: bool) -> IndexInfo {
        IndexInfo {
            kind: Kind::Json,
            ddoc: format!("_design/{name}"),
            name: name.to_string(),
            fields: fields.iter().filter_map(|f| FieldPath::parse(f).ok()).collect(),
            has_partial_filter: partial,
            in_scope: true,
        }
    }

    fn plan_with(
        selector: Value,
        sort: &[&str],
        indexes: &[IndexInfo],
        use_index: Option<(&str, Option<&str>)>,
        allow_fallback: bool,
    ) -> Result<Plan, PlanError> {
        let selector = Selector::parse(&selector).unwrap_or_else(|e| panic!("{e}"));
        let sort: Vec<FieldPath> = sort.iter().filter_map(|f| FieldPath::parse(f).ok()).collect();
        plan(&Request { selector: &selector, sort: &sort, use_index, allow_fallback }, indexes)
    }

    fn plan_for(selector: Value, sort: &[&str], indexes: &[IndexInfo]) -> Plan {
        plan_with(selector, sort, indexes, None, true).unwrap_or_else(|e| panic!("{e:?}"))
    }

    fn reason(plan: &Plan, index: Option<usize>) -> Option<&'static str> {
        plan.candidates.iter().find(|c| c.index == index).map(|c| c.reason)
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
        assert_eq!(plan.choice, Choice::Index(1));
        assert_eq!(
            plan.ranges,
            vec![KeyRange {
                eq: vec![json!("device-1")],
                lower: Some(Bound { value: json!("2018"), inclusive: false }),
                upper: Some(Bound { value: json!("2019"), inclusive: true }),
            }]
        );
        assert_eq!(reason(&plan, Some(0)), Some("less_overlap"));
        assert_eq!(reason(&plan, None), Some("unfavored_type"));
    }

    #[test]
    fn an_index_on_a_field_the_selector_does_not_require_is_unusable() {
        let indexes = [index("a", &["a"], false), index("p", &["b"], true)];
        let plan = plan_for(json!({"b": 1, "a": {"$exists": false}}), &[], &indexes);
        assert_eq!(plan.choice, Choice::AllDocs);
        assert_eq!(reason(&plan, Some(0)), Some("field_mismatch"));
        assert_eq!(reason(&plan, Some(1)), Some("is_partial"));
    }

    #[test]
    fn in_and_elem_match_become_ranges_of_a_multikey_index() {
        let links = [index("links", &["links.target", "links.doc_type"], false)];
        let selector = json!({"links": {"$elemMatch": {"target": "S12345", "doc_type": {"$in": ["class", "student"]}}}});
        let plan = plan_for(selector, &[], &links);
        assert_eq!(plan.choice, Choice::Index(0));
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
        assert_eq!(ok.choice, Choice::Index(0));
        let bad = plan_for(json!({"deviceID": {"$gt": "d"}, "ts": {"$gt": 0}}), &["ts"], &indexes);
        assert_eq!(bad.choice, Choice::Nothing);
        assert_eq!(reason(&bad, Some(0)), Some("sort_order_mismatch"));
        assert_eq!(reason(&bad, None), Some("field_mismatch"));
    }

    #[test]
    fn an_or_on_the_second_field_still_requires_it() {
        let indexes = [index("cm", &["company", "manager"], false)];
        let selector =
            json!({"company": {"$gt": "a"}, "$or": [{"manager": "F"}, {"manager": "B"}]});
        assert_eq!(plan_for(selector, &[], &indexes).choice, Choice::Index(0));
    }

    #[test]
    fn use_index_falls_back_with_a_warning_or_fails_without_fallback() {
        let indexes = [index("a", &["a"], false), index("b", &["b"], false)];
        let named = Some(("_design/a", None));
        let plan = plan_with(json!({"b": 1}), &[], &indexes, named, true);
        let plan = plan.unwrap_or_else(|e| panic!("{e:?}"));
        assert!(plan.use_index_ignored && plan.choice == Choice::Index(1));
        let err = plan_with(json!({"b": 1}), &[], &indexes, named, false).err();
        assert_eq!(err, Some(PlanError::InvalidIndex(vec!["a".to_string()])));
        let err = plan_with(json!({"c": 1}), &[], &indexes, None, false).err();
        assert_eq!(err, Some(PlanError::InvalidIndex(Vec::new())));
    }

    #[test]
    fn candidates_are_ranked_and_ordered_as_couchdb_lists_them() {
        let mut global = index("g", &["age"], false);
        global.in_scope = false;
        let indexes = [
            index("a", &["age"], false),
            index("an", &["age", "name"], false),
            index("n", &["name"], false),
            index("p", &["age"], true),
            global,
        ];
        let plan = plan_for(json!({"age": {"$gt": 1}}), &[], &indexes);
        assert_eq!(plan.choice, Choice::Index(0));
        let listed: Vec<(Option<usize>, &str, usize)> =
            plan.candidates.iter().map(|c| (c.index, c.reason, c.ranking)).collect();
        assert_eq!(
            listed,
            [
                (Some(3), "is_partial", 4),
                (Some(2), "field_mismatch", 2),
                (Some(4), "scope_mismatch", 3),
                (Some(1), "field_mismatch", 2),
                (None, "unfavored_type", 1),
            ]
        );
    }

    #[test]
    fn all_docs_serves_id_ranges_and_id_sorts() {
        let plan = plan_for(json!({"_id": {"$beginsWith": "a"}}), &["_id"], &[]);
        assert_eq!(plan.choice, Choice::AllDocs);
        let upper = plan.ranges.first().and_then(|r| r.upper.clone()).map(|b| b.value);
        assert_eq!(upper, Some(json!("a\u{FFFF}")));
    }
}
