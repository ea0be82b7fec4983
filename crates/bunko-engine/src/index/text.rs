//! Mango `text` index definitions, stored as CouchDB stores them: a design document with
//! `"language": "query"` holds each under `indexes`,
//!
//! ```json
//! {"_id": "_design/names", "language": "query",
//!  "indexes": {"names": {
//!      "index": {"default_analyzer": "keyword", "default_field": {},
//!                "partial_filter_selector": {}, "selector": {},
//!                "fields": [{"name": "name", "type": "string"}], "index_array_lengths": true},
//!      "analyzer": {"name": "perfield", "default": "keyword",
//!                   "fields": {"$default": "standard"}}}}}
//! ```
//!
//! the same member Cloudant Search reads, so the search service (`bunko-search`) builds
//! and queries these indexes; the engine only keeps the definitions and plans with them
//! ([`crate::find::text`]). Creating and deleting one is a design-document write through
//! the write gate, like a JSON index.

use serde_json::{Map, Value, json};
use sha1::{Digest, Sha1};

use bunko_doc::etf::Writer;
use bunko_query::Selector;
use bunko_query::text::entries::Options;

use super::manage::{Created, target};
use crate::database::Database;
use crate::security::UserCtx;
use crate::{Error, Result, design};

/// One Mango text index.
#[derive(Debug, Clone, PartialEq)]
pub struct TextIndexDef {
    /// The design document holding it (`_design/…`).
    pub ddoc: String,
    pub name: String,
    /// The stored `index` object (`default_analyzer`, `default_field`, `fields`, …).
    pub index: Map<String, Value>,
    /// The stored `analyzer` (Cloudant Search's analyzer specification).
    pub analyzer: Value,
    pub partitioned: bool,
}

impl TextIndexDef {
    /// The text indexes of a design document (none unless its language is `query`); an
    /// entry whose `index` is not an object is a Cloudant Search index instead.
    pub fn from_ddoc(ddoc: &str, body: &Map<String, Value>, db_partitioned: bool) -> Vec<Self> {
        if body.get("language").and_then(Value::as_str) != Some("query") {
            return Vec::new();
        }
        let Some(Value::Object(indexes)) = body.get("indexes") else { return Vec::new() };
        let partitioned = design::is_partitioned(body, db_partitioned);
        indexes
            .iter()
            .filter_map(|(name, entry)| {
                let index = entry.get("index")?.as_object()?.clone();
                Some(TextIndexDef {
                    ddoc: ddoc.to_string(),
                    name: name.clone(),
                    index,
                    analyzer: entry.get("analyzer").cloned().unwrap_or(json!("keyword")),
                    partitioned,
                })
            })
            .collect()
    }

    /// The typed columns the index holds (`mango_idx_text:columns`): `None` for all
    /// fields, else `$default` (when enabled) and `name:type` of each listed field.
    pub fn columns(&self) -> Option<Vec<String>> {
        let Some(Value::Array(fields)) = self.index.get("fields") else { return None };
        let mut out = Vec::new();
        if default_enabled(&self.index) {
            out.push("$default".to_string());
        }
        for field in fields {
            if let (Some(name), Some(kind)) = (
                field.get("name").and_then(Value::as_str),
                field.get("type").and_then(Value::as_str),
            ) {
                out.push(format!("{name}:{kind}"));
            }
        }
        Some(out)
    }

    /// The partial filter (`partial_filter_selector`, or the older `selector`), if any.
    pub fn partial_filter(&self) -> Option<&Value> {
        let non_empty = |v: &&Value| v.as_object().is_some_and(|o| !o.is_empty());
        self.index
            .get("partial_filter_selector")
            .filter(non_empty)
            .or_else(|| self.index.get("selector").filter(non_empty))
    }

