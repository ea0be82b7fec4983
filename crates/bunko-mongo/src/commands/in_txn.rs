//! CRUD commands inside a multi-document transaction (`autocommit: false`): reads see the
//! engine transaction's snapshot plus its own writes ([`Transaction::get`], `ids`), writes
//! are buffered in it ([`Transaction::put`]) and reach storage only at
//! `commitTransaction`, through the same write gate, `validate_doc_update` and triggers as
//! any write.
//!
//! A query by `_id` reads that one document; any other query reads every document of the
//! collection (then the commit fails if anything was committed to the collection meanwhile:
//! a phantom); a `hint` shapes that answer as its index would (`super::txn_hint`). A write
//! first checks that the document's committed revision is still the one the transaction
//! read, so a write that lost to another commit fails at once with `WriteConflict` (112,
//! `TransientTransactionError`) instead of at commit. A `find` answers in its first batch.

use std::collections::HashSet;
use std::sync::Arc;

use bson::{Bson, Document, doc};
use bunko_doc::{RevId, ejson};
use bunko_engine::{Database, Transaction};
use bunko_query::{Direction, FieldPath};
use serde_json::Value;

use super::admin::user;
use super::crud::{delete_limit, non_negative, prepare, prepare_for, reach, readable_db};
use super::update::{FindAndModify, matches, nothing_modified, statement_parts, upserted};
use super::{Ctx, bool_of, cursor_reply, doc_of, int_of, namespace};
use crate::error::MongoError;
use crate::names::Namespace;
use crate::projection::Projection;
use crate::query;

type Txn = crate::sessions::OpenTxn;

/// The first batch's size when the client names none (MongoDB's default).
const DEFAULT_BATCH: usize = 101;

/// Past every document id (ids are UTF-8 text).
const ID_END: &str = "\u{10FFFF}\u{10FFFF}\u{10FFFF}";

/// Runs command `name` in `txn`.
pub(super) fn run(
    ctx: &mut Ctx,
    txn: &mut Txn,
    name: &str,
    command: &Document,
) -> Result<Document, MongoError> {
    match name {
        "insert" => insert(ctx, txn, command),
        "find" => find(ctx, txn, command),
        "count" => count(ctx, txn, command),
        "distinct" => distinct(ctx, txn, command),
        "update" => update(ctx, txn, command),
        "delete" => delete(ctx, txn, command),
        "findAndModify" => find_and_modify(ctx, txn, command),
        "aggregate" => super::agg_txn::aggregate(ctx, &mut txn.txn, command),
        "create" => create(ctx, txn, command),
        "createIndexes" => create_indexes(ctx, txn, command),
        "bulkWrite" => {
            let mut op = |ctx: &mut Ctx, command: &Document| match command.keys().next() {
                Some(k) if k == "insert" => insert(ctx, txn, command),
                Some(k) if k == "update" => update(ctx, txn, command),
                _ => delete(ctx, txn, command),
            };
            super::bulk::run_bulk(ctx, command, &mut op, true)
        }
        // A cursor opened in the transaction holds its answer: its batches need no snapshot.
        "getMore" => super::cursor::get_more(ctx, command),
        "killCursors" => super::cursor::kill_cursors(ctx, command),
        _ => Err(MongoError::new(
            263,
            "OperationNotSupportedInTransaction",
            format!("Cannot run '{name}' in a multi-document transaction."),
        )),
    }
}

/// A document the transaction sees.
pub(super) struct Found {
    pub(super) id: String,
    pub doc: Document,
    rev: RevId,
}

/// [`matching`] as the index `hint` names gives the answer (`super::txn_hint`).
pub(super) fn matching_hinted(
    txn: &mut Transaction<'static>,
    db: &Database,
    filter: &Document,
    (order, hint): (&[(FieldPath, Direction)], Option<&str>),
    skip: usize,
    limit: usize,
) -> Result<Vec<Found>, MongoError> {
    let Some(hint) = hint else { return matching(txn, &db.name(), filter, order, skip, limit) };
    let found = matching(txn, &db.name(), filter, order, 0, usize::MAX)?;
    let found = super::txn_hint::apply(db, filter, hint, order, found)?;
    Ok(found.into_iter().skip(skip).take(limit).collect())
}

