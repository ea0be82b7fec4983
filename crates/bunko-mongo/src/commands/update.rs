//! `update` and `findAndModify`: the update document is parsed and applied by
//! `bunko_query::update` (pure functions on BSON); each changed document is written with
//! `Database::write_docs` (its sync awaited by `conn`, [`crate::acks`]) naming the revision it was read at, so a concurrent change is a conflict,
//! and the document is read, re-checked against the filter and updated again (up to
//! [`RETRIES`] times). An upsert inserts the filter's equality fields plus the update.

use std::sync::Arc;

use bson::oid::ObjectId;
use bson::{Bson, Document, doc};
use bunko_doc::body::ParsedDoc;
use bunko_doc::ejson;
use bunko_engine::{Database, Error, WriteOptions};
use bunko_query::update::{Compile, Filter, Options, Update, UpdateError};
use bunko_query::{Direction, FieldPath, Selector};
use serde_json::Value;

use super::admin::{open_or_create, user};
use super::crud::{
    clone_error, mongo_query, prepare, prepare_for, readable_db, run_hinted, write_error,
};
use super::{Ctx, bool_of, doc_of, namespace};
use crate::error::MongoError;
use crate::names::Namespace;
use crate::projection::Projection;
use crate::query;

/// How often a write that lost a race is retried.
const RETRIES: usize = 5;

pub(super) fn update(ctx: &mut Ctx, command: &Document) -> Result<Document, MongoError> {
    let ns = namespace(ctx, command)?;
    let Some(Bson::Array(statements)) = command.get("updates") else {
        return Err(MongoError::failed_to_parse(
            "BSON field 'update.updates' is missing but a required field",
        ));
    };
    let ordered = bool_of(command, "ordered", true)?;
    let (mut n, mut modified) = (0, 0);
    let (mut upserted, mut errors) = (Vec::new(), Vec::new());
    for (index, statement) in statements.iter().enumerate() {
        let outcome = match statement {
            Bson::Document(s) => query::collation_of(s)
                .and_then(|c| bunko_query::collation::with(c, || statement_run(ctx, &ns, s))),
            _ => Err(MongoError::type_mismatch("update statements must be objects")),
        };
        match outcome {
            Ok(Outcome { matched, changed, upserted: Some(id) }) => {
                // MongoDB's `n` counts an upserted document too.
                n += matched + 1;
                modified += changed;
                upserted.push(doc! {"index": index as i32, "_id": id});
            }
            Ok(Outcome { matched, changed, upserted: None }) => {
                n += matched;
                modified += changed;
            }
            Err(err) => {
                errors.push(write_error(index, &err));
                if ordered {
                    break;
                }
            }
        }
    }
    let mut reply = doc! {"n": n as i32, "nModified": modified as i32};
    if !upserted.is_empty() {
        reply.insert("upserted", upserted);
    }
    if !errors.is_empty() {
        reply.insert("writeErrors", errors);
    }
    Ok(reply)
}

struct Outcome {
    matched: usize,
    changed: usize,
    upserted: Option<Bson>,
}

fn statement_run(ctx: &Ctx, ns: &Namespace, statement: &Document) -> Result<Outcome, MongoError> {
    let parts = statement_parts(statement)?;
    let (filter, update, multi, upsert) = (&parts.filter, &parts.update, parts.multi, parts.upsert);
    let selector = query::selector(filter)?;
    let db = match (upsert, readable_db(ctx, ns, "update")?) {
        (_, Some(db)) => db,
        (true, None) => open_or_create(ctx, ns)?,
        (false, None) => return Ok(Outcome { matched: 0, changed: 0, upserted: None }),
    };
    let limit = if multi { usize::MAX } else { 1 };
    let hint = super::indexes::hint(&db, statement.get("hint"))?;
    // MongoDB 8's `sort` picks which document a single update changes.
    let mut order = query::sort(&doc_of(statement, "sort")?)?;
    if order.is_empty() {
        order = super::crud::natural_hint_order(statement.get("hint"))?;
    }
    let matches = run_hinted(
        &super::admin::user(ctx),
        &db,
        mongo_query(selector.clone(), 0, limit),
        &order,
        hint,
    )?;
    if matches.is_empty() && upsert {
        let (id, _) = insert_upsert(ctx, &db, parts.upserted(true)?)?;
        return Ok(Outcome { matched: 0, changed: 0, upserted: Some(id) });
    }
    let mut outcome = Outcome { matched: 0, changed: 0, upserted: None };
    for found in matches {
        if let Some((_, _, changed)) = modify(ctx, &db, &found, &selector, update)? {
            outcome.matched += 1;
            outcome.changed += usize::from(changed);
        }
    }
    Ok(outcome)
}

