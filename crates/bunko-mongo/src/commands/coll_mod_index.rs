//! `collMod`'s `index` option: `{name: … | keyPattern: {…}, hidden: bool,
//! expireAfterSeconds: n}` hides or unhides an index (mongosh's `hideIndex`/`unhideIndex`)
//! and changes a TTL index's expiry, or makes a single-field index a TTL index, with
//! MongoDB's checks, codes and messages (its `coll_mod.cpp`). The engine keeps the index's
//! entries as they are (`bunko_engine::Database::modify_mongo_index`). The reply names what
//! changed: `hidden_old`/`hidden_new`, `expireAfterSeconds_old`/`_new` (a no-op names
//! nothing). Converting an index to `unique` (`unique`, `prepareUnique`, MongoDB 6+) and
//! `forceNonUnique` are refused.

use bson::{Bson, Document};
use bunko_engine::Database;

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

/// The index `collMod` names: the `_id` index, or a MongoDB index with its options.
enum Target {
    Id,
    Index { name: String, hidden: bool, ttl: Option<i64>, fields: usize, hashed: bool },
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
    let (hidden, ttl) = requested(index)?;
    let target = target(db, ns, index)?;
    let mut reply = Document::new();
    let (mut new_hidden, mut new_ttl) = (None, None);
    if let Some(ttl) = ttl {
        if super::capped::of(db).is_some() {
            return Err(invalid("TTL indexes are not supported for capped collections."));
        }
        let old = ttl_of(&target)?;
        if old != Some(ttl) {
            if let Some(old) = old {
                reply.insert("expireAfterSeconds_old", old);
            }
            reply.insert("expireAfterSeconds_new", ttl);
            new_ttl = Some(ttl);
        }
    }
    if let Some(hide) = hidden {
        let old = hidden_of(db, &target)?;
        if old != hide {
            reply.insert("hidden_old", old);
            reply.insert("hidden_new", hide);
            new_hidden = Some(hide);
        }
    }
    if let Target::Index { name, .. } = &target
        && (new_hidden.is_some() || new_ttl.is_some())
    {
        db.modify_mongo_index(user, name, new_hidden, new_ttl)?;
    }
    Ok(reply)
}

/// The `hidden` and `expireAfterSeconds` asked for, checked; the unique conversions are
/// refused.
fn requested(index: &Document) -> Result<(Option<bool>, Option<i64>), MongoError> {
    let named = index.contains_key("name") || index.contains_key("keyPattern");
    if index.contains_key("name") && index.contains_key("keyPattern") {
        return Err(invalid("Cannot specify both key pattern and name."));
    }
    if !named {
        return Err(invalid("Must specify either index name or key pattern."));
    }
    let changes = ["expireAfterSeconds", "hidden", "unique", "prepareUnique", "forceNonUnique"];
    if !changes.iter().any(|f| index.contains_key(f)) {
        return Err(invalid("no expireAfterSeconds, hidden, unique, or prepareUnique field"));
    }
    if index.contains_key("unique") || index.contains_key("prepareUnique") {
        return Err(invalid(
            "collMod does not support converting an index to 'unique' or to 'prepareUnique' mode",
        ));
    }
    if index.contains_key("forceNonUnique") {
        return Err(MongoError::not_implemented("collMod's 'forceNonUnique' is not supported"));
    }
    let hidden = match index.get("hidden") {
        None => None,
        Some(Bson::Boolean(b)) => Some(*b),
        Some(other) => return Err(wrong_type("collMod.index.hidden", other, "bool")),
    };
    let ttl = match index.get("expireAfterSeconds") {
        None => None,
        Some(Bson::Int32(n)) => Some(i64::from(*n)),
        Some(Bson::Int64(n)) => Some(*n),
        Some(Bson::Double(d)) if d.fract() == 0.0 && d.is_finite() => Some(*d as i64),
        Some(other) => {
            return Err(MongoError::type_mismatch(format!(
                "BSON field 'collMod.index.expireAfterSeconds' is the wrong type '{}', expected types '[long, int, decimal, double]'",
                super::type_of(Some(other))
            )));
        }
    };
    match ttl {
        Some(n) if n < 0 => {
            Err(invalid("TTL index 'expireAfterSeconds' option cannot be less than 0"))
        }
        Some(n) if n > i64::from(i32::MAX) => Err(invalid(
            "TTL index 'expireAfterSeconds' option must be within an acceptable range, try a lower number",
        )),
        _ => Ok((hidden, ttl)),
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
            return Err(wrong_type(
                "collMod.index.keyPattern",
                other.unwrap_or(&Bson::Null),
                "object",
            ));
        }
    };
    let Some(spec) = found.def.mongo.as_ref() else { return Err(not_found(&found.def.name, ns)) };
    Ok(Target::Index {
        name: found.def.name.clone(),
        hidden: spec.hidden,
        ttl: spec.expire_after_seconds,
        fields: spec.key.len(),
        hashed: spec.hashed.is_some(),
    })
}

/// The index's `expireAfterSeconds` now, after MongoDB's checks that it may have one.
fn ttl_of(target: &Target) -> Result<Option<i64>, MongoError> {
    match target {
        Target::Id => Err(invalid("the _id field does not support TTL indexes")),
        Target::Index { ttl: Some(ttl), .. } => Ok(Some(*ttl)),
        Target::Index { fields, .. } if *fields != 1 => Err(invalid(
            "TTL indexes are single-field indexes, compound indexes do not support TTL",
        )),
        Target::Index { hashed: true, .. } => Err(MongoError::not_implemented(
            "expireAfterSeconds on a hashed index is not supported",
        )),
        Target::Index { .. } => Ok(None),
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
        Target::Index { hidden, .. } => Ok(*hidden),
    }
}

fn invalid(msg: impl Into<String>) -> MongoError {
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
