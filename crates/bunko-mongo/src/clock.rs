//! The cluster time: the logical clock a replica-set member reports in every reply as
//! `operationTime` and `$clusterTime`, which drivers read for causal consistency (the next
//! transaction of a session reads `afterClusterTime` it) and snapshot reads.
//!
//! It is a BSON timestamp, seconds since the epoch and a counter within the second, as
//! MongoDB's oplog times are: every write command [`ticks`](Clock::tick) it, once done, to the later of
//! the wall clock's second and one past the last tick, so it never goes back and two writes
//! never share a time. Writes over HTTP advance it too: a command first
//! [observes](Clock::observe) whether any database was written since the last one. A read
//! reports the time of the last write it may have seen. Nor
//! does it go back across a restart: it starts past the last write the store journaled
//! ([`Clock::after`]), whatever the wall clock says. The
//! `$clusterTime` signature is MongoDB's unsigned one (keyId 0, a zero hash), which drivers
//! send back unchanged; a server without keys does not check it.

use std::sync::atomic::{AtomicU64, Ordering};

use bson::{Binary, Document, Timestamp, doc, spec::BinarySubtype};
use bunko_engine::Engine;

/// The cluster time of one server.
pub struct Clock {
    /// `seconds << 32 | increment` of the last write.
    last: AtomicU64,
    /// The engine's count of database updates last seen ([`Clock::observe`]).
    seen: AtomicU64,
}

impl Default for Clock {
    fn default() -> Self {
        Clock { last: AtomicU64::new(wall() << 32 | 1), seen: AtomicU64::new(0) }
    }
}

impl Clock {
    /// A clock that starts past the last write of the databases of `engine` (the newest
    /// entry of their change journals), so the cluster time a client saw before a restart
    /// is never reported again (nor an earlier one).
    pub fn after(engine: &Engine) -> Clock {
        let last_ms = engine
            .db_names()
            .iter()
            .filter_map(|name| engine.get_db(name)?.last_write_ms().ok().flatten())
            .max();
        Clock::after_ms(last_ms)
    }

    /// A clock never runs ahead of the wall clock (its ticks are in the second they happen),
    /// so one that starts in a later second than the last stored write is past every time
    /// the run before reported. When that write is in the current second, the run before
    /// may have ticked anywhere within it: the clock waits for the next second (at most one).
    /// A stored write in a later second than the wall clock's (the clock was set back)
    /// starts the clock in the second after it.
    fn after_ms(last_ms: Option<u64>) -> Clock {
        let stored = last_ms.map_or(0, |ms| (ms / 1000).min(u64::from(u32::MAX)));
        if stored == wall() {
            while wall() <= stored {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
        let start = (wall() << 32 | 1).max((stored + 1) << 32 | 1);
        Clock { last: AtomicU64::new(start), seen: AtomicU64::new(0) }
    }
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
            match self.last.compare_exchange(current, next, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return timestamp(next),
                Err(seen) => current = seen,
            }
        }
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
    fn a_restarted_clock_starts_past_the_last_stored_write() {
        let ahead_s = wall() + 3600;
        let clock = Clock::after_ms(Some(ahead_s * 1000 + 250));
        let now = clock.now();
        assert_eq!((u64::from(now.time), u64::from(now.increment)), (ahead_s + 1, 1));
        assert!(value(clock.tick()) > value(now));
        let past = Clock::after_ms(Some(1000));
        assert!(u64::from(past.now().time) >= wall() - 1);
        assert_eq!(past.now().increment, 1);
        // A write in this very second: the run before may have ticked anywhere in it.
        let this_second = wall();
        let fast = Clock::after_ms(Some(this_second * 1000 + 999));
        assert!(u64::from(fast.now().time) > this_second);
    }
}
