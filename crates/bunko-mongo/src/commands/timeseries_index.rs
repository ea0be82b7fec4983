//! Indexes of a time-series collection: `createIndexes`, `dropIndexes` and `listIndexes` as
//! MongoDB 8 takes them, and the `{<metaField>: 1, <timeField>: 1}` index `create` makes.
//!
//! An index on measurement fields is an ordinary MongoDB index ([`super::indexes`]) on the
//! stored documents' `m.<field>` ([`super::timeseries_query`]), under the name the user
//! gave (or MongoDB's default from the user's key pattern); `listIndexes` shows its key
//! pattern and `partialFilterExpression` on the measurement's fields again. The hidden TTL
//! index of `expireAfterSeconds` is neither listed nor dropped, and there is no `_id` index
//! (as MongoDB lists none for a time-series collection).
//!
//! MongoDB's refusals: a `text` index and `unique` are `InvalidOptions` (72); the time field
//! and measurement fields take only 1/-1 (`CannotCreateIndex`, 67; the meta field and its
//! subfields take `hashed` too); `sparse` only on the time and meta fields (72); a
//! `partialFilterExpression` with a `collation` is `IndexOptionsConflict` (85); a TTL index
//! needs a `partialFilterExpression` on the meta field only (72), one field (67), the time
//! field (72). A partial filter Bunko cannot move onto the stored form (`$expr`, …) is
//! `NotImplemented`.

use std::sync::Arc;

use bson::{Bson, Document, doc};
use bunko_engine::Database;

use super::indexes::describe_key;
use super::timeseries::TTL_INDEX;
use super::timeseries_query::{exact, measurement_filter, stored_key};
use super::{Ctx, coll_options, cursor_reply};
use crate::error::MongoError;
use crate::names::Namespace;

/// A time-series collection's time field and meta field.
pub(super) struct Fields {
    pub time: String,
    pub meta: Option<String>,
}

impl Fields {
    pub(super) fn of(options: &Document) -> Fields {
        let ts = options.get_document("timeseries").ok();
        let get = |f| ts.and_then(|t| t.get_str(f).ok()).map(str::to_string);
        Fields { time: get("timeField").unwrap_or_default(), meta: get("metaField") }
    }

    /// Whether `path` is the meta field or one of its subfields.
    fn is_meta(&self, path: &str) -> bool {
        self.meta.as_deref().is_some_and(|meta| {
            path == meta || path.strip_prefix(meta).is_some_and(|r| r.starts_with('.'))
        })
    }
}

/// The index MongoDB 6.3+ creates with a time-series collection that has a meta field:
/// `{<meta>: 1, <time>: 1}`, named `<meta>_1_<time>_1`.
pub(super) fn default_index(fields: &Fields) -> Option<Bson> {
    let meta = fields.meta.as_deref()?;
    let key = doc! {meta: 1, &fields.time: 1};
    let name = format!("{meta}_1_{}_1", fields.time);
    Some(Bson::Document(doc! {"key": stored_key(&key), "name": name}))
}

fn invalid_options(message: &str) -> MongoError {
    MongoError::new(72, "InvalidOptions", message)
}

fn cannot_create(message: String) -> MongoError {
    MongoError::new(67, "CannotCreateIndex", message)
}

/// `createIndexes` on a time-series collection: each spec checked as MongoDB checks it and
/// moved onto the stored fields, then created as any collection's.
pub(super) fn create(
    ctx: &mut Ctx,
    db: &Arc<Database>,
    command: &Document,
) -> Result<Document, MongoError> {
    let fields = Fields::of(&coll_options::read(db));
    let Some(Bson::Array(specs)) = command.get("indexes") else {
        return Err(MongoError::failed_to_parse(
            "BSON field 'createIndexes.indexes' is missing but a required field",
        ));
    };
    let stored = specs.iter().map(|s| stored_spec(&fields, s)).collect::<Result<Vec<_>, _>>()?;
    let mut moved = command.clone();
    moved.insert("indexes", stored);
    let mut reply = super::indexes::create_indexes(ctx, &moved)?;
    // Counted as `listIndexes` lists them: no `_id` index, no hidden TTL index.
    let hidden = 1 + i32::from(has_ttl(db));
    for count in ["numIndexesBefore", "numIndexesAfter"] {
        if let Ok(n) = reply.get_i32(count) {
            reply.insert(count, n - hidden);
        }
    }
    Ok(reply)
}

fn has_ttl(db: &Database) -> bool {
    db.mongo_indexes().iter().any(|i| i.def.name == TTL_INDEX)
}

