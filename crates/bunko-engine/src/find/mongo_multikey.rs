//! Which bounds a multikey index may combine, as MongoDB's planner decides it from the
//! paths that made the index multikey and the `$elemMatch`es joining the conditions.
//!
//! On a field where the index is multikey, two conditions `{$gt: 1, $lt: 5}` may hold for
//! different elements (`[0, 10]` matches), so a range keeps its lower side only; and a
//! field sharing an array with an earlier bounded field (`links.target`, `links.doc_type`)
//! may be met in another element than that field, so it (and every field after it) bounds
//! nothing. Both hold unless one `$elemMatch` joins the conditions over that array: every
//! condition on the field (on both fields) sits in the same `$elemMatch`, whose path is the
//! array's or runs through it (`{links: {$elemMatch: {target: "x", doc_type: "y"}}}`
//! bounds both fields, `{grades: {$elemMatch: {$gte: 90, $lte: 99}}}` both sides). An array
//! inside the `$elemMatch` (`links.target` itself an array) is not joined by it. The filter
//! is matched on every document read, so wider bounds only read more.

use bunko_query::{Cond, FieldPath, Node};

use super::mongo_index::FieldBounds;
use crate::index::Index;

/// The conditions of a filter's top-level `$and` by path, as the planner files them
/// ([`file`]), each with the `$elemMatch`es it sits in (outermost first).
#[derive(Default)]
pub(super) struct Filed {
    pub conds: Vec<(FieldPath, Cond)>,
    within: Vec<Vec<Joined>>,
}

/// One `$elemMatch` of the filter: its number in the filter and its full path.
#[derive(Clone, PartialEq)]
struct Joined {
    id: usize,
    path: Vec<String>,
}

/// The conditions of the top-level `$and` (nested ones flattened) by path; those inside
/// `$elemMatch` on `a` are filed under `a.x` too (the `$elemMatch` itself sits in itself:
/// its own elements).
pub(super) fn file(root: &Node) -> Filed {
    let mut out = Filed::default();
    file_under(root, &[], &[], &mut 0, &mut out);
    out
}

fn file_under(root: &Node, prefix: &[String], chain: &[Joined], next: &mut usize, out: &mut Filed) {
    let mut nodes = Vec::new();
    conjuncts(root, &mut nodes);
    let joined = |path: &FieldPath| FieldPath::from_segments(prefix.iter().chain(path.segments()));
    for node in nodes {
        if let Some((path, conds)) = super::mongo_index::one_path_or(node) {
            out.conds.push((joined(&path), Cond::ElemMatch(Box::new(Node::Or(conds)))));
            out.within.push(chain.to_vec());
            continue;
        }
        let Node::Field(path, cond) = node else { continue };
        let full = joined(path);
        let Cond::ElemMatch(inner) = cond else {
            out.conds.push((full, cond.clone()));
            out.within.push(chain.to_vec());
            continue;
        };
        *next += 1;
        let mut inside = chain.to_vec();
        inside.push(Joined { id: *next, path: full.segments().to_vec() });
        out.conds.push((full.clone(), cond.clone()));
        out.within.push(inside.clone());
        file_under(inner, full.segments(), &inside, next, out);
    }
}

/// The members of `node`'s `$and`, nested ones flattened (`{t: {$gte: 1, $lt: 2}, d: 3}`
/// inside `$elemMatch` is an `$and` holding one).
fn conjuncts<'a>(node: &'a Node, out: &mut Vec<&'a Node>) {
    match node {
        Node::And(children) => children.iter().for_each(|c| conjuncts(c, out)),
        other => out.push(other),
    }
}

impl Filed {
    /// The `$elemMatch`es every condition on `path` sits in (none when it has none).
    fn joining(&self, path: &FieldPath) -> Vec<&Joined> {
        let mut on = self.conds.iter().zip(&self.within).filter(|((p, _), _)| p == path);
        let Some((_, first)) = on.next() else { return Vec::new() };
        let rest: Vec<&Vec<Joined>> = on.map(|(_, w)| w).collect();
        first.iter().filter(|j| rest.iter().all(|w| w.contains(j))).collect()
    }
}

/// Whether one of `joining` joins conditions over the array at `array` (its path is that
/// array's or runs through it).
fn joins(joining: &[&Joined], array: &[String]) -> bool {
    joining.iter().any(|j| j.path.starts_with(array))
}

/// `bounds` of `index` limited as the module docs say.
pub(super) fn multikey_bounds(
    index: &Index,
    mut bounds: Vec<FieldBounds>,
    filed: &Filed,
) -> Vec<FieldBounds> {
    let meta = index.meta();
    if !meta.is_multikey() {
        return bounds;
    }
    let paths = index.compiled.paths();
    let arrays = |i: usize| -> Vec<&[String]> {
        let segments = paths.get(i).map(FieldPath::segments).unwrap_or_default();
        let components = meta.multikey.get(i).map(Vec::as_slice).unwrap_or_default();
        components.iter().filter_map(|c| segments.get(..=*c)).collect()
    };
    let joining: Vec<Vec<&Joined>> = paths.iter().map(|p| filed.joining(p)).collect();
    // The arrays of the fields bounded so far, each with the field that crossed it.
    let mut crossed: Vec<(&[String], usize)> = Vec::new();
    let mut open = true;
    for (i, b) in bounds.iter_mut().enumerate() {
        let own = arrays(i);
        let shared_apart = own.iter().any(|array| {
            crossed
                .iter()
                .any(|(c, j)| c == array && !joins(&common(&joining[i], &joining[*j]), array))
        });
        if !open || shared_apart {
            open = false;
            *b = FieldBounds::All;
            continue;
        }
        if let FieldBounds::Range { lower: Some(_), upper, .. } = b
            && !own.iter().all(|array| joins(&joining[i], array))
        {
            *upper = None;
        }
        if !matches!(b, FieldBounds::All) {
            crossed.extend(own.into_iter().map(|array| (array, i)));
        }
    }
    bounds
}

/// The `$elemMatch`es in both lists.
fn common<'a>(a: &[&'a Joined], b: &[&'a Joined]) -> Vec<&'a Joined> {
    a.iter().filter(|j| b.contains(j)).copied().collect()
}
