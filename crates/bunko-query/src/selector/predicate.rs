//! What a MongoDB filter asks beyond the selector tree: `$expr` (the aggregation
//! evaluator) and `$jsonSchema` (`crate::schema`), alone or inside `$and`/`$or`/`$nor`
//! together with ordinary conditions. Evaluated on the document as BSON after the tree
//! matched; the planner never sees it, so only the tree's conditions narrow an index range.

use std::sync::Arc;

use bson::Document;
use serde_json::Value;

use super::{Dialect, Selector};
use crate::expr::Expr;

/// A condition the selector tree cannot hold.
#[derive(Clone, Debug, PartialEq)]
pub enum Predicate {
    /// `$expr`: true when the expression is truthy (an evaluation error is false).
    Expr(Arc<Expr>),
    /// `$jsonSchema`: the document satisfies the schema.
    Schema(Arc<Document>),
    /// Ordinary conditions (a clause of `$and`/`$or`/`$nor` beside an `$expr`).
    Selector(Box<Selector>),
    And(Vec<Predicate>),
    Or(Vec<Predicate>),
    Nor(Vec<Predicate>),
}

impl Predicate {
    /// Whether `doc` (`json` in the matching form, `bson` as stored) satisfies it.
    pub fn matches(&self, json: &Value, bson: &Document) -> bool {
        match self {
            Predicate::Expr(e) => e.eval_doc(bson).is_ok_and(|v| crate::expr::value::truthy(&v)),
            Predicate::Schema(s) => crate::schema::matches(s, bson),
            Predicate::Selector(s) => s.matches(json, Dialect::Mongo),
            Predicate::And(ps) => ps.iter().all(|p| p.matches(json, bson)),
            Predicate::Or(ps) => ps.iter().any(|p| p.matches(json, bson)),
            Predicate::Nor(ps) => !ps.iter().any(|p| p.matches(json, bson)),
        }
    }

    /// Adds the top-level members it reads to `out` ([`Selector::reads`]); `false` if it
    /// may read any.
    pub fn reads(&self, out: &mut Vec<String>) -> bool {
        match self {
            Predicate::Expr(e) => e.reads(out),
            Predicate::Schema(_) => false,
            Predicate::Selector(s) => s.reads().is_some_and(|names| {
                names.into_iter().for_each(|n| {
                    if !out.contains(&n) {
                        out.push(n)
                    }
                });
                true
            }),
            Predicate::And(ps) | Predicate::Or(ps) | Predicate::Nor(ps) => {
                ps.iter().all(|p| p.reads(out))
            }
        }
    }
}
