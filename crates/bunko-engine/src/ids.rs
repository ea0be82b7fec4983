//! Order statistics of document ids: how many live documents of a database sort before an
//! id, and which live document has a given position, so that `_all_docs`' `offset` and
//! `skip` cost O(log n) plus one short scan wherever the range starts (CouchDB reads both
//! from its by-id B-tree's reductions; issue 20, point 7).
//!
//! The database's `Doc` keys (live and deleted documents alike: a deleted document keeps
//! its key) are cut into buckets of consecutive keys. Per bucket an [`IdOrder`] keeps its
//! *fence* (the shortest separator above the bucket before, without the database's
//! prefix), its number of keys, and its number of live documents, the latter also in a
//! Fenwick tree. The live documents before a key are the live documents of the buckets
//! before the key's bucket (a binary search over the fences and a prefix sum, O(log b))
//! plus those of its bucket below the key, read from the snapshot: at most twice
//! [`TARGET`] keys. The `n`-th live document is found the other way round (a Fenwick
//! search, then one bucket read). Buckets only grow, since a `Doc` key is never removed
//! while its database exists; one past twice the target is split by scanning it.
//!
//! Memory: about 45 bytes per bucket, so about one byte per document.
//!
//! Consistency, as for view rows (`bunko-views`' `order.rs`): every commit that writes `Doc` keys holds
//! the structure's write lock while it applies its batch and records its changes
//! ([`IdOrder::lock`], [`Locked::record`]); a reader takes its snapshot and reads the
//! structure under the read lock ([`IdOrder::read`]), so both describe the same documents.
//! The structure is built by one scan of the database's `Doc` keys the first time a query
//! needs it (writes to the database wait meanwhile), and kept in step from then on.

use std::ops::Bound;

use bunko_storage::{Range, Read, Snapshot, Store, prefix_range};
use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::buckets::separator;
use crate::buckets::{Fenwick, bucket_of, bucket_range};
use crate::keys::{self, Key};
use crate::records::{self, DocInfo};
use crate::seqs::SeqCounts;
use crate::{Error, Result};

/// Keys per bucket after a split or a build.
pub const TARGET: usize = 32;

/// The order statistics of one database's document ids, and the counts of its changes by
/// seq ([`SeqCounts`]); each empty until a query needs it.
#[derive(Debug, Default)]
pub struct IdOrder {
    state: RwLock<Option<Buckets>>,
    seqs: RwLock<Option<SeqCounts>>,
}

/// The `Doc` keys one commit writes, in the order it staged them.
#[derive(Debug, Default)]
pub struct IdChanges {
    docs: Vec<(String, Change)>,
    /// The commit changed documents it does not list (`_purge`): the structures are
    /// dropped, to be built again.
    unlisted: bool,
}

#[derive(Debug, Clone, Copy)]
struct Change {
    /// The document had no `Doc` key before.
    created: bool,
    was_live: bool,
    live: bool,
    /// The seq of its `Seq` entry before (none for a new document), and now.
    old_seq: Option<u64>,
    seq: u64,
}

impl IdChanges {
    /// Records a write of document `id`: `was_live` is `None` for a new document, else
    /// whether its winner was live; `live`, whether it is now; its `Seq` entry moves from
    /// `old_seq` (none for a new document) to `seq`.
    pub fn record(
        &mut self,
        id: &str,
        was_live: Option<bool>,
        live: bool,
        old_seq: Option<u64>,
        seq: u64,
    ) {
        let created = was_live.is_none();
        let change = Change { created, was_live: was_live == Some(true), live, old_seq, seq };
        self.docs.push((id.to_string(), change));
    }

    /// The changes of a commit that removes or rewrites documents without listing them.
    pub fn unlisted() -> IdChanges {
        IdChanges { docs: Vec::new(), unlisted: true }
    }
}

/// The write-locked structures of a database, for one commit.
pub struct Locked<'a> {
    state: RwLockWriteGuard<'a, Option<Buckets>>,
    seqs: RwLockWriteGuard<'a, Option<SeqCounts>>,
}