/// One statement of an `update` command, its fields checked.
pub(super) struct Statement {
    pub filter: Document,
    pub update: Update,
    pub multi: bool,
    pub upsert: bool,
    /// `c.new` of an `upsertSupplied: true` statement: the document its upsert inserts.
    pub supplied: Option<Document>,
}

impl Statement {
    /// The document this statement's upsert inserts, and its `_id`: `supplied` (a
    /// replacement of the filter's equalities, as MongoDB applies it) or [`upserted`]. A
    /// time-series collection's supplied document is taken as it is (`seeded` false).
    pub(super) fn upserted(&self, seeded: bool) -> Result<(Bson, Document), MongoError> {
        let Some(new) = &self.supplied else { return upserted(&self.filter, &self.update) };
        let seed = if seeded { self.filter.clone() } else { Document::new() };
        upserted(&seed, &Update::Replace(new.clone()))
    }
}

/// An update statement's `q`, `u`, `c`, `multi`, `upsert` and `upsertSupplied`, its fields
/// checked in MongoDB's order.
pub(super) fn statement_parts(statement: &Document) -> Result<Statement, MongoError> {
    for key in statement.keys() {
        match key.as_str() {
            "q" | "u" | "c" | "upsert" | "upsertSupplied" | "multi" | "arrayFilters" | "hint"
            | "collation" | "sort" => {}
            other => return Err(MongoError::unknown_field(&format!("update.updates.{other}"))),
        }
    }
    let filter = doc_of(statement, "q")?;
    let constants = match statement.get("c") {
        None => None,
        Some(Bson::Document(c)) => Some(c),
        Some(other) => {
            return Err(MongoError::type_mismatch(format!(
                "BSON field 'update.updates.c' is the wrong type '{}', expected type 'object'",
                bunko_query::expr::value::type_name(other)
            )));
        }
    };
    let upsert = bool_of(statement, "upsert", false)?;
    let supplied = supplied(statement, upsert, constants)?;
    let array_filters = array_filters(statement)?;
    let u = match (statement.get("u"), constants) {
        (Some(Bson::Array(stages)), Some(c)) => {
            Some(Bson::Array(super::let_vars::bind_constants(stages, c)?))
        }
        (Some(_), Some(_)) => {
            return Err(MongoError::new(
                51198,
                "Location51198",
                "Constant values may only be specified for pipeline updates",
            ));
        }
        (u, _) => u.cloned(),
    };
    let update = parse_update(u.as_ref(), &filter, array_filters.as_deref())?;
    let multi = bool_of(statement, "multi", false)?;
    if multi && matches!(update, Update::Replace(_)) {
        return Err(MongoError::failed_to_parse(
            "multi update is not supported for replacement-style update",
        ));
    }
    if multi && statement.contains_key("sort") {
        return Err(MongoError::new(72, "InvalidOptions", "Cannot specify sort with multi=true"));
    }
    Ok(Statement { filter, update, multi, upsert, supplied })
}

