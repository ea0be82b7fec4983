//! Query-string parameters with CouchDB's typing: booleans are `true`/`false`, integers
//! are decimal, keys (`key`, `startkey`, `keys`, …) are JSON. A malformed value is a
//! `400 query_parse_error` naming it.

use std::collections::{HashMap, HashSet};

use axum::extract::Request;
use percent_encoding::percent_decode_str;
use serde_json::Value;

use crate::error::{ApiError, ApiResult};

/// The decoded query string of a request.
#[derive(Debug, Default, Clone)]
pub struct Params {
    values: HashMap<String, String>,
    /// Parameters that came from a JSON body as strings: an integer parameter given as a
    /// JSON string is refused, as CouchDB does.
    body_strings: HashSet<String>,
}

impl Params {
    /// Reads a query string; as in CouchDB (mochiweb), `;` separates pairs like `&`.
    pub fn parse(query: Option<&str>) -> Self {
        let query = query.unwrap_or_default().replace(';', "&");
        let pairs = form_urlencoded::parse(query.as_bytes()).into_owned();
        Self { values: pairs.collect(), body_strings: HashSet::new() }
    }

    /// Every parameter as a JSON object of strings (a design function's `req.query`).
    pub fn to_object(&self) -> serde_json::Map<String, Value> {
        let mut pairs: Vec<_> = self.values.iter().collect();
        pairs.sort();
        pairs.into_iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect()
    }

    /// Adds the members of a JSON request body (for POST variants of GET queries), each
    /// as its JSON text, without overriding the query string.
    pub fn merge_json(&mut self, body: &serde_json::Map<String, Value>) {
        for (key, value) in body {
            if self.values.contains_key(key) {
                continue;
            }
            let text = match value {
                Value::String(s) if !is_json_param(key) => {
                    self.body_strings.insert(key.clone());
                    s.clone()
                }
                other => other.to_string(),
            };
            self.values.insert(key.clone(), text);
        }
    }

    pub fn str(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    pub fn remove(&mut self, name: &str) -> Option<String> {
        self.body_strings.remove(name);
        self.values.remove(name)
    }

    pub fn has(&self, name: &str) -> bool {
        self.values.contains_key(name)
    }

    pub fn bool(&self, name: &str) -> ApiResult<Option<bool>> {
        match self.str(name) {
            None => Ok(None),
            Some("true") => Ok(Some(true)),
            Some("false") => Ok(Some(false)),
            Some(other) => {
                Err(ApiError::query_parse(format!("Invalid boolean parameter: \"{other}\"")))
            }
        }
    }

    pub fn flag(&self, name: &str) -> ApiResult<bool> {
        Ok(self.bool(name)?.unwrap_or(false))
    }

    pub fn u64(&self, name: &str) -> ApiResult<Option<u64>> {
        match self.str(name) {
            None => Ok(None),
            Some(text) if self.body_strings.contains(name) => Err(ApiError::query_parse(format!(
                "Invalid value for integer: <<{}>>",
                Value::from(text)
            ))),
            Some(text) => text.parse().map(Some).map_err(|_| {
                let kind = if text.parse::<i64>().is_ok() { "positive integer" } else { "integer" };
                ApiError::query_parse(format!("Invalid value for {kind}: \"{text}\""))
            }),
        }
    }

    /// A JSON-valued parameter.
    pub fn json(&self, name: &str) -> ApiResult<Option<Value>> {
        match self.str(name) {
            None => Ok(None),
            Some(text) => serde_json::from_str(text).map(Some).map_err(|_| {
                ApiError::bad_request(format!("Invalid JSON value for parameter `{name}`"))
            }),
        }
    }

    /// The first present of several JSON-valued aliases (`startkey`/`start_key`).
    pub fn json_any(&self, names: &[&str]) -> ApiResult<Option<Value>> {
        for name in names {
            if let Some(value) = self.json(name)? {
                return Ok(Some(value));
            }
        }
        Ok(None)
    }
}

/// Refuses a request whose percent-decoded path or query is not UTF-8 (`400 bad_request`),
/// as CouchDB does, instead of letting a later decoder replace the bytes silently.
pub fn require_utf8(req: &Request) -> Result<(), ApiError> {
    utf8_error(req.uri().path(), req.uri().query()).map_or(Ok(()), Err)
}

fn utf8_error(path: &str, query: Option<&str>) -> Option<ApiError> {
    let decodes = |text: &str| percent_decode_str(text).decode_utf8().is_ok();
    if !decodes(path) {
        return Some(ApiError::bad_request("invalid UTF-8 in the request path"));
    }
    let query = query.unwrap_or_default().replace('+', " ");
    for pair in query.split(['&', ';']) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        if !decodes(name) || !decodes(value) {
            let name = percent_decode_str(name).decode_utf8_lossy();
            let reason = format!("invalid UTF-8 in query parameter `{name}`");
            return Some(ApiError::bad_request(reason));
        }
    }
    None
}

fn is_json_param(name: &str) -> bool {
    matches!(name, "key" | "keys" | "startkey" | "start_key" | "endkey" | "end_key" | "doc_ids")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_that_are_not_utf8_are_refused_wherever_they_are() {
        let reason = |path: &str, query: Option<&str>| utf8_error(path, query).map(|e| e.parts().2);
        assert_eq!(reason("/db/_all_docs", Some("key=%22%C3%A9%22&x=+")), None);
        let bad_key = "invalid UTF-8 in query parameter `key`".to_string();
        assert_eq!(reason("/db/_all_docs", Some("limit=1;key=%22%FF%22")), Some(bad_key));
        let bad_path = "invalid UTF-8 in the request path".to_string();
        assert_eq!(reason("/db/%FF", None), Some(bad_path));
    }

    #[test]
    fn typed_values_and_errors() -> ApiResult<()> {
        let p = Params::parse(Some("limit=10&descending=true&startkey=%22a%22&bad=x"));
        assert_eq!(p.u64("limit")?, Some(10));
        assert_eq!(p.bool("descending")?, Some(true));
        assert_eq!(p.json("startkey")?, Some(Value::String("a".into())));
        assert!(p.u64("bad").is_err());
        assert!(p.bool("bad").is_err());
        assert!(p.json("bad").is_err());
        Ok(())
    }

    #[test]
    fn body_members_never_override_the_query_string_and_stay_typed() -> ApiResult<()> {
        let mut p = Params::parse(Some("limit=3"));
        let body = serde_json::json!({"limit": 9, "skip": "2", "group_level": 1, "key": "k"});
        p.merge_json(body.as_object().ok_or_else(|| ApiError::bad_request("object"))?);
        assert_eq!(p.u64("limit")?, Some(3));
        assert_eq!(p.u64("group_level")?, Some(1));
        assert_eq!(p.json("key")?, Some(Value::String("k".into())));
        let reason = match p.u64("skip") {
            Err(ApiError::Other(_, "query_parse_error", reason)) => reason,
            other => panic!("a JSON string is not an integer: {other:?}"),
        };
        assert_eq!(reason, r#"Invalid value for integer: <<"2">>"#);
        Ok(())
    }
}
