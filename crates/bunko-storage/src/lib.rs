//! Ordered, transactional key-value storage: the bottom layer of Bunko.
//!
//! This crate knows nothing of documents. It offers one trait, [`Store`], with two
//! implementations: [`Fjall`] (the embedded default, an LSM tree on disk) and [`Memory`]
//! (a `BTreeMap`, for tests). One conformance suite (`tests/conformance.rs`) runs on both,
//! and a model test (`tests/model.rs`) checks random operations on both against a `BTreeMap`.
//!
//! Keys are byte strings compared as bytes; callers build them with an order-preserving
//! codec so that byte order is the order they need. A key is 1 to [`MAX_KEY_LEN`] bytes and
//! a value at most [`MAX_VALUE_LEN`] bytes; [`Store::commit`] rejects anything else with
//! [`Error::Invalid`] before writing. Reads accept any key or bound.
//!
//! # Durability and group commit
//!
//! [`Store::commit`] applies a [`Batch`] atomically and returns only once the batch is
//! durable. Concurrent committers share one sync ("group commit", `group.rs`): one leader
//! thread per store syncs everything applied so far whenever a waiter asks, and wakes
//! every waiter whose batch that sync covered. After a failed sync the store is
//! poisoned and every later commit fails with [`Error::Poisoned`]: nothing acknowledged
//! can be lost. [`Store::close`] syncs what was applied and refuses later commits.
//!
//! `commit` is [`Store::apply`] (atomic, visible, returns a [`Ticket`]) followed by
//! [`Store::sync`] (wait until that ticket is durable); a caller may split the two to hold
//! its own lock only around the apply. [`Store::durable`] is the wait as a future, for
//! async callers: it parks no thread, so thousands of writers can wait on one sync.
//!
//! A committed batch is visible to readers as soon as it is applied, slightly before its
//! sync completes; it is acknowledged to its writer only after. So a reader can see a
//! write that is later lost in a crash, but only if its writer was never told it succeeded
//! (the writer gets an error, or no answer at all).
//!
//! # Concurrency
//!
//! Stores and snapshots are `Send + Sync`; share a store as `Arc<dyn Store>` and call it
//! from any number of threads. Every call but [`Store::durable`] blocks (a sync takes 0.1
//! to a few ms), so async callers run them on a blocking pool. Reads never wait for syncs. A reader sees a batch
//! entirely or not at all, both on the store and on a snapshot. Applies are serialized
//! (one at a time per store); syncs are shared.
//!
//! [`Store::snapshot`] is cheap: a registered sequence number in fjall, an `Arc` clone in
//! [`Memory`]. But a live snapshot pins old versions (fjall cannot drop them in
//! compaction; `Memory` copies its whole map on the next commit), so drop it when done.

mod budget;
mod error;
mod fjall_options;
mod fjall_read;
mod fjall_store;
mod format;
mod group;
mod journal;
mod layout;
mod memory;
mod value;

pub use budget::{MemoryBudget, Shares};
pub use error::{Error, Result};
pub use fjall_options::{Compression, FjallOptions};
pub use fjall_store::Fjall;
pub use format::FORMAT_VERSION;
pub use group::Durable;
pub use layout::keyspace_of_tag;
pub use memory::Memory;

use std::ops::Bound;
use std::sync::Arc;

/// One key-value pair as read from a store.
pub type Entry = (Vec<u8>, Vec<u8>);

/// A batch's position in the order batches were applied; see [`Store::apply`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Ticket(pub u64);

/// A set of writes applied atomically by [`Store::commit`].
#[derive(Debug, Default, Clone)]
pub struct Batch {
    ops: Vec<Op>,
    /// [`Batch::bytes`], kept as ops are added.
    bytes: u64,
}

/// One write in a [`Batch`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// A key, its value, and the length of the value's head (0: none; see
    /// [`Batch::put_with_head`]).
    Put(Vec<u8>, Vec<u8>, usize),
    Delete(Vec<u8>),
}

impl Batch {
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `key` to `value`.
    pub fn put(&mut self, key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) {
        self.put_with_head(key, value, 0);
    }

    /// Sets `key` to `value`, whose first `head` bytes are its *head*: a store may keep
    /// them so that [`Read::get_head`] reads them without the rest (a [`Fjall`] store
    /// compresses only the rest). The head must be something its readers can tell the end
    /// of, since a store may also give them the whole value.
    pub fn put_with_head(
        &mut self,
        key: impl Into<Vec<u8>>,
        value: impl Into<Vec<u8>>,
        head: usize,
    ) {
        let (key, value) = (key.into(), value.into());
        self.bytes += (key.len() + value.len()) as u64;
        let head = head.min(value.len());
        self.ops.push(Op::Put(key, value, head));
    }

