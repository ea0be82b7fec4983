//! [`Layout`]: which fjall keyspace of a [`crate::Fjall`] store holds a key.
//!
//! A store of format 1 to 3 keeps every key in one keyspace. A store of **format 4**
//! spreads them over several keyspaces by the key's first byte, which is the engine's key
//! tag (`docs/architecture/keys.md`): each keyspace is an LSM tree of its own, with its own
//! memtable, tables and compactions, while batches stay atomic and snapshots consistent
//! across them (fjall gives a database one journal and one sequence of batches).
//!
//! Why: in one keyspace every flushed memtable holds keys of every kind, so its key range
//! spans the whole store and each merge of level 0 into level 1 rewrites all of level 1
//! (`fjall_options.rs`, "Compaction"; 16–17 bytes written per byte kept while loading 10M
//! documents, docs/performance.md, session 32). Apart, the kinds written in key order (the
//! `_changes` entries and the change journal always; the `Doc` records when ids grow, as
//! CouchDB's default sequential uuids and MongoDB's ObjectIds do) flush tables that do not
//! overlap the level below, which fjall moves down without rewriting them, and a kind with
//! few writes (the database metadata, counters) no longer rides along in every merge.
//!
//! The table is part of the format: changing which keyspace a tag maps to would lose keys
//! in existing directories, so a new tag gets a keyspace in a new format, or goes to
//! `meta` (where every tag not listed goes).
//!
//! Scans: a range is cut where it crosses from one keyspace's tags to another's
//! ([`Layout::runs`]); the runs, read one after another in tag order (reversed for a reverse
//! scan), give the keys in byte order, since every key of a run sorts before every key of
//! the next. Nearly every scan the engine makes stays within one tag, so one run.

use std::ops::Bound;

use crate::Range;

/// The keyspaces of a format 4 store, in the order of [`Layout::of_tag`]'s indexes.
const KEYSPACES: [&str; 7] = ["meta", "docs", "bodies", "seqs", "index", "views", "spill"];

/// The keyspace of each engine key tag that does not go to `meta` (index 0).
const TAGS: [(u8, usize); 15] = [
    (0x03, 1), // Doc: revision trees with the winners' bodies
    (0x04, 2), // Rev: bodies of other revisions
    (0x11, 2), // AttChunk: attachment bodies
    (0x16, 2), // AttAlias
    (0x17, 2), // AttGzip
    (0x05, 3), // Seq: `_changes` entries
    (0x12, 3), // Event: the change journal
    (0x13, 3), // Purge: `_purge` requests by purge seq
    (0x18, 3), // Natural: a capped database's insertion order
    (0x0A, 4), // Mango and MongoDB index entries
    (0x0D, 5), // view checkpoints
    (0x0E, 5), // view rows
    (0x0F, 5), // view back-index
    (0x15, 5), // geo index
    (0x20, 6), // spilled query data
];

/// How a store's keys are spread over its keyspaces.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    names: &'static [&'static str],
    of_tag: [u8; 256],
}

impl Layout {
    /// Formats 1 to 3: one keyspace, `bunko`.
    pub(crate) fn single() -> Layout {
        Layout { names: &["bunko"], of_tag: [0; 256] }
    }

    /// Format 4: keyspaces by key kind (see the module docs).
    pub(crate) fn by_kind() -> Layout {
        let mut of_tag = [0; 256];
        for (tag, keyspace) in TAGS {
            of_tag[usize::from(tag)] = keyspace as u8;
        }
        Layout { names: &KEYSPACES, of_tag }
    }

    /// The layout of a directory of storage format `format`.
    pub(crate) fn of_format(format: u32) -> Layout {
        match format {
            ..=3 => Layout::single(),
            _ => Layout::by_kind(),
        }
    }

