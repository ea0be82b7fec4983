//! Measures the storage layer's limits on this machine, through `Store::commit` on
//! [`Fjall`] in a temporary directory:
//!
//! 1. **bulk**: `BATCHES` commits of 1000 documents each. A document is a ~1 KB body plus
//!    `SMALL` small keys (default 4: a `_changes` entry, two index entries and its
//!    `DocInfo`), all in the commit of its batch. Prints documents per second: the ceiling
//!    for `_bulk_docs` loading.
//! 2. **serial**: one thread, one single-put commit at a time, for 1 s. Every commit is its
//!    own sync: this is the disk's sync rate.
//! 3. **concurrent**: `THREADS` threads (default 64), each committing single-put batches
//!    for `SECS` seconds (default 3). Prints commits/s, syncs/s, commits per sync and
//!    commit latency: the ceiling for concurrent single-document writes.
//! 4. **writer lock**: as 3, but each commit reads its key and applies under one shared
//!    lock and syncs after releasing it, as the engine does for one database's writers.
//!
//! ```text
//! [LIMIT_DIR=dir] cargo run --release -p bunko-storage --example limit -- \
//!     [BATCHES] [SMALL] [THREADS] [SECS]
//! ```

use bunko_storage::{Batch, Fjall, Read, Store};
use parking_lot::Mutex;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

const DOCS_PER_BATCH: usize = 1000;

fn main() -> Result {
    let args: Vec<usize> =
        std::env::args().skip(1).map(|a| a.parse()).collect::<std::result::Result<_, _>>()?;
    let arg = |i: usize, default: usize| args.get(i).copied().unwrap_or(default);
    let (batches, small, threads, secs) = (arg(0, 50), arg(1, 4), arg(2, 64), arg(3, 3));

    // LIMIT_DIR picks the file system to measure (default: the system temp dir).
    let dir = match std::env::var_os("LIMIT_DIR") {
        Some(parent) => tempfile::tempdir_in(parent)?,
        None => tempfile::tempdir()?,
    };
    println!("fjall store in {}", dir.path().display());
    bulk(&Fjall::open(&dir.path().join("bulk"))?, batches, small)?;
    serial(&Fjall::open(&dir.path().join("serial"))?, Duration::from_secs(1))?;
    let store = Arc::new(Fjall::open(&dir.path().join("concurrent"))?);
    concurrent(&store, threads, Duration::from_secs(secs as u64), false)?;
    let store = Arc::new(Fjall::open(&dir.path().join("writer-lock"))?);
    concurrent(&store, threads, Duration::from_secs(secs as u64), true)?;
    Ok(())
}

/// Phase 1: 1000-document batches.
fn bulk(store: &Fjall, batches: usize, small: usize) -> Result {
    let mut rng = 0x2545_F491_4F6C_DD1D_u64;
    let start = Instant::now();
    let mut bytes = 0;
    for b in 0..batches {
        let mut batch = Batch::new();
        for d in 0..DOCS_PER_BATCH {
            let n = b * DOCS_PER_BATCH + d;
            let id = format!("doc-{n:010}");
            let body = body(&mut rng, &id);
            bytes += body.len();
            batch.put(format!("rev\x00db\x00{id}\x001-{:032x}", xorshift(&mut rng)), body);
            // With SMALL=3 this is DESIGN.md §3's benchmark shape (changes + 2 index entries).
            let small_keys = [
                format!("seq\x00db\x00{n:016x}"),
                format!("idx\x00db\x00by-type\x00{}\x00{id}", n % 7),
                format!("idx\x00db\x00by-date\x00{}\x00{id}", xorshift(&mut rng) % 100_000),
                format!("doc\x00db\x00{id}"),
            ];
            for (i, key) in small_keys.iter().cycle().take(small).enumerate() {
                batch.put(format!("{key}\x00{i}"), format!("1-{:032x}", xorshift(&mut rng)));
            }
        }
        store.commit(batch)?;
    }
    let elapsed = start.elapsed().as_secs_f64();
    let docs = (batches * DOCS_PER_BATCH) as f64;
    println!(
        "bulk:       {batches} commits x {DOCS_PER_BATCH} docs (1 KB body + {small} small keys): \
         {:.0} docs/s, {:.1} MB/s of bodies, {:.2} s, {} syncs, disk {:.1} MB",
        docs / elapsed,
        bytes as f64 / elapsed / 1e6,
        elapsed,
        store.syncs(),
        store.disk_size() as f64 / 1e6,
    );
    Ok(())
}

