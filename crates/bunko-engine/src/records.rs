//! The engine's stored records and their (postcard) encoding. Document bodies are stored as
//! compact JSON text under `Rev` keys, except the winning revision's body of a document
//! written to a format 3 store, which its `Doc` record carries ([`DocRecord`]).

use bunko_doc::RevId;
use serde::{Deserialize, Serialize, de::DeserializeOwned};

use crate::revtree::RevTree;
use crate::{Error, Result};

/// A database in the catalog.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DbMeta {
    pub id: u64,
    pub name: String,
    /// Creation time, microseconds since the Unix epoch (`instance_start_time`).
    pub created_us: u64,
    pub partitioned: bool,
    pub revs_limit: u64,
    /// The `_security` object as JSON text.
    pub security: String,
    /// The database's last rename (MongoDB's `renameCollection`), if it was renamed.
    pub renamed: Option<Renamed>,
}

/// A [`DbMeta`] written before renames were recorded.
#[derive(Deserialize)]
struct DbMetaV1 {
    id: u64,
    name: String,
    created_us: u64,
    partitioned: bool,
    revs_limit: u64,
    security: String,
}

impl DbMeta {
    /// Decodes a record of any version (an older one, without `renamed`, is told apart by
    /// its length).
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        decode::<DbMeta>(bytes).or_else(|_| {
            let DbMetaV1 { id, name, created_us, partitioned, revs_limit, security } =
                decode(bytes)?;
            Ok(DbMeta { id, name, created_us, partitioned, revs_limit, security, renamed: None })
        })
    }
}

/// What a rename did, kept in the renamed database's catalog entry so that MongoDB change
/// streams resumed after a restart still report it: the old name, the database's last seq
/// before the rename (later writes are under the new name), and the id of the database a
/// `dropTarget` rename dropped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Renamed {
    pub from: String,
    pub seq: u64,
    pub dropped: Option<u64>,
}

/// A document: its revision tree and the seq of its latest change.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DocInfo {
    pub seq: u64,
    pub tree: RevTree,
    /// Size in bytes of the winning revision's body.
    pub size: u64,
}

impl DocInfo {
    pub fn winner(&self) -> Result<(&RevId, bool)> {
        self.tree.winner().map(|n| (&n.rev, n.deleted)).ok_or_else(|| corrupt("empty rev tree"))
    }
}

/// A `Doc` record as stored: the postcard [`DocInfo`], then, in a format 3 store, either
/// nothing or the postcard [`RevId`] of one revision followed by that revision's body (the
/// rest of the value, as it would be stored under its `Rev` key, which it then lacks). The
/// revision is the winner when it was written; a later change to the tree that does not
/// go through the write path (a purge) may leave another winner, so a reader takes the body
/// only if the revision is the one it wants, else reads the `Rev` key
/// ([`crate::read::body_of`]). A point read of the winner is then one lookup, not two.
///
/// Readers that want only the tree decode the value as a [`DocInfo`] (postcard ignores
/// the bytes after it), so they need not know of the body. The `DocInfo` is the value's
/// head ([`bunko_storage::Batch::put_with_head`]): such readers read it with
/// [`bunko_storage::Read::get_head`] and decompress no body.
#[derive(Debug, Clone)]
pub struct DocRecord {
    pub info: DocInfo,
    pub body: Option<(RevId, Vec<u8>)>,
}

impl DocRecord {
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let (info, rest) =
            postcard::take_from_bytes::<DocInfo>(bytes).map_err(|e| corrupt(&e.to_string()))?;
        if rest.is_empty() {
            return Ok(DocRecord { info, body: None });
        }
        let (rev, body) =
            postcard::take_from_bytes::<RevId>(rest).map_err(|e| corrupt(&e.to_string()))?;
        Ok(DocRecord { info, body: Some((rev, body.to_vec())) })
    }

    /// The stored form of `info` with the body of `rev`, if given, and the length of its
    /// head (the `DocInfo`).
    pub fn encode(info: &DocInfo, body: Option<(&RevId, &[u8])>) -> (Vec<u8>, usize) {
        let mut out = encode(info);
        let head = out.len();
        if let Some((rev, body)) = body {
            out.extend_from_slice(&encode(rev));
            out.extend_from_slice(body);
        }
        (out, head)
    }

    /// The body of `rev`, if this record carries it.
    pub fn body_of(&self, rev: &RevId) -> Option<&[u8]> {
        self.body.as_ref().filter(|(r, _)| r == rev).map(|(_, body)| body.as_slice())
    }
}

