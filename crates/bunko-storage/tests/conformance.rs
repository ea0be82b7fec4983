//! One conformance suite for every [`Store`]: each generic test below runs on [`Memory`]
//! and on [`Fjall`] (in a temporary directory) through the `conformance!` macro.
//! Backend-specific behaviour (fault injection, reopening) follows at the end.

mod common;

use bunko_storage::{
    Batch, Compression, Entry, Error, FORMAT_VERSION, Fjall, FjallOptions, Iter, MAX_KEY_LEN,
    Memory, Range, Read, Store, Ticket, prefix_range,
};
use common::{Backend, Fixture, TestResult, expected_scan};
use std::collections::BTreeMap;
use std::ops::Bound::{Excluded, Included, Unbounded};
use std::sync::{Arc, Barrier};
use std::time::Duration;

/// Instantiates every generic test for one backend, as `#[test]`s in module `$name`.
macro_rules! conformance {
    ($name:ident, $backend:ty) => {
        mod $name {
            use super::*;
            conformance!(@tests $backend;
                get_put_delete, batch_is_atomic_for_readers, invalid_batch_writes_nothing,
                later_op_in_batch_wins, scan_every_bound_combination, scan_handles_empty_ranges,
                oversized_keys_in_reads, prefix_range_edges, iter_pages_both_directions,
                snapshot_is_isolated, concurrent_committers_all_succeed,
                concurrent_commits_share_syncs, apply_then_sync, close_refuses_later_commits,
                heads_read_as_a_prefix_and_values_whole,
            );
        }
    };
    (@tests $backend:ty; $($test:ident),* $(,)?) => {
        $(
            #[test]
            fn $test() -> TestResult {
                let fixture = <$backend as Backend>::open_fresh()?;
                super::$test(&fixture)
            }
        )*
    };
}

conformance!(memory, Memory);
conformance!(fjall, Fjall);

fn put(store: &dyn Store, key: &[u8], value: &[u8]) -> TestResult {
    let mut batch = Batch::new();
    batch.put(key, value);
    Ok(store.commit(batch)?)
}

fn delete(store: &dyn Store, key: &[u8]) -> TestResult {
    let mut batch = Batch::new();
    batch.delete(key);
    Ok(store.commit(batch)?)
}

fn all(read: &dyn Read) -> TestResult<Vec<Entry>> {
    Ok(read.scan(&(Unbounded, Unbounded), false, usize::MAX)?)
}

fn entry(key: &[u8], value: &[u8]) -> Entry {
    (key.to_vec(), value.to_vec())
}

fn get_put_delete<S: Backend>(f: &Fixture<S>) -> TestResult {
    let store = &*f.store;
    assert_eq!(store.get(b"a")?, None);
    put(store, b"a", b"1")?;
    assert_eq!(store.get(b"a")?, Some(b"1".to_vec()));
    put(store, b"a", b"2")?;
    assert_eq!(store.get(b"a")?, Some(b"2".to_vec()));
    put(store, b"b", b"")?;
    assert_eq!(store.get(b"b")?, Some(Vec::new()), "empty values are values");
    delete(store, b"a")?;
    assert_eq!(store.get(b"a")?, None);
    delete(store, b"never-there")?;
    store.commit(Batch::new())?;
    assert_eq!(all(store)?, vec![entry(b"b", b"")]);
    Ok(())
}

/// A value written with a head reads whole through `get`, `scan` and `Iter`, and through
/// the head readers as its head or (a store keeping no head apart) as its whole value.
fn heads_read_as_a_prefix_and_values_whole<S: Backend>(f: &Fixture<S>) -> TestResult {
    let store = &*f.store;
    let head = b"tree:".to_vec();
    let body: Vec<u8> =
        (0..2000u32).flat_map(|i| format!("{{\"n\":{}}}", i % 97).into_bytes()).collect();
    let value = [head.clone(), body].concat();
    let mut batch = Batch::new();
    batch.put_with_head(*b"h", value.clone(), head.len());
    batch.put_with_head(*b"i", b"short".to_vec(), 3);
    batch.put(*b"j", value.clone());
    store.commit(batch)?;
    let as_head = |read: Option<Vec<u8>>, whole: &[u8], head: usize| {
        let read = read.expect("present");
        assert!(whole.starts_with(&read) && read.len() >= head, "{} bytes", read.len());
    };
    for read in [store as &dyn Read, f.store.snapshot().as_ref()] {
        assert_eq!(read.get(b"h")?, Some(value.clone()));
        as_head(read.get_head(b"h")?, &value, head.len());
        as_head(read.get_head(b"i")?, b"short", 3);
        assert_eq!(read.get_head(b"j")?, Some(value.clone()), "no head: the whole value");
        assert_eq!(read.get_head(b"absent")?, None);
        let whole = read.scan(&prefix_range(b""), false, 10)?;
        assert_eq!(whole[0], entry(b"h", &value));
        let heads = read.scan_heads(&prefix_range(b""), true, 10)?;
        assert_eq!(heads.iter().map(|(k, _)| k.as_slice()).collect::<Vec<_>>(), [b"j", b"i", b"h"]);
        as_head(Some(heads[2].1.clone()), &value, head.len());
    }
    for streaming in [false, true] {
        let snapshot = f.store.snapshot();
        let iter = match streaming {
            false => Iter::new(snapshot, prefix_range(b""), false, 2),
            true => Iter::streaming(snapshot, prefix_range(b""), false, 2),
        };
        let entries = iter.heads().collect::<bunko_storage::Result<Vec<_>>>()?;
        assert_eq!(entries.len(), 3);
        as_head(Some(entries[0].1.clone()), &value, head.len());
        assert_eq!(entries[2].1, value);
    }
    Ok(())
}