    /// What a document puts in the index.
    pub fn options(&self) -> Options {
        let fields = match self.index.get("fields") {
            Some(Value::Array(fields)) => Some(
                fields
                    .iter()
                    .filter_map(|f| {
                        let name = f.get("name")?.as_str()?;
                        let kind = f
                            .get("type")
                            .and_then(Value::as_str)
                            .filter(|k| matches!(*k, "number" | "boolean" | "text"))
                            .unwrap_or("string");
                        Some(Options::column_name(name, kind))
                    })
                    .collect(),
            ),
            _ => None,
        };
        Options {
            fields,
            default_field: default_enabled(&self.index),
            array_lengths: self.index.get("index_array_lengths") != Some(&Value::Bool(false)),
            partial_filter: self.partial_filter().and_then(|s| Selector::parse(s).ok()),
        }
    }

    /// The entry of `GET /{db}/_index` (`mango_idx_text:to_json`).
    pub fn to_json(&self) -> Value {
        let mut def = Map::new();
        for (key, value) in &self.index {
            match (key.as_str(), value) {
                ("fields", Value::Array(fields)) => {
                    let fields: Vec<Value> = fields
                        .iter()
                        .filter_map(|f| {
                            let name = f.get("name")?.as_str()?;
                            Some(json!({ name: f.get("type").cloned().unwrap_or(Value::Null) }))
                        })
                        .collect();
                    def.insert(key.clone(), Value::Array(fields));
                }
                ("fields", _) => {
                    def.insert(key.clone(), json!([]));
                }
                ("partial_filter_selector", Value::Object(o)) if o.is_empty() => {}
                _ => {
                    def.insert(key.clone(), value.clone());
                }
            }
        }
        json!({
            "ddoc": self.ddoc,
            "name": self.name,
            "type": "text",
            "partitioned": self.partitioned,
            "def": def,
        })
    }
}

fn default_enabled(index: &Map<String, Value>) -> bool {
    match index.get("default_field") {
        Some(Value::Bool(b)) => *b,
        Some(Value::Object(o)) => o.get("enabled").and_then(Value::as_bool).unwrap_or(true),
        _ => true,
    }
}

/// What `POST /{db}/_index` with `"type": "text"` asks for.
#[derive(Debug, Clone, Default)]
pub struct TextIndexRequest {
    /// The request's `index` object, as sent.
    pub index: Value,
    pub name: Option<String>,
    pub ddoc: Option<String>,
    /// `None`: the database's default.
    pub partitioned: Option<bool>,
    /// The request's `w` (it takes part in the generated name, as in CouchDB).
    pub w: u64,
}

fn invalid(error: &'static str, reason: String) -> Error {
    Error::Invalid { error, reason }
}

/// `mango_idx_text:validate_new`: the stored `index` object, with CouchDB's defaults.
pub fn validate(index: &Value) -> Result<Map<String, Value>> {
    let Value::Object(given) = index else {
        return Err(invalid(
            "invalid_index",
            format!("Text indexes must be an object, not: {}", bunko_query::erl::w(index)),
        ));
    };
    const KEYS: [&str; 6] = [
        "default_analyzer",
        "default_field",
        "partial_filter_selector",
        "selector",
        "fields",
        "index_array_lengths",
    ];
    if let Some(key) = given.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(invalid("invalid_key", format!("Invalid key {key} for this request.")));
    }
    let mut out = Map::new();
    out.insert(
        "default_analyzer".into(),
        given.get("default_analyzer").cloned().unwrap_or(json!("keyword")),
    );
    out.insert("default_field".into(), given.get("default_field").cloned().unwrap_or(json!({})));
    for key in ["partial_filter_selector", "selector"] {
        let selector = given.get(key).cloned().unwrap_or(json!({}));
        Selector::parse(&selector)
            .map_err(|e| Error::Invalid { error: e.error_name(), reason: e.reason() })?;
        out.insert(key.into(), selector);
    }
    let fields = match given.get("fields") {
        None => json!("all_fields"),
        Some(Value::String(s)) if s == "all_fields" => json!("all_fields"),
        Some(Value::Array(fields)) if fields.is_empty() => json!("all_fields"),
        Some(Value::Array(fields)) if fields.iter().all(valid_field) => {
            Value::Array(fields.clone())
        }
        Some(other) => {
            return Err(invalid(
                "invalid_index_fields_definition",
                format!(
                    "Text Index field definitions must be of the form\n            \
                     {{\"name\": \"non-empty fieldname\", \"type\":\n                \
                     \"boolean,number, or string\"}}. Def: {}",
                    bunko_query::erl::p(other)
                ),
            ));
        }
    };
    out.insert("fields".into(), fields);
    let lengths = match given.get("index_array_lengths") {
        None => Value::Bool(true),
        Some(Value::Bool(b)) => Value::Bool(*b),
        Some(other) => {
            return Err(invalid(
                "invalid_boolean",
                format!("Invalid boolean value: {}", bunko_query::erl::w(other)),
            ));
        }
    };
    out.insert("index_array_lengths".into(), lengths);
    Ok(out)
}

