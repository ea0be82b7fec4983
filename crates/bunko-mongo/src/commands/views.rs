//! MongoDB views: `create` with `viewOn` and `pipeline` makes a read-only collection whose
//! documents are the pipeline's output over another collection (or view) of the same
//! database.
//!
//! A view is stored as a collection is, an engine database (`db$view`), whose design
//! document `_design/mongodb` holds `viewOn` and `pipeline` among its `options`
//! ([`coll_options`]): it survives restarts, renames and drops as collections do, is listed
//! by `listCollections` (`type: "view"`), and its creation is a change stream `create`
//! event. It holds no documents.
//!
//! Reads of a view ([`run`]: `find`, `count` (and so `estimatedDocumentCount`), `distinct`,
//! `aggregate`) become an `aggregate` over the collection at the bottom of the chain of
//! views, with the views' pipelines first and the command's own stages after; the answer
//! is shaped as the command's (and a cursor is the view's). Writes and index commands are
//! MongoDB's `CommandNotSupportedOnView` (166).
//!
//! A time-series collection ([`super::timeseries`]) is read the same way, as a view on its
//! own stored measurements, with what can be moved onto the stored form put in front of the
//! `$replaceRoot` so that its indexes serve it ([`super::timeseries_query`]); its writes and
//! index commands go to [`super::timeseries_write`].

use std::sync::Arc;

use bson::{Bson, Document, doc};
use bunko_engine::security::UserCtx;

use super::{Ctx, coll_options};
use crate::error::MongoError;
use crate::names::Namespace;

/// MongoDB's limit on views defined on views.
const MAX_DEPTH: usize = 20;

/// Commands that read a view through its pipeline.
const READS: &[&str] = &["find", "count", "distinct", "aggregate"];

/// Commands a view refuses.
const WRITES: &[&str] = &[
    "insert",
    "update",
    "delete",
    "findAndModify",
    "createIndexes",
    "dropIndexes",
    "listIndexes",
    "collMod",
];

/// The fields of a read that its `aggregate` takes as they are.
const COPIED: &[&str] = &[
    "lsid",
    "readConcern",
    "let",
    "comment",
    "collation",
    "hint",
    "allowDiskUse",
    "maxTimeMS",
    "explain",
];

/// A view's definition: the collection (or view) it reads and its pipeline. A time-series
/// collection ([`super::timeseries`]) is read as a view on itself: `on` is empty.
struct View {
    on: String,
    pipeline: Vec<Bson>,
}

impl View {
    fn is_timeseries(&self) -> bool {
        self.on.is_empty()
    }
}

/// The definition of `ns`, if it is a view.
fn view(ctx: &Ctx, ns: &Namespace) -> Option<Arc<View>> {
    view_in(&ctx.server.engine, ns)
}

/// MongoDB's refusal of a write into the view `ns`.
pub(super) fn refused(ns: &Namespace) -> MongoError {
    MongoError::new(
        166,
        "CommandNotSupportedOnView",
        format!("Namespace {} is a view, not a collection", ns.full()),
    )
}

/// Whether `ns` is read through a pipeline: a view, or a time-series collection.
pub(super) fn is_view(engine: &bunko_engine::Engine, ns: &Namespace) -> bool {
    view_in(engine, ns).is_some()
}

/// Whether `ns` is a time-series collection.
pub(super) fn is_timeseries(engine: &bunko_engine::Engine, ns: &Namespace) -> bool {
    view_in(engine, ns).is_some_and(|v| v.is_timeseries())
}

/// What a collection's design document said about it being a view, as of an update seq
/// of the collection ([`bunko_engine::Database::applied_seq`]).
#[derive(Default)]
struct Known(parking_lot::Mutex<Option<(u64, Option<Arc<View>>)>>);

