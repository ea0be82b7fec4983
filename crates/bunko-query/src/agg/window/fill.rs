//! `$fill`: MongoDB desugars it into a `$setWindowFields` (`method: "locf"` is `$locf`,
//! `method: "linear"` is `$linearFill`, over the stage's `sortBy` and `partitionBy` or
//! `partitionByFields`) followed by an `$addFields` (`value: <expr>` is `{$ifNull:
//! ["$field", <expr>]}`); so does Bunko, with MongoDB's checks and codes.

use bson::{Bson, Document, doc};

use super::SetWindowFields;
use crate::agg::stream::map_docs;
use crate::agg::{Docs, EnvRef, Shape};
use crate::expr::value::type_name;
use crate::expr::{ExprError, Result, Vars};

const STAGE: &str = "$fill";

/// A parsed `$fill`: the window stage for the methods, the `$addFields` for the values.
#[derive(Clone)]
pub struct Fill {
    window: Option<SetWindowFields>,
    values: Option<Shape>,
}

fn unknown(k: &str) -> ExprError {
    ExprError::location(40415, format!("BSON field '{STAGE}.{k}' is an unknown field."))
}

fn wrong_type(k: &str, v: &Bson, expected: &str) -> ExprError {
    ExprError::type_mismatch(format!(
        "BSON field '{STAGE}.{k}' is the wrong type '{}', expected {expected}",
        type_name(v)
    ))
}

impl Fill {
    pub fn parse(arg: &Bson) -> Result<Fill> {
        let Bson::Document(spec) = arg else {
            return Err(ExprError::failed_to_parse(format!(
                "The {STAGE} stage specification must be an object, found {}",
                type_name(arg)
            )));
        };
        let mut window = Document::new();
        let (mut output, mut partition_by, mut by_fields) = (None, None, None);
        for (k, v) in spec {
            match (k.as_str(), v) {
                ("sortBy", Bson::Document(_)) => {
                    window.insert("sortBy", v.clone());
                }
                ("sortBy", v) => return Err(wrong_type(k, v, "type 'object'")),
                ("partitionBy", Bson::String(_) | Bson::Document(_)) => partition_by = Some(v),
                ("partitionBy", v) => return Err(wrong_type(k, v, "types '[string, object]'")),
                ("partitionByFields", Bson::Array(items)) => by_fields = Some(fields(items)?),
                ("partitionByFields", v) => return Err(wrong_type(k, v, "type 'array'")),
                ("output", Bson::Document(o)) => output = Some(o),
                ("output", v) => return Err(wrong_type(k, v, "type 'object'")),
                _ => return Err(unknown(k)),
            }
        }
        let Some(output) = output else {
            return Err(ExprError::location(
                40414,
                format!("BSON field '{STAGE}.output' is missing but a required field"),
            ));
        };
        if output.is_empty() {
            return Err(ExprError::location(
                6050203,
                "The output field in '$fill' must contain an object with at least one element",
            ));
        }
        let (methods, values) = outputs(output)?;
        if let Some(p) = partition_by {
            if by_fields.is_some() {
                return Err(ExprError::location(
                    6050204,
                    "Maximum one of 'partitionBy' and 'partitionByFields can be specified in '$fill'",
                ));
            }
            window.insert("partitionBy", p.clone());
        }
        if let Some(names) = by_fields {
            let by: Document =
                names.into_iter().map(|n| (n.clone(), Bson::String(format!("${n}")))).collect();
            window.insert("partitionBy", by);
        }
        let window = match methods.is_empty() {
            true => None,
            false => {
                window.insert("output", methods);
                Some(SetWindowFields::parse(&Bson::Document(window))?)
            }
        };
        let values = (!values.is_empty()).then(|| Shape::add_fields(&values)).transpose()?;
        Ok(Fill { window, values })
    }

    /// The documents of `input` filled.
    pub fn open<'a>(&self, input: Docs<'a>, env: &EnvRef<'a>, vars: &Vars) -> Result<Docs<'a>> {
        let filled = match &self.window {
            Some(w) => w.open(input, env, vars)?,
            None => input,
        };
        let Some(shape) = self.values.clone() else { return Ok(filled) };
        let vars = vars.clone();
        Ok(map_docs(filled, move |d| shape.apply(&d, &mut vars.with_doc(&d))))
    }
}

/// `partitionByFields`: strings.
fn fields(items: &[Bson]) -> Result<Vec<String>> {
    items
        .iter()
        .map(|i| match i {
            Bson::String(s) => Ok(s.clone()),
            other => Err(ExprError::type_mismatch(format!(
                "BSON field '{STAGE}.partitionByFields' is the wrong type '{}', expected type 'string'",
                type_name(other)
            ))),
        })
        .collect()
}

/// The window functions (`$setWindowFields`' `output`) and the `$addFields` of `output`.
fn outputs(output: &Document) -> Result<(Document, Document)> {
    let (mut methods, mut values) = (Document::new(), Document::new());
    for (field, spec) in output {
        let Bson::Document(spec) = spec else {
            return Err(ExprError::location(
                6050200,
                "Each fill output specification must be an object with exactly one field",
            ));
        };
        let (mut method, mut value) = (None, None);
        for (k, v) in spec {
            match (k.as_str(), v) {
                ("method", Bson::String(m)) => method = Some(m.as_str()),
                ("method", v) => return Err(wrong_type(k, v, "type 'string'")),
                ("value", v) => value = Some(v),
                _ => return Err(unknown(k)),
            }
        }
        if let Some(method) = method {
            if value.is_some() {
                return Err(ExprError::location(
                    6050201,
                    "Each fill output specification must have exactly one of 'method' or 'value' fields, not both",
                ));
            }
            let function = match method {
                "locf" => "$locf",
                "linear" => "$linearFill",
                _ => {
                    return Err(ExprError::location(
                        6050202,
                        "Method must be either locf or linear",
                    ));
                }
            };
            methods.insert(field.clone(), doc! {function: format!("${field}")});
        }
        if let Some(value) = value {
            values.insert(field.clone(), doc! {"$ifNull": [format!("${field}"), value.clone()]});
        }
    }
    Ok((methods, values))
}
