//! The stages a change stream's pipeline may have after `$changeStream`, as MongoDB allows
//! them: `$match` (the query language on the event), and `$project`, `$addFields`/`$set`,
//! `$unset`, `$replaceRoot`/`$replaceWith` with the aggregation expressions of
//! `bunko_query::agg`. Other known stages are `IllegalOperation` (20), unknown names
//! 40324, as in MongoDB. An event whose `_id` (its resume token) a stage changed or removed
//! fails the stream with `ChangeStreamFatalError` (280), which drivers do not resume.

use bson::{Bson, DateTime, Document};
use bunko_doc::ejson;
use bunko_query::agg::{Pipeline, Shape};
use bunko_query::expr::{Expr, ExprError, MISSING, Vars};
use bunko_query::{Dialect, Selector};
use serde_json::Value;

use crate::error::MongoError;

/// One stage after `$changeStream`.
pub(super) enum Step {
    Match(Selector),
    Shape(Shape),
    Replace(Expr),
}

/// Parses one stage.
pub(super) fn parse(stage: &Bson) -> Result<Step, MongoError> {
    let Bson::Document(stage) = stage else {
        return Err(MongoError::type_mismatch(
            "Each element of the 'pipeline' array must be an object",
        ));
    };
    let (Some((name, spec)), 1) = (stage.iter().next(), stage.len()) else {
        return Err(MongoError::new(
            40323,
            "Location40323",
            "A pipeline stage specification object must contain exactly one field.",
        ));
    };
    let object = |code: i32| match spec {
        Bson::Document(d) => Ok(d),
        _ => Err(MongoError::from(ExprError::location(
            code,
            format!("the {name} specification must be an object"),
        ))),
    };
    Ok(match name.as_str() {
        "$match" => Step::Match(crate::query::selector(object(15959)?)?),
        "$project" => Step::Shape(Shape::project(object(15969)?)?),
        "$addFields" | "$set" => Step::Shape(Shape::add_fields(object(40272)?)?),
        "$unset" => Step::Shape(Shape::unset(spec)?),
        "$replaceRoot" => match object(40228)?.get("newRoot") {
            Some(root) => Step::Replace(Expr::parse(root)?),
            None => {
                return Err(ExprError::location(
                    40231,
                    "no newRoot specified for the $replaceRoot stage",
                )
                .into());
            }
        },
        "$replaceWith" => Step::Replace(Expr::parse(spec)?),
        _ => {
            // A stage the aggregation engine knows (or MongoDB's unknown-stage error).
            Pipeline::parse(std::slice::from_ref(&Bson::Document(stage.clone())), None)?;
            return Err(MongoError::new(
                20,
                "IllegalOperation",
                format!("{name} is not permitted in a $changeStream pipeline"),
            ));
        }
    })
}

/// `event` through `steps`: `None` when a `$match` leaves it out.
pub(super) fn apply(steps: &[Step], event: Document) -> Result<Option<Document>, MongoError> {
    let token = event.get("_id").cloned();
    let mut doc = event;
    for step in steps {
        doc = match step {
            Step::Match(filter) => {
                let view = Value::Object(ejson::to_json(&doc));
                if !filter.matches(&view, Dialect::Mongo) {
                    return Ok(None);
                }
                doc
            }
            Step::Shape(shape) => shape.apply(&doc, &mut Vars::new(&doc, DateTime::now()))?,
            Step::Replace(expr) => match expr.eval(&mut Vars::new(&doc, DateTime::now()))? {
                Bson::Document(d) => d,
                other => {
                    let shown = if other == MISSING { "MISSING".into() } else { other.to_string() };
                    return Err(ExprError::location(
                        40228,
                        format!("'newRoot' expression must evaluate to an object, but resulting value was: {shown}"),
                    )
                    .into());
                }
            },
        };
    }
    if doc.get("_id") != token.as_ref() {
        return Err(MongoError::new(
            280,
            "ChangeStreamFatalError",
            format!(
                "Encountered an event whose _id field, which contains the resume token, was modified by the pipeline. Modifying the _id field of an event makes it impossible to resume the stream from that point. Only transformations that retain the unmodified _id field are allowed. Offending event: {doc}"
            ),
        )
        .with_label("NonResumableChangeStreamError"));
    }
    Ok(Some(doc))
}
