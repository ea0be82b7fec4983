//! `_purge`: forgetting revisions as if they had never been written (CouchDB's
//! `couch_db_updater:purge_docs`).
//!
//! [`Database::purge`] (server admins only, through the write gate) takes `{id: [revs]}`
//! requests and, under the writer lock, in one commit:
//! 1. removes each named *leaf* from the document's revision tree with every ancestor no
//!    other leaf shares ([`crate::revtree::RevTree::remove_leaves`]; other revisions are
//!    ignored), and their bodies;
//! 2. a document left without revisions disappears: its `Doc` key, its `Seq` entry (so it
//!    leaves `_all_docs` and `_changes`), its counters and its Mango index entries, and it
//!    gets a seq of its own for a change-journal entry (MongoDB change streams show a
//!    `delete`, `crate::events`); a document that keeps revisions moves to a new seq with
//!    its new winner's entries;
//! 3. records each request as a [`PurgeInfo`] under `Purge(db, purge_seq)`, with the
//!    update seq the commit reached: the update seq always advances (CouchDB bumps it so
//!    that indexers look again), and a restart finds it there even when the purged
//!    document held the highest `Seq` key.
//!
//! Indexes built from the change sequence learn of purges from these records: each view
//! map index keeps its purge checkpoint in `_local/purge-mrview-{sig}` (CouchDB's id and
//! fields, hidden from `_local_docs` unless `include_system=true`) and removes the purged
//! documents' rows before it reads new changes (`bunko-views`' `purge.rs`); search indexes do the
//! same with their checkpoint in their own commit (`bunko-search`). Compaction keeps the
//! newest `purged_infos_limit` records and older ones until every purge checkpoint passed
//! them.

use std::collections::HashMap;

use bunko_doc::RevId;
use bunko_doc::id::{DocKind, kind, partition_of};
use bunko_storage::{Batch, Iter, Read};
use serde_json::{Map, Value};

use crate::database::Database;
use crate::index::{DdocChanges, MultikeyMarks, Winner};
use crate::keys::{self, Key};
use crate::records::{self, DocInfo, LocalDoc, PurgeInfo, Stats};
use crate::security::UserCtx;
use crate::{Error, Result};

/// CouchDB's default `purged_infos_limit`.
pub const DEFAULT_PURGED_INFOS_LIMIT: u64 = 1000;

/// The prefix of the `_local` documents holding indexes' purge checkpoints.
pub const PURGE_CHECKPOINT_PREFIX: &str = "_local/purge-";

/// What one purge request removed: the leaves it named that existed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Purged {
    pub id: String,
    pub revs: Vec<RevId>,
}

/// The state of one purge commit under construction.
struct PurgeBatch {
    batch: Batch,
    seq: u64,
    stats: Stats,
    docs: HashMap<String, Option<DocInfo>>,
    partitions: HashMap<String, Stats>,
    ddocs: DdocChanges,
    /// MongoDB indexes a purge makes multikey (a conflict becoming the winner).
    multikey: MultikeyMarks,
    /// The revision and body each touched `Doc` record carries ([`records::DocRecord`]).
    carried: HashMap<String, Option<(RevId, Vec<u8>)>>,
}

