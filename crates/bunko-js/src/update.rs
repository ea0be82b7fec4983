//! `validate_doc_update` functions of design documents (CouchDB's `validate.js` and
//! `couch_query_servers:validate_doc_update/6`): every function of a database, compiled
//! into one sandbox, runs on each document write with `(newDoc, oldDoc, userCtx, secObj)`
//! and the design document as `this`. A function that returns accepts the write; one that
//! throws `{forbidden: reason}` or `{unauthorized: reason}` refuses it with CouchDB's
//! `403`/`401`; anything else thrown is CouchDB's `unknown_error`.

use serde_json::Value;

use crate::error::{Result, internal};
use crate::sandbox::{Kind, Sandbox};
use crate::views::Runtime;

/// What a validation function decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Accept,
    /// `throw({forbidden: reason})`.
    Forbidden(String),
    /// `throw({unauthorized: reason})`.
    Unauthorized(String),
    /// Anything else thrown (CouchDB's `500 unknown_error`).
    Unknown(String),
}

/// The arguments of one validation.
#[derive(Debug, Clone, Copy)]
pub struct Update<'a> {
    /// The document as written: body with `_id`, `_rev`, `_revisions`, `_deleted`.
    pub new_doc: &'a Value,
    /// The stored document (`null` if there is none).
    pub old_doc: &'a Value,
    /// `{"db", "name", "roles"}`.
    pub user_ctx: &'a Value,
    /// The database's `_security` object.
    pub sec_obj: &'a Value,
}

/// The validation functions of a database, compiled into one QuickJS runtime. `Send`; one
/// call at a time.
pub struct CompiledValidators {
    sandbox: Sandbox,
    /// `(function id, design document body)` in design document id order.
    funs: Vec<(u32, Value)>,
}

impl std::fmt::Debug for CompiledValidators {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledValidators").field("functions", &self.funs.len()).finish()
    }
}

impl Runtime {
    /// Compiles `(source, design document)` pairs; the error is the first function that
    /// does not compile.
    pub fn compile_validators(&self, functions: &[(&str, Value)]) -> Result<CompiledValidators> {
        let sandbox = Sandbox::new(self.limits())?;
        let mut funs = Vec::with_capacity(functions.len());
        for (source, ddoc) in functions {
            // CommonJS `require` resolves against the function's design document.
            sandbox.set_root(&ddoc.to_string())?;
            funs.push((sandbox.compile(source, Kind::Design)?, ddoc.clone()));
        }
        Ok(CompiledValidators { sandbox, funs })
    }
}

impl CompiledValidators {
    /// Runs every function in order; the first refusal wins.
    pub fn validate(&self, update: Update<'_>) -> Result<Verdict> {
        for (id, ddoc) in &self.funs {
            let args = (update.new_doc, update.old_doc, update.user_ctx, update.sec_obj, ddoc);
            let text = serde_json::to_string(&args).map_err(internal)?;
            let thrown: Value =
                serde_json::from_str(&self.sandbox.validate(*id, &text)?).map_err(internal)?;
            let verdict = verdict(thrown);
            if verdict != Verdict::Accept {
                return Ok(verdict);
            }
        }
        Ok(Verdict::Accept)
    }
}

/// CouchDB's reading of the answer: `1` accepts; a one-member object names the refusal.
pub(crate) fn verdict(thrown: Value) -> Verdict {
    match thrown {
        Value::Number(n) if n.as_i64() == Some(1) => Verdict::Accept,
        Value::Object(map) if map.len() == 1 => {
            let (key, message) = map.into_iter().next().unwrap_or_default();
            let message = match message {
                Value::String(s) => s,
                other => other.to_string(),
            };
            match key.as_str() {
                "forbidden" => Verdict::Forbidden(message),
                "unauthorized" => Verdict::Unauthorized(message),
                _ => Verdict::Unknown(message),
            }
        }
        Value::String(message) => Verdict::Unknown(message),
        other => Verdict::Unknown(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn run(source: &str, new_doc: Value, old_doc: Value) -> Result<Verdict> {
        let ddoc = json!({"_id": "_design/v", "owner": "ada"});
        let validators = Runtime::default().compile_validators(&[(source, ddoc)])?;
        let user_ctx = json!({"db": "db", "name": "bob", "roles": ["reader"]});
        let sec_obj = json!({"admins": {"names": ["ada"]}});
        let update =
            Update { new_doc: &new_doc, old_doc: &old_doc, user_ctx: &user_ctx, sec_obj: &sec_obj };
        validators.validate(update)
    }

    #[test]
    fn thrown_objects_become_couchdbs_verdicts() -> Result<()> {
        let source = "function(newDoc, oldDoc, userCtx, secObj) {
            if (newDoc.bad) throw({forbidden: 'bad ' + userCtx.name});
            if (newDoc.who) throw({unauthorized: secObj.admins.names[0] + ' only'});
            if (newDoc.odd) throw({other: 'odd'});
            if (newDoc.text) throw('plain');
            if (oldDoc && oldDoc.locked) throw({forbidden: this.owner + ' locked it'});
        }";
        assert_eq!(run(source, json!({"ok": 1}), Value::Null)?, Verdict::Accept);
        assert_eq!(
            run(source, json!({"bad": 1}), Value::Null)?,
            Verdict::Forbidden("bad bob".into())
        );
        assert_eq!(
            run(source, json!({"who": 1}), Value::Null)?,
            Verdict::Unauthorized("ada only".into())
        );
        assert_eq!(run(source, json!({"odd": 1}), Value::Null)?, Verdict::Unknown("odd".into()));
        assert_eq!(run(source, json!({"text": 1}), Value::Null)?, Verdict::Unknown("plain".into()));
        let locked = run(source, json!({}), json!({"locked": true}))?;
        assert_eq!(locked, Verdict::Forbidden("ada locked it".into()));
        Ok(())
    }

    #[test]
    fn a_real_error_fails_the_call() {
        let got = run("function(doc) { doc.missing.field; }", json!({}), Value::Null);
        assert!(got.is_err(), "{got:?}");
    }
}