/// A writer keeps setting `a` and `b` to the same value in one batch (and toggling `c`);
/// readers must never see them differ, on the store or on a snapshot.
fn batch_is_atomic_for_readers<S: Backend>(f: &Fixture<S>) -> TestResult {
    let store = f.store.clone();
    let writer = std::thread::spawn(move || -> TestResult {
        for i in 0..200u32 {
            let mut batch = Batch::new();
            batch.put(*b"a", i.to_be_bytes());
            batch.put(*b"b", i.to_be_bytes());
            if i % 2 == 0 {
                batch.put(*b"c", *b"x")
            } else {
                batch.delete(*b"c")
            }
            store.commit(batch)?;
        }
        Ok(())
    });
    let mut checks = 0;
    while !writer.is_finished() || checks < 100 {
        let snapshot = f.store.snapshot();
        let (a, b) = (snapshot.get(b"a")?, snapshot.get(b"b")?);
        assert_eq!(a, b, "snapshot saw half a batch");
        let entries = all(&*f.store)?;
        let value = |key: &[u8]| entries.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
        assert_eq!(value(b"a"), value(b"b"), "scan saw half a batch");
        if let Some(a) = value(b"a") {
            let even = u32::from_be_bytes(a.as_slice().try_into()?) % 2 == 0;
            assert_eq!(value(b"c").is_some(), even, "scan saw half a batch");
        }
        checks += 1;
    }
    writer.join().map_err(|_| "writer panicked")??;
    Ok(())
}

fn invalid_batch_writes_nothing<S: Backend>(f: &Fixture<S>) -> TestResult {
    let store = &*f.store;
    let invalid_keys = [Vec::new(), vec![b'k'; MAX_KEY_LEN + 1]];
    for bad in invalid_keys {
        let mut batch = Batch::new();
        batch.put(*b"good", *b"1");
        batch.put(bad.clone(), *b"2");
        let result = store.commit(batch);
        assert!(matches!(result, Err(Error::Invalid(_))), "{result:?}");
        let mut batch = Batch::new();
        batch.delete(bad);
        let result = store.commit(batch);
        assert!(matches!(result, Err(Error::Invalid(_))), "{result:?}");
    }
    assert_eq!(all(store)?, vec![]);
    // The longest legal key works, and the store is not poisoned by the rejections.
    put(store, &[b'k'; MAX_KEY_LEN], b"long")?;
    assert_eq!(store.get(&[b'k'; MAX_KEY_LEN])?, Some(b"long".to_vec()));
    Ok(())
}

fn later_op_in_batch_wins<S: Backend>(f: &Fixture<S>) -> TestResult {
    let store = &*f.store;
    put(store, b"d", b"old")?;
    let mut batch = Batch::new();
    batch.put(*b"f", *b"0");
    batch.put(*b"a", *b"1");
    batch.put(*b"a", *b"2"); // put, put
    batch.put(*b"b", *b"1");
    batch.delete(*b"b"); // put, delete
    batch.delete(*b"c");
    batch.put(*b"c", *b"3"); // delete, put
    batch.delete(*b"d");
    batch.put(*b"d", *b"4");
    batch.delete(*b"d"); // existing: delete, put, delete
    batch.put(*b"e", *b"1");
    batch.delete(*b"e");
    batch.put(*b"e", *b"5"); // put, delete, put
    batch.put(*b"f", *b"6"); // put, other keys, put
    store.commit(batch)?;
    let expected = vec![entry(b"a", b"2"), entry(b"c", b"3"), entry(b"e", b"5"), entry(b"f", b"6")];
    assert_eq!(all(store)?, expected);
    assert_eq!(store.get(b"b")?, None);
    assert_eq!(store.get(b"d")?, None);
    Ok(())
}

/// Every start/end bound kind over keys present, absent, before and after all keys, in
/// both directions, with several limits, checked against a model.
fn scan_every_bound_combination<S: Backend>(f: &Fixture<S>) -> TestResult {
    let store = &*f.store;
    let mut model = BTreeMap::new();
    let mut batch = Batch::new();
    for key in [&b"b"[..], b"bb", b"c", b"d", b"d\x00", b"f", b"\xff"] {
        batch.put(key, [key, b"!"].concat());
        model.insert(key.to_vec(), [key, b"!"].concat());
    }
    store.commit(batch)?;
    let snapshot = store.snapshot();
    let probes = [&b"a"[..], b"b", b"ba", b"bb", b"c", b"d", b"e", b"f", b"\xff", b"\xff\xff"];
    let bounds = |key: &[u8]| [Included(key.to_vec()), Excluded(key.to_vec())];
    let mut all_bounds = vec![Unbounded];
    all_bounds.extend(probes.iter().flat_map(|probe| bounds(probe)));
    for start in &all_bounds {
        for end in &all_bounds {
            let range: Range = (start.clone(), end.clone());
            for reverse in [false, true] {
                for limit in [0, 1, 2, 3, 100, usize::MAX] {
                    let want = expected_scan(&model, &range, reverse, limit);
                    let got = store.scan(&range, reverse, limit)?;
                    assert_eq!(got, want, "store {range:?} reverse={reverse} limit={limit}");
                    let got = snapshot.scan(&range, reverse, limit)?;
                    assert_eq!(got, want, "snapshot {range:?} reverse={reverse} limit={limit}");
                }
            }
        }
    }
    Ok(())
}

