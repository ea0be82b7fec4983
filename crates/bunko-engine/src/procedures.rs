//! Procedures: `procedures` functions of design documents, called by name with a JSON
//! argument and run inside one engine transaction (a Bunko extension; see
//! docs/procedures.md).
//!
//! A procedure is `function(arg, db, userCtx)`. It reads and writes its database through
//! `db` ([`crate::scope`]) on the transaction's snapshot; when it returns, the transaction
//! commits (triggers fire on its writes, the write gate and `validate_doc_update` check
//! each of them as the caller) and the returned value is the answer. If it throws, fails,
//! or runs past the time or memory limit, nothing is written. A commit that loses to a
//! concurrent one ([`Error::TxnConflict`]) runs the procedure again from a new snapshot,
//! up to [`ATTEMPTS`] times, so a procedure must not depend on anything but its
//! argument and what `db` returns.

use serde_json::{Value, json};

use crate::catalog::Engine;
use crate::scope::Shared;
use crate::security::UserCtx;
use crate::triggers::refusal;
use crate::{Error, Result};

/// How many times a procedure runs before a conflict is reported.
pub const ATTEMPTS: usize = 10;

impl Engine {
    /// Calls procedure `name` of design document `_design/{ddoc}` in database `db` as
    /// `ctx` (a member) with `arg`, and returns what it returned once committed.
    pub fn call_procedure(
        &self,
        ctx: &UserCtx,
        db: &str,
        ddoc: &str,
        name: &str,
        arg: &Value,
    ) -> Result<Value> {
        let database = self.db(db)?;
        database.security_object()?.check_member(ctx)?;
        let id = format!("_design/{ddoc}");
        let mut body = database.design_body(&id)?.ok_or_else(crate::error::missing)?;
        let Some(Value::String(source)) = body.get("procedures").and_then(|p| p.get(name)).cloned()
        else {
            return Err(Error::NotFound(format!("missing procedure {name} on design doc {id}")));
        };
        body.insert("_id".to_string(), Value::String(id));
        let scripts = crate::view::runtime().compile_scripts(&[(&source, Value::Object(body))])?;
        let user_ctx = json!({"db": db, "name": ctx.name, "roles": ctx.roles});
        let mut attempt = 1;
        loop {
            let mut txn = self.begin(ctx);
            let shared = Shared::new(txn.take_scope(db)?);
            let outcome = scripts.call(0, &[arg, &user_ctx], 1, Box::new(shared.clone()));
            let mut scope = shared.unshare()?;
            if let Some(failed) = scope.failed.take() {
                return Err(failed);
            }
            let value = match outcome? {
                bunko_js::Outcome::Returned(value) => value,
                bunko_js::Outcome::Threw(verdict) => return Err(refusal(verdict)),
            };
            txn.restore_scope(scope);
            match txn.commit() {
                Err(Error::TxnConflict(_)) if attempt < ATTEMPTS => attempt += 1,
                Err(error) => return Err(error),
                Ok(_) => return Ok(value),
            }
        }
    }
}