/// The documents of `db` matching `selector`, ordered, skipped and limited.
pub(super) fn matching(
    txn: &mut Transaction<'static>,
    db: &str,
    filter: &Document,
    order: &[(FieldPath, Direction)],
    skip: usize,
    limit: usize,
) -> Result<Vec<Found>, MongoError> {
    let selector = query::selector(filter)?;
    let ids = match id_of(filter) {
        Some(id) => vec![id],
        None => {
            let mut ids = txn.ids(db, "", ID_END)?;
            ids.retain(|id| !id.starts_with("_design/"));
            let known: HashSet<String> = ids.iter().cloned().collect();
            ids.extend(txn.written(db).into_iter().filter(|id| !known.contains(id)));
            ids
        }
    };
    let mut found = Vec::new();
    for id in ids {
        let Some(seen) = txn.get(db, &id)? else { continue };
        let mut doc = doc! {"_id": ejson::id_value(&id)};
        doc.extend(ejson::from_json(&seen.body));
        if matches(&selector, &doc) {
            found.push(Found { id, doc, rev: seen.rev });
        }
    }
    if !order.is_empty() {
        let view = |f: &Found| Value::Object(ejson::to_json(&f.doc));
        let mut keyed: Vec<(Value, Found)> = found.into_iter().map(|f| (view(&f), f)).collect();
        keyed.sort_by(|a, b| bunko_engine::find::mongo::compare(order, &a.0, &b.0));
        found = keyed.into_iter().map(|(_, f)| f).collect();
    }
    Ok(found.into_iter().skip(skip).take(limit).collect())
}

/// The document id an `{_id: value}` filter names (not a number: numbers of different
/// types are equal in MongoDB but are different ids).
fn id_of(filter: &Document) -> Option<String> {
    match filter.get("_id")? {
        Bson::Document(d) if d.keys().any(|k| k.starts_with('$')) => None,
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => None,
        Bson::RegularExpression(_) => None,
        value => Some(ejson::doc_id(value)),
    }
}

/// Fails with `WriteConflict` if another open transaction has written `id`, or if the
/// committed revision of `id` is no longer `seen` (a revision at position 0 stands for a
/// document this transaction created); else holds `id` for this transaction until it ends.
fn check_current(
    txn: &mut Txn,
    db: &Database,
    id: &str,
    seen: Option<&RevId>,
) -> Result<(), MongoError> {
    let conflict = || {
        MongoError::write_conflict(
            "Write conflict during plan execution and yielding is disabled. :: Please retry your operation or multi-document transaction.",
        )
    };
    if !txn.held.take(&db.name(), id) {
        return Err(conflict());
    }
    let current = db.current_rev(id)?;
    if current.as_ref() != seen.filter(|r| r.pos > 0) {
        return Err(conflict());
    }
    Ok(())
}

/// Buffers a new document; a duplicate `_id` is `DuplicateKey`.
fn insert_one(txn: &mut Txn, db: &Database, ns: &Namespace, item: &Bson) -> Result<(), MongoError> {
    let (parsed, id) = prepare_for(db, item, false)?;
    let key = parsed.id.clone().unwrap_or_default();
    if txn.get(&db.name(), &key)?.is_some() {
        return Err(MongoError::duplicate_key(&ns.full(), &id.to_string()));
    }
    check_current(txn, db, &key, None)?;
    txn.put(&db.name(), parsed)?;
    Ok(())
}

/// Buffers `after` as the new version of `found`.
fn replace(
    txn: &mut Txn,
    db: &Database,
    found: &Found,
    after: &Document,
) -> Result<(), MongoError> {
    check_current(txn, db, &found.id, Some(&found.rev))?;
    let (mut parsed, _) = prepare(&Bson::Document(after.clone()))?;
    parsed.id = Some(found.id.clone());
    parsed.rev = Some(found.rev.clone());
    txn.put(&db.name(), parsed)?;
    Ok(())
}

