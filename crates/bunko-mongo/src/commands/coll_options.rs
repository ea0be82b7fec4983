//! A collection's options (`validator`, `validationLevel`, `validationAction`,
//! `changeStreamPreAndPostImages`), kept in the collection's design document
//! `_design/mongodb` under `options` as Extended JSON, with the validator also under
//! `validate` in the form the engine's write gate enforces on every write of both APIs. A design document, because that is
//! where CouchDB keeps a database's rules (`validate_doc_update`): only database admins may
//! write it, it replicates with the data, and the engine's write gate reads it there.

use bson::{Bson, Document};
use bunko_doc::body::ParsedDoc;
use bunko_doc::ejson;
use bunko_engine::security::UserCtx;
use bunko_engine::{Database, WriteOptions};
use serde_json::{Map, Value};

use crate::error::MongoError;

/// The design document that holds the options.
pub(crate) const DDOC: &str = "_design/mongodb";

/// The collection's options (empty when none were set).
pub(crate) fn read(db: &Database) -> Document {
    // The options are the server's to read (they shape every command on the collection).
    let Ok(found) = db.get(&UserCtx::system(), DDOC, None) else { return Document::new() };
    if found.deleted {
        return Document::new();
    }
    let Ok(body) = serde_json::from_slice::<Map<String, Value>>(&found.body) else {
        return Document::new();
    };
    match body.get("options") {
        Some(Value::Object(options)) => ejson::from_json(options),
        _ => Document::new(),
    }
}

/// Whether the collection keeps pre- and post-images for change streams.
pub(crate) fn images(options: &Document) -> bool {
    matches!(
        options.get_document("changeStreamPreAndPostImages").map(|d| d.get("enabled")),
        Ok(Some(Bson::Boolean(true)))
    )
}

/// The option fields `create` and `collMod` take here.
pub(crate) const FIELDS: &[&str] =
    &["validator", "validationLevel", "validationAction", "changeStreamPreAndPostImages"];

/// The options of a `create` or `collMod` command, checked as MongoDB checks them.
pub(crate) fn from_command(command: &Document) -> Result<Document, MongoError> {
    let mut out = Document::new();
    for field in FIELDS {
        let Some(value) = command.get(*field) else { continue };
        match (*field, value) {
            ("validator", Bson::Document(v)) => {
                let (schema, rest) = split(v)?;
                crate::query::selector(&rest)?;
                if let Some(schema) = schema {
                    bunko_query::schema::check(&schema).map_err(MongoError::failed_to_parse)?;
                }
            }
            ("validationLevel", Bson::String(s))
                if ["strict", "moderate", "off"].contains(&s.as_str()) => {}
            ("validationAction", Bson::String(s)) if ["error", "warn"].contains(&s.as_str()) => {}
            ("changeStreamPreAndPostImages", Bson::Document(d))
                if matches!(d.get("enabled"), Some(Bson::Boolean(_))) && d.len() == 1 => {}
            (_, Bson::String(s)) => {
                return Err(MongoError::bad_value(format!(
                    "Enumeration value '{s}' for field '{field}' is not a valid value."
                )));
            }
            _ => {
                return Err(MongoError::type_mismatch(format!(
                    "BSON field '{field}' is the wrong type"
                )));
            }
        }
        out.insert(*field, value.clone());
    }
    Ok(out)
}

/// The validator as the engine's write gate reads it (`bunko_engine::validators`):
/// `{"selector": <selector JSON>, "level": …, "action": …}`, or `null` without a validator.
fn rule(options: &Document) -> Result<Value, MongoError> {
    let Ok(validator) = options.get_document("validator") else { return Ok(Value::Null) };
    if validator.is_empty() {
        return Ok(Value::Null);
    }
    let (schema, rest) = split(validator)?;
    let schema = schema.map_or(Value::Null, |s| Value::Object(ejson::to_json(&s)));
    Ok(serde_json::json!({
        "selector": crate::query::selector_json(&rest)?,
        "schema": schema,
        "details": super::validator_tree::tree(validator)?,
        "level": options.get_str("validationLevel").unwrap_or("strict"),
        "action": options.get_str("validationAction").unwrap_or("error"),
    }))
}

/// A validator's top-level `$jsonSchema` (checked by the engine with
/// `bunko_query::schema`) and the rest of it (a query filter).
fn split(validator: &Document) -> Result<(Option<Document>, Document), MongoError> {
    let mut rest = validator.clone();
    match rest.remove("$jsonSchema") {
        None => Ok((None, rest)),
        Some(Bson::Document(schema)) => Ok((Some(schema), rest)),
        Some(_) => Err(MongoError::type_mismatch("$jsonSchema must be an object")),
    }
}

/// Stores `options` (merged over the current ones) as `user`: the write gate lets only
/// database admins write the design document. It is written even with no changes, as
/// MongoDB records every `collMod` (change streams report it as `modify`).
pub(crate) fn write(db: &Database, user: &UserCtx, changes: Document) -> Result<(), MongoError> {
    let mut options = read(db);
    options.extend(changes);
    replace(db, user, options)
}

/// Stores `options` in place of the current ones (as [`write`] does).
pub(crate) fn replace(db: &Database, user: &UserCtx, options: Document) -> Result<(), MongoError> {
    let (rev, mut body) = match db.get(user, DDOC, None) {
        Ok(found) if !found.deleted => {
            let body =
                serde_json::from_slice::<Map<String, Value>>(&found.body).unwrap_or_default();
            (Some(found.rev), body)
        }
        Ok(_) | Err(bunko_engine::Error::NotFound(_)) => (None, Map::new()),
        Err(err) => return Err(err.into()),
    };
    // The same design document holds the collection's indexes, read only under this language.
    body.entry("language").or_insert_with(|| Value::String("mongodb".into()));
    body.insert("options".into(), Value::Object(ejson::to_json(&options)));
    body.insert("validate".into(), rule(&options)?);
    let doc = ParsedDoc { id: Some(DDOC.to_string()), rev, body, ..Default::default() };
    db.put(user, doc, WriteOptions::default())?;
    Ok(())
}
