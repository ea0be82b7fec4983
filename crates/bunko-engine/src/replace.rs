//! Replacing every document of a database in one commit: MongoDB's `$out` into a
//! collection that exists.
//!
//! MongoDB fills a temporary collection made with the target's indexes and options, then
//! renames it over the target. Here the database itself stays: under its writer lock,
//! [`Database::replace_docs`] stages the deletion of every live document that is not a
//! design document, then the new documents as creations, and applies it all as one
//! all-or-nothing commit ([`Database::apply_prepared`], the path every write takes). So:
//!
//! - what describes the collection stays as it was: its indexes and options (design
//!   documents, never replaced), `_security`, `revs_limit` and the database's identity;
//! - `unique` indexes and the validator judge exactly the new contents: the deletions,
//!   staged first, release their index keys, so the new documents may reuse or swap them,
//!   while two new documents sharing a key fail the whole commit;
//! - readers see the old or the new contents, never a mix, and a failure (a duplicate key,
//!   a refused document, an I/O error) leaves the old contents;
//! - the `_changes` feed and change streams see ordinary deletions and creations; a
//!   document whose `_id` comes back gets a new revision over its deleted one.

use bunko_doc::RevId;
use bunko_doc::body::ParsedDoc;
use bunko_doc::id::{DocKind, kind};
use bunko_storage::Iter;

use crate::database::Database;
use crate::records::{self, DocInfo};
use crate::security::UserCtx;
use crate::write::{Checks, DocResult, WriteOptions};
use crate::{Result, keys};

/// Documents read per page while listing the ones to delete.
const PAGE: usize = 1000;

impl Database {
    /// Replaces every document (design documents excepted) by `docs`, as `ctx`, in one
    /// all-or-nothing commit; see the module documentation. Returns the results of `docs`
    /// in order (on a failure, the failing document's error, and nothing is written); a
    /// deletion refused (by a `validate_doc_update` function) is that error instead.
    pub fn replace_docs(
        &self,
        ctx: &UserCtx,
        docs: Vec<ParsedDoc>,
        opts: WriteOptions,
    ) -> Result<Vec<DocResult>> {
        let opts = WriteOptions { all_or_nothing: true, ..opts };
        let checks = Checks::load(self)?;
        let new = self.prepare_all(&checks, ctx, docs, opts);
        let writer = self.lock_writer()?;
        // Under the writer lock, so that no write lands between the listing and the commit.
        let removals = self.live_docs()?.into_iter().map(|(id, rev)| ParsedDoc {
            id: Some(id),
            rev: Some(rev),
            deleted: true,
            ..Default::default()
        });
        let mut prepared = self.prepare_all(&checks, ctx, removals.collect(), opts);
        let removed = prepared.len();
        prepared.extend(new);
        let applied = self.apply_prepared(writer, &checks, ctx, prepared, opts)?;
        let mut results = self.settle(applied)?;
        let kept = results.split_off(removed);
        match results.into_iter().find_map(|r| r.result.err()) {
            Some(refused) => Err(refused),
            None => Ok(kept),
        }
    }

    /// The id and winning revision of every live document but the design documents.
    fn live_docs(&self) -> Result<Vec<(String, RevId)>> {
        let mut out = Vec::new();
        let snapshot = self.store.snapshot();
        for entry in Iter::new(snapshot, keys::doc_range(self.id()), false, PAGE).heads() {
            let (key, value) = entry?;
            let id = keys::decode_doc(&key)?;
            if kind(&id) == DocKind::Design {
                continue;
            }
            let info: DocInfo = records::decode(&value)?;
            if let (rev, false) = info.winner()? {
                out.push((id, rev.clone()));
            }
        }
        Ok(out)
    }
}