fn valid_field(field: &Value) -> bool {
    let Some(o) = field.as_object() else { return false };
    let name_ok = o.get("name").and_then(Value::as_str).is_some_and(|n| !n.is_empty());
    let type_ok =
        matches!(o.get("type").and_then(Value::as_str), Some("string" | "number" | "boolean"));
    o.len() == 2 && name_ok && type_ok
}

/// `mango_idx_text:construct_analyzer`: `perfield`, with the default field's analyzer
/// for `$default`, or `keyword` when the default field is disabled.
pub fn analyzer(index: &Map<String, Value>) -> Value {
    let default = index.get("default_analyzer").cloned().unwrap_or(json!("keyword"));
    let field = match index.get("default_field") {
        Some(Value::Bool(b)) => (*b).then(|| json!("standard")),
        Some(Value::Object(o)) => (o.get("enabled").and_then(Value::as_bool) != Some(false))
            .then(|| o.get("analyzer").cloned().unwrap_or(json!("standard"))),
        _ => Some(json!("standard")),
    };
    match field {
        Some(field) => {
            json!({"name": "perfield", "default": default, "fields": {"$default": field}})
        }
        None => json!("keyword"),
    }
}

/// CouchDB's generated name (`mango_idx:gen_name`): the SHA-1 of the Erlang term
/// `{Def, lists:usort(Opts)}` of the request, so the same request names the same index.
fn auto_name(req: &TextIndexRequest) -> String {
    let auto = |v: &Option<String>| v.clone();
    let mut w = Writer::new();
    w.tuple_header(2).json(&req.index);
    // usort of [{def,_}, {type,_}, {name,_}, {ddoc,_}, {w,_}, {partitioned,_}]: by atom.
    w.list_header(6);
    let named = |w: &mut Writer, tag: &str, value: Option<String>| {
        w.tuple_header(2).atom(tag);
        match value {
            Some(v) => w.binary(v.as_bytes()),
            None => w.atom("auto_name"),
        };
    };
    named(&mut w, "ddoc", auto(&req.ddoc));
    w.tuple_header(2).atom("def").json(&req.index);
    named(&mut w, "name", auto(&req.name));
    w.tuple_header(2).atom("partitioned");
    match req.partitioned {
        Some(p) => w.atom(if p { "true" } else { "false" }),
        None => w.atom("db_default"),
    };
    w.tuple_header(2).atom("type").binary(b"text");
    w.tuple_header(2).atom("w").integer(req.w as i64);
    w.nil();
    hex::encode(Sha1::digest(w.finish()))
}

impl Database {
    /// Adds a text index to its design document (creating the document if needed), as
    /// `ctx` (the write gate checks the design-document write).
    pub fn create_text_index(
        &self,
        ctx: &UserCtx,
        req: TextIndexRequest,
    ) -> Result<(Created, String, String)> {
        let index = validate(&req.index)?;
        let auto = auto_name(&req);
        let (ddoc, name) = target(req.ddoc.as_deref(), req.name.as_deref(), auto);
        let (rev, mut body) = self.load_query_ddoc(&ddoc)?;
        self.set_partitioned_option(&ddoc, rev.is_some(), &mut body, req.partitioned)?;
        let entry = json!({"analyzer": analyzer(&index), "index": index});
        let existing = body.get("indexes").and_then(|i| i.get(&name));
        if existing.is_some_and(|e| e.get("index") == entry.get("index")) {
            return Ok((Created::Exists, ddoc, name));
        }
        body.insert("language".into(), json!("query"));
        let indexes = body.entry("indexes").or_insert_with(|| json!({}));
        if !indexes.is_object() {
            *indexes = json!({});
        }
        if let Some(indexes) = indexes.as_object_mut() {
            indexes.insert(name.clone(), entry);
        }
        self.save_ddoc(ctx, &ddoc, rev, body, false)?;
        Ok((Created::Created, ddoc, name))
    }

