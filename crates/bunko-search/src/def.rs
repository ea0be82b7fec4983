//! A design document's search indexes: `"indexes": {name: {"index": "function(doc)
//! {...}", "analyzer": ...}}`. Each index is named by a signature over what changes its
//! contents (function source, analyzer, partitioning), so an edit of one index rebuilds
//! only that one, and `_search_cleanup` removes the directories no signature names.
//!
//! A Mango `text` index (`POST /{db}/_index` with `"type": "text"`) is an entry of the same
//! `indexes` member whose `index` is an object (its options) instead of a function: its
//! documents' fields come from [`bunko_query::text::entries`], not from JavaScript.

use md5::{Digest, Md5};
use serde_json::{Map, Value, json};

use crate::analyzer::Analyzers;
use bunko_engine::index::text::TextIndexDef;
use bunko_engine::{Error, Result};

/// Where an index's entries come from.
#[derive(Debug, Clone)]
pub enum Source {
    /// The `index` function's source (Cloudant Search).
    Js(String),
    /// A Mango text index's definition.
    Mango(Box<TextIndexDef>),
}

/// One search index of a design document.
#[derive(Debug, Clone)]
pub struct IndexDef {
    pub ddoc: String,
    pub name: String,
    pub source: Source,
    pub analyzers: Analyzers,
    /// The design document's indexes are partitioned (`options.partitioned`).
    pub partitioned: bool,
    /// Hex MD5 over source, analyzer and partitioning.
    pub sig: String,
}

impl IndexDef {
    /// Index `name` of design document `ddoc` (`body`), or `404 not_found`.
    pub fn from_ddoc(
        ddoc: &str,
        body: &Map<String, Value>,
        name: &str,
        db_partitioned: bool,
    ) -> Result<IndexDef> {
        let def = body
            .get("indexes")
            .and_then(|i| i.get(name))
            .ok_or_else(|| Error::NotFound(format!("Search index {name} not found")))?;
        let partitioned = bunko_engine::design::is_partitioned(body, db_partitioned);
        let (source, text) = match def.get("index") {
            Some(Value::String(js)) => (Source::Js(js.clone()), js.clone()),
            Some(Value::Object(options)) => {
                let mango = TextIndexDef::from_ddoc(ddoc, body, db_partitioned)
                    .into_iter()
                    .find(|t| t.name == name)
                    .ok_or_else(|| Error::NotFound(format!("Search index {name} not found")))?;
                (Source::Mango(Box::new(mango)), Value::Object(options.clone()).to_string())
            }
            _ => {
                return Err(Error::BadRequest(format!(
                    "Search index {name} has no index function"
                )));
            }
        };
        let analyzer = def.get("analyzer").cloned().unwrap_or(Value::Null);
        let analyzers = Analyzers::from_spec(&analyzer)?;
        let text = json!([text, analyzer, partitioned]).to_string();
        let sig = hex::encode(Md5::digest(text.as_bytes()));
        Ok(IndexDef {
            ddoc: ddoc.to_string(),
            name: name.to_string(),
            source,
            analyzers,
            partitioned,
            sig,
        })
    }

    /// The signatures of every index `body` defines (unusable ones left out).
    pub fn sigs_of(ddoc: &str, body: &Map<String, Value>, db_partitioned: bool) -> Vec<String> {
        let Some(Value::Object(indexes)) = body.get("indexes") else { return Vec::new() };
        indexes
            .keys()
            .filter_map(|name| IndexDef::from_ddoc(ddoc, body, name, db_partitioned).ok())
            .map(|def| def.sig)
            .collect()
    }

    /// The program the view sandbox compiles: the index function with CouchDB's
    /// `index(name, value, options)` in scope, each call kept as an emitted row
    /// `[[name, value], options]`.
    pub fn program(&self) -> String {
        let source = match &self.source {
            Source::Js(source) => source.trim().trim_end_matches(';'),
            Source::Mango(_) => "function (doc) {}",
        };
        format!(
            "(function () {{ var index = function (name, value, options) {{ \
             emit([name, value], options === undefined ? null : options); }}; \
             return ({source}\n); }})()"
        )
    }
}