/// Every read and write asks whether its collection is a view, so the answer is kept with
/// the collection (an engine extension) until its next commit: between two writes (a
/// `find_one` workload) the design document is not read again.
fn view_in(engine: &bunko_engine::Engine, ns: &Namespace) -> Option<Arc<View>> {
    let db = engine.get_db(&ns.engine_name())?;
    let known = db.extension(Known::default);
    // Read before the store: a commit after it changes it, so nothing older is kept.
    let seq = db.applied_seq();
    if let Some((at, view)) = &*known.0.lock()
        && *at == seq
    {
        return view.clone();
    }
    let view = read_view(&db).map(Arc::new);
    *known.0.lock() = Some((seq, view.clone()));
    view
}

/// The view `db`'s design document defines, if it does (parsed only when it names one).
fn read_view(db: &bunko_engine::Database) -> Option<View> {
    let found = db.get(&UserCtx::system(), coll_options::DDOC, None).ok()?;
    let names = |w: &[u8]| w == b"\"viewOn\"" || w == b"\"timeseries\"";
    let named = found.body.windows(8).any(names) || found.body.windows(12).any(names);
    if found.deleted || !named {
        return None;
    }
    let options = coll_options::read(db);
    if options.contains_key("timeseries") {
        return Some(View { on: String::new(), pipeline: super::timeseries::pipeline() });
    }
    let on = options.get_str("viewOn").ok()?.to_string();
    let pipeline = options.get_array("pipeline").cloned().unwrap_or_default();
    Some(View { on, pipeline })
}

/// The collection at the bottom of the view `ns` and the pipeline of the chain of views,
/// or `None` when `ns` is not a view. A time-series collection is the bottom of its chain:
/// its measurements are read with its own pipeline.
fn resolve(ctx: &Ctx, ns: &Namespace) -> Result<Option<(Namespace, Vec<Bson>)>, MongoError> {
    let mut at = ns.clone();
    let mut stages: Vec<Bson> = Vec::new();
    for _ in 0..=MAX_DEPTH {
        let Some(view) = view(ctx, &at) else {
            return Ok((at != *ns).then_some((at, stages)));
        };
        let mut pipeline = view.pipeline.clone();
        pipeline.extend(stages);
        stages = pipeline;
        if view.is_timeseries() {
            return Ok(Some((at, stages)));
        }
        at = Namespace::new(&ns.db, &view.on)?;
    }
    Err(MongoError::new(
        149,
        "ViewDepthLimitExceeded",
        format!("View depth too deep or view cycle detected; maximum depth is {MAX_DEPTH}"),
    ))
}

/// `create` with `viewOn`: stores the view's definition as its options.
pub(super) fn create(ctx: &mut Ctx, command: &Document) -> Result<Document, MongoError> {
    let ns = super::namespace(ctx, command)?;
    let on = match command.get("viewOn") {
        Some(Bson::String(on)) if !on.is_empty() => on.clone(),
        Some(Bson::String(_)) => {
            return Err(MongoError::bad_value("'viewOn' cannot be empty"));
        }
        _ => return Err(MongoError::type_mismatch("'viewOn' must be a string")),
    };
    let pipeline = match command.get("pipeline") {
        None => Vec::new(),
        Some(Bson::Array(stages)) if stages.iter().all(|s| matches!(s, Bson::Document(_))) => {
            stages.clone()
        }
        Some(_) => {
            return Err(MongoError::type_mismatch("'pipeline' must be an array of objects"));
        }
    };
    if let Some(field) = coll_options::FIELDS.iter().find(|f| command.contains_key(**f)) {
        return Err(MongoError::new(
            72,
            "InvalidOptions",
            format!("option '{field}' is not supported for views"),
        ));
    }
    let options = doc! {"viewOn": on, "pipeline": pipeline};
    let user = super::admin::user(ctx);
    let db = match ctx.server.engine.create_db(&user, &ns.engine_name(), false) {
        Ok(db) => db,
        Err(bunko_engine::Error::FileExists) => {
            // MongoDB accepts creating an existing view with the same definition.
            let same =
                ctx.server.engine.get_db(&ns.engine_name()).map(|db| coll_options::read(&db));
            if same.as_ref() == Some(&options) {
                return Ok(Document::new());
            }
            return Err(MongoError::namespace_exists(format!(
                "Namespace {} already exists",
                ns.full()
            )));
        }
        Err(err) => return Err(err.into()),
    };
    super::roles::grant(&db, &user)?;
    coll_options::write(&db, &user, options)?;
    Ok(Document::new())
}

