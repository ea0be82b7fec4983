//! `bulkWrite`, MongoDB 8.0's server command for writes across collections (what
//! `MongoClient.bulk_write` sends to a server with `maxWireVersion` 25): `ops` (each an
//! `insert`, `update` or `delete` naming an entry of `nsInfo`), `ordered`, `errorsOnly`,
//! answered with a cursor of per-operation results and the counts `nInserted`, `nMatched`,
//! `nModified`, `nUpserted`, `nDeleted` and `nErrors`.
//!
//! Each operation runs as the `insert`, `update` or `delete` command it stands for (a run
//! of inserts into one collection as one `insert`, so one commit), with the connection's
//! user on the operation's database: the same write path, write gate and error table. An
//! operation that fails is an error entry `{ok: 0, idx, code, codeName, errmsg}` of the
//! cursor; an ordered bulk write stops there, an unordered one goes on. Inside a
//! transaction the operations run as the transaction's `insert`/`update`/`delete`
//! (`in_txn`), and an operation's error fails the command and aborts the transaction.

use bson::{Bson, Document, doc};

use super::{Ctx, bool_of, crud, update};
use crate::error::MongoError;
use crate::names::Namespace;

/// What each kind of operation may carry.
const INSERT: &[&str] = &["insert", "document"];
const UPDATE: &[&str] = &[
    "update",
    "filter",
    "updateMods",
    "arrayFilters",
    "multi",
    "upsert",
    "hint",
    "collation",
    "sort",
    "constants",
    "upsertSupplied",
];
const DELETE: &[&str] = &["delete", "filter", "multi", "hint", "collation"];

/// The counts of the reply.
#[derive(Default)]
struct Counts {
    inserted: i64,
    matched: i64,
    modified: i64,
    upserted: i64,
    deleted: i64,
    errors: i64,
}

/// Runs one `insert`, `update` or `delete` command an operation stands for.
pub(super) type Runner<'r> = dyn FnMut(&mut Ctx, &Document) -> Result<Document, MongoError> + 'r;

pub(super) fn bulk_write(ctx: &mut Ctx, command: &Document) -> Result<Document, MongoError> {
    let mut plain = |ctx: &mut Ctx, command: &Document| {
        let name = command.keys().next().map_or("delete", String::as_str);
        // A view refuses the operation (`CommandNotSupportedOnView`); a time-series
        // collection runs it.
        if let Some(reply) = super::views::run(ctx, name, command)? {
            return Ok(reply);
        }
        match name {
            "insert" => crud::insert(ctx, command),
            "update" => update::update(ctx, command),
            _ => crud::delete(ctx, command),
        }
    };
    run_bulk(ctx, command, &mut plain, false)
}

/// `bulkWrite` with its operations run by `run`; `in_txn`: an operation's error fails the
/// whole command (and so aborts the transaction, as in MongoDB) rather than being an entry.
pub(super) fn run_bulk(
    ctx: &mut Ctx,
    command: &Document,
    run: &mut Runner,
    in_txn: bool,
) -> Result<Document, MongoError> {
    if ctx.db != "admin" {
        return Err(MongoError::unauthorized(
            "bulkWrite may only be run against the admin database.",
        ));
    }
    let namespaces = ns_info(command)?;
    let ops = array(command, "ops")?;
    let ordered = bool_of(command, "ordered", true)?;
    let errors_only = bool_of(command, "errorsOnly", false)?;
    let ops = ops.iter().map(|op| parse_op(op, namespaces.len())).collect::<Result<Vec<_>, _>>()?;
    let mut counts = Counts::default();
    let mut items = Vec::new();
    let mut idx = 0;
    while idx < ops.len() {
        let run_op = &mut *run;
        let run = insert_run(&ops, idx);
        let span = &ops[idx..idx + run.max(1)];
        let results = run_ops(ctx, span, &namespaces, ordered, run_op, in_txn)?;
        let stop = ordered && results.iter().any(|r| r.get("ok") == Some(&Bson::Double(0.0)));
        for (offset, mut item) in results.into_iter().enumerate() {
            item.insert("idx", (idx + offset) as i32);
            count(&mut counts, &ops[idx + offset], &item);
            let failed = item.get("ok") == Some(&Bson::Double(0.0));
            if failed || !errors_only {
                items.push(reorder(item));
            }
        }
        idx += run.max(1);
        if stop {
            break;
        }
    }
    Ok(doc! {
        "cursor": {"id": 0_i64, "firstBatch": items, "ns": "admin.$cmd.bulkWrite"},
        "nErrors": counts.errors, "nInserted": counts.inserted, "nDeleted": counts.deleted,
        "nMatched": counts.matched, "nModified": counts.modified, "nUpserted": counts.upserted,
    })
}