impl IdOrder {
    /// Locks the structures for a commit: apply the batch, then [`Locked::record`] it.
    pub fn lock(&self) -> Locked<'_> {
        Locked { state: self.state.write(), seqs: self.seqs.write() }
    }

    /// The `Seq` entries of database `db` after `seq`: how many changes follow it.
    pub fn changes_after(&self, store: &dyn Store, db: u64, seq: u64) -> Result<u64> {
        let mut counts = self.seqs.read();
        if counts.is_none() {
            drop(counts);
            let mut built = self.seqs.write();
            if built.is_none() {
                *built = Some(SeqCounts::build(&store.snapshot(), db)?);
            }
            counts = RwLockWriteGuard::downgrade(built);
        }
        let counts = counts.as_ref().ok_or_else(|| Error::Corrupt("seq counts".into()))?;
        counts.after(&*store.snapshot(), db, seq)
    }

    /// Whether a query has needed the structure since the database was opened.
    pub fn is_built(&self) -> bool {
        self.state.read().is_some()
    }

    /// Runs `f` with a snapshot and the structure describing it (built if missing) for the
    /// documents of database `db`.
    pub fn read<T>(
        &self,
        store: &dyn Store,
        db: u64,
        f: impl FnOnce(&Ranks<'_>) -> Result<T>,
    ) -> Result<T> {
        let state = self.ready(store, db)?;
        let buckets = state.as_ref().ok_or_else(|| Error::Corrupt("id order".into()))?;
        f(&Ranks { buckets, snapshot: store.snapshot() })
    }

    fn ready(&self, store: &dyn Store, db: u64) -> Result<RwLockReadGuard<'_, Option<Buckets>>> {
        let state = self.state.read();
        if state.is_some() {
            return Ok(state);
        }
        drop(state);
        let mut state = self.state.write();
        if state.is_none() {
            *state = Some(Buckets::build(&*store.snapshot(), db, TARGET)?);
        }
        Ok(RwLockWriteGuard::downgrade(state))
    }
}

impl Locked<'_> {
    /// Records `changes`, which `read` (the store, under the database's writer lock)
    /// already shows. A structure that disagrees is dropped, to be built again.
    pub fn record(mut self, read: &dyn Read, db: u64, changes: &IdChanges) {
        if changes.unlisted {
            return self.forget();
        }
        if let Some(counts) = self.seqs.as_mut() {
            let moved = changes.docs.iter().try_for_each(|(_, change)| {
                change.old_seq.map_or(Ok(()), |old| counts.remove(old))?;
                counts.add(change.seq);
                Ok::<_, Error>(())
            });
            if let Err(err) = moved {
                tracing::warn!(%err, db, "change counts out of step; rebuilt when next needed");
                *self.seqs = None;
            }
        }
        let Some(buckets) = self.state.as_mut() else { return };
        if let Err(err) = buckets.record(read, db, changes) {
            tracing::warn!(%err, db, "document id order out of step; rebuilt on next query");
            *self.state = None;
        }
    }

    /// Drops the structures (a commit failed half-way), to be built again.
    pub fn forget(mut self) {
        *self.state = None;
        *self.seqs = None;
    }
}

/// The structure and a snapshot it describes.
pub struct Ranks<'a> {
    buckets: &'a Buckets,
    pub snapshot: Snapshot,
}

impl Ranks<'_> {
    /// The live documents whose `Doc` key sorts below `key`.
    pub fn rank(&self, key: &[u8]) -> Result<u64> {
        self.buckets.rank(&*self.snapshot, key)
    }

    /// The bucket holding `key` or, with `below`, the keys just below it (a different one
    /// when `key` is a bucket's first key): what a scan that passes `key` on its way
    /// reads, without a read. `None` for a key outside the database's `Doc` keys.
    pub fn span_at(&self, key: &[u8], below: bool) -> Option<Span> {
        let suffix = key.strip_prefix(self.buckets.base.as_slice())?;
        let fences = &self.buckets.fences;
        let i = match below {
            false => self.buckets.bucket(suffix),
            true => fences.partition_point(|f| **f < *suffix).saturating_sub(1),
        };
        Some(self.buckets.span(i))
    }

    /// The bucket holding the live document at position `n` (from 0, in id order), and
    /// its position among the bucket's live documents; `None` past the last one.
    pub fn span_of_nth(&self, n: u64) -> Option<(Span, u64)> {
        let (i, pos) = self.buckets.sums.find(n)?;
        Some((self.buckets.span(i), pos))
    }
}