impl Database {
    /// Purges `requests` (`(doc id, revisions)`) as `ctx`, a server admin; one result per
    /// request, in order. Over `[purge] max_document_id_number` documents or
    /// `max_revisions_number` revisions it is `400` and nothing changes.
    pub fn purge(&self, ctx: &UserCtx, requests: Vec<(String, Vec<RevId>)>) -> Result<Vec<Purged>> {
        crate::gate::admit_server_admin(ctx)?;
        let config = self.config.get();
        if requests.len() as u64 > config.purge_max_ids {
            return Err(Error::BadRequest("Exceeded maximum number of documents.".into()));
        }
        let revs: usize = requests.iter().map(|(_, revs)| revs.len()).sum();
        if revs as u64 > config.purge_max_revs {
            return Err(Error::BadRequest("Exceeded maximum number of revisions.".into()));
        }
        if self.is_partitioned() {
            // A partitioned database refuses ids without a partition, as CouchDB does.
            for (id, _) in &requests {
                if bunko_doc::id::kind(id) == bunko_doc::id::DocKind::Normal {
                    bunko_doc::id::validate_doc_id(id, true)?;
                }
            }
        }
        if requests.is_empty() {
            return Ok(Vec::new());
        }
        let writer = self.lock_writer()?;
        let mut pb = PurgeBatch {
            batch: Batch::new(),
            seq: writer.seq,
            stats: writer.stats,
            docs: HashMap::new(),
            partitions: HashMap::new(),
            ddocs: DdocChanges::default(),
            multikey: MultikeyMarks::default(),
            carried: HashMap::new(),
        };
        let mut results = Vec::with_capacity(requests.len());
        for (id, mut revs) in requests {
            revs.sort();
            revs.dedup();
            let removed = self.purge_one(&mut pb, &id, &revs)?;
            results.push((Purged { id, revs: removed }, revs));
        }
        let db = self.id();
        let seq = if pb.seq == writer.seq { pb.seq + 1 } else { pb.seq };
        let mut purge_seq = self.purge_seq()?;
        for (purged, revs) in &results {
            purge_seq += 1;
            let uuid = crate::uuids::random_hex();
            let info = PurgeInfo { uuid, id: purged.id.clone(), revs: revs.clone(), seq };
            pb.batch.put(Key::Purge(db, purge_seq).encode(), records::encode(&info));
        }
        for (partition, stats) in &pb.partitions {
            pb.batch.put(Key::PartStats(db, partition).encode(), records::encode(stats));
        }
        pb.batch.put(Key::Stats(db).encode(), records::encode(&pb.stats));
        let plan = (!pb.ddocs.is_empty()).then(|| self.plan_ddocs(&mut pb.batch, &pb.ddocs, seq));
        let after = self.install(plan, std::mem::take(&mut pb.multikey));
        // Purged documents lose their `Doc` and `Seq` keys, which the order statistics
        // cannot follow: they are built again when next needed.
        let ids = crate::ids::IdChanges::unlisted();
        self.commit_locked(writer, pb.batch, &ids, seq, pb.stats)?;
        self.after_commit(after);
        Ok(results.into_iter().map(|(purged, _)| purged).collect())
    }

    /// Removes `revs` from document `id` in `pb`; returns the leaves removed.
    fn purge_one(&self, pb: &mut PurgeBatch, id: &str, revs: &[RevId]) -> Result<Vec<RevId>> {
        let db = self.id();
        let old = match pb.docs.get(id) {
            Some(info) => info.clone(),
            None => match crate::read::doc_record_in(self.store.as_ref(), db, id)? {
                Some(record) => {
                    pb.carried.insert(id.to_string(), record.body);
                    Some(record.info)
                }
                None => None,
            },
        };
        let Some(old) = old else { return Ok(Vec::new()) };
        let mut tree = old.tree.clone();
        let removed = tree.remove_leaves(revs);
        if removed.is_empty() {
            return Ok(removed);
        }
        for node in old.tree.nodes().iter().filter(|n| tree.find(&n.rev).is_none()) {
            pb.batch.delete(Key::Rev(db, id, &node.rev.to_string()).encode());
        }
        pb.batch.delete(Key::Seq(db, old.seq).encode());
        let new = if tree.nodes().is_empty() {
            pb.batch.delete(Key::Doc(db, id).encode());
            // Change streams see it go: a journal entry of its own seq.
            pb.seq += 1;
            let record = records::ChangeRecord::purged(id, crate::catalog::now_us() / 1000);
            pb.batch.put(Key::Event(db, pb.seq).encode(), records::encode(&record));
            None
        } else {
            pb.seq += 1;
            let mut info = DocInfo { seq: pb.seq, tree, size: 0 };
            info.size = self.winner(id, &info)?.map_or(0, |(_, body, _)| body.len() as u64);
            // The carried body stays with its revision, or goes with it.
            let carried = pb.carried.entry(id.to_string()).or_default();
            if carried.as_ref().is_some_and(|(rev, _)| info.tree.find(rev).is_none()) {
                *carried = None;
            }
            let body = carried.as_ref().map(|(rev, body)| (rev, body.as_slice()));
            let (record, head) = records::DocRecord::encode(&info, body);
            pb.batch.put_with_head(Key::Doc(db, id).encode(), record, head);
            pb.batch.put(Key::Seq(db, info.seq).encode(), id.as_bytes().to_vec());
            Some(info)
        };
        self.purge_counters(pb, id, &old, new.as_ref())?;
        let (old_winner, new_winner) = (
            self.winner(id, &old)?,
            match &new {
                Some(info) => self.winner(id, info)?,
                None => None,
            },
        );
        if kind(id) == DocKind::Design {
            let body =
                new_winner.and_then(|(_, b, _)| serde_json::from_slice::<Map<_, _>>(&b).ok());
            pb.ddocs.insert(id.to_string(), body);
        } else {
            if new_winner.is_none() {
                self.unorder(&mut pb.batch, id)?;
            }
            let marks = (&mut pb.batch, &mut pb.multikey);
            self.index_doc(&self.indexes.all(), marks, id, &old_winner, &new_winner);
        }
        pb.docs.insert(id.to_string(), new);
        Ok(removed)
    }

