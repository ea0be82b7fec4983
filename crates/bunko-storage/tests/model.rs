//! Model-based test: seeded random operations on each backend, checked step by step
//! against a `BTreeMap`. Covers batches with repeated keys, apply/sync split, reverse and
//! bounded scans, paging, snapshots held across later writes, and (for fjall) closing and
//! reopening. A failure names the seed and step; rerun that seed to reproduce.

mod common;

use bunko_storage::{Batch, Entry, Fjall, Iter, Memory, Range, Read, Snapshot, Store, Ticket};
use common::{Backend, Fixture, TestResult, expected_scan};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// xorshift64: tiny, seeded, good enough to pick operations.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// A short key over an alphabet with the byte-order edges, so keys collide often. Its
    /// first byte is often one of the engine's key tags, which a store of format 4 keeps
    /// in keyspaces of their own, so that scans cross from one keyspace to another.
    fn key(&mut self) -> Vec<u8> {
        const ALPHABET: [u8; 6] = [0x00, 0x01, b'a', b'b', 0xfe, 0xff];
        const FIRST: [u8; 10] = [0x00, 0x01, 0x03, 0x04, 0x05, 0x0A, 0x0E, 0x20, 0xfe, 0xff];
        let first = FIRST[self.below(FIRST.len())];
        let rest: Vec<u8> = (0..self.below(3)).map(|_| ALPHABET[self.below(6)]).collect();
        [vec![first], rest].concat()
    }

    fn bound(&mut self) -> Bound<Vec<u8>> {
        match self.below(5) {
            0 => Bound::Unbounded,
            1 | 2 => Bound::Included(self.key()),
            _ => Bound::Excluded(self.key()),
        }
    }

    fn range(&mut self) -> Range {
        (self.bound(), self.bound())
    }
}

/// How to close and reopen a backend, keeping its data.
trait Reopen: Backend {
    fn reopen(fixture: Fixture<Self>) -> TestResult<Fixture<Self>>;
}

impl Reopen for Memory {
    /// A closed `Memory` stays closed; "reopening" copies its data into a new one.
    fn reopen(fixture: Fixture<Self>) -> TestResult<Fixture<Self>> {
        let mut batch = Batch::new();
        for (key, value) in
            fixture.store.scan(&(Bound::Unbounded, Bound::Unbounded), false, usize::MAX)?
        {
            batch.put(key, value);
        }
        let store = Memory::new();
        store.commit(batch)?;
        Ok(Fixture { store: Arc::new(store), dir: None })
    }
}

impl Reopen for Fjall {
    fn reopen(fixture: Fixture<Self>) -> TestResult<Fixture<Self>> {
        let Fixture { store, dir } = fixture;
        let path = store.path().to_path_buf();
        drop(store);
        Ok(Fixture { store: Arc::new(Fjall::open(&path)?), dir })
    }
}

struct Run<S> {
    /// `None` only while reopening.
    fixture: Option<Fixture<S>>,
    model: Model,
    snapshots: Vec<(Snapshot, Model)>,
    pending: Option<Ticket>,
    rng: Rng,
}

impl<S: Reopen> Run<S> {
    fn step(&mut self) -> TestResult {
        match self.rng.below(100) {
            0..30 => self.commit_one(),
            30..45 => self.commit_batch(true),
            45..52 => self.commit_batch(false),
            52..56 => self.sync_pending(),
            56..70 => self.check_get(),
            70..82 => self.check_scan(),
            82..86 => self.take_snapshot(),
            86..95 => self.check_snapshot(),
            95..99 => self.check_iter(),
            _ => self.reopen(),
        }
    }

    fn store(&self) -> &S {
        &self.fixture.as_ref().expect("store is open").store
    }

    fn commit_one(&mut self) -> TestResult {
        let mut batch = Batch::new();
        self.add_op(&mut batch);
        self.store().commit(batch)?;
        Ok(())
    }

    /// A batch of up to 8 writes (keys often repeat); `sync` false applies it and leaves
    /// the ticket to a later `sync_pending`.
    fn commit_batch(&mut self, sync: bool) -> TestResult {
        let mut batch = Batch::new();
        for _ in 0..self.rng.below(8) {
            self.add_op(&mut batch);
        }
        if sync {
            self.store().commit(batch)?;
        } else {
            self.pending = Some(self.store().apply(batch)?);
        }
        Ok(())
    }

    fn add_op(&mut self, batch: &mut Batch) {
        let key = self.rng.key();
        if self.rng.below(3) == 0 {
            batch.delete(key.clone());
            self.model.remove(&key);
        } else {
            let value = self.rng.next().to_be_bytes()[..self.rng.below(9)].to_vec();
            batch.put(key.clone(), value.clone());
            self.model.insert(key, value);
        }
    }

    fn sync_pending(&mut self) -> TestResult {
        if let Some(ticket) = self.pending.take() {
            self.store().sync(ticket)?;
        }
        Ok(())
    }

