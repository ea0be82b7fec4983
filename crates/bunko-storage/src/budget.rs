//! [`MemoryBudget`]: one number of bytes (`--memory-budget`) that Bunko's resident memory is
//! sized to. It is split in fixed fractions ([`MemoryBudget::split`]): fjall's block cache,
//! its memtables, a view build's pages, the aggregation buffers of queries, and what no
//! setting sizes (the process and its threads, connections and request bodies, QuickJS
//! runtimes, the allocator's free pages). The server (`crates/bunko`, `memory.rs`) hands
//! freed pages back to the OS whenever its resident memory passes the whole budget.
//!
//! The memtable share bounds all of fjall's memtables together, the active one and the
//! sealed ones waiting for their flush: past it a writer waits for a flush
//! (`Fjall::bound_memtables`). `docs/config.md` gives the table and what was measured.

/// A memory budget in bytes; see the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryBudget(pub u64);

/// What each user of memory gets from a [`MemoryBudget`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shares {
    /// fjall's block cache: a quarter.
    pub cache_bytes: u64,
    /// All memtables together: 3/16, three memtables of [`Shares::memtable_bytes`].
    pub memtables_bytes: u64,
    /// The size at which one memtable is sealed: 1/16.
    pub memtable_bytes: u64,
    /// Bytes of documents a view build reads into one page: 1/16.
    pub view_page_bytes: u64,
    /// What an aggregation `$group` or `$sort` holds before it spills: a quarter.
    pub query_bytes: u64,
    /// The rest (a quarter): what no setting sizes.
    pub other_bytes: u64,
}

impl MemoryBudget {
    /// The default: 96 MiB (a server peaked at 80-159 MB of resident memory with it over
    /// `bunko-bench`'s load, write, read and view workloads; docs/performance.md).
    pub const DEFAULT: MemoryBudget = MemoryBudget(96 << 20);
    /// The smallest budget accepted: every memtable gets at least
    /// [`crate::FjallOptions::MIN_MEMTABLE_BYTES`].
    pub const MIN: MemoryBudget = MemoryBudget(16 << 20);

    /// The shares of this budget (of [`MemoryBudget::MIN`] if it is smaller).
    pub fn split(self) -> Shares {
        let total = self.0.max(Self::MIN.0);
        let sixteenth = total / 16;
        let cache_bytes = 4 * sixteenth;
        let memtables_bytes = 3 * sixteenth;
        let view_page_bytes = sixteenth;
        let query_bytes = 4 * sixteenth;
        Shares {
            cache_bytes,
            memtables_bytes,
            memtable_bytes: sixteenth,
            view_page_bytes,
            query_bytes,
            other_bytes: total - cache_bytes - memtables_bytes - view_page_bytes - query_bytes,
        }
    }

    /// The bytes of this budget (of [`MemoryBudget::MIN`] if it is smaller).
    pub fn bytes(self) -> u64 {
        self.0.max(Self::MIN.0)
    }
}

impl Default for MemoryBudget {
    fn default() -> Self {
        Self::DEFAULT
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FjallOptions;

    #[test]
    fn the_shares_add_up_to_the_budget() {
        for total in [16 << 20, 100_000_000, 128 << 20, 1 << 30, 12_345_678_901] {
            let s = MemoryBudget(total).split();
            let sum = s.cache_bytes
                + s.memtables_bytes
                + s.view_page_bytes
                + s.query_bytes
                + s.other_bytes;
            assert_eq!(sum, total, "{total}");
            assert_eq!(s.cache_bytes, total / 16 * 4);
            assert_eq!(s.memtables_bytes, 3 * s.memtable_bytes);
            assert!(s.memtable_bytes >= FjallOptions::MIN_MEMTABLE_BYTES);
            assert!(s.other_bytes >= total / 16 * 4);
        }
    }

    #[test]
    fn the_default_splits_96_mib() {
        let s = MemoryBudget::DEFAULT.split();
        assert_eq!(s.cache_bytes, 24 << 20);
        assert_eq!(s.memtable_bytes, 6 << 20);
        assert_eq!(s.memtables_bytes, 18 << 20);
        assert_eq!(s.view_page_bytes, 6 << 20);
        assert_eq!(s.query_bytes, 24 << 20);
        assert_eq!(s.other_bytes, 24 << 20);
    }

    #[test]
    fn a_tiny_budget_is_raised_to_the_minimum() {
        assert_eq!(MemoryBudget(1000).split(), MemoryBudget::MIN.split());
        assert_eq!(MemoryBudget(1000).bytes(), MemoryBudget::MIN.0);
        assert_eq!(MemoryBudget::MIN.split().memtable_bytes, 1 << 20);
    }
}
