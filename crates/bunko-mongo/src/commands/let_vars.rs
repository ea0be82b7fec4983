//! `let` of `find`, `update`, `delete`, `findAndModify` and `bulkWrite` (MongoDB 5.0+):
//! variables the command's expressions read as `$$name`.
//!
//! Each value is an expression evaluated once, before the command runs (as MongoDB does);
//! the command is then rewritten with every `$$name` inside an expression context (a
//! filter's `$expr`, a pipeline-style update) replaced by `{$literal: value}`, and runs as
//! if it had been written so. Elsewhere `"$$name"` stays the literal string it is in
//! MongoDB (`{a: "$$x"}` matches the string). `aggregate` binds its `let` itself.

use bson::{Bson, DateTime, Document};
use bunko_query::expr::{Expr, Vars, cond_check_var_name};

use super::agg_env::from_expr;
use crate::error::MongoError;

/// The commands this module rewrites, with the statement arrays and the fields of each
/// statement that hold a filter and an update.
const STATEMENTS: &[(&str, &str, &str, &str)] = &[
    ("find", "", "filter", ""),
    ("findAndModify", "", "query", "update"),
    ("update", "updates", "q", "u"),
    ("delete", "deletes", "q", ""),
    ("bulkWrite", "ops", "filter", "updateMods"),
];

/// The command without its `let`, its variables bound; `None` when it has no `let`.
pub(super) fn bind(name: &str, command: &Document) -> Result<Option<Document>, MongoError> {
    let Some(&(_, list, filter, update)) = STATEMENTS.iter().find(|s| s.0 == name) else {
        return Ok(None);
    };
    let Some(spec) = command.get("let") else { return Ok(None) };
    let Bson::Document(spec) = spec else {
        return Err(MongoError::type_mismatch(format!(
            "BSON field '{name}.let' is the wrong type, expected type 'object'"
        )));
    };
    let values = evaluate(spec)?;
    let mut out = command.clone();
    out.remove("let");
    let bind_one = |statement: &mut Document| {
        if let Some(Bson::Document(f)) = statement.get_mut(filter) {
            *f = in_filter(f, &values);
        }
        if let Some(Bson::Array(pipeline)) = statement.get_mut(update) {
            *pipeline = pipeline.iter().map(|s| in_expr(s, &values)).collect();
        }
    };
    if list.is_empty() {
        bind_one(&mut out);
    } else if let Some(Bson::Array(items)) = out.get_mut(list) {
        for item in items.iter_mut() {
            if let Bson::Document(statement) = item {
                bind_one(statement);
            }
        }
    }
    Ok(Some(out))
}

fn evaluate(spec: &Document) -> Result<Document, MongoError> {
    let mut vars = Vars::new(&Document::new(), DateTime::now());
    let mut values = Document::new();
    for (name, e) in spec {
        cond_check_var_name(name).map_err(from_expr)?;
        let value = Expr::parse(e).and_then(|e| e.eval(&mut vars.clone())).map_err(from_expr)?;
        vars.bind(name, value.clone());
        values.insert(name, value);
    }
    Ok(values)
}

/// A pipeline-style update's stages with its statement's constants (`c`) bound: each
/// `"$$name"` becomes the value (constants are values, not expressions, as MongoDB takes
/// them). Their names are checked as MongoDB checks a name a user reads (a letter of
/// either case first): `FailedToParse`.
pub(super) fn bind_constants(
    stages: &[Bson],
    constants: &Document,
) -> Result<Vec<Bson>, MongoError> {
    for name in constants.keys() {
        check_read_name(name)?;
    }
    Ok(stages.iter().map(|s| in_expr(s, constants)).collect())
}

fn check_read_name(name: &str) -> Result<(), MongoError> {
    let fits = |c: char, first: bool| {
        c.is_ascii_alphabetic() || !c.is_ascii() || (!first && (c.is_ascii_digit() || c == '_'))
    };
    let mut chars = name.chars();
    match chars.next() {
        None => Err(MongoError::failed_to_parse("empty variable names are not allowed")),
        Some(c) if !fits(c, true) => Err(MongoError::failed_to_parse(format!(
            "'{name}' starts with an invalid character for a user variable name"
        ))),
        Some(_) => match chars.find(|&c| !fits(c, false)) {
            Some(c) => Err(MongoError::failed_to_parse(format!(
                "'{name}' contains an invalid character for a variable name: '{c}'"
            ))),
            None => Ok(()),
        },
    }
}

