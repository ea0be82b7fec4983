//! Procedures and triggers: design-document functions that read and write their database
//! through a `db` object (a Bunko extension; CouchDB has nothing like it).
//!
//! The functions of one database are compiled into one sandbox
//! ([`Runtime::compile_scripts`]). A call ([`CompiledScripts::call`]) lends the sandbox a
//! [`Host`], the engine's view of the database inside one transaction, for exactly the
//! duration of the call; `db.get`, `db.find`, `db.put` and `db.remove` in JavaScript reach
//! it as JSON text. What the function returns becomes [`Outcome::Returned`]; what it
//! throws becomes a [`Verdict`] (`{forbidden}` → 403, `{unauthorized}` → 401, anything
//! else CouchDB's `unknown_error`), exactly as for `validate_doc_update`. Time and memory
//! are bounded by the runtime's [`Limits`](crate::Limits), the whole call counting
//! against one `time_per_call`.

use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Value, json};

use crate::error::{Result, internal};
use crate::sandbox::{Kind, Op, Sandbox};
use crate::update::{Verdict, verdict};
use crate::views::Runtime;

/// A failed `db` call, thrown into JavaScript as `{error, reason}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostError {
    /// CouchDB's error name (`bad_request`, `not_found`, ...).
    pub error: String,
    /// Human-readable reason.
    pub reason: String,
}

/// The database a procedure or trigger works on, as the engine lends it for one call.
pub trait Host: Send {
    /// `db.get(id)`: the document with `_id` and `_rev`, or `null` when missing or deleted.
    fn get(&mut self, id: &str) -> Result<Value, HostError>;
    /// `db.find(selector, {limit})`: the documents matching a Mango selector.
    fn find(&mut self, selector: &Value, limit: Option<usize>) -> Result<Vec<Value>, HostError>;
    /// `db.put(doc)` (and `db.remove(doc)`, a put of `{_id, _rev, _deleted: true}`):
    /// buffers a write and returns `{"ok": true, "id": …}`.
    fn put(&mut self, doc: Value) -> Result<Value, HostError>;
}

/// Where a call's [`Host`] waits while JavaScript runs.
type Slot = Arc<Mutex<Option<Box<dyn Host>>>>;

/// What a procedure or trigger did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// It returned this value (`null` for `undefined`).
    Returned(Value),
    /// It threw; the verdict as for `validate_doc_update`.
    Threw(Verdict),
}

/// The procedures or triggers of a database, compiled into one QuickJS runtime. `Send`;
/// one call at a time.
pub struct CompiledScripts {
    sandbox: Sandbox,
    slot: Slot,
    /// `(function id, design document body)`, in the order given.
    funs: Vec<(u32, Value)>,
}

impl std::fmt::Debug for CompiledScripts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledScripts").field("functions", &self.funs.len()).finish()
    }
}

impl Runtime {
    /// Compiles `(source, design document)` pairs into one sandbox with a `db` object; the
    /// error is the first function that does not compile.
    pub fn compile_scripts(&self, functions: &[(&str, Value)]) -> Result<CompiledScripts> {
        let sandbox = Sandbox::new(self.limits())?;
        let slot: Slot = Arc::default();
        let answering = Arc::clone(&slot);
        sandbox.install_db(Arc::new(move |op, text| answer(&answering, op, text)))?;
        let mut funs = Vec::with_capacity(functions.len());
        for (source, ddoc) in functions {
            // CommonJS `require` resolves against the function's design document.
            sandbox.set_root(&ddoc.to_string())?;
            funs.push((sandbox.compile(source, Kind::Design)?, ddoc.clone()));
        }
        Ok(CompiledScripts { sandbox, slot, funs })
    }
}

impl CompiledScripts {
    /// How many functions there are.
    pub fn len(&self) -> usize {
        self.funs.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.funs.is_empty()
    }