    /// Every text index of the database, ordered by design document then name.
    pub fn text_indexes(&self) -> Result<Vec<TextIndexDef>> {
        let mut out = Vec::new();
        for (id, body) in self.design_bodies()? {
            out.extend(TextIndexDef::from_ddoc(&id, &body, self.is_partitioned()));
        }
        out.sort_by(|a, b| (&a.ddoc, &a.name).cmp(&(&b.ddoc, &b.name)));
        Ok(out)
    }

    /// The body of every design document.
    fn design_bodies(&self) -> Result<Vec<(String, Map<String, Value>)>> {
        let query = crate::all_docs::AllDocsQuery {
            include_docs: true,
            prefix: Some("_design/".into()),
            ..Default::default()
        };
        let mut out = Vec::new();
        for row in self.all_docs(&UserCtx::system(), &query, None)?.rows {
            let row = row?;
            if let Some(doc) = row.doc.filter(|d| !d.deleted)
                && let Ok(body) = serde_json::from_slice(&doc.body)
            {
                out.push((row.id, body));
            }
        }
        Ok(out)
    }

    /// Removes text index `name` from design document `ddoc`; `404` if there is none.
    pub fn delete_text_index(&self, ctx: &UserCtx, ddoc: &str, name: &str) -> Result<()> {
        let ddoc =
            if ddoc.starts_with("_design/") { ddoc.to_string() } else { format!("_design/{ddoc}") };
        let (rev, mut body) = self.load_query_ddoc(&ddoc)?;
        let Some(Value::Object(indexes)) = body.get_mut("indexes") else {
            return Err(crate::error::missing());
        };
        if indexes.shift_remove(name).is_none() {
            return Err(crate::error::missing());
        }
        if indexes.is_empty() {
            body.shift_remove("indexes");
        }
        let only_language = body.len() == 1 && body.contains_key("language");
        self.save_ddoc(ctx, &ddoc, rev, body, only_language)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unnamed_index_is_named_as_couchdb_names_it() {
        // The name CouchDB 3.x gives `{"index": {}, "type": "text", "w": 3}`
        // (src/mango/test/23-explain-indexes-test.py).
        let req = TextIndexRequest { index: json!({}), w: 3, ..Default::default() };
        assert_eq!(auto_name(&req), "cedc01a027213706d7260b5e5b73c70b9233743a");
    }

    #[test]
    fn definitions_get_couchdbs_defaults_and_analyzer() {
        let stored = validate(&json!({"fields": [{"name": "a", "type": "number"}]})).unwrap();
        assert_eq!(stored["default_analyzer"], "keyword");
        assert_eq!(stored["index_array_lengths"], true);
        assert_eq!(
            analyzer(&stored),
            json!({"name": "perfield", "default": "keyword", "fields": {"$default": "standard"}})
        );
        let off = validate(&json!({"default_field": {"enabled": false}})).unwrap();
        assert_eq!(off["fields"], "all_fields");
        assert_eq!(analyzer(&off), json!("keyword"));
        let def = TextIndexDef {
            ddoc: "_design/d".into(),
            name: "n".into(),
            index: stored,
            analyzer: json!("keyword"),
            partitioned: false,
        };
        assert_eq!(def.columns(), Some(vec!["$default".to_string(), "a:number".to_string()]));
        assert_eq!(def.to_json()["def"]["fields"], json!([{"a": "number"}]));
        assert!(validate(&json!({"fields": [{"name": "a", "type": "date"}]})).is_err());
    }
}
