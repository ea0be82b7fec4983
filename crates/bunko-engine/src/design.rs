//! Design documents: the checks CouchDB runs when one is written
//! (`couch_mrview:validate_ddoc_fields` and the partition rule), and whether a design
//! document's indexes are partitioned.
//!
//! A design document in a partitioned database is partitioned unless its
//! `options.partitioned` is `false`; in a database that is not partitioned it cannot be
//! partitioned, and saying `true` is refused (`400 invalid_design_doc`).

use serde_json::{Map, Value};

use crate::{Error, Result};

/// The JSON type a design-document field must have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Type {
    Object,
    String,
    Array,
    Boolean,
}

impl Type {
    fn name(self) -> &'static str {
        match self {
            Type::Object => "object",
            Type::String => "string",
            Type::Array => "array",
            Type::Boolean => "boolean",
        }
    }

    fn admits(self, value: &Value) -> bool {
        matches!(
            (self, value),
            (Type::Object, Value::Object(_))
                | (Type::String, Value::String(_))
                | (Type::Array, Value::Array(_))
                | (Type::Boolean, Value::Bool(_))
        )
    }
}

/// One step of a field path: a named member, or every member of an object.
#[derive(Debug, Clone, Copy)]
enum Step {
    Key(&'static str),
    Any,
}

/// Checks a design document's body before it is written. Deleted design documents are
/// not checked.
pub fn validate(body: &Map<String, Value>, db_partitioned: bool) -> Result<()> {
    let map_type = if body.get("language").and_then(Value::as_str) == Some("query") {
        Type::Object
    } else {
        Type::String
    };
    use Step::{Any, Key};
    let rules: [(&[Step], &[Type]); 20] = [
        (&[Key("filters")], &[Type::Object]),
        (&[Key("filters"), Any], &[Type::Object, Type::String]),
        (&[Key("language")], &[Type::String]),
        (&[Key("lists")], &[Type::Object]),
        (&[Key("lists"), Any], &[Type::Object, Type::String]),
        (&[Key("options")], &[Type::Object]),
        (&[Key("procedures")], &[Type::Object]),
        (&[Key("procedures"), Any], &[Type::String]),
        (&[Key("options"), Key("include_design")], &[Type::Boolean]),
        (&[Key("options"), Key("local_seq")], &[Type::Boolean]),
        (&[Key("options"), Key("partitioned")], &[Type::Boolean]),
        (&[Key("rewrites")], &[Type::String, Type::Array]),
        (&[Key("shows")], &[Type::Object]),
        (&[Key("shows"), Any], &[Type::Object, Type::String]),
        (&[Key("triggers")], &[Type::Object]),
        (&[Key("triggers"), Any], &[Type::String]),
        (&[Key("updates")], &[Type::Object]),
        (&[Key("updates"), Any], &[Type::Object, Type::String]),
        (&[Key("validate_doc_update")], &[Type::String]),
        (&[Key("views")], &[Type::Object]),
    ];
    for (path, types) in rules {
        check(body, path, types, &mut Vec::new())?;
    }
    check_views(body, map_type)?;
    if map_type == Type::String
        && let Some(views) = body.get("views")
    {
        bunko_js::validate_design_doc(views)
            .map_err(|err| Error::Invalid { error: "compilation_error", reason: err.reason() })?;
    }
    if let Some(Value::String(source)) = body.get("validate_doc_update") {
        // CouchDB compiles it only at the first write; refusing it here keeps a typo from
        // failing every later write of the database.
        let compiled = crate::js::runtime().compile_validators(&[(source, Value::Null)]);
        compiled.map_err(|err| Error::Invalid {
            error: "compilation_error",
            reason: format!("validate_doc_update: {}", err.reason()),
        })?;
    }
    compile_scripts(body, "procedures")?;
    compile_scripts(body, "triggers")?;
    if !db_partitioned && partitioned_option(body) == Some(true) {
        return Err(Error::InvalidDesignDoc(
            "partitioned option cannot be true in a non-partitioned database.".into(),
        ));
    }
    Ok(())
}

/// Compiles each function of `procedures` or `triggers` (Bunko's; see
/// `crate::procedures`, `crate::triggers`), so that a typo is refused at save.
fn compile_scripts(body: &Map<String, Value>, field: &str) -> Result<()> {
    let Some(Value::Object(functions)) = body.get(field) else { return Ok(()) };
    for (name, source) in functions {
        let Some(source) = source.as_str() else { continue };
        let compiled = crate::js::runtime().compile_scripts(&[(source, Value::Null)]);
        compiled.map_err(|err| Error::Invalid {
            error: "compilation_error",
            reason: format!("{field}.{name}: {}", err.reason()),
        })?;
    }
    Ok(())
}

/// Whether a design document's views and indexes are partitioned.
pub fn is_partitioned(body: &Map<String, Value>, db_partitioned: bool) -> bool {
    db_partitioned && partitioned_option(body) != Some(false)
}

fn partitioned_option(body: &Map<String, Value>) -> Option<bool> {
    body.get("options")?.get("partitioned")?.as_bool()
}

/// `views.lib` is an object; every other view is an object with a `map` of the
/// language's type and an optional string `reduce`.
fn check_views(body: &Map<String, Value>, map_type: Type) -> Result<()> {
    let Some(Value::Object(views)) = body.get("views") else {
        return Ok(());
    };
    for (name, view) in views {
        let path = format!("views.{name}");
        if name == "lib" {
            require(view, &[Type::Object], &path)?;
            continue;
        }
        require(view, &[Type::Object], &path)?;
        if let Some(map) = view.get("map") {
            require(map, &[map_type], &format!("{path}.map"))?;
        } else {
            return Err(Error::InvalidDesignDoc(format!(
                "View `{name}` must contain map function"
            )));
        }
        if let Some(reduce) = view.get("reduce") {
            require(reduce, &[Type::String], &format!("{path}.reduce"))?;
            check_builtin_reduce(reduce.as_str().unwrap_or_default())?;
        }
    }
    Ok(())
}

/// A reduce starting with `_` must name one of CouchDB's built-in reducers.
fn check_builtin_reduce(source: &str) -> Result<()> {
    const BUILTIN: [&str; 4] = ["_sum", "_count", "_stats", "_approx_count_distinct"];
    if source.starts_with('_') && !BUILTIN.iter().any(|b| source.starts_with(b)) {
        return Err(Error::InvalidDesignDoc(format!(
            "`{source}` is not a supported reduce function."
        )));
    }
    Ok(())
}

/// Walks `path` from `value`; every value found at its end must have one of `types`.
fn check(
    value: &Map<String, Value>,
    path: &[Step],
    types: &[Type],
    at: &mut Vec<String>,
) -> Result<()> {
    let Some((step, rest)) = path.split_first() else {
        return Ok(());
    };
    let members: Vec<(&String, &Value)> = match step {
        Step::Key(key) => value.get_key_value(*key).into_iter().collect(),
        Step::Any => value.iter().collect(),
    };
    for (key, member) in members {
        at.push(key.clone());
        if rest.is_empty() {
            require(member, types, &at.join("."))?;
        } else if let Value::Object(inner) = member {
            check(inner, rest, types, at)?;
        }
        at.pop();
    }
    Ok(())
}

fn require(value: &Value, types: &[Type], path: &str) -> Result<()> {
    if types.iter().any(|t| t.admits(value)) {
        return Ok(());
    }
    let names: Vec<&str> = types.iter().map(|t| t.name()).collect();
    Err(Error::InvalidDesignDoc(format!("`{path}` field must have {} type", names.join(" or "))))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn body(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    fn reason(v: Value, partitioned: bool) -> String {
        match validate(&body(v), partitioned) {
            Err(Error::InvalidDesignDoc(r)) => r,
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn field_types_are_checked_with_couchdbs_reasons() {
        assert_eq!(reason(json!({"language": 1}), false), "`language` field must have string type");
        assert_eq!(
            reason(json!({"views": {"v": {"map": 1}}}), false),
            "`views.v.map` field must have string type"
        );
        assert_eq!(
            reason(json!({"shows": {"s": 1}}), false),
            "`shows.s` field must have object or string type"
        );
        assert_eq!(
            reason(json!({"views": {"v": {"reduce": "_count"}}}), false),
            "View `v` must contain map function"
        );
        assert_eq!(
            reason(json!({"views": {"v": {"map": "f", "reduce": "_median"}}}), false),
            "`_median` is not a supported reduce function."
        );
        let query = json!({"language": "query", "views": {"i": {"map": {"fields": {"a": "asc"}}}}});
        assert!(validate(&body(query), false).is_ok());
    }

    #[test]
    fn partitioned_option_follows_the_database() {
        let plain = body(json!({"views": {}}));
        let global = body(json!({"options": {"partitioned": false}}));
        let forced = json!({"options": {"partitioned": true}});
        assert!(is_partitioned(&plain, true));
        assert!(!is_partitioned(&global, true));
        assert!(!is_partitioned(&plain, false));
        assert_eq!(
            reason(forced.clone(), false),
            "partitioned option cannot be true in a non-partitioned database."
        );
        assert!(validate(&body(forced), true).is_ok());
        assert_eq!(
            reason(json!({"options": {"partitioned": "yes"}}), true),
            "`options.partitioned` field must have boolean type"
        );
    }
}
