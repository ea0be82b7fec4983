//! Snapshot reads outside transactions (`readConcern: {level: "snapshot"}` on `find`,
//! `aggregate`, `distinct`, `count`): the storage snapshots handed out, by the cluster time
//! they stand for ([`crate::clock`]), so that a later read with `atClusterTime` reads the
//! same data, as a snapshot session's reads do.
//!
//! A read without `atClusterTime` takes a storage snapshot now, labelled with the cluster
//! time of the last write it holds (taken only when no write finished meanwhile, so the
//! label is exact), and answers that time as `atClusterTime`. A read with `atClusterTime`
//! gets the snapshot kept for that time, or a new one when no write happened since; any
//! other time is MongoDB's `SnapshotTooOld` (239). Snapshots are kept for 5 minutes
//! (MongoDB's `minSnapshotHistoryWindowInSeconds`) and at most [`KEPT`] of them.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bson::Timestamp;
use bunko_engine::Engine;
use bunko_engine::find::mongo_stream::Snapshot;
use parking_lot::Mutex;

use crate::clock::{Clock, value};
use crate::error::MongoError;

/// How long a snapshot is kept after it was last used.
const WINDOW: Duration = Duration::from_secs(300);
/// At most this many snapshots are kept (the oldest go first).
const KEPT: usize = 64;

/// The snapshots handed out, by cluster time.
#[derive(Default)]
pub struct History {
    kept: Mutex<BTreeMap<u64, (Instant, Snapshot)>>,
}

impl History {
    /// The snapshot to read at `at` (none: now) and the cluster time it stands for.
    pub fn at(
        &self,
        clock: &Clock,
        engine: &Engine,
        at: Option<Timestamp>,
    ) -> Result<(Timestamp, Snapshot), MongoError> {
        let mut kept = self.kept.lock();
        let now = Instant::now();
        kept.retain(|_, (used, _)| now.duration_since(*used) < WINDOW);
        if let Some(at) = at
            && let Some((used, snapshot)) = kept.get_mut(&value(at))
        {
            *used = now;
            return Ok((at, snapshot.clone()));
        }
        let (time, snapshot) = fresh(clock, engine);
        if at.is_some_and(|at| value(at) != value(time)) {
            return Err(MongoError::new(
                239,
                "SnapshotTooOld",
                format!(
                    "Read timestamp {} is older than the oldest available timestamp.",
                    at.map_or(String::new(), |t| format!("Timestamp({}, {})", t.time, t.increment))
                ),
            ));
        }
        let entry = kept.entry(value(time)).or_insert((now, snapshot));
        entry.0 = now;
        let snapshot = entry.1.clone();
        while kept.len() > KEPT {
            kept.pop_first();
        }
        Ok((time, snapshot))
    }
}

/// A snapshot taken now and the cluster time of the last write it holds: the clock read
/// before and after it agree, so no write finished in between.
fn fresh(clock: &Clock, engine: &Engine) -> (Timestamp, Snapshot) {
    let updates = || bunko_engine::db_updates::global().last_seq();
    loop {
        clock.observe(updates());
        let before = clock.now();
        let snapshot = engine.snapshot();
        clock.observe(updates());
        if value(clock.now()) == value(before) {
            return (before, snapshot);
        }
    }
}