fn remove(txn: &mut Txn, db: &Database, found: &Found) -> Result<(), MongoError> {
    check_current(txn, db, &found.id, Some(&found.rev))?;
    txn.delete(&db.name(), &found.id, found.rev.clone())?;
    Ok(())
}

fn insert(ctx: &mut Ctx, txn: &mut Txn, command: &Document) -> Result<Document, MongoError> {
    let ns = namespace(ctx, command)?;
    let Some(Bson::Array(items)) = command.get("documents") else {
        return Err(MongoError::failed_to_parse(
            "BSON field 'insert.documents' is missing but a required field",
        ));
    };
    bool_of(command, "ordered", true)?;
    let db = create_with(ctx, txn, &ns)?;
    super::capped::refuse_in_txn(&db, &ns)?;
    for item in items {
        insert_one(txn, &db, &ns, item)?;
    }
    Ok(doc! {"n": items.len() as i32})
}

fn find(ctx: &mut Ctx, txn: &mut Txn, command: &Document) -> Result<Document, MongoError> {
    let started = std::time::Instant::now();
    non_negative(command, "maxTimeMS")?;
    if !doc_of(command, "min")?.is_empty() || !doc_of(command, "max")?.is_empty() {
        return Err(MongoError::not_implemented("min/max are not supported in a transaction"));
    }
    let ns = namespace(ctx, command)?;
    let filter = doc_of(command, "filter")?;
    let order = query::sort(&doc_of(command, "sort")?)?;
    let meta = (bool_of(command, "returnKey", false)?, bool_of(command, "showRecordId", false)?);
    let spec = doc_of(command, "projection")?;
    let mut projection = Projection::parse_find(&spec, &filter, &order, meta)?;
    let skip = non_negative(command, "skip")?.unwrap_or(0);
    let limit = non_negative(command, "limit")?.filter(|&l| l > 0).unwrap_or(usize::MAX);
    let batch = non_negative(command, "batchSize")?.unwrap_or(DEFAULT_BATCH);
    let single = bool_of(command, "singleBatch", false)?;
    if bool_of(command, "tailable", false)? {
        return Err(MongoError::not_implemented(
            "tailable cursors are not supported in a transaction",
        ));
    }
    let Some(db) = txn_db(ctx, txn, &ns, "find")? else {
        return Ok(cursor_reply(0, &ns.full(), "firstBatch", Vec::new()));
    };
    if let Some(p) = projection.as_mut().filter(|p| p.needs_keys()) {
        let selector = query::selector(&filter)?;
        p.keyed(super::crud::key_source(&db, command, &selector, &order)?);
    }
    let hint = super::indexes::hint(&db, command.get("hint"))?;
    let found = matching_hinted(txn, &db, &filter, (&order, hint.as_deref()), skip, limit)?;
    let shown = |d: Document| projection.as_ref().map_or(Ok(d.clone()), |p| p.apply(&d));
    let docs = found.into_iter().map(|f| shown(f.doc)).collect::<Result<_, _>>()?;
    super::crud::within_max_time(command, started)?;
    Ok(super::cursor::answer(ctx, &ns.full(), docs, batch, single))
}

fn count(ctx: &mut Ctx, txn: &mut Txn, command: &Document) -> Result<Document, MongoError> {
    let started = std::time::Instant::now();
    non_negative(command, "maxTimeMS")?;
    let ns = namespace(ctx, command)?;
    let filter = doc_of(command, "query")?;
    let skip = non_negative(command, "skip")?.unwrap_or(0);
    let limit = match int_of(command, "limit")? {
        Some(0) | None => usize::MAX,
        Some(n) => usize::try_from(n.unsigned_abs()).unwrap_or(usize::MAX),
    };
    let Some(db) = txn_db(ctx, txn, &ns, "count")? else { return Ok(doc! {"n": 0}) };
    let hint = super::indexes::hint(&db, command.get("hint"))?;
    let n = matching_hinted(txn, &db, &filter, (&[], hint.as_deref()), skip, limit)?.len();
    super::crud::within_max_time(command, started)?;
    Ok(doc! {"n": n as i32})
}