/// One operation: its kind, its namespace's index and the operation document.
struct Op<'a> {
    kind: &'static str,
    ns: usize,
    doc: &'a Document,
}

fn parse_op(op: &Bson, namespaces: usize) -> Result<Op<'_>, MongoError> {
    let Bson::Document(doc) = op else {
        return Err(MongoError::type_mismatch("BSON field 'bulkWrite.ops' must hold objects"));
    };
    let Some((first, value)) = doc.iter().next() else {
        return Err(MongoError::failed_to_parse("Unrecognized bulkWrite operation: {}"));
    };
    let (kind, fields) = match first.as_str() {
        "insert" => ("insert", INSERT),
        "update" => ("update", UPDATE),
        "delete" => ("delete", DELETE),
        other => {
            return Err(MongoError::failed_to_parse(format!(
                "Unrecognized bulkWrite operation: {other}"
            )));
        }
    };
    for key in doc.keys().map(String::as_str) {
        if !fields.contains(&key) {
            return Err(MongoError::new(
                40415,
                "Location40415",
                format!("BSON field 'bulkWrite.ops.{kind}.{key}' is an unknown field."),
            ));
        }
    }
    let ns = match value {
        Bson::Int32(n) => usize::try_from(*n).ok(),
        Bson::Int64(n) => usize::try_from(*n).ok(),
        _ => None,
    };
    match ns {
        Some(ns) if ns < namespaces => Ok(Op { kind, ns, doc }),
        _ => Err(MongoError::bad_value(format!(
            "BulkWrite {kind} has an invalid nsInfo index: {value}"
        ))),
    }
}

/// How many operations from `start` are inserts into the same collection (0: not an insert).
fn insert_run(ops: &[Op], start: usize) -> usize {
    let Some(first) = ops.get(start).filter(|op| op.kind == "insert") else { return 0 };
    ops[start..].iter().take_while(|op| op.kind == "insert" && op.ns == first.ns).count()
}

/// Runs `ops` (one update or delete, or a run of inserts into one collection) as the
/// command it stands for; one result entry per operation run (without `idx`).
fn run_ops(
    ctx: &mut Ctx,
    ops: &[Op],
    namespaces: &[Namespace],
    ordered: bool,
    run: &mut Runner,
    in_txn: bool,
) -> Result<Vec<Document>, MongoError> {
    let Some(first) = ops.first() else { return Ok(Vec::new()) };
    let ns = &namespaces[first.ns];
    let bypass_document_validation = ctx.bypass_document_validation;
    let (server, session, db) = (ctx.server, &mut *ctx.session, ns.db.clone());
    let mut sub = Ctx { server, session, db, bypass_document_validation };
    let get = |field: &str| first.doc.get(field).cloned().unwrap_or(Bson::Null);
    let command = match first.kind {
        "insert" => {
            let docs: Vec<Bson> = ops
                .iter()
                .map(|op| op.doc.get("document").cloned().unwrap_or(Bson::Null))
                .collect();
            doc! {"insert": &ns.coll, "documents": docs, "ordered": ordered}
        }
        "update" => {
            let mut statement = doc! {"q": get("filter"), "u": get("updateMods")};
            let fields = ["arrayFilters", "multi", "upsert", "hint", "collation", "sort"];
            for field in fields.into_iter().chain(["upsertSupplied"]) {
                if let Some(v) = first.doc.get(field) {
                    statement.insert(field, v.clone());
                }
            }
            if let Some(constants) = first.doc.get("constants") {
                statement.insert("c", constants.clone());
            }
            doc! {"update": &ns.coll, "updates": [statement]}
        }
        _ => {
            let limit = i32::from(!bool_of(first.doc, "multi", false)?);
            let mut statement = doc! {"q": get("filter"), "limit": limit};
            for field in ["hint", "collation"] {
                if let Some(v) = first.doc.get(field) {
                    statement.insert(field, v.clone());
                }
            }
            doc! {"delete": &ns.coll, "deletes": [statement]}
        }
    };
    let reply = match run(&mut sub, &command) {
        Ok(reply) => reply,
        Err(err) if !in_txn => return Ok(vec![error_item(&err)]),
        Err(err) => return Err(err),
    };
    Ok(split(&reply, ops.len(), ordered))
}

