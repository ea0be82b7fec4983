//! Order statistics of view rows: how many rows of one map function sort before a key,
//! so that a map query's `offset` and a partition's `total_rows` cost O(log n) plus a
//! short scan instead of counting every row before the range (CouchDB reads both from
//! its B-tree reductions).
//!
//! For each map function of a group, an [`Order`] cuts the map's rows into buckets of
//! consecutive row keys and keeps, per bucket, its *fence* (a key at or below its first
//! row, above every row of the bucket before) and its row count, with the counts in a
//! Fenwick tree. The rows before a key `k` are the rows of the buckets before `k`'s
//! bucket (a binary search over the fences and a prefix sum, O(log b)) plus the rows of
//! `k`'s bucket below `k`, counted by scanning at most that one bucket of the snapshot.
//!
//! Buckets hold about [`TARGET`] rows: one growing past twice that is split by scanning
//! it, one shrinking below a quarter is merged into the bucket before it. Memory per
//! bucket is its fence (the shortest separator between two rows, without the map's
//! prefix) and 32 bytes: for the benchmark's view (50 rows per key) about 6 bytes per
//! row. Smaller buckets make the scan shorter and the structure larger: 64-row buckets
//! take ~1.5 bytes per row and answered ~20% fewer key lookups per second.
//!
//! Consistency: [`Orders`] keeps a database's structures, one per map index (by
//! signature), behind one lock. An updater holds it for writing while it applies a step
//! and records that step's row changes ([`Orders::apply`]), and syncs after releasing it;
//! a query takes its snapshot while holding it for reading ([`Orders::probe`]), so the
//! structure and the snapshot describe the same rows. A fresh map index (checkpoint 0)
//! starts with an empty structure and keeps it from its first step on; otherwise (after a
//! restart) its structure is built by one scan of its rows when a query first needs it.

use std::collections::{HashMap, HashSet};
use std::ops::Bound;

use bunko_storage::{Batch, Entry, Iter, Range, Read, Snapshot, Store, Ticket, prefix_range};
use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::entries::BackIndex;
use bunko_engine::buckets::{Fenwick, bucket_of, bucket_range, separator};
use bunko_engine::{Error, Result};

/// Rows per bucket after a split or a build.
pub const TARGET: usize = 16;

/// The row keys one commit inserts into and removes from map indexes, by map signature.
#[derive(Debug, Default)]
pub struct Changes {
    inserted: Vec<(String, Vec<u8>)>,
    removed: Vec<(String, Vec<u8>)>,
}

impl Changes {
    /// Records a document's move in map index `sig` from its `old` rows to its `new`
    /// ones: rows in both are rewritten in place, not inserted.
    pub fn record(&mut self, sig: &str, old: &BackIndex, new: &BackIndex) {
        let old_keys: HashSet<&[u8]> = old.iter().map(Vec::as_slice).collect();
        let new_keys: HashSet<&[u8]> = new.iter().map(Vec::as_slice).collect();
        let removed = old.iter().filter(|k| !new_keys.contains(k.as_slice()));
        self.removed.extend(removed.map(|k| (sig.to_string(), k.clone())));
        let inserted = new.iter().filter(|k| !old_keys.contains(k.as_slice()));
        self.inserted.extend(inserted.map(|k| (sig.to_string(), k.clone())));
    }

    /// Adds another worker's changes.
    pub fn append(&mut self, other: Changes) {
        self.inserted.extend(other.inserted);
        self.removed.extend(other.removed);
    }

    fn maps(&self) -> HashSet<&str> {
        self.inserted.iter().chain(&self.removed).map(|(sig, _)| sig.as_str()).collect()
    }

    fn of<'a>(list: &'a [(String, Vec<u8>)], sig: &str) -> Vec<&'a [u8]> {
        list.iter().filter(|(m, _)| m == sig).map(|(_, k)| k.as_slice()).collect()
    }
}

/// The order structures of one database's map indexes, by map signature, kept in step
/// with the store.
#[derive(Debug, Default)]
pub struct Orders {
    state: RwLock<State>,
}

#[derive(Debug, Default)]
struct State {
    maps: HashMap<String, Order>,
    /// Map indexes registered with no committed row: a missing structure is empty
    /// rather than built by a scan.
    fresh: HashSet<String>,
}