    fn check_get(&mut self) -> TestResult {
        let key = self.rng.key();
        assert_eq!(self.store().get(&key)?, self.model.get(&key).cloned(), "get {key:x?}");
        Ok(())
    }

    fn check_scan(&mut self) -> TestResult {
        let (range, reverse, limit) = (self.rng.range(), self.rng.below(2) == 1, self.limit());
        let want = expected_scan(&self.model, &range, reverse, limit);
        assert_eq!(self.store().scan(&range, reverse, limit)?, want, "scan {range:x?} {reverse}");
        Ok(())
    }

    fn limit(&mut self) -> usize {
        [0, 1, 2, 5, usize::MAX][self.rng.below(5)]
    }

    fn take_snapshot(&mut self) -> TestResult {
        if self.snapshots.len() == 4 {
            self.snapshots.remove(0);
        }
        self.snapshots.push((self.store().snapshot(), self.model.clone()));
        Ok(())
    }

    fn check_snapshot(&mut self) -> TestResult {
        if self.snapshots.is_empty() {
            return Ok(());
        }
        let (key, range, reverse, limit) =
            (self.rng.key(), self.rng.range(), self.rng.below(2) == 1, self.limit());
        let (snapshot, model) = &self.snapshots[self.rng.below(self.snapshots.len())];
        assert_eq!(snapshot.get(&key)?, model.get(&key).cloned(), "snapshot get {key:x?}");
        let want = expected_scan(model, &range, reverse, limit);
        assert_eq!(snapshot.scan(&range, reverse, limit)?, want, "snapshot scan {range:x?}");
        Ok(())
    }

    fn check_iter(&mut self) -> TestResult {
        let (range, reverse, page) = (self.rng.range(), self.rng.below(2) == 1, self.rng.below(4));
        let want = expected_scan(&self.model, &range, reverse, usize::MAX);
        let (snapshot, streaming) = (self.store().snapshot(), self.rng.below(2) == 1);
        let iter = match streaming {
            true => Iter::streaming(snapshot, range.clone(), reverse, page),
            false => Iter::new(snapshot, range.clone(), reverse, page),
        };
        let got: Vec<Entry> = iter.collect::<Result<_, _>>()?;
        assert_eq!(got, want, "iter {range:x?} reverse={reverse} page={page} {streaming}");
        Ok(())
    }

    /// Closes (syncing everything applied), drops every handle, and reopens.
    fn reopen(&mut self) -> TestResult {
        self.store().close()?;
        self.pending = None;
        self.snapshots.clear();
        let fixture = self.fixture.take().ok_or("store is open")?;
        self.fixture = Some(S::reopen(fixture)?);
        Ok(())
    }

    fn check_all(&self) -> TestResult {
        let everything = (Bound::Unbounded, Bound::Unbounded);
        let want = expected_scan(&self.model, &everything, false, usize::MAX);
        assert_eq!(self.store().scan(&everything, false, usize::MAX)?, want);
        Ok(())
    }
}

fn run<S: Reopen>(seed: u64, steps: usize) -> TestResult {
    run_on(S::open_fresh()?, seed, steps)
}

fn run_on<S: Reopen>(fixture: Fixture<S>, seed: u64, steps: usize) -> TestResult {
    let fixture = Some(fixture);
    let (model, snapshots, rng) = (Model::new(), Vec::new(), Rng::new(seed));
    let mut run = Run { fixture, model, snapshots, pending: None, rng };
    for step in 0..steps {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run.step()));
        match result {
            Ok(Ok(())) => {}
            Ok(Err(err)) => return Err(format!("seed {seed} step {step}: {err}").into()),
            Err(panic) => {
                eprintln!("seed {seed} step {step} failed");
                std::panic::resume_unwind(panic);
            }
        }
    }
    run.sync_pending()?;
    run.check_all()
}

#[test]
fn memory_matches_model() -> TestResult {
    for seed in 1..=8 {
        run::<Memory>(seed, 5_000)?;
    }
    Ok(())
}

#[test]
fn fjall_matches_model_seed_1() -> TestResult {
    run::<Fjall>(1, 1_500)
}

#[test]
fn fjall_matches_model_seed_2() -> TestResult {
    run::<Fjall>(2, 1_500)
}

#[test]
fn fjall_matches_model_seed_3() -> TestResult {
    run::<Fjall>(3, 1_500)
}

/// A directory of format 3 keeps all its keys in one keyspace, through the same operations.
#[test]
fn fjall_format_3_matches_model() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("db");
    std::fs::create_dir_all(&path)?;
    std::fs::write(path.join("BUNKO_FORMAT"), "bunko storage format 3\n")?;
    let store = Fjall::open(&path)?;
    assert_eq!(store.format(), 3);
    run_on(Fixture { store: Arc::new(store), dir: Some(dir) }, 4, 1_000)
}
