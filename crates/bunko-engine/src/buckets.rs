//! What the order statistics of view rows (`bunko-views`' `order`) and of document ids (`ids`)
//! share: buckets of consecutive keys named by their fences, and a Fenwick tree (binary
//! indexed tree) of per-bucket counts, with prefix sums, point updates and the search for
//! the item at a given rank, each in O(log n).

use std::ops::Bound;

use bunko_storage::{Range, prefix_range};

/// The bucket a key (`suffix`: after the prefix `base` of every key) falls in: bucket `i`
/// holds the keys from `base + fences[i]` up to `base + fences[i + 1]`.
pub fn bucket_of(fences: &[Box<[u8]>], suffix: &[u8]) -> usize {
    fences.partition_point(|f| &**f <= suffix).saturating_sub(1)
}

/// The range of full keys of bucket `i` (the last one: every key with prefix `base` above
/// its fence).
pub fn bucket_range(base: &[u8], fences: &[Box<[u8]>], i: usize) -> Range {
    let full = |suffix: &[u8]| [base, suffix].concat();
    let end = match fences.get(i + 1) {
        Some(next) => Bound::Excluded(full(next)),
        None => prefix_range(base).1,
    };
    let start = fences.get(i).map_or_else(|| base.to_vec(), |f| full(f));
    (Bound::Included(start), end)
}

/// The shortest key above `a` and at most `b` (`a < b`): `b` cut one byte past the
/// first byte where they differ.
pub fn separator<'b>(a: &[u8], b: &'b [u8]) -> &'b [u8] {
    let common = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    &b[..(common + 1).min(b.len())]
}

/// Prefix sums of bucket counts.
#[derive(Debug, Default)]
pub struct Fenwick {
    /// 1-based: `tree[i]` sums the counts `i - lowbit(i) .. i`.
    tree: Vec<u64>,
}

impl Fenwick {
    pub fn new(counts: &[u64]) -> Fenwick {
        let mut tree = vec![0; counts.len() + 1];
        for i in 1..tree.len() {
            tree[i] += counts[i - 1];
            let parent = i + (i & i.wrapping_neg());
            if parent < tree.len() {
                tree[parent] += tree[i];
            }
        }
        Fenwick { tree }
    }

    /// The sum of the first `n` counts.
    pub fn prefix(&self, n: usize) -> u64 {
        let (mut i, mut sum) = (n.min(self.tree.len().saturating_sub(1)), 0);
        while i > 0 {
            sum += self.tree[i];
            i -= i & i.wrapping_neg();
        }
        sum
    }

    /// Adds `delta` to count `i`; a count never goes below zero.
    pub fn add(&mut self, i: usize, delta: i64) {
        let mut i = i + 1;
        while i < self.tree.len() {
            self.tree[i] = self.tree[i].wrapping_add_signed(delta);
            i += i & i.wrapping_neg();
        }
    }

    /// The bucket holding item `n` (0-based, in bucket order) and `n`'s position in it:
    /// the `i` with `prefix(i) <= n < prefix(i + 1)`. `None` when `n` is past the last item.
    pub fn find(&self, n: u64) -> Option<(usize, u64)> {
        if n >= self.prefix(self.tree.len()) {
            return None;
        }
        let (mut pos, mut rest) = (0, n);
        let mut step = (self.tree.len().saturating_sub(1)).checked_ilog2().map_or(0, |b| 1 << b);
        while step > 0 {
            if let Some(&sum) = self.tree.get(pos + step)
                && sum <= rest
            {
                pos += step;
                rest -= sum;
            }
            step >>= 1;
        }
        Some((pos, rest))
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.tree.capacity() * 8
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;

    #[test]
    fn prefix_add_and_find_match_a_plain_vector() {
        let mut rng = StdRng::seed_from_u64(7);
        for len in [0usize, 1, 2, 3, 7, 8, 9, 64, 100] {
            let mut counts: Vec<u64> = (0..len).map(|_| rng.random_range(0..4)).collect();
            let mut tree = Fenwick::new(&counts);
            for _ in 0..200 {
                if len > 0 {
                    let i = rng.random_range(0..len);
                    let delta = if counts[i] > 0 && rng.random_bool(0.5) { -1 } else { 1 };
                    counts[i] = counts[i].wrapping_add_signed(delta);
                    tree.add(i, delta);
                }
                for n in 0..=len {
                    assert_eq!(tree.prefix(n), counts[..n].iter().sum::<u64>());
                }
                let total: u64 = counts.iter().sum();
                for item in 0..=total {
                    let expected = (0..len).find_map(|i| {
                        let before: u64 = counts[..i].iter().sum();
                        (item >= before && item < before + counts[i]).then_some((i, item - before))
                    });
                    assert_eq!(tree.find(item), expected, "{counts:?} item {item}");
                }
            }
        }
    }
}
