//! Reading documents: the winner or a given revision, `open_revs`, and `_revs_diff`.

use std::collections::BTreeMap;

use bunko_doc::RevId;
use bunko_storage::Read;

use crate::database::Database;
use crate::keys::Key;
use crate::records::{self, DocInfo, DocRecord};
use crate::security::UserCtx;
use crate::{Error, Result, error::missing};

/// A document revision as read, with its revision tree for the optional fields
/// (`_revisions`, `_revs_info`, `_conflicts`, …).
#[derive(Debug, Clone)]
pub struct DocOut {
    pub id: String,
    pub rev: RevId,
    pub deleted: bool,
    /// The body as compact JSON (an object, without special members).
    pub body: Vec<u8>,
    pub info: DocInfo,
    /// `_revs_info`, when asked for ([`Database::fill_revs_info`]).
    pub revs_info: Option<Vec<(RevId, &'static str)>>,
    /// The stored revision when the read gate showed a changed body under a made-up `rev`
    /// (`crate::read_gate`).
    pub stored_rev: Option<RevId>,
    /// The database's `revs_limit` when read: `_revisions` shows no more (CouchDB's
    /// `couch_db:make_doc`), even before the tree is stemmed to it.
    pub revs_limit: usize,
}

impl DocOut {
    /// `_revisions`: this revision's ancestry, newest first, as hashes, at most
    /// `revs_limit` of them.
    pub fn revisions(&self) -> (u64, Vec<String>) {
        let path = self.path();
        let mut hashes: Vec<String> =
            path.iter().take(self.revs_limit).map(|n| n.rev.hash.clone()).collect();
        if let Some(first) = hashes.first_mut() {
            first.clone_from(&self.rev.hash);
        }
        (self.rev.pos, hashes)
    }

    /// The stored revision (not a made-up one) and its ancestors, newest first.
    fn path(&self) -> Vec<&crate::revtree::Node> {
        let rev = self.stored_rev.as_ref().unwrap_or(&self.rev);
        self.info.tree.find(rev).map(|i| self.info.tree.path(i)).unwrap_or_default()
    }

    /// The parent of the stored revision, if any.
    pub(crate) fn parent_rev(&self) -> Option<RevId> {
        self.path().get(1).map(|n| n.rev.clone())
    }
}

/// `_revs_diff`'s answer: per document, (missing revisions, possible ancestors).
pub type RevsDiff = BTreeMap<String, (Vec<RevId>, Vec<RevId>)>;

/// One entry of an `open_revs` answer.
#[derive(Debug)]
pub enum OpenRev {
    Ok(DocOut),
    Missing(RevId),
}

impl Database {
    /// The document's winning revision, or `rev` if given, as `reader` may see it
    /// (`crate::read_gate`). `404 missing`/`deleted`.
    pub fn get(&self, reader: &UserCtx, id: &str, rev: Option<&RevId>) -> Result<DocOut> {
        let sight = self.sight(reader)?;
        let doc = self.get_stored(id, rev)?;
        sight.apply(DocOut { revs_limit: self.revs_limit() as usize, ..doc })
    }

    /// The document as stored, for the engine's own reads. The `Doc` record and the body
    /// come from one snapshot: a write and a `_compact` between the two lookups cannot
    /// remove the body the record names.
    pub(crate) fn get_stored(&self, id: &str, rev: Option<&RevId>) -> Result<DocOut> {
        get_in(self.snapshot().as_ref(), self.id(), id, rev)
    }

