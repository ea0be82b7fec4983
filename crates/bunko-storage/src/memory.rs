//! [`Memory`]: an in-memory store for tests, with fault injection.
//!
//! The data is one `Arc<BTreeMap>`. A snapshot clones the `Arc` (O(1)); a commit edits the
//! map through [`Arc::make_mut`], which copies the whole map first if a snapshot still
//! shares it. That copy is O(n) per commit-after-snapshot, fine for tests and small data.
//!
//! Commits go through the same group commit as [`crate::Fjall`], with a sync that does
//! nothing unless a test asks it to be slow ([`Memory::set_sync_delay`]) or to fail
//! ([`Memory::fail_syncs`]).

use crate::group::Group;
use crate::{
    Batch, Durable, Entry, Error, Op, Range, Read, Result, Snapshot, Store, Ticket, clamp_range,
};
use parking_lot::RwLock;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

type Map = BTreeMap<Vec<u8>, Vec<u8>>;

/// An in-memory [`Store`]: nothing survives the process. See the module docs.
#[derive(Debug)]
pub struct Memory {
    data: RwLock<Arc<Map>>,
    group: Group,
    faults: Arc<Faults>,
}

/// The injected faults, shared with the group's sync thread.
#[derive(Debug, Default)]
struct Faults {
    fail_syncs: AtomicBool,
    sync_delay_micros: AtomicU64,
}

impl Default for Memory {
    fn default() -> Self {
        let faults = Arc::new(Faults::default());
        let group = {
            let faults = faults.clone();
            Group::new(Box::new(move || faults.sync()))
        };
        Memory { data: RwLock::default(), group, faults }
    }
}

impl Memory {
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes every following sync fail (`true`) or succeed again (`false`). One failed
    /// sync poisons the store for good, so `fail_syncs(false)` does not heal it.
    pub fn fail_syncs(&self, fail: bool) {
        self.faults.fail_syncs.store(fail, Ordering::SeqCst);
    }

    /// Makes every following sync sleep for `delay`, like a slow disk.
    pub fn set_sync_delay(&self, delay: Duration) {
        let micros = u64::try_from(delay.as_micros()).unwrap_or(u64::MAX);
        self.faults.sync_delay_micros.store(micros, Ordering::SeqCst);
    }

    /// Syncs run so far (successful or not); fewer than [`Memory::commits`] under
    /// concurrency means group commit is grouping.
    pub fn syncs(&self) -> u64 {
        self.group.syncs()
    }

    /// Batches applied so far.
    pub fn commits(&self) -> u64 {
        self.group.commits()
    }
}

impl Faults {
    fn sync(&self) -> Result<()> {
        let delay = self.sync_delay_micros.load(Ordering::SeqCst);
        if delay > 0 {
            std::thread::sleep(Duration::from_micros(delay));
        }
        if self.fail_syncs.load(Ordering::SeqCst) {
            return Err(Error::Io("injected sync failure".into()));
        }
        Ok(())
    }
}

impl Read for Memory {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.data.read().get(key).cloned())
    }

    fn scan(&self, range: &Range, reverse: bool, limit: usize) -> Result<Vec<Entry>> {
        // Scanned under the read lock: cloning the `Arc` instead would make the next
        // commit copy the whole map.
        Ok(scan_map(&self.data.read(), range, reverse, limit))
    }
}

impl Store for Memory {
    fn snapshot(&self) -> Snapshot {
        Arc::new(MemorySnapshot(self.data.read().clone()))
    }

    fn apply(&self, batch: Batch) -> Result<Ticket> {
        batch.validate()?;
        self.group.apply(|| {
            let mut data = self.data.write();
            let map = Arc::make_mut(&mut data);
            for op in batch.into_ops() {
                match op {
                    Op::Put(key, value, _) => map.insert(key, value),
                    Op::Delete(key) => map.remove(&key),
                };
            }
            Ok(())
        })
    }

    fn sync(&self, ticket: Ticket) -> Result<()> {
        self.group.sync(ticket)
    }

    fn durable(&self, ticket: Ticket) -> Durable {
        self.group.durable(ticket)
    }

    fn health(&self) -> Result<()> {
        self.group.health()
    }

    fn disk_size(&self) -> u64 {
        0
    }

    fn close(&self) -> Result<()> {
        self.group.close()
    }
}

/// A [`Memory`] snapshot: the map as it was, shared until the store next changes.
struct MemorySnapshot(Arc<Map>);

impl Read for MemorySnapshot {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.0.get(key).cloned())
    }

    fn scan(&self, range: &Range, reverse: bool, limit: usize) -> Result<Vec<Entry>> {
        Ok(scan_map(&self.0, range, reverse, limit))
    }
}

fn scan_map(map: &Map, range: &Range, reverse: bool, limit: usize) -> Vec<Entry> {
    let Some(bounds) = clamp_range(range) else {
        return Vec::new();
    };
    let entries = map.range::<[u8], _>(bounds).map(|(k, v)| (k.clone(), v.clone()));
    if reverse { entries.rev().take(limit).collect() } else { entries.take(limit).collect() }
}
