//! Revision trees with CouchDB's semantics.
//!
//! A document's history is a forest of revisions: normally one chain, but replication
//! (`new_edits=false`) can add branches (conflicts) and stemming can cut old roots away.
//! Nodes live in a vector with parent indexes; a leaf is a node nobody points to.
//!
//! - The **winner** is the leaf CouchDB picks: non-deleted leaves beat deleted ones, then
//!   the higher generation, then the higher hash.
//! - [`RevTree::merge_path`] adds a replicated ancestry path, reusing the nodes it shares.
//! - [`RevTree::stem`] keeps at most `revs_limit` revisions on every path from a leaf,
//!   as CouchDB's `revs_limit`.

use bunko_doc::RevId;
use serde::{Deserialize, Serialize};

/// One revision in a tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    pub rev: RevId,
    pub parent: Option<usize>,
    pub deleted: bool,
}

/// A document's revision forest.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RevTree {
    nodes: Vec<Node>,
}

impl RevTree {
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    pub fn find(&self, rev: &RevId) -> Option<usize> {
        self.nodes.iter().position(|n| n.rev == *rev)
    }

    pub fn node(&self, idx: usize) -> Option<&Node> {
        self.nodes.get(idx)
    }

    pub fn is_leaf(&self, idx: usize) -> bool {
        idx < self.nodes.len() && !self.nodes.iter().any(|n| n.parent == Some(idx))
    }

    /// Indexes of all leaves.
    pub fn leaves(&self) -> Vec<usize> {
        let mut has_child = vec![false; self.nodes.len()];
        for parent in self.nodes.iter().filter_map(|n| n.parent) {
            if let Some(flag) = has_child.get_mut(parent) {
                *flag = true;
            }
        }
        (0..self.nodes.len()).filter(|&i| !has_child.get(i).copied().unwrap_or(true)).collect()
    }

    /// The winning leaf by CouchDB's rule.
    pub fn winner(&self) -> Option<&Node> {
        self.leaves()
            .into_iter()
            .filter_map(|i| self.nodes.get(i))
            .max_by(|a, b| (!a.deleted, &a.rev).cmp(&(!b.deleted, &b.rev)))
    }

    /// Leaves other than the winner, split into (live conflicts, deleted conflicts), each
    /// sorted as CouchDB lists them (highest first).
    pub fn conflicts(&self) -> (Vec<RevId>, Vec<RevId>) {
        let winner = self.winner().map(|n| n.rev.clone());
        let mut live = Vec::new();
        let mut deleted = Vec::new();
        for node in self.leaves().into_iter().filter_map(|i| self.nodes.get(i)) {
            if Some(&node.rev) == winner.as_ref() {
                continue;
            }
            if node.deleted { &mut deleted } else { &mut live }.push(node.rev.clone());
        }
        live.sort_by(|a, b| b.cmp(a));
        deleted.sort_by(|a, b| b.cmp(a));
        (live, deleted)
    }

    /// The revisions from `idx` back to its root, newest first.
    pub fn path(&self, idx: usize) -> Vec<&Node> {
        let mut path = Vec::new();
        let mut cur = Some(idx);
        while let Some(node) = cur.and_then(|i| self.nodes.get(i)) {
            path.push(node);
            cur = node.parent;
        }
        path
    }

    /// Adds a revision under `parent` (or as a new root) and returns its index.
    pub fn push(&mut self, rev: RevId, parent: Option<usize>, deleted: bool) -> usize {
        self.nodes.push(Node { rev, parent, deleted });
        self.nodes.len() - 1
    }

    /// Merges an ancestry path (newest first, the first being the new leaf) as replication
    /// sends it. Returns the index of the leaf, and `false` if it was already present.
    pub fn merge_path(&mut self, path: &[RevId], deleted: bool) -> Option<(usize, bool)> {
        let first = path.first()?;
        if let Some(idx) = self.find(first) {
            return Some((idx, false));
        }
        let known = path.iter().position(|rev| self.find(rev).is_some());
        let (mut parent, missing) = match known {
            Some(k) => (path.get(k).and_then(|r| self.find(r)), path.get(..k).unwrap_or_default()),
            None => (None, path),
        };
        for (i, rev) in missing.iter().enumerate().rev() {
            parent = Some(self.push(rev.clone(), parent, i == 0 && deleted));
        }
        parent.map(|leaf| (leaf, true))
    }

    /// Purges the leaves among `revs` with every ancestor no remaining leaf shares, as
    /// CouchDB's `couch_key_tree:remove_leafs` (revisions that are not leaves are ignored);
    /// returns the leaves removed, in the order of `revs`.
    pub fn remove_leaves(&mut self, revs: &[RevId]) -> Vec<RevId> {
        let leaves = self.leaves();
        let is_purged = |i: &usize| self.nodes.get(*i).is_some_and(|n| revs.contains(&n.rev));
        let (purged, kept): (Vec<usize>, Vec<usize>) = leaves.into_iter().partition(is_purged);
        if purged.is_empty() {
            return Vec::new();
        }
        let mut keep = vec![false; self.nodes.len()];
        for leaf in kept {
            let mut cur = Some(leaf);
            while let Some(i) = cur.filter(|&i| !keep.get(i).copied().unwrap_or(true)) {
                if let Some(flag) = keep.get_mut(i) {
                    *flag = true;
                }
                cur = self.nodes.get(i).and_then(|n| n.parent);
            }
        }
        let removed = revs
            .iter()
            .filter(|rev| purged.iter().any(|&i| self.nodes.get(i).is_some_and(|n| n.rev == **rev)))
            .cloned()
            .collect();
        self.retain(&keep);
        removed
    }

