//! `create`'s `clusteredIndex` option. A clustered collection stores its documents in the
//! order of their `_id` and has no separate `_id` index; a Bunko collection keeps its
//! documents under their ids already, so the option names the `_id` index rather than
//! changing how documents are stored. It is checked as MongoDB 8 checks it (`unique: true`,
//! key `{_id: 1}`, nothing else), kept with the collection's options (`listCollections`
//! shows it, without an `idIndex`), and `listIndexes` lists that index under its name with
//! `clustered: true`; `hint` and `dropIndexes` take the name as the `_id` index's.

use bson::{Bson, Document, doc};
use bunko_engine::Database;

use super::coll_options;
use crate::error::MongoError;

/// The stored option of `create`'s `clusteredIndex` (empty when the command has none).
pub(super) fn options(command: &Document) -> Result<Document, MongoError> {
    let spec = match command.get("clusteredIndex") {
        None | Some(Bson::Null) => return Ok(Document::new()),
        Some(Bson::Document(spec)) => spec,
        Some(Bson::Boolean(_)) => {
            return Err(MongoError::not_implemented(
                "clusteredIndex: true (the internal form of time series collections) is not supported",
            ));
        }
        Some(other) => {
            return Err(MongoError::type_mismatch(format!(
                "BSON field 'create.clusteredIndex' is the wrong type '{}', expected types '[bool, object]'",
                super::type_of(Some(other))
            )));
        }
    };
    for field in spec.keys() {
        if !["key", "unique", "name", "v"].contains(&field.as_str()) {
            return Err(MongoError::unknown_field(&format!("create.clusteredIndex.{field}")));
        }
    }
    let missing = |field: &str| {
        MongoError::new(
            40414,
            "Location40414",
            format!("BSON field 'create.clusteredIndex.{field}' is missing but a required field"),
        )
    };
    let key = match spec.get("key") {
        Some(Bson::Document(key)) => key,
        Some(_) => return Err(MongoError::type_mismatch("clusteredIndex.key must be an object")),
        None => return Err(missing("key")),
    };
    let unique = match spec.get("unique") {
        Some(Bson::Boolean(unique)) => *unique,
        Some(_) => return Err(MongoError::type_mismatch("clusteredIndex.unique must be a bool")),
        None => return Err(missing("unique")),
    };
    if !unique {
        return Err(MongoError::new(
            5979700,
            "Location5979700",
            "The clusteredIndex option requires unique: true to be specified",
        ));
    }
    let on_id = key.len() == 1
        && key.get("_id").is_some_and(|v| {
            v.as_f64() == Some(1.0) || matches!(v, Bson::Int32(1) | Bson::Int64(1))
        });
    if !on_id {
        return Err(MongoError::new(
            197,
            "InvalidIndexSpecificationOption",
            "The clusteredIndex option is only supported for key: {_id: 1}",
        ));
    }
    let name = match spec.get("name") {
        None => "_id_".to_string(),
        Some(Bson::String(name)) if !name.is_empty() => name.clone(),
        Some(_) => {
            return Err(MongoError::bad_value("clusteredIndex.name must be a non-empty string"));
        }
    };
    match spec.get("v") {
        None | Some(Bson::Int32(2)) | Some(Bson::Int64(2)) => {}
        Some(_) => return Err(MongoError::bad_value("clusteredIndex.v must be 2")),
    }
    if matches!(command.get("capped"), Some(Bson::Boolean(true))) {
        return Err(MongoError::not_implemented("a capped collection cannot be clustered here"));
    }
    Ok(doc! {"clusteredIndex": {"v": 2, "key": {"_id": 1}, "name": name, "unique": true}})
}

/// The clustered index of a collection with these options, as `listIndexes` shows it.
pub(super) fn index(options: &Document) -> Option<Document> {
    let mut spec = options.get_document("clusteredIndex").ok()?.clone();
    spec.insert("clustered", true);
    Some(spec)
}

/// The name of the collection's `_id` index: `_id_`, or its clustered index's name.
pub(super) fn id_index_name(db: &Database) -> String {
    let options = coll_options::read(db);
    let name = options.get_document("clusteredIndex").ok().and_then(|c| c.get_str("name").ok());
    name.unwrap_or("_id_").to_string()
}
