//! Object operators: `$mergeObjects`, `$objectToArray`, `$arrayToObject`, `$getField`,
//! `$setField`, `$unsetField`.

use bson::{Bson, Document};

use super::ops::{check_named, eval_named, named};
use super::value::{is_nullish, type_name};
use super::{Args, Expr, ExprError, MISSING, Result, Vars};

pub fn merge_objects(_: &str, args: &[Bson]) -> Result<Bson> {
    let mut out = Document::new();
    for v in args {
        match v {
            Bson::Document(d) => out.extend(d.clone()),
            v if is_nullish(v) => {}
            v => {
                return Err(ExprError::location(
                    40400,
                    format!(
                        "$mergeObjects requires object inputs, but input {v} is of type {}",
                        type_name(v)
                    ),
                ));
            }
        }
    }
    Ok(Bson::Document(out))
}

pub fn object_to_array(_: &str, args: &[Bson]) -> Result<Bson> {
    match args.first().unwrap_or(&MISSING) {
        Bson::Document(d) => Ok(Bson::Array(
            d.iter()
                .map(|(k, v)| {
                    let mut e = Document::new();
                    e.insert("k", k.clone());
                    e.insert("v", v.clone());
                    Bson::Document(e)
                })
                .collect(),
        )),
        v if is_nullish(v) => Ok(Bson::Null),
        v => Err(ExprError::location(
            40390,
            format!("$objectToArray requires a document input, found: {}", type_name(v)),
        )),
    }
}

pub fn array_to_object(_: &str, args: &[Bson]) -> Result<Bson> {
    let items = match args.first().unwrap_or(&MISSING) {
        Bson::Array(items) => items,
        v if is_nullish(v) => return Ok(Bson::Null),
        v => {
            return Err(ExprError::location(
                40386,
                format!("$arrayToObject requires an array input, found: {}", type_name(v)),
            ));
        }
    };
    let mut out = Document::new();
    for item in items {
        let (k, v) = match item {
            Bson::Array(pair) => match pair.as_slice() {
                [Bson::String(k), v] => (k.clone(), v.clone()),
                [_, _] => {
                    return Err(ExprError::location(
                        40395,
                        "$arrayToObject requires an array of key-value pairs, where the key must be of type string",
                    ));
                }
                _ => {
                    return Err(ExprError::location(
                        40397,
                        format!(
                            "$arrayToObject requires an array of size 2 arrays,found array of size: {}",
                            pair.len()
                        ),
                    ));
                }
            },
            Bson::Document(d) => match (d.get("k"), d.get("v"), d.len()) {
                (Some(Bson::String(k)), Some(v), 2) => (k.clone(), v.clone()),
                (Some(_), Some(_), 2) => {
                    return Err(ExprError::location(
                        40394,
                        "$arrayToObject requires an object with keys 'k' and 'v', where the value of 'k' must be of type string",
                    ));
                }
                _ => {
                    return Err(ExprError::location(
                        40392,
                        format!(
                            "$arrayToObject requires an object keys of 'k' and 'v'. Found incorrect number of keys:{}",
                            d.len()
                        ),
                    ));
                }
            },
            other => {
                return Err(ExprError::location(
                    40398,
                    format!(
                        "Unrecognised input type format for $arrayToObject: {}",
                        type_name(other)
                    ),
                ));
            }
        };
        if k.contains('\0') {
            return Err(ExprError::location(
                4940400,
                "Key field cannot contain an embedded null byte",
            ));
        }
        out.insert(k, v);
    }
    Ok(Bson::Document(out))
}

/// `$getField`: `{field, input}` or a field name alone (input `$$CURRENT`).
pub fn check_get_field(op: &str, args: &Args) -> Result<()> {
    match args {
        Args::List(items) if items.len() == 1 => Ok(()),
        _ => check_named(op, args, &["field", "input"], &["field"]),
    }
}

fn field_name(op: &str, args: &Args, vars: &mut Vars) -> Result<String> {
    let e = match args {
        Args::List(items) => items.first(),
        Args::Named(_) => named(args, "field"),
    };
    match e.map(|e| e.eval(vars)).transpose()? {
        Some(Bson::String(s)) => Ok(s),
        _ => Err(ExprError::location(
            3041704,
            format!("{op} requires 'field' to evaluate to type String"),
        )),
    }
}

pub fn get_field(op: &str, args: &Args, vars: &mut Vars) -> Result<Bson> {
    let field = field_name(op, args, vars)?;
    let input = match args {
        Args::List(_) => vars.current().clone(),
        Args::Named(_) if named(args, "input").is_none() => vars.current().clone(),
        Args::Named(_) => eval_named(args, "input", vars)?,
    };
    match input {
        Bson::Document(d) => Ok(d.get(&field).cloned().unwrap_or(MISSING)),
        v if is_nullish(&v) => Ok(Bson::Null),
        _ => Ok(MISSING),
    }
}

fn with_field(op: &str, args: &Args, vars: &mut Vars, value: Option<&Expr>) -> Result<Bson> {
    let field = field_name(op, args, vars)?;
    let mut doc = match eval_named(args, "input", vars)? {
        Bson::Document(d) => d,
        v if is_nullish(&v) => return Ok(Bson::Null),
        v => {
            return Err(ExprError::location(
                4161105,
                format!(
                    "{op} requires 'input' to evaluate to type Object, found {}",
                    type_name(&v)
                ),
            ));
        }
    };
    match value.map(|e| e.eval(vars)).transpose()? {
        Some(v) if v != MISSING => {
            doc.insert(field, v);
        }
        _ => {
            doc.remove(&field);
        }
    }
    Ok(Bson::Document(doc))
}

pub fn set_field(op: &str, args: &Args, vars: &mut Vars) -> Result<Bson> {
    with_field(op, args, vars, named(args, "value"))
}

pub fn unset_field(op: &str, args: &Args, vars: &mut Vars) -> Result<Bson> {
    with_field(op, args, vars, None)
}
