//! What a planner needs to know about a normalized selector.
//!
//! The *top-level conditions* are the conditions every matching document satisfies
//! directly: the root when it is a field condition, or the field conditions among the
//! children of a root `$and` (normalization has already flattened nested `$and`s). From
//! them a planner derives equality (`Eq`), ranges (`Lt`..`Gte`, `BeginsWith`,
//! [`super::Pattern::literal_prefix`] of `Regex`), sets (`In`) and array conditions
//! (`ElemMatch`, `All`); [`super::Selector::root`] shows the whole tree (an `$or` to turn
//! into several ranges, say).

use super::{Cond, Node, Selector};
use crate::path::FieldPath;

impl Selector {
    /// The fields of the top-level conditions, each once, in selector order.
    pub fn fields(&self) -> Vec<FieldPath> {
        let mut out: Vec<FieldPath> = Vec::new();
        for (path, _) in self.top_level() {
            if !out.contains(path) {
                out.push(path.clone());
            }
        }
        out
    }

    /// The top-level conditions on `field`, in selector order.
    pub fn conditions(&self, field: &FieldPath) -> Vec<&Cond> {
        self.top_level().filter(|(path, _)| *path == field).map(|(_, cond)| cond).collect()
    }

    /// Every field a condition names outside `$elemMatch`-like arguments, through `$and`
    /// and `$or` alike, each once (`mango_selector:fields`): what a covering index must
    /// hold for the selector to be evaluated from the index alone.
    pub fn referenced_fields(&self) -> Vec<FieldPath> {
        let mut out = Vec::new();
        collect_fields(&self.root, &mut out);
        out
    }

    /// The top-level members a document needs for the selector to be evaluated on it
    /// (the first segment of every path it names, `$expr` included), each once; `None`
    /// when it may read the whole document (`$jsonSchema`, `$$ROOT` in `$expr`, a
    /// condition on the document itself). `_id` is left to the caller.
    pub fn reads(&self) -> Option<Vec<String>> {
        let mut out = Vec::new();
        for path in self.referenced_fields() {
            let first = path.segments().first()?;
            if !out.contains(first) {
                out.push(first.clone());
            }
        }
        match &self.expr {
            Some(predicate) => predicate.reads(&mut out).then_some(out),
            None => Some(out),
        }
    }

    /// Whether every document the selector matches has `field`, so an index that holds
    /// only documents with the field may answer the query (`mango_selector:
    /// has_required_fields`): some top-level condition other than `$exists: false` names
    /// it, or every branch of a top-level `$or` requires it; or, vacuously, the selector
    /// matches nothing (`{"$or": []}`, a top-level `$in: []` or `$all: []`), so that any
    /// index may serve it, as CouchDB lets any index serve those.
    ///
    /// Differs from CouchDB 3.4 in one case: an empty `$or` beside other conditions
    /// (which then matches everything) requires nothing here, while CouchDB counts it as
    /// requiring every field. `_id` and `_rev`, present in every document, are left to the
    /// caller, as in CouchDB.
    pub fn implies_exists(&self, field: &FieldPath) -> bool {
        requires(&self.root, field) || matches_nothing(&self.root)
    }

    fn top_level(&self) -> impl Iterator<Item = (&FieldPath, &Cond)> {
        let children: &[Node] = match &self.root {
            Node::And(children) => children,
            node @ Node::Field(..) => std::slice::from_ref(node),
            _ => &[],
        };
        children.iter().filter_map(|child| match child {
            Node::Field(path, cond) => Some((path, cond)),
            _ => None,
        })
    }
}

/// A root no document can match: an empty `$or`/`$and` (CouchDB answers it with nothing),
/// or a top-level `$in: []` or `$all: []`.
fn matches_nothing(root: &Node) -> bool {
    let empty = |n: &Node| matches!(n, Node::Field(_, Cond::In(v) | Cond::All(v)) if v.is_empty());
    match root {
        Node::And(children) => children.is_empty() || children.iter().any(empty),
        Node::Or(children) => children.is_empty(),
        other => empty(other),
    }
}

fn requires(node: &Node, field: &FieldPath) -> bool {
    match node {
        Node::Field(path, cond) => path == field && !matches!(cond, Cond::Exists(false)),
        Node::And(children) => children.iter().any(|c| requires(c, field)),
        Node::Or(children) => !children.is_empty() && children.iter().all(|c| requires(c, field)),
        Node::Empty | Node::Nor(_) | Node::Not(_) => false,
    }
}

fn collect_fields(node: &Node, out: &mut Vec<FieldPath>) {
    match node {
        Node::Field(path, _) => {
            if !out.contains(path) {
                out.push(path.clone());
            }
        }
        Node::And(children) | Node::Or(children) | Node::Nor(children) => {
            children.iter().for_each(|c| collect_fields(c, out));
        }
        Node::Not(child) => collect_fields(child, out),
        Node::Empty => {}
    }
}