    /// Moves the document's contribution out of the counters (and that of what is left of
    /// it back in).
    fn purge_counters(
        &self,
        pb: &mut PurgeBatch,
        id: &str,
        old: &DocInfo,
        new: Option<&DocInfo>,
    ) -> Result<()> {
        let move_out = |stats: &mut Stats| -> Result<()> {
            stats.apply(old.winner()?.1, old.size, crate::write::active_size(old), -1);
            if let Some(new) = new {
                stats.apply(new.winner()?.1, new.size, crate::write::active_size(new), 1);
            }
            Ok(())
        };
        move_out(&mut pb.stats)?;
        if let Some(partition) = partition_of(id).filter(|_| self.is_partitioned()) {
            let mut stats = match pb.partitions.get(partition) {
                Some(stats) => *stats,
                None => self.partition_stats(partition)?,
            };
            move_out(&mut stats)?;
            pb.partitions.insert(partition.to_string(), stats);
        }
        Ok(())
    }

    /// The winning revision and body of `info` as indexes see it (`None` if deleted).
    fn winner(&self, id: &str, info: &DocInfo) -> Result<Winner> {
        let (rev, deleted) = info.winner()?;
        if deleted {
            return Ok(None);
        }
        let body = crate::read::body_in(self.store.as_ref(), self.id(), id, rev)?;
        let conflicts = crate::index::entries::conflicts_of(info);
        Ok(body.map(|body| (rev.to_string(), body, conflicts)))
    }

    /// The number of the latest purge request (`purge_seq`), 0 if none.
    pub fn purge_seq(&self) -> Result<u64> {
        purge_seq_in(self.store.as_ref(), self.id())
    }

    /// For an index applying purges from its checkpoint `after`: the latest purge seq and
    /// the documents purged since, or `None` for them when records after `after` were
    /// already trimmed by compaction (the index must then rebuild).
    pub fn purged_since(&self, after: u64) -> Result<(u64, Option<Vec<String>>)> {
        let (db, snapshot) = (self.id(), self.snapshot());
        let latest = purge_seq_in(snapshot.as_ref(), db)?;
        if latest <= after {
            return Ok((latest, Some(Vec::new())));
        }
        let infos = purges_after(&snapshot, db, after)?;
        let complete = infos.first().is_some_and(|(seq, _)| *seq == after + 1);
        Ok((latest, complete.then(|| infos.into_iter().map(|(_, info)| info.id).collect())))
    }

    /// `GET /{db}/_purged_infos`: the purge requests kept, oldest first, `(id, revs)`.
    pub fn purged_infos(&self) -> Result<Vec<(String, Vec<RevId>)>> {
        let infos = purges_after(&self.snapshot(), self.id(), 0)?;
        Ok(infos.into_iter().map(|(_, info)| (info.id, info.revs)).collect())
    }

    /// `GET /{db}/_purged_infos_limit` (server admins, as CouchDB).
    pub fn purged_infos_limit(&self, ctx: &UserCtx) -> Result<u64> {
        crate::gate::admit_server_admin(ctx)?;
        self.stored_purged_infos_limit()
    }

    fn stored_purged_infos_limit(&self) -> Result<u64> {
        match self.store.get(&Key::PurgedLimit(self.id()).encode())? {
            Some(bytes) => records::decode(&bytes),
            None => Ok(DEFAULT_PURGED_INFOS_LIMIT),
        }
    }

