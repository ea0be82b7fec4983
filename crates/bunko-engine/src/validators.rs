//! `validate_doc_update` functions on the write path, part of the write gate
//! ([`crate::gate`]): every document write (not design or `_local` documents, as in
//! CouchDB) runs every validation function of the database under the writer lock, with
//! the document as written, the stored document, the user and the security object.
//!
//! A MongoDB collection validator (`validator`, `validationLevel`, `validationAction` of
//! `create`/`collMod`) is enforced here too, for writes from both APIs: the MongoDB front end
//! stores it in `_design/mongodb` under `validate` as a Mongo-dialect selector, and every
//! document write (not deletions) must match it ([`MongoRule`]), or is refused with
//! [`Error::Rejected`] (HTTP `403 forbidden`, MongoDB `DocumentValidationFailure`, 121).
//!
//! The functions are compiled once into one sandbox and kept until a design document is
//! written ([`Database::forget_validators`], called under the same writer lock, so a
//! validation never runs with a stale set). A database without such functions pays one
//! scan of its design documents after each design-document write, then nothing.

use bunko_doc::body::ParsedDoc;
use bunko_doc::ejson;
use bunko_js::{CompiledValidators, Update, Verdict};
use bunko_query::{Dialect, Selector};
use parking_lot::Mutex;
use serde_json::{Map, Value, json};

use crate::attachments::AttMeta;
use crate::database::Database;
use crate::keys;
use crate::records::DocInfo;
use crate::security::UserCtx;
use crate::{Error, Result};

/// The compiled functions of one database; `None` inside until loaded.
#[derive(Debug, Default)]
pub(crate) struct Validators {
    loaded: Mutex<Option<Loaded>>,
}

#[derive(Debug)]
struct Loaded {
    js: Option<CompiledValidators>,
    mongo: Option<MongoRule>,
}

/// A MongoDB collection validator.
#[derive(Debug)]
struct MongoRule {
    selector: Selector,
    /// The validator's `$jsonSchema`.
    schema: Option<bson::Document>,
    /// `validationLevel: "moderate"`: an update of a document that does not match already
    /// is not checked.
    moderate: bool,
    /// `validationAction: "warn"`: a failure is logged, not refused.
    warn: bool,
    /// The validator as the tree `errInfo.details` is explained from
    /// (`bunko_query::schema::query_details`); absent in validators stored before it was.
    details: Option<Value>,
}

/// The design document holding a MongoDB collection's options and validator.
const MONGO_DDOC: &str = "_design/mongodb";

/// The stored document a validation sees as `oldDoc`.
pub(crate) struct Stored<'a> {
    pub info: &'a DocInfo,
    /// The winning body, `None` when the winner is deleted.
    pub body: Option<Map<String, Value>>,
}

impl Database {
    /// Drops the compiled functions (a design document changed).
    pub(crate) fn forget_validators(&self) {
        *self.validators.loaded.lock() = None;
    }

    /// Whether the database has validation functions (compiling them if needed); call
    /// under the writer lock.
    pub(crate) fn has_validators(&self) -> Result<bool> {
        let mut loaded = self.validators.loaded.lock();
        if loaded.is_none() {
            *loaded = Some(self.compile_validators()?);
        }
        Ok(loaded.as_ref().is_some_and(|l| l.js.is_some() || l.mongo.is_some()))
    }

    /// Whether the database is known to have no validation functions (compiled and none
    /// found); `false` while they are not compiled yet. Takes no writer lock.
    pub(crate) fn known_without_validators(&self) -> bool {
        let loaded = self.validators.loaded.lock();
        loaded.as_ref().is_some_and(|l| l.js.is_none() && l.mongo.is_none())
    }