    /// Keeps the nodes whose `keep` flag is set, renumbering parents; returns the others.
    fn retain(&mut self, keep: &[bool]) -> Vec<RevId> {
        let mut new_index = vec![None; self.nodes.len()];
        let mut kept = Vec::new();
        let mut removed = Vec::new();
        for (i, node) in self.nodes.drain(..).enumerate() {
            if keep.get(i).copied().unwrap_or(false) {
                if let Some(slot) = new_index.get_mut(i) {
                    *slot = Some(kept.len());
                }
                kept.push(node);
            } else {
                removed.push(node.rev);
            }
        }
        for node in &mut kept {
            node.parent = node.parent.and_then(|p| new_index.get(p).copied().flatten());
        }
        self.nodes = kept;
        removed
    }

    /// Removes revisions more than `limit` steps from every leaf; returns the removed revs.
    pub fn stem(&mut self, limit: usize) -> Vec<RevId> {
        let limit = limit.max(1);
        let mut keep = vec![false; self.nodes.len()];
        for leaf in self.leaves() {
            let mut cur = Some(leaf);
            for _ in 0..limit {
                let Some(i) = cur else { break };
                if let Some(flag) = keep.get_mut(i) {
                    *flag = true;
                }
                cur = self.nodes.get(i).and_then(|n| n.parent);
            }
        }
        if keep.iter().all(|&k| k) {
            return Vec::new();
        }
        self.retain(&keep)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rev(s: &str) -> RevId {
        s.parse().unwrap_or_else(|_| RevId { pos: 0, hash: s.into() })
    }

    fn revs(list: &[&str]) -> Vec<RevId> {
        list.iter().map(|s| rev(s)).collect()
    }

    fn chain(list: &[&str]) -> RevTree {
        let mut tree = RevTree::default();
        let mut parent = None;
        for s in list {
            parent = Some(tree.push(rev(s), parent, false));
        }
        tree
    }

    #[test]
    fn winner_prefers_live_then_generation_then_hash() {
        let mut tree = chain(&["1-a", "2-b"]);
        assert_eq!(tree.merge_path(&revs(&["2-c", "1-a"]), false), Some((2, true)));
        assert_eq!(tree.winner().map(|n| n.rev.to_string()), Some("2-c".into()));
        tree.merge_path(&revs(&["3-a", "2-b", "1-a"]), true);
        assert_eq!(tree.winner().map(|n| n.rev.to_string()), Some("2-c".into()));
        let (live, deleted) = tree.conflicts();
        assert_eq!((live, deleted), (vec![], revs(&["3-a"])));
        tree.merge_path(&revs(&["3-d", "2-c"]), false);
        assert_eq!(tree.winner().map(|n| n.rev.to_string()), Some("3-d".into()));
    }

    #[test]
    fn merging_a_known_leaf_is_a_no_op() {
        let mut tree = chain(&["1-a", "2-b"]);
        assert_eq!(tree.merge_path(&revs(&["2-b", "1-a"]), false), Some((1, false)));
        assert_eq!(tree.nodes().len(), 2);
    }

    #[test]
    fn merging_an_unrelated_path_starts_a_new_root() {
        let mut tree = chain(&["1-a"]);
        tree.merge_path(&revs(&["2-y", "1-x"]), false);
        assert_eq!(tree.leaves().len(), 2);
        assert_eq!(tree.winner().map(|n| n.rev.to_string()), Some("2-y".into()));
    }

    #[test]
    fn removing_leaves_drops_unshared_ancestors_only() {
        let mut tree = chain(&["1-a", "2-b", "3-c"]);
        tree.merge_path(&revs(&["3-x", "2-y", "1-a"]), false);
        assert_eq!(tree.remove_leaves(&revs(&["2-b", "9-z"])), Vec::<RevId>::new());
        assert_eq!(tree.remove_leaves(&revs(&["3-x"])), revs(&["3-x"]));
        let left: Vec<String> = tree.nodes().iter().map(|n| n.rev.to_string()).collect();
        assert_eq!(left, vec!["1-a", "2-b", "3-c"]);
        assert_eq!(tree.winner().map(|n| n.rev.to_string()), Some("3-c".into()));
        assert_eq!(tree.remove_leaves(&revs(&["3-c"])), revs(&["3-c"]));
        assert!(tree.nodes().is_empty());
    }

    #[test]
    fn stemming_keeps_limit_revisions_per_leaf() {
        let mut tree = chain(&["1-a", "2-b", "3-c", "4-d"]);
        tree.merge_path(&revs(&["3-x", "2-b"]), false);
        let removed = tree.stem(2);
        assert_eq!(removed, revs(&["1-a"]));
        let paths: Vec<Vec<String>> = tree
            .leaves()
            .into_iter()
            .map(|l| tree.path(l).iter().map(|n| n.rev.to_string()).collect())
            .collect();
        // 2-b stays for 3-x, so 4-d keeps it as its ancestor too (CouchDB merges stemmed paths).
        assert_eq!(paths, vec![vec!["4-d", "3-c", "2-b"], vec!["3-x", "2-b"]]);
    }
}
