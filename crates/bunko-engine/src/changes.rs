//! The `_changes` feed: one `Seq` entry per document (its latest change), read in seq order
//! from a snapshot. A write moves the document's entry to its new seq in the same commit,
//! so the feed never shows a document twice and never misses one.
//!
//! Waiting for new changes (longpoll, continuous) is the caller's loop over
//! [`Database::subscribe`] and repeated [`Database::changes`] calls with the last seq.

use std::ops::Bound;

use bunko_doc::RevId;
use bunko_storage::{Iter, Read, Snapshot};

use crate::database::Database;
use crate::keys::{self, Key};
use crate::read::{DocOut, doc_info_in, get_in};
use crate::read_gate::Sight;
use crate::records::DocInfo;
use crate::security::UserCtx;
use crate::{Error, Result};

/// Which changes to report.
#[derive(Debug, Clone, Default)]
pub enum ChangesFilter {
    #[default]
    All,
    /// `filter=_doc_ids`: only these documents.
    DocIds(Vec<String>),
    /// `filter=_design`: only design documents.
    Design,
    /// `filter=_selector`: documents whose winning revision matches a Mango selector.
    Selector(Box<bunko_query::Selector>),
    /// A design-document filter or `_view` ([`Database::function_filter`]).
    Function(DocFilter),
}

/// A predicate on a document's winning revision (design-document code).
#[derive(Clone)]
pub struct DocFilter(pub std::sync::Arc<Keep>);

/// The predicate of a [`DocFilter`].
pub type Keep = dyn Fn(&serde_json::Value) -> Result<bool> + Send + Sync;

impl std::fmt::Debug for DocFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DocFilter")
    }
}

/// The parameters of a `_changes` request.
#[derive(Debug, Clone, Default)]
pub struct ChangesQuery {
    pub since: u64,
    pub limit: Option<u64>,
    pub descending: bool,
    pub include_docs: bool,
    /// `style=all_docs`: list every leaf, not only the winner.
    pub all_leaves: bool,
    pub filter: ChangesFilter,
}

/// One row of the feed.
#[derive(Debug)]
pub struct ChangeRow {
    pub seq: u64,
    pub id: String,
    pub deleted: bool,
    pub changes: Vec<RevId>,
    pub info: DocInfo,
    pub doc: Option<DocOut>,
}

/// A running `_changes` read.
pub struct Changes {
    snapshot: Snapshot,
    db: u64,
    source: Source,
    query: ChangesQuery,
    remaining: u64,
    /// What the reader sees of the documents (`include_docs` and document filters).
    sight: Sight,
    /// The highest seq in the snapshot: `last_seq` when the feed is read to its end.
    end_seq: u64,
    last_seen: Option<u64>,
}

enum Source {
    Scan(Iter),
    Ids(std::vec::IntoIter<(u64, String, DocInfo)>),
}

impl Database {
    /// Starts reading the changes after `query.since`; documents (`include_docs`, and what
    /// filters look at) are as `reader` may see them (`crate::read_gate`).
    pub fn changes(&self, reader: &UserCtx, query: ChangesQuery) -> Result<Changes> {
        let sight = self.sight(reader)?;
        let db = self.id();
        let snapshot = self.snapshot();
        let end_seq = match snapshot.scan(&keys::seq_range(db), true, 1)?.first() {
            Some((key, _)) => keys::decode_seq(key)?,
            None => 0,
        };
        let source = match &query.filter {
            ChangesFilter::DocIds(ids) => Source::Ids(by_ids(snapshot.as_ref(), db, ids, &query)?),
            _ => {
                let (_, end) = keys::seq_range(db);
                let start = Bound::Excluded(Key::Seq(db, query.since).encode());
                Source::Scan(Iter::new(snapshot.clone(), (start, end), query.descending, 256))
            }
        };
        let remaining = query.limit.unwrap_or(u64::MAX);
        Ok(Changes { snapshot, db, source, query, remaining, sight, end_seq, last_seen: None })
    }
}

impl Changes {
    /// The seq to resume from: the last row's when a limit cut the feed, else the end.
    pub fn last_seq(&self) -> u64 {
        match self.last_seen {
            Some(seq) if self.remaining == 0 || self.query.descending => seq,
            _ => self.end_seq,
        }
    }

