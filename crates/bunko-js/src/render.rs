//! Show and list functions of design documents (CouchDB's `render.js` and the Erlang side
//! in `chttpd_show`/`couch_mrview_show`), deprecated in CouchDB 3 but still served.
//!
//! A show function gets `(doc, req)` (`doc` is `null` when there is none) and returns a
//! response: a string (the body) or `{code, headers, body | json | base64}`; it may also
//! `send()` chunks, `start({code, headers})` and choose by `provides(format, fun)`. A
//! list function gets `(head, req)`, reads the view's rows with `getRow()`, `send()`s the
//! output and may return a last chunk; its answer is `{code, headers, body}` with every
//! chunk in `body`. `provides` picks the function by `?format=`, else the `Accept` header
//! (CouchDB's mimeparse), else the first offered, and sets the response's `Content-Type`
//! from `registerType`'s table. Rows are handed to the sandbox as one array and the
//! output is collected whole: a list's memory grows with its view range.

use serde_json::{Map, Value};

use crate::error::{Result, internal};
use crate::sandbox::{Kind, Sandbox};
use crate::views::Runtime;

/// One compiled show or list function with its design document.
pub struct CompiledRender {
    sandbox: Sandbox,
    id: u32,
    ddoc: Value,
}

impl std::fmt::Debug for CompiledRender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledRender").finish_non_exhaustive()
    }
}

/// What a show or list function produced.
#[derive(Debug, Clone, PartialEq)]
pub enum Rendered {
    /// The response object: `code`, `headers`, and `body`, `json` or `base64`.
    Response(Map<String, Value>),
    /// It failed with CouchDB's error name and reason (`render_error`, `not_found`,
    /// `not_acceptable`, or what it threw as `["error", name, reason]` or `{error, reason}`).
    Failed { error: String, reason: String },
}

/// What a rewrite function (a design document's `rewrites` as a string) answered.
#[derive(Debug, Clone, PartialEq)]
pub enum Rewritten {
    /// Its rule: `path`, `query`, `method`, `headers`, `body`, or `code` for an answer of
    /// its own (a string it returned is the `path`).
    Rule(Map<String, Value>),
    /// It returned nothing (CouchDB's `no_dispatch_rule`).
    NoRule,
    /// It threw, or returned neither a string nor an object.
    Failed { error: String, reason: String },
}

impl Runtime {
    /// Compiles a show or list function of design document `ddoc` (its `this`).
    pub fn compile_render(&self, source: &str, ddoc: Value) -> Result<CompiledRender> {
        let sandbox = Sandbox::new(self.limits())?;
        sandbox.set_root(&ddoc.to_string())?;
        let id = sandbox.compile(source, Kind::Design)?;
        Ok(CompiledRender { sandbox, id, ddoc })
    }
}

impl CompiledRender {
    /// Runs it as a show function on `doc` (`null` if none) and `req`.
    pub fn show(&self, doc: &Value, req: &Value) -> Result<Rendered> {
        let call = Value::Array(vec![self.ddoc.clone(), doc.clone(), req.clone()]);
        self.run("show", &call)
    }

    /// Runs it as a list function over `rows` with `head` (`total_rows`, `offset`).
    pub fn list(&self, head: &Value, req: &Value, rows: &[Value]) -> Result<Rendered> {
        let text = serde_json::to_string(&(&self.ddoc, head, req, rows)).map_err(internal)?;
        self.run_text("list", &text)
    }

    /// Runs it as a rewrite function on `req`.
    pub fn rewrite(&self, req: &Value) -> Result<Rewritten> {
        let call = Value::Array(vec![self.ddoc.clone(), req.clone()]);
        let text = self.sandbox.render("rewrite", self.id, &call.to_string())?;
        Ok(match serde_json::from_str(&text).map_err(internal)? {
            (0u8, Value::Object(rule)) => Rewritten::Rule(rule),
            (0, Value::Null) => Rewritten::NoRule,
            (0, _) => {
                Rewritten::Failed { error: "rewrite_error".into(), reason: "bad rewrite".into() }
            }
            (_, failed) => {
                let text =
                    |i: usize| failed.get(i).and_then(Value::as_str).unwrap_or("").to_string();
                // render.js names a rewrite function's errors `rewrite_error`.
                let error = match text(0) {
                    e if e == "render_error" => "rewrite_error".to_string(),
                    e => e,
                };
                Rewritten::Failed { error, reason: text(1) }
            }
        })
    }

    fn run(&self, op: &str, call: &Value) -> Result<Rendered> {
        self.run_text(op, &call.to_string())
    }