/// Inverted and empty ranges return nothing rather than panicking (`BTreeMap::range`
/// panics on them).
fn scan_handles_empty_ranges<S: Backend>(f: &Fixture<S>) -> TestResult {
    let store = &*f.store;
    put(store, b"m", b"1")?;
    let key = |k: &[u8]| k.to_vec();
    let empty: [Range; 5] = [
        (Included(key(b"z")), Included(key(b"a"))),
        (Excluded(key(b"m")), Excluded(key(b"m"))),
        (Included(key(b"m")), Excluded(key(b"m"))),
        (Excluded(key(b"m")), Included(key(b"m"))),
        (Excluded(key(b"z")), Excluded(key(b"a"))),
    ];
    for range in &empty {
        for reverse in [false, true] {
            assert_eq!(store.scan(range, reverse, 10)?, vec![], "{range:?}");
            assert_eq!(store.snapshot().scan(range, reverse, 10)?, vec![], "{range:?}");
        }
    }
    let point = (Included(key(b"m")), Included(key(b"m")));
    assert_eq!(store.scan(&point, true, 10)?, vec![entry(b"m", b"1")]);
    Ok(())
}

/// Reads accept keys and bounds longer than any storable key (fjall would panic on them).
fn oversized_keys_in_reads<S: Backend>(f: &Fixture<S>) -> TestResult {
    let store = &*f.store;
    let longest = vec![b'a'; MAX_KEY_LEN];
    let longer = vec![b'a'; MAX_KEY_LEN + 10];
    let mut batch = Batch::new();
    batch.put(longest.clone(), *b"longest");
    batch.put(*b"a", *b"short");
    batch.put(*b"b", *b"after");
    store.commit(batch)?;
    assert_eq!(store.get(&longer)?, None);
    assert_eq!(store.snapshot().get(&longer)?, None);
    let model: BTreeMap<_, _> = all(store)?.into_iter().collect();
    let bounds = [Included(longer.clone()), Excluded(longer.clone()), Unbounded];
    for start in &bounds {
        for end in &bounds {
            let range: Range = (start.clone(), end.clone());
            for reverse in [false, true] {
                let want = expected_scan(&model, &range, reverse, usize::MAX);
                assert_eq!(store.scan(&range, reverse, usize::MAX)?, want, "{range:?}");
                assert_eq!(store.snapshot().scan(&range, reverse, usize::MAX)?, want);
            }
        }
    }
    Ok(())
}

fn prefix_range_edges<S: Backend>(f: &Fixture<S>) -> TestResult {
    let v = |bytes: &[u8]| bytes.to_vec();
    assert_eq!(prefix_range(b"ab"), (Included(v(b"ab")), Excluded(v(b"ac"))));
    assert_eq!(prefix_range(b"a\xff"), (Included(v(b"a\xff")), Excluded(v(b"b"))));
    assert_eq!(prefix_range(b"a\xff\xff"), (Included(v(b"a\xff\xff")), Excluded(v(b"b"))));
    assert_eq!(prefix_range(b"\xff"), (Included(v(b"\xff")), Unbounded));
    assert_eq!(prefix_range(b"\xff\xff"), (Included(v(b"\xff\xff")), Unbounded));
    assert_eq!(prefix_range(b""), (Included(v(b"")), Unbounded));

    let store = &*f.store;
    let keys: [&[u8]; 12] = [
        b"\x00",
        b"\x01",
        b"\x01\x00",
        b"\x01\xfe",
        b"\x01\xff",
        b"\x01\xff\xff",
        b"\x02",
        b"\xfe\xff",
        b"\xff",
        b"\xff\x00",
        b"\xff\xff",
        b"\xff\xff\x01",
    ];
    let mut batch = Batch::new();
    for key in keys {
        batch.put(key, *b"v");
    }
    store.commit(batch)?;
    let prefixes: [&[u8]; 8] =
        [b"", b"\x00", b"\x01", b"\x01\xff", b"\x01\xff\xff", b"\xfe", b"\xff", b"\xff\xff"];
    for prefix in prefixes {
        let want: Vec<Vec<u8>> =
            keys.iter().filter(|key| key.starts_with(prefix)).map(|key| key.to_vec()).collect();
        for reverse in [false, true] {
            let got: Vec<Vec<u8>> = store
                .scan(&prefix_range(prefix), reverse, usize::MAX)?
                .into_iter()
                .map(|e| e.0)
                .collect();
            let mut want = want.clone();
            if reverse {
                want.reverse();
            }
            assert_eq!(got, want, "prefix {prefix:x?} reverse={reverse}");
        }
    }
    Ok(())
}

