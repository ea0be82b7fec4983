//! How often queries used an index, as MongoDB's `$indexStats` reports it (`accesses: {ops,
//! since}`). Counted in memory from the moment the index is loaded or created, so a
//! restart of the server, or dropping and creating the index again, starts it afresh, as
//! MongoDB's counters do (DESIGN §8: nothing here needs to survive; it is not rebuilt).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// The use counter of one index.
#[derive(Debug)]
pub struct Accesses {
    ops: AtomicU64,
    /// When counting started, in milliseconds since the Unix epoch.
    since: i64,
}

impl Default for Accesses {
    fn default() -> Self {
        let since = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
        Accesses { ops: AtomicU64::new(0), since: i64::try_from(since).unwrap_or(i64::MAX) }
    }
}

impl Accesses {
    /// Counts one query that read the index.
    pub fn record(&self) {
        self.ops.fetch_add(1, Ordering::Relaxed);
    }

    /// The queries counted so far.
    pub fn ops(&self) -> u64 {
        self.ops.load(Ordering::Relaxed)
    }

    /// When counting started, in milliseconds since the Unix epoch.
    pub fn since_millis(&self) -> i64 {
        self.since
    }
}

#[cfg(test)]
mod tests {
    use super::Accesses;

    #[test]
    fn counts_from_zero_and_keeps_its_start() {
        let accesses = Accesses::default();
        let since = accesses.since_millis();
        assert_eq!(accesses.ops(), 0);
        accesses.record();
        accesses.record();
        assert_eq!((accesses.ops(), accesses.since_millis()), (2, since));
        assert!(since > 1_600_000_000_000, "{since}");
    }
}
