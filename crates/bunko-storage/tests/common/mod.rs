//! Shared by the conformance suite and the model test: backends, fixtures, and a reference
//! implementation of range scans over a `BTreeMap`.

#![allow(dead_code, reason = "each test crate uses a different subset")]

use bunko_storage::{Entry, Fjall, Memory, Range, Store};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;
use std::time::Duration;
use tempfile::TempDir;

pub type TestResult<T = ()> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// What the suite needs from a backend beyond [`Store`].
pub trait Backend: Store + Sized + 'static {
    /// Opens a fresh, empty store; the `TempDir`, if any, must outlive it.
    fn open_fresh() -> TestResult<Fixture<Self>>;
    fn syncs(&self) -> u64;
    fn commits(&self) -> u64;
    /// Makes syncs take a while, so that concurrent commits must group. Fjall's syncs
    /// are real fsyncs and slow enough already.
    fn slow_syncs(&self) {}
}

/// A store and the directory it lives in. Fields drop in order: store, then directory.
pub struct Fixture<S> {
    pub store: Arc<S>,
    pub dir: Option<TempDir>,
}

impl Backend for Memory {
    fn open_fresh() -> TestResult<Fixture<Self>> {
        Ok(Fixture { store: Arc::new(Memory::new()), dir: None })
    }
    fn syncs(&self) -> u64 {
        Memory::syncs(self)
    }
    fn commits(&self) -> u64 {
        Memory::commits(self)
    }
    fn slow_syncs(&self) {
        self.set_sync_delay(Duration::from_millis(2));
    }
}

impl Backend for Fjall {
    fn open_fresh() -> TestResult<Fixture<Self>> {
        let dir = tempfile::tempdir()?;
        let store = Fjall::open(&dir.path().join("db"))?;
        Ok(Fixture { store: Arc::new(store), dir: Some(dir) })
    }
    fn syncs(&self) -> u64 {
        Fjall::syncs(self)
    }
    fn commits(&self) -> u64 {
        Fjall::commits(self)
    }
}

/// Whether `key` lies in `range`.
pub fn contains(range: &Range, key: &[u8]) -> bool {
    let above = match &range.0 {
        Bound::Included(start) => key >= start.as_slice(),
        Bound::Excluded(start) => key > start.as_slice(),
        Bound::Unbounded => true,
    };
    let below = match &range.1 {
        Bound::Included(end) => key <= end.as_slice(),
        Bound::Excluded(end) => key < end.as_slice(),
        Bound::Unbounded => true,
    };
    above && below
}

/// What `scan(range, reverse, limit)` must return on a store holding `model`.
pub fn expected_scan(
    model: &BTreeMap<Vec<u8>, Vec<u8>>,
    range: &Range,
    reverse: bool,
    limit: usize,
) -> Vec<Entry> {
    let matching = model.iter().filter(|(key, _)| contains(range, key));
    let entries = matching.map(|(k, v)| (k.clone(), v.clone()));
    if reverse { entries.rev().take(limit).collect() } else { entries.take(limit).collect() }
}