fn iter_pages_both_directions<S: Backend>(f: &Fixture<S>) -> TestResult {
    let store = &*f.store;
    let mut model = BTreeMap::new();
    let mut batch = Batch::new();
    for i in 0..37u8 {
        let key = vec![b'k', i * 7];
        batch.put(key.clone(), vec![i]);
        model.insert(key, vec![i]);
    }
    batch.put(*b"j", *b"before");
    batch.put(*b"l", *b"after");
    store.commit(batch)?;
    let snapshot = store.snapshot();
    put(store, b"k\x01", b"later, invisible to the snapshot")?;
    let ranges: [Range; 3] = [
        prefix_range(b"k"),
        (Excluded(vec![b'k', 7]), Included(vec![b'k', 35 * 7])),
        (Included(vec![b'k', 3]), Excluded(vec![b'k', 36 * 7])),
    ];
    for range in ranges {
        for reverse in [false, true] {
            let want = expected_scan(&model, &range, reverse, usize::MAX);
            for page in [0, 1, 2, 3, 35, 36, 37, 1000] {
                let got: Vec<Entry> = Iter::new(snapshot.clone(), range.clone(), reverse, page)
                    .collect::<Result<_, _>>()?;
                assert_eq!(got, want, "{range:?} reverse={reverse} page={page}");
                for first in [0, 1, 5, 36, 2000] {
                    let got: Vec<Entry> = Iter::new(snapshot.clone(), range.clone(), reverse, page)
                        .first_page(first)
                        .collect::<Result<_, _>>()?;
                    assert_eq!(got, want, "{range:?} reverse={reverse} page={page} {first}");
                }
            }
        }
    }
    Ok(())
}

fn snapshot_is_isolated<S: Backend>(f: &Fixture<S>) -> TestResult {
    let store = &*f.store;
    put(store, b"a", b"1")?;
    put(store, b"b", b"1")?;
    let first = store.snapshot();
    let mut batch = Batch::new();
    batch.delete(*b"a");
    batch.put(*b"b", *b"2");
    batch.put(*b"c", *b"2");
    store.commit(batch)?;
    let second = store.snapshot();
    delete(store, b"b")?;
    put(store, b"a", b"3")?;

    assert_eq!(all(&*first)?, vec![entry(b"a", b"1"), entry(b"b", b"1")]);
    assert_eq!(first.get(b"a")?, Some(b"1".to_vec()), "deleted later, still in the snapshot");
    assert_eq!(first.get(b"c")?, None);
    assert_eq!(all(&*second)?, vec![entry(b"b", b"2"), entry(b"c", b"2")]);
    assert_eq!(second.get(b"a")?, None);
    assert_eq!(all(store)?, vec![entry(b"a", b"3"), entry(b"c", b"2")]);
    let reversed = second.scan(&(Unbounded, Unbounded), true, usize::MAX)?;
    assert_eq!(reversed, vec![entry(b"c", b"2"), entry(b"b", b"2")]);
    // A snapshot outlives further writes and can move to another thread.
    let moved = std::thread::spawn(move || first.get(b"b")).join().map_err(|_| "panicked")??;
    assert_eq!(moved, Some(b"1".to_vec()));
    Ok(())
}

const THREADS: usize = 32;

fn concurrent_committers_all_succeed<S: Backend>(f: &Fixture<S>) -> TestResult {
    const COMMITS: usize = 200;
    let before = f.store.commits();
    let barrier = Arc::new(Barrier::new(THREADS));
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let (store, barrier) = (f.store.clone(), barrier.clone());
            std::thread::spawn(move || -> TestResult {
                barrier.wait();
                for i in 0..COMMITS {
                    let mut batch = Batch::new();
                    batch.put(format!("t{t:02}/{i:04}"), format!("{t}:{i}"));
                    batch.put(format!("last/{t:02}"), format!("{i}"));
                    store.commit(batch)?;
                    // Our own write is visible as soon as commit returns.
                    let key = format!("t{t:02}/{i:04}");
                    assert_eq!(store.get(key.as_bytes())?, Some(format!("{t}:{i}").into_bytes()));
                }
                Ok(())
            })
        })
        .collect();
    for thread in threads {
        thread.join().map_err(|_| "committer panicked")??;
    }
    let store = &*f.store;
    assert_eq!(store.commits() - before, (THREADS * COMMITS) as u64);
    for t in 0..THREADS {
        let rows = store.scan(&prefix_range(format!("t{t:02}/").as_bytes()), false, usize::MAX)?;
        assert_eq!(rows.len(), COMMITS, "thread {t}");
        let last = store.get(format!("last/{t:02}").as_bytes())?;
        assert_eq!(last, Some(format!("{}", COMMITS - 1).into_bytes()));
    }
    Ok(())
}

