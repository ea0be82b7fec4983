//! Writes to a time-series collection ([`super::timeseries`] describes the layout): `insert`
//! checks each measurement's time field (a BSON date, MongoDB's `BadValue` otherwise), gives
//! it an `_id` when it has none and stores it under a new internal key, so `_id`s may
//! repeat; `delete` and `update` (as MongoDB 8 allows them: any filter, `multi` or not,
//! upserts,
//! `sort`, `arrayFilters`, `c` and `upsertSupplied`, parsed as on any collection by
//! [`super::update::statement_parts`]) test each stored measurement against the filter and
//! write the ones that match (a single update the first in `sort`'s order),
//! each read again with its revision and tested again just before its write, so a
//! concurrent write is never overwritten (an update retries on a conflict, as MongoDB does);
//! the part of their filter an index can serve is read from one (`hint` too). An update
//! may change any field, `_id` included (a measurement's `_id` is not a key), but must
//! leave a date in the time field. `findAndModify` is [`super::timeseries_modify`], index
//! commands [`super::timeseries_index`], `collMod` [`super::timeseries_coll_mod`]. What is
//! not built is refused with MongoDB's codes.

use std::sync::Arc;

use bson::oid::ObjectId;
use bson::{Bson, Document, doc};
use bunko_doc::body::ParsedDoc;
use bunko_doc::ejson;
use bunko_engine::{Database, Error, WriteOptions};
use bunko_query::update::Update;
use bunko_query::{Direction, FieldPath};

use super::admin::{readable, user};
use super::crud::{clone_error, mongo_query, prepare, run_hinted, write_error};
use super::{Ctx, bool_of, coll_options, doc_of};
use crate::error::MongoError;
use crate::names::Namespace;
use crate::query;

/// Runs the write or index command `name` on the time-series collection `ns`.
pub(super) fn write(
    ctx: &mut Ctx,
    name: &str,
    command: &Document,
    ns: &Namespace,
) -> Result<Document, MongoError> {
    let Some(db) = ctx.server.engine.get_db(&ns.engine_name()) else {
        return Err(MongoError::namespace_not_found(format!("ns does not exist: {}", ns.full())));
    };
    if !readable(&db, &user(ctx)) {
        return Err(MongoError::unauthorized(format!(
            "not authorized on {} to execute command {{ {name}: \"{}\" }}",
            ns.db, ns.coll
        )));
    }
    match name {
        "insert" => insert(ctx, &db, command),
        "delete" => delete(ctx, &db, command),
        "update" => update(ctx, &db, command),
        "findAndModify" => super::timeseries_modify::find_and_modify(ctx, &db, command),
        "collMod" => super::timeseries_coll_mod::coll_mod(ctx, &db, command),
        "listIndexes" => super::timeseries_index::list(&db, ns),
        "createIndexes" => super::timeseries_index::create(ctx, &db, command),
        "dropIndexes" => super::timeseries_index::drop(ctx, &db, command),
        _ => Err(MongoError::not_implemented(format!(
            "{name} on a time-series collection is not supported yet"
        ))),
    }
}

/// The collection's time field.
pub(super) fn time_field(db: &Database) -> String {
    let options = coll_options::read(db);
    let field = options.get_document("timeseries").ok().and_then(|t| t.get_str("timeField").ok());
    field.unwrap_or_default().to_string()
}

/// MongoDB's refusal of a measurement without a date in its time field.
pub(super) fn check_time(measurement: &Document, field: &str) -> Result<(), MongoError> {
    match measurement.get(field) {
        Some(Bson::DateTime(_)) => Ok(()),
        _ => Err(MongoError::bad_value(format!(
            "'{field}' must be present and contain a valid BSON UTC datetime value"
        ))),
    }
}

/// A measurement stored under `key` (a new one when `None`), with its revision.
pub(super) fn stored(
    key: Option<(String, bunko_doc::RevId)>,
    measurement: Document,
) -> Result<ParsedDoc, MongoError> {
    let internal = Bson::ObjectId(ObjectId::new());
    let (mut parsed, _) = prepare(&Bson::Document(doc! {"_id": internal, "m": measurement}))?;
    if let Some((id, rev)) = key {
        parsed.id = Some(id);
        parsed.rev = Some(rev);
    }
    Ok(parsed)
}

