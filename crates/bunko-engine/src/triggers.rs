//! Triggers: the `triggers` functions of a database's design documents, run on every
//! interactive write of one of its documents before it commits (a Bunko extension; see
//! docs/procedures.md).
//!
//! A trigger is `function(newDoc, oldDoc, db, userCtx)`: `newDoc` and `oldDoc` as
//! `validate_doc_update` gets them, `db` the database ([`crate::scope`]). It runs under the
//! writer lock of the database, on the write path every write takes
//! ([`Database::update_docs`] and [`crate::Transaction::commit`]), so it sees the latest
//! committed state and nothing can change it before the commit: concurrent writes that
//! fire triggers are serialized and never conflict. What it writes is staged with the
//! write that fired it, in the same commit, or nothing is: a trigger that throws
//! (`{forbidden}` → 403, `{unauthorized}` → 401) or fails refuses that write.
//!
//! Rules:
//! - Triggers fire for documents, not design or `_local` documents, and not for
//!   replicated writes (`new_edits=false`): the replicated source already holds what its
//!   triggers derived, and it replicates too. `validate_doc_update` still runs on those.
//! - Writes a trigger makes go through the write gate and `validate_doc_update` as the
//!   same user, and do not fire triggers themselves (no recursion).
//! - Every trigger of the database fires on every write, in design-document id order,
//!   then in the order of the `triggers` object.
//! - In `_bulk_docs` without `all_or_nothing`, each document commits separately with its
//!   triggers' writes (one sync for the request); with `all_or_nothing`, all of them and
//!   all their triggers' writes commit together or not at all.

use std::sync::Arc;

use bunko_doc::body::ParsedDoc;
use bunko_doc::id::{DocKind, kind};
use bunko_js::{CompiledScripts, Outcome, Verdict};
use bunko_storage::Batch;
use parking_lot::{Mutex, MutexGuard};
use serde_json::{Value, json};

use crate::database::{Database, Writer};
use crate::keys;
use crate::scope::{Scope, Shared};
use crate::security::UserCtx;
use crate::txn::Touched;
use crate::write::{Checks, DocResult, WriteOptions};
use crate::{Error, Result};

/// A prepared write: its id and the document, or why it was refused.
pub(crate) type Entry = (String, Result<ParsedDoc>);

/// The compiled triggers of one database; `None` inside until loaded.
#[derive(Debug, Default)]
pub(crate) struct Triggers {
    loaded: Mutex<Option<Option<CompiledScripts>>>,
}

impl Database {
    /// Drops the compiled triggers (a design document changed); call under the writer lock.
    pub(crate) fn forget_triggers(&self) {
        *self.triggers.loaded.lock() = None;
    }

    /// Whether the database is known to have no triggers (compiled and none found);
    /// `false` while they are not compiled yet. Takes no writer lock.
    pub(crate) fn known_without_triggers(&self) -> bool {
        matches!(*self.triggers.loaded.lock(), Some(None))
    }

    /// Whether the database has triggers (compiling them if needed); call under the
    /// writer lock.
    pub(crate) fn has_triggers(&self) -> Result<bool> {
        Ok(matches!(*self.compiled_triggers()?, Some(Some(_))))
    }

