//! Databases and collections, derived from the engine's catalog through the namespace
//! mapping (`names.rs`): `listDatabases`, `listCollections`, `create`, `drop`,
//! `dropDatabase`. Creating and dropping go through `Engine::create_db`/`delete_db` with the
//! connection's user (server admins only, as for CouchDB databases), and a new collection's
//! `_security` names its database's MongoDB roles ([`super::roles`]); listing shows what the
//! user may read.

use std::collections::BTreeMap;
use std::sync::Arc;

use bson::{Bson, Document, doc};
use bunko_doc::ejson;
use bunko_engine::security::{Security, UserCtx};
use bunko_engine::{Database, Engine, Error};
use bunko_query::Dialect;
use serde_json::Value;

use super::{Ctx, bool_of, coll_options, cursor_reply, doc_of, namespace};
use crate::error::MongoError;
use crate::names::{COUCH_DB, Namespace};
use crate::query;

/// The acting user (commands past the auth check always have one).
pub(crate) fn user(ctx: &Ctx) -> UserCtx {
    ctx.session.user.clone().unwrap_or_default()
}

/// Whether `user` may read `db` (as `GET /{db}` decides over HTTP).
pub(crate) fn readable(db: &Database, user: &UserCtx) -> bool {
    Security::parse(&db.security()).is_ok_and(|s| s.is_member(user))
}

/// The collections of the engine, by MongoDB database.
fn collections(ctx: &Ctx) -> BTreeMap<String, Vec<(String, Arc<Database>)>> {
    let user = user(ctx);
    let mut out: BTreeMap<String, Vec<_>> = BTreeMap::new();
    for name in ctx.server.engine.db_names() {
        let (Some(ns), Some(db)) = (Namespace::from_engine(&name), ctx.server.engine.get_db(&name))
        else {
            continue;
        };
        if readable(&db, &user) {
            out.entry(ns.db).or_default().push((ns.coll, db));
        }
    }
    out
}

/// The engine names of the collections of the MongoDB database `db`.
pub(crate) fn in_database(engine: &Engine, db: &str) -> Vec<String> {
    let inside = |name: &String| Namespace::from_engine(name).is_some_and(|ns| ns.db == db);
    engine.db_names().into_iter().filter(inside).collect()
}

/// Keeps the entries a MongoDB `filter` matches.
fn filtered(entries: Vec<Document>, filter: &Document) -> Result<Vec<Document>, MongoError> {
    if filter.is_empty() {
        return Ok(entries);
    }
    let selector = query::selector(filter)?;
    Ok(entries
        .into_iter()
        .filter(|d| selector.matches(&Value::Object(ejson::to_json(d)), Dialect::Mongo))
        .collect())
}

pub(super) fn list_databases(ctx: &mut Ctx, command: &Document) -> Result<Document, MongoError> {
    let name_only = bool_of(command, "nameOnly", false)?;
    let mut total = 0_i64;
    let entries: Vec<Document> = collections(ctx)
        .into_iter()
        .map(|(name, colls)| {
            let size: u64 = colls.iter().map(|(_, db)| db.info().disk_size).sum();
            let empty = colls.iter().all(|(_, db)| db.info().stats.doc_count == 0);
            let size = i64::try_from(size).unwrap_or(i64::MAX);
            total = total.saturating_add(size);
            doc! {"name": name, "sizeOnDisk": size, "empty": empty}
        })
        .collect();
    let mut entries = filtered(entries, &doc_of(command, "filter")?)?;
    if name_only {
        entries = entries
            .into_iter()
            .map(|d| doc! {"name": d.get("name").cloned().unwrap_or(Bson::Null)})
            .collect();
        return Ok(doc! {"databases": entries});
    }
    Ok(doc! {"databases": entries, "totalSize": total, "totalSizeMb": total / (1024 * 1024)})
}

