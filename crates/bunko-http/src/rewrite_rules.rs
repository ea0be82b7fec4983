//! A design document's `rewrites` array matched against a request, as CouchDB 3.4's
//! `chttpd_rewrite` does: each rule's `from` (segments, `:name` binds one, a final `*` the
//! rest) and `method` (default any) against the path after `_rewrite`; the first match
//! builds the new path from `to` (`:name` is replaced, `*` is the rest) and its query from
//! the rule's `query` (`:name` and `*` values replaced, `formats` turning them into `int`
//! or `bool`), the request's query and the bindings. `key`-like values are JSON. A `to`
//! with a third `..` is refused unless `chttpd/secure_rewrites` is `false`.

use axum::http::StatusCode;
use serde_json::{Map, Value};

use crate::error::{ApiError, ApiResult};

/// Query keys whose values are JSON.
const JSON_KEYS: [&str; 6] = ["key", "startkey", "start_key", "endkey", "end_key", "keys"];

/// One segment of a rule's `from` or `to`.
#[derive(Debug, Clone, PartialEq)]
enum Part {
    Literal(String),
    Bind(String),
    /// `*`: the rest of the path (in `from`, only last; elsewhere it binds `*`).
    All,
}

/// Bindings in CouchDB's order (first match wins).
type Bindings = Vec<(String, Value)>;

struct Rule {
    from: Vec<Part>,
    method: Option<String>,
    to: Vec<Part>,
    query: Vec<(String, Value)>,
    formats: Map<String, Value>,
}

impl Rule {
    fn parse(rule: &Map<String, Value>, secure: bool) -> ApiResult<Rule> {
        let text = |key: &str| rule.get(key).and_then(Value::as_str);
        let from = match text("from") {
            Some(from) => parse_path(from, secure)?,
            None => vec![Part::All],
        };
        let to = text("to").ok_or_else(|| {
            ApiError::Other(
                StatusCode::INTERNAL_SERVER_ERROR,
                "error",
                "invalid_rewrite_target".into(),
            )
        })?;
        let object = |key: &str| rule.get(key).and_then(Value::as_object).cloned();
        Ok(Rule {
            from,
            method: text("method").filter(|m| *m != "*").map(str::to_string),
            to: parse_path(to, secure)?,
            query: object("query").unwrap_or_default().into_iter().collect(),
            formats: object("formats").unwrap_or_default(),
        })
    }
}

/// The rules' new path (relative to the design document, with its query) for a request
/// of `method` to `parts` (the decoded segments after `_rewrite`) with `query`.
pub fn dispatch(
    rules: &[Value],
    method: &str,
    parts: &[String],
    query: &[(String, String)],
    secure: bool,
) -> ApiResult<String> {
    let rules: Vec<Rule> = rules
        .iter()
        .filter_map(Value::as_object)
        .map(|rule| Rule::parse(rule, secure))
        .collect::<ApiResult<_>>()?;
    let query: Bindings = query.iter().map(|(k, v)| (k.clone(), query_value(k, v))).collect();
    for rule in &rules {
        if rule.method.as_deref().is_some_and(|m| m != method) {
            continue;
        }
        let Some((remaining, mut bindings)) = bind_path(&rule.from, parts) else {
            continue;
        };
        bindings.extend(query.iter().cloned());
        let args = query_args(rule, &bindings);
        let mut all: Bindings =
            bindings.into_iter().filter(|(k, _)| !args.iter().any(|(a, _)| a == k)).collect();
        all.extend(args);
        let path: Vec<String> =
            new_path(&rule.to, &all, remaining).iter().map(|p| quote_plus(p)).collect();
        let mut out = path.join("/");
        let pairs: Vec<String> = all
            .iter()
            .rev()
            .filter(|(k, _)| k != "*")
            .map(|(k, v)| format!("{}={}", quote_plus(k), quote_plus(&encoded(k, v))))
            .collect();
        if !pairs.is_empty() {
            out.push('?');
            out.push_str(&pairs.join("&"));
        }
        return Ok(out);
    }
    Err(ApiError::not_found("missing"))
}

