//! Documents: `insert`, `find`, `delete` (`count` and `distinct` have their own modules). Writes are `Database::write_docs` with
//! the connection's user (the write gate), their syncs awaited by `conn` ([`crate::acks`]), so each one is an ordinary engine write with a
//! new `_rev` and a `_changes` entry; reads are `Database::find_mongo`, after the same
//! membership check HTTP reads make.

use std::collections::VecDeque;
use std::sync::Arc;

use bson::oid::ObjectId;
use bson::{Bson, Document, RawDocument, RawDocumentBuf, doc};
use bunko_doc::body::ParsedDoc;
use bunko_doc::ejson;
use bunko_engine::find::FindQuery;
use bunko_engine::{Database, DocResult, WriteOptions};
use bunko_query::{Dialect, Direction, FieldPath, Selector};
use serde_json::Value;

use super::admin::{open_or_create, readable, user};
use super::pager::Pager;
use super::{Ctx, bool_of, cursor_reply, doc_of, int_of, namespace};
use crate::error::MongoError;
use crate::names::Namespace;
use crate::projection::Projection;
use crate::record_meta::KeySource;
use crate::{query, wire};

/// The deepest document that may be stored (MongoDB's documented limit).
const MAX_STORED_DEPTH: usize = 100;

fn bson_depth(value: &Bson) -> usize {
    match value {
        Bson::Document(d) => 1 + d.values().map(bson_depth).max().unwrap_or(0),
        Bson::Array(a) => 1 + a.iter().map(bson_depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// The first batch's size when the client names none (MongoDB's default).
const DEFAULT_BATCH: usize = 101;

pub(super) fn insert(ctx: &mut Ctx, command: &Document) -> Result<Document, MongoError> {
    let ns = namespace(ctx, command)?;
    let sent = match (ctx.session.documents.take(), command.get("documents")) {
        (Some(raw), _) => Sent::Raw(raw),
        (None, Some(Bson::Array(items))) => Sent::Body(items),
        _ => {
            return Err(MongoError::failed_to_parse(
                "BSON field 'insert.documents' is missing but a required field",
            ));
        }
    };
    let ordered = bool_of(command, "ordered", true)?;
    let db = open_or_create(ctx, &ns)?;
    let mut errors = Vec::new();
    let mut docs = Vec::new();
    for index in 0..sent.len() {
        match sent.prepare(&db, index, ctx.session.sized) {
            Ok((doc, id)) => docs.push((index, doc, id)),
            Err(err) => {
                errors.push(write_error(index, &err));
                if ordered {
                    break;
                }
            }
        }
    }
    if ordered && let Some(first) = errors.first().and_then(|e| e.get_i32("index").ok()) {
        docs.retain(|(index, _, _)| (*index as i32) < first);
    }
    let written = write(ctx, &db, &ns, &sent, docs, ordered, &mut errors)?;
    errors.sort_by_key(|e| e.get_i32("index").unwrap_or_default());
    let mut reply = doc! {"n": written as i32};
    if !errors.is_empty() {
        reply.insert("writeErrors", errors);
    }
    Ok(reply)
}

/// An insert's documents: the body's `documents` array, or its kind-1 sequence kept as
/// the bytes that came ([`wire::Request::documents`]), each converted to its stored JSON in
/// one pass.
enum Sent<'a> {
    Body(&'a [Bson]),
    Raw(Vec<RawDocumentBuf>),
}

impl Sent<'_> {
    fn len(&self) -> usize {
        match self {
            Sent::Body(items) => items.len(),
            Sent::Raw(docs) => docs.len(),
        }
    }

    /// The document at `index`, prepared ([`prepare_for`]).
    fn prepare(
        &self,
        db: &Database,
        index: usize,
        sized: bool,
    ) -> Result<(ParsedDoc, Bson), MongoError> {
        match self {
            Sent::Body(items) => prepare_for(db, &items[index], sized),
            Sent::Raw(docs) => partition_ids(db, prepare_raw(&docs[index])?),
        }
    }
}

/// Writes the prepared documents of `sent`; ordered: none after the first failure.
fn write(
    ctx: &Ctx,
    db: &Arc<Database>,
    ns: &Namespace,
    sent: &Sent,
    docs: Vec<(usize, ParsedDoc, Bson)>,
    ordered: bool,
    errors: &mut Vec<Document>,
) -> Result<usize, MongoError> {
    let user = user(ctx);
    let opts = WriteOptions { all_or_nothing: ordered, ..ctx.write_options() };
    let (keys, parsed): (Vec<(usize, Bson)>, Vec<ParsedDoc>) =
        docs.into_iter().map(|(index, doc, id)| ((index, id), doc)).unzip();
    let results = ctx.session.unsynced.write(db, &user, parsed, opts)?;
    let failed = results.iter().position(|r| r.result.is_err());
    if ordered && let Some(k) = failed {
        // Nothing was written: write the documents before the first failure, and report it.
        // The write consumed them; they are prepared again from what was sent, with the ids
        // they had (a generated ObjectId stays the same).
        errors.push(doc_error(ns, &keys[k], &results[k]));
        let mut again = Vec::with_capacity(k);
        for (index, id) in &keys[..k] {
            let (mut doc, _) = sent.prepare(db, *index, true)?;
            doc.id = Some(ejson::doc_id(id));
            again.push((*index, doc, id.clone()));
        }
        return match again.is_empty() {
            true => Ok(0),
            false => write(ctx, db, ns, sent, again, true, errors),
        };
    }
    let mut written = 0;
    for (key, result) in keys.iter().zip(&results) {
        match &result.result {
            Ok(_) => written += 1,
            Err(_) => errors.push(doc_error(ns, key, result)),
        }
    }
    Ok(written)
}

fn doc_error(ns: &Namespace, (index, id): &(usize, Bson), result: &DocResult) -> Document {
    match &result.result {
        Err(bunko_engine::Error::Conflict) => {
            let err = MongoError::duplicate_key(&ns.full(), &id.to_string());
            let mut doc = write_error(*index, &err);
            doc.insert("keyPattern", doc! {"_id": 1});
            doc.insert("keyValue", doc! {"_id": id.clone()});
            doc
        }
        Err(other) => write_error(*index, &MongoError::from(clone_error(other))),
        Ok(_) => write_error(*index, &MongoError::internal("no error")),
    }
}

/// Engine errors are not `Clone`; their MongoDB form only needs the variant and text.
pub(super) fn clone_error(err: &bunko_engine::Error) -> bunko_engine::Error {
    use bunko_engine::Error as E;
    match err {
        E::Forbidden(t) => E::Forbidden(t.clone()),
        E::Unauthorized(t) => E::Unauthorized(t.clone()),
        E::Rejected(t) => E::Rejected(t.clone()),
        E::DocumentValidation { info } => E::DocumentValidation { info: info.clone() },
        E::NotFound(t) => E::NotFound(t.clone()),
        E::Conflict => E::Conflict,
        E::DuplicateKey { db, index, key } => {
            E::DuplicateKey { db: db.clone(), index: index.clone(), key: key.clone() }
        }
        E::ParallelArrays(t) => E::ParallelArrays(t.clone()),
        E::HashedArray(t) => E::HashedArray(t.clone()),
        other => E::BadRequest(other.to_string()),
    }
}

pub(super) fn write_error(index: usize, err: &MongoError) -> Document {
    let mut out = doc! {"index": index as i32, "code": err.code, "codeName": err.code_name, "errmsg": &err.errmsg};
    out.extend(err.extra.as_deref().cloned().unwrap_or_default());
    out
}

/// MongoDB stores `$`-prefixed field names anywhere but in `_id`.
fn check_id_fields(id: &Document) -> Result<(), MongoError> {
    for (key, value) in id {
        if key.starts_with('$') {
            return Err(MongoError::new(
                52,
                "DollarPrefixedFieldName",
                format!(
                    "_id fields may not contain '$'-prefixed fields: {key} is not valid for storage."
                ),
            ));
        }
        if let Bson::Document(inner) = value {
            check_id_fields(inner)?;
        }
    }
    Ok(())
}

/// [`prepare`] for a new document of `db`. A partitioned database takes string `_id`s
/// only (`partition:docid`): any other `_id`, also the ObjectId made for a document
/// without one, would be stored as its Extended JSON text, whose "partition" is `{"$oid"`.
/// `sized`: the document came in a request whose framing vouched for its size
/// ([`wire::Request::sized`]).
pub(super) fn prepare_for(
    db: &Database,
    item: &Bson,
    sized: bool,
) -> Result<(ParsedDoc, Bson), MongoError> {
    partition_ids(db, if sized { prepare_sized(item)? } else { prepare(item)? })
}

/// A prepared document of `db`, refused when `db` is partitioned and its `_id` no string.
fn partition_ids(
    db: &Database,
    (parsed, id): (ParsedDoc, Bson),
) -> Result<(ParsedDoc, Bson), MongoError> {
    if db.is_partitioned() && !matches!(id, Bson::String(_)) {
        return Err(MongoError::bad_value(
            "Doc id must be of form partition:id (a partitioned database takes string _ids)",
        ));
    }
    Ok((parsed, id))
}

/// A document to insert: its size checked, `_id` added (first) when missing.
pub(super) fn prepare(item: &Bson) -> Result<(ParsedDoc, Bson), MongoError> {
    if let Bson::Document(doc) = item {
        let size = doc.to_vec().map_err(|e| MongoError::invalid_bson(e.to_string()))?.len();
        if size > wire::MAX_BSON_SIZE {
            return Err(MongoError::too_large(size, wire::MAX_BSON_SIZE));
        }
    }
    prepare_sized(item)
}

/// [`prepare`] of a document known to be within the size limit.
pub(super) fn prepare_sized(item: &Bson) -> Result<(ParsedDoc, Bson), MongoError> {
    let Bson::Document(doc) = item else {
        return Err(MongoError::type_mismatch("documents to insert must be objects"));
    };
    // The body without `_id`, converted from the sent document without copying it first.
    let body: serde_json::Map<String, Value> = doc
        .iter()
        .filter(|(key, _)| key.as_str() != "_id")
        .map(|(key, value)| (key.clone(), ejson::value_to_json(value)))
        .collect();
    let depth = 1 + doc.values().map(bson_depth).max().unwrap_or(0);
    let json_depth = body.values().map(ejson::json_depth).max().unwrap_or(0);
    stored(doc.get("_id").cloned(), body, depth, json_depth)
}

/// [`prepare_sized`] of a document sent as BSON bytes (an insert's kind-1 sequence, sized
/// as it was read): its body printed as its stored JSON straight from the bytes
/// ([`ejson::print::body`]), or converted to the map in one pass ([`ejson::from_bson`])
/// when a key repeats (the map keeps its first place and last value).
fn prepare_raw(doc: &RawDocument) -> Result<(ParsedDoc, Bson), MongoError> {
    let invalid = |e: bson::error::Error| MongoError::invalid_bson(e.to_string());
    let Some(body) = ejson::print::body(doc, Some("_id")).map_err(invalid)? else {
        return prepare_repeated(doc);
    };
    let id = match doc.get("_id").map_err(invalid)? {
        Some(id) => Some(Bson::try_from(id).map_err(invalid)?),
        None => None,
    };
    let depth = body.depth.max(1 + id.as_ref().map_or(0, bson_depth));
    let (mut parsed, id) = stored(id, serde_json::Map::new(), depth, body.json_depth)?;
    parsed.printed = Some(body.printed);
    Ok((parsed, id))
}

/// [`prepare_raw`] of a document in which a key repeats.
fn prepare_repeated(doc: &RawDocument) -> Result<(ParsedDoc, Bson), MongoError> {
    let invalid = |e: bson::error::Error| MongoError::invalid_bson(e.to_string());
    let mut id = None;
    let mut body = serde_json::Map::new();
    let mut deepest = 0;
    for member in doc {
        let (key, value) = member.map_err(invalid)?;
        if key.as_str() == "_id" {
            // A repeated `_id` counts with its last value, as the decoded document keeps it.
            id = Some(Bson::try_from(value).map_err(invalid)?);
            continue;
        }
        let (value, depth) = ejson::from_bson::value(value).map_err(invalid)?;
        deepest = deepest.max(depth);
        body.insert(key.as_str().to_owned(), value);
    }
    let depth = 1 + deepest.max(id.as_ref().map_or(0, bson_depth));
    let json_depth = body.values().map(ejson::json_depth).max().unwrap_or(0);
    stored(id, body, depth, json_depth)
}

/// The document to store: `_id` checked (an ObjectId made when missing), the nesting of
/// the sent document (`depth`) and of its stored JSON (`json_depth`, its deepest member's)
/// checked.
fn stored(
    id: Option<Bson>,
    body: serde_json::Map<String, Value>,
    depth: usize,
    json_depth: usize,
) -> Result<(ParsedDoc, Bson), MongoError> {
    let id = id.unwrap_or_else(|| Bson::ObjectId(ObjectId::new()));
    match id {
        Bson::Array(_) => return Err(MongoError::bad_value("can't use an array for _id")),
        Bson::RegularExpression(_) => {
            return Err(MongoError::bad_value("can't use a regex for _id"));
        }
        Bson::Undefined => return Err(MongoError::bad_value("can't use a undefined for _id")),
        Bson::Document(ref d) => check_id_fields(d)?,
        _ => {}
    }
    // MongoDB stores at most 100 levels; the stored JSON (with its wrappers) must also stay
    // within what the JSON parser reads back (128).
    if depth > MAX_STORED_DEPTH || json_depth >= 127 {
        return Err(MongoError::new(
            15,
            "Overflow",
            format!("Document exceeds the maximum nesting depth of {MAX_STORED_DEPTH}"),
        ));
    }
    let parsed = ParsedDoc { id: Some(ejson::doc_id(&id)), body, ..Default::default() };
    Ok((parsed, id))
}

/// The collection's database if it exists, after the read check.
pub(super) fn readable_db(
    ctx: &Ctx,
    ns: &Namespace,
    command: &str,
) -> Result<Option<Arc<Database>>, MongoError> {
    readable_db_as(&ctx.server.engine, &user(ctx), ns, command)
}

/// [`readable_db`] for `user`.
pub(super) fn readable_db_as(
    engine: &bunko_engine::Engine,
    user: &bunko_engine::security::UserCtx,
    ns: &Namespace,
    command: &str,
) -> Result<Option<Arc<Database>>, MongoError> {
    let Some(db) = engine.get_db(&ns.engine_name()) else { return Ok(None) };
    if !readable(&db, user) {
        return Err(MongoError::unauthorized(format!(
            "not authorized on {} to execute command {{ {command}: \"{}\" }}",
            ns.db, ns.coll
        )));
    }
    Ok(Some(db))
}

/// A query in the Mongo dialect, unsorted (MongoDB orders are applied by `find_mongo`).
pub(super) fn mongo_query(selector: Selector, skip: usize, limit: usize) -> FindQuery {
    FindQuery { skip, limit, ..FindQuery::new(selector, Dialect::Mongo) }
}

/// A delete statement's `limit`: 0 (every match) or 1.
pub(super) fn delete_limit(statement: &Document) -> Result<usize, MongoError> {
    match int_of(statement, "limit")? {
        Some(0) => Ok(usize::MAX),
        Some(1) => Ok(1),
        _ => Err(MongoError::failed_to_parse("The limit field in delete objects must be 0 or 1.")),
    }
}

/// Runs a query in the Mongo dialect with the index name a `hint` gave: the matching
/// documents, in MongoDB form.
pub(super) fn run_hinted(
    user: &bunko_engine::security::UserCtx,
    db: &Database,
    mut query: FindQuery,
    order: &[(FieldPath, Direction)],
    hint: Option<String>,
) -> Result<Vec<Document>, MongoError> {
    query.use_index = hint.map(|h| (h, None));
    let result = db.find_mongo(user, &query, order)?;
    Ok(result.docs.iter().filter_map(Value::as_object).map(ejson::from_json).collect())
}

/// The order a write statement without a sort reads in when its `hint` is `{$natural: ±1}`
/// (on a capped collection, oldest or newest first; else none).
pub(super) fn natural_hint_order(
    hint: Option<&Bson>,
) -> Result<Vec<(FieldPath, Direction)>, MongoError> {
    match hint {
        Some(Bson::Document(h)) if h.contains_key("$natural") => {
            let dir = if int_of(h, "$natural")?.is_some_and(|n| n < 0) { -1 } else { 1 };
            query::sort(&doc! {"$natural": dir})
        }
        _ => Ok(Vec::new()),
    }
}

pub(super) fn non_negative(command: &Document, field: &str) -> Result<Option<usize>, MongoError> {
    match int_of(command, field)? {
        Some(n) if n < 0 => Err(MongoError::new(
            51024,
            "Location51024",
            format!("BSON field '{field}' value must be >= 0, actual value '{n}'"),
        )),
        Some(n) => Ok(Some(usize::try_from(n).unwrap_or(usize::MAX))),
        None => Ok(None),
    }
}

/// `find` (its `maxTimeMS` is held by the command table, `super::read_deadline`).
pub(super) fn find(ctx: &mut Ctx, command: &Document) -> Result<Document, MongoError> {
    non_negative(command, "maxTimeMS")?;
    if let Some(reply) = super::point_read::find(ctx, command)? {
        return Ok(reply);
    }
    let ns = namespace(ctx, command)?;
    let filter = doc_of(command, "filter")?;
    let selector = query::selector(&filter)?;
    let order = query::sort(&doc_of(command, "sort")?)?;
    let meta = (bool_of(command, "returnKey", false)?, bool_of(command, "showRecordId", false)?);
    let spec = doc_of(command, "projection")?;
    let mut projection = Projection::parse_find(&spec, &filter, &order, meta)?;
    let skip = non_negative(command, "skip")?.unwrap_or(0);
    let limit = non_negative(command, "limit")?.filter(|&l| l > 0).unwrap_or(usize::MAX);
    let batch = non_negative(command, "batchSize")?.unwrap_or(DEFAULT_BATCH);
    let single = bool_of(command, "singleBatch", false)?;
    let Some(db) = readable_db(ctx, &ns, "find")? else {
        return Ok(cursor_reply(0, &ns.full(), "firstBatch", Vec::new()));
    };
    let tailable = bool_of(command, "tailable", false)?;
    let bounds = super::min_max::bounds(&db, command)?;
    let cap = match bounds {
        Some(_) => None,
        None => natural(&db, command, tailable, &order)?,
    };
    if let Some(p) = projection.as_mut().filter(|p| p.needs_keys()) {
        p.keyed(match cap {
            Some(_) => KeySource::Scan,
            None => key_source(&db, command, &selector, &order)?,
        });
    }
    if let Some(bounds) = bounds {
        if tailable {
            return Err(MongoError::not_implemented("min/max on a tailable cursor"));
        }
        let ns = ns.full();
        let find = super::min_max::Within {
            ns: &ns,
            selector,
            order: &order,
            skip,
            limit,
            projection,
            batch,
            single,
        };
        return super::min_max::find(ctx, &db, command, bounds, find);
    }
    if let Some(cap) = cap {
        let request = super::capped::Request {
            selector,
            projection,
            skip,
            limit,
            descending: cap,
            tailable,
            await_data: bool_of(command, "awaitData", false)?,
        };
        let scan = super::capped::Scan::new(super::admin::user(ctx), db, request);
        return super::capped::open(ctx, &ns, scan, batch, single);
    }
    let hint = super::indexes::hint(&db, command.get("hint"))?;
    let order = match order.is_empty() {
        true => super::indexes::hinted_order(&db, hint.as_deref())?,
        false => order,
    };
    let mut pager =
        Pager::new(super::admin::user(ctx), db, selector, &order, (skip, limit), projection, hint)?;
    let (first, more) = match batch {
        0 => (Vec::new(), true),
        n => match ctx.session.raw_batch.wanted().then(|| pager.next_raw(n)).transpose()? {
            // Framed by the connection: the batch rides beside an empty `firstBatch`.
            Some(Some((written, more))) => {
                ctx.session.raw_batch = super::point_read::RawBatch::Written(written);
                (Vec::new(), more)
            }
            _ => pager.next(n)?,
        },
    };
    let id = if single || !more {
        0
    } else {
        let collation = bunko_query::collation::current();
        let next =
            Box::new(move |n| bunko_query::collation::with(collation.clone(), || pager.next(n)));
        ctx.server.cursors.open(ns.full(), ctx.session.user.clone(), next)
    };
    Ok(cursor_reply(id, &ns.full(), "firstBatch", first))
}

/// Where a `find` on `db` (not read in natural order) finds its documents, for their
/// index keys.
pub(super) fn key_source(
    db: &Arc<Database>,
    command: &Document,
    selector: &Selector,
    order: &[(FieldPath, Direction)],
) -> Result<KeySource, MongoError> {
    let hint = super::indexes::hint(db, command.get("hint"))?;
    let id_hinted = hint.is_none() && !matches!(command.get("hint"), None | Some(Bson::Null));
    KeySource::of(db, selector, order, (hint.as_deref(), id_hinted))
}

/// Whether a `find` on `db` reads a capped collection in natural order (`Some(descending)`):
/// unsorted or sorted by `$natural` (a `$natural` hint too). `tailable` needs a capped
/// collection and natural order, as in MongoDB.
fn natural(
    db: &Database,
    command: &Document,
    tailable: bool,
    order: &[(FieldPath, Direction)],
) -> Result<Option<bool>, MongoError> {
    let sort = doc_of(command, "sort")?;
    let by_natural = match (sort.len(), order.first()) {
        (1, Some((_, dir))) if sort.contains_key("$natural") => Some(*dir == Direction::Desc),
        _ => None,
    };
    if super::bool_of(command, "awaitData", false)? && !tailable {
        return Err(MongoError::failed_to_parse(
            "Cannot set 'awaitData' without also setting 'tailable'",
        ));
    }
    // Kept by the database once a write has read it (no design document read per find).
    let capped = db.is_capped().unwrap_or(false);
    if tailable && !capped {
        return Err(MongoError::bad_value(format!(
            "error processing query: ns={} tailable cursor requested on non capped collection",
            db.name()
        )));
    }
    if tailable && (by_natural == Some(true) || (by_natural.is_none() && !order.is_empty())) {
        return Err(MongoError::bad_value(
            "error processing query: cannot use tailable option with a sort other than {$natural: 1}",
        ));
    }
    // `hint: {$natural: -1}` reads newest first, as the sort does.
    let hinted = match command.get("hint") {
        Some(Bson::Document(h)) if h.contains_key("$natural") => {
            Some(super::int_of(h, "$natural")?.is_some_and(|n| n < 0))
        }
        _ => None,
    };
    match (capped, by_natural) {
        (true, Some(descending)) => Ok(Some(descending)),
        (true, None) if order.is_empty() && (hinted.is_some() || !command.contains_key("hint")) => {
            Ok(Some(hinted.unwrap_or(false)))
        }
        _ => Ok(None),
    }
}

/// Up to `size` documents (`0`: no count limit) and at most 16 MiB of them (at least one).
pub(super) fn take_batch(docs: &mut VecDeque<Document>, size: usize) -> Vec<Document> {
    let size = if size == 0 { usize::MAX } else { size };
    let mut out = Vec::new();
    let mut bytes = 0;
    while out.len() < size {
        let Some(next) = docs.front() else { break };
        let len = next.to_vec().map_or(0, |v| v.len());
        if !out.is_empty() && bytes + len > wire::MAX_BSON_SIZE {
            break;
        }
        bytes += len;
        out.extend(docs.pop_front());
    }
    out
}

/// `maxTimeMS` (`0`: none) of a command that ran from `started`: past it (or past the
/// limit its reads run under, `bunko_engine::deadline`) the command fails with MongoDB's
/// `MaxTimeMSExpired` (50) instead of answering.
pub(super) fn within_max_time(
    command: &Document,
    started: std::time::Instant,
) -> Result<(), MongoError> {
    let Some(ms) = non_negative(command, "maxTimeMS")? else { return Ok(()) };
    if ms == 0 || (started.elapsed().as_millis() <= ms as u128 && !bunko_engine::deadline::passed())
    {
        return Ok(());
    }
    Err(max_time_expired())
}

/// MongoDB's `MaxTimeMSExpired` (50).
pub(super) fn max_time_expired() -> MongoError {
    MongoError::new(50, "MaxTimeMSExpired", "operation exceeded time limit")
}

pub(super) fn delete(ctx: &mut Ctx, command: &Document) -> Result<Document, MongoError> {
    let ns = namespace(ctx, command)?;
    let Some(Bson::Array(statements)) = command.get("deletes") else {
        return Err(MongoError::failed_to_parse(
            "BSON field 'delete.deletes' is missing but a required field",
        ));
    };
    let ordered = bool_of(command, "ordered", true)?;
    let db = readable_db(ctx, &ns, "delete")?;
    let mut deleted = 0;
    let mut errors = Vec::new();
    for (index, statement) in statements.iter().enumerate() {
        let outcome = match (&db, statement) {
            (_, Bson::Document(s)) => query::collation_of(s).and_then(|c| {
                bunko_query::collation::with(c, || delete_one_statement(ctx, db.as_ref(), s))
            }),
            _ => Err(MongoError::type_mismatch("delete statements must be objects")),
        };
        match outcome {
            Ok(n) => deleted += n,
            Err(err) => {
                errors.push(write_error(index, &err));
                if ordered {
                    break;
                }
            }
        }
    }
    let mut reply = doc! {"n": deleted as i32};
    if !errors.is_empty() {
        reply.insert("writeErrors", errors);
    }
    Ok(reply)
}

/// One `{q, limit}` statement: deletes the matching documents in one commit.
fn delete_one_statement(
    ctx: &Ctx,
    db: Option<&Arc<Database>>,
    statement: &Document,
) -> Result<usize, MongoError> {
    for key in statement.keys() {
        match key.as_str() {
            "q" | "limit" | "hint" | "collation" => {}
            other => {
                return Err(MongoError::new(
                    40415,
                    "Location40415",
                    format!("BSON field 'delete.deletes.{other}' is an unknown field."),
                ));
            }
        }
    }
    let selector = query::selector(&doc_of(statement, "q")?)?;
    let limit = delete_limit(statement)?;
    let Some(db) = db else { return Ok(0) };
    let hint = super::indexes::hint(db, statement.get("hint"))?;
    let order = natural_hint_order(statement.get("hint"))?;
    let matched =
        run_hinted(&super::admin::user(ctx), db, mongo_query(selector, 0, limit), &order, hint)?;
    let mut tombstones = Vec::with_capacity(matched.len());
    for doc in matched {
        let id = ejson::doc_id(doc.get("_id").unwrap_or(&Bson::Null));
        let Ok(Some(current)) = db.current_rev(&id) else { continue };
        tombstones.push(ParsedDoc {
            id: Some(id),
            rev: Some(current),
            deleted: true,
            ..Default::default()
        });
    }
    let results =
        ctx.session.unsynced.write(db, &user(ctx), tombstones, WriteOptions::default())?;
    if let Some(Err(err)) = results.iter().map(|r| &r.result).find(|r| r.is_err()) {
        return Err(MongoError::from(clone_error(err)));
    }
    Ok(results.len())
}

/// The values a dotted path reaches, through arrays as MongoDB does; an array at the end
/// stands for its elements.
pub(super) fn reach(value: &Bson, path: &[&str], out: &mut Vec<Bson>) {
    let Some((first, rest)) = path.split_first() else {
        match value {
            Bson::Array(items) => out.extend(items.iter().cloned()),
            other => out.push(other.clone()),
        }
        return;
    };
    match value {
        Bson::Document(doc) => {
            if let Some(child) = doc.get(*first) {
                reach(child, rest, out);
            }
        }
        Bson::Array(items) => {
            if let Some(item) = first.parse::<usize>().ok().and_then(|i| items.get(i)) {
                reach(item, rest, out);
            }
            for item in items.iter().filter(|i| matches!(i, Bson::Document(_))) {
                reach(item, path, out);
            }
        }
        _ => {}
    }
}