    /// Removes `key` (a no-op if absent).
    pub fn delete(&mut self, key: impl Into<Vec<u8>>) {
        let key = key.into();
        self.bytes += key.len() as u64;
        self.ops.push(Op::Delete(key));
    }

    /// Adds the writes of `other` after this batch's own.
    pub fn append(&mut self, other: Batch) {
        self.bytes += other.bytes;
        self.ops.extend(other.ops);
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Bytes of its keys and values: what it appends to a log-structured store (a removal
    /// is its key, the tombstone).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The writes in the order they were added; a later write to a key wins.
    pub fn ops(&self) -> &[Op] {
        &self.ops
    }

    pub fn into_ops(self) -> Vec<Op> {
        self.ops
    }

    /// Checks every key and value against the store's limits: keys are 1 to
    /// [`MAX_KEY_LEN`] bytes, values at most [`MAX_VALUE_LEN`]. [`Store::commit`] does
    /// this itself; callers may check earlier to report a precise error.
    pub fn validate(&self) -> Result<()> {
        for op in &self.ops {
            let (key, value) = match op {
                Op::Put(key, value, _) => (key, Some(value)),
                Op::Delete(key) => (key, None),
            };
            if key.is_empty() {
                return Err(Error::Invalid("empty key".into()));
            }
            if key.len() > MAX_KEY_LEN {
                return Err(Error::Invalid(format!(
                    "key of {} bytes exceeds the limit of {MAX_KEY_LEN}",
                    key.len()
                )));
            }
            if let Some(value) = value.filter(|value| value.len() > MAX_VALUE_LEN) {
                return Err(Error::Invalid(format!(
                    "value of {} bytes exceeds the limit of {MAX_VALUE_LEN}",
                    value.len()
                )));
            }
        }
        Ok(())
    }
}

/// The longest key a store accepts, in bytes (fjall's limit).
pub const MAX_KEY_LEN: usize = 65_535;

/// The longest value a store accepts, in bytes (fjall's limit).
pub const MAX_VALUE_LEN: usize = u32::MAX as usize;

/// A key range: a start and an end bound.
pub type Range = (Bound<Vec<u8>>, Bound<Vec<u8>>);

/// The range of every key starting with `prefix`.
pub fn prefix_range(prefix: &[u8]) -> Range {
    let start = Bound::Included(prefix.to_vec());
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return (start, Bound::Excluded(end));
        }
    }
    (start, Bound::Unbounded)
}

/// A range's bounds, borrowed.
pub(crate) type Bounds<'a> = (Bound<&'a [u8]>, Bound<&'a [u8]>);

/// A range's bounds as slices, with bounds longer than [`MAX_KEY_LEN`] replaced by
/// equivalent short ones (fjall panics on them), or `None` if no key can be in the range
/// (`BTreeMap::range` panics on an inverted range).
///
/// For a bound `k` longer than any storable key and its prefix `p` of [`MAX_KEY_LEN`]
/// bytes, a storable key `s` is `> k` iff `s > p`, and `< k` iff `s <= p`.
pub(crate) fn clamp_range(range: &Range) -> Option<Bounds<'_>> {
    let start = match &range.0 {
        Bound::Included(k) | Bound::Excluded(k) if k.len() > MAX_KEY_LEN => {
            Bound::Excluded(&k[..MAX_KEY_LEN])
        }
        bound => bound.as_ref().map(Vec::as_slice),
    };
    let end = match &range.1 {
        Bound::Included(k) | Bound::Excluded(k) if k.len() > MAX_KEY_LEN => {
            Bound::Included(&k[..MAX_KEY_LEN])
        }
        bound => bound.as_ref().map(Vec::as_slice),
    };
    let empty = match (start, end) {
        (Bound::Unbounded, _) | (_, Bound::Unbounded) => false,
        (Bound::Included(a), Bound::Included(b)) => a > b,
        (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => {
            a >= b
        }
    };
    (!empty).then_some((start, end))
}

/// Reads: implemented by a store (latest applied state) and by its snapshots.
pub trait Read: Send + Sync {
    /// The value of `key`, if present. On a store this sees every batch applied so far,
    /// including batches still waiting for their sync; on a snapshot, the batches applied
    /// when it was taken.
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;

    /// Up to `limit` entries of `range`, in ascending key order, or descending if `reverse`.
    /// Callers page through long ranges by narrowing the range past the last key seen
    /// ([`Iter`] does this).
    fn scan(&self, range: &Range, reverse: bool, limit: usize) -> Result<Vec<Entry>>;

