//! `collMod`'s `index` option: `{name: … | keyPattern: {…}, hidden, expireAfterSeconds,
//! prepareUnique, unique, forceNonUnique}` hides or unhides an index (mongosh's
//! `hideIndex`/`unhideIndex`), changes a TTL index's expiry (or makes a single-field index a
//! TTL index), and converts an index to unique in MongoDB 6's two steps or back
//! ([`super::coll_mod_unique`]), with MongoDB's checks, codes and messages (its
//! `coll_mod.cpp`/`coll_mod_index.cpp`). The engine keeps the index's entries as they are
//! (`bunko_engine::Database::modify_mongo_index`). The reply names what changed:
//! `expireAfterSeconds_old`/`_new`, `hidden_old`/`_new`, `unique_new`,
//! `prepareUnique_old`/`_new`, `forceNonUnique_new` (a no-op names nothing).

use bson::{Bson, Document};
use bunko_engine::Database;
use bunko_engine::index::mongo::{MongoIndexChange, MongoSpec};

use super::coll_mod_unique::{self, Uniqueness};
use super::indexes::{by_pattern, describe_key};
use crate::error::MongoError;
use crate::names::Namespace;

/// The fields `index` takes (MongoDB 7's IDL); any other is refused as unknown.
const FIELDS: &[&str] = &[
    "name",
    "keyPattern",
    "expireAfterSeconds",
    "hidden",
    "unique",
    "prepareUnique",
    "forceNonUnique",
];

/// The fields that ask for a change.
const CHANGES: &[&str] =
    &["expireAfterSeconds", "hidden", "unique", "prepareUnique", "forceNonUnique"];

/// The index `collMod` names: the `_id` index, or a MongoDB index with its options.
pub(super) enum Target {
    Id,
    Index(String, Box<MongoSpec>),
}

/// Checks `collMod`'s `index` and applies it; the reply's fields about it.
pub(super) fn apply(
    db: &Database,
    user: &bunko_engine::security::UserCtx,
    ns: &Namespace,
    index: &Bson,
) -> Result<Document, MongoError> {
    let Bson::Document(index) = index else {
        return Err(wrong_type("collMod.index", index, "object"));
    };
    if let Some(field) = index.keys().find(|f| !FIELDS.contains(&f.as_str())) {
        return Err(MongoError::unknown_field(&format!("collMod.index.{field}")));
    }
    // Types first, as MongoDB's parser checks them before the request's sense.
    let hidden = flag(index, "hidden")?;
    let uniqueness = Uniqueness::requested(index)?;
    let ttl = requested(index)?;
    if ttl.is_some() && super::capped::of(db).is_some() {
        return Err(invalid("TTL indexes are not supported for capped collections."));
    }
    let target = target(db, ns, index)?;
    let mut reply = Document::new();
    let mut change = MongoIndexChange::default();
    if let Some(ttl) = ttl {
        let old = ttl_of(&target)?;
        if old != Some(ttl) {
            if let Some(old) = old {
                reply.insert("expireAfterSeconds_old", old);
            }
            reply.insert("expireAfterSeconds_new", ttl);
            change.expire_after_seconds = Some(ttl);
        }
    }
    let unique = uniqueness.unique_change(&target)?;
    if let Some(hide) = hidden {
        let old = hidden_of(db, &target)?;
        if old != hide {
            reply.insert("hidden_old", old);
            reply.insert("hidden_new", hide);
            change.hidden = Some(hide);
        }
    }
    uniqueness.apply(&target, unique, &mut change, &mut reply)?;
    let asked = CHANGES.iter().filter(|f| index.contains_key(*f)).count();
    if reply.contains_key("prepareUnique_new") && asked > 1 {
        return Err(invalid("prepareUnique cannot be combined with any other modification."));
    }
    if let Target::Index(name, _) = &target
        && change != MongoIndexChange::default()
    {
        if change.unique == Some(true) {
            coll_mod_unique::check_no_duplicates(db, name)?;
        }
        db.modify_mongo_index(user, name, change)?;
    }
    Ok(reply)
}

