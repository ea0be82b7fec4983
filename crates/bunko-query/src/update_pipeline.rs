//! Pipeline-style updates (`u: [{$set: …}, {$unset: …}, …]`): the document runs through
//! the aggregation stages an update may use — `$addFields`/`$set`, `$project`, `$unset`,
//! `$replaceRoot`/`$replaceWith` — evaluated by the same expression evaluator as
//! `aggregate` ([`crate::expr`]), so `{$set: {total: {$add: ["$a", "$b"]}}}` computes from
//! the document's own fields.

use bson::{Bson, DateTime, Document};

use crate::agg::Shape;
use crate::expr::{Expr, ExprError, Vars};
use crate::update::UpdateError;

/// One stage of a pipeline-style update.
#[derive(Clone, Debug, PartialEq)]
enum Step {
    Shape(Shape),
    ReplaceRoot(Expr),
}

/// A parsed pipeline-style update.
#[derive(Clone, Debug, PartialEq)]
pub struct UpdatePipeline {
    steps: Vec<Step>,
}

fn from_expr(err: ExprError) -> UpdateError {
    UpdateError { code: err.code, code_name: err.code_name, message: err.message }
}

fn not_allowed(name: &str) -> UpdateError {
    UpdateError {
        code: 72,
        code_name: "InvalidOptions",
        message: format!("{name} is not allowed to be used within an update"),
    }
}

impl UpdatePipeline {
    /// Parses the stages of `u`.
    pub fn parse(stages: &[Bson]) -> Result<UpdatePipeline, UpdateError> {
        let mut steps = Vec::new();
        for stage in stages {
            let Bson::Document(d) = stage else {
                return Err(UpdateError {
                    code: 14,
                    code_name: "TypeMismatch",
                    message: "Each element of the 'pipeline' array must be an object".into(),
                });
            };
            let (Some((name, arg)), 1) = (d.iter().next(), d.len()) else {
                return Err(UpdateError {
                    code: 40323,
                    code_name: "Location40323",
                    message:
                        "A pipeline stage specification object must contain exactly one field."
                            .into(),
                });
            };
            let doc_arg = || match arg {
                Bson::Document(spec) => Ok(spec),
                _ => Err(UpdateError {
                    code: 40272,
                    code_name: "Location40272",
                    message: format!("{name} specification stage must be an object"),
                }),
            };
            let step = match name.as_str() {
                "$addFields" | "$set" => {
                    Step::Shape(Shape::add_fields(doc_arg()?).map_err(from_expr)?)
                }
                "$project" => Step::Shape(Shape::project(doc_arg()?).map_err(from_expr)?),
                "$unset" => Step::Shape(Shape::unset(arg).map_err(from_expr)?),
                "$replaceWith" => Step::ReplaceRoot(Expr::parse(arg).map_err(from_expr)?),
                "$replaceRoot" => {
                    let root = doc_arg()?.get("newRoot").ok_or_else(|| UpdateError {
                        code: 40231,
                        code_name: "Location40231",
                        message: "no newRoot specified for the $replaceRoot stage".into(),
                    })?;
                    Step::ReplaceRoot(Expr::parse(root).map_err(from_expr)?)
                }
                other => return Err(not_allowed(other)),
            };
            steps.push(step);
        }
        Ok(UpdatePipeline { steps })
    }

    /// The updated document.
    pub fn apply(&self, doc: &Document) -> Result<Document, UpdateError> {
        let now = DateTime::now();
        let mut current = doc.clone();
        for step in &self.steps {
            let mut vars = Vars::new(&current, now);
            current = match step {
                Step::Shape(shape) => shape.apply(&current, &mut vars).map_err(from_expr)?,
                Step::ReplaceRoot(e) => match e.eval(&mut vars).map_err(from_expr)? {
                    Bson::Document(d) => d,
                    other => {
                        return Err(UpdateError {
                            code: 40228,
                            code_name: "Location40228",
                            message: format!(
                                "'newRoot' expression must evaluate to an object, but resulting value was: {other}"
                            ),
                        });
                    }
                },
            };
        }
        // `_id` stays first and unchanged unless the pipeline changed it (an error).
        if let Some(id) = doc.get("_id")
            && !current.contains_key("_id")
        {
            let mut with_id = Document::new();
            with_id.insert("_id", id.clone());
            with_id.extend(current);
            current = with_id;
        }
        Ok(current)
    }
}

#[cfg(test)]
mod tests {
    use bson::{bson, doc};

    use super::*;

    #[test]
    fn pipeline_updates_compute_from_the_document() -> Result<(), UpdateError> {
        // MongoDB's "Update with Aggregation Pipeline" example (students' averages).
        let Bson::Array(stages) = bson!([
            {"$set": {"average": {"$trunc": [{"$avg": "$tests"}, 0]}, "modified": "$$NOW"}},
            {"$set": {"grade": {"$switch": {"branches": [
                {"case": {"$gte": ["$average", 90]}, "then": "A"},
                {"case": {"$gte": ["$average", 80]}, "then": "B"}], "default": "F"}}}},
            {"$unset": "modified"},
        ]) else {
            return Ok(());
        };
        let p = UpdatePipeline::parse(&stages)?;
        let out = p.apply(&doc! {"_id": 1, "tests": [95, 92, 90]})?;
        assert_eq!(out, doc! {"_id": 1, "tests": [95, 92, 90], "average": 92.0, "grade": "A"});
        let replaced =
            UpdatePipeline::parse(&[bson!({"$replaceWith": {"n": {"$size": "$tests"}}})])?;
        assert_eq!(replaced.apply(&doc! {"_id": 7, "tests": [1]})?, doc! {"_id": 7, "n": 1});
        let group = UpdatePipeline::parse(&[bson!({"$group": {"_id": null}})]).err();
        assert_eq!(group.map(|e| e.code), Some(72));
        Ok(())
    }
}