    /// The entries of `range` as one lazy iterator that owns what it reads from, in
    /// ascending key order (descending if `reverse`), or `None` if this reader only pages
    /// ([`Read::scan`]). A reader that stops after an unknown number of entries (a `limit`
    /// after rows it must count) then reads no entry it does not use. The iterator may hold
    /// the store's in-memory tables while it lives: [`Iter::streaming`] keeps it for one
    /// page only.
    fn stream(&self, _range: &Range, _reverse: bool) -> Option<Stream> {
        None
    }

    /// [`Read::get`] for a reader of the value's head alone ([`Batch::put_with_head`]):
    /// the head, or the whole value (whose head is its prefix) where the store keeps
    /// none apart, as by default.
    fn get_head(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get(key)
    }

    /// [`Read::scan`] giving heads as [`Read::get_head`] does.
    fn scan_heads(&self, range: &Range, reverse: bool, limit: usize) -> Result<Vec<Entry>> {
        self.scan(range, reverse, limit)
    }

    /// [`Read::stream`] giving heads as [`Read::get_head`] does.
    fn stream_heads(&self, range: &Range, reverse: bool) -> Option<Stream> {
        self.stream(range, reverse)
    }
}

/// A lazy iterator over entries ([`Read::stream`]).
pub type Stream = Box<dyn Iterator<Item = Result<Entry>> + Send>;

/// A consistent point-in-time view of a store, unaffected by later commits.
pub type Snapshot = Arc<dyn Read>;

/// An ordered, transactional key-value store.
pub trait Store: Read {
    /// A point-in-time view of the store as of now.
    fn snapshot(&self) -> Snapshot;

    /// Applies `batch` atomically: readers see it at once, but it is not yet durable.
    /// The returned ticket orders it among all applied batches; pass it to [`Store::sync`]
    /// before acknowledging the write. Fails with [`Error::Poisoned`] after a failed sync.
    ///
    /// Splitting apply from sync lets a caller hold a lock only while it applies (e.g. the
    /// engine's per-database writer lock) and wait for durability after releasing it, so
    /// that concurrent writers share one sync.
    fn apply(&self, batch: Batch) -> Result<Ticket>;

    /// Returns once every batch applied up to `ticket` is durable (group commit: one sync
    /// covers all waiters). Fails with [`Error::Poisoned`] if that sync, or an earlier one,
    /// failed.
    fn sync(&self, ticket: Ticket) -> Result<()>;

    /// [`Store::sync`] as a future: resolves once every batch applied up to `ticket` is
    /// durable, without holding a thread meanwhile (the group's leader thread syncs), so an
    /// async caller can wait on its runtime. The same outcomes as `sync`.
    fn durable(&self, ticket: Ticket) -> Durable;

    /// Applies `batch` atomically and returns once it is durable (see the crate docs).
    fn commit(&self, batch: Batch) -> Result<()> {
        let ticket = self.apply(batch)?;
        self.sync(ticket)
    }

    /// `Ok` while the store accepts commits; [`Error::Poisoned`] after a failed sync or
    /// apply, [`Error::Closed`] after [`Store::close`] (for health checks).
    fn health(&self) -> Result<()>;

    /// Bytes the store occupies on disk (an estimate; 0 for memory).
    fn disk_size(&self) -> u64;

    /// Frees the disk space of removed and overwritten keys: what is in memory goes to
    /// tables, every table is rewritten without the dead entries, and journals whose
    /// contents are all in tables are deleted. Blocks until done; reads and writes go on
    /// meanwhile. Every key keeps its value. A no-op for a store without such files.
    fn reclaim(&self) -> Result<()> {
        Ok(())
    }

    /// Shuts down writes: syncs every applied batch (so commits already in flight finish
    /// and are acknowledged), then fails every later commit with [`Error::Closed`]. Reads
    /// keep working. Call it before dropping the last handle for a clean shutdown;
    /// dropping without it is safe too, but commits racing the drop may then see errors.
    fn close(&self) -> Result<()> {
        Ok(())
    }

    /// Lets the store hold more writes in memory before it writes them to disk, for as long
    /// as the returned [`Bulk`] lives: for a writer that writes much at once and then stops
    /// (a view's first build). Fewer, larger flushes leave the store fewer tables to merge
    /// later. How much more is the store's to decide within its share of the memory budget
    /// ([`crate::FjallOptions::bulk_memtable_bytes`]); by default nothing changes.
    fn bulk(&self) -> Bulk {
        Bulk::default()
    }

    /// The storage format of this store's directory ([`FORMAT_VERSION`] for a new one;
    /// `format.rs` lists them). The engine writes records of a format only into stores
    /// that have it.
    fn format(&self) -> u32 {
        FORMAT_VERSION
    }
}

