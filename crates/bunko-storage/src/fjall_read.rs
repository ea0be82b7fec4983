//! Reads of a [`crate::Fjall`] store: its keyspaces ([`Keyspaces`], laid out by
//! `layout.rs`), point reads, scans and streams through a fjall snapshot, and the
//! snapshot handed to callers ([`FjallSnapshot`]).
//!
//! Every read goes through a fjall snapshot (a sequence number registered with fjall's
//! snapshot tracker, cheap, and one for all keyspaces). Reading a keyspace directly would
//! see the newest version of every key, including a batch that is half inserted into the
//! memtables; a snapshot sees only published batches, so readers see each batch whole or
//! not at all.

use std::ops::Bound;

use fjall::{Keyspace, Readable};

use crate::fjall_store::in_context;
use crate::layout::Layout;
use crate::value::{Part, ValueCodec};
use crate::{Entry, MAX_KEY_LEN, Range, Read, Result, Stream, clamp_range};

/// A store's keyspaces and which of them holds which key.
pub(crate) struct Keyspaces {
    pub(crate) all: Vec<Keyspace>,
    layout: Layout,
}

impl Keyspaces {
    /// The keyspaces of `layout`, in its order, as `open` opens (or creates) each by name.
    pub(crate) fn open(
        layout: Layout,
        mut open: impl FnMut(&str) -> fjall::Result<Keyspace>,
    ) -> fjall::Result<Keyspaces> {
        let all = layout.names().iter().map(|name| open(name)).collect::<fjall::Result<_>>()?;
        Ok(Keyspaces { all, layout })
    }

    /// The keyspace holding `key`.
    pub(crate) fn of_key(&self, key: &[u8]) -> &Keyspace {
        &self.all[self.layout.of_key(key)]
    }

    /// `range` cut into the keyspaces holding it, in key order (see [`Layout::runs`]).
    fn runs(&self, range: &Range) -> Vec<(&Keyspace, Range)> {
        match self.all.as_slice() {
            [one] => vec![(one, range.clone())],
            all => self.layout.runs(range).into_iter().map(|(i, run)| (&all[i], run)).collect(),
        }
    }
}

/// A point-in-time view of a [`crate::Fjall`] store. It keeps the database files open (and
/// the directory locked) until dropped.
pub(crate) struct FjallSnapshot {
    pub(crate) snapshot: fjall::Snapshot,
    pub(crate) keyspaces: std::sync::Arc<Keyspaces>,
    pub(crate) codec: ValueCodec,
}

impl Read for FjallSnapshot {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        get_at(&self.snapshot, &self.keyspaces, self.codec, key, Part::Whole)
    }

    fn scan(&self, range: &Range, reverse: bool, limit: usize) -> Result<Vec<Entry>> {
        scan_at(&self.snapshot, &self.keyspaces, self.codec, range, reverse, limit, Part::Whole)
    }

    fn stream(&self, range: &Range, reverse: bool) -> Option<Stream> {
        Some(stream_at(&self.snapshot, &self.keyspaces, self.codec, range, reverse, Part::Whole))
    }

    fn get_head(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        get_at(&self.snapshot, &self.keyspaces, self.codec, key, Part::Head)
    }

    fn scan_heads(&self, range: &Range, reverse: bool, limit: usize) -> Result<Vec<Entry>> {
        scan_at(&self.snapshot, &self.keyspaces, self.codec, range, reverse, limit, Part::Head)
    }

    fn stream_heads(&self, range: &Range, reverse: bool) -> Option<Stream> {
        Some(stream_at(&self.snapshot, &self.keyspaces, self.codec, range, reverse, Part::Head))
    }
}

pub(crate) fn get_at(
    snapshot: &fjall::Snapshot,
    keyspaces: &Keyspaces,
    codec: ValueCodec,
    key: &[u8],
    part: Part,
) -> Result<Option<Vec<u8>>> {
    if key.len() > MAX_KEY_LEN {
        // Cannot be stored, and fjall panics on such a lookup key.
        return Ok(None);
    }
    let value =
        snapshot.get(keyspaces.of_key(key), key).map_err(|err| in_context("reading a key", err))?;
    value.map(|value| codec.decode(&value, part)).transpose()
}