fn distinct(ctx: &mut Ctx, txn: &mut Txn, command: &Document) -> Result<Document, MongoError> {
    let started = std::time::Instant::now();
    non_negative(command, "maxTimeMS")?;
    let ns = namespace(ctx, command)?;
    let key = command.get_str("key").map_err(|_| {
        MongoError::failed_to_parse("BSON field 'distinct.key' is missing but a required field")
    })?;
    let filter = doc_of(command, "query")?;
    let Some(db) = txn_db(ctx, txn, &ns, "distinct")? else {
        return Ok(doc! {"values": []});
    };
    let path: Vec<&str> = key.split('.').collect();
    let mut values: Vec<(Value, Bson)> = Vec::new();
    for found in matching(txn, &db.name(), &filter, &[], 0, usize::MAX)? {
        let mut reached = Vec::new();
        reach(&Bson::Document(found.doc), &path, &mut reached);
        for value in reached {
            let view = ejson::value_to_json(&value);
            if !values.iter().any(|(v, _)| bunko_query::bson_order::compare(v, &view).is_eq()) {
                values.push((view, value));
            }
        }
    }
    super::crud::within_max_time(command, started)?;
    Ok(doc! {"values": values.into_iter().map(|(_, v)| v).collect::<Vec<_>>()})
}

fn update(ctx: &mut Ctx, txn: &mut Txn, command: &Document) -> Result<Document, MongoError> {
    let ns = namespace(ctx, command)?;
    let Some(Bson::Array(statements)) = command.get("updates") else {
        return Err(MongoError::failed_to_parse(
            "BSON field 'update.updates' is missing but a required field",
        ));
    };
    bool_of(command, "ordered", true)?;
    let (mut n, mut modified, mut upserts) = (0, 0, Vec::new());
    for (index, statement) in statements.iter().enumerate() {
        let Bson::Document(statement) = statement else {
            return Err(MongoError::type_mismatch("update statements must be objects"));
        };
        if statement.contains_key("collation") {
            return Err(MongoError::not_implemented(
                "option 'collation' of an update statement is not supported in a transaction",
            ));
        }
        let parts = statement_parts(statement)?;
        let (filter, update, multi, upsert) =
            (&parts.filter, &parts.update, parts.multi, parts.upsert);
        let db = match (upsert, txn_db(ctx, txn, &ns, "update")?) {
            (_, Some(db)) => db,
            (true, None) => create_with(ctx, txn, &ns)?,
            (false, None) => continue,
        };
        super::capped::refuse_in_txn(&db, &ns)?;
        let limit = if multi { usize::MAX } else { 1 };
        let order = query::sort(&doc_of(statement, "sort")?)?;
        let hint = super::indexes::hint(&db, statement.get("hint"))?;
        let found = matching_hinted(txn, &db, filter, (&order, hint.as_deref()), 0, limit)?;
        if found.is_empty() && upsert {
            let (id, doc) = parts.upserted(true)?;
            insert_one(txn, &db, &ns, &Bson::Document(doc))?;
            upserts.push(doc! {"index": index as i32, "_id": id});
            continue;
        }
        for found in found {
            let after = update.apply(&found.doc, false)?;
            n += 1;
            if after.to_vec().ok() != found.doc.to_vec().ok() {
                replace(txn, &db, &found, &after)?;
                modified += 1;
            }
        }
    }
    let mut reply = doc! {"n": (n + upserts.len()) as i32, "nModified": modified};
    if !upserts.is_empty() {
        reply.insert("upserted", upserts);
    }
    Ok(reply)
}