fn concurrent_commits_share_syncs<S: Backend>(f: &Fixture<S>) -> TestResult {
    const COMMITS: usize = 40;
    f.store.slow_syncs();
    let (syncs, commits) = (f.store.syncs(), f.store.commits());
    let barrier = Arc::new(Barrier::new(THREADS));
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let (store, barrier) = (f.store.clone(), barrier.clone());
            std::thread::spawn(move || -> TestResult {
                barrier.wait();
                for i in 0..COMMITS {
                    let mut batch = Batch::new();
                    batch.put(format!("{t}/{i}"), *b"v");
                    store.commit(batch)?;
                }
                Ok(())
            })
        })
        .collect();
    for thread in threads {
        thread.join().map_err(|_| "committer panicked")??;
    }
    let syncs = f.store.syncs() - syncs;
    let commits = f.store.commits() - commits;
    assert_eq!(commits, (THREADS * COMMITS) as u64);
    // With 32 committers and syncs of a millisecond or more, most syncs cover many
    // commits; without grouping there would be one sync per commit.
    assert!(syncs * 4 < commits, "{syncs} syncs for {commits} commits: not grouping");
    Ok(())
}

fn apply_then_sync<S: Backend>(f: &Fixture<S>) -> TestResult {
    let store = &*f.store;
    let mut tickets = Vec::new();
    for i in 0..5u8 {
        let mut batch = Batch::new();
        batch.put([b'k', i], [i]);
        tickets.push(store.apply(batch)?);
        // Applied means visible, before any sync.
        assert_eq!(store.get(&[b'k', i])?, Some(vec![i]));
    }
    assert!(tickets.windows(2).all(|pair| pair[0] < pair[1]), "{tickets:?}");
    let syncs = store.syncs();
    let last = *tickets.last().ok_or("no tickets")?;
    store.sync(last)?;
    assert_eq!(store.syncs() - syncs, 1, "one sync covers all five batches");
    for ticket in tickets {
        store.sync(ticket)?;
    }
    assert_eq!(store.syncs() - syncs, 1, "already-synced tickets return at once");
    let bogus = store.sync(Ticket(last.0 + 1_000));
    assert!(matches!(bogus, Err(Error::Invalid(_))), "{bogus:?}");
    Ok(())
}

fn close_refuses_later_commits<S: Backend>(f: &Fixture<S>) -> TestResult {
    let store = &*f.store;
    put(store, b"a", b"1")?;
    store.health()?;
    let mut batch = Batch::new();
    batch.put(*b"b", *b"2");
    let pending = store.apply(batch)?;
    store.close()?;
    assert!(matches!(store.health(), Err(Error::Closed)), "a closed store reports it");
    store.sync(pending)?; // covered by close's sync
    let result = put(store, b"c", b"3");
    assert!(
        matches!(result.as_ref().map_err(|e| e.downcast_ref::<Error>()), Err(Some(Error::Closed))),
        "{result:?}"
    );
    assert_eq!(all(store)?, vec![entry(b"a", b"1"), entry(b"b", b"2")], "reads still work");
    store.close()?;
    Ok(())
}

// ---- Memory only: fault injection --------------------------------------------------------

#[test]
fn memory_failed_sync_poisons_for_good() -> TestResult {
    let store = Memory::new();
    put(&store, b"a", b"1")?;
    store.health()?;
    store.fail_syncs(true);
    let mut batch = Batch::new();
    batch.put(*b"b", *b"2");
    let result = store.commit(batch);
    assert!(matches!(result, Err(Error::Poisoned)), "{result:?}");
    assert!(matches!(store.health(), Err(Error::Poisoned)), "a poisoned store reports it");
    store.fail_syncs(false);
    let mut batch = Batch::new();
    batch.put(*b"c", *b"3");
    let result = store.commit(batch);
    assert!(matches!(result, Err(Error::Poisoned)), "{result:?}");
    assert_eq!(store.get(b"c")?, None, "a poisoned store applies nothing");
    assert!(matches!(store.close(), Err(Error::Poisoned)));
    // Reads keep working; `b` was applied (visible) but never acknowledged.
    assert_eq!(store.get(b"a")?, Some(b"1".to_vec()));
    Ok(())
}

#[test]
fn memory_every_waiter_on_a_failed_sync_is_poisoned() -> TestResult {
    let store = Arc::new(Memory::new());
    store.set_sync_delay(Duration::from_millis(20));
    store.fail_syncs(true);
    let barrier = Arc::new(Barrier::new(16));
    let threads: Vec<_> = (0..16)
        .map(|t: u8| {
            let (store, barrier) = (store.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                let mut batch = Batch::new();
                batch.put([t], [t]);
                store.commit(batch)
            })
        })
        .collect();
    for thread in threads {
        let result = thread.join().map_err(|_| "committer panicked")?;
        assert!(matches!(result, Err(Error::Poisoned)), "{result:?}");
    }
    Ok(())
}

#[test]
fn memory_commits_before_a_failed_sync_stay_acknowledged() -> TestResult {
    let store = Memory::new();
    let mut batch = Batch::new();
    batch.put(*b"a", *b"1");
    let synced = store.apply(batch)?;
    store.sync(synced)?;
    store.fail_syncs(true);
    let mut batch = Batch::new();
    batch.put(*b"b", *b"2");
    let doomed = store.apply(batch)?;
    assert!(matches!(store.sync(doomed), Err(Error::Poisoned)));
    store.sync(synced)?; // still covered by the earlier successful sync
    Ok(())
}

// ---- Fjall only: files, reopening, locking -----------------------------------------------

