//! Golden tests: data files under `tests/golden/`, each an array of cases whose output
//! members are recomputed and compared. `UPDATE_GOLDENFILES=1 cargo test -p bunko-query`
//! rewrites the files with the computed outputs (review the diff before committing).
//!
//! - `match.json`: `{selector, dialect?, cases: [{doc, expected}]}` (dialect `mango` unless
//!   given).
//! - `normalize.json`: `{selector, normalized}`.
//! - `inspect.json`: `{selector, fields, conditions, referenced_fields, noop, implies_exists}`
//!   (`implies_exists` maps the field names to check to the answers).
//! - `errors.json`: `{selector | sort | fields, error, reason}`.
//! - `index_keys.json`: `{doc, fields, keys}`.
//! - `expr.json`: aggregation expressions on MongoDB's documented examples: `{expr, doc?,
//!   result, type}` (relaxed Extended JSON, and the result's `$type` name, so that int,
//!   long, double and decimal are told apart) or `{expr, doc?, error}` (the error code).

use std::fs;
use std::path::PathBuf;

use bson::{Bson, DateTime, Document};
use bunko_query::expr::{Expr, Vars};
use bunko_query::{Dialect, Error, FieldPath, Fields, Selector, Sort, index_keys};
use serde_json::{Map, Value, json};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

#[test]
fn match_golden() -> Result<()> {
    golden("match.json", |case| {
        let selector = Selector::parse(&case["selector"])?;
        let dialect = match case.get("dialect").and_then(Value::as_str) {
            Some("mongo") => Dialect::Mongo,
            _ => Dialect::Mango,
        };
        let mut out = case.clone();
        let cases = out.get_mut("cases").and_then(Value::as_array_mut).ok_or("no cases")?;
        for c in cases {
            let matched = selector.matches(&c["doc"], dialect);
            set(c, "expected", Value::Bool(matched))?;
        }
        Ok(out)
    })
}

#[test]
fn normalize_golden() -> Result<()> {
    golden("normalize.json", |case| {
        let selector = Selector::parse(&case["selector"])?;
        let mut out = case.clone();
        set(&mut out, "normalized", selector.to_json())?;
        // Normalizing is idempotent.
        assert_eq!(Selector::parse(&selector.to_json())?, selector, "{}", case["selector"]);
        Ok(out)
    })
}

#[test]
fn inspect_golden() -> Result<()> {
    golden("inspect.json", |case| {
        let selector = Selector::parse(&case["selector"])?;
        let mut out = case.clone();
        let fields = selector.fields();
        let mut conditions = Map::new();
        for field in &fields {
            let conds = selector.conditions(field).into_iter().map(|c| c.to_json()).collect();
            conditions.insert(field.to_string(), Value::Array(conds));
        }
        set(&mut out, "fields", names(&fields))?;
        set(&mut out, "conditions", Value::Object(conditions))?;
        set(&mut out, "referenced_fields", names(&selector.referenced_fields()))?;
        set(&mut out, "noop", Value::Bool(selector.is_noop()))?;
        let asked = case.get("implies_exists").and_then(Value::as_object).cloned();
        let mut implied = Map::new();
        for name in asked.unwrap_or_default().keys() {
            let exists = selector.implies_exists(&FieldPath::parse(name)?);
            implied.insert(name.clone(), Value::Bool(exists));
        }
        set(&mut out, "implies_exists", Value::Object(implied))?;
        Ok(out)
    })
}

#[test]
fn errors_golden() -> Result<()> {
    golden("errors.json", |case| {
        let result = if let Some(sel) = case.get("selector") {
            Selector::parse(sel).map(|_| ())
        } else if let Some(sort) = case.get("sort") {
            Sort::parse(sort).map(|_| ())
        } else if let Some(fields) = case.get("fields") {
            Fields::parse(fields).map(|_| ())
        } else {
            return Err("a case needs selector, sort or fields".into());
        };
        let mut out = case.clone();
        let (error, reason) = match result {
            Err(e) => (json!(e.error_name()), json!(e.reason())),
            Ok(()) => (Value::Null, Value::Null),
        };
        set(&mut out, "error", error)?;
        set(&mut out, "reason", reason)?;
        Ok(out)
    })
}

