//! [`FjallOptions`]: every fjall setting Bunko chooses, in one place.
//!
//! What fjall holds in memory, and what bounds it:
//!
//! - **Block cache** (database-wide, [`FjallOptions::cache_bytes`]): decompressed data,
//!   index and filter blocks read from tables.
//! - **Memtables** (per keyspace: one in a store of format 1 to 3, seven in format 4,
//!   `layout.rs`): a keyspace's active memtable is sealed once it
//!   holds [`FjallOptions::memtable_bytes`] of keys and values (or
//!   [`FjallOptions::bulk_memtable_bytes`] while a [`crate::Bulk`] lease is held; fjall's
//!   own size, kept from the keyspace's creation, is the larger of the two, so that Bunko
//!   seals, `Fjall::seal_full_memtable`), and sealed ones wait for
//!   their flush; together they are kept within [`FjallOptions::memtables_bytes`] (writers
//!   wait for a flush past it; fjall's own limit, four sealed memtables, is higher, and
//!   fjall seals a full memtable only when its one worker is free). Measured with
//!   `bunko-bench --workloads load` (200k ~1 KB docs, 1 client): peak RSS 222 MB with
//!   fjall's default of 64 MiB, 112 MB with 16 MiB, at the same throughput (flushes are
//!   just smaller and more frequent). Both sizes come from one [`MemoryBudget`]
//!   (`--memory-budget`, `budget.rs`) unless set on their own.
//! - **Journal**: one userspace buffer; journals themselves are on disk only.
//!
//! Flushes and compactions run on one background worker thread (`WORKERS`: fjall's
//! default of one per core, up to four, makes one of them spin while the others compact).
//!
//! On disk, values of 128 bytes or more are compressed one by one with zstd
//! ([`Compression::Zstd`], the default, in stores of format 2 or 3: `value.rs`), and data
//! blocks are left as written. The benchmark documents' padding is random hex, which LZ4
//! barely shrinks (no entropy coding) and zstd halves, so LZ4 over blocks of zstd frames
//! gains little, while it was 12 % of the server's CPU samples in `load` (fjall's worker
//! compresses every block it flushes or compacts). Measured on the shared 2-core machine
//! (issue 20, session 28: 200k documents, 191.7 MB of JSON, `bunko-bench --workloads
//! load,read`, five alternating pairs at load average 10-13; docs/performance.md): with LZ4
//! blocks at every level (what `Zstd` stores created before session 28 keep), the
//! directory took 138 MB after `_compact`; without block compression 150 MB (0.67×
//! CouchDB's compacted 225 MB). Server CPU per 1,000 documents loaded fell from 27.9 to
//! 25.2 ms with one client (medians; lower in 5 of 5 pairs), from 33.0 to 30.2 into a
//! partitioned database, and moved within the noise with four clients (29.3 and 29.0; in
//! two later pairs at load average 5, 27.0 and 24.6);
//! per 1,000 point GETs 30.8 against 29.8. LZ4 everywhere but level 0 (the flushes) saved
//! about half as much: fjall's leveled compaction grows a young tree in its last level, so
//! most compactions write into a compressed level anyway. Before `_compact`, the
//! uncompressed directory is larger: ~380 MB after the load, against 200-340 MB with LZ4
//! (CouchDB's file: 383 MB).
//!
//! Besides the tables, the directory holds up to ~64 MB of journal whose data is already
//! in tables (fjall rotates a journal only past 64 MB, a constant of fjall's, and has no
//! call to rotate it sooner), and tables replaced by a compaction until a memtable
//! rotation finds no snapshot older than the compaction (or the store closes).
//! `_compact` ([`crate::Store::reclaim`]) pushes the active journal past fjall's mark
//! (`journal.rs`), flushes (which seals and deletes it), compacts every table into the last
//! level and seals one more memtable, so that little but live data is left (first making
//! fjall recompute its snapshot watermark, without which that seal kept the replaced
//! tables whenever fjall had not recomputed it since the compaction).
//!
//! **Compaction**: fjall's leveled compaction, with level 1 sized `level0_tables ×
//! table_bytes` and each level after it 10 times the one before (fjall's ratio), in each
//! keyspace. In a store of format 1 to 3 (one keyspace), every
//! table flushed from a memtable holds keys of every kind (doc infos, bodies, seqs,
//! index entries), so its key range spans the whole keyspace and each merge of level 0
//! into level 1 rewrites all of level 1: per byte flushed, that merge writes about
//! `table_bytes / memtable_bytes`. With the defaults (fjall's: 4 tables of 64 MiB, a
//! 256 MiB level 1 merged every 4 flushes of 6 MiB memtables), loading 1M documents
//! wrote ~15 GB for a 1.2 GB directory. 8 tables of 32 MiB keep level 1 at 256 MiB and
//! merge half as often: ~10 GB written and 15 % less server CPU per document loaded
//! from 200k to 1M, but 7-14 % more per point GET and `_find` at 200k (a read looks
//! into up to 8 level-0 tables instead of 4; 2-6 % less at 1M), so that shape is an
//! option, not the default (docs/performance.md, issue 20 point 8, session 31). fjall
//! slows every write down once level 0 holds 20 tables. A store of format 4 keeps each
//! kind of key in a keyspace of its own, so that a kind written in key order flushes
//! tables that fjall moves down without merging (`layout.rs`; measured in
//! docs/performance.md, issue 20 point 8, session 34).
//!
//! Keyspace settings (memtable size, compression, compaction) are stored by fjall when the
//! keyspace is created and kept when it is reopened: a store created with other values keeps them,
//! so a data directory from before compression opens and stays as it was. The cache size
//! applies every time the store is opened.