pub(super) fn list_collections(ctx: &mut Ctx, command: &Document) -> Result<Document, MongoError> {
    let name_only = bool_of(command, "nameOnly", false)?;
    let colls = collections(ctx).remove(&ctx.db).unwrap_or_default();
    let entries = colls
        .into_iter()
        .map(|(name, db)| {
            let options = coll_options::read(&db);
            if options.contains_key("viewOn") {
                return doc! {"name": name, "type": "view", "options": options, "info": {"readOnly": true}};
            }
            if options.contains_key("timeseries") {
                return super::timeseries::listed(name, options);
            }
            if options.contains_key("clusteredIndex") {
                // A clustered collection has no separate `_id` index.
                return doc! {
                    "name": name, "type": "collection", "options": options,
                    "info": {"readOnly": false},
                };
            }
            doc! {
                "name": name, "type": "collection", "options": options,
                "info": {"readOnly": false},
                "idIndex": {"v": 2, "key": {"_id": 1}, "name": "_id_"},
            }
        })
        .collect();
    let mut entries = filtered(entries, &doc_of(command, "filter")?)?;
    if name_only {
        let keep = |d: Document| doc! {"name": d.get("name").cloned().unwrap_or(Bson::Null), "type": d.get("type").cloned().unwrap_or(Bson::Null)};
        entries = entries.into_iter().map(keep).collect();
    }
    Ok(cursor_reply(0, &format!("{}.$cmd.listCollections", ctx.db), "firstBatch", entries))
}

pub(super) fn create(ctx: &mut Ctx, command: &Document) -> Result<Document, MongoError> {
    if command.contains_key("viewOn") || command.contains_key("pipeline") {
        return super::views::create(ctx, command);
    }
    if command.contains_key("timeseries") {
        return super::timeseries::create(ctx, command);
    }
    super::timeseries::check_plain_expiry(command)?;
    let ns = namespace(ctx, command)?;
    let mut options = super::capped::options(command)?;
    options.extend(coll_options::from_command(command)?);
    options.extend(super::clustered::options(command)?);
    let db = match ctx.server.engine.create_db(&user(ctx), &ns.engine_name(), false) {
        Ok(db) => db,
        // MongoDB 7+ accepts creating an existing collection with the same options.
        Err(Error::FileExists) if options.is_empty() => return Ok(Document::new()),
        Err(Error::FileExists) => {
            return Err(MongoError::namespace_exists(format!(
                "Collection {} already exists.",
                ns.full()
            )));
        }
        Err(err) => return Err(err.into()),
    };
    super::roles::grant(&db, &user(ctx))?;
    if !options.is_empty() {
        coll_options::write(&db, &user(ctx), options)?;
    }
    Ok(Document::new())
}

/// `collMod`: changes a collection's options ([`coll_options`]).
pub(super) fn coll_mod(ctx: &mut Ctx, command: &Document) -> Result<Document, MongoError> {
    let ns = namespace(ctx, command)?;
    let mut options = coll_options::from_command(command)?;
    let Some(db) = ctx.server.engine.get_db(&ns.engine_name()) else {
        return Err(MongoError::namespace_not_found(format!("ns does not exist: {}", ns.full())));
    };
    // A time-series collection's `collMod` is `timeseries_coll_mod`; these are its own.
    if command.contains_key("timeseries") {
        return Err(MongoError::new(
            72,
            "InvalidOptions",
            "option only supported on a time-series collection: timeseries",
        ));
    }
    if command.contains_key("expireAfterSeconds") {
        if coll_options::read(&db).contains_key("clusteredIndex") {
            return Err(MongoError::not_implemented(
                "expireAfterSeconds on a clustered collection is not supported yet",
            ));
        }
        return Err(MongoError::new(
            72,
            "InvalidOptions",
            "'expireAfterSeconds' option is only supported on collections clustered by _id",
        ));
    }
    let reply = match command.get("index") {
        Some(index) => super::coll_mod_index::apply(&db, &user(ctx), &ns, index)?,
        None => Document::new(),
    };
    options.extend(super::capped::resize(&db, command)?);
    coll_options::write(&db, &user(ctx), options)?;
    Ok(reply)
}