#[test]
fn index_keys_golden() -> Result<()> {
    golden("index_keys.json", |case| {
        let fields = case["fields"].as_array().ok_or("fields")?;
        let fields = fields
            .iter()
            .map(|f| FieldPath::parse(f.as_str().unwrap_or_default()))
            .collect::<std::result::Result<Vec<_>, Error>>()?;
        let keys = index_keys(&case["doc"], &fields);
        let mut out = case.clone();
        set(&mut out, "keys", Value::Array(keys.into_iter().map(Value::Array).collect()))?;
        Ok(out)
    })
}

#[test]
fn expr_golden() -> Result<()> {
    golden("expr.json", |case| {
        let expr = Bson::try_from(case["expr"].clone())?;
        let doc = match case.get("doc") {
            Some(d) => {
                Document::try_from(serde_json::from_value::<Map<String, Value>>(d.clone())?)?
            }
            None => Document::new(),
        };
        let mut out = case.clone();
        let map = out.as_object_mut().ok_or("a case must be an object")?;
        let evaluated =
            Expr::parse(&expr).and_then(|e| e.eval(&mut Vars::new(&doc, DateTime::from_millis(0))));
        match evaluated {
            Ok(v) => {
                map.remove("error");
                map.insert("type".into(), json!(bunko_query::expr::value::type_name(&v)));
                map.insert("result".into(), v.into_relaxed_extjson());
            }
            Err(e) => {
                map.remove("result");
                map.remove("type");
                map.insert("error".into(), json!(e.code));
            }
        }
        Ok(out)
    })
}

fn names(fields: &[FieldPath]) -> Value {
    fields.iter().map(|f| Value::String(f.to_string())).collect()
}

fn set(case: &mut Value, key: &str, value: Value) -> Result<()> {
    case.as_object_mut().ok_or("a case must be an object")?.insert(key.to_owned(), value);
    Ok(())
}

/// Runs `run` on every case of `file`; fails listing each case whose recomputed form
/// differs, or rewrites the file when `UPDATE_GOLDENFILES` is set.
fn golden(file: &str, run: impl Fn(&Value) -> Result<Value>) -> Result<()> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(file);
    let cases: Vec<Value> = serde_json::from_str(&fs::read_to_string(&path)?)?;
    let mut actual = Vec::with_capacity(cases.len());
    let mut failures = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let out = run(case).map_err(|e| format!("{file} case {i}: {e}"))?;
        if out != *case || render_value(&out) != render_value(case) {
            failures.push(format!(
                "case {i}:\n  expected {}\n  actual   {}",
                compact(case),
                compact(&out)
            ));
        }
        actual.push(out);
    }
    if std::env::var_os("UPDATE_GOLDENFILES").is_some() {
        fs::write(&path, render(&actual))?;
        return Ok(());
    }
    assert!(
        failures.is_empty(),
        "{file}: {} of {} cases differ\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    Ok(())
}

/// One case per block, one member per line, and for `cases`/`keys` one item per line.
fn render(cases: &[Value]) -> String {
    let blocks: Vec<String> = cases.iter().map(render_value).collect();
    format!("[\n{}\n]\n", blocks.join(",\n"))
}

fn render_value(case: &Value) -> String {
    let Some(map) = case.as_object() else {
        return format!("  {}", compact(case));
    };
    let members: Vec<String> = map
        .iter()
        .map(|(key, value)| {
            let key = compact(&Value::String(key.clone()));
            match value {
                Value::Array(items)
                    if !items.is_empty() && matches!(key.as_str(), "\"cases\"" | "\"keys\"") =>
                {
                    let lines: Vec<String> =
                        items.iter().map(|i| format!("     {}", compact(i))).collect();
                    format!("   {key}: [\n{}\n   ]", lines.join(",\n"))
                }
                _ => format!("   {key}: {}", compact(value)),
            }
        })
        .collect();
    format!("  {{\n{}\n  }}", members.join(",\n"))
}

/// JSON on one line, with a space after each `:` and `,`.
fn compact(v: &Value) -> String {
    match v {
        Value::Array(items) => {
            format!("[{}]", items.iter().map(compact).collect::<Vec<_>>().join(", "))
        }
        Value::Object(map) => {
            let members: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{}: {}", compact(&Value::String(k.clone())), compact(v)))
                .collect();
            format!("{{{}}}", members.join(", "))
        }
        scalar => scalar.to_string(),
    }
}