fn parse_path(path: &str, secure: bool) -> ApiResult<Vec<Part>> {
    let mut parts = Vec::new();
    let mut dotdots = 0;
    for segment in path.split('/').filter(|s| !s.is_empty()) {
        parts.push(match segment {
            "*" => Part::All,
            ".." => {
                if dotdots == 2 && secure {
                    return Err(ApiError::Other(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "insecure_rewrite_rule",
                        "too many ../.. segments".into(),
                    ));
                }
                dotdots += 1;
                Part::Literal("..".into())
            }
            other => match other.strip_prefix(':') {
                Some(name) => Part::Bind(name.to_string()),
                None => Part::Literal(other.to_string()),
            },
        });
    }
    Ok(parts)
}

/// The rest of `parts` and the bindings (latest first) if `from` matches them.
fn bind_path(from: &[Part], parts: &[String]) -> Option<(Vec<String>, Bindings)> {
    let mut bindings = Bindings::new();
    let mut parts = parts.iter();
    for (i, token) in from.iter().enumerate() {
        if *token == Part::All && i + 1 == from.len() {
            bindings.reverse();
            return Some((parts.cloned().collect(), bindings));
        }
        let part = parts.next()?;
        match token {
            Part::Literal(literal) if literal == part => {}
            Part::Literal(_) => return None,
            Part::Bind(name) => bindings.push((name.clone(), Value::String(part.clone()))),
            Part::All => bindings.push(("*".into(), Value::String(part.clone()))),
        }
    }
    bindings.reverse();
    parts.next().is_none().then_some((Vec::new(), bindings))
}

/// A request query value: JSON for the `key`-like keys (as sent if it is not JSON).
fn query_value(key: &str, value: &str) -> Value {
    if JSON_KEYS.contains(&key) {
        serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.to_string()))
    } else {
        Value::String(value.to_string())
    }
}

/// The rule's `query` with its variables replaced (CouchDB's order: last first).
fn query_args(rule: &Rule, bindings: &Bindings) -> Bindings {
    let var = |name: &str, default: &Value| {
        let found = bindings.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        format(rule.formats.get(name), found.unwrap_or_else(|| default.clone()))
    };
    let mut args: Bindings = rule
        .query
        .iter()
        .map(|(key, value)| {
            let replaced = match value {
                Value::String(s) if s == "*" => var("*", value),
                Value::String(s) if s.starts_with(':') => var(&s[1..], value),
                Value::Array(items) => Value::Array(
                    items
                        .iter()
                        .map(|item| match item.as_str().and_then(|s| s.strip_prefix(':')) {
                            Some(name) => var(name, item),
                            None => item.clone(),
                        })
                        .collect(),
                ),
                other => other.clone(),
            };
            (key.clone(), replaced)
        })
        .collect();
    args.reverse();
    args
}

/// A `formats` conversion: `int` or `bool` when the value reads as one.
fn format(format: Option<&Value>, value: Value) -> Value {
    let Value::String(text) = &value else { return value };
    match format.and_then(Value::as_str) {
        Some("int") => text.parse::<i64>().map_or(value, Value::from),
        Some("bool") => match text.to_lowercase().as_str() {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            _ => value,
        },
        _ => value,
    }
}

fn new_path(to: &[Part], bindings: &Bindings, remaining: Vec<String>) -> Vec<String> {
    let mut path = Vec::new();
    for part in to {
        match part {
            Part::All => {
                path.extend(remaining);
                break;
            }
            Part::Bind(name) => path.push(
                bindings
                    .iter()
                    .find(|(k, _)| k == name)
                    .map_or_else(|| "undefined".to_string(), |(_, v)| text(v)),
            ),
            Part::Literal(literal) => path.push(literal.clone()),
        }
    }
    path
}

