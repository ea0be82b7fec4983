//! Creating, listing and deleting Mango indexes: `POST /{db}/_index`, `GET /{db}/_index`,
//! `DELETE /{db}/_index/{ddoc}/json/{name}`. Each is a design-document write, so the
//! index change commits atomically with its definition (`maintain`).

use bunko_doc::body::ParsedDoc;
use serde_json::{Map, Value, json};
use sha1::{Digest, Sha1};

use super::{IndexDef, IndexField, def};
use crate::database::Database;
use crate::security::UserCtx;
use crate::write::WriteOptions;
use crate::{Error, Result, design};

/// What `POST /{db}/_index` asks for, after validation.
#[derive(Debug, Clone, Default)]
pub struct IndexRequest {
    pub fields: Vec<IndexField>,
    pub name: Option<String>,
    /// The design document, with or without `_design/`.
    pub ddoc: Option<String>,
    pub partial_filter: Option<Value>,
    /// `None`: the database's default.
    pub partitioned: Option<bool>,
}

/// Whether `create_index` wrote a new index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Created {
    Created,
    Exists,
}

impl Database {
    /// Adds a JSON index to its design document (creating the document if needed), as
    /// `ctx` (a database admin: the write gate checks the design-document write).
    pub fn create_index(
        &self,
        ctx: &UserCtx,
        req: IndexRequest,
    ) -> Result<(Created, String, String)> {
        let auto = auto_name(&req);
        let (ddoc, name) = target(req.ddoc.as_deref(), req.name.as_deref(), auto);
        let (rev, mut body) = self.load_query_ddoc(&ddoc)?;
        self.set_partitioned_option(&ddoc, rev.is_some(), &mut body, req.partitioned)?;
        let partitioned = design::is_partitioned(&body, self.is_partitioned());
        let index = IndexDef {
            ddoc: ddoc.clone(),
            name: name.clone(),
            fields: req.fields,
            partial_filter: req.partial_filter,
            partitioned,
            mongo: None,
        };
        if IndexDef::from_ddoc(&ddoc, &body, self.is_partitioned()).contains(&index) {
            return Ok((Created::Exists, ddoc, name));
        }
        index.add_to(&mut body);
        self.save_ddoc(ctx, &ddoc, rev, body, false)?;
        Ok((Created::Created, ddoc, name))
    }

    /// Every JSON index of the database, ordered by design document then name.
    pub fn list_indexes(&self) -> Vec<IndexDef> {
        let mut defs: Vec<IndexDef> = self
            .indexes
            .all()
            .iter()
            .filter(|i| i.def.mongo.is_none())
            .map(|i| i.def.clone())
            .collect();
        defs.sort_by(|a, b| (&a.ddoc, &a.name).cmp(&(&b.ddoc, &b.name)));
        defs
    }

    /// Removes index `name` from design document `ddoc`; the document is deleted when it
    /// holds nothing else. `404` if there is no such index.
    pub fn delete_index(&self, ctx: &UserCtx, ddoc: &str, name: &str) -> Result<()> {
        let ddoc =
            if ddoc.starts_with("_design/") { ddoc.to_string() } else { format!("_design/{ddoc}") };
        if self.indexes.get(&ddoc, name).is_none() {
            return Err(crate::error::missing());
        }
        let (rev, mut body) = self.load_query_ddoc(&ddoc)?;
        if !def::remove_from(&mut body, name) {
            return Err(crate::error::missing());
        }
        let only_language = body.len() == 1 && body.contains_key("language");
        self.save_ddoc(ctx, &ddoc, rev, body, only_language)
    }

    /// Sets a new design document's `options.partitioned` to the request's; an existing
    /// one must already agree (`invalid_partitioned_option`).
    pub(super) fn set_partitioned_option(
        &self,
        ddoc: &str,
        exists: bool,
        body: &mut Map<String, Value>,
        requested: Option<bool>,
    ) -> Result<()> {
        let existing =
            body.get("options").and_then(|o| o.get("partitioned")).and_then(Value::as_bool);
        if requested == existing {
            return Ok(());
        }
        match (exists, requested) {
            (false, Some(p)) => {
                body.insert("options".into(), json!({"partitioned": p}));
                Ok(())
            }
            (false, None) => Ok(()),
            (true, _) => Err(Error::Invalid {
                error: "invalid_partitioned_option",
                reason: format!(
                    "Requested partitioned option does not match existing value on design \
                     document {ddoc}"
                ),
            }),
        }
    }

    /// The current revision and body of a design document that may hold indexes (empty
    /// if it does not exist); a design document in another language is refused.
    pub(super) fn load_query_ddoc(
        &self,
        id: &str,
    ) -> Result<(Option<bunko_doc::RevId>, Map<String, Value>)> {
        let doc = match self.get_stored(id, None) {
            Ok(doc) => doc,
            Err(Error::NotFound(_)) => return Ok((None, Map::new())),
            Err(err) => return Err(err),
        };
        let body: Map<String, Value> = serde_json::from_slice(&doc.body).unwrap_or_default();
        match body.get("language") {
            None => {}
            Some(Value::String(l)) if l == "query" => {}
            Some(other) => {
                return Err(Error::Invalid {
                    error: "invalid_ddoc_lang",
                    reason: format!("Existing design doc has an invalid language: {other}"),
                });
            }
        }
        Ok((Some(doc.rev), body))
    }

    pub(super) fn save_ddoc(
        &self,
        ctx: &UserCtx,
        id: &str,
        rev: Option<bunko_doc::RevId>,
        body: Map<String, Value>,
        deleted: bool,
    ) -> Result<()> {
        let doc = ParsedDoc {
            id: Some(id.to_string()),
            rev,
            deleted,
            body: if deleted { Map::new() } else { body },
            ..Default::default()
        };
        self.put(ctx, doc, WriteOptions::default()).map(|_| ())
    }
}

/// The design document and name of a new index: as requested (`_design/` added), or the
/// generated name `auto` for both.
pub(super) fn target(ddoc: Option<&str>, name: Option<&str>, auto: String) -> (String, String) {
    let ddoc = match ddoc {
        Some(d) if d.starts_with("_design/") => d.to_string(),
        Some(d) => format!("_design/{d}"),
        None => format!("_design/{auto}"),
    };
    (ddoc, name.map_or(auto, str::to_string))
}

/// CouchDB names an unnamed index (and its design document) by a hash of its definition.
fn auto_name(req: &IndexRequest) -> String {
    let fields: Vec<Value> =
        req.fields.iter().map(|f| json!([f.name, if f.desc { "desc" } else { "asc" }])).collect();
    let term = json!([fields, req.partial_filter, req.partitioned]);
    hex::encode(Sha1::digest(term.to_string().as_bytes()))
}
