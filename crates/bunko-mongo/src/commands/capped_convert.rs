//! `cloneCollectionAsCapped` and `convertToCapped`: a collection copied into a new capped
//! collection, as MongoDB does it.
//!
//! - `cloneCollectionAsCapped: from, toCollection, size` creates `toCollection` capped at
//!   `size` (rounded as `create` rounds it; a capped source's `max` is kept) with the
//!   source's other options (its validator, applied only after the copy: MongoDB copies with
//!   document validation off), then inserts the source's documents in its natural order
//!   ([`super::capped::Scan`]), capped by the engine as any insert is, so the newest
//!   documents that fit remain. Indexes are not copied (MongoDB: only `_id`'s).
//! - `convertToCapped: coll, size` clones into a temporary collection
//!   (`tmp<5 random>.convertToCapped.<coll>`) and renames it over `coll` (dropping it, and
//!   so its indexes), as MongoDB does; the temporary collection is dropped if the copy fails.
//!
//! MongoDB's errors: a missing source is `NamespaceNotFound` (26, `source collection
//! <ns> does not exist`), a view `CommandNotSupportedOnView` (166), an existing target
//! `NamespaceExists` (48), a missing or mistyped `toCollection`/`size` MongoDB's IDL errors.

use bson::{Bson, Document, doc};
use bunko_engine::security::UserCtx;
use bunko_engine::{Error, WriteOptions};
use rand::Rng;

use super::admin::user;
use super::capped::{self, Request, Scan};
use super::{Ctx, coll_options, namespace};
use crate::error::MongoError;
use crate::names::Namespace;

/// `cloneCollectionAsCapped`.
pub(super) fn clone_collection_as_capped(
    ctx: &mut Ctx,
    command: &Document,
) -> Result<Document, MongoError> {
    const NAME: &str = "cloneCollectionAsCapped";
    let from = namespace(ctx, command)?;
    let to = match command.get("toCollection") {
        Some(Bson::String(name)) => Namespace::new(&ctx.db, name)?,
        None => return Err(missing(NAME, "toCollection")),
        Some(other) => return Err(wrong_type(NAME, "toCollection", other, "type 'string'")),
    };
    let size = size_of(command, NAME)?;
    clone(ctx, &from, &to, size)?;
    Ok(Document::new())
}

/// `convertToCapped`.
pub(super) fn convert_to_capped(ctx: &mut Ctx, command: &Document) -> Result<Document, MongoError> {
    let ns = namespace(ctx, command)?;
    let size = size_of(command, "convertToCapped")?;
    let engine = ctx.server.engine.clone();
    let user = user(ctx);
    let temp = loop {
        let tag: String =
            (0..5).map(|_| rand::rng().sample(rand::distr::Alphanumeric) as char).collect();
        let temp = Namespace::new(&ns.db, &format!("tmp{tag}.convertToCapped.{}", ns.coll))?;
        if engine.get_db(&temp.engine_name()).is_none() {
            break temp;
        }
    };
    let converted = clone(ctx, &ns, &temp, size).and_then(|()| {
        Ok(engine.rename_db(&user, &temp.engine_name(), &ns.engine_name(), true)?)
    });
    if converted.is_err() {
        match engine.delete_db(&user, &temp.engine_name()) {
            Ok(()) | Err(Error::NotFound(_)) => {}
            Err(err) => tracing::warn!(%err, "a convertToCapped temporary collection was left"),
        }
    }
    converted.map(|()| Document::new())
}

/// Copies `from` into the new capped collection `to` of `size` bytes (see the module docs).
fn clone(ctx: &Ctx, from: &Namespace, to: &Namespace, size: f64) -> Result<(), MongoError> {
    let engine = &ctx.server.engine;
    let user = user(ctx);
    let Some(source) = engine.get_db(&from.engine_name()) else {
        return Err(no_source(from));
    };
    let mut options = coll_options::read(&source);
    if options.contains_key("viewOn") {
        return Err(MongoError::new(
            166,
            "CommandNotSupportedOnView",
            format!("cloneCollectionAsCapped not supported for views: {}", from.full()),
        ));
    }
    let exists = || {
        MongoError::namespace_exists(format!(
            "cloneCollectionAsCapped failed - destination collection {} already exists. source collection: {}",
            to.full(),
            from.full()
        ))
    };
    if engine.get_db(&to.engine_name()).is_some() {
        return Err(exists());
    }
    let mut create = doc! {"create": &to.coll, "capped": true, "size": size};
    if let (Some(_), Some(max)) = (capped::of(&source), options.get("max")) {
        create.insert("max", max.clone());
    }
    let cap_options = capped::options(&create)?;
    for field in ["capped", "size", "max"] {
        options.remove(field);
    }
    let target = match engine.create_db(&user, &to.engine_name(), false) {
        Ok(db) => db,
        Err(Error::FileExists) => return Err(exists()),
        Err(err) => return Err(err.into()),
    };
    super::roles::grant(&target, &user)?;
    coll_options::write(&target, &user, cap_options)?;
    copy((source, user.clone()), &target)?;
    if !options.is_empty() {
        coll_options::write(&target, &user, options)?;
    }
    Ok(())
}

/// Inserts the documents of `source` (as `user` reads them) into the capped `target`, in
/// natural order, a page per commit (the engine caps each as it caps any insert).
fn copy(
    (source, user): (std::sync::Arc<bunko_engine::Database>, UserCtx),
    target: &bunko_engine::Database,
) -> Result<(), MongoError> {
    let request = Request {
        selector: crate::query::selector(&Document::new())?,
        projection: None,
        skip: 0,
        limit: usize::MAX,
        descending: false,
        tailable: false,
        await_data: false,
    };
    let mut scan = Scan::new(user.clone(), source, request);
    loop {
        let (batch, more) = scan.next(1000)?;
        let mut docs = Vec::with_capacity(batch.len());
        for doc in batch {
            docs.push(super::crud::prepare_for(target, &Bson::Document(doc), false)?.0);
        }
        for written in target.update_docs(&user, docs, WriteOptions::default())? {
            written.result?;
        }
        if !more {
            return Ok(());
        }
    }
}

/// The `size` field of a command: a number (rounded and checked by `capped::options`).
fn size_of(command: &Document, name: &str) -> Result<f64, MongoError> {
    match command.get("size") {
        Some(Bson::Int32(n)) => Ok(f64::from(*n)),
        Some(Bson::Int64(n)) => Ok(*n as f64),
        Some(Bson::Double(d)) => Ok(*d),
        Some(Bson::Decimal128(d)) => d.to_string().parse().map_err(|_| {
            MongoError::bad_value(format!("BSON field '{name}.size' is not a number"))
        }),
        None => Err(missing(name, "size")),
        Some(other) => Err(wrong_type(name, "size", other, "types '[long, int, decimal, double]'")),
    }
}

fn no_source(from: &Namespace) -> MongoError {
    MongoError::namespace_not_found(format!("source collection {} does not exist", from.full()))
}

fn missing(command: &str, field: &str) -> MongoError {
    MongoError::new(
        40414,
        "Location40414",
        format!("BSON field '{command}.{field}' is missing but a required field"),
    )
}

fn wrong_type(command: &str, field: &str, value: &Bson, expected: &str) -> MongoError {
    MongoError::type_mismatch(format!(
        "BSON field '{command}.{field}' is the wrong type '{}', expected {expected}",
        super::type_of(Some(value))
    ))
}
