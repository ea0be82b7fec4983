//! `aggregate` inside a multi-document transaction: the collection and every collection a
//! `$lookup`/`$unionWith`/`$graphLookup` reads are read through the transaction (its
//! snapshot plus its own buffered writes, `in_txn::matching`); the answer is computed
//! whole and handed out in `cursor.batchSize` batches, as `find` does in a transaction. `$out`, `$merge`,
//! `$changeStream`, `$collStats` and `$indexStats` are `OperationNotSupportedInTransaction` (263), as
//! in MongoDB.

use std::sync::Arc;

use bson::Document;
use bunko_engine::Transaction;
use bunko_query::agg::{Docs, Env, EnvRef, Matcher, Pushdown, Source};
use bunko_query::expr::{ExprError, IndexKeys};
use bunko_query::{Direction, FieldPath};
use parking_lot::Mutex;

use super::Ctx;
use super::agg_env::{from_expr, to_expr};
use super::aggregate::{Request, order_of};
use super::crud::readable_db;
use super::in_txn::matching_hinted;
use crate::error::MongoError;
use crate::names::Namespace;

type Txn = Transaction<'static>;

fn not_in_txn(what: &str) -> MongoError {
    MongoError::new(
        263,
        "OperationNotSupportedInTransaction",
        format!("{what} cannot be used in a transaction"),
    )
}

struct TxnEnv<'a, 'c> {
    ctx: &'a Ctx<'c>,
    txn: Mutex<&'a mut Txn>,
    allow_disk_use: bool,
}

/// What the pushed-down query of a pipeline in a transaction reads: its collection, the
/// `$match` filter, the `$sort`, the `hint` (the pipeline's own collection only), `skip`
/// and `limit`.
struct Read<'r> {
    ns: &'r Namespace,
    filter: &'r Document,
    order: &'r [(FieldPath, Direction)],
    hint: Option<&'r str>,
    skip: usize,
    limit: usize,
}

impl TxnEnv<'_, '_> {
    fn read(&self, read: Read) -> Result<Vec<Document>, MongoError> {
        let Read { ns, filter, order, hint, skip, limit } = read;
        let mut txn = self.txn.lock();
        // A collection the transaction itself creates is read like the others.
        let created = || txn.created_db(&ns.engine_name());
        let Some(db) = readable_db(self.ctx, ns, "aggregate")?.or_else(created) else {
            return Ok(Vec::new());
        };
        let found = matching_hinted(&mut txn, &db, filter, (order, hint), skip, limit)?;
        Ok(found.into_iter().map(|f| f.doc).collect())
    }
}

impl Env for TxnEnv<'_, '_> {
    fn memory_limit(&self) -> usize {
        self.ctx.server.config.agg_memory_limit
    }

    fn allow_disk_use(&self) -> bool {
        self.allow_disk_use
    }

    fn spill(&self) -> Result<Box<dyn bunko_query::agg::Spill>, ExprError> {
        Ok(super::agg_env::EngineSpill::boxed(&self.ctx.server.engine))
    }

    fn matcher(&self, filter: &Document) -> Result<Matcher, ExprError> {
        super::agg_env::matcher(filter)
    }

    fn find(&self, coll: &str, filter: &Document) -> Result<Vec<Document>, ExprError> {
        let ns = Namespace::new(&self.ctx.db, coll).map_err(to_expr)?;
        let read = Read { ns: &ns, filter, order: &[], hint: None, skip: 0, limit: usize::MAX };
        self.read(read).map_err(to_expr)
    }

    fn replace_collection(
        &self,
        _: Option<&str>,
        _: &str,
        _: Vec<Document>,
    ) -> Result<(), ExprError> {
        Err(to_expr(not_in_txn("$out")))
    }

    fn upsert(&self, _: Option<&str>, _: &str, _: Vec<Document>) -> Result<(), ExprError> {
        Err(to_expr(not_in_txn("$merge")))
    }
}

/// Runs `aggregate` `command` in `txn`.
pub(super) fn aggregate(
    ctx: &mut Ctx,
    txn: &mut Txn,
    command: &Document,
) -> Result<Document, MongoError> {
    let request = Request::parse(ctx, command)?;
    if let Some(stage @ ("$changeStream" | "$collStats" | "$indexStats")) = request.first_stage() {
        return Err(not_in_txn(stage));
    }
    let txn_env =
        Arc::new(TxnEnv { ctx, txn: Mutex::new(txn), allow_disk_use: request.allow_disk_use });
    let env: EnvRef = txn_env.clone();
    let hint = match readable_db(ctx, &request.ns, "aggregate")? {
        Some(db) => super::indexes::hint(&db, command.get("hint"))?,
        None => None,
    };
    let input = |push: &Pushdown| -> Result<Source, MongoError> {
        let (env, ns, push) = (txn_env.clone(), request.ns.clone(), push.clone());
        let (order, hint) = (order_of(&push)?, hint.clone());
        Ok(Arc::new(move || {
            let limit = push.limit.unwrap_or(usize::MAX);
            let (filter, skip, hint) = (&push.filter, push.skip, hint.as_deref());
            let read = Read { ns: &ns, filter, order: &order, hint, skip, limit };
            let docs = env.read(read).map_err(to_expr)?;
            Ok(Box::new(docs.into_iter().map(Ok)) as Docs)
        }))
    };
    let plan =
        |push: &Pushdown| super::aggregate::explained(ctx, &request.ns, push, hint.as_deref());
    // A transaction's reads are not planned as `find`'s: their index keys are not known.
    let keys = |_: &Pushdown| -> Result<Option<IndexKeys>, MongoError> {
        Err(MongoError::not_implemented(
            "$meta \"indexKey\" or \"recordId\" in a transaction is not supported yet",
        ))
    };
    let docs = match request.run(command, &env, (&input, &keys), &plan)? {
        Ok(docs) => docs.collect::<Result<Vec<Document>, _>>().map_err(from_expr)?,
        Err(explain) => return Ok(explain),
    };
    drop(env);
    drop(txn_env);
    Ok(super::cursor::answer(ctx, &request.ns.full(), docs, request.batch, false))
}
