//! Show and list functions (`shows`, `lists` of a design document), CouchDB's
//! `_design/{d}/_show/{f}[/{id}]` and `_design/{d}/_list/{f}[/{ddoc}]/{view}`
//! (`chttpd_show`, `couch_mrview_show`): read-only, run in the sandbox
//! ([`bunko_js::CompiledRender`]) with the design document as `this`. The HTTP layer reads
//! the view rows a list gets (through `bunko_views::query_view`) and builds `req`.

use bunko_js::{Limits, Rendered, Runtime};
use serde_json::{Map, Value};

use crate::database::Database;
use crate::{Error, Result};

impl Database {
    /// Runs `shows.{name}` of `_design/{ddoc}` on document `id` (`null` when not given or
    /// missing) with `req`; returns its response object.
    pub fn run_show(
        &self,
        ddoc: &str,
        name: &str,
        id: Option<&str>,
        req: &Value,
    ) -> Result<Map<String, Value>> {
        let (source, body) = self.design_function(ddoc, "shows", name)?;
        let doc = match id {
            Some(id) => self.current_json(id)?,
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

fn rendered(rendered: Rendered) -> Result<Map<String, Value>> {
    match rendered {
        Rendered::Response(response) => Ok(response),
        Rendered::Failed { error, reason } if error == "not_found" => Err(Error::NotFound(reason)),
        Rendered::Failed { error, reason } => Err(Error::Render { error, reason }),
    }
}
