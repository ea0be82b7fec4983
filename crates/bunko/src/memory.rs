//! Keeps the server's resident memory within its budget (`--memory-budget`) where the
//! allocator is what holds it.
//!
//! jemalloc (`main.rs`) keeps pages the program freed for about a second before it hands
//! them back to the OS (`dirty_decay_ms`, `.cargo/config.toml`), so that memory freed and
//! allocated again soon costs no page faults. Under a bulk load or a view build that is tens
//! of MB on top of what the program holds. A thread of its own looks at the resident set
//! every [`PERIOD`]; whenever it has passed the budget, it has jemalloc return every free
//! page at once (`arena.<all>.purge`). Below the budget nothing changes. Linux only (the
//! resident set is read from `/proc/self/status`); elsewhere nothing runs.
//!
//! A server whose live data is larger than its budget stays over it after a purge. Purging
//! every period then would work like `dirty_decay_ms:0` (up to 60 % more CPU in a trial of
//! issue 20), so while over the budget the watch purges again only once the resident set has
//! grown by [`Watch::slack`] since the last purge: only then can there be much to return.

use std::time::Duration;

/// How often the resident set is looked at: reading it costs a few microseconds.
const PERIOD: Duration = Duration::from_millis(100);

/// Starts the watch over `budget` bytes of resident memory.
pub fn watch(budget: u64) {
    if resident_bytes().is_none() {
        return;
    }
    let spawned = std::thread::Builder::new().name("bunko-memory".into()).spawn(move || {
        let mut watch = Watch::new(budget);
        loop {
            std::thread::sleep(PERIOD);
            let Some(bytes) = resident_bytes() else { continue };
            if watch.should_purge(bytes) {
                return_free_pages();
                watch.purged(resident_bytes().unwrap_or(bytes));
            }
        }
    });
    if let Err(err) = spawned {
        tracing::warn!(%err, "memory watch not started");
    }
}

/// When to purge: over the budget, and grown since the last purge left the process over it.
#[derive(Debug)]
struct Watch {
    budget: u64,
    /// The resident set right after the last purge, while that was still over the budget.
    floor: Option<u64>,
}

impl Watch {
    fn new(budget: u64) -> Self {
        Self { budget, floor: None }
    }

    /// How far the resident set must grow past the last purge's floor to purge again:
    /// 1/16 of the budget, at least 1 MiB.
    fn slack(&self) -> u64 {
        (self.budget / 16).max(1 << 20)
    }

    /// Whether a resident set of `bytes` calls for a purge now.
    fn should_purge(&mut self, bytes: u64) -> bool {
        if bytes <= self.budget {
            self.floor = None;
            return false;
        }
        self.floor.is_none_or(|floor| bytes > floor.saturating_add(self.slack()))
    }

    /// Records the resident set a purge left.
    fn purged(&mut self, bytes: u64) {
        self.floor = (bytes > self.budget).then_some(bytes);
    }
}

/// The process's resident set (`VmRSS`) in bytes, if the OS tells it.
pub fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_vm_rss(&status)
}

/// `VmRSS` of a `/proc/<pid>/status` text, in bytes.
fn parse_vm_rss(status: &str) -> Option<u64> {
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Has jemalloc return the free (dirty and muzzy) pages of every arena to the OS now.
#[expect(unsafe_code, reason = "jemalloc's mallctl, a C function, is the only way to purge")]
fn return_free_pages() {
    // `arena.<i>.purge` with i = MALLCTL_ARENAS_ALL (4096 in jemalloc 5): every arena.
    const PURGE_ALL: &[u8] = b"arena.4096.purge\0";
    // Safety: the name is a NUL-terminated mallctl name of a void command, which reads and
    // writes nothing, so every pointer may be null and both lengths zero.
    let rc = unsafe {
        tikv_jemalloc_sys::mallctl(
            PURGE_ALL.as_ptr().cast(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        )
    };
    if rc != 0 {
        tracing::debug!(rc, "jemalloc purge failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_resident_set_is_read_in_bytes() {
        let status = "Name:\tbunko\nVmHWM:\t  51200 kB\nVmRSS:\t   2048 kB\nThreads:\t9\n";
        assert_eq!(parse_vm_rss(status), Some(2048 * 1024));
        assert_eq!(parse_vm_rss("Name:\tbunko\n"), None);
        if cfg!(target_os = "linux") {
            assert!(resident_bytes().is_some_and(|bytes| bytes > 0));
        }
    }

    #[test]
    fn a_purge_that_leaves_the_process_over_budget_waits_for_growth() {
        const MIB: u64 = 1 << 20;
        let mut watch = Watch::new(96 * MIB);
        assert!(!watch.should_purge(90 * MIB));
        assert!(watch.should_purge(120 * MIB));
        watch.purged(110 * MIB);
        assert!(!watch.should_purge(112 * MIB), "within the slack of 6 MiB");
        assert!(watch.should_purge(117 * MIB), "grown past the floor plus the slack");
        watch.purged(90 * MIB);
        assert!(watch.should_purge(100 * MIB), "the purge got under the budget: no floor");
        watch.purged(100 * MIB);
        assert!(!watch.should_purge(101 * MIB));
        assert!(!watch.should_purge(50 * MIB), "under the budget");
        assert!(watch.should_purge(101 * MIB), "dropping under the budget clears the floor");
    }

    #[test]
    fn returning_free_pages_keeps_what_is_allocated() {
        let kept: Vec<Vec<u8>> = (0..64).map(|i| vec![i as u8; 64 << 10]).collect();
        drop((0..64).map(|i| vec![i as u8; 64 << 10]).collect::<Vec<_>>());
        return_free_pages();
        assert!(kept.iter().enumerate().all(|(i, v)| v.iter().all(|&b| b == i as u8)));
    }
}