    fn run_text(&self, op: &str, text: &str) -> Result<Rendered> {
        let answer: (u8, Value) =
            serde_json::from_str(&self.sandbox.render(op, self.id, text)?).map_err(internal)?;
        Ok(match answer {
            (0, Value::Object(response)) => Rendered::Response(response),
            (0, other) => Rendered::Failed {
                error: "render_error".into(),
                reason: format!("undefined response from {op} function: {other}"),
            },
            (_, failed) => {
                let text =
                    |i: usize| failed.get(i).and_then(Value::as_str).unwrap_or("").to_string();
                Rendered::Failed { error: text(0), reason: text(1) }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn compile(source: &str) -> Result<CompiledRender> {
        Runtime::default().compile_render(source, json!({"_id": "_design/d", "title": "書庫"}))
    }

    fn response(rendered: Rendered) -> Map<String, Value> {
        match rendered {
            Rendered::Response(r) => r,
            Rendered::Failed { error, reason } => panic!("{error}: {reason}"),
        }
    }

    #[test]
    fn a_show_returns_a_string_or_an_object_with_this_as_the_ddoc() -> Result<()> {
        let show = compile("function(doc, req) { return this.title + ':' + doc.name; }")?;
        let got = response(show.show(&json!({"name": "花子"}), &json!({}))?);
        assert_eq!(Value::Object(got), json!({"body": "書庫:花子"}));
        let show = compile("function(doc, req) { return {code: 201, json: {q: req.query.q}}; }")?;
        let got = response(show.show(&Value::Null, &json!({"query": {"q": "x"}}))?);
        assert_eq!(Value::Object(got), json!({"code": 201, "json": {"q": "x"}}));
        Ok(())
    }

    #[test]
    fn provides_picks_by_format_then_accept() -> Result<()> {
        let show = compile(
            "function(doc, req) {
                provides('html', function() { return '<p>' + doc.n + '</p>'; });
                provides('json', function() { return {json: {n: doc.n}}; });
            }",
        )?;
        let doc = json!({"n": 1});
        let req =
            |query: Value, accept: &str| json!({"query": query, "headers": {"Accept": accept}});
        let got = response(show.show(&doc, &req(json!({"format": "html"}), "*/*"))?);
        assert_eq!(got["body"], json!("<p>1</p>"));
        assert_eq!(got["headers"]["Content-Type"], json!("text/html; charset=utf-8"));
        let got = response(show.show(&doc, &req(json!({}), "application/json"))?);
        assert_eq!(got["headers"]["Content-Type"], json!("application/json"));
        let refused = show.show(&doc, &req(json!({}), "image/png"))?;
        let Rendered::Failed { error, reason } = refused else { panic!("not acceptable") };
        assert_eq!(error, "not_acceptable");
        assert!(
            reason.starts_with("Content-Type image/png not supported, try one of: "),
            "{reason}"
        );
        Ok(())
    }

    #[test]
    fn a_list_reads_rows_and_sends_chunks() -> Result<()> {
        let list = compile(
            "function(head, req) {
                start({code: 200, headers: {'Content-Type': 'text/plain'}});
                send('total ' + head.total_rows + '\\n');
                var row;
                while ((row = getRow())) { send(row.key + '=' + row.value + '\\n'); }
                return 'end';
            }",
        )?;
        let rows = [
            json!({"id": "a", "key": "a", "value": 1}),
            json!({"id": "b", "key": "b", "value": 2}),
        ];
        let got = response(list.list(&json!({"total_rows": 2, "offset": 0}), &json!({}), &rows)?);
        assert_eq!(got["body"], json!("total 2\na=1\nb=2\nend"));
        assert_eq!(got["headers"], json!({"Content-Type": "text/plain"}));
        assert_eq!(got["code"], json!(200));
        Ok(())
    }

    #[test]
    fn design_functions_require_modules_of_the_design_document() -> Result<()> {
        let ddoc = json!({"_id": "_design/d", "lib": {
            "shelf": "exports.title = require('./names').first.toUpperCase() + module.id;",
            "names": "exports.first = 'soseki';",
            "one": "require('./two'); exports.name = 'One';",
            "two": "require('./one'); exports.name = 'Two';"
        }});
        let rt = Runtime::default();
        let show =
            rt.compile_render("function() { return require('lib/shelf').title; }", ddoc.clone())?;
        assert_eq!(response(show.show(&Value::Null, &json!({}))?)["body"], "SOSEKIlib/shelf");
        let circular = rt.compile_render("function() { return require('lib/one').name; }", ddoc)?;
        assert_eq!(response(circular.show(&Value::Null, &json!({}))?)["body"], "One");
        Ok(())
    }

    #[test]
    fn a_rewrite_function_answers_a_rule_a_path_or_nothing() -> Result<()> {
        let rewrite = compile(
            "function(req) {
                if (req.path[4] === 'a') return 'a.txt';
                if (req.path[4] === 'b') return {path: '_show/s', query: {q: this.title}};
            }",
        )?;
        let req = |part: &str| json!({"path": ["db", "_design", "d", "_rewrite", part]});
        let rule = |v: Value| Rewritten::Rule(v.as_object().cloned().unwrap_or_default());
        assert_eq!(rewrite.rewrite(&req("a"))?, rule(json!({"path": "a.txt"})));
        let b = rule(json!({"path": "_show/s", "query": {"q": "書庫"}}));
        assert_eq!(rewrite.rewrite(&req("b"))?, b);
        assert_eq!(rewrite.rewrite(&req("c"))?, Rewritten::NoRule);
        Ok(())
    }

    #[test]
    fn errors_become_couchdbs_render_errors() -> Result<()> {
        let show = compile("function(doc) { throw(['error', 'teapot', 'short and stout']); }")?;
        let failed = show.show(&json!({}), &json!({}))?;
        assert_eq!(
            failed,
            Rendered::Failed { error: "teapot".into(), reason: "short and stout".into() }
        );
        let show = compile("function(doc) { return doc.missing.field; }")?;
        let Rendered::Failed { error, .. } = show.show(&json!({}), &json!({}))? else {
            panic!("a TypeError is a render_error")
        };
        assert_eq!(error, "render_error");
        let path = json!({"path": ["db", "_design", "d", "_show", "s", "gone"]});
        let failed = show.show(&Value::Null, &path)?;
        assert_eq!(
            failed,
            Rendered::Failed { error: "not_found".into(), reason: "document not found".into() }
        );
        Ok(())
    }
}
