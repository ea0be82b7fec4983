//! Design-document update functions (`updates`), CouchDB's `_design/{d}/_update/{f}[/{id}]`
//! (`chttpd_show:send_doc_update_response` and the query server's `render.js`): the
//! function gets the stored document (`null` when there is none) and the request, and
//! returns `[doc, response]`. A returned document is written as the caller, through the
//! same write path (and so the same write gate and validation) as any other write.

use bunko_doc::body::from_value;
use bunko_js::{Limits, Outcome, Runtime};
use serde_json::{Map, Value, json};

use crate::database::Database;
use crate::security::UserCtx;
use crate::triggers::refusal;
use crate::write::WriteOptions;
use crate::{Error, Result};

/// What an update function did.
#[derive(Debug, Clone)]
pub struct Updated {
    /// `(id, new rev)` when it returned a document to save.
    pub saved: Option<(String, String)>,
    /// Its response object (`body`, `json`, `base64`, `headers`; a string becomes `body`).
    pub response: Map<String, Value>,
}

impl Database {
    /// Runs `updates.{name}` of `_design/{ddoc}` on document `id` (if given) with `req`.
    pub fn run_update(
        &self,
        ctx: &UserCtx,
        ddoc: &str,
        name: &str,
        id: Option<&str>,
        req: &Value,
    ) -> Result<Updated> {
        let (source, body) = self.design_function(ddoc, "updates", name)?;
        let doc = match id {
            Some(id) => self.current_json(ctx, id)?,
            None => Value::Null,
        };
        let scripts =
            Runtime::new(Limits::default()).compile_scripts(&[(source.as_str(), body)])?;
        let returned = match scripts.call_plain(0, &[&doc, req])? {
            Outcome::Returned(value) => value,
            Outcome::Threw(verdict) => return Err(refusal(verdict)),
        };
        let (new_doc, response) = match returned {
            Value::Array(mut pair) if pair.len() == 2 => {
                let response = pair.pop().unwrap_or_default();
                (pair.pop().unwrap_or_default(), response)
            }
            _ => return Err(Error::Unknown("update function must return [doc, response]".into())),
        };
        let response = match response {
            Value::String(text) => Map::from_iter([("body".to_string(), json!(text))]),
            Value::Object(map) => map,
            _ => Map::new(),
        };
        let saved = match new_doc {
            Value::Object(_) => {
                let doc = from_value(new_doc, &self.config.get().limits)?;
                // CouchDB's answer for a returned document without `_id`.
                let empty =
                    || bunko_doc::Error::IllegalDocId("Document id must not be empty".into());
                let id = doc.id.clone().ok_or_else(empty)?;
                let rev = self.put(ctx, doc, WriteOptions::default())?;
                Some((id, rev.to_string()))
            }
            _ => None,
        };
        Ok(Updated { saved, response })
    }

    /// The source of `{section}.{name}` of `_design/{ddoc}`, and the design document (with
    /// its `_id`) for `this`: `404 missing` without the design document, `404 missing json
    /// key: …` without the function, as CouchDB's `get_nested_json_value`.
    pub(crate) fn design_function(
        &self,
        ddoc: &str,
        section: &str,
        name: &str,
    ) -> Result<(String, Value)> {
        let ddoc_id = format!("_design/{ddoc}");
        let mut body =
            self.design_body(&ddoc_id)?.ok_or_else(|| Error::NotFound("missing".into()))?;
        body.insert("_id".into(), Value::String(ddoc_id));
        let source = body
            .get(section)
            .ok_or_else(|| Error::NotFound(format!("missing json key: {section}")))?
            .get(name)
            .and_then(Value::as_str)
            .ok_or_else(|| Error::NotFound(format!("missing json key: {name}")))?
            .to_string();
        Ok((source, Value::Object(body)))
    }

    /// The winning revision of `id` with `_id` and `_rev` as `reader` sees it, or `null`.
    pub(crate) fn current_json(&self, reader: &UserCtx, id: &str) -> Result<Value> {
        let doc = match self.get(reader, id, None) {
            Ok(doc) if !doc.deleted => doc,
            Ok(_) | Err(Error::NotFound(_)) => return Ok(Value::Null),
            Err(err) => return Err(err),
        };
        let mut body: Map<String, Value> = serde_json::from_slice(&doc.body)
            .map_err(|_| Error::Corrupt("document body".into()))?;
        body.insert("_id".into(), Value::String(doc.id.clone()));
        body.insert("_rev".into(), Value::String(doc.rev.to_string()));
        Ok(Value::Object(body))
    }
}