    /// Calls function `index` with `args`, the `db` object inserted at position `db_at`
    /// and its design document as `this`, lending it `host` for the call.
    pub fn call(
        &self,
        index: usize,
        args: &[&Value],
        db_at: usize,
        host: Box<dyn Host>,
    ) -> Result<Outcome> {
        *lock(&self.slot) = Some(host);
        let answer = self.run(index, args, db_at);
        *lock(&self.slot) = None;
        answer
    }

    /// Calls function `index` with `args` and its design document as `this`, without a
    /// `db` object (filter, update and show functions: a `db` call throws).
    pub fn call_plain(&self, index: usize, args: &[&Value]) -> Result<Outcome> {
        self.run(index, args, usize::MAX)
    }

    fn run(&self, index: usize, args: &[&Value], db_at: usize) -> Result<Outcome> {
        let Some((id, ddoc)) = self.funs.get(index) else {
            return Err(internal(format!("no function {index}")));
        };
        let text = serde_json::to_string(&(ddoc, args)).map_err(internal)?;
        let answer: (u8, Value) =
            serde_json::from_str(&self.sandbox.script(*id, &text, db_at)?).map_err(internal)?;
        Ok(match answer {
            (0, value) => Outcome::Returned(value),
            (_, thrown) => Outcome::Threw(thrown_verdict(thrown)),
        })
    }
}

fn lock(slot: &Slot) -> std::sync::MutexGuard<'_, Option<Box<dyn Host>>> {
    slot.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A `db` call from JavaScript: the argument's JSON text in, `{"ok": …}` or
/// `{"error", "reason"}` out.
fn answer(slot: &Slot, op: Op, text: &str) -> String {
    let mut guard = lock(slot);
    let Some(host) = guard.as_mut() else {
        return error_json("internal_error", "no database is lent to this call");
    };
    let arg: Value = match serde_json::from_str(text) {
        Ok(arg) => arg,
        Err(e) => return error_json("bad_request", &e.to_string()),
    };
    let result = match (op, arg) {
        (Op::Get, Value::String(id)) => host.get(&id),
        (Op::Get, _) => Err(HostError { error: "bad_request".into(), reason: "bad id".into() }),
        (Op::Find, arg) => find(host.as_mut(), &arg),
        (Op::Put, doc) => host.put(doc),
    };
    match result {
        Ok(value) => json!({ "ok": value }).to_string(),
        Err(e) => error_json(&e.error, &e.reason),
    }
}

fn find(host: &mut dyn Host, arg: &Value) -> Result<Value, HostError> {
    let limit = match arg.pointer("/options/limit") {
        None | Some(Value::Null) => None,
        Some(limit) => match limit.as_u64() {
            Some(n) => Some(usize::try_from(n).unwrap_or(usize::MAX)),
            None => {
                let reason = "`limit` must be a non-negative integer".to_string();
                return Err(HostError { error: "bad_request".into(), reason });
            }
        },
    };
    let selector = arg.get("selector").unwrap_or(&Value::Null);
    host.find(selector, limit).map(Value::Array)
}

fn error_json(error: &str, reason: &str) -> String {
    json!({ "error": error, "reason": reason }).to_string()
}