    /// The keyspaces' names, in index order.
    pub(crate) fn names(&self) -> &'static [&'static str] {
        self.names
    }

    /// The keyspace holding `key` (an empty key goes where tag 0 goes).
    pub(crate) fn of_key(&self, key: &[u8]) -> usize {
        self.of_tag(key.first().copied().unwrap_or(0))
    }

    fn of_tag(&self, tag: u8) -> usize {
        usize::from(self.of_tag[usize::from(tag)])
    }

    /// `range` cut into the pieces each keyspace holds, in key order: `(keyspace, piece)`.
    /// A piece's keys all sort before the next piece's, so reading the pieces in turn
    /// reads the range in order. Empty if no key can be in the range.
    pub(crate) fn runs(&self, range: &Range) -> Vec<(usize, Range)> {
        let first = match &range.0 {
            Bound::Included(k) | Bound::Excluded(k) => k.first().copied().unwrap_or(0),
            Bound::Unbounded => 0,
        };
        let last = match &range.1 {
            Bound::Unbounded => 0xff,
            // Up to the empty key alone: no stored key (keys are 1 byte or more).
            Bound::Included(k) => match k.first() {
                Some(&tag) => tag,
                None => return Vec::new(),
            },
            // Below `[t]` alone, keys start with a tag below `t`.
            Bound::Excluded(k) => match k.as_slice() {
                [] | [0] => return Vec::new(),
                [tag] => tag - 1,
                [tag, ..] => *tag,
            },
        };
        let mut runs: Vec<(usize, Range)> = Vec::new();
        for tag in first..=last {
            let keyspace = self.of_tag(tag);
            match runs.last_mut() {
                Some((previous, piece)) if *previous == keyspace => {
                    piece.1 = end_of(range, tag, last);
                }
                _ => {
                    let start = match tag == first {
                        true => range.0.clone(),
                        false => Bound::Included(vec![tag]),
                    };
                    runs.push((keyspace, (start, end_of(range, tag, last))));
                }
            }
        }
        runs
    }
}

/// The end of a run whose last tag is `tag`: the range's own end at its last tag, else
/// just past `tag`.
fn end_of(range: &Range, tag: u8, last: u8) -> Bound<Vec<u8>> {
    match tag == last {
        true => range.1.clone(),
        false => Bound::Excluded(vec![tag + 1]),
    }
}

/// The name of the keyspace that holds keys starting with `tag` in a store of the newest
/// format: for the engine's test that its key kinds are spread as intended.
pub fn keyspace_of_tag(tag: u8) -> &'static str {
    let layout = Layout::by_kind();
    layout.names[layout.of_tag(tag)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(bytes: &[u8]) -> Vec<u8> {
        bytes.to_vec()
    }

    #[test]
    fn a_range_within_one_tag_is_one_run() {
        let layout = Layout::by_kind();
        let range = crate::prefix_range(&[0x03, 7]);
        assert_eq!(layout.runs(&range), vec![(1, range)]);
        // A prefix range of a tag alone ends before the next tag's keyspace.
        let range = crate::prefix_range(&[0x0A]);
        assert_eq!(layout.runs(&range), vec![(4, range)]);
    }

    #[test]
    fn a_range_across_tags_is_cut_at_keyspace_changes() {
        let layout = Layout::by_kind();
        let range = (Bound::Excluded(key(&[0x02, 9])), Bound::Included(key(&[0x06, 1])));
        let runs = layout.runs(&range);
        let expected = vec![
            (0, (Bound::Excluded(key(&[0x02, 9])), Bound::Excluded(key(&[0x03])))),
            (1, (Bound::Included(key(&[0x03])), Bound::Excluded(key(&[0x04])))),
            (2, (Bound::Included(key(&[0x04])), Bound::Excluded(key(&[0x05])))),
            (3, (Bound::Included(key(&[0x05])), Bound::Excluded(key(&[0x06])))),
            (0, (Bound::Included(key(&[0x06])), Bound::Included(key(&[0x06, 1])))),
        ];
        assert_eq!(runs, expected);
        let all = layout.runs(&(Bound::Unbounded, Bound::Unbounded));
        assert_eq!(all.first().map(|run| &run.1.0), Some(&Bound::Unbounded));
        assert_eq!(all.last().map(|run| &run.1.1), Some(&Bound::Unbounded));
        assert!(all.windows(2).all(|pair| pair[0].0 != pair[1].0), "neighbours merged");
    }

    #[test]
    fn one_keyspace_reads_every_range_whole() {
        let range = (Bound::Included(key(&[0x01])), Bound::Excluded(key(&[0x30, 2])));
        assert_eq!(Layout::single().runs(&range), vec![(0, range)]);
        assert_eq!(Layout::single().runs(&(Bound::Unbounded, Bound::Excluded(key(&[0])))), []);
    }

    #[test]
    fn the_engine_tags_go_where_the_table_says() {
        assert_eq!(keyspace_of_tag(0x03), "docs");
        assert_eq!(keyspace_of_tag(0x05), "seqs");
        assert_eq!(keyspace_of_tag(0x0E), "views");
        assert_eq!(keyspace_of_tag(0x07), "meta");
        assert_eq!(keyspace_of_tag(0xff), "meta");
        assert_eq!(Layout::by_kind().of_key(&[]), 0);
    }
}
