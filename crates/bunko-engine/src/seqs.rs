//! Counts of a database's `Seq` entries by seq, so that "how many changes follow seq `s`"
//! (`_changes`' `pending`, an index build's total) costs a few hundred additions and one
//! short scan instead of a scan of every later change (CouchDB reads it from its by-seq
//! B-tree's reductions). Without them a client that pages through `_changes` with a `limit`
//! (PouchDB's replicator, `nano`'s follower) paid for the rest of the feed on every page.
//!
//! Seqs are cut into blocks of [`BLOCK`] consecutive numbers and blocks into groups of
//! [`GROUP`] blocks; each keeps how many `Seq` entries it holds now (a document has one, at
//! the seq of its latest change, so a write moves one entry from an older seq to a new
//! one). The entries after `s` are those of the groups after `s`'s group, of the blocks
//! after its block within that group, and of its block above `s`, read from the snapshot
//! (at most [`BLOCK`] entries). Memory: 4 bytes per block, so about one byte per 64 seqs.
//!
//! The counts live beside the order statistics of ids ([`crate::ids::IdOrder`]), under the
//! same locks and with the same consistency: built by one scan of the `Seq` keys the first
//! time they are needed, kept in step by every commit that writes documents, dropped (and
//! built again when next needed) by a commit that cannot say what it changed (`_purge`).

use std::ops::Bound;

use bunko_storage::{Iter, Read, Snapshot};

use crate::keys::{self, Key};
use crate::{Error, Result};

/// Seqs per block.
pub const BLOCK: u64 = 256;

/// Blocks per group.
const GROUP: usize = 256;

/// The counts of one database's `Seq` entries; see the module docs.
#[derive(Debug, Default)]
pub struct SeqCounts {
    /// Entries per block: block `b` holds the seqs `b * BLOCK .. (b + 1) * BLOCK`.
    blocks: Vec<u32>,
    /// Entries per group of [`GROUP`] blocks.
    groups: Vec<u64>,
}

impl SeqCounts {
    /// Counts the `Seq` entries of database `db` in `read`.
    pub fn build(read: &Snapshot, db: u64) -> Result<SeqCounts> {
        let mut counts = SeqCounts::default();
        for entry in Iter::new(read.clone(), keys::seq_range(db), false, 4096) {
            counts.add(keys::decode_seq(&entry?.0)?);
        }
        Ok(counts)
    }

    /// Counts a new entry at `seq`.
    pub fn add(&mut self, seq: u64) {
        let block = block_of(seq);
        if self.blocks.len() <= block {
            self.blocks.resize(block + 1, 0);
            self.groups.resize(block / GROUP + 1, 0);
        }
        self.blocks[block] += 1;
        self.groups[block / GROUP] += 1;
    }

    /// Uncounts the entry at `seq`; an error if none was counted there.
    pub fn remove(&mut self, seq: u64) -> Result<()> {
        let block = block_of(seq);
        match self.blocks.get_mut(block) {
            Some(n) if *n > 0 => {
                *n -= 1;
                self.groups[block / GROUP] -= 1;
                Ok(())
            }
            _ => Err(Error::Corrupt(format!("no change counted at seq {seq}"))),
        }
    }

    /// The entries of database `db` after `seq`, as `read` (which these counts describe)
    /// holds them.
    pub fn after(&self, read: &dyn Read, db: u64, seq: u64) -> Result<u64> {
        let block = block_of(seq);
        if block >= self.blocks.len() {
            return Ok(0);
        }
        let group = block / GROUP;
        let later_groups: u64 = self.groups[group + 1..].iter().sum();
        let group_end = ((group + 1) * GROUP).min(self.blocks.len());
        let later_blocks: u64 =
            self.blocks[block + 1..group_end].iter().map(|&n| u64::from(n)).sum();
        let mut within = 0;
        if self.blocks[block] > 0 {
            let end = (block as u64 + 1).saturating_mul(BLOCK);
            let range = (
                Bound::Excluded(Key::Seq(db, seq).encode()),
                Bound::Excluded(Key::Seq(db, end).encode()),
            );
            within = read.scan(&range, false, BLOCK as usize)?.len() as u64;
        }
        Ok(later_groups + later_blocks + within)
    }
}

fn block_of(seq: u64) -> usize {
    usize::try_from(seq / BLOCK).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::sync::Arc;

    use bunko_storage::{Batch, Memory, Store};
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;

    const DB: u64 = 9;

    /// Random writes move entries as documents change; the counts, kept in step or built
    /// afresh, agree with a count of the store's entries at every seq asked (and around
    /// the blocks' and groups' edges).
    #[test]
    fn changes_after_a_seq_match_a_full_count() -> Result<()> {
        let store = Arc::new(Memory::new());
        let mut rng = StdRng::seed_from_u64(20);
        // Entries of other databases on both sides must not count.
        let mut batch = Batch::new();
        batch.put(Key::Seq(DB - 1, 5).encode(), b"x".to_vec());
        batch.put(Key::Seq(DB + 1, 1).encode(), b"y".to_vec());
        store.commit(batch)?;
        let (mut counts, mut live, mut docs) = (SeqCounts::default(), BTreeSet::new(), Vec::new());
        let mut seq = 0u64;
        for round in 0..6 {
            for _ in 0..4000 {
                seq += 1;
                let mut batch = Batch::new();
                // Half the writes update an existing document: its old entry goes.
                let slot = rng.random_range(0..=docs.len());
                if slot < docs.len() && rng.random_bool(0.5) {
                    let old = std::mem::replace(&mut docs[slot], seq);
                    batch.delete(Key::Seq(DB, old).encode());
                    counts.remove(old)?;
                    live.remove(&old);
                } else {
                    docs.push(seq);
                }
                batch.put(Key::Seq(DB, seq).encode(), b"id".to_vec());
                store.commit(batch)?;
                counts.add(seq);
                live.insert(seq);
            }
            let built = SeqCounts::build(&store.snapshot(), DB)?;
            let edges = [0, 1, BLOCK - 1, BLOCK, BLOCK * GROUP as u64, seq - 1, seq, seq + 1];
            let random = (0..200).map(|_| rng.random_range(0..=seq + BLOCK));
            for at in edges.into_iter().chain(random) {
                let want = live.range(at + 1..).count() as u64;
                assert_eq!(
                    counts.after(store.as_ref(), DB, at)?,
                    want,
                    "round {round}, after {at}"
                );
                assert_eq!(built.after(store.as_ref(), DB, at)?, want, "built, after {at}");
            }
        }
        assert!(counts.remove(seq + 10_000).is_err(), "nothing counted there");
        Ok(())
    }
}