    fn next_entry(&mut self) -> Option<Result<(u64, String, DocInfo)>> {
        match &mut self.source {
            Source::Ids(iter) => iter.next().map(Ok),
            Source::Scan(iter) => {
                Some(iter.next()?.map_err(Error::from).and_then(|(key, value)| {
                    let seq = keys::decode_seq(&key)?;
                    let id =
                        String::from_utf8(value).map_err(|_| Error::Corrupt("seq id".into()))?;
                    let info = doc_info_in(self.snapshot.as_ref(), self.db, &id)?
                        .ok_or_else(|| Error::Corrupt(format!("seq {seq} names a missing doc")))?;
                    Ok((seq, id, info))
                }))
            }
        }
    }

    fn row(&self, seq: u64, id: String, info: DocInfo) -> Result<ChangeRow> {
        let (winner, deleted) = info.winner().map(|(r, d)| (r.clone(), d))?;
        let changes = if self.query.all_leaves {
            let tree = &info.tree;
            let mut leaves: Vec<RevId> = tree
                .leaves()
                .into_iter()
                .filter_map(|i| tree.node(i))
                .map(|n| n.rev.clone())
                .collect();
            leaves.sort_by(|a, b| b.cmp(a));
            leaves.retain(|r| *r != winner);
            leaves.insert(0, winner.clone());
            leaves
        } else {
            vec![winner.clone()]
        };
        let doc = if self.query.include_docs {
            self.sight.apply_listed(get_in(self.snapshot.as_ref(), self.db, &id, Some(&winner))?)?
        } else {
            None
        };
        Ok(ChangeRow { seq, id, deleted, changes, info, doc })
    }
}

impl Changes {
    /// Whether the filter keeps this document.
    fn passes(&self, id: &str, info: &DocInfo) -> Result<bool> {
        match &self.query.filter {
            ChangesFilter::All | ChangesFilter::DocIds(_) => Ok(true),
            ChangesFilter::Design => Ok(id.starts_with("_design/")),
            ChangesFilter::Selector(selector) => match self.winner_json(id, info)? {
                Some(doc) => Ok(selector.matches(&doc, bunko_query::selector::Dialect::Mango)),
                None => Ok(false),
            },
            ChangesFilter::Function(keep) => match self.winner_json(id, info)? {
                Some(doc) => (keep.0)(&doc),
                None => Ok(false),
            },
        }
    }

    /// The winning revision as the reader sees it, as a JSON object with `_id`, `_rev` (and
    /// `_deleted`); `None` when the reader may not see it.
    fn winner_json(&self, id: &str, info: &DocInfo) -> Result<Option<serde_json::Value>> {
        let (winner, _) = info.winner()?;
        let stored = get_in(self.snapshot.as_ref(), self.db, id, Some(winner))?;
        let Some(doc) = self.sight.apply_listed(stored)? else { return Ok(None) };
        let mut body: serde_json::Map<String, serde_json::Value> =
            serde_json::from_slice(&doc.body).unwrap_or_default();
        body.insert("_id".into(), id.into());
        body.insert("_rev".into(), doc.rev.to_string().into());
        if doc.deleted {
            body.insert("_deleted".into(), true.into());
        }
        Ok(Some(serde_json::Value::Object(body)))
    }
}

impl Iterator for Changes {
    type Item = Result<ChangeRow>;

    fn next(&mut self) -> Option<Result<ChangeRow>> {
        while self.remaining > 0 {
            let (seq, id, info) = match self.next_entry()? {
                Ok(entry) => entry,
                Err(err) => return Some(Err(err)),
            };
            match self.passes(&id, &info) {
                Ok(true) => {}
                Ok(false) => continue,
                Err(err) => return Some(Err(err)),
            }
            self.remaining -= 1;
            self.last_seen = Some(seq);
            return Some(self.row(seq, id, info));
        }
        None
    }
}

/// The changes of the given documents after `since`, in seq order.
fn by_ids(
    read: &dyn Read,
    db: u64,
    ids: &[String],
    query: &ChangesQuery,
) -> Result<std::vec::IntoIter<(u64, String, DocInfo)>> {
    let mut found = Vec::new();
    for id in ids {
        if let Some(info) = doc_info_in(read, db, id)?
            && info.seq > query.since
            && !found.iter().any(|(_, f, _)| f == id)
        {
            found.push((info.seq, id.clone(), info));
        }
    }
    found.sort_by_key(|(seq, _, _)| *seq);
    if query.descending {
        found.reverse();
    }
    Ok(found.into_iter())
}

impl Database {
    /// How many documents changed after `seq` (the `pending` count of a limited feed).
    pub fn pending_changes(&self, seq: u64) -> Result<u64> {
        self.ids.changes_after(self.store.as_ref(), self.id(), seq)
    }
}
