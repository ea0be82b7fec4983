//! A collection validator's filter as the tree `bunko_query::schema::query_details` walks to
//! explain a refused document (`errInfo.details`), stored beside the validator: each leaf
//! (one operator on one path, as MongoDB's parser splits a filter) keeps how it was written
//! (`specifiedAs`) and its own selector JSON, so the engine decides which clauses failed
//! with the same matching as the validator.

use bson::{Bson, Document, doc};
use bunko_doc::ejson;
use serde_json::{Value, json};

use crate::error::MongoError;
use crate::query::selector_json;

/// The tree of `filter` (the validator with its top-level `$jsonSchema`, if any, at its place).
pub(crate) fn tree(filter: &Document) -> Result<Value, MongoError> {
    Ok(implicit_and(clauses(filter)?))
}

/// One clause stands for itself; several are an implicit `$and`.
fn implicit_and(mut clauses: Vec<Value>) -> Value {
    match clauses.len() {
        1 => clauses.remove(0),
        _ => json!({"op": "$and", "clauses": clauses}),
    }
}

/// The clauses of a filter document, in order (a field with several operators gives one
/// clause per operator).
fn clauses(filter: &Document) -> Result<Vec<Value>, MongoError> {
    let mut out = Vec::new();
    for (key, value) in filter {
        match (key.as_str(), value) {
            ("$and" | "$or" | "$nor", Bson::Array(items)) => {
                let parts = items
                    .iter()
                    .map(|item| match item {
                        Bson::Document(d) => Ok(implicit_and(clauses(d)?)),
                        _ => Err(MongoError::bad_value(format!("{key} entries must be objects"))),
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                out.push(json!({"op": key, "clauses": parts}));
            }
            ("$jsonSchema", schema) => {
                out.push(json!({"op": "$jsonSchema", "schema": ejson::value_to_json(schema)}));
            }
            ("$comment", _) => {}
            (op, _) if op.starts_with('$') => {
                out.push(json!({"op": op, "specifiedAs": json_of(&doc! {op: value.clone()})}));
            }
            (path, Bson::Document(ops))
                if ops.keys().next().is_some_and(|k| k.starts_with('$')) =>
            {
                field_clauses(path, ops, &mut out)?;
            }
            (path, Bson::RegularExpression(_)) => out.push(leaf(path, "$regex", value)?),
            (path, _) => out.push(leaf(path, "$eq", value)?),
        }
    }
    Ok(out)
}

/// The clauses of `path: {$op: arg, ...}`.
fn field_clauses(path: &str, ops: &Document, out: &mut Vec<Value>) -> Result<(), MongoError> {
    for (op, arg) in ops {
        match op.as_str() {
            "$options" => {}
            "$regex" => {
                let mut written = doc! {"$regex": arg.clone()};
                if let Some(options) = ops.get("$options") {
                    written.insert("$options", options.clone());
                }
                out.push(leaf(path, "$regex", &Bson::Document(written))?);
            }
            "$not" => {
                let inner = match arg {
                    Bson::Document(d) => {
                        let mut inner = Vec::new();
                        field_clauses(path, d, &mut inner)?;
                        implicit_and(inner)
                    }
                    _ => leaf(path, "$regex", arg)?,
                };
                out.push(json!({"op": "$not", "clause": inner}));
            }
            _ => out.push(leaf(path, op, &Bson::Document(doc! {op: arg.clone()}))?),
        }
    }
    Ok(())
}

/// A leaf: `path` compared by `op` as `written` (the condition as the user wrote it).
fn leaf(path: &str, op: &str, written: &Bson) -> Result<Value, MongoError> {
    let filter = doc! {path: written.clone()};
    Ok(json!({
        "op": op,
        "path": path,
        "specifiedAs": json_of(&filter),
        "selector": selector_json(&filter)?,
    }))
}

fn json_of(d: &Document) -> Value {
    Value::Object(ejson::to_json(d))
}
