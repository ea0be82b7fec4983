//! Temporary keys for query operators that outgrow their memory budget (an aggregation
//! `$group` or `$sort` past its limit with `allowDiskUse`).
//!
//! A [`Spill`] owns one range of the store, `0x20 | id (u64) | the operator's key`: the
//! operator writes entries under keys of its choosing and reads them back in key order, so
//! the store's own ordering does the external sort. Entries are applied without waiting for
//! a sync (they need not survive a crash) and are removed when the `Spill` is dropped;
//! whatever a crash leaves behind is removed when the engine opens (`remove_all`).
//! Spill ids are not persisted: at start-up no spill is live, so ids restart from 1.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bunko_storage::{Batch, Entry, Store, prefix_range};

use crate::{Result, keys};

/// Entries per applied batch.
const BATCH: usize = 1000;

/// Entries fetched per page when reading back.
const PAGE: usize = 64;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// One operator's temporary keys; they are removed on drop.
pub struct Spill {
    store: Arc<dyn Store>,
    prefix: Vec<u8>,
}

impl Spill {
    pub(crate) fn new(store: Arc<dyn Store>) -> Spill {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        Spill { store, prefix: keys::spill_prefix(id) }
    }

    /// Stores `entries` (keys unique within this spill; a key given again replaces it).
    pub fn put(&self, entries: Vec<Entry>) -> Result<()> {
        let mut batch = Batch::new();
        for (key, value) in entries {
            batch.put([self.prefix.as_slice(), &key].concat(), value);
            if batch.len() >= BATCH {
                self.store.apply(std::mem::take(&mut batch))?;
            }
        }
        if !batch.is_empty() {
            self.store.apply(batch)?;
        }
        Ok(())
    }

    /// The entries whose key starts with `prefix`, in key order, read a page at a time.
    pub fn scan(&self, prefix: &[u8]) -> impl Iterator<Item = Result<Entry>> + Send + 'static {
        let range = prefix_range(&[self.prefix.as_slice(), prefix].concat());
        let strip = self.prefix.len();
        bunko_storage::Iter::new(self.store.snapshot(), range, false, PAGE).map(move |entry| {
            let (mut key, value) = entry?;
            key.drain(..strip.min(key.len()));
            Ok((key, value))
        })
    }
}

impl Drop for Spill {
    fn drop(&mut self) {
        if let Err(err) = remove(self.store.as_ref(), prefix_range(&self.prefix)) {
            tracing::warn!(%err, "removing temporary keys failed; they go at the next start");
        }
    }
}

/// Removes every spill entry (at start-up, what a crash left behind).
pub(crate) fn remove_all(store: &dyn Store) -> Result<()> {
    remove(store, keys::spill_range())
}

/// Removes a range page by page, without waiting for syncs.
fn remove(store: &dyn Store, mut range: bunko_storage::Range) -> Result<()> {
    loop {
        let page = store.scan(&range, false, BATCH)?;
        let Some((last, _)) = page.last() else { return Ok(()) };
        range.0 = std::ops::Bound::Excluded(last.clone());
        let mut batch = Batch::new();
        for (key, _) in page {
            batch.delete(key);
        }
        store.apply(batch)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_read_back_in_key_order_and_go_on_drop() -> Result<()> {
        let store: Arc<dyn Store> = Arc::new(bunko_storage::Memory::new());
        let spill = Spill::new(store.clone());
        let entries = (0..2500u32).rev().map(|i| (i.to_be_bytes().to_vec(), vec![1])).collect();
        spill.put(entries)?;
        let keys: Vec<Vec<u8>> =
            spill.scan(&[]).map(|e| e.map(|(k, _)| k)).collect::<Result<_>>()?;
        assert_eq!(keys.len(), 2500);
        assert!(keys.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(spill.scan(&0u32.to_be_bytes()[..3]).count(), 256);
        drop(spill);
        assert!(store.scan(&keys::spill_range(), false, 10)?.is_empty());
        Ok(())
    }

    #[test]
    fn leftovers_of_a_crash_are_removed_at_start() -> Result<()> {
        let store: Arc<dyn Store> = Arc::new(bunko_storage::Memory::new());
        let engine = crate::Engine::open(store.clone(), crate::Config::default())?;
        let spill = engine.spill();
        spill.put(vec![(b"k".to_vec(), b"v".to_vec())])?;
        std::mem::forget(spill);
        drop(engine);
        assert_eq!(store.scan(&keys::spill_range(), false, 10)?.len(), 1);
        let _reopened = crate::Engine::open(store.clone(), crate::Config::default())?;
        assert!(store.scan(&keys::spill_range(), false, 10)?.is_empty());
        Ok(())
    }
}
