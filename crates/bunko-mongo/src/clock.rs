//! The cluster time: the logical clock a replica-set member reports in every reply as
//! `operationTime` and `$clusterTime`, which drivers read for causal consistency (the next
//! transaction of a session reads `afterClusterTime` it) and snapshot reads.
//!
//! It is a BSON timestamp, seconds since the epoch and a counter within the second, as
//! MongoDB's oplog times are: every write command [`ticks`](Clock::tick) it, once done, to the later of
//! the wall clock's second and one past the last tick, so it never goes back and two writes
//! never share a time. Writes over HTTP advance it too: a command first
//! [observes](Clock::observe) whether any database was written since the last one. A read
//! reports the time of the last write it may have seen.
//!
//! Nor does it go back across a restart, and a restart never waits: as a timestamp oracle
//! does, the clock keeps a high-water mark on disk (the server-wide record `mongo_clock`),
//! raised durably *before* a tick passes it, by a reserve of [`RESERVE`] ticks, so a run
//! writes it about once per second in which it ticks. A restarted clock starts one past the
//! mark (or at the wall clock's second, if later), past every time the run before could
//! have reported. A data directory without the mark (written before it existed) starts past
//! the last write the store journaled ([`Clock::after`]). The `$clusterTime` signature is
//! MongoDB's unsigned one (keyId 0, a zero hash), which drivers send back unchanged; a
//! server without keys does not check it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bson::{Binary, Document, Timestamp, doc, spec::BinarySubtype};
use bunko_engine::Engine;
use parking_lot::Mutex;

/// The server-wide record holding the high-water mark (8 bytes, big-endian clock value).
const MARK: &str = "mongo_clock";

/// How many ticks past the one that needs it a new high-water mark reserves: far more than
/// a second's writes, so the mark is written about once per second in which writes happen.
pub const RESERVE: u64 = 1 << 20;

/// The cluster time of one server.
pub struct Clock {
    /// `seconds << 32 | increment` of the last write.
    last: AtomicU64,
    /// The engine's count of database updates last seen ([`Clock::observe`]).
    seen: AtomicU64,
    /// The high-water mark: no tick passes it before it is raised on disk.
    reserved: AtomicU64,
    /// Where the mark is kept (none: a clock that keeps nothing, for tests).
    store: Option<Arc<Engine>>,
    /// Held while the mark is raised, so one thread writes it at a time.
    raising: Mutex<()>,
}

impl Default for Clock {
    fn default() -> Self {
        Clock::starting_at(wall() << 32 | 1, u64::MAX, None)
    }
}

impl Clock {
    fn starting_at(start: u64, reserved: u64, store: Option<Arc<Engine>>) -> Clock {
        Clock {
            last: AtomicU64::new(start),
            seen: AtomicU64::new(0),
            reserved: AtomicU64::new(reserved),
            store,
            raising: Mutex::new(()),
        }
    }

    /// The clock of a server over `engine`: one past the stored high-water mark, or, for a
    /// data directory without one, past the last write of its databases (the newest entry
    /// of their change journals), so the cluster time a client saw before a restart is
    /// never reported again (nor an earlier one).
    pub fn after(engine: &Arc<Engine>) -> Clock {
        let mark = engine.meta(MARK).ok().flatten().and_then(|b| <[u8; 8]>::try_from(b).ok());
        let start = match mark {
            Some(bytes) => (wall() << 32 | 1).max(u64::from_be_bytes(bytes).saturating_add(1)),
            None => {
                let last_ms = engine
                    .db_names()
                    .iter()
                    .filter_map(|name| engine.get_db(name)?.last_write_ms().ok().flatten())
                    .max();
                start_after_ms(last_ms)
            }
        };
        // Nothing is reserved yet: the first tick raises the mark.
        Clock::starting_at(start, start, Some(engine.clone()))
    }
}