/// `c.new` when `upsertSupplied` is true: MongoDB requires an upsert and a document.
fn supplied(
    statement: &Document,
    upsert: bool,
    constants: Option<&Document>,
) -> Result<Option<Document>, MongoError> {
    if !bool_of(statement, "upsertSupplied", false)? {
        return Ok(None);
    }
    if !upsert {
        return Err(MongoError::failed_to_parse(
            "cannot specify 'upsertSupplied: true' for a non-upsert operation",
        ));
    }
    match constants.and_then(|c| c.get("new")) {
        Some(Bson::Document(new)) => Ok(Some(new.clone())),
        _ => Err(MongoError::failed_to_parse(
            "the parameter 'upsertSupplied' is set to 'true', but no document was supplied",
        )),
    }
}

/// `arrayFilters` of an update statement or a `findAndModify`.
pub(super) fn array_filters(command: &Document) -> Result<Option<Vec<Bson>>, MongoError> {
    match command.get("arrayFilters") {
        None => Ok(None),
        Some(Bson::Array(items)) => Ok(Some(items.clone())),
        Some(_) => Err(MongoError::type_mismatch(
            "BSON field 'arrayFilters' is the wrong type, expected type 'array'",
        )),
    }
}

/// Parses an update document; `query` is the statement's filter (for positional `$`).
pub(super) fn parse_update(
    spec: Option<&Bson>,
    query: &Document,
    array_filters: Option<&[Bson]>,
) -> Result<Update, MongoError> {
    let compile: Compile = &compile_filter;
    let options = Options { query: Some(query), array_filters, compile: Some(compile) };
    match spec {
        Some(Bson::Document(d)) => Ok(Update::parse_with(d, options)?),
        Some(Bson::Array(stages)) => {
            Ok(Update::Pipeline(bunko_query::update_pipeline::UpdatePipeline::parse(stages)?))
        }
        _ => Err(MongoError::failed_to_parse("BSON field 'u' is missing but a required field")),
    }
}

/// The stored document `id` in its MongoDB form, with its current revision.
fn current(
    user: &bunko_engine::security::UserCtx,
    db: &Database,
    id: &str,
) -> Result<Option<(Document, bunko_doc::RevId)>, MongoError> {
    let doc = match db.get(user, id, None) {
        Ok(doc) => doc,
        Err(Error::NotFound(_)) => return Ok(None),
        Err(err) => return Err(err.into()),
    };
    let mut out = doc! {"_id": ejson::id_value(id)};
    if let Ok(Value::Object(body)) = serde_json::from_slice::<Value>(&doc.body) {
        out.extend(ejson::from_json(&body));
    }
    Ok(Some((out, doc.rev)))
}

/// A MongoDB filter as the update operators call it (`$pull` conditions, `arrayFilters`,
/// the query positional `$` refers to).
fn compile_filter(spec: &Document) -> Result<Filter, UpdateError> {
    let selector =
        query::selector(spec).map_err(|e| UpdateError::new(e.code, e.code_name, e.errmsg))?;
    Ok(Filter::new(move |doc| matches(&selector, doc)))
}

pub(super) use crate::query::matches;

/// Applies `update` to the document `found` (as a query returned it): (before, after,
/// whether it changed); `None` if it no longer exists or matches.
fn modify(
    ctx: &Ctx,
    db: &Arc<Database>,
    found: &Document,
    selector: &Selector,
    update: &Update,
) -> Result<Option<(Document, Document, bool)>, MongoError> {
    let id = ejson::doc_id(found.get("_id").unwrap_or(&Bson::Null));
    for _ in 0..RETRIES {
        let Some((before, rev)) = current(&super::admin::user(ctx), db, &id)? else {
            return Ok(None);
        };
        if !matches(selector, &before) {
            return Ok(None);
        }
        let after = update.apply(&before, false)?;
        let changed = after.to_vec().ok() != before.to_vec().ok();
        if !changed {
            return Ok(Some((before, after, false)));
        }
        let (mut parsed, _) = prepare(&Bson::Document(after.clone()))?;
        parsed.id = Some(id.clone());
        parsed.rev = Some(rev);
        let replacement = matches!(update, Update::Replace(_));
        let opts = bunko_engine::WriteOptions { replacement, ..ctx.write_options() };
        match ctx.session.unsynced.put(db, &user(ctx), parsed, opts) {
            Ok(_) => return Ok(Some((before, after, true))),
            Err(Error::Conflict) => continue,
            Err(err) => return Err(err.into()),
        }
    }
    Err(MongoError::write_conflict_retries_exhausted())
}