/// One bucket of ids as a scan sees it.
#[derive(Debug, Clone)]
pub struct Span {
    /// Its `Doc` keys' range.
    pub range: Range,
    /// The live documents of the buckets before it.
    pub live_before: u64,
    /// Its live documents.
    pub live: u64,
    /// Its keys, live or not: the most entries a scan of it reads.
    pub keys: usize,
}

/// The buckets of one database's `Doc` keys; see the module docs.
#[derive(Debug)]
struct Buckets {
    /// The prefix of every `Doc` key of the database.
    base: Vec<u8>,
    /// Bucket `i` holds the keys from `base + fences[i]` up to `base + fences[i + 1]`
    /// (the last one: every key above). `fences[0]` is empty.
    fences: Vec<Box<[u8]>>,
    keys: Vec<u32>,
    live: Vec<u32>,
    sums: Fenwick,
    target: usize,
}

/// Whether a stored `DocInfo` has a live winner.
pub(crate) fn is_live(value: &[u8]) -> Result<bool> {
    let info: DocInfo = records::decode(value)?;
    Ok(!info.winner()?.1)
}

impl Buckets {
    /// Builds the buckets of database `db` from `read`.
    fn build(read: &dyn Read, db: u64, target: usize) -> Result<Buckets> {
        let base = keys::doc_range_prefix(db);
        let target = target.max(2);
        let (mut fences, mut counts, mut live): (Vec<Box<[u8]>>, _, _) =
            (vec![Box::default()], vec![0u32], vec![0u32]);
        let mut range = prefix_range(&base);
        let mut last: Option<Vec<u8>> = None;
        loop {
            let page = read.scan_heads(&range, false, 4096)?;
            for (key, value) in &page {
                if let (Some(&n), Some(prev)) = (counts.last(), &last)
                    && n as usize >= target
                {
                    fences.push(separator(prev, key)[base.len()..].into());
                    counts.push(0);
                    live.push(0);
                }
                if let (Some(n), Some(l)) = (counts.last_mut(), live.last_mut()) {
                    *n += 1;
                    *l += u32::from(is_live(value)?);
                }
                last = Some(key.clone());
            }
            match page.last() {
                Some((last, _)) if page.len() == 4096 => range.0 = Bound::Excluded(last.clone()),
                _ => break,
            }
        }
        let sums = Fenwick::new(&live.iter().map(|&l| u64::from(l)).collect::<Vec<_>>());
        Ok(Buckets { base, fences, keys: counts, live, sums, target })
    }

    /// The bucket a key of the database (`suffix`: after its prefix) falls in.
    fn bucket(&self, suffix: &[u8]) -> usize {
        bucket_of(&self.fences, suffix)
    }

    /// The bucket's range of full keys.
    fn bucket_range(&self, i: usize) -> Range {
        bucket_range(&self.base, &self.fences, i)
    }

    fn span(&self, i: usize) -> Span {
        Span {
            range: self.bucket_range(i),
            live_before: self.sums.prefix(i),
            live: u64::from(self.live[i]),
            keys: self.keys[i] as usize,
        }
    }

    fn total(&self) -> u64 {
        self.sums.prefix(self.fences.len())
    }

    fn rank(&self, read: &dyn Read, key: &[u8]) -> Result<u64> {
        let Some(suffix) = key.strip_prefix(self.base.as_slice()) else {
            return Ok(if key < self.base.as_slice() { 0 } else { self.total() });
        };
        let i = self.bucket(suffix);
        let mut n = self.sums.prefix(i);
        if self.live[i] > 0 && *self.fences[i] != *suffix {
            let range = (self.bucket_range(i).0, Bound::Excluded(key.to_vec()));
            for (_, value) in read.scan_heads(&range, false, self.keys[i] as usize)? {
                n += u64::from(is_live(&value)?);
            }
        }
        Ok(n)
    }