/// The `expireAfterSeconds` asked for, checked, after MongoDB's checks of the request as a
/// whole.
fn requested(index: &Document) -> Result<Option<i64>, MongoError> {
    let ttl = match index.get("expireAfterSeconds") {
        None => None,
        Some(Bson::Int32(n)) => Some(i64::from(*n)),
        Some(Bson::Int64(n)) => Some(*n),
        Some(Bson::Double(d)) if d.is_finite() => Some(d.trunc() as i64),
        Some(other) => {
            return Err(MongoError::type_mismatch(format!(
                "BSON field 'collMod.index.expireAfterSeconds' is the wrong type '{}', expected types '[long, int, decimal, double]'",
                super::type_of(Some(other))
            )));
        }
    };
    if index.contains_key("name") && index.contains_key("keyPattern") {
        return Err(invalid("Cannot specify both key pattern and name."));
    }
    if !index.contains_key("name") && !index.contains_key("keyPattern") {
        return Err(invalid("Must specify either index name or key pattern."));
    }
    if !CHANGES.iter().any(|f| index.contains_key(f)) {
        return Err(invalid("no expireAfterSeconds, hidden, unique, or prepareUnique field"));
    }
    if index.contains_key("unique") && index.contains_key("forceNonUnique") {
        return Err(invalid(
            "collMod does not support 'unique' and 'forceNonUnique' options at the same time",
        ));
    }
    match ttl {
        Some(n) if n < 0 => {
            Err(invalid("TTL index 'expireAfterSeconds' option cannot be less than 0"))
        }
        Some(n) if n > i64::from(i32::MAX) => Err(invalid(
            "TTL index 'expireAfterSeconds' option must be within an acceptable range, try a lower number",
        )),
        _ => Ok(ttl),
    }
}

/// A boolean field of `index` (`TypeMismatch` for another type).
pub(super) fn flag(index: &Document, field: &str) -> Result<Option<bool>, MongoError> {
    match index.get(field) {
        None => Ok(None),
        Some(Bson::Boolean(b)) => Ok(Some(*b)),
        Some(other) => Err(wrong_type(&format!("collMod.index.{field}"), other, "bool")),
    }
}

/// The index `name` or `keyPattern` names (`IndexNotFound` when none).
fn target(db: &Database, ns: &Namespace, index: &Document) -> Result<Target, MongoError> {
    let found = match (index.get("name"), index.get("keyPattern")) {
        (Some(Bson::String(name)), _) => {
            if *name == super::clustered::id_index_name(db) {
                return Ok(Target::Id);
            }
            let found = db.mongo_indexes().into_iter().find(|i| i.def.name == *name);
            found.ok_or_else(|| not_found(name, ns))?
        }
        (Some(other), _) => return Err(wrong_type("collMod.index.name", other, "string")),
        (_, Some(Bson::Document(key))) => {
            if key.len() == 1 && key.contains_key("_id") {
                return Ok(Target::Id);
            }
            by_pattern(db, key).ok_or_else(|| not_found(&describe_key(key), ns))?
        }
        (_, other) => {
            let other = other.unwrap_or(&Bson::Null);
            return Err(wrong_type("collMod.index.keyPattern", other, "object"));
        }
    };
    match found.def.mongo.clone() {
        Some(spec) => Ok(Target::Index(found.def.name.clone(), Box::new(spec))),
        None => Err(not_found(&found.def.name, ns)),
    }
}

/// The index's `expireAfterSeconds` now, after MongoDB's checks that it may have one.
fn ttl_of(target: &Target) -> Result<Option<i64>, MongoError> {
    match target {
        Target::Id => Err(invalid("the _id field does not support TTL indexes")),
        Target::Index(_, spec) if spec.expire_after_seconds.is_some() => {
            Ok(spec.expire_after_seconds)
        }
        Target::Index(_, spec) if spec.key.len() != 1 => Err(invalid(
            "TTL indexes are single-field indexes, compound indexes do not support TTL",
        )),
        Target::Index(_, spec) if spec.hashed.is_some() => Err(MongoError::not_implemented(
            "expireAfterSeconds on a hashed index is not supported",
        )),
        Target::Index(..) => Ok(None),
    }
}

/// Whether the index is hidden now, after MongoDB's checks that it may be hidden.
fn hidden_of(db: &Database, target: &Target) -> Result<bool, MongoError> {
    match target {
        Target::Id if super::clustered::index(&super::coll_options::read(db)).is_some() => {
            Err(MongoError::new(
                6011800,
                "Location6011800",
                "The 'hidden' option is not supported for a clusteredIndex",
            ))
        }
        Target::Id => Err(MongoError::bad_value("can't hide _id index")),
        Target::Index(_, spec) => Ok(spec.hidden),
    }
}

pub(super) fn invalid(msg: impl Into<String>) -> MongoError {
    MongoError::new(72, "InvalidOptions", msg)
}

fn not_found(what: &str, ns: &Namespace) -> MongoError {
    MongoError::new(27, "IndexNotFound", format!("cannot find index {what} for ns {}", ns.full()))
}

fn wrong_type(field: &str, value: &Bson, expected: &str) -> MongoError {
    MongoError::type_mismatch(format!(
        "BSON field '{field}' is the wrong type '{}', expected type '{expected}'",
        super::type_of(Some(value))
    ))
}