fn insert(ctx: &mut Ctx, db: &Arc<Database>, command: &Document) -> Result<Document, MongoError> {
    let documents = match (ctx.session.documents.take(), command.get("documents")) {
        (Some(raw), _) => raw.iter().map(crate::wire::decoded).collect::<Result<Vec<_>, _>>()?,
        (None, Some(Bson::Array(items))) => {
            let doc = |item: &Bson| match item {
                Bson::Document(d) => Ok(d.clone()),
                _ => Err(MongoError::type_mismatch("documents to insert must be objects")),
            };
            items.iter().map(doc).collect::<Result<Vec<_>, _>>()?
        }
        _ => {
            return Err(MongoError::failed_to_parse(
                "BSON field 'insert.documents' is missing but a required field",
            ));
        }
    };
    let ordered = bool_of(command, "ordered", true)?;
    let field = time_field(db);
    let mut errors = Vec::new();
    let mut docs = Vec::new();
    for (index, mut measurement) in documents.into_iter().enumerate() {
        let checked = check_time(&measurement, &field).and_then(|()| {
            if !measurement.contains_key("_id") {
                let mut with_id = doc! {"_id": ObjectId::new()};
                with_id.extend(std::mem::take(&mut measurement));
                measurement = with_id;
            }
            stored(None, measurement)
        });
        match checked {
            Ok(parsed) => docs.push(parsed),
            Err(err) => {
                errors.push(write_error(index, &err));
                if ordered {
                    break;
                }
            }
        }
    }
    let opts = WriteOptions { all_or_nothing: ordered, ..ctx.write_options() };
    let results = ctx.session.unsynced.write(db, &user(ctx), docs, opts)?;
    if let Some(Err(err)) = results.iter().map(|r| &r.result).find(|r| r.is_err()) {
        return Err(MongoError::from(clone_error(err)));
    }
    let mut reply = doc! {"n": results.len() as i32};
    if !errors.is_empty() {
        reply.insert("writeErrors", errors);
    }
    Ok(reply)
}

/// The stored measurements matching `filter`, at most `limit`, in `order` (a sort of the
/// stored documents, [`stored_order`]): (internal key, measurement). The part of the filter
/// an index can serve is read over the stored form ([`super::timeseries_query`]), with
/// `hint`; each is tested in full.
pub(super) fn matching(
    ctx: &Ctx,
    db: &Database,
    (filter, hint): (&Document, Option<&Bson>),
    order: &[(FieldPath, Direction)],
    limit: usize,
) -> Result<Vec<(String, Document)>, MongoError> {
    let selector = query::selector(filter)?;
    let stored = query::selector(&super::timeseries_query::implied(filter))?;
    let hint = hint.map(super::timeseries_query::hint);
    let hint = super::indexes::hint(db, hint.as_ref())?;
    let stored = run_hinted(&user(ctx), db, mongo_query(stored, 0, usize::MAX), order, hint)?;
    let mut out = Vec::new();
    for doc in stored {
        let Ok(measurement) = doc.get_document("m") else { continue };
        if query::matches(&selector, measurement) {
            let key = ejson::doc_id(doc.get("_id").unwrap_or(&Bson::Null));
            out.push((key, measurement.clone()));
            if out.len() == limit {
                break;
            }
        }
    }
    Ok(out)
}

/// A write's `sort` (on the measurements' fields) as a sort of the stored documents.
pub(super) fn stored_order(sort: &Document) -> Result<Vec<(FieldPath, Direction)>, MongoError> {
    match super::timeseries_query::sort(sort) {
        Some(stored) => query::sort(&stored),
        None => query::sort(sort).and(Err(MongoError::not_implemented(
            "a sort by other than field paths on a time-series collection is not supported yet",
        ))),
    }
}

/// What one write statement did: matched (or deleted), modified, and the `_id` it upserted.
type Done = (usize, usize, Option<Bson>);