fn locked(result: bunko_storage::Result<Fjall>) -> bool {
    matches!(result, Err(Error::Io(message)) if message.contains("locked"))
}

#[test]
fn fjall_data_survives_reopen() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("db");
    let mut model = BTreeMap::new();
    {
        let store = Fjall::open(&path)?;
        for i in 0..100u32 {
            let mut batch = Batch::new();
            batch.put(i.to_be_bytes(), vec![b'x'; 1000]);
            batch.delete((i / 2).to_be_bytes());
            model.insert(i.to_be_bytes().to_vec(), vec![b'x'; 1000]);
            model.remove((i / 2).to_be_bytes().as_slice());
            store.commit(batch)?;
        }
        assert!(store.disk_size() > 0);
    }
    let store = Fjall::open(&path)?;
    assert_eq!(all(&store)?, expected_scan(&model, &(Unbounded, Unbounded), false, usize::MAX));
    put(&store, b"more", b"1")?;
    let mut batch = Batch::new();
    batch.put(*b"dup", *b"1");
    batch.delete(*b"dup");
    batch.put(*b"dup", *b"2");
    batch.delete(*b"gone");
    batch.put(*b"gone", *b"1");
    batch.delete(*b"gone");
    store.commit(batch)?;
    store.close()?;
    drop(store);
    let store = Fjall::open(&path)?;
    assert_eq!(store.get(b"more")?, Some(b"1".to_vec()));
    assert_eq!(store.get(b"dup")?, Some(b"2".to_vec()), "later op in a batch wins on replay");
    assert_eq!(store.get(b"gone")?, None);
    Ok(())
}

#[test]
fn fjall_second_open_of_a_live_directory_is_locked() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("db");
    let store = Fjall::open(&path)?;
    put(&store, b"a", b"1")?;
    assert!(locked(Fjall::open(&path)), "second open must fail while the first is alive");
    // A snapshot keeps the database (and its lock) alive past the store.
    let snapshot = store.snapshot();
    drop(store);
    assert!(locked(Fjall::open(&path)), "a live snapshot still holds the lock");
    assert_eq!(snapshot.get(b"a")?, Some(b"1".to_vec()));
    drop(snapshot);
    let store = Fjall::open(&path)?;
    assert_eq!(store.get(b"a")?, Some(b"1".to_vec()));
    Ok(())
}

#[test]
fn fjall_open_error_names_the_path() -> TestResult {
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, b"x")?;
    match Fjall::open(&file.join("db")) {
        Err(Error::Io(message)) => assert!(message.contains("not-a-dir"), "{message}"),
        other => panic!("expected an I/O error, got {other:?}"),
    }
    Ok(())
}

/// A data directory from before the format marker, block and value compression (issue
/// 20): fjall's files, no `BUNKO_FORMAT`, values stored as given, its keyspace created with
/// fjall's default block compression (none in levels 0 and 1). It is made here as format 1
/// (a marker written before the first open), then loses its marker. It opens with today's
/// options, keeps its data, gets the marker of format 1 and keeps writing values as given.
#[test]
fn fjall_directory_from_before_the_format_marker_opens() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("db");
    let marker = path.join("BUNKO_FORMAT");
    let old = FjallOptions { compression: Compression::Deep, ..FjallOptions::default() };
    let document = |n: u32| format!("{{\"n\":{n},\"text\":\"{}\"}}", "abcd".repeat(300));
    std::fs::create_dir(&path)?;
    std::fs::write(&marker, "bunko storage format 1\n")?;
    {
        let store = Fjall::open_with(&path, old)?;
        put(&store, b"kept", document(1).as_bytes())?;
        store.close()?;
    }
    std::fs::remove_file(&marker)?;
    for round in 2..4 {
        let store = Fjall::open(&path)?;
        assert_eq!(store.get(b"kept")?, Some(document(1).into_bytes()));
        put(&store, format!("new{round}").as_bytes(), document(round).as_bytes())?;
        assert_eq!(std::fs::read_to_string(&marker)?.trim(), "bunko storage format 1");
        store.close()?;
    }
    let store = Fjall::open(&path)?;
    let values: Vec<_> = all(&store)?.into_iter().map(|(_, value)| value).collect();
    assert_eq!(values, [1, 2, 3].map(|n| document(n).into_bytes()));
    Ok(())
}

