//! Whether a MongoDB query can only match documents a partial or sparse index holds, so
//! that the planner may use that index without a `hint` (MongoDB: "the query predicate
//! must be a subset of the partial filter expression").
//!
//! The test is syntactic and conservative, as MongoDB's: every condition of the index's
//! filter (its root, or each child of a root `$and`) must be implied by one top-level
//! condition of the query on the same path. `$gte: 5` implies `$gt: 4` and `$exists:
//! true`; `$eq: 7` implies `$gt: 5`, `$in: [7, 9]` and `$type: "number"`; `$in: [7, 9]`
//! implies `$gte: 7`. Comparisons hold within one BSON type class only (MongoDB's type
//! bracketing). A `null` operand implies no existence (it matches a missing field).

use std::cmp::Ordering;

use serde_json::Value;

use crate::bson_order::{class, compare};
use crate::path::FieldPath;
use crate::selector::{Cond, Node, Selector};

/// Whether every document `query` matches also matches `filter` (Mongo dialect).
pub fn implies(query: &Selector, filter: &Selector) -> bool {
    let needed: Vec<(&FieldPath, &Cond)> = match filter.root() {
        Node::Field(path, cond) => vec![(path, cond)],
        Node::And(children) => {
            let fields = children.iter().map(|c| match c {
                Node::Field(path, cond) => Some((path, cond)),
                _ => None,
            });
            match fields.collect::<Option<Vec<_>>>() {
                Some(fields) => fields,
                None => return false,
            }
        }
        _ => return false,
    };
    needed.iter().all(|(path, cond)| query.conditions(path).iter().any(|q| implies_cond(q, cond)))
}

/// Whether `query` requires `path` to exist with a value (not `null`), so a sparse index
/// on it holds every match.
pub fn requires_value(query: &Selector, path: &FieldPath) -> bool {
    query.conditions(path).iter().any(|q| implies_cond(q, &Cond::Exists(true)))
}

/// Whether a value satisfying `q` also satisfies `want`.
fn implies_cond(q: &Cond, want: &Cond) -> bool {
    let values: &[Value] = match q {
        Cond::Eq(v) => std::slice::from_ref(v),
        Cond::In(vs) => vs,
        _ => &[],
    };
    if !values.is_empty() {
        return values.iter().all(|v| !v.is_array() && value_satisfies(v, want));
    }
    match (q, want) {
        (_, Cond::Exists(true)) => bound_of(q).is_some_and(|(v, _, _)| !v.is_null()) || q == want,
        (Cond::Type(t), Cond::Type(u)) => t == u || (u == "number" && is_numeric_alias(t)),
        _ => match (bound_of(q), bound_of(want)) {
            (Some((v, lower, incl)), Some((w, wlower, wincl))) if lower == wlower => {
                if class(v) != class(w) || v.is_null() {
                    return false;
                }
                let ord = compare(v, w);
                let tighter = if lower { ord.is_gt() } else { ord.is_lt() };
                tighter || (ord == Ordering::Equal && (wincl || !incl))
            }
            _ => false,
        },
    }
}

/// One of MongoDB's numeric `$type` aliases.
fn is_numeric_alias(alias: &str) -> bool {
    matches!(alias, "int" | "long" | "double" | "decimal")
}

/// A range condition as (operand, is a lower bound, inclusive).
fn bound_of(c: &Cond) -> Option<(&Value, bool, bool)> {
    match c {
        Cond::Gt(v) => Some((v, true, false)),
        Cond::Gte(v) => Some((v, true, true)),
        Cond::Lt(v) => Some((v, false, false)),
        Cond::Lte(v) => Some((v, false, true)),
        _ => None,
    }
}

/// Whether the value `v` satisfies `want`.
fn value_satisfies(v: &Value, want: &Cond) -> bool {
    let same = |w: &Value| class(v) == class(w);
    match want {
        Cond::Exists(true) => !v.is_null(),
        Cond::Eq(w) => same(w) && compare(v, w).is_eq(),
        Cond::In(ws) => ws.iter().any(|w| same(w) && compare(v, w).is_eq()),
        // An equality with a number matches every numeric type (`{a: 7}` matches `7.0`), so
        // it implies only `number`: `class`, not the number's own type.
        Cond::Type(t) => class(v).name() == t,
        Cond::Gt(w) => same(w) && compare(v, w).is_gt(),
        Cond::Gte(w) => same(w) && compare(v, w).is_ge(),
        Cond::Lt(w) => same(w) && compare(v, w).is_lt(),
        Cond::Lte(w) => same(w) && compare(v, w).is_le(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn sel(v: Value) -> Selector {
        Selector::parse_mongo(&v).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_query_implies_a_filter_it_narrows() {
        let filter = sel(json!({"age": {"$gt": 10}}));
        let yes = |q: Value| implies(&sel(q), &filter);
        assert!(yes(json!({"age": {"$gt": 10}})));
        assert!(yes(json!({"age": {"$gte": 11}, "name": "x"})));
        assert!(yes(json!({"age": 30})));
        assert!(yes(json!({"age": {"$in": [11, 40]}})));
        assert!(!yes(json!({"age": {"$gte": 10}})), "10 is not above 10");
        assert!(!yes(json!({"age": {"$in": [5, 40]}})));
        assert!(!yes(json!({"age": "old"})), "another type is not in the range");
        assert!(!yes(json!({"age": {"$lt": 50}})));
        assert!(!yes(json!({"name": "x"})));
        assert!(!yes(json!({"$or": [{"age": 30}, {"age": 40}]})));
        let both = sel(json!({"age": {"$gte": 18}, "status": {"$exists": true}}));
        assert!(implies(&sel(json!({"age": 20, "status": "A"})), &both));
        assert!(!implies(&sel(json!({"age": 20, "status": null})), &both));
        assert!(!implies(&sel(json!({"age": 20})), &both));
        let typed = sel(json!({"n": {"$type": "string"}}));
        assert!(implies(&sel(json!({"n": "abc"})), &typed));
        assert!(!implies(&sel(json!({"n": 1})), &typed));
        let number = sel(json!({"n": {"$type": "number"}}));
        assert!(implies(&sel(json!({"n": {"$type": "long"}})), &number));
        assert!(implies(&sel(json!({"n": {"$eq": {"$numberLong": "7"}}})), &number));
        let long = sel(json!({"n": {"$type": "long"}}));
        assert!(implies(&sel(json!({"n": {"$type": "long"}, "m": 1})), &long));
        assert!(!implies(&sel(json!({"n": {"$type": "number"}})), &long));
        assert!(!implies(&sel(json!({"n": {"$type": "int"}})), &long));
        assert!(
            !implies(&sel(json!({"n": {"$eq": {"$numberLong": "7"}}})), &long),
            "7.0 equals it too"
        );
        let path = FieldPath::parse("age").unwrap_or_else(|e| panic!("{e}"));
        assert!(requires_value(&sel(json!({"age": {"$lt": 3}})), &path));
        assert!(!requires_value(&sel(json!({"age": null})), &path));
        assert!(!requires_value(&sel(json!({"age": {"$ne": 3}})), &path));
    }
}