fn delete(ctx: &mut Ctx, txn: &mut Txn, command: &Document) -> Result<Document, MongoError> {
    let ns = namespace(ctx, command)?;
    let Some(Bson::Array(statements)) = command.get("deletes") else {
        return Err(MongoError::failed_to_parse(
            "BSON field 'delete.deletes' is missing but a required field",
        ));
    };
    bool_of(command, "ordered", true)?;
    let db = txn_db(ctx, txn, &ns, "delete")?;
    if let Some(db) = &db {
        super::capped::refuse_in_txn(db, &ns)?;
    }
    let mut deleted = 0;
    for statement in statements {
        let Bson::Document(statement) = statement else {
            return Err(MongoError::type_mismatch("delete statements must be objects"));
        };
        if let Some(key) = statement.keys().find(|k| !matches!(k.as_str(), "q" | "limit" | "hint"))
        {
            return Err(MongoError::not_implemented(format!(
                "option '{key}' of delete is not supported in a transaction"
            )));
        }
        let limit = delete_limit(statement)?;
        let Some(db) = &db else { continue };
        let hint = super::indexes::hint(db, statement.get("hint"))?;
        let filter = doc_of(statement, "q")?;
        for found in matching_hinted(txn, db, &filter, (&[], hint.as_deref()), 0, limit)? {
            remove(txn, db, &found)?;
            deleted += 1;
        }
    }
    Ok(doc! {"n": deleted})
}

fn find_and_modify(
    ctx: &mut Ctx,
    txn: &mut Txn,
    command: &Document,
) -> Result<Document, MongoError> {
    let spec = FindAndModify::parse(ctx, command)?;
    let db = match (spec.upsert, txn_db(ctx, txn, &spec.ns, "findAndModify")?) {
        (_, Some(db)) => db,
        (true, None) => create_with(ctx, txn, &spec.ns)?,
        (false, None) => return Ok(nothing_modified()),
    };
    super::capped::refuse_in_txn(&db, &spec.ns)?;
    let (ns, filter, return_new, upsert) = (&spec.ns, &spec.filter, spec.return_new, spec.upsert);
    let shown = |d: Document| spec.shown(d);
    let hint = super::indexes::hint(&db, spec.hint.as_ref())?;
    let hinted = (&spec.order[..], hint.as_deref());
    let found = matching_hinted(txn, &db, filter, hinted, 0, 1)?.into_iter().next();
    match (found, &spec.update) {
        (Some(found), None) => {
            remove(txn, &db, &found)?;
            Ok(doc! {"lastErrorObject": {"n": 1}, "value": shown(found.doc)?})
        }
        (None, None) => Ok(doc! {"lastErrorObject": {"n": 0}, "value": Bson::Null}),
        (Some(found), Some(update)) => {
            let after = update.apply(&found.doc, false)?;
            if after.to_vec().ok() != found.doc.to_vec().ok() {
                replace(txn, &db, &found, &after)?;
            }
            let value = shown(if return_new { after } else { found.doc })?;
            Ok(doc! {"lastErrorObject": {"n": 1, "updatedExisting": true}, "value": value})
        }
        (None, Some(update)) if upsert => {
            let (id, doc) = upserted(filter, update)?;
            insert_one(txn, &db, ns, &Bson::Document(doc.clone()))?;
            let value = if return_new { Bson::Document(shown(doc)?) } else { Bson::Null };
            Ok(
                doc! {"lastErrorObject": {"n": 1, "updatedExisting": false, "upserted": id}, "value": value},
            )
        }
        (None, Some(_)) => Ok(nothing_modified()),
    }
}

/// The collection `ns` as the transaction sees it: an existing one the user may read, or
/// one the transaction creates.
fn txn_db(
    ctx: &Ctx,
    txn: &Txn,
    ns: &Namespace,
    command: &str,
) -> Result<Option<Arc<Database>>, MongoError> {
    match readable_db(ctx, ns, command)? {
        Some(db) => Ok(Some(db)),
        None => Ok(txn.created_db(&ns.engine_name())),
    }
}