/// A new directory is marked with the newest format before fjall writes anything, and
/// its values are compressed: 1 KB of repeated text takes a fraction of its size on disk
/// (in the journal: nothing is flushed), and reads back whole, before and after a reopen.
#[test]
fn fjall_new_directory_compresses_values() -> TestResult {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir()?;
    let sizes = |compression| -> TestResult<(u64, Vec<u8>)> {
        let path = dir.path().join(format!("{compression:?}"));
        let options = FjallOptions { compression, ..FjallOptions::default() };
        let value = "reading temperature 21.5; ".repeat(40).into_bytes();
        {
            let store = Fjall::open_with(&path, options)?;
            for i in 0..200u32 {
                put(&store, &i.to_be_bytes(), &value)?;
            }
            store.close()?;
        }
        let marker = std::fs::read_to_string(path.join("BUNKO_FORMAT"))?;
        assert_eq!(marker.trim(), format!("bunko storage format {FORMAT_VERSION}"));
        let store = Fjall::open_with(&path, options)?;
        assert_eq!(store.get(&7u32.to_be_bytes())?, Some(value.clone()));
        // A value with a head: the head alone is read apart, whole where nothing is
        // compressed.
        let mut batch = Batch::new();
        batch.put_with_head(*b"head", value.clone(), 9);
        store.commit(batch)?;
        let head = store.get_head(b"head")?.unwrap_or_default();
        match compression {
            Compression::Zstd => assert_eq!(head, value[..9]),
            _ => assert_eq!(head, value),
        }
        assert_eq!(store.get(b"head")?, Some(value.clone()));
        let journals: u64 = std::fs::read_dir(&path)?
            .filter_map(|entry| entry.ok())
            .filter(|entry| entry.path().extension().is_some_and(|ext| ext == "jnl"))
            // Allocated space: fjall preallocates journals as sparse files.
            .map(|entry| entry.metadata().map_or(0, |meta| meta.blocks() * 512))
            .sum();
        Ok((journals, value))
    };
    let (zstd, value) = sizes(Compression::Zstd)?;
    let (plain, _) = sizes(Compression::None)?;
    assert!(plain >= 200 * value.len() as u64, "{plain} bytes of journal uncompressed");
    assert!(zstd * 5 < plain, "{zstd} bytes of journal compressed, {plain} not");
    Ok(())
}

/// A format 2 directory (values as format 3 writes them; only the engine's `Doc` records
/// differ) opens with its values, and is re-marked 3, so that a format 2 build refuses it
/// from then on.
#[test]
fn fjall_format_2_directory_opens_and_is_re_marked_3() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("data");
    let value = "reading temperature 21.5; ".repeat(40).into_bytes();
    let marker = path.join("BUNKO_FORMAT");
    std::fs::create_dir_all(&path)?;
    // A directory created by a format 2 build: one keyspace.
    std::fs::write(&marker, "bunko storage format 2\n")?;
    {
        let store = Fjall::open(&path)?;
        put(&store, b"k", &value)?;
        store.close()?;
    }
    std::fs::write(&marker, "bunko storage format 2\n")?;
    let store = Fjall::open(&path)?;
    assert_eq!(store.get(b"k")?, Some(value));
    assert_eq!(store.format(), 3);
    assert_eq!(std::fs::read_to_string(&marker)?.trim(), "bunko storage format 3");
    Ok(())
}

