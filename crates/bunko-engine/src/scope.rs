//! One database as a procedure or trigger sees it: the [`bunko_js::Host`] behind the `db`
//! object of `procedures.rs` and `triggers.rs`.
//!
//! A scope reads through `read` plus the writes buffered so far ([`Touched`]): for a
//! procedure, `read` is the transaction's snapshot and every read is recorded for the
//! commit's validation; for triggers, which run under the writer lock, it is the store
//! itself, which no one else can change meanwhile. `db.put` buffers a write; a document
//! written again at the same base revision replaces its earlier buffered write, so a
//! transaction that changes a document twice gives it one new revision.
//!
//! A failed `db` call is thrown into JavaScript and also kept in [`Scope::failed`]: the
//! caller fails the whole call with it even if the function caught the exception.

use std::sync::Arc;

use bunko_doc::body::{Limits, ParsedDoc, from_value};
use bunko_doc::id::{DocKind, kind};
use bunko_js::{Host, HostError};
use bunko_query::selector::{Dialect, Selector};
use bunko_storage::Read;
use parking_lot::Mutex;
use serde_json::{Map, Value, json};

use crate::txn::Touched;
use crate::{Error, Result};

/// See the module documentation.
pub(crate) struct Scope {
    pub touched: Touched,
    read: Arc<dyn Read>,
    /// Parallel to `touched.writes`: which writes JavaScript made or replaced.
    pub from_js: Vec<bool>,
    /// Bytes JavaScript may still buffer (`Config::txn_max_bytes`).
    bytes_left: usize,
    limits: Limits,
    /// The first failed `db` call.
    pub failed: Option<Error>,
}

/// A scope shared with the sandbox for one call.
#[derive(Clone)]
pub(crate) struct Shared(Arc<Mutex<Scope>>);

impl Shared {
    pub(crate) fn new(scope: Scope) -> Shared {
        Shared(Arc::new(Mutex::new(scope)))
    }

    pub(crate) fn lock(&self) -> parking_lot::MutexGuard<'_, Scope> {
        self.0.lock()
    }

    /// Takes the scope back from a finished call (the sandbox has dropped its handle).
    pub(crate) fn unshare(self) -> Result<Scope> {
        Arc::into_inner(self.0)
            .map(Mutex::into_inner)
            .ok_or_else(|| Error::Corrupt("a procedure's database is still lent".into()))
    }
}

impl Scope {
    pub(crate) fn new(touched: Touched, read: Arc<dyn Read>, bytes_left: usize) -> Scope {
        let limits = touched.db.config.get().limits;
        let from_js = vec![false; touched.writes.len()];
        Scope { touched, read, from_js, bytes_left, limits, failed: None }
    }

    /// The stored winner of `id` as `validate_doc_update`'s `oldDoc` shows it (ignoring
    /// buffered writes): `null` if missing, a `_deleted` stub if deleted.
    pub(crate) fn stored_json(&self, id: &str) -> Result<Value> {
        let db = self.touched.db.id();
        let Some(record) = crate::read::doc_record_in(self.read.as_ref(), db, id)? else {
            return Ok(Value::Null);
        };
        let (rev, deleted) = record.info.winner()?;
        let mut out = Map::new();
        out.insert("_id".into(), json!(id));
        out.insert("_rev".into(), json!(rev.to_string()));
        if deleted {
            out.insert("_deleted".into(), json!(true));
        } else {
            let body = crate::read::body_of(self.read.as_ref(), db, id, rev, Some(&record))?
                .ok_or_else(crate::error::missing)?;
            let body: Map<String, Value> =
                serde_json::from_slice(&body).map_err(|e| Error::Corrupt(e.to_string()))?;
            out.extend(body);
        }
        Ok(Value::Object(out))
    }

    /// `db.get`: the document with `_id` and (unless new in this transaction) `_rev`.
    fn get_json(&mut self, id: &str) -> Result<Value> {
        let Some(doc) = self.touched.get(self.read.as_ref(), id)? else { return Ok(Value::Null) };
        let mut out = Map::new();
        out.insert("_id".into(), json!(id));
        if doc.rev.pos > 0 {
            out.insert("_rev".into(), json!(doc.rev.to_string()));
        }
        out.extend(doc.body);
        Ok(Value::Object(out))
    }

    /// `db.find`: every live document (design documents excepted, as in `_find`) that
    /// matches, in id order; marks the database scanned.
    fn find_json(&mut self, selector: &Value, limit: Option<usize>) -> Result<Vec<Value>> {
        let selector =
            Selector::parse(selector).map_err(|e| Error::BadRequest(format!("db.find: {e}")))?;
        let mut ids = self.touched.ids(self.read.as_ref(), "", "\u{10ffff}")?;
        ids.extend(self.touched.writes.iter().filter_map(|d| d.id.clone()));
        ids.sort();
        ids.dedup();
        let mut out = Vec::new();
        for id in ids {
            if out.len() >= limit.unwrap_or(usize::MAX) {
                break;
            }
            if kind(&id) != DocKind::Normal {
                continue;
            }
            let doc = self.get_json(&id)?;
            if !doc.is_null() && selector.matches(&doc, Dialect::Mango) {
                out.push(doc);
            }
        }
        Ok(out)
    }

    /// `db.put`: buffers `doc` (a new id if it has none).
    fn put_json(&mut self, doc: Value) -> Result<Value> {
        let mut doc: ParsedDoc = from_value(doc, &self.limits)?;
        let id = match &doc.id {
            Some(id) => id.clone(),
            None => crate::uuids::global().next(),
        };
        doc.id = Some(id.clone());
        let size = doc.body_json().len();
        if size > self.bytes_left {
            return Err(Error::TxnAborted(
                "transaction exceeded its size limit (procedure or trigger writes)".into(),
            ));
        }
        self.bytes_left -= size;
        let writes = &mut self.touched.writes;
        match writes.iter().rposition(|d| d.id.as_deref() == Some(&id)) {
            Some(i) if writes[i].rev == doc.rev => {
                writes[i] = doc;
                self.from_js[i] = true;
            }
            _ => {
                writes.push(doc);
                self.from_js.push(true);
            }
        }
        Ok(json!({"ok": true, "id": id}))
    }

    /// Bytes JavaScript buffered.
    pub(crate) fn bytes_left(&self) -> usize {
        self.bytes_left
    }

    /// Records a failure and turns it into what JavaScript throws.
    fn fail(&mut self, error: Error) -> HostError {
        let (name, reason) = host_error_parts(&error);
        self.failed.get_or_insert(error);
        HostError { error: name.to_string(), reason }
    }
}

impl Host for Shared {
    fn get(&mut self, id: &str) -> std::result::Result<Value, HostError> {
        let mut scope = self.lock();
        scope.get_json(id).map_err(|e| scope.fail(e))
    }

    fn find(
        &mut self,
        selector: &Value,
        limit: Option<usize>,
    ) -> std::result::Result<Vec<Value>, HostError> {
        let mut scope = self.lock();
        scope.find_json(selector, limit).map_err(|e| scope.fail(e))
    }

    fn put(&mut self, doc: Value) -> std::result::Result<Value, HostError> {
        let mut scope = self.lock();
        scope.put_json(doc).map_err(|e| scope.fail(e))
    }
}

/// CouchDB-style error name and reason of a failed `db` call.
fn host_error_parts(error: &Error) -> (&'static str, String) {
    let name = match error {
        Error::BadRequest(_) | Error::Doc(_) => "bad_request",
        Error::NotFound(_) => "not_found",
        Error::TxnAborted(_) => "transaction_aborted",
        _ => "internal_error",
    };
    (name, error.to_string())
}
