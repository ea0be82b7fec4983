//! A design document's search indexes: `"indexes": {name: {"index": "function(doc)
//! {...}", "analyzer": ...}}`. Each index is named by a signature over what changes its
//! contents (function source, analyzer, partitioning), so an edit of one index rebuilds
//! only that one, and `_search_cleanup` removes the directories no signature names.

use md5::{Digest, Md5};
use serde_json::{Map, Value, json};

use crate::analyzer::Analyzers;
use bunko_engine::{Error, Result};

/// One search index of a design document.
#[derive(Debug, Clone)]
pub struct IndexDef {
    pub ddoc: String,
    pub name: String,
    /// The `index` function's source.
    pub source: String,
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
        let source = def.get("index").and_then(Value::as_str).ok_or_else(|| {
            Error::BadRequest(format!("Search index {name} has no index function"))
        })?;
        let analyzer = def.get("analyzer").cloned().unwrap_or(Value::Null);
        let analyzers = Analyzers::from_spec(&analyzer)?;
        let partitioned = bunko_engine::design::is_partitioned(body, db_partitioned);
        let text = json!([source, analyzer, partitioned]).to_string();
        let sig = hex::encode(Md5::digest(text.as_bytes()));
        Ok(IndexDef {
            ddoc: ddoc.to_string(),
            name: name.to_string(),
            source: source.to_string(),
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
        let source = self.source.trim().trim_end_matches(';');
        format!(
            "(function () {{ var index = function (name, value, options) {{ \
             emit([name, value], options === undefined ? null : options); }}; \
             return ({source}\n); }})()"
        )
    }
}
