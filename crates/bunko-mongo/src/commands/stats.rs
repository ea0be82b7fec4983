//! `collStats`, the index sizes of `dbStats`, and `renameCollection`. Stats are counts and
//! sizes from the engine's per-database statistics (the same ones `GET /{db}` shows) and the
//! byte size of each index's entries.

use bson::{Document, doc};
use bunko_engine::{Database, Error};

use super::crud::readable_db;
use super::{Ctx, int_of, namespace};
use crate::error::MongoError;
use crate::names::Namespace;

/// The `scale` of a stats command (1 when absent).
pub(super) fn scale_of(command: &Document) -> Result<i64, MongoError> {
    match int_of(command, "scale")? {
        None => Ok(1),
        Some(n) if n >= 1 => Ok(n),
        Some(_) => Err(MongoError::bad_value("Scale factor must be greater than zero")),
    }
}

/// The documents of a collection: the database's, without `_design/mongodb` (the index
/// definitions and options; other design documents written over HTTP still count).
pub(super) fn doc_count(db: &Database) -> u64 {
    let defs = u64::from(db.current_rev(super::coll_options::DDOC).is_ok_and(|r| r.is_some()));
    db.info().stats.doc_count.saturating_sub(defs)
}

fn clamp(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The index sizes of a collection and their sum. A time-series collection's are those
/// `listIndexes` lists (no `_id_`, not the hidden `expireAfterSeconds` index).
pub(super) fn index_sizes(db: &Database, scale: i64) -> Result<(Document, i64), MongoError> {
    let mut sizes = Document::new();
    let mut total = 0;
    let timeseries = super::coll_options::read(db).contains_key("timeseries");
    for (name, bytes) in db.mongo_index_sizes()? {
        if timeseries && (name == "_id_" || name == super::timeseries::TTL_INDEX) {
            continue;
        }
        total += clamp(bytes);
        sizes.insert(name, clamp(bytes) / scale);
    }
    Ok((sizes, total / scale))
}

pub(super) fn coll_stats(ctx: &mut Ctx, command: &Document) -> Result<Document, MongoError> {
    let ns = namespace(ctx, command)?;
    let scale = scale_of(command)?;
    let Some(db) = readable_db(ctx, &ns, "collStats")? else {
        return Err(MongoError::namespace_not_found(format!(
            "Collection [{}] not found.",
            ns.full()
        )));
    };
    let stats = db.info().stats;
    let (count, size, storage) = (doc_count(&db), stats.external, stats.active);
    let (index_sizes, total_index) = index_sizes(&db, scale)?;
    let avg = clamp(size.checked_div(count).unwrap_or(0));
    let mut reply = doc! {
        "ns": ns.full(),
        "size": clamp(size) / scale,
        "count": clamp(count),
        "avgObjSize": avg,
        "storageSize": clamp(storage) / scale,
        "freeStorageSize": 0_i64,
        "capped": false,
        "nindexes": index_sizes.len() as i32,
        "totalIndexSize": total_index,
        "totalSize": clamp(storage) / scale + total_index,
        "indexSizes": index_sizes,
        "scaleFactor": scale,
    };
    super::capped::stats(&db, &mut reply);
    Ok(reply)
}

/// `renameCollection: "db.from", to: "db.to", dropTarget`: run on `admin`; the engine
/// renames the collection's database (within or across MongoDB databases), server admins
/// only, as creating and dropping collections.
pub(super) fn rename_collection(ctx: &mut Ctx, command: &Document) -> Result<Document, MongoError> {
    if ctx.db != "admin" {
        return Err(MongoError::unauthorized(
            "renameCollection may only be run against the admin database.",
        ));
    }
    let full = |field: &str| -> Result<Namespace, MongoError> {
        let text = command.get_str(field).map_err(|_| {
            MongoError::type_mismatch(format!(
                "BSON field 'renameCollection.{field}' must be a string"
            ))
        })?;
        let (db, coll) = text.split_once('.').ok_or_else(|| {
            MongoError::invalid_namespace(format!("Invalid namespace specified '{text}'"))
        })?;
        Namespace::new(db, coll)
    };
    let (from, to) = (full("renameCollection")?, full("to")?);
    let drop_target = super::bool_of(command, "dropTarget", false)?;
    if from == to {
        return Err(MongoError::new(20, "IllegalOperation", "Can't rename a collection to itself"));
    }
    let user = super::admin::user(ctx);
    let engine = &ctx.server.engine;
    match engine.rename_db(&user, &from.engine_name(), &to.engine_name(), drop_target) {
        Ok(()) => Ok(Document::new()),
        Err(Error::NotFound(_)) => Err(MongoError::namespace_not_found(format!(
            "Source collection {} does not exist",
            from.full()
        ))),
        Err(Error::FileExists) => {
            Err(MongoError::new(48, "NamespaceExists", "target namespace exists"))
        }
        Err(err) => Err(err.into()),
    }
}