/// Runs each statement of `list` with `run`: MongoDB's reply counts (an upsert counts in
/// `n`), `upserted` (`{index, _id}`) and `writeErrors`.
fn statements(
    command: &Document,
    list: &str,
    mut run: impl FnMut(&Document) -> Result<Done, MongoError>,
) -> Result<(usize, usize, Vec<Document>, Vec<Document>), MongoError> {
    let Some(Bson::Array(items)) = command.get(list) else {
        return Err(MongoError::failed_to_parse(format!(
            "BSON field '{}.{list}' is missing but a required field",
            command.keys().next().map_or("", String::as_str)
        )));
    };
    let ordered = bool_of(command, "ordered", true)?;
    let (mut n, mut changed, mut errors, mut upserted) = (0, 0, Vec::new(), Vec::new());
    for (index, item) in items.iter().enumerate() {
        let outcome = match item {
            Bson::Document(statement) => query::collation_of(statement)
                .and_then(|c| bunko_query::collation::with(c, || run(statement))),
            _ => Err(MongoError::type_mismatch(format!("{list} statements must be objects"))),
        };
        match outcome {
            Ok((matched, modified, upsert)) => {
                n += matched;
                changed += modified;
                if let Some(id) = upsert {
                    n += 1;
                    upserted.push(doc! {"index": index as i32, "_id": id});
                }
            }
            Err(err) => {
                errors.push(write_error(index, &err));
                if ordered {
                    break;
                }
            }
        }
    }
    Ok((n, changed, errors, upserted))
}

fn with_errors(mut reply: Document, errors: Vec<Document>) -> Document {
    if !errors.is_empty() {
        reply.insert("writeErrors", errors);
    }
    reply
}

fn delete(ctx: &mut Ctx, db: &Arc<Database>, command: &Document) -> Result<Document, MongoError> {
    let (n, _, errors, _) = statements(command, "deletes", |statement| {
        if let Some(key) =
            statement.keys().find(|k| !["q", "limit", "collation", "hint"].contains(&k.as_str()))
        {
            return Err(refused_option("delete.deletes", key));
        }
        let limit = super::crud::delete_limit(statement)?;
        let filter = doc_of(statement, "q")?;
        let selector = query::selector(&filter)?;
        let hint = statement.get("hint");
        let found = matching(ctx, db, (&filter, hint), &[], limit)?;
        let mut tombstones = Vec::with_capacity(found.len());
        for (id, _) in found {
            // Deleted only if it still matches as it is now, at the revision it has now.
            let Some((rev, now)) = current(ctx, db, &id)? else { continue };
            if !query::matches(&selector, &now) {
                continue;
            }
            tombstones.push(ParsedDoc {
                id: Some(id),
                rev: Some(rev),
                deleted: true,
                ..Default::default()
            });
        }
        let results =
            ctx.session.unsynced.write(db, &user(ctx), tombstones, WriteOptions::default())?;
        let deleted = results.iter().filter(|r| r.result.is_ok()).count();
        Ok((deleted, 0, None))
    })?;
    Ok(with_errors(doc! {"n": n as i32}, errors))
}

fn refused_option(at: &str, key: &str) -> MongoError {
    MongoError::unknown_field(&format!("{at}.{key}"))
}

fn update(ctx: &mut Ctx, db: &Arc<Database>, command: &Document) -> Result<Document, MongoError> {
    let field = time_field(db);
    let (n, modified, errors, upserted) = statements(command, "updates", |statement| {
        let parts = super::update::statement_parts(statement)?;
        let selector = query::selector(&parts.filter)?;
        let limit = if parts.multi { usize::MAX } else { 1 };
        // MongoDB 8's `sort` picks which measurement a single update changes.
        let order = stored_order(&doc_of(statement, "sort")?)?;
        let found = matching(ctx, db, (&parts.filter, statement.get("hint")), &order, limit)?;
        let (mut matched, mut changed) = (0, 0);
        for (id, _) in found {
            let change = Change { selector: &selector, update: &parts.update, time_field: &field };
            match modify(ctx, db, &id, &change)? {
                Modified::NoLongerMatches => {}
                Modified::Unchanged(_) => matched += 1,
                Modified::Changed(..) => (matched, changed) = (matched + 1, changed + 1),
            }
        }
        if matched == 0 && parts.upsert {
            let (id, _) = insert_upsert(ctx, db, parts.upserted(false)?, &field)?;
            return Ok((0, 0, Some(id)));
        }
        Ok((matched, changed, None))
    })?;
    let mut reply = doc! {"n": n as i32, "nModified": modified as i32};
    if !upserted.is_empty() {
        reply.insert("upserted", upserted);
    }
    Ok(with_errors(reply, errors))
}