    /// Records `changes` (already applied in `read`), then splits every bucket past twice
    /// the target.
    fn record(&mut self, read: &dyn Read, db: u64, changes: &IdChanges) -> Result<()> {
        let mut full = Vec::new();
        for (id, change) in &changes.docs {
            let key = Key::Doc(db, id).encode();
            let suffix = key.strip_prefix(self.base.as_slice()).ok_or_else(out_of_step)?;
            let i = self.bucket(suffix);
            if change.created {
                self.keys[i] += 1;
                if self.keys[i] as usize > 2 * self.target {
                    full.push(i);
                }
            }
            let delta = i64::from(change.live) - i64::from(change.was_live);
            if delta != 0 {
                self.live[i] =
                    self.live[i].checked_add_signed(delta as i32).ok_or_else(out_of_step)?;
                self.sums.add(i, delta);
            }
        }
        if full.is_empty() {
            return Ok(());
        }
        full.sort_unstable();
        full.dedup();
        self.split(read, &full)
    }

    /// Splits buckets `full` (ascending) by scanning them; rebuilds the sums.
    fn split(&mut self, read: &dyn Read, full: &[usize]) -> Result<()> {
        let extra = full.len() * 2;
        let mut fences = Vec::with_capacity(self.fences.len() + extra);
        let mut counts = Vec::with_capacity(self.keys.len() + extra);
        let mut live = Vec::with_capacity(self.live.len() + extra);
        let mut next = full.iter().peekable();
        for i in 0..self.fences.len() {
            if next.next_if_eq(&&i).is_none() {
                fences.push(std::mem::take(&mut self.fences[i]));
                counts.push(self.keys[i]);
                live.push(self.live[i]);
                continue;
            }
            let entries =
                read.scan_heads(&self.bucket_range(i), false, self.keys[i] as usize + 1)?;
            if entries.len() != self.keys[i] as usize {
                return Err(out_of_step());
            }
            let pieces = entries.len().div_ceil(self.target);
            for p in 0..pieces {
                let (from, to) = (p * entries.len() / pieces, (p + 1) * entries.len() / pieces);
                let fence = match from.checked_sub(1) {
                    Some(prev) => {
                        separator(&entries[prev].0, &entries[from].0)[self.base.len()..].into()
                    }
                    None => std::mem::take(&mut self.fences[i]),
                };
                let mut alive = 0;
                for (_, value) in &entries[from..to] {
                    alive += u32::from(is_live(value)?);
                }
                fences.push(fence);
                counts.push((to - from) as u32);
                live.push(alive);
            }
        }
        self.sums = Fenwick::new(&live.iter().map(|&l| u64::from(l)).collect::<Vec<_>>());
        (self.fences, self.keys, self.live) = (fences, counts, live);
        Ok(())
    }
}