/// The per-operation entries of an `insert`, `update` or `delete` reply over `len`
/// operations: each failed one an error, each one after an ordered failure left out.
fn split(reply: &Document, len: usize, ordered: bool) -> Vec<Document> {
    let errors: Vec<&Document> = match reply.get("writeErrors") {
        Some(Bson::Array(e)) => e.iter().filter_map(Bson::as_document).collect(),
        _ => Vec::new(),
    };
    let error_at = |i: usize| errors.iter().find(|e| e.get_i32("index").ok() == Some(i as i32));
    let mut out = Vec::new();
    for i in 0..len {
        if let Some(error) = error_at(i) {
            let mut item = (*error).clone();
            item.remove("index");
            item.insert("ok", 0.0);
            item.insert("n", 0);
            out.push(item);
            if ordered {
                break;
            }
            continue;
        }
        let upserted = match reply.get("upserted") {
            Some(Bson::Array(u)) => {
                u.first().and_then(Bson::as_document).and_then(|u| u.get("_id"))
            }
            _ => None,
        };
        // An entry's `n` counts the documents matched or upserted, as MongoDB's does (the
        // reply's `nMatched` leaves upserts out).
        let n = if len == 1 { reply.get_i32("n").unwrap_or(0) } else { 1 };
        let mut item = doc! {"ok": 1.0, "n": n};
        if let Ok(modified) = reply.get_i32("nModified") {
            item.insert("nModified", modified);
        }
        if let Some(id) = upserted {
            item.insert("upserted", doc! {"_id": id.clone()});
        }
        out.push(item);
    }
    out
}

fn error_item(err: &MongoError) -> Document {
    let mut item = doc! {"ok": 0.0, "code": err.code, "codeName": err.code_name, "errmsg": &err.errmsg, "n": 0};
    item.extend(err.extra.as_deref().cloned().unwrap_or_default());
    item
}

/// `ok` and `idx` first, as MongoDB writes a reply entry.
fn reorder(item: Document) -> Document {
    let mut out = doc! {"ok": item.get("ok").cloned().unwrap_or(Bson::Double(1.0)), "idx": item.get("idx").cloned().unwrap_or(Bson::Int32(0))};
    out.extend(item.into_iter().filter(|(k, _)| k != "ok" && k != "idx"));
    out
}

fn count(counts: &mut Counts, op: &Op, item: &Document) {
    if item.get("ok") == Some(&Bson::Double(0.0)) {
        counts.errors += 1;
        return;
    }
    let n = i64::from(item.get_i32("n").unwrap_or(0));
    match op.kind {
        "insert" => counts.inserted += n,
        "delete" => counts.deleted += n,
        _ if item.contains_key("upserted") => counts.upserted += 1,
        _ => {
            counts.matched += n;
            counts.modified += i64::from(item.get_i32("nModified").unwrap_or(0));
        }
    }
}

fn array<'a>(command: &'a Document, field: &str) -> Result<&'a Vec<Bson>, MongoError> {
    match command.get(field) {
        Some(Bson::Array(items)) => Ok(items),
        None => Err(MongoError::new(
            40414,
            "Location40414",
            format!("BSON field 'bulkWrite.{field}' is missing but a required field"),
        )),
        Some(_) => Err(MongoError::type_mismatch(format!(
            "BSON field 'bulkWrite.{field}' is the wrong type, expected type 'array'"
        ))),
    }
}

/// `nsInfo`: the namespaces the operations name, each `{ns: "db.coll"}`.
fn ns_info(command: &Document) -> Result<Vec<Namespace>, MongoError> {
    let mut out = Vec::new();
    for entry in array(command, "nsInfo")? {
        let Bson::Document(entry) = entry else {
            return Err(MongoError::type_mismatch(
                "BSON field 'bulkWrite.nsInfo' must hold objects",
            ));
        };
        if let Some(key) = entry.keys().find(|k| *k != "ns") {
            return Err(MongoError::not_implemented(format!(
                "field '{key}' of bulkWrite.nsInfo is not supported yet"
            )));
        }
        let text = entry.get_str("ns").map_err(|_| {
            MongoError::type_mismatch("BSON field 'bulkWrite.nsInfo.ns' must be a string")
        })?;
        let (db, coll) = text.split_once('.').ok_or_else(|| {
            MongoError::invalid_namespace(format!("Invalid namespace specified '{text}'"))
        })?;
        crate::names::check_db(db)?;
        out.push(Namespace::new(db, coll)?);
    }
    Ok(out)
}