/// One entry of the change journal: which revision of which document a write made, and
/// when (milliseconds since the Unix epoch). A `_purge` that removes a whole document
/// journals it with [`ChangeRecord::PURGED`] (`0-`, never a written revision), which
/// change streams show as a `delete`. `replacement`: the write replaced the whole document
/// (MongoDB's `replaceOne`), which change streams report as `replace`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChangeRecord {
    pub id: String,
    pub rev: RevId,
    pub ms: u64,
    pub replacement: bool,
}

/// A [`ChangeRecord`] written before `replacement` was journaled.
#[derive(Deserialize)]
struct ChangeRecordV1 {
    id: String,
    rev: RevId,
    ms: u64,
}

impl ChangeRecord {
    /// The revision a purged document is journaled with.
    pub const PURGED: u64 = 0;

    /// The journal entry of a document a `_purge` removed whole.
    pub fn purged(id: &str, ms: u64) -> ChangeRecord {
        ChangeRecord {
            id: id.to_string(),
            rev: RevId { pos: Self::PURGED, hash: String::new() },
            ms,
            replacement: false,
        }
    }

    /// Decodes a record of any version (postcard records carry no field names, so an
    /// older record, without `replacement`, is told apart by its length).
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        decode::<ChangeRecord>(bytes).or_else(|_| {
            let ChangeRecordV1 { id, rev, ms } = decode(bytes)?;
            Ok(ChangeRecord { id, rev, ms, replacement: false })
        })
    }
}

/// One purge request (`POST /{db}/_purge` names a document and revisions), as CouchDB's
/// purge trees keep it: a uuid, the document, the revisions asked for, and the database's
/// update seq once the request's commit was applied (so the update seq survives a restart
/// even when the purge removed the document holding the highest `Seq` key).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PurgeInfo {
    pub uuid: String,
    pub id: String,
    pub revs: Vec<RevId>,
    pub seq: u64,
}

/// A `_local` document: not replicated, not in `_all_docs` or `_changes`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LocalDoc {
    /// The generation: the document's `_rev` is `0-{generation}`.
    pub generation: u64,
    /// The body as compact JSON.
    pub body: String,
}

/// Document counts and sizes of a database or a partition, maintained by every write.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stats {
    pub doc_count: u64,
    pub doc_del_count: u64,
    /// Bytes of the winning bodies of live documents (CouchDB's `sizes.external`).
    pub external: u64,
    /// Bytes of all stored leaf bodies and revision trees (`sizes.active`).
    pub active: u64,
    /// Document writes (edits, deletions, replicated revisions) ever committed: the
    /// advisor's write hot spots. Records written before this counter existed read as 0.
    pub writes: u64,
    /// Bytes the database's document writes appended to the store since its last
    /// compaction, on top of what that compaction kept (`sizes.file`: the store is
    /// log-structured, so what a write replaces stays on disk until compaction, as in
    /// CouchDB's append-only files). Records written before this counter read as 0.
    pub file: u64,
}

/// [`Stats`] as written before the `file` counter.
#[derive(Deserialize)]
struct StatsV2 {
    doc_count: u64,
    doc_del_count: u64,
    external: u64,
    active: u64,
    writes: u64,
}

/// [`Stats`] as written before the `writes` counter.
#[derive(Deserialize)]
struct StatsV1 {
    doc_count: u64,
    doc_del_count: u64,
    external: u64,
    active: u64,
}

