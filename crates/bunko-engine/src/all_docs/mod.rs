//! `_all_docs`: documents in id order, as one range scan of `Doc` keys on a snapshot.
//!
//! A partition's `_all_docs` is the same scan bounded to the ids `p:…`, one contiguous range
//! ([`crate::keys::doc_prefix`]), so its cost does not depend on the rest of the database.
//! Its `total_rows` is the partition's `doc_count` (one read of its counters).
//!
//! `offset` is the number of live documents before the first row (plus `skip`), which
//! CouchDB reads from its B-tree's reductions; a key-value store has none, so the order
//! statistics of document ids (`crate::ids`) give it in O(log n), in a partition as in the
//! whole database, counting the live documents of one bucket on the way into the range
//! with the scan that reads the rows; they also pass a large `skip` by finding the first
//! row's position instead of reading every skipped row (`place.rs`).
//!
//! Rows are read in pages that start at `skip + limit` entries (plus the lead-in) and
//! grow, so a short page of a long range reads little more than it returns.

mod place;

/// The most `Doc` entries a page of rows reads at once.
const PAGE: usize = 256;

use bunko_doc::RevId;
use bunko_storage::{Entry, Iter, Read, Snapshot};

use crate::Result;
use crate::database::Database;
use crate::ids::is_live;
use crate::keys;
use crate::read::{DocOut, doc_info_in, doc_out, doc_record_in};
use crate::read_gate::Sight;
use crate::records::{DocInfo, DocRecord, Stats};
use crate::security::UserCtx;

/// The parameters of an `_all_docs` range query.
#[derive(Debug, Clone)]
pub struct AllDocsQuery {
    pub start: Option<String>,
    pub end: Option<String>,
    pub inclusive_end: bool,
    pub descending: bool,
    pub skip: u64,
    pub limit: Option<u64>,
    pub include_docs: bool,
    /// Only ids starting with this (a partition's `p:`, or `_design/`).
    pub prefix: Option<String>,
}

impl Default for AllDocsQuery {
    fn default() -> Self {
        Self {
            start: None,
            end: None,
            inclusive_end: true,
            descending: false,
            skip: 0,
            limit: None,
            include_docs: false,
            prefix: None,
        }
    }
}

/// One row of `_all_docs`.
#[derive(Debug)]
pub struct Row {
    pub id: String,
    pub rev: RevId,
    pub deleted: bool,
    pub info: DocInfo,
    /// The document, with `include_docs` (absent for deleted rows of a `keys` query).
    pub doc: Option<DocOut>,
}

/// A started `_all_docs` query: header values and the streaming rows.
pub struct AllDocs {
    pub total_rows: u64,
    pub offset: u64,
    pub update_seq: u64,
    pub rows: Rows,
}

/// The rows of an `_all_docs` query, read lazily from a snapshot.
pub struct Rows {
    snapshot: Snapshot,
    db: u64,
    iter: Iter,
    skip: u64,
    remaining: u64,
    /// With `include_docs`: what the reader sees of the documents.
    docs: Option<Sight>,
    /// The entry the lead-in read past, which comes first.
    pending: Option<Entry>,
}

impl Database {
    /// Starts an `_all_docs` range query; `total_rows` counts the live documents of the
    /// database (or of the partition named by `partition`). Documents (`include_docs`) are
    /// shown as `reader` may see them (`crate::read_gate`).
    pub fn all_docs(
        &self,
        reader: &UserCtx,
        query: &AllDocsQuery,
        partition: Option<&str>,
    ) -> Result<AllDocs> {
        let docs = if query.include_docs { Some(self.sight(reader)?) } else { None };
        let db = self.id();
        let base = match &query.prefix {
            Some(prefix) => keys::doc_prefix(db, prefix),
            None => keys::doc_range(db),
        };
        let total_rows = match (partition, &query.prefix) {
            (Some(p), _) => self.partition_stats(p)?.doc_count,
            // `_design_docs`: design documents are few, so counting them is cheap.
            (None, Some(_)) => place::count_live(self.snapshot().as_ref(), &base)?,
            (None, None) => self.info().stats.doc_count,
        };
        let range = place::narrow(base.clone(), db, query);
        let place::Start { snapshot, scan, mut before } = self.start(&base, range, query)?;
        let (iter, skip, remaining, lead_in) = match scan {
            Some(scan) => {
                let limit = query.limit.unwrap_or(u64::MAX);
                let ahead = scan.skip.saturating_add(scan.extra as u64);
                let wanted = usize::try_from(limit.saturating_add(ahead)).unwrap_or(usize::MAX);
                let (read, range, descending) = (snapshot.clone(), scan.range, query.descending);
                // A scan that starts at a bucket's edge stops at a place known only once
                // read: its first page is streamed, not fetched whole (up to a bucket's
                // worth of entries more than a short page uses, which cost more than the
                // seek they save).
                let iter = match scan.extra {
                    0 => Iter::new(read, range, descending, PAGE).first_page(wanted),
                    _ => Iter::streaming(read, range, descending, wanted.clamp(1, PAGE)),
                };
                // Without documents a row needs the revision tree alone: the records'
                // heads, with no carried body decompressed.
                let iter = if docs.is_none() { iter.heads() } else { iter };
                (iter, scan.skip, limit, scan.lead_in)
            }
            // `skip` passes the end: no row is read.
            None => (Iter::new(snapshot.clone(), keys::doc_range(db), false, 1), 0, 0, None),
        };
        let mut rows = Rows { snapshot, db, iter, skip, remaining, docs, pending: None };
        if let Some(cut) = lead_in {
            before += rows.lead_in(&cut, query.descending)?;
        }
        let offset = (before + query.skip).min(total_rows);
        Ok(AllDocs { total_rows, offset, update_seq: self.update_seq(), rows })
    }