    /// `PUT /{db}/_purged_infos_limit` (server admins; a positive integer).
    pub fn set_purged_infos_limit(&self, ctx: &UserCtx, limit: u64) -> Result<()> {
        crate::gate::admit_server_admin(ctx)?;
        if limit == 0 {
            return Err(Error::BadRequest("`purged_infos_limit` must be positive integer".into()));
        }
        let writer = self.lock_writer()?;
        let mut batch = Batch::new();
        batch.put(Key::PurgedLimit(self.id()).encode(), records::encode(&limit));
        let ticket = self.store.apply(batch)?;
        drop(writer);
        self.store.sync(ticket)?;
        Ok(())
    }

    /// Compaction's share: removes the purge records beyond the newest
    /// `purged_infos_limit` that every index purge checkpoint has passed.
    pub(crate) fn trim_purge_infos(&self) -> Result<u64> {
        let db = self.id();
        let snapshot = self.snapshot();
        let latest = purge_seq_in(snapshot.as_ref(), db)?;
        let limit = self.stored_purged_infos_limit()?;
        let mut upto = latest.saturating_sub(limit);
        for (_, local) in purge_checkpoints(&snapshot, db)? {
            upto = upto.min(local);
        }
        let mut batch = Batch::new();
        for (pseq, _) in purges_after(&snapshot, db, 0)?.into_iter().take_while(|(s, _)| *s <= upto)
        {
            batch.delete(Key::Purge(db, pseq).encode());
        }
        let removed = batch.len() as u64;
        if removed > 0 {
            self.store.commit(batch)?;
        }
        Ok(removed)
    }
}

/// The latest purge seq of database `db` in `read`.
pub fn purge_seq_in(read: &dyn Read, db: u64) -> Result<u64> {
    match read.scan(&keys::purge_range(db), true, 1)?.first() {
        Some((key, _)) => keys::decode_purge(key),
        None => Ok(0),
    }
}

/// The update seq the latest purge of `db` left (0 if none), for `Database::load`.
pub(crate) fn purged_update_seq(read: &dyn Read, db: u64) -> Result<u64> {
    match read.scan(&keys::purge_range(db), true, 1)?.first() {
        Some((_, value)) => Ok(records::decode::<PurgeInfo>(value)?.seq),
        None => Ok(0),
    }
}

/// The purge records of `db` after purge seq `after`, oldest first.
pub fn purges_after(
    snapshot: &bunko_storage::Snapshot,
    db: u64,
    after: u64,
) -> Result<Vec<(u64, PurgeInfo)>> {
    let range =
        (std::ops::Bound::Excluded(Key::Purge(db, after).encode()), keys::purge_range(db).1);
    Iter::new(snapshot.clone(), range, false, 256)
        .map(|entry| {
            let (key, value) = entry?;
            Ok((keys::decode_purge(&key)?, records::decode(&value)?))
        })
        .collect()
}

/// The purge checkpoints `_local/purge-*` of `db`: `(id, purge_seq)`.
pub(crate) fn purge_checkpoints(
    snapshot: &bunko_storage::Snapshot,
    db: u64,
) -> Result<Vec<(String, u64)>> {
    let range = bunko_storage::prefix_range(&Key::Local(db, PURGE_CHECKPOINT_PREFIX).encode());
    let mut found = Vec::new();
    for entry in Iter::new(snapshot.clone(), range, false, 64) {
        let (key, value) = entry?;
        let local: LocalDoc = records::decode(&value)?;
        if let Some(pseq) = checkpoint_seq(&local.body) {
            found.push((keys::decode_local(&key)?, pseq));
        }
    }
    Ok(found)
}

/// The `purge_seq` of a purge checkpoint body, if it is one.
pub fn checkpoint_seq(body: &str) -> Option<u64> {
    serde_json::from_str::<Value>(body).ok()?.get("purge_seq")?.as_u64()
}

/// Whether `_local_docs` hides `id` with `body` unless `include_system=true`: purge
/// checkpoints and shard-sync checkpoints, as CouchDB's `should_skip_local_document`.
pub fn is_system_local(id: &str, body: &str) -> bool {
    let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(body) else { return false };
    (id.starts_with(PURGE_CHECKPOINT_PREFIX) && fields.contains_key("purge_seq"))
        || (id.starts_with("_local/shard-sync")
            && fields.contains_key("target_uuid")
            && fields.contains_key("seq"))
}
