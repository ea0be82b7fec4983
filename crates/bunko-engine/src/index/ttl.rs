//! TTL indexes (`expireAfterSeconds` on a MongoDB index over one field): documents whose
//! indexed date (the earliest, for an array of dates) lies more than `expireAfterSeconds`
//! in the past are deleted, as MongoDB's TTL monitor deletes them. The expired documents are
//! found by a range scan of the index over dates before the cutoff and deleted through the
//! normal write path (`update_docs` as the server), so the write gate, `_changes` and every
//! index see ordinary deletions. A document whose field is not a date never expires.

use std::ops::Bound;

use bunko_doc::body::ParsedDoc;
use bunko_query::bson_order::Class;
use bunko_query::mongo_index::encode;
use bunko_storage::Iter;
use serde_json::json;

use super::entries;
use crate::Result;
use crate::database::Database;
use crate::security::UserCtx;
use crate::write::WriteOptions;

impl Database {
    /// Deletes the documents the TTL indexes of this collection hold as expired at
    /// `now_ms` (milliseconds since the epoch); returns how many were deleted.
    pub fn expire_ttl(&self, now_ms: i64) -> Result<usize> {
        let mut deleted = 0;
        for index in self.mongo_indexes() {
            let Some(ttl) = index.def.mongo.as_ref().and_then(|s| s.expire_after_seconds) else {
                continue;
            };
            if index.def.fields.len() != 1 || !index.is_ready() {
                continue;
            }
            let cutoff = now_ms.saturating_sub(ttl.saturating_mul(1000));
            let base = entries::prefix(self.id(), index.num(), None);
            let start = [base.as_slice(), &[Class::Date as u8 + 1]].concat();
            let mut end = base.clone();
            encode(&json!({"$date": cutoff}), &mut end);
            let range = (Bound::Included(start), Bound::Excluded(end));
            let mut ids: Vec<String> = Vec::new();
            for entry in Iter::new(self.store.snapshot(), range, false, 256) {
                let (_, value) = entry?;
                if let Some((_, id)) = entries::decode_value(&value)
                    && !ids.contains(&id)
                {
                    ids.push(id);
                }
            }
            deleted += self.delete_expired(ids)?;
        }
        Ok(deleted)
    }

    /// Deletes the documents at their current revisions (a document changed meanwhile
    /// is left for the next pass).
    fn delete_expired(&self, ids: Vec<String>) -> Result<usize> {
        let mut tombstones = Vec::new();
        for id in ids {
            if let Ok(doc) = self.get_stored(&id, None) {
                let rev = Some(doc.rev);
                tombstones.push(ParsedDoc {
                    id: Some(id),
                    rev,
                    deleted: true,
                    ..Default::default()
                });
            }
        }
        if tombstones.is_empty() {
            return Ok(0);
        }
        let results = self.update_docs(&UserCtx::system(), tombstones, WriteOptions::default())?;
        Ok(results.iter().filter(|r| r.result.is_ok()).count())
    }
}