fn out_of_step() -> Error {
    Error::Corrupt("document id order out of step with the documents".into())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use bunko_storage::{Batch, Memory};
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::revtree::RevTree;

    const DB: u64 = 5;

    fn info(live: bool) -> Vec<u8> {
        let mut tree = RevTree::default();
        let rev = bunko_doc::RevId::next_with(None, !live, b"{}", &[]);
        tree.push(rev, None, !live);
        records::encode(&DocInfo { seq: 1, tree, size: 2 })
    }

    /// Live documents below `key` in the model.
    fn model_rank(model: &BTreeMap<String, bool>, key: &[u8]) -> u64 {
        model
            .iter()
            .filter(|(id, live)| **live && Key::Doc(DB, id).encode().as_slice() < key)
            .count() as u64
    }

    /// The key of the live document at position `n`, found through its bucket's span.
    fn nth(ranks: &Ranks<'_>, n: u64) -> Result<Option<Vec<u8>>> {
        let Some((span, pos)) = ranks.span_of_nth(n) else { return Ok(None) };
        let entries = ranks.snapshot.scan_heads(&span.range, false, usize::MAX)?;
        assert_eq!(entries.len(), span.keys);
        let mut live = Vec::new();
        for (key, value) in entries {
            if is_live(&value)? {
                live.push(key);
            }
        }
        assert_eq!(live.len() as u64, span.live);
        Ok(live.into_iter().nth(pos as usize))
    }

    /// The spans at `probe` hold it (or the keys just below it), with the live documents
    /// of the model before them.
    fn check_spans(ranks: &Ranks<'_>, model: &BTreeMap<String, bool>, probe: &[u8]) -> Result<()> {
        use std::ops::RangeBounds;
        for below in [false, true] {
            let Some(span) = ranks.span_at(probe, below) else { panic!("{probe:?} in the db") };
            let start = match &span.range.0 {
                Bound::Included(k) => k.clone(),
                _ => panic!("a bucket starts at its fence"),
            };
            assert_eq!(span.live_before, model_rank(model, &start));
            // The keys just below a bucket's first key are the bucket's before it.
            assert!(!below || start.as_slice() < probe, "{probe:?}: {:?}", span.range);
            let ends_at = span.range.1 == Bound::Excluded(probe.to_vec());
            let holds = span.range.contains(&probe.to_vec()) || (below && ends_at);
            assert!(holds, "{probe:?} below={below}: {:?}", span.range);
        }
        Ok(())
    }

    fn random_id(rng: &mut StdRng) -> String {
        let chars = ['a', 'b', ':', '\u{0}', 'z'];
        (0..rng.random_range(1..6)).map(|_| chars[rng.random_range(0..chars.len())]).collect()
    }

    #[test]
    fn ranks_and_positions_match_a_model_over_random_writes_and_deletes() -> Result<()> {
        for seed in 0..12 {
            let mut rng = StdRng::seed_from_u64(seed);
            let store = Memory::new();
            // Documents of the neighbouring databases, which no bucket may count.
            let mut batch = Batch::new();
            batch.put(Key::Doc(DB - 1, "zz").encode(), info(true));
            batch.put(Key::Doc(DB + 1, "").encode(), info(true));
            store.commit(batch)?;
            let order = IdOrder::default();
            let mut model: BTreeMap<String, bool> = BTreeMap::new();
            for step in 0..50 {
                if step == 5 {
                    // Built from what is stored so far, then kept in step.
                    order.read(&store, DB, |_| Ok(()))?;
                }
                let mut batch = Batch::new();
                let mut changes = IdChanges::default();
                for _ in 0..rng.random_range(0..30) {
                    let id = random_id(&mut rng);
                    let live = rng.random_bool(0.7);
                    let was = model.insert(id.clone(), live);
                    batch.put(Key::Doc(DB, &id).encode(), info(live));
                    changes.record(&id, was, live, None, 0);
                }
                let locked = order.lock();
                store.commit(batch)?;
                locked.record(&store, DB, &changes);
                if step < 5 {
                    continue;
                }
                let live: Vec<&String> =
                    model.iter().filter(|(_, l)| **l).map(|(k, _)| k).collect();
                order.read(&store, DB, |ranks| {
                    for _ in 0..20 {
                        let probe = Key::Doc(DB, &random_id(&mut rng)).encode();
                        assert_eq!(ranks.rank(&probe)?, model_rank(&model, &probe), "seed {seed}");
                    }
                    assert_eq!(ranks.rank(&[0x03])?, 0);
                    assert_eq!(ranks.rank(&[0x04])?, live.len() as u64);
                    for (n, id) in live.iter().enumerate() {
                        assert_eq!(nth(ranks, n as u64)?, Some(Key::Doc(DB, id).encode()));
                    }
                    assert_eq!(nth(ranks, live.len() as u64)?, None);
                    for _ in 0..20 {
                        let probe = Key::Doc(DB, &random_id(&mut rng)).encode();
                        check_spans(ranks, &model, &probe)?;
                    }
                    Ok(())
                })?;
            }
            let state = order.state.read();
            let buckets = state.as_ref().ok_or_else(out_of_step)?;
            assert!(buckets.fences.len() > 1, "seed {seed}: no split");
            assert!(buckets.keys.iter().all(|&k| k as usize <= 2 * TARGET));
            assert_eq!(buckets.keys.iter().sum::<u32>() as usize, model.len());
        }
        Ok(())
    }
}