use fjall::CompressionType;
use fjall::compaction::Leveled;
use fjall::config::{CompressionPolicy, PartitioningPolicy};
use fjall::{Database, DatabaseBuilder, KeyspaceCreateOptions};
use std::path::Path;

use crate::MemoryBudget;

/// fjall's background worker threads (memtable flushes and compactions): one. With two or
/// more, fjall 3.1's worker 0 leaves compactions to the others by putting each compaction
/// request it receives back into the queue and returning, so while the others compact it
/// takes the same request again at once and spins on a core (`worker_tick` and flume's
/// `send` were 29 % of the server's CPU samples in a profile of a view build on 2 cores).
/// One worker flushes and compacts in turn, without the spin: 20 % less server CPU per
/// document in the first view build of 200k documents (docs/performance.md, session 25).
const WORKERS: usize = 1;
use crate::value::ValueCodec;

/// Memory and disk settings of a [`crate::Fjall`] store. See the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FjallOptions {
    /// Capacity of fjall's block cache in bytes.
    pub cache_bytes: u64,
    /// Size at which a memtable is sealed and flushed, in bytes.
    pub memtable_bytes: u64,
    /// What all memtables may hold together, in bytes (at least one memtable).
    pub memtables_bytes: u64,
    /// Size at which a memtable is sealed while a bulk writer holds a
    /// [`crate::Bulk`] lease (a view's first build), in bytes; all memtables together may
    /// then hold twice as much (one being flushed, the active one).
    pub bulk_memtable_bytes: u64,
    /// Compression of data blocks (for new stores).
    pub compression: Compression,
    /// Size fjall's leveled compaction cuts the tables it writes to, in bytes (for new
    /// stores); see "Compaction" in the module docs.
    pub table_bytes: u64,
    /// Tables level 0 (the flushed memtables) collects before they are merged into
    /// level 1 (for new stores); see "Compaction" in the module docs.
    pub level0_tables: u8,
}

/// How a store compresses what it writes: values one by one, and fjall's data blocks
/// (the block setting is chosen when the store is created and kept).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    /// Each value of 128 bytes or more with zstd where that saves 1/16 of it (stores of
    /// format 2; `value.rs`); data blocks as written (the default; stores created before
    /// session 28 keep LZ4 blocks at every level).
    #[default]
    Zstd,
    /// LZ4 at every level; values as given.
    Lz4,
    /// fjall's default: uncompressed in levels 0 and 1, LZ4 from level 2.
    Deep,
    /// No compression.
    None,
}

impl std::str::FromStr for Compression {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "zstd" => Ok(Compression::Zstd),
            "lz4" => Ok(Compression::Lz4),
            "deep" => Ok(Compression::Deep),
            "none" => Ok(Compression::None),
            other => Err(format!("unknown compression {other:?} (zstd, lz4, deep or none)")),
        }
    }
}

impl Compression {
    fn policy(self) -> CompressionPolicy {
        use CompressionType::{Lz4, None as Off};
        match self {
            Compression::Lz4 => CompressionPolicy::all(Lz4),
            Compression::Deep => CompressionPolicy::new([Off, Off, Lz4]),
            Compression::Zstd | Compression::None => CompressionPolicy::all(Off),
        }
    }
}

