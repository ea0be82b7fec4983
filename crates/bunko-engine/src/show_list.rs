//! Show and list functions (`shows`, `lists` of a design document), CouchDB's
//! `_design/{d}/_show/{f}[/{id}]` and `_design/{d}/_list/{f}[/{ddoc}]/{view}`
//! (`chttpd_show`, `couch_mrview_show`): read-only, run in the sandbox
//! ([`bunko_js::CompiledRender`]) with the design document as `this`. The HTTP layer reads
//! the view rows a list gets (through `bunko_views::query_view`) and builds `req`. Also a
//! design document's `rewrites` ([`Rewrites`]), for `_design/{d}/_rewrite/…`.

use bunko_js::{Limits, Rendered, Rewritten, Runtime};
use serde_json::{Map, Value};

use crate::database::Database;
use crate::{Error, Result};

impl Database {
    /// Runs `shows.{name}` of `_design/{ddoc}` on document `id` (`null` when not given or
    /// missing, or as `reader` sees it) with `req`; returns its response object.
    pub fn run_show(
        &self,
        reader: &crate::security::UserCtx,
        ddoc: &str,
        name: &str,
        id: Option<&str>,
        req: &Value,
    ) -> Result<Map<String, Value>> {
        let (source, body) = self.design_function(ddoc, "shows", name)?;
        let doc = match id {
            Some(id) => self.current_json(reader, id)?,
            None => Value::Null,
        };
        let show = Runtime::new(Limits::default()).compile_render(&source, body)?;
        rendered(show.show(&doc, req)?)
    }

    /// Runs `lists.{name}` of `_design/{ddoc}` over `rows` with `head` and `req`; returns
    /// `{code, headers, body}`.
    pub fn run_list(
        &self,
        ddoc: &str,
        name: &str,
        head: &Value,
        req: &Value,
        rows: &[Value],
    ) -> Result<Map<String, Value>> {
        let (source, body) = self.design_function(ddoc, "lists", name)?;
        let list = Runtime::new(Limits::default()).compile_render(&source, body)?;
        rendered(list.list(head, req, rows)?)
    }
}

/// A design document's `rewrites` (CouchDB's `chttpd_rewrite`).
#[derive(Debug, Clone, PartialEq)]
pub enum Rewrites {
    /// An array of rules (`from`, `to`, `method`, `query`, `formats`), for the HTTP layer
    /// to match.
    Rules(Vec<Value>),
    /// What the rewrite function answered for the request.
    Function(Rewritten),
    /// None, or neither an array nor a function.
    Missing,
}

impl Database {
    /// The `rewrites` of `_design/{ddoc}` for request `req`: its rules, or its function
    /// run on `req` (a missing design document is `not_found` "missing").
    pub fn rewrites(&self, ddoc: &str, req: &Value) -> Result<Rewrites> {
        let id = format!("_design/{ddoc}");
        let mut body = self.design_body(&id)?.ok_or_else(|| Error::NotFound("missing".into()))?;
        body.insert("_id".into(), Value::String(id));
        match body.get("rewrites") {
            Some(Value::Array(rules)) => Ok(Rewrites::Rules(rules.clone())),
            Some(Value::String(source)) => {
                let source = source.clone();
                let rewrite =
                    Runtime::new(Limits::default()).compile_render(&source, body.into())?;
                Ok(Rewrites::Function(rewrite.rewrite(req)?))
            }
            _ => Ok(Rewrites::Missing),
        }
    }
}

fn rendered(rendered: Rendered) -> Result<Map<String, Value>> {
    match rendered {
        Rendered::Response(response) => Ok(response),
        Rendered::Failed { error, reason } if error == "not_found" => Err(Error::NotFound(reason)),
        Rendered::Failed { error, reason } => Err(Error::Render { error, reason }),
    }
}