/// A binding as query text: JSON for the `key`-like keys.
fn encoded(key: &str, value: &Value) -> String {
    if JSON_KEYS.contains(&key) { value.to_string() } else { text(value) }
}

fn text(value: &Value) -> String {
    value.as_str().map_or_else(|| value.to_string(), str::to_string)
}

/// `mochiweb_util:quote_plus`: letters, digits and `.-~_` as they are, space as `+`.
pub fn quote_plus(text: &str) -> String {
    const SAFE: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'.')
        .remove(b'-')
        .remove(b'~')
        .remove(b'_')
        .remove(b' ');
    percent_encoding::utf8_percent_encode(text, SAFE).to_string().replace(' ', "+")
}

/// CouchDB's `normalize_path`: empty and `.` segments dropped, `..` takes one back.
pub fn normalize(path: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    for segment in path.split('/').filter(|s| !s.is_empty()) {
        match segment {
            "." => {}
            ".." if out.last().is_some_and(|last| *last != "..") => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    format!("/{}", out.join("/"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn go(rules: Value, method: &str, path: &str, query: &[(&str, &str)]) -> ApiResult<String> {
        let parts: Vec<String> =
            path.split('/').filter(|s| !s.is_empty()).map(str::to_string).collect();
        let query: Vec<(String, String)> =
            query.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        dispatch(rules.as_array().map_or(&[][..], Vec::as_slice), method, &parts, &query, true)
    }

    #[test]
    fn rules_bind_path_segments_into_paths_and_queries() -> ApiResult<()> {
        let rules = json!([
            {"from": "foo", "to": "foo.txt"},
            {"from": "hello/:id", "to": "_update/hello/:id", "method": "PUT"},
            {"from": "/welcome/:name", "to": "_show/welcome", "query": {"name": ":name"}},
            {"from": "path/:start/:end", "to": "_list/f/v",
             "query": {"startkey": ":start", "endkey": ":end"},
             "formats": {"start": "int", "end": "int"}},
            {"from": "cx/:a/:b", "to": "_view/v", "query": {"key": [":a", ":b"]}},
            {"from": "/", "to": "_view/basicView"},
            {"from": "/db/*", "to": "../../*"}
        ]);
        assert_eq!(go(rules.clone(), "GET", "foo", &[])?, "foo.txt");
        let hello = go(rules.clone(), "PUT", "hello/a b", &[])?;
        assert_eq!(hello, "_update/hello/a+b?id=a+b", "bindings are query parameters too");
        assert!(go(rules.clone(), "GET", "hello/x", &[]).is_err(), "PUT only");
        assert_eq!(go(rules.clone(), "GET", "welcome/user", &[])?, "_show/welcome?name=user");
        let range = go(rules.clone(), "GET", "path/3/8", &[])?;
        assert_eq!(range, "_list/f/v?startkey=3&endkey=8&start=3&end=8");
        let key = go(rules.clone(), "GET", "cx/test/essai", &[])?;
        assert_eq!(key, "_view/v?key=%5B%22test%22%2C%22essai%22%5D&a=test&b=essai");
        assert_eq!(go(rules.clone(), "GET", "", &[])?, "_view/basicView");
        let up = go(rules, "GET", "db/_design/test", &[("meta", "true")])?;
        assert_eq!(up, "../../_design/test?meta=true");
        Ok(())
    }

    #[test]
    fn a_third_dotdot_is_insecure_and_paths_normalize() {
        let insecure = go(json!([{"from": "u", "to": "../../../_uuids"}]), "GET", "u", &[]);
        assert_eq!(insecure.err().map(|e| e.parts().1), Some("insecure_rewrite_rule"));
        assert_eq!(normalize("/db/_design/d/../../_changes?x=1"), "/db/_changes?x=1");
        assert_eq!(normalize("/a/./b//c/../../d"), "/a/d");
    }
}