/// Where to count rows: before the start of a range starting at a bound, or before
/// the end of a range ending at one.
#[derive(Debug, Clone, Copy)]
pub enum Cut<'a> {
    Start(&'a Bound<Vec<u8>>),
    End(&'a Bound<Vec<u8>>),
}

/// A snapshot with the number of rows of a map and, for each cut asked for, how to count
/// the rows before it, all describing the same state.
pub struct Probed {
    pub snapshot: Snapshot,
    /// Every row of the map.
    pub total: u64,
    pub probes: Vec<Probe>,
}

impl Orders {
    /// Map index `sig` has no committed row yet (its checkpoint is 0).
    pub fn mark_fresh(&self, sig: &str) {
        let mut state = self.state.write();
        if !state.maps.contains_key(sig) {
            state.fresh.insert(sig.to_string());
        }
    }

    /// Drops what is known of map index `sig` (its rows are being removed, or it is no
    /// longer registered): the next query builds it again by a scan.
    pub fn forget(&self, sig: &str) {
        let mut state = self.state.write();
        state.maps.remove(sig);
        state.fresh.remove(sig);
    }

    /// Applies `batch` (one step of an updater) and records its row `changes` while
    /// holding the lock; returns the batch's ticket, not yet synced. `base(sig)` is the
    /// prefix of every row of map index `sig` (without partition).
    pub fn apply(
        &self,
        store: &dyn Store,
        batch: Batch,
        changes: &Changes,
        base: impl Fn(&str) -> Vec<u8>,
    ) -> Result<Ticket> {
        let mut state = self.state.write();
        let ticket = store.apply(batch)?;
        state.apply(store, changes, base);
        Ok(ticket)
    }

    /// A snapshot, the number of rows of map index `sig` (whose rows start with `base`)
    /// and a probe for each of `cuts`, all describing the same state.
    pub fn probe(
        &self,
        store: &dyn Store,
        sig: &str,
        base: &[u8],
        cuts: &[Cut<'_>],
    ) -> Result<Probed> {
        let state = self.ready(store, sig, base)?;
        let snapshot = store.snapshot();
        let order = state.maps.get(sig).ok_or_else(|| Error::Corrupt("view order".into()))?;
        let probes = cuts
            .iter()
            .map(|cut| match cut {
                Cut::Start(bound) => order.probe(&start_cut(bound)),
                Cut::End(bound) => order.probe_end(bound),
            })
            .collect();
        Ok(Probed { snapshot, total: order.total(), probes })
    }

    /// The state, read-locked, with a structure for `sig` (built if missing).
    fn ready(
        &self,
        store: &dyn Store,
        sig: &str,
        base: &[u8],
    ) -> Result<RwLockReadGuard<'_, State>> {
        let state = self.state.read();
        if state.maps.contains_key(sig) {
            return Ok(state);
        }
        drop(state);
        let mut state = self.state.write();
        if !state.maps.contains_key(sig) {
            let order = if state.fresh.contains(sig) {
                Order::empty(base)
            } else {
                Order::build(&*store.snapshot(), base, TARGET)?
            };
            state.maps.insert(sig.to_string(), order);
        }
        Ok(RwLockWriteGuard::downgrade(state))
    }
}

impl State {
    /// Records one applied step's changes; `store` sees that step.
    fn apply(&mut self, store: &dyn Store, changes: &Changes, base: impl Fn(&str) -> Vec<u8>) {
        let maps = changes.maps();
        if maps.is_empty() {
            return;
        }
        let snapshot = store.snapshot();
        for sig in maps {
            if self.fresh.contains(sig) {
                self.maps.entry(sig.to_string()).or_insert_with(|| Order::empty(&base(sig)));
            }
            let Some(order) = self.maps.get_mut(sig) else { continue };
            let inserted = Changes::of(&changes.inserted, sig);
            let removed = Changes::of(&changes.removed, sig);
            if let Err(err) = order.apply(&*snapshot, &inserted, &removed) {
                tracing::warn!(%err, sig, "view order out of step; rebuilt on next query");
                self.maps.remove(sig);
                self.fresh.remove(sig);
            }
        }
    }
}

/// The key every row before the start of a range starting at `bound` sorts below
/// (`None`: no row is before it).
fn start_cut(bound: &Bound<Vec<u8>>) -> Option<Vec<u8>> {
    match bound {
        Bound::Included(k) => Some(k.clone()),
        Bound::Excluded(k) => Some(successor(k)),
        Bound::Unbounded => None,
    }
}

/// The least key above `k`.
fn successor(k: &[u8]) -> Vec<u8> {
    let mut next = Vec::with_capacity(k.len() + 1);
    next.extend_from_slice(k);
    next.push(0);
    next
}

/// How to count the rows before a cut: known, or by reading part of one bucket.
#[derive(Debug)]
pub enum Probe {
    Known(u64),
    /// The rows before the cut are the `before` rows of the buckets below plus the rows
    /// of the cut's bucket (`count` rows from `lower` to `upper`) below `cut`.
    Scan {
        before: u64,
        count: u64,
        lower: Vec<u8>,
        upper: Bound<Vec<u8>>,
        cut: Vec<u8>,
    },
}

impl Probe {
    /// The rows before the cut, in `read` (the state the structure describes).
    pub fn rank(&self, read: &dyn Read) -> Result<u64> {
        match self {
            Probe::Known(n) => Ok(*n),
            Probe::Scan { before, count, lower, cut, .. } => {
                let range = (Bound::Included(lower.clone()), Bound::Excluded(cut.clone()));
                Ok(before + read.scan(&range, false, *count as usize)?.len() as u64)
            }
        }
    }
}

/// Rows read lazily from a snapshot.
pub type Rows = Box<dyn Iterator<Item = Result<Entry>> + Send>;

impl Probe {
    /// The rank of the cut and the rows of `range`, which begins at the cut in scan order
    /// (ascending: its start; `descending`: its end). The bucket rows a scanning probe
    /// must count lie next to the range, so one scan reads both: it starts at the
    /// bucket's edge, counts the rows before the cut, and goes on with the range. `page`:
    /// rows fetched per read past those. The first of those reads is a stream
    /// ([`Iter::streaming`]): how many of the bucket's rows lie before the cut is known only
    /// once they are read, so a page fetched at once would read up to a bucket's worth of
    /// rows that a short answer (`limit`) never uses.
    pub fn rank_and_rows(
        &self,
        read: &Snapshot,
        range: Range,
        descending: bool,
        page: usize,
    ) -> Result<(u64, Rows)> {
        let Probe::Scan { before, count, lower, upper, cut } = self else {
            let rows = Iter::streaming(read.clone(), range, descending, page);
            return Ok((self.rank(&**read)?, Box::new(rows.map(|r| Ok(r?)))));
        };
        let page = page.saturating_add(*count as usize);
        if !descending && reaches(&range.1, cut) {
            let scan = (Bound::Included(lower.clone()), range.1);
            let mut rows = Iter::streaming(read.clone(), scan, false, page).peekable();
            let n = skip_while(&mut rows, |key| key < cut.as_slice())?;
            return Ok((before + n, Box::new(rows.map(|r| Ok(r?)))));
        }
        if descending && !starts_above(&range.0, cut) {
            let scan = (range.0, upper.clone());
            let mut rows = Iter::streaming(read.clone(), scan, true, page).peekable();
            let n = skip_while(&mut rows, |key| key >= cut.as_slice())?;
            return Ok(((before + count).saturating_sub(n), Box::new(rows.map(|r| Ok(r?)))));
        }
        let rows = Iter::streaming(read.clone(), range, descending, page);
        Ok((self.rank(&**read)?, Box::new(rows.map(|r| Ok(r?)))))
    }
}

/// Whether a range ending at `end` holds every key below `cut`.
fn reaches(end: &Bound<Vec<u8>>, cut: &[u8]) -> bool {
    match end {
        Bound::Included(e) | Bound::Excluded(e) => e.as_slice() >= cut,
        Bound::Unbounded => true,
    }
}

/// Whether a range starting at `start` misses a key at or above `cut`.
fn starts_above(start: &Bound<Vec<u8>>, cut: &[u8]) -> bool {
    match start {
        Bound::Included(s) => s.as_slice() > cut,
        Bound::Excluded(s) => s.as_slice() >= cut,
        Bound::Unbounded => false,
    }
}

/// Consumes the leading rows whose key satisfies `skip`; returns how many.
fn skip_while(rows: &mut std::iter::Peekable<Iter>, skip: impl Fn(&[u8]) -> bool) -> Result<u64> {
    let mut n = 0;
    while let Some(row) = rows.next_if(|row| row.as_ref().is_ok_and(|(key, _)| skip(key))) {
        row?;
        n += 1;
    }
    Ok(n)
}

/// The rows of one map function in buckets; see the module docs.
#[derive(Debug)]
pub struct Order {
    /// The prefix of every row of the map.
    base: Vec<u8>,
    /// Bucket `i` holds the rows from `base + fences[i]` up to `base + fences[i + 1]`
    /// (the last one: every row above). `fences[0]` is empty. A fence is the shortest key
    /// above the last row of the bucket before and at most the bucket's first row, so
    /// fences are short.
    fences: Vec<Box<[u8]>>,
    counts: Vec<u64>,
    sums: Fenwick,
    /// Rows per bucket after a split.
    target: usize,
}

impl Order {
    /// The structure of a map with no rows; its rows start with `base`.
    pub fn empty(base: &[u8]) -> Order {
        Order::with_buckets(base, vec![Box::default()], vec![0], TARGET)
    }

    /// Builds the structure of the rows starting with `base` from `read`.
    pub fn build(read: &dyn Read, base: &[u8], target: usize) -> Result<Order> {
        let target = target.max(4);
        let (mut fences, mut counts): (Vec<Box<[u8]>>, _) = (vec![Box::default()], vec![0]);
        let mut range = prefix_range(base);
        let mut last: Option<Vec<u8>> = None;
        loop {
            let page = read.scan(&range, false, 4096)?;
            for (key, _) in page.iter() {
                match (counts.last_mut(), &last) {
                    (Some(n), Some(prev)) if (*n as usize) >= target => {
                        fences.push(separator(prev, key)[base.len()..].into());
                        counts.push(1);
                    }
                    (Some(n), _) => *n += 1,
                    (None, _) => {}
                }
                last = Some(key.clone());
            }
            match page.last() {
                Some((last, _)) if page.len() == 4096 => range.0 = Bound::Excluded(last.clone()),
                _ => break,
            }
        }
        Ok(Order::with_buckets(base, fences, counts, target))
    }

    fn with_buckets(base: &[u8], fences: Vec<Box<[u8]>>, counts: Vec<u64>, target: usize) -> Order {
        let sums = Fenwick::new(&counts);
        Order { base: base.to_vec(), fences, counts, sums, target: target.max(4) }
    }

    /// Every row of the map.
    pub fn total(&self) -> u64 {
        self.sums.prefix(self.counts.len())
    }

    /// Heap bytes held (fences and counts).
    pub fn heap_bytes(&self) -> usize {
        let fences: usize = self.fences.iter().map(|f| f.len()).sum();
        let vecs = self.fences.capacity() * std::mem::size_of::<Box<[u8]>>();
        fences + vecs + self.counts.capacity() * 8 + self.sums.heap_bytes()
    }

    /// The part of `key` after the map's prefix, or the rank of a key outside the map.
    fn suffix<'k>(&self, key: &'k [u8]) -> std::result::Result<&'k [u8], u64> {
        match key.strip_prefix(self.base.as_slice()) {
            Some(suffix) => Ok(suffix),
            None if key < self.base.as_slice() => Err(0),
            None => Err(self.total()),
        }
    }

    /// The bucket a key of the map (`suffix`: after the map's prefix) falls in.
    fn bucket(&self, suffix: &[u8]) -> usize {
        bucket_of(&self.fences, suffix)
    }

    fn full(&self, suffix: &[u8]) -> Vec<u8> {
        [self.base.as_slice(), suffix].concat()
    }

    /// The bucket's range of full keys.
    fn bucket_range(&self, i: usize) -> Range {
        bucket_range(&self.base, &self.fences, i)
    }

    /// How to count the rows below `cut` (`None`: none).
    fn probe(&self, cut: &Option<Vec<u8>>) -> Probe {
        let Some(key) = cut else { return Probe::Known(0) };
        let suffix = match self.suffix(key) {
            Ok(suffix) => suffix,
            Err(rank) => return Probe::Known(rank),
        };
        let i = self.bucket(suffix);
        let before = self.sums.prefix(i);
        if *self.fences[i] == *suffix || self.counts[i] == 0 {
            return Probe::Known(before);
        }
        let (lower, upper) = match self.bucket_range(i) {
            (Bound::Included(lower), upper) => (lower, upper),
            (_, upper) => (self.full(&self.fences[i]), upper),
        };
        Probe::Scan { before, count: self.counts[i], lower, upper, cut: key.clone() }
    }

    /// How to count the rows before the end of a range ending at `bound`.
    fn probe_end(&self, bound: &Bound<Vec<u8>>) -> Probe {
        match bound {
            Bound::Included(k) => self.probe(&Some(successor(k))),
            Bound::Excluded(k) => self.probe(&Some(k.clone())),
            Bound::Unbounded => Probe::Known(self.total()),
        }
    }

    /// The rows before `key`, reading the bucket it falls in from `read`.
    pub fn rank(&self, read: &dyn Read, key: &[u8]) -> Result<u64> {
        self.probe(&Some(key.to_vec())).rank(read)
    }

    /// Records rows `inserted` and `removed` (already applied in `read`), then splits and
    /// merges buckets. An error means the structure disagrees with `read`.
    pub fn apply(&mut self, read: &dyn Read, inserted: &[&[u8]], removed: &[&[u8]]) -> Result<()> {
        let out_of_step = || Error::Corrupt("view order out of step with the rows".into());
        for key in removed {
            let i = self.bucket(self.suffix(key).map_err(|_| out_of_step())?);
            self.counts[i] = self.counts[i].checked_sub(1).ok_or_else(out_of_step)?;
        }
        for key in inserted {
            let i = self.bucket(self.suffix(key).map_err(|_| out_of_step())?);
            self.counts[i] += 1;
        }
        self.rebalance(read)
    }

    /// Splits every bucket above twice the target (by scanning it) and merges every
    /// bucket below a quarter of it into the one before, when that stays within twice
    /// the target (empty buckets always merge); rebuilds the sums.
    fn rebalance(&mut self, read: &dyn Read) -> Result<()> {
        let (target, max) = (self.target as u64, 2 * self.target as u64);
        let mut fences = Vec::with_capacity(self.fences.len());
        let mut counts: Vec<u64> = Vec::with_capacity(self.counts.len());
        for i in 0..self.fences.len() {
            let count = self.counts[i];
            if count > max {
                let keys = read.scan(&self.bucket_range(i), false, count as usize + 1)?;
                if keys.len() as u64 != count {
                    return Err(Error::Corrupt("view order bucket count".into()));
                }
                let pieces = keys.len().div_ceil(self.target);
                for p in 0..pieces {
                    let (from, to) = (p * keys.len() / pieces, (p + 1) * keys.len() / pieces);
                    let fence = match from.checked_sub(1) {
                        Some(prev) => {
                            separator(&keys[prev].0, &keys[from].0)[self.base.len()..].into()
                        }
                        None => std::mem::take(&mut self.fences[i]),
                    };
                    fences.push(fence);
                    counts.push((to - from) as u64);
                }
                continue;
            }
            if let Some(last) = counts.last_mut()
                && count < target / 4
                && (count == 0 || *last + count <= max)
            {
                *last += count;
                continue;
            }
            fences.push(std::mem::take(&mut self.fences[i]));
            counts.push(count);
        }
        self.fences = fences;
        self.counts = counts;
        self.sums = Fenwick::new(&self.counts);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::sync::Arc;

    use bunko_storage::Memory;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;

    const BASE: &[u8] = b"m";

    fn commit(store: &Memory, inserted: &[Vec<u8>], removed: &[Vec<u8>]) -> Result<()> {
        let mut batch = Batch::new();
        for k in inserted {
            batch.put(k.clone(), b"v".to_vec());
        }
        for k in removed {
            batch.delete(k.clone());
        }
        store.commit(batch)?;
        Ok(())
    }

    fn model_rank(model: &BTreeSet<Vec<u8>>, key: &[u8]) -> u64 {
        model
            .range::<[u8], _>((Bound::Unbounded, Bound::Excluded(key)))
            .filter(|k| k.starts_with(BASE))
            .count() as u64
    }

    /// Every bucket's count is its rows in the model and at most twice the target.
    fn check_buckets(order: &Order, model: &BTreeSet<Vec<u8>>) {
        assert!(order.fences[0].is_empty());
        assert!(order.fences.windows(2).all(|w| w[0] < w[1]), "fences increase");
        for i in 0..order.fences.len() {
            let (lo, hi) = order.bucket_range(i);
            let rows = model.range((lo, hi)).count() as u64;
            assert_eq!(order.counts[i], rows, "bucket {i}");
            assert!(rows <= 2 * order.target as u64, "bucket {i} too big: {rows}");
        }
        assert_eq!(order.total(), model.len() as u64);
    }

    fn random_key(rng: &mut StdRng) -> Vec<u8> {
        let mut key = BASE.to_vec();
        for _ in 0..rng.random_range(1..5) {
            key.push(*b"\x00abc\xfe\xff".get(rng.random_range(0..6)).unwrap_or(&b'a'));
        }
        key
    }

    fn random_bound(rng: &mut StdRng, key: Vec<u8>) -> Bound<Vec<u8>> {
        if rng.random_bool(0.5) { Bound::Included(key) } else { Bound::Excluded(key) }
    }

    /// A range's rows read with the rank of where its scan begins match the model.
    fn check_scans(
        order: &Order,
        store: &Memory,
        model: &BTreeSet<Vec<u8>>,
        rng: &mut StdRng,
    ) -> Result<()> {
        let snapshot = store.snapshot();
        for _ in 0..10 {
            let (a, b) = (random_key(rng), random_key(rng));
            let (a, b) =
                if rng.random_bool(0.9) { (a.clone().min(b.clone()), a.max(b)) } else { (a, b) };
            let range = (random_bound(rng, a), random_bound(rng, b));
            let descending = rng.random_bool(0.5);
            let probe = if descending {
                order.probe_end(&range.1)
            } else {
                order.probe(&start_cut(&range.0))
            };
            let page = rng.random_range(1..5);
            let (rank, rows) = probe.rank_and_rows(&snapshot, range.clone(), descending, page)?;
            let rows: Vec<Vec<u8>> = rows.map(|r| r.map(|(k, _)| k)).collect::<Result<_>>()?;
            let mut expected: Vec<Vec<u8>> = if range_is_empty(&range) {
                Vec::new()
            } else {
                model.range(range.clone()).cloned().collect()
            };
            let cut = if descending { &range.1 } else { &range.0 };
            let before = model.iter().filter(|k| match (cut, descending) {
                (Bound::Included(c), false) | (Bound::Excluded(c), true) => *k < c,
                (Bound::Excluded(c), false) | (Bound::Included(c), true) => *k <= c,
                (Bound::Unbounded, _) => false,
            });
            assert_eq!(rank, before.count() as u64, "{range:?} descending {descending}");
            if descending {
                expected.reverse();
            }
            assert_eq!(rows, expected, "{range:?} descending {descending}");
        }
        Ok(())
    }

    /// Whether `BTreeSet::range` would panic on `range` (start above end, or equal and
    /// both excluded): no key is in it.
    fn range_is_empty(range: &Range) -> bool {
        match range {
            (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b))
                if a > b =>
            {
                true
            }
            (Bound::Excluded(a), Bound::Excluded(b)) => a == b,
            _ => false,
        }
    }

    #[test]
    fn ranks_match_a_sorted_model_over_random_inserts_and_deletes() -> Result<()> {
        for seed in 0..20 {
            let mut rng = StdRng::seed_from_u64(seed);
            let store = Memory::new();
            // Rows of neighbouring maps, which no bucket may count.
            commit(&store, &[b"l\xff".to_vec(), b"n".to_vec(), b"n\x00".to_vec()], &[])?;
            let mut model = BTreeSet::new();
            let target = rng.random_range(4..12);
            let mut order = Order::build(&store, BASE, target)?;
            let (mut splits, mut merges) = (0, 0);
            for step in 0..60 {
                let (mut inserted, mut removed) = (Vec::new(), Vec::new());
                // Mostly growing, then mostly shrinking.
                let deleting = rng.random_bool(if step < 30 { 0.2 } else { 0.8 });
                for _ in 0..rng.random_range(0..40) {
                    if deleting && !model.is_empty() {
                        let nth = rng.random_range(0..model.len());
                        let key = model.iter().nth(nth).cloned().unwrap_or_default();
                        if !removed.contains(&key) {
                            removed.push(key);
                        }
                        continue;
                    }
                    let key = random_key(&mut rng);
                    if !deleting && !model.contains(&key) && !inserted.contains(&key) {
                        inserted.push(key);
                    }
                }
                commit(&store, &inserted, &removed)?;
                model.extend(inserted.iter().cloned());
                for k in &removed {
                    model.remove(k);
                }
                let (ins, rem): (Vec<&[u8]>, Vec<&[u8]>) = (
                    inserted.iter().map(Vec::as_slice).collect(),
                    removed.iter().map(Vec::as_slice).collect(),
                );
                let buckets = order.fences.len();
                order.apply(&store, &ins, &rem)?;
                check_buckets(&order, &model);
                splits += usize::from(order.fences.len() > buckets);
                merges += usize::from(order.fences.len() < buckets);
                check_scans(&order, &store, &model, &mut rng)?;
                for _ in 0..20 {
                    let probe = match rng.random_range(0..4) {
                        0 => b"l".to_vec(),
                        1 => b"n\x01".to_vec(),
                        _ => random_key(&mut rng),
                    };
                    assert_eq!(
                        order.rank(&store, &probe)?,
                        model_rank(&model, &probe),
                        "seed {seed}"
                    );
                }
            }
            assert!(splits > 0 && merges > 0, "seed {seed}: {splits} splits, {merges} merges");
            let rebuilt = Order::build(&store, BASE, target)?;
            check_buckets(&rebuilt, &model);
        }
        Ok(())
    }

    /// The map's rows and the rows in each of `ranges`.
    fn counts(
        orders: &Orders,
        store: &Arc<dyn Store>,
        ranges: &[Range],
    ) -> Result<(u64, Vec<u64>)> {
        let cuts: Vec<Cut<'_>> =
            ranges.iter().flat_map(|r| [Cut::Start(&r.0), Cut::End(&r.1)]).collect();
        let probed = orders.probe(store.as_ref(), "m", BASE, &cuts)?;
        let mut counts = Vec::new();
        for pair in probed.probes.chunks(2) {
            let start = pair[0].rank(&*probed.snapshot)?;
            counts.push(pair[1].rank(&*probed.snapshot)? - start);
        }
        Ok((probed.total, counts))
    }

    #[test]
    fn counts_follow_commits_and_ranges() -> Result<()> {
        let store: Arc<dyn Store> = Arc::new(Memory::new());
        let orders = Orders::default();
        orders.mark_fresh("m");
        let keys: Vec<Vec<u8>> = (0..500u32).map(|i| [BASE, &i.to_be_bytes()].concat()).collect();
        let mut batch = Batch::new();
        let mut changes = Changes::default();
        for k in &keys {
            batch.put(k.clone(), b"v".to_vec());
        }
        changes.record("m", &Vec::new(), &keys);
        let ticket = orders.apply(store.as_ref(), batch, &changes, |_| BASE.to_vec())?;
        store.sync(ticket)?;
        let at = |i: usize| keys[i].clone();
        let ranges = [
            prefix_range(BASE),
            (Bound::Included(at(10)), Bound::Excluded(at(300))),
            (Bound::Excluded(at(10)), Bound::Included(at(300))),
            (Bound::Unbounded, Bound::Included(at(0))),
        ];
        assert_eq!(counts(&orders, &store, &ranges)?, (500, vec![500, 290, 290, 1]));
        // Keeping a row and removing another: only the removal counts.
        let mut batch = Batch::new();
        batch.delete(at(20));
        let mut changes = Changes::default();
        changes.record("m", &vec![at(20), at(21)], &vec![at(21)]);
        orders.apply(store.as_ref(), batch, &changes, |_| BASE.to_vec())?;
        assert_eq!(counts(&orders, &store, &ranges[1..2])?, (499, vec![289]));
        // A map index with rows from before a restart builds its structure by a scan,
        // and so does one that was forgotten.
        let restarted = Orders::default();
        assert_eq!(counts(&restarted, &store, &ranges[1..2])?, (499, vec![289]));
        orders.forget("m");
        assert_eq!(counts(&orders, &store, &ranges[1..2])?, (499, vec![289]));
        Ok(())
    }

    #[test]
    fn memory_stays_small_per_row() -> Result<()> {
        // The benchmark's view: 50 readings per device, keyed by device.
        let store = Memory::new();
        let base = crate::entries::row_base(7, "0123456789abcdef0123456789abcdef", None);
        let keys: Vec<Vec<u8>> = (0..20_000u32)
            .map(|i| {
                let (device, ts) = (i % 400, 1_700_000_000 + (i / 400) * 60);
                let key = serde_json::json!(format!("device-{device}"));
                let id = format!("bridge-{}:device-{device}-{ts}", device % 100);
                crate::entries::row_key(&base, &key, false, &id, 0)
            })
            .collect();
        commit(&store, &keys, &[])?;
        let order = Order::build(&store, &base, TARGET)?;
        let per_row = order.heap_bytes() as f64 / 20_000.0;
        // About 6 bytes per row with 16-row buckets: fences inside one key run into the id.
        assert!(per_row < 8.0, "{per_row} bytes per row");
        Ok(())
    }
}
