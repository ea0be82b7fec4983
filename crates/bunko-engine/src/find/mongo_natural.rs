//! Collection scans of capped databases in natural (insertion) order.
//!
//! MongoDB reads a collection without an index in record-id order, which for a capped
//! collection is its insertion order: a `find`, an `aggregate`, a single `update`/`delete`
//! or a `findAndModify` without a sort that no index serves takes the oldest matching
//! document first. The engine keeps that order for capped databases
//! ([`crate::capped`]); this module reads it from a storage snapshot. Databases that are
//! not capped are scanned in `_id` order, as before.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use bunko_query::Selector;
use bunko_storage::{Iter, Snapshot};
use serde_json::Value;

use super::mongo::{answer, id_range};
use super::mongo_stream::Examined;
use super::{ExecStats, FindQuery, FindResult};
use crate::Result;
use crate::database::Database;
use crate::keys::{self, Key};
use crate::security::UserCtx;

/// Order entries read per storage page.
const PAGE: usize = 256;

/// The live documents of a capped database in natural order: each id with its stored
/// `DocInfo` record.
pub(super) type NaturalDocs = Box<dyn Iterator<Item = Result<(String, Vec<u8>)>> + Send>;

impl Database {
    /// Whether a MongoDB collection scan over `selector` reads this database in natural
    /// order: it is capped and `selector` names no single `_id` (read directly).
    pub(super) fn scans_naturally(&self, selector: &Selector) -> Result<bool> {
        Ok(id_range(self.id(), selector).is_none() && self.is_capped()?)
    }

    /// The documents of this capped database in natural order as `snap` holds them;
    /// `None` when `snap` holds no order yet (a database capped before the order was
    /// kept, derived by a commit after `snap` was taken: read in `_id` order then).
    pub(super) fn natural_docs(&self, snap: &Snapshot) -> Result<Option<NaturalDocs>> {
        self.ensure_natural()?;
        let db = self.id();
        if snap.get(&Key::NaturalFrom(db).encode())?.is_none() {
            return Ok(None);
        }
        let read = snap.clone();
        let entries = Iter::new(snap.clone(), self.natural_from_first(), false, PAGE);
        Ok(Some(Box::new(entries.filter_map(move |entry| {
            let found = || -> Result<Option<(String, Vec<u8>)>> {
                let (key, id) = entry?;
                let n = keys::decode_natural(&key)?;
                let id = String::from_utf8_lossy(&id).into_owned();
                // A key left by a document removed while the database was not capped.
                let of = read.get(&Key::NaturalOf(db, &id).encode())?;
                if of.as_deref() != Some(&n.to_be_bytes()[..]) {
                    return Ok(None);
                }
                Ok(read.get(&Key::Doc(db, &id).encode())?.map(|info| (id, info)))
            };
            found().transpose()
        }))))
    }

    /// [`Database::find_mongo`] of an unsorted query no index serves over a capped
    /// database (or one sorted by `$natural`): its documents in natural order (newest first
    /// when `descending`), `skip` and `limit` applied.
    pub(super) fn find_mongo_natural(
        &self,
        reader: &UserCtx,
        query: &FindQuery,
        descending: bool,
    ) -> Result<FindResult> {
        let snap = self.store.snapshot();
        let counts = Arc::new(Examined::default());
        let sight = self.sight(reader)?;
        let docs = self.doc_stream(&snap, &query.selector, None, counts.clone(), sight)?;
        let docs: Vec<Value> = match descending {
            false => docs.skip(query.skip).take(query.limit).collect::<Result<_>>()?,
            true => {
                let mut all = docs.collect::<Result<Vec<Value>>>()?;
                all.reverse();
                all.into_iter().skip(query.skip).take(query.limit).collect()
            }
        };
        let stats = ExecStats {
            keys_examined: 0,
            docs_examined: counts.docs.load(Ordering::Relaxed),
            results_returned: docs.len() as u64,
        };
        self.observe_query(query, None, &stats);
        Ok(answer(docs, stats, None))
    }
}
