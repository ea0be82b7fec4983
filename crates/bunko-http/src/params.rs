//! Query-string parameters with CouchDB's typing: booleans are `true`/`false`, integers
//! are decimal, keys (`key`, `startkey`, `keys`, …) are JSON. A malformed value is a
//! `400 query_parse_error` naming it.

use std::collections::HashMap;

use serde_json::Value;

use crate::error::{ApiError, ApiResult};

/// The decoded query string of a request.
#[derive(Debug, Default, Clone)]
pub struct Params(HashMap<String, String>);

impl Params {
    /// Reads a query string; as in CouchDB (mochiweb), `;` separates pairs like `&`.
    pub fn parse(query: Option<&str>) -> Self {
        let query = query.unwrap_or_default().replace(';', "&");
        let pairs = form_urlencoded::parse(query.as_bytes()).into_owned();
        Self(pairs.collect())
    }

    /// Adds the members of a JSON request body (for POST variants of GET queries), each
    /// as its JSON text, without overriding the query string.
    pub fn merge_json(&mut self, body: &serde_json::Map<String, Value>) {
        for (key, value) in body {
            let text = match value {
                Value::String(s) if !is_json_param(key) => s.clone(),
                other => other.to_string(),
            };
            self.0.entry(key.clone()).or_insert(text);
        }
    }

    pub fn str(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    pub fn remove(&mut self, name: &str) -> Option<String> {
        self.0.remove(name)
    }

    pub fn has(&self, name: &str) -> bool {
        self.0.contains_key(name)
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

fn is_json_param(name: &str) -> bool {
    matches!(name, "key" | "keys" | "startkey" | "start_key" | "endkey" | "end_key" | "doc_ids")
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