/// The collection `ns`, created with the transaction when missing (as MongoDB 4.4+ does
/// for an insert, an upsert or `createIndexes` in a transaction): it appears with the
/// commit, with the `_security` a collection created outside a transaction gets, and not
/// at all on an abort.
fn create_with(ctx: &Ctx, txn: &mut Txn, ns: &Namespace) -> Result<Arc<Database>, MongoError> {
    if let Some(db) = ctx.server.engine.get_db(&ns.engine_name()) {
        return Ok(db);
    }
    if let Some(db) = txn.created_db(&ns.engine_name()) {
        return Ok(db);
    }
    let db = txn.create_db(&ns.engine_name())?;
    super::roles::grant(&db, &user(ctx))?;
    Ok(db)
}

/// `create` in a transaction (MongoDB 4.4+): the collection is created when the transaction
/// commits; an existing one is `NamespaceExists` (48).
fn create(ctx: &mut Ctx, txn: &mut Txn, command: &Document) -> Result<Document, MongoError> {
    let ns = namespace(ctx, command)?;
    if let Some(option) = command.keys().skip(1).find(|k| !SESSION_ARGS.contains(&k.as_str())) {
        return Err(MongoError::not_implemented(format!(
            "option '{option}' of create is not supported in a transaction"
        )));
    }
    let name = ns.engine_name();
    if ctx.server.engine.get_db(&name).is_some() || txn.created_db(&name).is_some() {
        return Err(MongoError::new(
            48,
            "NamespaceExists",
            format!("Collection {} already exists.", ns.full()),
        ));
    }
    create_with(ctx, txn, &ns)?;
    Ok(Document::new())
}

/// `createIndexes` in a transaction (MongoDB 4.4+): only on a collection that does not
/// exist yet (it is then created with the transaction) or that the transaction creates;
/// the indexes are built when it commits.
fn create_indexes(
    ctx: &mut Ctx,
    txn: &mut Txn,
    command: &Document,
) -> Result<Document, MongoError> {
    let ns = namespace(ctx, command)?;
    let Some(Bson::Array(indexes)) = command.get("indexes") else {
        return Err(MongoError::failed_to_parse(
            "BSON field 'createIndexes.indexes' is missing but a required field",
        ));
    };
    let created_here = txn.created_db(&ns.engine_name()).is_some();
    if ctx.server.engine.get_db(&ns.engine_name()).is_some() && !created_here {
        return Err(MongoError::new(
            263,
            "OperationNotSupportedInTransaction",
            format!(
                "Cannot create new indexes on existing collection {} in a multi-document transaction.",
                ns.full()
            ),
        ));
    }
    create_with(ctx, txn, &ns)?;
    let count = indexes.len() as i32;
    txn.ddl.push((ns.db.clone(), doc! {"createIndexes": &ns.coll, "indexes": indexes.clone()}));
    Ok(doc! {
        "createdCollectionAutomatically": !created_here,
        "numIndexesBefore": 1,
        "numIndexesAfter": 1 + count,
    })
}

/// Fields of a command that belong to its session, not to it.
const SESSION_ARGS: &[&str] = &[
    "$db",
    "lsid",
    "$clusterTime",
    "$readPreference",
    "comment",
    "txnNumber",
    "startTransaction",
    "autocommit",
    "readConcern",
    "apiVersion",
    "apiStrict",
    "apiDeprecationErrors",
];

/// Runs the `createIndexes` commands of a committed transaction, in order (their
/// collections were created by the commit).
pub(super) fn run_ddl(ctx: &mut Ctx, ddl: &[(String, Document)]) -> Result<(), MongoError> {
    for (db, command) in ddl {
        let (server, session) = (ctx.server, &mut *ctx.session);
        let mut sub = Ctx { server, session, db: db.clone(), bypass_document_validation: false };
        super::indexes::create_indexes(&mut sub, command)?;
    }
    Ok(())
}