/// Runs `command` (named `name`) over a view: a read through the view's pipeline, or the
/// refusal of a write. `None` when its namespace is not a view.
pub(super) fn run(
    ctx: &mut Ctx,
    name: &str,
    command: &Document,
) -> Result<Option<Document>, MongoError> {
    let reads = READS.contains(&name);
    if !reads && !WRITES.contains(&name) {
        return Ok(None);
    }
    let Some((_, Bson::String(coll))) = command.iter().next() else { return Ok(None) };
    let ns = Namespace::new(&ctx.db, coll)?;
    let Some((source, stages)) = resolve(ctx, &ns)? else { return Ok(None) };
    if !reads && source == ns {
        return super::timeseries_write::write(ctx, name, command, &ns).map(Some);
    }
    if !reads {
        return Err(refused(&ns));
    }
    let (mut aggregate, shape) = as_aggregate(name, command, &source, stages)?;
    for (key, value) in command {
        if key.starts_with('$') || COPIED.contains(&key.as_str()) {
            aggregate.insert(key.clone(), value.clone());
        }
    }
    let timeseries = is_timeseries(&ctx.server.engine, &source);
    if timeseries {
        to_stored_form(&mut aggregate);
    }
    let mut reply = super::aggregate::aggregate(ctx, &aggregate)?;
    if timeseries && super::bool_of(command, "explain", false)? {
        super::timeseries_query::measurement_stages(&mut reply);
    }
    shape(ctx, &ns, reply).map(Some)
}

/// The `aggregate` of a read of a time-series collection (its pipeline starting with the
/// `$replaceRoot` that reads the measurements) with what can run over the stored documents
/// moved in front of it and a key pattern `hint` on the stored fields
/// ([`super::timeseries_query`]), so that an index serves it.
fn to_stored_form(aggregate: &mut Document) {
    if let Ok(stages) = aggregate.get_array_mut("pipeline")
        && let Some((first, rest)) = stages.split_first()
    {
        *stages = super::timeseries_query::pipeline(first.clone(), rest);
    }
    if let Some(hint) = aggregate.get("hint") {
        let stored = super::timeseries_query::hint(hint);
        aggregate.insert("hint", stored);
    }
}

/// MongoDB's refusal of a find option an aggregation cannot express (`what`: `Option min`).
fn not_in_aggregation(what: &str) -> MongoError {
    MongoError::new(168, "InvalidPipelineOperator", format!("{what} not supported in aggregation."))
}

/// How the reply of the `aggregate` a read became is shaped back into the read's.
type Shape = fn(&Ctx, &Namespace, Document) -> Result<Document, MongoError>;

