//! [`MemoryBudget`]: one number of bytes (`--memory-budget`) that the memory Bunko sizes
//! itself shares: fjall's block cache, its memtables, a view build's pages and the
//! aggregation buffers of queries. Each gets a fixed fraction ([`MemoryBudget::split`]).
//!
//! The memtable share covers all of fjall's memtables: the active one and up to four sealed
//! ones waiting for their flush (fjall stalls writers at four), so each memtable is a fifth
//! of it. Memory that no setting bounds (the process itself, connections, QuickJS
//! runtimes, jemalloc's retained pages) comes on top; `docs/config.md` gives what the
//! benchmark measured.

/// A memory budget in bytes; see the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryBudget(pub u64);

/// What each user of memory gets from a [`MemoryBudget`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shares {
    /// fjall's block cache: a quarter.
    pub cache_bytes: u64,
    /// The size at which one memtable is sealed: 5/16 shared by five memtables.
    pub memtable_bytes: u64,
    /// Bytes of documents a view build reads into one page: 1/16.
    pub view_page_bytes: u64,
    /// What an aggregation `$group` or `$sort` holds before it spills: the remaining 3/8.
    pub query_bytes: u64,
}

impl MemoryBudget {
    /// The default: 128 MiB.
    pub const DEFAULT: MemoryBudget = MemoryBudget(128 << 20);
    /// The smallest budget accepted: every memtable gets at least
    /// [`crate::FjallOptions::MIN_MEMTABLE_BYTES`].
    pub const MIN: MemoryBudget = MemoryBudget(16 << 20);

    /// The shares of this budget (of [`MemoryBudget::MIN`] if it is smaller).
    pub fn split(self) -> Shares {
        let total = self.0.max(Self::MIN.0);
        let sixteenth = total / 16;
        let cache_bytes = 4 * sixteenth;
        let memtable_bytes = 5 * sixteenth / 5;
        let view_page_bytes = sixteenth;
        Shares {
            cache_bytes,
            memtable_bytes,
            view_page_bytes,
            query_bytes: total - cache_bytes - 5 * memtable_bytes - view_page_bytes,
        }
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
            let sum = s.cache_bytes + 5 * s.memtable_bytes + s.view_page_bytes + s.query_bytes;
            assert_eq!(sum, total, "{total}");
            assert_eq!(s.cache_bytes, total / 16 * 4);
            assert!(s.memtable_bytes >= FjallOptions::MIN_MEMTABLE_BYTES);
            assert!(s.query_bytes >= total / 16 * 6);
        }
    }

    #[test]
    fn the_default_keeps_the_earlier_cache_and_halves_the_memtables() {
        let s = MemoryBudget::DEFAULT.split();
        assert_eq!(s.cache_bytes, 32 << 20);
        assert_eq!(s.memtable_bytes, 8 << 20);
        assert_eq!(s.view_page_bytes, 8 << 20);
        assert_eq!(s.query_bytes, 48 << 20);
    }

    #[test]
    fn a_tiny_budget_is_raised_to_the_minimum() {
        assert_eq!(MemoryBudget(1000).split(), MemoryBudget::MIN.split());
        assert_eq!(MemoryBudget::MIN.split().memtable_bytes, 1 << 20);
    }
}