    fn compiled_triggers(&self) -> Result<MutexGuard<'_, Option<Option<CompiledScripts>>>> {
        let mut loaded = self.triggers.loaded.lock();
        if loaded.is_none() {
            *loaded = Some(self.compile_triggers()?);
        }
        Ok(loaded)
    }

    /// Compiles the `triggers` of every live design document, in id order.
    fn compile_triggers(&self) -> Result<Option<CompiledScripts>> {
        let mut functions = Vec::new();
        for (key, _) in
            self.store.scan(&keys::doc_prefix(self.id(), "_design/"), false, usize::MAX)?
        {
            let id = keys::decode_doc(&key)?;
            let Some(mut body) = self.design_body(&id)? else { continue };
            let Some(Value::Object(triggers)) = body.get("triggers").cloned() else { continue };
            body.insert("_id".to_string(), Value::String(id));
            let ddoc = Value::Object(body);
            for source in triggers.values().filter_map(Value::as_str) {
                functions.push((source.to_string(), ddoc.clone()));
            }
        }
        if functions.is_empty() {
            return Ok(None);
        }
        let sources: Vec<(&str, Value)> =
            functions.iter().map(|(s, d)| (s.as_str(), d.clone())).collect();
        Ok(Some(crate::js::runtime().compile_scripts(&sources)?))
    }

    /// Fires the triggers on each of `docs` in order, under the writer lock, and returns
    /// what to stage: `docs` as the triggers left them, then the triggers' own writes
    /// (prepared, so refused ones carry their error). A refused write carries the refusal
    /// and the triggers' writes are dropped.
    pub(crate) fn fire_triggers(
        &self,
        ctx: &UserCtx,
        checks: &Checks,
        docs: Vec<ParsedDoc>,
    ) -> Result<Vec<Entry>> {
        let loaded = self.compiled_triggers()?;
        let (Some(Some(scripts)), Some(me)) = (loaded.as_ref(), self.arc()) else {
            return Ok(entries(docs));
        };
        let count = docs.len();
        let mut touched = Touched::new(me, 0);
        touched.writes = docs;
        let store: Arc<dyn bunko_storage::Read> = self.store.clone();
        let shared = Shared::new(Scope::new(touched, store, self.config.get().txn_max_bytes));
        let user_ctx = json!({"db": self.name(), "name": ctx.name, "roles": ctx.roles});
        for k in 0..count {
            if let Err(refusal) = self.fire_one(scripts, &shared, k, &user_ctx)? {
                let mut docs = shared.unshare()?.touched.writes;
                docs.truncate(count);
                let mut out = entries(docs);
                if let Some(entry) = out.get_mut(k) {
                    entry.1 = Err(refusal);
                }
                return Ok(out);
            }
        }
        let scope = shared.unshare()?;
        let opts = WriteOptions::default();
        Ok(scope
            .touched
            .writes
            .into_iter()
            .zip(scope.from_js)
            .map(
                |(doc, js)| {
                    if js { self.prepare(&checks.security, ctx, doc, opts) } else { entry(doc) }
                },
            )
            .collect())
    }

    /// Runs every trigger on write `k`; the inner error is a refusal of that write.
    fn fire_one(
        &self,
        scripts: &CompiledScripts,
        shared: &Shared,
        k: usize,
        user_ctx: &Value,
    ) -> Result<std::result::Result<(), Error>> {
        let (new_doc, old_doc) = {
            let scope = shared.lock();
            let Some(doc) = scope.touched.writes.get(k) else { return Ok(Ok(())) };
            let id = doc.id.clone().unwrap_or_default();
            if kind(&id) != DocKind::Normal {
                return Ok(Ok(()));
            }
            (crate::validators::new_doc_json(doc, &[]), scope.stored_json(&id)?)
        };
        for i in 0..scripts.len() {
            let outcome =
                scripts.call(i, &[&new_doc, &old_doc, user_ctx], 2, Box::new(shared.clone()));
            if let Some(failed) = shared.lock().failed.take() {
                return Ok(Err(failed));
            }
            match outcome {
                Ok(Outcome::Returned(_)) => {}
                Ok(Outcome::Threw(verdict)) => return Ok(Err(refusal(verdict))),
                Err(js) => return Ok(Err(Error::Js(js))),
            }
        }
        Ok(Ok(()))
    }

    /// The write path of a database with triggers ([`Database::update_docs`] comes here
    /// under its writer lock): each document (or, with `all_or_nothing`, all of them) is
    /// one unit, fired, staged and applied with its triggers' writes; one sync at the end.
    pub(crate) fn write_triggered(
        &self,
        mut writer: MutexGuard<'_, Writer>,
        checks: &Checks,
        ctx: &UserCtx,
        prepared: Vec<Entry>,
        opts: WriteOptions,
    ) -> Result<Vec<DocResult>> {
        let units = if opts.all_or_nothing {
            vec![prepared]
        } else {
            prepared.into_iter().map(|entry| vec![entry]).collect()
        };
        let (mut results, mut ticket, mut afters) = (Vec::new(), None, Vec::new());
        for unit in units {
            let count = unit.len();
            let unit = if unit.iter().all(|(_, doc)| doc.is_ok()) {
                let docs = unit.into_iter().filter_map(|(_, doc)| doc.ok()).collect();
                self.fire_triggers(ctx, checks, docs)?
            } else {
                unit
            };
            let mut batch = Batch::new();
            let staged = self.stage(&writer, checks, ctx, unit, opts, &mut batch)?;
            let failed = staged.failed();
            results.extend(self.unit_results(staged.results, count));
            if failed || staged.seq == writer.seq {
                continue;
            }
            afters.push(self.install(staged.plan, staged.multikey));
            ticket = Some(self.apply_docs_batch(batch, &staged.ids)?);
            self.set_applied(&mut writer, staged.seq, staged.stats);
        }
        let seq = writer.seq;
        drop(writer);
        if let Some(ticket) = ticket {
            self.store.sync(ticket)?;
            self.notify_durable(seq);
        }
        for after in afters {
            self.after_commit(after);
        }
        Ok(results)
    }

    /// The results of a unit's own `count` documents; when only a trigger's write failed,
    /// the first document carries that failure (naming the document the trigger wrote).
    fn unit_results(&self, mut results: Vec<DocResult>, count: usize) -> Vec<DocResult> {
        let extra = results.split_off(count.min(results.len()));
        let own_failed = results.iter().any(|r| r.result.is_err());
        let trigger_failure = extra.into_iter().find(|r| r.result.is_err());
        if let (false, Some(failure), Some(first)) =
            (own_failed, trigger_failure, results.first_mut())
            && let Err(error) = failure.result
        {
            let error = Box::new(error);
            first.result = Err(Error::InTxn { db: self.name(), id: failure.id, error });
        }
        results
    }
}

/// What a trigger or procedure that threw means for the write.
pub(crate) fn refusal(verdict: Verdict) -> Error {
    match verdict {
        Verdict::Forbidden(reason) => Error::Rejected(reason),
        Verdict::Unauthorized(reason) => Error::Unauthorized(reason),
        Verdict::Unknown(reason) => Error::Unknown(reason),
        Verdict::Accept => Error::Unknown("1".to_string()),
    }
}

fn entry(doc: ParsedDoc) -> Entry {
    (doc.id.clone().unwrap_or_default(), Ok(doc))
}

fn entries(docs: Vec<ParsedDoc>) -> Vec<Entry> {
    docs.into_iter().map(entry).collect()
}