    /// Runs the database's validation functions on one write (without its MongoDB
    /// validator when `skip_mongo_rule`: `bypassDocumentValidation`); call under the writer
    /// lock.
    pub(crate) fn run_validators(
        &self,
        ctx: &UserCtx,
        security: &str,
        (doc, atts): (&ParsedDoc, &[AttMeta]),
        old: Option<Stored<'_>>,
        skip_mongo_rule: bool,
    ) -> Result<()> {
        let mut loaded = self.validators.loaded.lock();
        if loaded.is_none() {
            *loaded = Some(self.compile_validators()?);
        }
        let Some(loaded) = loaded.as_ref() else { return Ok(()) };
        if let Some(rule) = loaded.mongo.as_ref().filter(|_| !skip_mongo_rule) {
            rule.check(self, doc, old.as_ref().and_then(|o| o.body.as_ref()))?;
        }
        let Some(validators) = &loaded.js else { return Ok(()) };
        let new_doc = new_doc_json(doc, atts);
        let old_doc = old.map_or(Value::Null, |o| old_doc_json(doc, o));
        let user_ctx = json!({"db": self.name(), "name": ctx.name, "roles": ctx.roles});
        let sec_obj: Value = serde_json::from_str(security).unwrap_or_else(|_| json!({}));
        let update =
            Update { new_doc: &new_doc, old_doc: &old_doc, user_ctx: &user_ctx, sec_obj: &sec_obj };
        match validators.validate(update)? {
            Verdict::Accept => Ok(()),
            Verdict::Forbidden(reason) => Err(Error::Rejected(reason)),
            Verdict::Unauthorized(reason) => Err(Error::Unauthorized(reason)),
            Verdict::Unknown(reason) => Err(Error::Unknown(reason)),
        }
    }

    /// Compiles the `validate_doc_update` of every live design document, in id order, and
    /// the MongoDB validator.
    fn compile_validators(&self) -> Result<Loaded> {
        let range = keys::doc_prefix(self.id(), "_design/");
        let mut functions = Vec::new();
        let mut mongo = None;
        for (key, _) in self.store.scan(&range, false, usize::MAX)? {
            let id = keys::decode_doc(&key)?;
            let Some(mut body) = self.design_body(&id)? else { continue };
            if id == MONGO_DDOC {
                mongo = MongoRule::parse(body.get("validate"))?;
            }
            if let Some(Value::String(source)) = body.get("validate_doc_update").cloned() {
                body.insert("_id".to_string(), Value::String(id));
                functions.push((source, Value::Object(body)));
            }
        }
        if functions.is_empty() {
            return Ok(Loaded { js: None, mongo });
        }
        let sources: Vec<(&str, Value)> =
            functions.iter().map(|(s, d)| (s.as_str(), d.clone())).collect();
        Ok(Loaded { js: Some(crate::js::runtime().compile_validators(&sources)?), mongo })
    }
}

impl MongoRule {
    /// Reads `{"selector", "level", "action"}`; `None` without one or with level `off`.
    fn parse(rule: Option<&Value>) -> Result<Option<MongoRule>> {
        let Some(Value::Object(rule)) = rule else { return Ok(None) };
        let Some(selector) = rule.get("selector") else { return Ok(None) };
        let level = rule.get("level").and_then(Value::as_str).unwrap_or("strict");
        if level == "off" {
            return Ok(None);
        }
        let selector = Selector::parse_mongo(selector)
            .map_err(|e| Error::Corrupt(format!("{MONGO_DDOC} validator: {e}")))?;
        let warn = rule.get("action").and_then(Value::as_str) == Some("warn");
        let schema = match rule.get("schema") {
            Some(Value::Object(schema)) => Some(ejson::from_json(schema)),
            _ => None,
        };
        let details = rule.get("details").filter(|d| d.is_object()).cloned();
        Ok(Some(MongoRule { selector, schema, moderate: level == "moderate", warn, details }))
    }

    /// Checks one write: the document as MongoDB sees it (`_id` first) must match.
    fn check(
        &self,
        db: &Database,
        doc: &ParsedDoc,
        old: Option<&Map<String, Value>>,
    ) -> Result<()> {
        let id = doc.id.as_deref().unwrap_or_default();
        if doc.deleted || self.matches(id, &doc.body) {
            return Ok(());
        }
        if self.moderate && old.is_some_and(|old| !self.matches(id, old)) {
            return Ok(());
        }
        let info = self.failure(id, &doc.body);
        if self.warn {
            tracing::warn!(db = %db.name(), err_info = %info, "Document would fail validation");
            return Ok(());
        }
        Err(Error::DocumentValidation { info: Box::new(info) })
    }