/// The `aggregate` over `source` that answers `command` (a `name`) on a view whose chain's
/// pipeline is `stages`.
fn as_aggregate(
    name: &str,
    command: &Document,
    source: &Namespace,
    mut stages: Vec<Bson>,
) -> Result<(Document, Shape), MongoError> {
    let get = |field: &str| command.get(field).filter(|v| !matches!(v, Bson::Null)).cloned();
    let mut cursor = Document::new();
    let shape: Shape = match name {
        "find" => {
            // MongoDB's refusal of the find options an aggregation cannot express.
            for option in ["min", "max"] {
                if !super::doc_of(command, option)?.is_empty() {
                    return Err(not_in_aggregation(&format!("Option {option}")));
                }
            }
            for option in ["returnKey", "showRecordId"] {
                if super::bool_of(command, option, false)? {
                    return Err(not_in_aggregation(&format!("Option {option}")));
                }
            }
            if super::bool_of(command, "tailable", false)? {
                return Err(MongoError::new(
                    168,
                    "InvalidPipelineOperator",
                    "Tailable cursors are not supported in aggregation.",
                ));
            }
            if let Some(filter) = get("filter") {
                stages.push(Bson::Document(doc! {"$match": filter}));
            }
            if let Some(sort) = get("sort") {
                stages.push(Bson::Document(doc! {"$sort": sort}));
            }
            if let Some(skip) = get("skip") {
                stages.push(Bson::Document(doc! {"$skip": skip}));
            }
            let limit = super::int_of(command, "limit")?.map(i64::abs).filter(|l| *l > 0);
            if let Some(limit) = limit {
                stages.push(Bson::Document(doc! {"$limit": limit}));
            }
            if let Some(projection) = get("projection").filter(|p| p != &Bson::Document(doc! {})) {
                stages.push(Bson::Document(doc! {"$project": projection}));
            }
            if let Some(size) = get("batchSize") {
                cursor.insert("batchSize", size);
            }
            if super::bool_of(command, "singleBatch", false)? {
                cursor.insert("batchSize", limit.unwrap_or(i64::from(i32::MAX)));
            }
            cursor_of_view
        }
        "aggregate" => {
            if let Some(Bson::Array(own)) = get("pipeline") {
                stages.extend(own);
            }
            cursor = super::doc_of(command, "cursor")?;
            cursor_of_view
        }
        "count" => {
            if let Some(query) = get("query") {
                stages.push(Bson::Document(doc! {"$match": query}));
            }
            if let Some(skip) = get("skip") {
                stages.push(Bson::Document(doc! {"$skip": skip}));
            }
            match super::int_of(command, "limit")?.map(i64::abs) {
                Some(limit) if limit > 0 => stages.push(Bson::Document(doc! {"$limit": limit})),
                _ => {}
            }
            stages.push(Bson::Document(doc! {"$count": "n"}));
            cursor.insert("batchSize", i32::MAX);
            count_of_view
        }
        _ => {
            let key = command.get_str("key").map_err(|_| {
                MongoError::type_mismatch("BSON field 'distinct.key' is missing or not a string")
            })?;
            if let Some(query) = get("query") {
                stages.push(Bson::Document(doc! {"$match": query}));
            }
            let path = format!("${key}");
            stages.push(Bson::Document(
                doc! {"$unwind": {"path": &path, "preserveNullAndEmptyArrays": false}},
            ));
            stages.push(Bson::Document(doc! {"$group": {"_id": &path}}));
            cursor.insert("batchSize", i32::MAX);
            distinct_of_view
        }
    };
    let aggregate = doc! {"aggregate": &source.coll, "pipeline": stages, "cursor": cursor};
    Ok((aggregate, shape))
}

/// A cursor over the view: named after it, and `getMore` on the view's name reads it.
fn cursor_of_view(ctx: &Ctx, ns: &Namespace, mut reply: Document) -> Result<Document, MongoError> {
    if let Ok(cursor) = reply.get_document_mut("cursor") {
        cursor.insert("ns", ns.full());
        if let Ok(id) = cursor.get_i64("id")
            && id != 0
        {
            ctx.server.cursors.rename(id, ns.full());
        }
    }
    Ok(reply)
}

/// `{n}` from `$count`'s one document (none: no documents).
fn count_of_view(_: &Ctx, _: &Namespace, reply: Document) -> Result<Document, MongoError> {
    let n = first_batch(&reply).first().and_then(|d| d.get("n").cloned()).unwrap_or(Bson::Int32(0));
    Ok(doc! {"n": n})
}

/// `{values}` from the groups of the distinct values.
fn distinct_of_view(_: &Ctx, _: &Namespace, reply: Document) -> Result<Document, MongoError> {
    let values: Vec<Bson> =
        first_batch(&reply).into_iter().filter_map(|d| d.get("_id").cloned()).collect();
    Ok(doc! {"values": values})
}

fn first_batch(reply: &Document) -> Vec<Document> {
    let batch = reply.get_document("cursor").and_then(|c| c.get_array("firstBatch"));
    batch.map(|b| b.iter().filter_map(|d| d.as_document().cloned()).collect()).unwrap_or_default()
}
