//! `_changes` filters that run design-document code (CouchDB's `couch_changes:
//! configure_filter`): `filter=ddoc/name`, a `filters.name` JavaScript function
//! `function(doc, req)` run in the sandbox, and `filter=_view&view=ddoc/view`, which keeps
//! the documents the view's map function emits for. Both see the winning revision with
//! `_id`, `_rev` (and `_deleted`); each compiles once per request.

use std::sync::Arc;

use bunko_js::{Limits, Outcome, Runtime};
use parking_lot::Mutex;
use serde_json::{Map, Value};

use crate::changes::{ChangesFilter, DocFilter};
use crate::database::Database;
use crate::user_doc::is_truthy;
use crate::{Error, Result};

impl Database {
    /// `filter=ddoc/name`: the design document's filter function, called with `req`.
    pub fn function_filter(&self, ddoc: &str, name: &str, req: Value) -> Result<ChangesFilter> {
        let body = self.ddoc_body(ddoc)?;
        let source = member(&body, "filters", name)?;
        let scripts = Runtime::new(Limits::default())
            .compile_scripts(&[(source.as_str(), Value::Object(body))])?;
        let scripts = Mutex::new(scripts);
        let keep = move |doc: &Value| match scripts.lock().call_plain(0, &[doc, &req])? {
            Outcome::Returned(value) => Ok(is_truthy(&value)),
            // CouchDB's filter.js lets the error end the feed; the document is left out here.
            Outcome::Threw(_) => Ok(false),
        };
        Ok(ChangesFilter::Function(DocFilter(Arc::new(keep))))
    }

    /// `filter=_view&view=ddoc/view`: documents the view's map function emits for.
    pub fn view_filter(&self, ddoc: &str, view: &str) -> Result<ChangesFilter> {
        let body = self.ddoc_body(ddoc)?;
        let views = body.get("views").and_then(Value::as_object);
        let source = views
            .and_then(|v| v.get(view))
            .and_then(|v| v.get("map"))
            .and_then(Value::as_str)
            .ok_or_else(|| Error::NotFound(format!("missing json key: {view}")))?;
        let lib = views.and_then(|v| v.get("lib"));
        let compiled = Runtime::new(Limits::default()).compile_view_set(lib, &[source])?;
        let compiled = Mutex::new(compiled);
        let keep = move |doc: &Value| {
            let out = compiled.lock().map(doc)?;
            Ok(out.rows.first().is_some_and(|rows| !rows.is_empty()))
        };
        Ok(ChangesFilter::Function(DocFilter(Arc::new(keep))))
    }

    /// A design document's body with its `_id` (`404 missing` when there is none).
    fn ddoc_body(&self, ddoc: &str) -> Result<Map<String, Value>> {
        let id = format!("_design/{ddoc}");
        let mut body = self.design_body(&id)?.ok_or_else(|| Error::NotFound("missing".into()))?;
        body.insert("_id".into(), Value::String(id));
        Ok(body)
    }
}

/// `body[field][name]` as a string, or CouchDB's `404 missing json key: …`.
fn member(body: &Map<String, Value>, field: &str, name: &str) -> Result<String> {
    let missing = |key: &str| Error::NotFound(format!("missing json key: {key}"));
    let group = body.get(field).and_then(Value::as_object).ok_or_else(|| missing(field))?;
    group.get(name).and_then(Value::as_str).map(str::to_string).ok_or_else(|| missing(name))
}