    /// The document as MongoDB sees it: `_id` first, then the body.
    fn with_id(id: &str, body: &Map<String, Value>) -> Map<String, Value> {
        let mut doc = Map::new();
        doc.insert("_id".into(), ejson::value_to_json(&ejson::id_value(id)));
        doc.extend(body.iter().map(|(k, v)| (k.clone(), v.clone())));
        doc
    }

    fn matches(&self, id: &str, body: &Map<String, Value>) -> bool {
        let doc = Self::with_id(id, body);
        let schema_ok = self
            .schema
            .as_ref()
            .is_none_or(|schema| bunko_query::schema::matches(schema, &ejson::from_json(&doc)));
        schema_ok && self.selector.matches(&Value::Object(doc), Dialect::Mongo)
    }

    /// MongoDB's `errInfo` of a refused document: `failingDocumentId` and `details` (why
    /// each failing clause of the validator fails; for a validator stored without its tree,
    /// only a failing `$jsonSchema` is explained).
    fn failure(&self, id: &str, body: &Map<String, Value>) -> bson::Document {
        let with_id = Self::with_id(id, body);
        let doc = ejson::from_json(&with_id);
        let mut info = bson::doc! {"failingDocumentId": ejson::id_value(id)};
        let details = match (&self.details, &self.schema) {
            (Some(tree), _) => {
                let view = Value::Object(with_id);
                let matches = |selector: &Value| {
                    Selector::parse_mongo(selector).is_ok_and(|s| s.matches(&view, Dialect::Mongo))
                };
                bunko_query::schema::query_details(tree, &doc, &matches)
            }
            (None, Some(schema)) if !bunko_query::schema::matches(schema, &doc) => {
                Some(bunko_query::schema::details(schema, &doc))
            }
            (None, _) => None,
        };
        if let Some(details) = details {
            info.insert("details", details);
        }
        info
    }
}

/// `newDoc`: the body with `_id`, the `_rev` it edits, `_deleted`, `_revisions` and the
/// attachments `atts` as stubs, as CouchDB passes the edit (`couch_doc:to_json_obj(Doc,
/// [revs])`: `content_type`, `revpos`, `digest`, `length`, `stub`).
pub(crate) fn new_doc_json(doc: &ParsedDoc, atts: &[AttMeta]) -> Value {
    let mut out = Map::new();
    out.insert("_id".into(), json!(doc.id));
    if let Some(rev) = &doc.rev {
        out.insert("_rev".into(), json!(rev.to_string()));
    }
    out.extend(doc.body.clone());
    if doc.deleted {
        out.insert("_deleted".into(), json!(true));
    }
    if let Some(rev) = &doc.rev {
        let ids: Vec<String> = match &doc.revisions {
            Some(path) => path.iter().map(|r| r.hash.clone()).collect(),
            None => vec![rev.hash.clone()],
        };
        out.insert("_revisions".into(), json!({"start": rev.pos, "ids": ids}));
    }
    if !atts.is_empty() {
        let stubs: Map<String, Value> =
            atts.iter().map(|a| (a.name.clone(), a.stub_json())).collect();
        out.insert("_attachments".into(), Value::Object(stubs));
    }
    Value::Object(out)
}

/// `oldDoc`: the stored winner with `_id` and `_rev` (a deleted one as its tombstone).
fn old_doc_json(doc: &ParsedDoc, old: Stored<'_>) -> Value {
    let Ok((rev, deleted)) = old.info.winner() else { return Value::Null };
    let mut out = Map::new();
    out.insert("_id".into(), json!(doc.id));
    out.insert("_rev".into(), json!(rev.to_string()));
    if deleted {
        out.insert("_deleted".into(), json!(true));
    } else {
        out.extend(old.body.unwrap_or_default());
    }
    Value::Object(out)
}