/// Inserts an upsert's document ([`upserted`], [`Statement::upserted`]): its `_id` and
/// itself.
fn insert_upsert(
    ctx: &Ctx,
    db: &Arc<Database>,
    (id, with_id): (Bson, Document),
) -> Result<(Bson, Document), MongoError> {
    let (parsed, _) = prepare_for(db, &Bson::Document(with_id.clone()), false)?;
    let results = ctx.session.unsynced.write(db, &user(ctx), vec![parsed], ctx.write_options())?;
    if let Some(Err(err)) = results.into_iter().next().map(|r| r.result) {
        return Err(match err {
            Error::Conflict => MongoError::duplicate_key(&db.name(), &id.to_string()),
            other => MongoError::from(clone_error(&other)),
        });
    }
    Ok((id, with_id))
}

/// The document an upsert inserts, and its `_id`.
pub(super) fn upserted(filter: &Document, update: &Update) -> Result<(Bson, Document), MongoError> {
    let mut seed = Document::new();
    for (key, value) in filter {
        let value = match value {
            Bson::Document(d) if d.len() == 1 && d.contains_key("$eq") => d.get("$eq").cloned(),
            Bson::Document(d) if d.keys().next().is_some_and(|k| k.starts_with('$')) => None,
            _ if key.starts_with('$') => None,
            other => Some(other.clone()),
        };
        if let Some(value) = value {
            let set = Update::parse(&doc! {"$set": {key: value}})?;
            seed = set.apply(&seed, true)?;
        }
    }
    let mut doc = update.apply(&seed, true)?;
    let id = doc.get("_id").cloned().unwrap_or_else(|| Bson::ObjectId(ObjectId::new()));
    doc.remove("_id");
    let mut with_id = doc! {"_id": id.clone()};
    with_id.extend(doc);
    Ok((id, with_id))
}

/// A `findAndModify` command, checked as MongoDB checks it; shared by the plain run and the
/// run inside a transaction (`in_txn.rs`).
pub(super) struct FindAndModify {
    pub ns: Namespace,
    pub filter: Document,
    pub order: Vec<(FieldPath, Direction)>,
    /// `None`: `remove: true`.
    pub update: Option<Update>,
    pub return_new: bool,
    pub upsert: bool,
    /// `hint`, as the command gave it.
    pub hint: Option<Bson>,
    projection: Option<Projection>,
}

impl FindAndModify {
    pub(super) fn parse(ctx: &Ctx, command: &Document) -> Result<Self, MongoError> {
        let remove = bool_of(command, "remove", false)?;
        let return_new = bool_of(command, "new", false)?;
        let upsert = bool_of(command, "upsert", false)?;
        let update = match (remove, command.get("update")) {
            (true, Some(_)) => {
                return Err(MongoError::failed_to_parse(
                    "Cannot specify both an update and remove=true",
                ));
            }
            (true, None) => None,
            (false, None) => {
                return Err(MongoError::failed_to_parse(
                    "Either an update or remove=true must be specified",
                ));
            }
            (false, spec) => {
                let query = doc_of(command, "query")?;
                Some(parse_update(spec, &query, array_filters(command)?.as_deref())?)
            }
        };
        if remove && (upsert || return_new) {
            return Err(MongoError::failed_to_parse(
                "Cannot specify both upsert=true and remove=true",
            ));
        }
        let (filter, order) = (doc_of(command, "query")?, query::sort(&doc_of(command, "sort")?)?);
        let projection = Projection::parse_sorted(&doc_of(command, "fields")?, &filter, &order)?;
        Ok(Self {
            ns: namespace(ctx, command)?,
            filter,
            order,
            update,
            return_new,
            upsert,
            hint: command.get("hint").cloned(),
            projection,
        })
    }