/// What a thrown value means: CouchDB's verdicts, and `{error, reason}` (a JavaScript
/// `Error` or a failed `db` call) as `unknown_error` with both in the reason.
fn thrown_verdict(thrown: Value) -> Verdict {
    if let Value::Object(map) = &thrown
        && map.len() == 2
        && let (Some(error), Some(reason)) = (map.get("error"), map.get("reason"))
    {
        let text = |v: &Value| v.as_str().map_or_else(|| v.to_string(), str::to_string);
        return Verdict::Unknown(format!("{}: {}", text(error), text(reason)));
    }
    verdict(thrown)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::Error;

    /// A database in a map, recording what was written.
    #[derive(Default)]
    struct MapHost {
        docs: BTreeMap<String, Value>,
    }

    impl Host for Arc<Mutex<MapHost>> {
        fn get(&mut self, id: &str) -> Result<Value, HostError> {
            Ok(lock_host(self).docs.get(id).cloned().unwrap_or(Value::Null))
        }

        fn find(&mut self, selector: &Value, _: Option<usize>) -> Result<Vec<Value>, HostError> {
            let want = selector.get("type").cloned().unwrap_or(Value::Null);
            let host = lock_host(self);
            Ok(host.docs.values().filter(|d| d.get("type") == Some(&want)).cloned().collect())
        }

        fn put(&mut self, doc: Value) -> Result<Value, HostError> {
            let Some(id) = doc.get("_id").and_then(Value::as_str).map(str::to_string) else {
                return Err(HostError { error: "bad_request".into(), reason: "no _id".into() });
            };
            lock_host(self).docs.insert(id.clone(), doc);
            Ok(json!({"ok": true, "id": id}))
        }
    }

    fn lock_host(host: &Arc<Mutex<MapHost>>) -> std::sync::MutexGuard<'_, MapHost> {
        host.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn compile(source: &str) -> Result<CompiledScripts> {
        Runtime::default().compile_scripts(&[(source, json!({"_id": "_design/s", "n": 7}))])
    }

    #[test]
    fn a_procedure_reads_and_writes_through_db() -> Result<()> {
        let scripts = compile(
            "function(arg, db) {
                var p = db.get('p1');
                p.count += arg.by;
                db.put(p);
                db.put({_id: 'b' + this.n, type: 'book'});
                return {books: db.find({type: 'book'}).length, missing: db.get('nope')};
            }",
        )?;
        let host = Arc::new(Mutex::new(MapHost::default()));
        lock_host(&host).docs.insert("p1".into(), json!({"_id": "p1", "count": 1}));
        let got = scripts.call(0, &[&json!({"by": 2})], 1, Box::new(Arc::clone(&host)))?;
        assert_eq!(got, Outcome::Returned(json!({"books": 1, "missing": null})));
        assert_eq!(lock_host(&host).docs["p1"], json!({"_id": "p1", "count": 3}));
        assert!(lock_host(&host).docs.contains_key("b7"));
        Ok(())
    }

    #[test]
    fn throws_become_verdicts() -> Result<()> {
        let scripts = compile(
            "function(newDoc, oldDoc, db) {
                if (newDoc.f) throw({forbidden: 'no'});
                if (newDoc.p) db.put({});
                if (newDoc.t) null.x;
            }",
        )?;
        let host = || Box::new(Arc::new(Mutex::new(MapHost::default())));
        let run = |doc: Value| scripts.call(0, &[&doc, &Value::Null], 2, host());
        assert_eq!(run(json!({}))?, Outcome::Returned(Value::Null));
        assert_eq!(run(json!({"f": 1}))?, Outcome::Threw(Verdict::Forbidden("no".into())));
        assert_eq!(
            run(json!({"p": 1}))?,
            Outcome::Threw(Verdict::Unknown("bad_request: no _id".into()))
        );
        let Outcome::Threw(Verdict::Unknown(reason)) = run(json!({"t": 1}))? else {
            panic!("a TypeError is unknown_error")
        };
        assert!(reason.starts_with("TypeError"), "{reason}");
        Ok(())
    }

    #[test]
    fn a_runaway_script_is_stopped() -> Result<()> {
        let limits = crate::Limits {
            time_per_call: std::time::Duration::from_millis(50),
            ..Default::default()
        };
        let scripts = Runtime::new(limits)
            .compile_scripts(&[("function(arg, db) { for (;;) {} }", Value::Null)])?;
        let host = Box::new(Arc::new(Mutex::new(MapHost::default())));
        let got = scripts.call(0, &[&Value::Null], 1, host);
        assert!(matches!(got, Err(Error::Timeout { .. })), "{got:?}");
        Ok(())
    }
}