pub(crate) fn scan_at(
    snapshot: &fjall::Snapshot,
    keyspaces: &Keyspaces,
    codec: ValueCodec,
    range: &Range,
    reverse: bool,
    limit: usize,
    part: Part,
) -> Result<Vec<Entry>> {
    let mut runs = keyspaces.runs(range);
    if reverse {
        runs.reverse();
    }
    let mut entries = Vec::with_capacity(limit.min(256));
    for (keyspace, run) in runs {
        let left = limit - entries.len();
        let Some(bounds) = clamp_range(&run).filter(|_| left > 0) else {
            continue;
        };
        let iter = snapshot.range::<&[u8], _>(keyspace, bounds);
        if reverse {
            collect(iter.rev(), codec, left, part, &mut entries)?;
        } else {
            collect(iter, codec, left, part, &mut entries)?;
        }
    }
    Ok(entries)
}

/// The entries of `range`, read lazily, one keyspace's run after another.
pub(crate) fn stream_at(
    snapshot: &fjall::Snapshot,
    keyspaces: &Keyspaces,
    codec: ValueCodec,
    range: &Range,
    reverse: bool,
    part: Part,
) -> Stream {
    let mut runs = keyspaces.runs(range);
    if reverse {
        runs.reverse();
    }
    match runs.len() {
        1 => stream_run(snapshot, runs[0].0, codec, &runs[0].1, reverse, part),
        _ => Box::new(
            runs.into_iter()
                .map(|(keyspace, run)| stream_run(snapshot, keyspace, codec, &run, reverse, part))
                .collect::<Vec<_>>()
                .into_iter()
                .flatten(),
        ),
    }
}

/// The entries of `range` in one keyspace, read lazily. fjall is given the bound where the
/// scan begins only, and the iterator stops at the first key past the other one: with both
/// bounds, fjall seeks the far one in the index and in every data block it loads (a tenth
/// of a short view lookup's CPU in its profile), while a reader that stops early never
/// gets there.
fn stream_run(
    snapshot: &fjall::Snapshot,
    keyspace: &Keyspace,
    codec: ValueCodec,
    range: &Range,
    reverse: bool,
    part: Part,
) -> Stream {
    let Some((start, end)) = clamp_range(range) else {
        return Box::new(std::iter::empty());
    };
    let entry = move |guard: fjall::Guard| -> Result<Entry> {
        let (key, value) = guard.into_inner().map_err(|err| in_context("scanning", err))?;
        Ok((key.to_vec(), codec.decode(&value, part)?))
    };
    let within = |bound: Bound<&[u8]>, below: bool| {
        let bound = bound.map(<[u8]>::to_vec);
        move |entry: &Result<Entry>| {
            let Ok((key, _)) = entry else { return true };
            match (&bound, below) {
                (Bound::Unbounded, _) => true,
                (Bound::Included(b), true) => key <= b,
                (Bound::Excluded(b), true) => key < b,
                (Bound::Included(b), false) => key >= b,
                (Bound::Excluded(b), false) => key > b,
            }
        }
    };
    if reverse {
        let iter = snapshot.range::<&[u8], _>(keyspace, (Bound::Unbounded, end));
        Box::new(iter.rev().map(entry).take_while(within(start, false)))
    } else {
        let iter = snapshot.range::<&[u8], _>(keyspace, (start, Bound::Unbounded));
        Box::new(iter.map(entry).take_while(within(end, true)))
    }
}

fn collect(
    iter: impl Iterator<Item = fjall::Guard>,
    codec: ValueCodec,
    limit: usize,
    part: Part,
    entries: &mut Vec<Entry>,
) -> Result<()> {
    for guard in iter.take(limit) {
        let (key, value) = guard.into_inner().map_err(|err| in_context("scanning", err))?;
        entries.push((key.to_vec(), codec.decode(&value, part)?));
    }
    Ok(())
}