/// The collection's database, created (as MongoDB creates collections on first insert)
/// when missing.
pub(crate) fn open_or_create(ctx: &Ctx, ns: &Namespace) -> Result<Arc<Database>, MongoError> {
    open_or_create_as(&ctx.server.engine, &user(ctx), ns)
}

/// [`open_or_create`] by `user`.
pub(crate) fn open_or_create_as(
    engine: &Engine,
    user: &UserCtx,
    ns: &Namespace,
) -> Result<Arc<Database>, MongoError> {
    let name = ns.engine_name();
    if let Some(db) = engine.get_db(&name) {
        return Ok(db);
    }
    match engine.create_db(user, &name, false) {
        Ok(db) => {
            super::roles::grant(&db, user)?;
            Ok(db)
        }
        Err(Error::FileExists) => engine.db(&name).map_err(MongoError::from),
        Err(err) => Err(err.into()),
    }
}

pub(super) fn drop(ctx: &mut Ctx, command: &Document) -> Result<Document, MongoError> {
    let ns = namespace(ctx, command)?;
    match ctx.server.engine.delete_db(&user(ctx), &ns.engine_name()) {
        // MongoDB 7+ answers ok for a collection that does not exist.
        Ok(()) | Err(Error::NotFound(_)) => Ok(doc! {"nIndexesWas": 1, "ns": ns.full()}),
        Err(err) => Err(err.into()),
    }
}

/// `dropDatabase`: drops every collection of the database (server admins). On
/// [`COUCH_DB`] it is refused: that would delete every CouchDB database; drop them one by
/// one.
pub(super) fn drop_database(ctx: &mut Ctx, _: &Document) -> Result<Document, MongoError> {
    if ctx.db == COUCH_DB {
        return Err(MongoError::new(
            20,
            "IllegalOperation",
            format!("Cannot drop '{COUCH_DB}': its collections are all the CouchDB databases"),
        ));
    }
    let user = user(ctx);
    for name in in_database(&ctx.server.engine, &ctx.db) {
        match ctx.server.engine.delete_db(&user, &name) {
            Ok(()) | Err(Error::NotFound(_)) => {}
            Err(err) => return Err(err.into()),
        }
    }
    Ok(doc! {"dropped": &ctx.db})
}

/// `dbStats`: counts over the database's collections (what the user may read).
pub(super) fn db_stats(ctx: &mut Ctx, command: &Document) -> Result<Document, MongoError> {
    let scale = super::stats::scale_of(command)?;
    let colls = collections(ctx).remove(&ctx.db).unwrap_or_default();
    let (mut objects, mut data, mut storage) = (0_u64, 0_u64, 0_u64);
    let (mut indexes, mut index_size) = (0_i32, 0_i64);
    for (_, db) in &colls {
        let info = db.info();
        objects += super::stats::doc_count(db);
        data += info.stats.external;
        storage += info.stats.active;
        let (sizes, total) = super::stats::index_sizes(db, scale)?;
        indexes += sizes.len() as i32;
        index_size += total;
    }
    let scaled = |n: u64| i64::try_from(n).unwrap_or(i64::MAX) / scale;
    let avg = if objects == 0 { 0.0 } else { data as f64 / objects as f64 };
    Ok(doc! {
        "db": &ctx.db, "collections": colls.len() as i32, "views": 0,
        "objects": i64::try_from(objects).unwrap_or(i64::MAX), "avgObjSize": avg,
        "dataSize": scaled(data), "storageSize": scaled(storage),
        "indexes": indexes, "indexSize": index_size,
        "totalSize": scaled(storage) + index_size, "scaleFactor": scale,
    })
}