/// A directory written by a newer Bunko is refused before anything is touched, with a
/// message naming its format and the ones this build reads.
#[test]
fn fjall_directory_of_a_newer_format_is_refused() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("db");
    drop(Fjall::open(&path)?);
    let newer = FORMAT_VERSION + 1;
    std::fs::write(path.join("BUNKO_FORMAT"), format!("bunko storage format {newer}\n"))?;
    match Fjall::open(&path) {
        Err(Error::Corrupt(message)) => {
            assert!(message.contains(&format!("format {newer}")), "{message}");
            assert!(message.contains(&format!("formats 1 to {FORMAT_VERSION}")), "{message}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    std::fs::write(path.join("BUNKO_FORMAT"), "garbage")?;
    match Fjall::open(&path) {
        Err(Error::Corrupt(message)) => assert!(message.contains("garbage"), "{message}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    Ok(())
}

/// Every compression setting reads back what it wrote, across a flush to tables.
#[test]
fn fjall_every_compression_reads_back() -> TestResult {
    for compression in [Compression::Zstd, Compression::Lz4, Compression::Deep, Compression::None] {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("db");
        let options = FjallOptions {
            compression,
            memtable_bytes: FjallOptions::MIN_MEMTABLE_BYTES,
            ..FjallOptions::default()
        };
        let value: Vec<u8> = br#"{"deviceID":"bridge-9876","temperature":21.5}"#.repeat(20);
        {
            let store = Fjall::open_with(&path, options)?;
            for i in 0..3000u32 {
                put(&store, &i.to_be_bytes(), &value)?; // ~2.7 MB: several flushes
            }
            store.close()?;
        }
        let store = Fjall::open(&path)?;
        for i in (0..3000u32).step_by(97) {
            assert_eq!(store.get(&i.to_be_bytes())?, Some(value.clone()), "{compression:?}");
        }
    }
    Ok(())
}

/// The compaction shape is chosen when a store is created: a store made with tiny tables
/// merged two at a time (many compactions through several levels) and one made with the
/// bulk-load shape (8 tables of 32 MiB) both read back all they hold after being reopened
/// with the default options (fjall's shape) and written to again, across flushes and
/// compactions, and after `reclaim`.
#[test]
fn fjall_every_compaction_shape_reads_back() -> TestResult {
    let shapes = [(FjallOptions::MIN_TABLE_BYTES, 2), (32 << 20, 8)];
    for (table_bytes, level0_tables) in shapes {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("db");
        let small = FjallOptions {
            memtable_bytes: FjallOptions::MIN_MEMTABLE_BYTES,
            compression: Compression::None,
            ..FjallOptions::default()
        };
        let value = |n: u32, round: u32| format!("{n:08} round {round} reading 21.5;").repeat(8);
        let fill = |store: &Fjall, round: u32| -> TestResult {
            for chunk in 0..10u32 {
                let mut batch = Batch::new();
                // Keys spread over the key space, as document ids are: every flushed table
                // overlaps the level below.
                for n in (chunk..40_000).step_by(10) {
                    batch.put(
                        n.wrapping_mul(2_654_435_761).to_be_bytes(),
                        value(n, round).into_bytes(),
                    );
                }
                store.commit(batch)?; // ~1 MB: one flush each
            }
            Ok(())
        };
        let check = |store: &Fjall, round: u32| -> TestResult {
            for n in (0..40_000u32).step_by(113) {
                let key = n.wrapping_mul(2_654_435_761).to_be_bytes();
                assert_eq!(store.get(&key)?, Some(value(n, round).into_bytes()), "{table_bytes}");
            }
            assert_eq!(store.scan(&(Unbounded, Unbounded), false, usize::MAX)?.len(), 40_000);
            Ok(())
        };
        {
            let store =
                Fjall::open_with(&path, FjallOptions { table_bytes, level0_tables, ..small })?;
            fill(&store, 0)?;
            check(&store, 0)?;
            store.close()?;
        }
        let store = Fjall::open_with(&path, small)?;
        check(&store, 0)?;
        fill(&store, 1)?;
        check(&store, 1)?;
        store.reclaim()?;
        check(&store, 1)?;
    }
    Ok(())
}

/// Bytes of the table files under `path` (fjall keeps them in `tables` directories).
fn table_bytes(path: &std::path::Path) -> TestResult<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(path)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        if meta.is_dir() {
            total += table_bytes(&entry.path())?;
        } else if path.file_name().is_some_and(|name| name == "tables") {
            total += meta.len();
        }
    }
    Ok(total)
}

/// Block compression is chosen when a store is created and kept when it is reopened: a
/// new `Zstd` store leaves its blocks as written (its values are zstd frames already),
/// while a store created with LZ4 blocks (as `Zstd` stores were before session 28) keeps
/// compressing them after it is reopened with today's options. The values (100 bytes of
/// text: too short for zstd, so only block compression shrinks them) read back in both.
#[test]
fn fjall_block_compression_is_kept_from_creation() -> TestResult {
    let dir = tempfile::tempdir()?;
    let value = |n: u32| format!("{n:08} reading temperature 21.5;").repeat(3).into_bytes();
    let small = FjallOptions {
        memtable_bytes: FjallOptions::MIN_MEMTABLE_BYTES,
        ..FjallOptions::default()
    };
    let fill = |store: &Fjall, range: std::ops::Range<u32>| -> TestResult {
        let mut batch = Batch::new();
        for n in range {
            batch.put(n.to_be_bytes(), value(n)); // ~1 MB per 10,000
        }
        Ok(store.commit(batch)?)
    };
    let new = dir.path().join("new");
    let store = Fjall::open_with(&new, small)?;
    fill(&store, 0..20_000)?;
    store.reclaim()?;
    drop(store);
    let old = dir.path().join("old");
    let store = Fjall::open_with(&old, FjallOptions { compression: Compression::Lz4, ..small })?;
    fill(&store, 0..10_000)?;
    drop(store);
    let store = Fjall::open_with(&old, small)?;
    fill(&store, 10_000..20_000)?;
    store.reclaim()?;
    drop(store);
    let (new_bytes, old_bytes) = (table_bytes(&new)?, table_bytes(&old)?);
    assert!(new_bytes >= 20_000 * 100, "{new_bytes} bytes of tables in the new store");
    assert!(old_bytes * 2 < new_bytes, "old store {old_bytes} bytes, new {new_bytes}");
    for path in [new, old] {
        let store = Fjall::open(&path)?;
        for n in (0..20_000u32).step_by(997) {
            assert_eq!(store.get(&n.to_be_bytes())?, Some(value(n)), "{path:?}");
        }
    }
    Ok(())
}

/// `reclaim` (`_compact`) leaves only the tables it wrote: the ones its major compaction
/// replaced are deleted before it returns, whatever fjall's snapshot bookkeeping saw
/// before. Three rounds of the same 10,000 keys, ~3.3 MB of tables and memtable, compact to
/// one round's ~1.1 MB (values short enough to stay uncompressed).
#[test]
fn fjall_reclaim_deletes_the_tables_it_replaced() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("db");
    let options = FjallOptions {
        memtable_bytes: FjallOptions::MIN_MEMTABLE_BYTES,
        ..FjallOptions::default()
    };
    let value = |n: u32, round: u32| format!("{n:08} round {round} temperature 21.5;").repeat(3);
    let store = Fjall::open_with(&path, options)?;
    for round in 0..3 {
        let mut batch = Batch::new();
        for n in 0..10_000u32 {
            batch.put(n.to_be_bytes(), value(n, round).into_bytes());
        }
        store.commit(batch)?;
    }
    store.reclaim()?;
    let bytes = table_bytes(&path)?;
    let one_round = 10_000 * (4 + value(0, 2).len() as u64);
    assert!(bytes < one_round * 3 / 2, "{bytes} bytes of tables for {one_round} of data");
    for n in (0..10_000u32).step_by(991) {
        assert_eq!(store.get(&n.to_be_bytes())?, Some(value(n, 2).into_bytes()));
    }
    Ok(())
}