impl Stats {
    /// Decodes a record of any version (postcard records carry no field names, so a
    /// record without the `file` or `writes` counter is told apart by its length).
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        decode::<Stats>(bytes)
            .or_else(|_| {
                let StatsV2 { doc_count, doc_del_count, external, active, writes } =
                    decode::<StatsV2>(bytes)?;
                Ok(Stats { doc_count, doc_del_count, external, active, writes, file: 0 })
            })
            .or_else(|_: Error| {
                let v1 = decode::<StatsV1>(bytes)?;
                let StatsV1 { doc_count, doc_del_count, external, active } = v1;
                Ok(Stats { doc_count, doc_del_count, external, active, writes: 0, file: 0 })
            })
    }

    /// Adds (`sign = 1`) or removes (`sign = -1`) one document's contribution.
    pub fn apply(&mut self, deleted: bool, external: u64, active: u64, sign: i8) {
        let add = |v: &mut u64, d: u64| {
            *v = if sign > 0 { v.saturating_add(d) } else { v.saturating_sub(d) }
        };
        if deleted {
            add(&mut self.doc_del_count, 1);
        } else {
            add(&mut self.doc_count, 1);
            add(&mut self.external, external);
        }
        add(&mut self.active, active);
    }
}

pub fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    postcard::to_stdvec(value).unwrap_or_default()
}

pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T> {
    postcard::from_bytes(bytes).map_err(|e| corrupt(&e.to_string()))
}

fn corrupt(what: &str) -> Error {
    Error::Corrupt(what.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct OldStats(u64, u64, u64, u64);

    #[test]
    fn stats_written_before_the_write_counter_still_read() -> Result<()> {
        let old = encode(&OldStats(3, 1, 300, 420));
        let want = Stats {
            doc_count: 3,
            doc_del_count: 1,
            external: 300,
            active: 420,
            writes: 0,
            file: 0,
        };
        assert_eq!(Stats::decode(&old)?, want);
        let before_file = encode(&(3_u64, 1_u64, 300_u64, 420_u64, 9_u64));
        assert_eq!(Stats::decode(&before_file)?, Stats { writes: 9, ..want });
        let new = Stats { writes: 9, file: 5000, ..want };
        assert_eq!(Stats::decode(&encode(&new))?, new);
        Ok(())
    }

    #[test]
    fn doc_records_with_and_without_a_body_read_both_ways() -> Result<()> {
        let rev = RevId { pos: 1, hash: "ab".into() };
        let mut tree = RevTree::default();
        tree.push(rev.clone(), None, false);
        let info = DocInfo { seq: 4, tree, size: 9 };
        let bare = DocRecord::decode(&DocRecord::encode(&info, None).0)?;
        assert_eq!((bare.info.seq, bare.body), (4, None));
        assert_eq!(DocRecord::encode(&info, None), (encode(&info), encode(&info).len()));
        let (stored, head) = DocRecord::encode(&info, Some((&rev, br#"{"a":1}"#)));
        assert_eq!(decode::<DocInfo>(&stored[..head])?.seq, info.seq);
        let carried = DocRecord::decode(&stored)?;
        assert_eq!(carried.body_of(&rev), Some(&br#"{"a":1}"#[..]));
        assert_eq!(carried.body_of(&RevId { pos: 2, hash: "cd".into() }), None);
        // A reader of the tree alone does not see the body.
        let tree_only: DocInfo = decode(&stored)?;
        assert_eq!((tree_only.seq, tree_only.tree), (4, carried.info.tree));
        Ok(())
    }

    #[test]
    fn catalog_entries_and_journal_records_written_before_their_new_fields_still_read() -> Result<()>
    {
        let old = encode(&(7_u64, "shop$books", 1_u64, false, 1000_u64, "{}"));
        let meta = DbMeta::decode(&old)?;
        assert_eq!((meta.id, meta.name.as_str(), meta.renamed), (7, "shop$books", None));
        let renamed = Some(Renamed { from: "shop$drafts".into(), seq: 4, dropped: Some(2) });
        let new = DbMeta { renamed: renamed.clone(), ..meta };
        assert_eq!(DbMeta::decode(&encode(&new))?.renamed, renamed);
        let rev = RevId { pos: 2, hash: "ab".into() };
        let old = encode(&("d1", rev.clone(), 1234_u64));
        let record = ChangeRecord::decode(&old)?;
        assert_eq!((record.id.as_str(), record.ms, record.replacement), ("d1", 1234, false));
        let new = ChangeRecord { replacement: true, ..record };
        assert!(ChangeRecord::decode(&encode(&new))?.replacement);
        Ok(())
    }
}