    /// A document as the answer shows it (`fields`).
    pub(super) fn shown(&self, doc: Document) -> Result<Document, MongoError> {
        self.projection.as_ref().map_or(Ok(doc.clone()), |p| p.apply(&doc))
    }

    /// The collection, created when an upsert needs it; `None` when there is nothing to
    /// modify (answer [`nothing_modified`]).
    pub(super) fn target(&self, ctx: &mut Ctx) -> Result<Option<Arc<Database>>, MongoError> {
        match (self.upsert, readable_db(ctx, &self.ns, "findAndModify")?) {
            (_, Some(db)) => Ok(Some(db)),
            (true, None) => Ok(Some(open_or_create(ctx, &self.ns)?)),
            (false, None) => Ok(None),
        }
    }
}

/// The answer of a `findAndModify` that found nothing and inserted nothing.
pub(super) fn nothing_modified() -> Document {
    doc! {"lastErrorObject": {"n": 0, "updatedExisting": false}, "value": Bson::Null}
}

pub(super) fn find_and_modify(ctx: &mut Ctx, command: &Document) -> Result<Document, MongoError> {
    let spec = FindAndModify::parse(ctx, command)?;
    let selector = query::selector(&spec.filter)?;
    let Some(db) = spec.target(ctx)? else { return Ok(nothing_modified()) };
    let natural = match spec.order.is_empty() {
        true => super::crud::natural_hint_order(spec.hint.as_ref())?,
        false => Vec::new(),
    };
    let order = if natural.is_empty() { &spec.order } else { &natural };
    let (update, return_new) = (&spec.update, spec.return_new);
    let shown = |d: Document| spec.shown(d);
    let hint = super::indexes::hint(&db, spec.hint.as_ref())?;
    for _ in 0..RETRIES {
        let query = mongo_query(selector.clone(), 0, 1);
        let Some(found) = run_hinted(&super::admin::user(ctx), &db, query, order, hint.clone())?
            .into_iter()
            .next()
        else {
            break;
        };
        let Some(update) = update else {
            if remove_found(ctx, &db, &found)? {
                return Ok(doc! {"lastErrorObject": {"n": 1}, "value": shown(found)?});
            }
            continue; // changed meanwhile: look again
        };
        if let Some((before, after, _)) = modify(ctx, &db, &found, &selector, update)? {
            let value = shown(if return_new { after } else { before })?;
            return Ok(doc! {"lastErrorObject": {"n": 1, "updatedExisting": true}, "value": value});
        }
    }
    match (update, spec.upsert) {
        (Some(update), true) => {
            let (id, inserted) = insert_upsert(ctx, &db, upserted(&spec.filter, update)?)?;
            let value = if return_new { Bson::Document(shown(inserted)?) } else { Bson::Null };
            Ok(
                doc! {"lastErrorObject": {"n": 1, "updatedExisting": false, "upserted": id}, "value": value},
            )
        }
        (Some(_), false) => Ok(nothing_modified()),
        (None, _) => Ok(doc! {"lastErrorObject": {"n": 0}, "value": Bson::Null}),
    }
}

/// Deletes the document `found` at its current revision; whether it was deleted.
fn remove_found(ctx: &Ctx, db: &Arc<Database>, found: &Document) -> Result<bool, MongoError> {
    let id = ejson::doc_id(found.get("_id").unwrap_or(&Bson::Null));
    let Some((_, rev)) = current(&super::admin::user(ctx), db, &id)? else { return Ok(false) };
    let tombstone = ParsedDoc { id: Some(id), rev: Some(rev), deleted: true, ..Default::default() };
    match ctx.session.unsynced.put(db, &user(ctx), tombstone, WriteOptions::default()) {
        Ok(_) => Ok(true),
        Err(Error::Conflict) => Ok(false),
        Err(err) => Err(err.into()),
    }
}