/// One index spec of a time-series collection as the stored documents' (see module docs).
fn stored_spec(fields: &Fields, spec: &Bson) -> Result<Bson, MongoError> {
    let Bson::Document(spec) = spec else {
        return Err(MongoError::type_mismatch("Each index specification must be an object"));
    };
    let Some(Bson::Document(key)) = spec.get("key") else {
        // The generic checks give MongoDB's errors for a missing or empty key.
        return Ok(Bson::Document(spec.clone()));
    };
    check_key(fields, key)?;
    if super::bool_of(spec, "unique", false)? {
        return Err(invalid_options("Unique indexes are not supported on time-series collections"));
    }
    if super::bool_of(spec, "sparse", false)?
        && key.keys().any(|f| *f != fields.time && !fields.is_meta(f))
    {
        return Err(invalid_options(
            "Sparse indexes are not supported on time-series measurements",
        ));
    }
    let mut out = spec.clone();
    if !spec.contains_key("name") && !key.is_empty() {
        out.insert("name", super::indexes::default_name(key));
    }
    out.insert("key", stored_key(key));
    let on_meta_only = match spec.get("partialFilterExpression") {
        Some(Bson::Document(filter)) => {
            if spec.contains_key("collation") {
                return Err(MongoError::new(
                    85,
                    "IndexOptionsConflict",
                    "On a time-series collection, partialFilterExpression and collation arguments are incompatible",
                ));
            }
            let Some(moved) = exact(filter) else {
                return Err(MongoError::not_implemented(
                    "this partialFilterExpression on a time-series collection is not supported yet",
                ));
            };
            out.insert("partialFilterExpression", moved);
            paths(filter).iter().all(|p| fields.is_meta(p))
        }
        _ => false,
    };
    if spec.contains_key("expireAfterSeconds") {
        check_ttl(fields, key, on_meta_only)?;
    }
    Ok(Bson::Document(out))
}

/// MongoDB's checks of a time-series index's key pattern.
fn check_key(fields: &Fields, key: &Document) -> Result<(), MongoError> {
    if key.values().any(|d| d.as_str() == Some("text")) {
        return Err(invalid_options("Text indexes are not supported on time-series collections"));
    }
    for (field, dir) in key {
        let number = matches!(dir, Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_));
        if number || fields.is_meta(field) {
            continue;
        }
        let which = if *field == fields.time { "the time field" } else { "measurement fields" };
        return Err(cannot_create(format!(
            "BadValue: Invalid index spec for time-series collection: {}. Indexes on {which} must be ascending or descending (numbers only): {field}: {dir}",
            describe_key(key)
        )));
    }
    Ok(())
}

/// MongoDB's checks of a TTL index on a time-series collection.
fn check_ttl(fields: &Fields, key: &Document, on_meta_only: bool) -> Result<(), MongoError> {
    if !on_meta_only {
        return Err(invalid_options(
            "TTL indexes on time-series collections require a partialFilterExpression on the metaField",
        ));
    }
    if key.len() != 1 {
        return Err(cannot_create(format!(
            "TTL indexes are single-field indexes, compound indexes do not support TTL. Index spec: {}",
            describe_key(key)
        )));
    }
    if key.keys().next() != Some(&fields.time) {
        return Err(invalid_options(
            "TTL indexes on non-time fields are not supported on time-series collections",
        ));
    }
    Ok(())
}

/// The field paths a filter reads (through `$and`, `$or`, `$nor`).
fn paths(filter: &Document) -> Vec<String> {
    let mut out = Vec::new();
    for (key, value) in filter {
        match value {
            Bson::Array(items) if key.starts_with('$') => {
                for item in items.iter().filter_map(Bson::as_document) {
                    out.extend(paths(item));
                }
            }
            _ if !key.starts_with('$') => out.push(key.clone()),
            _ => {}
        }
    }
    out
}

/// `listIndexes` on a time-series collection: its indexes with the measurements' fields.
pub(super) fn list(db: &Database, ns: &Namespace) -> Result<Document, MongoError> {
    let mut all = Vec::new();
    for index in db.mongo_indexes().iter().filter(|i| i.def.name != TTL_INDEX) {
        let mut shown = super::indexes::describe(&index.def);
        for field in ["key", "partialFilterExpression"] {
            if let Ok(stored) = shown.get_document(field) {
                let measurement = measurement_filter(stored);
                shown.insert(field, measurement);
            }
        }
        all.push(shown);
    }
    Ok(cursor_reply(0, &ns.full(), "firstBatch", all))
}

/// `dropIndexes` on a time-series collection: a key pattern on the measurements' fields,
/// `"*"` every listed index; the hidden TTL index is not found by name.
pub(super) fn drop(
    ctx: &mut Ctx,
    db: &Arc<Database>,
    command: &Document,
) -> Result<Document, MongoError> {
    let ns = super::namespace(ctx, command)?;
    let not_found = || {
        MongoError::new(
            27,
            "IndexNotFound",
            format!("index not found with name [{TTL_INDEX}] in collection {}", ns.full()),
        )
    };
    let index = match command.get("index") {
        Some(Bson::String(all)) if all == "*" => {
            let names: Vec<String> =
                db.mongo_indexes().iter().map(|i| i.def.name.clone()).collect();
            Bson::Array(names.into_iter().filter(|n| n != TTL_INDEX).map(Bson::String).collect())
        }
        Some(Bson::String(name)) if name == TTL_INDEX => return Err(not_found()),
        Some(Bson::Array(names)) if names.iter().any(|n| n.as_str() == Some(TTL_INDEX)) => {
            return Err(not_found());
        }
        Some(Bson::Document(key)) if !key.is_empty() => {
            if super::indexes::by_pattern(db, &stored_key(key)).is_none() {
                return Err(MongoError::new(
                    27,
                    "IndexNotFound",
                    format!("can't find index with key: {}", describe_key(key)),
                ));
            }
            Bson::Document(stored_key(key))
        }
        Some(other) => other.clone(),
        None => Bson::Null,
    };
    let listed = db.mongo_indexes().len() - usize::from(has_ttl(db));
    let mut moved = command.clone();
    moved.insert("index", index);
    if moved.get("index") == Some(&Bson::Null) {
        moved.remove("index");
    }
    super::indexes::drop_indexes(ctx, &moved)?;
    Ok(doc! {"nIndexesWas": listed as i32})
}
