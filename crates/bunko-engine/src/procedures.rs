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
//!
//! ```
//! use std::sync::Arc;
//! use bunko_doc::body::from_value;
//! use bunko_engine::security::UserCtx;
//! use bunko_engine::{Config, Engine, WriteOptions};
//! use bunko_storage::Memory;
//! use serde_json::json;
//!
//! let me = UserCtx::admin("app");
//! let engine = Engine::open(Arc::new(Memory::new()), Config::default())?;
//! let shop = engine.create_db(&me, "shop", false)?;
//! // The subset pattern: a review document, and the product's newest review ids.
//! let ddoc = json!({"_id": "_design/shop", "procedures": {"addReview":
//!     "function (review, db) {
//!        db.put(review);
//!        var product = db.get(review.product_id);
//!        product.reviews = [review._id].concat(product.reviews).slice(0, 10);
//!        db.put(product);
//!        return product.reviews.length;
//!      }"}});
//! let product = json!({"_id": "widget", "reviews": []});
//! for doc in [ddoc, product] {
//!     shop.put(&me, from_value(doc, &Default::default())?, WriteOptions::default())?;
//! }
//! let review = json!({"_id": "review-786", "product_id": "widget", "review_text": "Amazing!"});
//! let newest = engine.call_procedure(&me, "shop", "shop", "addReview", &review)?;
//! assert_eq!(newest, json!(1));
//! assert_eq!(shop.get(&me, "widget", None)?.body, br#"{"reviews":["review-786"]}"#);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

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
        let scripts = crate::js::runtime().compile_scripts(&[(&source, Value::Object(body))])?;
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