/// Inserts the measurement an upsert makes (its `_id` and itself, as any collection's
/// upsert makes it: `super::update::upserted`), which must hold a date in the time field.
pub(super) fn insert_upsert(
    ctx: &Ctx,
    db: &Arc<Database>,
    (id, measurement): (Bson, Document),
    time_field: &str,
) -> Result<(Bson, Document), MongoError> {
    check_time(&measurement, time_field)?;
    let parsed = stored(None, measurement.clone())?;
    ctx.session.unsynced.put(db, &user(ctx), parsed, ctx.write_options())?;
    Ok((id, measurement))
}

/// How many times an update of one measurement is tried when another write changed it
/// between its read and its write.
const ATTEMPTS: usize = 8;

/// One update statement applied to measurements.
pub(super) struct Change<'a> {
    pub(super) selector: &'a bunko_query::Selector,
    pub(super) update: &'a Update,
    pub(super) time_field: &'a str,
}

/// What [`modify`] did to one measurement: the measurement before (and after) the update.
pub(super) enum Modified {
    NoLongerMatches,
    Unchanged(Document),
    Changed(Document, Document),
}

/// Applies `change` to the measurement stored under `id` as it is now: it is read with its
/// revision from one snapshot, checked against the filter again and written at that
/// revision, so a write that changed it since the scan is never overwritten; a conflict
/// (a write between this read and this write) reads it again. After [`ATTEMPTS`]
/// conflicts: MongoDB's `WriteConflict`.
pub(super) fn modify(
    ctx: &Ctx,
    db: &Arc<Database>,
    id: &str,
    change: &Change,
) -> Result<Modified, MongoError> {
    for _ in 0..ATTEMPTS {
        let Some((rev, before)) = current(ctx, db, id)? else {
            return Ok(Modified::NoLongerMatches);
        };
        if !query::matches(change.selector, &before) {
            return Ok(Modified::NoLongerMatches);
        }
        let after = updated(change.update, &before)?;
        if after.to_vec().ok() == before.to_vec().ok() {
            return Ok(Modified::Unchanged(before));
        }
        check_time(&after, change.time_field)?;
        let parsed = stored(Some((id.to_string(), rev)), after.clone())?;
        let opts = WriteOptions { replacement: true, ..ctx.write_options() };
        match ctx.session.unsynced.put(db, &user(ctx), parsed, opts) {
            Ok(_) => return Ok(Modified::Changed(before, after)),
            Err(Error::Conflict) => continue,
            Err(err) => return Err(err.into()),
        }
    }
    Err(MongoError::write_conflict_retries_exhausted())
}

/// `measurement` updated. A measurement's `_id` is not a key, so MongoDB lets an update
/// change it: the update runs without it, and it is put back where it was unless the
/// update set one.
fn updated(update: &Update, measurement: &Document) -> Result<Document, MongoError> {
    let mut without = measurement.clone();
    let Some(id) = without.remove("_id") else { return Ok(update.apply(measurement, false)?) };
    let after = update.apply(&without, false)?;
    if after.contains_key("_id") {
        return Ok(after);
    }
    let at = measurement.keys().position(|k| k == "_id").unwrap_or(0);
    let mut out = Document::new();
    for (i, (key, value)) in after.into_iter().enumerate() {
        if i == at {
            out.insert("_id", id.clone());
        }
        out.insert(key, value);
    }
    if !out.contains_key("_id") {
        out.insert("_id", id);
    }
    Ok(out)
}

/// The measurement stored under `id` now, with its revision (one snapshot); `None` once
/// it is gone.
pub(super) fn current(
    ctx: &Ctx,
    db: &Database,
    id: &str,
) -> Result<Option<(bunko_doc::RevId, Document)>, MongoError> {
    let out = match db.get(&user(ctx), id, None) {
        Ok(out) if !out.deleted => out,
        Ok(_) | Err(Error::NotFound(_)) => return Ok(None),
        Err(err) => return Err(err.into()),
    };
    let body: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(&out.body)
        .map_err(|err| MongoError::internal(format!("a stored measurement: {err}")))?;
    Ok(ejson::from_json(&body).get_document("m").ok().map(|m| (out.rev, m.clone())))
}