    /// Fills `doc.revs_info`: each ancestor is `available` while its body is stored (until
    /// compaction), `deleted` if it is a deletion, else `missing`.
    pub fn fill_revs_info(&self, doc: &mut DocOut) -> Result<()> {
        let path = doc.path();
        let mut info = Vec::with_capacity(path.len());
        let snapshot = self.snapshot();
        let record = doc_record_in(snapshot.as_ref(), self.id(), &doc.id)?;
        for node in path {
            let key = Key::Rev(self.id(), &doc.id, &node.rev.to_string()).encode();
            let carried = record.as_ref().is_some_and(|r| r.body_of(&node.rev).is_some());
            let status = if node.deleted {
                "deleted"
            } else if carried || snapshot.get(&key)?.is_some() {
                "available"
            } else {
                "missing"
            };
            info.push((node.rev.clone(), status));
        }
        doc.revs_info = Some(info);
        Ok(())
    }

    /// The winning revision of a live document (what an edit names as `_rev`), without
    /// reading its body; `None` when it is missing or deleted.
    pub fn current_rev(&self, id: &str) -> Result<Option<RevId>> {
        let Some(info) = self.doc_info(id)? else { return Ok(None) };
        let (rev, deleted) = info.winner()?;
        Ok((!deleted).then(|| rev.clone()))
    }

    /// The revision tree of a document, if it exists.
    pub fn doc_info(&self, id: &str) -> Result<Option<DocInfo>> {
        doc_info_in(self.store.as_ref(), self.id(), id)
    }

    /// `open_revs`: each requested revision (all leaves when `revs` is `None`), as `reader`
    /// may see it. With `latest`, a non-leaf revision is replaced by its leaf descendants.
    pub fn open_revs(
        &self,
        reader: &UserCtx,
        id: &str,
        revs: Option<Vec<RevId>>,
        latest: bool,
    ) -> Result<Vec<OpenRev>> {
        let sight = self.sight(reader)?;
        let snapshot = self.snapshot();
        let info = doc_info_in(snapshot.as_ref(), self.id(), id)?.ok_or_else(missing)?;
        let tree = &info.tree;
        let wanted: Vec<RevId> = match revs {
            None => tree
                .leaves()
                .into_iter()
                .filter_map(|i| tree.node(i))
                .map(|n| n.rev.clone())
                .collect(),
            Some(revs) if latest => revs.iter().flat_map(|r| leaf_descendants(&info, r)).collect(),
            Some(revs) => revs,
        };
        let mut out = Vec::new();
        let limit = self.revs_limit() as usize;
        for rev in dedup(wanted) {
            let read = get_in(snapshot.as_ref(), self.id(), id, Some(&rev));
            match read.and_then(|d| sight.apply(DocOut { revs_limit: limit, ..d })) {
                Ok(doc) => out.push(OpenRev::Ok(doc)),
                Err(Error::NotFound(_)) => out.push(OpenRev::Missing(rev)),
                Err(err) => return Err(err),
            }
        }
        Ok(out)
    }