    /// `_all_docs` with `keys`: one row per key, in the order given; `None` for an id that
    /// was never written. Deleted documents appear with `deleted` and no `doc`. With
    /// `include_docs` it is a lookup by id for the advisor, tied to `client`'s last query,
    /// and shows the documents as `reader` may see them.
    pub fn all_docs_keys(
        &self,
        reader: &UserCtx,
        ids: &[String],
        include_docs: bool,
        client: Option<&crate::advisor::Client>,
    ) -> Result<Vec<Option<Row>>> {
        if include_docs {
            self.observe_lookup("_all_docs", ids, client);
        }
        let docs = if include_docs { Some(self.sight(reader)?) } else { None };
        let snapshot = self.snapshot();
        let db = self.id();
        ids.iter()
            .map(|id| {
                let record = match docs {
                    Some(_) => doc_record_in(snapshot.as_ref(), db, id)?,
                    None => doc_info_in(snapshot.as_ref(), db, id)?
                        .map(|info| DocRecord { info, body: None }),
                };
                let Some(record) = record else { return Ok(None) };
                row(snapshot.as_ref(), db, id.clone(), record, docs.as_ref()).map(Some)
            })
            .collect()
    }
}

impl Database {
    /// Every partition with its counters, in partition order, at most `limit` of them;
    /// `true` when more exist.
    pub fn partitions(&self, limit: usize) -> Result<(Vec<(String, Stats)>, bool)> {
        let snapshot = self.snapshot();
        let mut out = Vec::new();
        for entry in Iter::new(snapshot, keys::part_stats_range(self.id()), false, 1024) {
            if out.len() == limit {
                return Ok((out, true));
            }
            let (key, value) = entry?;
            out.push((keys::decode_part_stats(&key)?, Stats::decode(&value)?));
        }
        Ok((out, false))
    }
}

impl Rows {
    /// Reads the entries before `cut` in scan order (below it, or when `descending` at or
    /// above it), which are no rows, and returns their live documents; the first entry
    /// past them is kept for [`Rows::next`].
    fn lead_in(&mut self, cut: &[u8], descending: bool) -> Result<u64> {
        let mut live = 0;
        for entry in self.iter.by_ref() {
            let (key, value) = entry?;
            if (key.as_slice() >= cut) != descending {
                self.pending = Some((key, value));
                break;
            }
            live += u64::from(is_live(&value)?);
        }
        Ok(live)
    }
}

impl Iterator for Rows {
    type Item = Result<Row>;

    fn next(&mut self) -> Option<Result<Row>> {
        while self.remaining > 0 {
            let entry = match self.pending.take() {
                Some(entry) => Ok(entry),
                None => self.iter.next()?,
            };
            let (key, value) = match entry {
                Ok(entry) => entry,
                Err(err) => return Some(Err(err.into())),
            };
            let decoded =
                keys::decode_doc(&key).and_then(|id| Ok((id, DocRecord::decode(&value)?)));
            let (id, record) = match decoded {
                Ok(pair) => pair,
                Err(err) => return Some(Err(err)),
            };
            if matches!(record.info.winner(), Ok((_, true))) {
                continue;
            }
            if self.skip > 0 {
                self.skip -= 1;
                continue;
            }
            self.remaining -= 1;
            return Some(row(self.snapshot.as_ref(), self.db, id, record, self.docs.as_ref()));
        }
        None
    }
}

/// One row; with `docs` (`include_docs`) its document as the reader sees it.
/// `record` is the document's `Doc` record as read, whole when `docs` is given (the body
/// it carries is the document's), else its head (the revision tree) alone is enough.
fn row(
    read: &dyn Read,
    db: u64,
    id: String,
    record: DocRecord,
    docs: Option<&Sight>,
) -> Result<Row> {
    let (rev, deleted) = record.info.winner().map(|(r, d)| (r.clone(), d))?;
    let (info, doc) = match docs {
        Some(sight) if !deleted => {
            let out = doc_out(read, db, &id, record, Some(&rev))?;
            (out.info.clone(), sight.apply_listed(out)?)
        }
        _ => (record.info, None),
    };
    Ok(Row { id, rev, deleted, info, doc })
}