impl FjallOptions {
    /// The cache and memtable sizes of `budget` (its shares: [`MemoryBudget::split`]),
    /// with the default compression. The default budget gives a 24 MiB cache (fjall's own
    /// default is 32 MiB) and 6 MiB memtables (fjall's are 64 MiB), 18 MiB of them at most;
    /// while a bulk writer holds a [`crate::Bulk`] lease (a view's first build), memtables
    /// of a third of the budget (32 MiB), 64 MiB of them at most. That goes past the
    /// budget's split for as long as the build runs: the `view` benchmark's first build
    /// of 200k documents took 18 % less server CPU per row with it, at a peak RSS of
    /// 155-158 MB instead of 104-116 (docs/performance.md, session 31).
    pub fn from_budget(budget: MemoryBudget) -> FjallOptions {
        let shares = budget.split();
        FjallOptions {
            cache_bytes: shares.cache_bytes,
            memtable_bytes: shares.memtable_bytes,
            memtables_bytes: shares.memtables_bytes,
            bulk_memtable_bytes: budget.bytes() / 3,
            compression: Compression::default(),
            table_bytes: Self::TABLE_BYTES,
            level0_tables: Self::LEVEL0_TABLES,
        }
    }

    /// The smallest memtable accepted; smaller ones would flush tiny tables.
    pub const MIN_MEMTABLE_BYTES: u64 = 1 << 20;

    /// The default [`FjallOptions::table_bytes`]: fjall's, 64 MiB.
    pub const TABLE_BYTES: u64 = 64 << 20;

    /// The smallest [`FjallOptions::table_bytes`] accepted.
    pub const MIN_TABLE_BYTES: u64 = 1 << 20;

    /// The default [`FjallOptions::level0_tables`]: fjall's, 4.
    pub const LEVEL0_TABLES: u8 = 4;

    /// The range of [`FjallOptions::level0_tables`] accepted: fjall slows every write
    /// down once level 0 holds 20 tables, so the merge has to start well before.
    pub const LEVEL0_TABLES_RANGE: std::ops::RangeInclusive<u8> = 2..=16;

    /// The database builder for `path`, with these options.
    pub(crate) fn database(&self, path: &Path) -> DatabaseBuilder<Database> {
        Database::builder(path)
            .manual_journal_persist(true)
            .cache_size(self.cache_bytes)
            .worker_threads(WORKERS)
    }

    /// How values are stored in a directory of storage format `format`.
    pub(crate) fn codec(&self, format: u32) -> ValueCodec {
        match format {
            1 => ValueCodec::Bare,
            _ => ValueCodec::Framed { compress: self.compression == Compression::Zstd },
        }
    }

    /// The options Bunko's keyspace is created with.
    ///
    /// Index and filter blocks are **partitioned** at every level: a table keeps a small
    /// top-level index of each in memory and reads 4 KiB partitions through the block cache.
    /// fjall's default partitions only from L3 and keeps the lower levels' index and filter
    /// as one block per table, unpinned from L2 (filters from L1). A 64 MiB table's full
    /// index is ~1 MiB, so at ~1M documents those blocks crowded the block cache out, and
    /// every short read loaded (and checksummed) a whole index block again: a partition
    /// `_all_docs` of 25 rows took ~1 ms instead of ~40 µs (`crates/bunko-bench`,
    /// `partition-scaling`). Session 34's stores still kept L0 and L1 unpartitioned and
    /// pinned; that held memory in proportion to the data:
    ///
    /// - a table keeps what it was opened with, and a table flushed into L0 that fjall
    ///   moves down without merging (most tables of a keyspace written in key order, format
    ///   4) kept its whole index and filter pinned at every level: at 10M documents 484
    ///   such tables in `docs` held ~60 MB (a heap profile of the `scale` load);
    /// - a merge into L1 wrote each output table's unpartitioned index from keys that
    ///   share the memory of the input blocks they were read from, so the index of a
    ///   64 MiB table being written held up to 64 MiB of input blocks (43 MB in a heap
    ///   profile of the load to 1M); a partitioned index writes its entries out every
    ///   4 KiB.
    ///
    /// A store keeps the policies it was created with (fjall stores them per keyspace).
    ///
    /// Compaction: see "Compaction" in the module docs.
    pub(crate) fn keyspace(&self) -> KeyspaceCreateOptions {
        let compaction = Leveled::default()
            .with_l0_threshold(
                self.level0_tables
                    .clamp(*Self::LEVEL0_TABLES_RANGE.start(), *Self::LEVEL0_TABLES_RANGE.end()),
            )
            .with_table_target_size(self.table_bytes.max(Self::MIN_TABLE_BYTES));
        KeyspaceCreateOptions::default()
            .compaction_strategy(std::sync::Arc::new(compaction))
            .manual_journal_persist(true)
            .max_memtable_size(
                self.memtable_bytes.max(self.bulk_memtable_bytes).max(Self::MIN_MEMTABLE_BYTES),
            )
            .index_block_partitioning_policy(PartitioningPolicy::all(true))
            .filter_block_partitioning_policy(PartitioningPolicy::all(true))
            .data_block_compression_policy(self.compression.policy())
    }
}

impl Default for FjallOptions {
    fn default() -> Self {
        FjallOptions::from_budget(MemoryBudget::DEFAULT)
    }
}