    /// `_revs_diff`: for each document, the given revisions this database lacks, and the
    /// leaves that could be their ancestors (`possible_ancestors`).
    pub fn revs_diff(&self, request: BTreeMap<String, Vec<RevId>>) -> Result<RevsDiff> {
        let snapshot = self.snapshot();
        let mut out = BTreeMap::new();
        for (id, revs) in request {
            let info = doc_info_in(snapshot.as_ref(), self.id(), &id)?;
            let missing: Vec<RevId> = revs
                .into_iter()
                .filter(|r| info.as_ref().is_none_or(|i| i.tree.find(r).is_none()))
                .collect();
            if missing.is_empty() {
                continue;
            }
            let ancestors = match &info {
                Some(info) => {
                    let max = missing.iter().map(|r| r.pos).max().unwrap_or(0);
                    let tree = &info.tree;
                    tree.leaves()
                        .into_iter()
                        .filter_map(|i| tree.node(i))
                        .filter(|n| n.rev.pos < max)
                        .map(|n| n.rev.clone())
                        .collect()
                }
                None => Vec::new(),
            };
            out.insert(id, (missing, ancestors));
        }
        Ok(out)
    }
}

/// The document's revision tree: the head of its `Doc` record, without the body it may
/// carry.
pub(crate) fn doc_info_in(read: &dyn Read, db: u64, id: &str) -> Result<Option<DocInfo>> {
    match read.get_head(&Key::Doc(db, id).encode())? {
        Some(bytes) => Ok(Some(records::decode(&bytes)?)),
        None => Ok(None),
    }
}

/// The document's `Doc` record with the body it may carry ([`DocRecord`]).
pub(crate) fn doc_record_in(read: &dyn Read, db: u64, id: &str) -> Result<Option<DocRecord>> {
    match read.get(&Key::Doc(db, id).encode())? {
        Some(bytes) => Ok(Some(DocRecord::decode(&bytes)?)),
        None => Ok(None),
    }
}

/// The body of revision `rev`: from `record` (the document's `Doc` record, read from the
/// same `read`) if it carries it, else from its `Rev` key. `None` when neither has it
/// (a deleted or compacted revision).
pub fn body_of(
    read: &dyn Read,
    db: u64,
    id: &str,
    rev: &RevId,
    record: Option<&DocRecord>,
) -> Result<Option<Vec<u8>>> {
    if let Some(body) = record.and_then(|r| r.body_of(rev)) {
        return Ok(Some(body.to_vec()));
    }
    Ok(read.get(&Key::Rev(db, id, &rev.to_string()).encode())?)
}

/// [`body_of`] for a reader that has not read the `Doc` record: the record first (a
/// winner's body is there), then the `Rev` key.
pub fn body_in(read: &dyn Read, db: u64, id: &str, rev: &RevId) -> Result<Option<Vec<u8>>> {
    let record = doc_record_in(read, db, id)?;
    body_of(read, db, id, rev, record.as_ref())
}

/// Reads a document from `read` (the store or a snapshot): the winner from its `Doc`
/// record alone when the record carries its body (one lookup), else from its `Rev` key too.
pub(crate) fn get_in(read: &dyn Read, db: u64, id: &str, rev: Option<&RevId>) -> Result<DocOut> {
    let record = doc_record_in(read, db, id)?.ok_or_else(missing)?;
    doc_out(read, db, id, record, rev)
}

/// [`get_in`] with the document's `Doc` record already read from `read`.
pub(crate) fn doc_out(
    read: &dyn Read,
    db: u64,
    id: &str,
    record: DocRecord,
    rev: Option<&RevId>,
) -> Result<DocOut> {
    let info = &record.info;
    let (rev, deleted) = match rev {
        Some(rev) => {
            let node = info.tree.find(rev).and_then(|i| info.tree.node(i)).ok_or_else(missing)?;
            (rev.clone(), node.deleted)
        }
        None => match info.winner()? {
            (_, true) => return Err(Error::NotFound("deleted".to_string())),
            (rev, false) => (rev.clone(), false),
        },
    };
    let DocRecord { info, body: carried } = record;
    let body = match carried {
        Some((carried, body)) if carried == rev => body,
        _ => read.get(&Key::Rev(db, id, &rev.to_string()).encode())?.ok_or_else(missing)?,
    };
    Ok(DocOut {
        id: id.to_string(),
        rev,
        deleted,
        body,
        info,
        revs_info: None,
        stored_rev: None,
        revs_limit: usize::MAX,
    })
}

fn leaf_descendants(info: &DocInfo, rev: &RevId) -> Vec<RevId> {
    let tree = &info.tree;
    let Some(target) = tree.find(rev) else { return vec![rev.clone()] };
    tree.leaves()
        .into_iter()
        .filter(|&leaf| tree.path(leaf).iter().any(|n| tree.find(&n.rev) == Some(target)))
        .filter_map(|leaf| tree.node(leaf).map(|n| n.rev.clone()))
        .collect()
}

fn dedup(revs: Vec<RevId>) -> Vec<RevId> {
    let mut out: Vec<RevId> = Vec::new();
    for rev in revs {
        if !out.contains(&rev) {
            out.push(rev);
        }
    }
    out
}
