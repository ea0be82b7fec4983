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

    /// Every local document id (for `_local_docs`).
    pub fn local_ids(&self) -> Result<Vec<String>> {
        let iter =
            bunko_storage::Iter::new(self.snapshot(), keys::local_range(self.id()), false, 256);
        iter.map(|entry| keys::decode_local(&entry?.0)).collect()
    }

    fn read_local(&self, id: &str) -> Result<Option<LocalDoc>> {
        match self.store.get(&Key::Local(self.id(), id).encode())? {
            Some(bytes) => Ok(Some(records::decode(&bytes)?)),
            None => Ok(None),
        }
    }
}