/// For a data directory without a high-water mark: a clock never runs ahead of the wall
/// clock (its ticks are in the second they happen), so one that starts in a later second
/// than the last stored write is past every time the run before reported. When that write
/// is in the current second, the run before may have ticked anywhere within it: the clock
/// waits for the next second (at most one, once: the mark exists from then on). A stored
/// write in a later second than the wall clock's (the clock was set back) starts the clock
/// in the second after it.
fn start_after_ms(last_ms: Option<u64>) -> u64 {
    let stored = last_ms.map_or(0, |ms| (ms / 1000).min(u64::from(u32::MAX)));
    if stored == wall() {
        while wall() <= stored {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    (wall() << 32 | 1).max((stored + 1) << 32 | 1)
}

fn wall() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
        .min(u64::from(u32::MAX))
}

fn timestamp(value: u64) -> Timestamp {
    Timestamp { time: (value >> 32) as u32, increment: value as u32 }
}

/// A timestamp's place on the clock.
pub fn value(time: Timestamp) -> u64 {
    u64::from(time.time) << 32 | u64::from(time.increment)
}

impl Clock {
    /// The time of the last write.
    pub fn now(&self) -> Timestamp {
        timestamp(self.last.load(Ordering::Acquire))
    }

    /// Advances the clock if the engine's databases were written since the last call
    /// (`updates`: the engine's count of database updates, which writes over HTTP advance
    /// too), so those writes have a cluster time as well.
    pub fn observe(&self, updates: u64) {
        if self.seen.swap(updates, Ordering::AcqRel) != updates {
            self.tick();
        }
    }

    /// Advances the clock for a write; the write's time.
    pub fn tick(&self) -> Timestamp {
        let floor = wall() << 32 | 1;
        let mut current = self.last.load(Ordering::Acquire);
        loop {
            let next = floor.max(current + 1);
            if next > self.reserved.load(Ordering::Acquire) {
                self.raise(next);
                continue;
            }
            match self.last.compare_exchange(current, next, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return timestamp(next),
                Err(seen) => current = seen,
            }
        }
    }

    /// Raises the high-water mark on disk to [`RESERVE`] ticks past `next`, then in memory.
    /// If the store refuses the write (it is failing, and refuses the writes the ticks are
    /// for too), the mark is raised in memory only, logged: this run goes on.
    fn raise(&self, next: u64) {
        let _one = self.raising.lock();
        if next <= self.reserved.load(Ordering::Acquire) {
            return;
        }
        let mark = next.saturating_add(RESERVE);
        if let Some(engine) = &self.store
            && let Err(err) = engine.set_meta_durably(MARK, mark.to_be_bytes().to_vec())
        {
            tracing::error!(%err, "the cluster time's high-water mark was not stored");
        }
        self.reserved.store(mark, Ordering::Release);
    }

    /// Adds `operationTime` and `$clusterTime` to a reply.
    pub fn stamp(&self, reply: &mut Document) {
        let now = self.now();
        let signature = doc! {
            "hash": Binary { subtype: BinarySubtype::Generic, bytes: vec![0; 20] },
            "keyId": 0_i64,
        };
        reply.insert("$clusterTime", doc! {"clusterTime": now, "signature": signature});
        reply.insert("operationTime", now);
    }
}

/// Ticks the clock when dropped: a write command holds one while it runs.
pub struct TickAfter<'a>(pub Option<&'a Clock>);

impl Drop for TickAfter<'_> {
    fn drop(&mut self) {
        if let Some(clock) = self.0 {
            clock.tick();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_never_go_back_and_never_repeat() {
        let clock = Clock::default();
        let start = clock.now();
        let a = clock.tick();
        let b = clock.tick();
        assert!(value(a) > value(start));
        assert!(value(b) > value(a));
        assert_eq!(value(clock.now()), value(b));
        let mut reply = doc! {"ok": 1.0};
        clock.stamp(&mut reply);
        assert_eq!(reply.get_timestamp("operationTime").ok(), Some(b));
        let cluster = reply.get_document("$clusterTime").expect("clusterTime");
        assert_eq!(cluster.get_timestamp("clusterTime").ok(), Some(b));
    }

    #[test]
    fn observed_updates_advance_the_clock_once() {
        let clock = Clock::default();
        let start = value(clock.now());
        clock.observe(7);
        let once = value(clock.now());
        clock.observe(7);
        assert!(once > start);
        assert_eq!(value(clock.now()), once);
        clock.observe(8);
        assert!(value(clock.now()) > once);
    }

    #[test]
    fn a_clock_without_a_mark_starts_past_the_last_stored_write() {
        let ahead_s = wall() + 3600;
        let start = start_after_ms(Some(ahead_s * 1000 + 250));
        assert_eq!(start, (ahead_s + 1) << 32 | 1);
        let past = timestamp(start_after_ms(Some(1000)));
        assert!(u64::from(past.time) >= wall() - 1);
        assert_eq!(past.increment, 1);
        // A write in this very second: the run before may have ticked anywhere in it.
        let this_second = wall();
        let fast = timestamp(start_after_ms(Some(this_second * 1000 + 999)));
        assert!(u64::from(fast.time) > this_second);
    }

    /// Every tick is below the mark stored before it; a restart starts one past the mark at
    /// once (in the same second, no wait), and a mark ahead of the wall clock is kept.
    #[test]
    fn a_restart_starts_past_the_stored_mark_without_waiting() -> bunko_engine::Result<()> {
        let store: Arc<dyn bunko_storage::Store> = Arc::new(bunko_storage::Memory::new());
        let open = || Engine::open(store.clone(), bunko_engine::Config::default()).map(Arc::new);
        let engine = open()?;
        let clock = Clock::after(&engine);
        let ticks: Vec<u64> = (0..5).map(|_| value(clock.tick())).collect();
        let stored = |e: &Engine| -> Option<u64> {
            Some(u64::from_be_bytes(e.meta(MARK).ok()??.try_into().ok()?))
        };
        let mark = stored(&engine).unwrap_or(0);
        assert!(ticks.iter().all(|t| *t <= mark), "{ticks:?} under {mark}");
        assert_eq!(mark, ticks[0] + RESERVE, "one write reserves for many ticks");
        drop(clock);
        drop(engine);
        let engine = open()?;
        let started = std::time::Instant::now();
        let again = Clock::after(&engine);
        assert!(started.elapsed() < std::time::Duration::from_millis(100), "no wait");
        let first = value(again.tick());
        assert!(first > mark, "past every time reserved before");
        assert!(u64::from(timestamp(first).time) <= wall() + 1);
        // A mark ahead of the wall clock (the clock was set back) is kept to.
        let ahead = (wall() + 3600) << 32 | 7;
        engine.set_meta_durably(MARK, ahead.to_be_bytes().to_vec())?;
        assert_eq!(value(Clock::after(&engine).tick()), ahead + 2);
        Ok(())
    }
}
