//! A sort served by merging index scans (MongoDB's `SORT_MERGE`): when the fields before
//! the sort's in an index are fixed by the filter, some to several points (`{k: {$in: [a,
//! b, c]}}` sorted by `{t: -1}` over the index `{k: 1, t: -1}`), each combination of points
//! is one scan that yields its documents in the sort's order, and the documents of all the
//! scans are merged in that order, each scan read only as far as the merge needs: a
//! `limit(n)` reads about `n` entries in all (one more per scan), not every entry of every
//! point. The merge compares documents as the in-memory sort does
//! ([`super::mongo::compare`]); documents that sort alike come in the order of the points.

use bunko_query::{Direction, FieldPath};
use serde_json::Value;

use super::ExecStats;
use super::mongo::compare;
use super::mongo_index::{FieldBounds, MongoScan};
use super::mongo_stream::IndexStream;
use crate::Result;

/// The scans a merged sort reads, one per combination of points, and the sort.
#[derive(Debug, Clone)]
pub struct Merged {
    /// Each a scan of one combination of points, in the sort's order, in the points' order.
    pub parts: Vec<MongoScan>,
    pub order: Vec<(FieldPath, Direction)>,
}

impl MongoScan {
    /// The merge of one scan per combination of the points the bounds of the first `at`
    /// fields hold (each field is fixed to points, [`MongoScan::serve_order`]).
    pub(super) fn merge(&self, at: usize, order: &[(FieldPath, Direction)]) -> Merged {
        let mut combinations: Vec<Vec<Value>> = vec![Vec::new()];
        for bound in &self.bounds[..at] {
            let FieldBounds::Points(points) = bound else { continue };
            combinations = combinations
                .iter()
                .flat_map(|c| {
                    points.iter().map(move |p| {
                        let mut next = c.clone();
                        next.push(p.clone());
                        next
                    })
                })
                .collect();
        }
        let parts = combinations
            .into_iter()
            .map(|points| {
                let mut bounds: Vec<FieldBounds> =
                    points.into_iter().map(|p| FieldBounds::Points(vec![p])).collect();
                bounds.extend(self.bounds[at..].iter().cloned());
                let mut part = MongoScan::unsorted(self.index.clone(), bounds);
                (part.reverse, part.sorted) = (self.reverse, true);
                part
            })
            .collect();
        Merged { parts, order: order.to_vec() }
    }
}

/// The merge running: each part's stream and the next document it yields.
pub(super) struct Merging {
    order: Vec<(FieldPath, Direction)>,
    parts: Vec<IndexStream>,
    heads: Vec<Option<Value>>,
    started: bool,
}

impl Merging {
    pub(super) fn new(order: Vec<(FieldPath, Direction)>, parts: Vec<IndexStream>) -> Self {
        let heads = parts.iter().map(|_| None).collect();
        Merging { order, parts, heads, started: false }
    }

    /// What the parts examined so far.
    pub(super) fn stats(&self) -> ExecStats {
        let mut out = ExecStats::default();
        for part in &self.parts {
            out.keys_examined += part.stats.keys_examined;
            out.docs_examined += part.stats.docs_examined;
        }
        out
    }

    /// Part `i`'s next document into its head.
    fn pull(&mut self, i: usize) -> Result<()> {
        self.heads[i] = self.parts[i].next().transpose()?;
        Ok(())
    }
}

impl Iterator for Merging {
    type Item = Result<Value>;

    fn next(&mut self) -> Option<Result<Value>> {
        if !self.started {
            self.started = true;
            for i in 0..self.parts.len() {
                if let Err(err) = self.pull(i) {
                    return Some(Err(err));
                }
            }
        }
        let mut least: Option<usize> = None;
        for (i, head) in self.heads.iter().enumerate() {
            let Some(doc) = head else { continue };
            let before = |j: usize| self.heads[j].as_ref().map(|d| compare(&self.order, doc, d));
            if least.is_none_or(|j| before(j).is_some_and(|o| o.is_lt())) {
                least = Some(i);
            }
        }
        let i = least?;
        let doc = self.heads[i].take()?;
        if let Err(err) = self.pull(i) {
            return Some(Err(err));
        }
        Some(Ok(doc))
    }
}