/// A lease of larger in-memory buffers ([`Store::bulk`]), given back when dropped.
#[derive(Default)]
pub struct Bulk(Option<Box<dyn FnOnce() + Send>>);

impl Bulk {
    /// A lease that runs `end` when dropped.
    pub(crate) fn new(end: impl FnOnce() + Send + 'static) -> Bulk {
        Bulk(Some(Box::new(end)))
    }
}

impl std::fmt::Debug for Bulk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Bulk").field(&self.0.is_some()).finish()
    }
}

impl Drop for Bulk {
    fn drop(&mut self) {
        if let Some(end) = self.0.take() {
            end();
        }
    }
}

/// A lazy iterator over a range of a snapshot, fetching a page of entries at a time.
/// It owns its snapshot, so it can move to another thread (e.g. to stream a response).
pub struct Iter {
    read: Snapshot,
    range: Option<Range>,
    reverse: bool,
    /// The size of the next page: it doubles after each page, up to `max_page`.
    page: usize,
    max_page: usize,
    buf: Vec<Entry>,
    /// The first page, read lazily ([`Iter::streaming`]), and the entries it may still
    /// give.
    stream: Option<(Stream, usize)>,
    /// Read values' heads only ([`Iter::heads`]).
    heads: bool,
}

impl Iter {
    /// An iterator reading `page` entries at a time.
    pub fn new(read: Snapshot, range: Range, reverse: bool, page: usize) -> Self {
        let page = page.max(1);
        let (range, buf, stream) = (Some(range), Vec::new(), None);
        Self { read, range, reverse, page, max_page: page, buf, stream, heads: false }
    }

    /// [`Iter::new`], with its first `page` entries read one at a time from the reader's
    /// [`Read::stream`] (when it has one) instead of fetched as one page: for a caller that
    /// stops somewhere within the first page at a place it cannot know beforehand. Later
    /// pages are fetched as by [`Iter::new`], so the stream lives for one page only.
    pub fn streaming(read: Snapshot, range: Range, reverse: bool, page: usize) -> Self {
        let page = page.max(1);
        let stream = read.stream(&range, reverse).map(|stream| (stream, page));
        let (range, buf) = (Some(range), Vec::new());
        Self { read, range, reverse, page, max_page: page, buf, stream, heads: false }
    }

    /// Reads only the heads of values ([`Read::get_head`]), for a caller that wants no
    /// more of them.
    pub fn heads(mut self) -> Self {
        self.heads = true;
        if let (Some((_, left)), Some(range)) = (self.stream.take(), &self.range) {
            self.stream = self.read.stream_heads(range, self.reverse).map(|stream| (stream, left));
        }
        self
    }

    /// Makes the first page `first` entries (at most the page size given to [`Iter::new`]);
    /// each later page is twice the previous one, up to that size. For a caller that
    /// expects to stop after about `first` entries (a `limit`), so that a short read of a
    /// long range does not fetch and copy a whole page it will not use.
    pub fn first_page(mut self, first: usize) -> Self {
        self.page = first.clamp(1, self.max_page);
        self
    }

    /// The next entry of the first page's stream, while it is being read (`None`: not
    /// streaming); after the page's last entry the range is narrowed past it, so that
    /// paging goes on from there.
    fn next_streamed(&mut self) -> Option<Option<Result<Entry>>> {
        let (stream, left) = self.stream.as_mut()?;
        *left -= 1;
        let entry = stream.next();
        match (&entry, self.range.as_mut()) {
            (Some(Ok((key, _))), Some(range)) if *left == 0 => {
                let last = Bound::Excluded(key.clone());
                if self.reverse {
                    range.1 = last
                } else {
                    range.0 = last
                }
                self.stream = None;
            }
            (Some(Ok(_)), _) => {}
            // The range is read to its end, or failed: nothing follows.
            _ => (self.range, self.stream) = (None, None),
        }
        Some(entry)
    }
}

impl Iterator for Iter {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(entry) = self.next_streamed() {
            return entry;
        }
        if self.buf.is_empty() {
            let range = self.range.take()?;
            let size = self.page;
            self.page = (size * 2).min(self.max_page);
            let page = if self.heads {
                self.read.scan_heads(&range, self.reverse, size)
            } else {
                self.read.scan(&range, self.reverse, size)
            };
            let mut page = match page {
                Ok(page) => page,
                Err(err) => return Some(Err(err)),
            };
            if page.len() == size
                && let Some((last, _)) = page.last()
            {
                let last = Bound::Excluded(last.clone());
                self.range = Some(if self.reverse { (range.0, last) } else { (last, range.1) });
            }
            page.reverse();
            self.buf = page;
        }
        self.buf.pop().map(Ok)
    }
}
