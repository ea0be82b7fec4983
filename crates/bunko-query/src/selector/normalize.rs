//! Negations pushed down to the conditions (`mango_selector:norm_negations`), then nested
//! `$and`s flattened.
//!
//! ```text
//! {"$not": {"a": {"$gt": 10}}}                 -> {"a": {"$lte": 10}}
//! {"$nor": [A, B]}                             -> {"$and": [not A, not B]}
//! {"$not": {"$and": [A, B]}}                   -> {"$or": [not A, not B]}
//! {"a": {"$not": {"$regex": "x"}}}             -> {"a": {"$not": {"$regex": "x"}}}
//! {"$and": [{"$and": [A, B]}, C]}              -> {"$and": [A, B, C]}
//! ```
//!
//! Comparisons, `$in`/`$nin` and `$exists` have inverses; any other condition keeps a
//! [`Cond::Not`], which still needs the field to exist: `{"a": {"$not": {"$size": 1}}}` does
//! not match a document without `a`, and neither does `{"$not": {"a": 1}}` (it becomes
//! `{"a": {"$ne": 1}}`). Arguments of `$elemMatch`, `$allMatch` and `$keyMapMatch` are left
//! as written, as CouchDB leaves them.
//!
//! Flattening goes beyond CouchDB but keeps its meaning: a non-empty `$and` child of an
//! `$and` is spliced in, and so is a non-empty `$or` child of an `$or` (an empty `$or`
//! matches everything, so it must stay a unit). A normalized selector is an empty `$and`/`$or`
//! exactly when CouchDB's is, so [`super::Selector::is_noop`] is unchanged.

use super::{Cond, Node};

pub(super) fn normalize(node: Node) -> Node {
    flatten(push_negations(node))
}

fn push_negations(node: Node) -> Node {
    match node {
        Node::Not(child) => negate(*child),
        Node::Nor(children) => Node::And(children.into_iter().map(negate).collect()),
        Node::And(children) => Node::And(children.into_iter().map(push_negations).collect()),
        Node::Or(children) => Node::Or(children.into_iter().map(push_negations).collect()),
        other @ (Node::Empty | Node::Field(..)) => other,
    }
}

fn negate(node: Node) -> Node {
    match node {
        Node::Not(child) => push_negations(*child),
        Node::Nor(children) => Node::Or(children.into_iter().map(push_negations).collect()),
        Node::And(children) => Node::Or(children.into_iter().map(negate).collect()),
        Node::Or(children) => Node::And(children.into_iter().map(negate).collect()),
        Node::Field(path, cond) => Node::Field(path, negate_cond(cond)),
        // `{}` only occurs as a whole selector, never under a negation.
        Node::Empty => Node::Not(Box::new(Node::Empty)),
    }
}

fn negate_cond(cond: Cond) -> Cond {
    match cond {
        Cond::Lt(v) => Cond::Gte(v),
        Cond::Lte(v) => Cond::Gt(v),
        Cond::Eq(v) => Cond::Ne(v),
        Cond::Ne(v) => Cond::Eq(v),
        Cond::Gte(v) => Cond::Lt(v),
        Cond::Gt(v) => Cond::Lte(v),
        Cond::In(vs) => Cond::Nin(vs),
        Cond::Nin(vs) => Cond::In(vs),
        Cond::Exists(b) => Cond::Exists(!b),
        Cond::Not(inner) => *inner,
        other => Cond::Not(Box::new(other)),
    }
}

fn flatten(node: Node) -> Node {
    match node {
        Node::And(children) => Node::And(splice(children, Kind::And)),
        Node::Or(children) => Node::Or(splice(children, Kind::Or)),
        other => other,
    }
}

#[derive(PartialEq)]
enum Kind {
    And,
    Or,
}

/// Flattens each child, then replaces each non-empty child of the parent's kind by its own
/// children. Empty ones stay: splicing them away could empty the parent, and an empty `$or`
/// matches everything.
fn splice(children: Vec<Node>, parent: Kind) -> Vec<Node> {
    let mut out = Vec::with_capacity(children.len());
    for child in children.into_iter().map(flatten) {
        match child {
            Node::And(grand) if parent == Kind::And && !grand.is_empty() => out.extend(grand),
            Node::Or(grand) if parent == Kind::Or && !grand.is_empty() => out.extend(grand),
            child => out.push(child),
        }
    }
    out
}