/// A filter: `$expr` (also under `$and`/`$or`/`$nor`) is an expression context.
fn in_filter(filter: &Document, values: &Document) -> Document {
    let mut out = Document::new();
    for (key, value) in filter {
        let bound = match (key.as_str(), value) {
            ("$expr", v) => in_expr(v, values),
            ("$and" | "$or" | "$nor", Bson::Array(items)) => Bson::Array(
                items
                    .iter()
                    .map(|i| match i {
                        Bson::Document(d) => Bson::Document(in_filter(d, values)),
                        other => other.clone(),
                    })
                    .collect(),
            ),
            _ => value.clone(),
        };
        out.insert(key.clone(), bound);
    }
    out
}

/// An expression: `"$$name"` of a bound variable becomes its value (`"$$name.a.b"` a `$let`
/// binding it); `$literal` stays.
fn in_expr(value: &Bson, values: &Document) -> Bson {
    match value {
        Bson::String(s) => {
            let name = s.strip_prefix("$$").map(|n| n.split('.').next().unwrap_or(n));
            match name.and_then(|name| Some((name, values.get(name)?))) {
                Some((name, bound)) if name.len() + 2 == s.len() => {
                    Bson::Document(bson::doc! {"$literal": bound.clone()})
                }
                Some((name, bound)) => Bson::Document(bson::doc! {
                    "$let": {"vars": {name: {"$literal": bound.clone()}}, "in": s.clone()}
                }),
                None => value.clone(),
            }
        }
        Bson::Array(items) => Bson::Array(items.iter().map(|i| in_expr(i, values)).collect()),
        Bson::Document(d) if d.contains_key("$literal") => value.clone(),
        Bson::Document(d) => {
            Bson::Document(d.iter().map(|(k, v)| (k.clone(), in_expr(v, values))).collect())
        }
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use bson::doc;

    use super::*;

    #[test]
    fn variables_are_bound_in_expressions_only() {
        let command = doc! {
            "update": "c",
            "updates": [{"q": {"$expr": {"$eq": ["$_id", "$$id"]}, "a": "$$id"}, "u": [{"$set": {"x": "$$x", "y": {"$literal": "$$x"}}}]}],
            "let": {"id": 1, "x": {"$concat": ["f", "oo"]}},
        };
        let bound = bind("update", &command).unwrap().unwrap();
        assert_eq!(
            bound,
            doc! {
                "update": "c",
                "updates": [{"q": {"$expr": {"$eq": ["$_id", {"$literal": 1}]}, "a": "$$id"}, "u": [{"$set": {"x": {"$literal": "foo"}, "y": {"$literal": "$$x"}}}]}],
            }
        );
        assert_eq!(bind("update", &doc! {"update": "c"}).unwrap(), None);
        assert!(bind("find", &doc! {"find": "c", "let": {"Bad": 1}}).is_err());
    }

    #[test]
    fn constants_are_bound_as_values_and_their_names_checked_as_read() {
        let stages = [Bson::Document(doc! {"$set": {"a": "$$k", "b": "$$o.x", "c": "$$other"}})];
        let bound = bind_constants(&stages, &doc! {"k": "$f", "o": {"x": 1}, "Up": 2}).unwrap();
        let want = doc! {"$set": {
            "a": {"$literal": "$f"},
            "b": {"$let": {"vars": {"o": {"$literal": {"x": 1}}}, "in": "$$o.x"}},
            "c": "$$other",
        }};
        assert_eq!(bound, vec![Bson::Document(want)]);
        for (name, code) in [("1x", 9), ("a-b", 9), ("", 9)] {
            let err = bind_constants(&stages, &doc! {name: 1}).unwrap_err();
            assert_eq!(err.code, code, "{name}");
        }
    }
}