/// Phase 2: one committer, so every commit is its own sync.
fn serial(store: &Fjall, duration: Duration) -> Result {
    let start = Instant::now();
    let mut commits = 0u64;
    while start.elapsed() < duration {
        let mut batch = Batch::new();
        batch.put(format!("serial/{commits:08}"), vec![b'x'; 100]);
        store.commit(batch)?;
        commits += 1;
    }
    let elapsed = start.elapsed().as_secs_f64();
    println!(
        "serial:     1 thread, single-put commits: {:.0} commits/s = {:.0} syncs/s",
        commits as f64 / elapsed,
        store.syncs() as f64 / elapsed,
    );
    Ok(())
}

/// Phases 3 and 4: many committers sharing syncs. With `writer_lock`, every commit
/// reads its key and applies under one shared lock and syncs after releasing it, as the
/// engine does for the writers of one database.
fn concurrent(store: &Arc<Fjall>, threads: usize, duration: Duration, writer_lock: bool) -> Result {
    let stop = Arc::new(AtomicBool::new(false));
    let lock = Arc::new(Mutex::new(()));
    let (syncs_before, commits_before) = (store.syncs(), store.commits());
    let start = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (store, stop, lock) = (store.clone(), stop.clone(), lock.clone());
            std::thread::spawn(move || -> Result<Vec<u32>> {
                let mut latencies = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let key = format!("c/{t:03}/{:08}", latencies.len());
                    let began = Instant::now();
                    if writer_lock {
                        let writer = lock.lock();
                        let _old = store.get(key.as_bytes())?;
                        let mut batch = Batch::new();
                        batch.put(key, vec![b'x'; 100]);
                        let ticket = store.apply(batch)?;
                        drop(writer);
                        store.sync(ticket)?;
                    } else {
                        let mut batch = Batch::new();
                        batch.put(key, vec![b'x'; 100]);
                        store.commit(batch)?;
                    }
                    latencies.push(u32::try_from(began.elapsed().as_micros()).unwrap_or(u32::MAX));
                }
                Ok(latencies)
            })
        })
        .collect();
    std::thread::sleep(duration);
    stop.store(true, Ordering::Relaxed);
    let mut latencies = Vec::new();
    for handle in handles {
        latencies.extend(handle.join().map_err(|_| "committer panicked")??);
    }
    let elapsed = start.elapsed().as_secs_f64();
    let commits = store.commits() - commits_before;
    let syncs = store.syncs() - syncs_before;
    latencies.sort_unstable();
    let pct = |p: f64| {
        latencies
            .get(((latencies.len() as f64 * p) as usize).min(latencies.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0) as f64
            / 1000.0
    };
    let shape = if writer_lock { "one writer lock" } else { "independent" };
    println!(
        "concurrent: {threads} threads, single-put commits, {shape}: {:.0} commits/s, {:.0} syncs/s, \
         {:.1} commits/sync, latency p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        commits as f64 / elapsed,
        syncs as f64 / elapsed,
        commits as f64 / syncs.max(1) as f64,
        pct(0.5),
        pct(0.99),
        pct(1.0),
    );
    Ok(())
}

/// A ~1 KB JSON body with varying content (so it does not compress to nothing).
fn body(rng: &mut u64, id: &str) -> Vec<u8> {
    let mut body = format!("{{\"_id\":\"{id}\",\"type\":\"order\",\"items\":[");
    while body.len() < 1000 {
        body.push_str(&format!(
            "{{\"sku\":\"{:016x}\",\"qty\":{}}},",
            xorshift(rng),
            xorshift(rng) % 100
        ));
    }
    body.pop();
    body.push_str("]}");
    body.into_bytes()
}

fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}
