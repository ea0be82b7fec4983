//! `_local` documents: per-database, not replicated, absent from `_all_docs` and
//! `_changes`, and without revision trees. Their `_rev` is `0-N`, N counting the writes;
//! an update must name the current `_rev`, as CouchDB requires.

use bunko_doc::body::ParsedDoc;
use bunko_storage::Batch;

use crate::database::Database;
use crate::keys::{self, Key};
use crate::records::{self, LocalDoc};
use crate::security::UserCtx;
use crate::{Error, Result, error::missing};

/// The range of a `_local_docs` request.
#[derive(Debug, Clone, Default)]
pub struct LocalDocsQuery {
    pub start: Option<String>,
    pub end: Option<String>,
    pub inclusive_end: bool,
    pub descending: bool,
    pub skip: u64,
    pub limit: Option<u64>,
    /// Include indexes' purge checkpoints (`include_system=true`).
    pub include_system: bool,
}

impl LocalDocsQuery {
    fn after_start(&self, id: &str) -> bool {
        self.start.as_deref().is_none_or(|s| if self.descending { id <= s } else { id >= s })
    }

    fn before_end(&self, id: &str) -> bool {
        self.end.as_deref().is_none_or(|e| match (self.descending, self.inclusive_end) {
            (false, true) => id <= e,
            (false, false) => id < e,
            (true, true) => id >= e,
            (true, false) => id > e,
        })
    }
}

/// One local document: id (with `_local/`), `0-N` rev, body JSON.
#[derive(Debug, Clone)]
pub struct LocalRow {
    pub id: String,
    pub rev: String,
    pub body: String,
}

impl Database {
    /// The local document `_local/{name}` (id given with its prefix): (rev, body JSON).
    pub fn get_local(&self, id: &str) -> Result<(String, String)> {
        let local = self.read_local(id)?.ok_or_else(missing)?;
        Ok((format!("0-{}", local.generation), local.body))
    }

    /// Writes (or, with `doc.deleted`, removes) a local document as `ctx`; returns its new
    /// `_rev`.
    pub fn put_local(&self, ctx: &UserCtx, id: &str, doc: &ParsedDoc) -> Result<String> {
        self.admit_doc(&self.security_object()?, ctx, id)?;
        if doc.attachments.as_ref().is_some_and(|atts| !atts.is_empty()) {
            return Err(Error::BadRequest("_local documents do not accept attachments.".into()));
        }
        let writer = self.lock_writer()?;
        let current = self.read_local(id)?;
        let given = doc.rev.as_ref().map(|r| (r.pos, r.hash.clone()));
        let current_generation = current.as_ref().map(|c| c.generation);
        let matches = match (given, current_generation) {
            (None, None) => true,
            (Some((0, hash)), Some(generation)) => hash == generation.to_string(),
            (None, Some(_)) | (Some(_), _) => false,
        };
        if !matches {
            return Err(if doc.deleted && current.is_none() { missing() } else { Error::Conflict });
        }
        let key = Key::Local(self.id(), id).encode();
        let mut batch = Batch::new();
        let generation = current_generation.unwrap_or(0) + 1;
        if doc.deleted {
            batch.delete(key);
        } else {
            let body = String::from_utf8(doc.body_json()).unwrap_or_else(|_| "{}".into());
            batch.put(key, records::encode(&LocalDoc { generation, body }));
        }
        let ticket = self.store.apply(batch)?;
        drop(writer);
        self.store.sync(ticket)?;
        Ok(if doc.deleted { "0-0".to_string() } else { format!("0-{generation}") })
    }

    /// Every local document id.
    pub fn local_ids(&self) -> Result<Vec<String>> {
        let iter =
            bunko_storage::Iter::new(self.snapshot(), keys::local_range(self.id()), false, 256);
        iter.map(|entry| keys::decode_local(&entry?.0)).collect()
    }

    /// The local documents of `GET /{db}/_local_docs`, in id order (reversed when
    /// `descending`), between `start` and `end`, after `skip`, at most `limit`.
    pub fn local_docs(&self, q: &LocalDocsQuery) -> Result<Vec<LocalRow>> {
        let iter = bunko_storage::Iter::new(
            self.snapshot(),
            keys::local_range(self.id()),
            q.descending,
            256,
        );
        let mut rows = Vec::new();
        let mut skipped = 0;
        for entry in iter {
            let (key, value) = entry?;
            let id = keys::decode_local(&key)?;
            if !q.after_start(&id) {
                continue;
            }
            if !q.before_end(&id) || rows.len() as u64 >= q.limit.unwrap_or(u64::MAX) {
                break;
            }
            let local: LocalDoc = records::decode(&value)?;
            if !q.include_system && crate::purge::is_system_local(&id, &local.body) {
                continue;
            }
            if skipped < q.skip {
                skipped += 1;
                continue;
            }
            rows.push(LocalRow { id, rev: format!("0-{}", local.generation), body: local.body });
        }
        Ok(rows)
    }

    fn read_local(&self, id: &str) -> Result<Option<LocalDoc>> {
        match self.store.get(&Key::Local(self.id(), id).encode())? {
            Some(bytes) => Ok(Some(records::decode(&bytes)?)),
            None => Ok(None),
        }
    }
}
