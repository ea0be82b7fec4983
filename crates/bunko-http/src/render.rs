//! Rendering documents and JSON answers.
//!
//! A stored body is compact JSON; [`doc_json`] splices `_id`, `_rev` (and the optional
//! special members) around its bytes without re-parsing it, in CouchDB's member order:
//! `_id`, `_rev`, `_deleted`, the body, then `_revisions`, `_revs_info`, `_conflicts`,
//! `_deleted_conflicts`, `_local_seq`.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bunko_engine::read::DocOut;
use serde_json::{Value, json};

use crate::error::ApiResult;
use crate::params::Params;

/// Which optional members a rendered document carries.
#[derive(Debug, Clone, Copy, Default)]
pub struct DocOpts {
    pub revs: bool,
    pub revs_info: bool,
    pub conflicts: bool,
    pub deleted_conflicts: bool,
    pub local_seq: bool,
}

impl DocOpts {
    pub fn from_params(p: &Params) -> ApiResult<Self> {
        let meta = p.flag("meta")?;
        Ok(Self {
            revs: p.flag("revs")?,
            revs_info: p.flag("revs_info")? || meta,
            conflicts: p.flag("conflicts")? || meta,
            deleted_conflicts: p.flag("deleted_conflicts")? || meta,
            local_seq: p.flag("local_seq")?,
        })
    }
}

/// A document as CouchDB renders it.
pub fn doc_json(doc: &DocOut, opts: &DocOpts) -> Vec<u8> {
    let mut out = Vec::with_capacity(doc.body.len() + 96);
    out.extend_from_slice(b"{\"_id\":");
    push_str(&mut out, &doc.id);
    out.extend_from_slice(b",\"_rev\":");
    push_str(&mut out, &doc.rev.to_string());
    if doc.deleted {
        out.extend_from_slice(b",\"_deleted\":true");
    }
    let inner = body_members(&doc.body);
    if !inner.is_empty() {
        out.push(b',');
        out.extend_from_slice(inner);
    }
    for (name, value) in extras(doc, opts) {
        out.push(b',');
        push_json(&mut out, &Value::String(name.to_string()));
        out.push(b':');
        push_json(&mut out, &value);
    }
    out.push(b'}');
    out
}

fn extras(doc: &DocOut, opts: &DocOpts) -> Vec<(&'static str, Value)> {
    let mut extras = Vec::new();
    if opts.revs {
        let (start, ids) = doc.revisions();
        extras.push(("_revisions", json!({"start": start, "ids": ids})));
    }
    if let (true, Some(info)) = (opts.revs_info, &doc.revs_info) {
        let info: Vec<Value> = info
            .iter()
            .map(|(rev, status)| json!({"rev": rev.to_string(), "status": status}))
            .collect();
        extras.push(("_revs_info", Value::Array(info)));
    }
    if opts.conflicts || opts.deleted_conflicts {
        let (live, deleted) = doc.info.tree.conflicts();
        if opts.conflicts && !live.is_empty() {
            extras.push(("_conflicts", revs(&live)));
        }
        if opts.deleted_conflicts && !deleted.is_empty() {
            extras.push(("_deleted_conflicts", revs(&deleted)));
        }
    }
    if opts.local_seq {
        extras.push(("_local_seq", json!(doc.info.seq)));
    }
    extras
}

/// A list of revisions as JSON strings.
pub fn revs(list: &[bunko_doc::RevId]) -> Value {
    Value::Array(list.iter().map(|r| Value::String(r.to_string())).collect())
}

/// The members of a compact JSON object, without its braces.
fn body_members(body: &[u8]) -> &[u8] {
    let trimmed = body.strip_prefix(b"{").and_then(|b| b.strip_suffix(b"}"));
    trimmed.unwrap_or_default()
}

/// `{"ok":true,"id":…,"rev":…}`, a write's answer, written straight into `out` (no
/// `Value` built per document: `_bulk_docs` answers a thousand of these).
pub fn push_written(out: &mut Vec<u8>, id: &str, rev: &bunko_doc::RevId) {
    out.extend_from_slice(b"{\"ok\":true,\"id\":");
    push_str(out, id);
    out.extend_from_slice(b",\"rev\":");
    // Escaped: a replicated revision's hash may be any string.
    push_str(out, &rev.to_string());
    out.push(b'}');
}

pub fn push_json(out: &mut Vec<u8>, value: &Value) {
    if serde_json::to_writer(&mut *out, value).is_err() {
        out.extend_from_slice(b"null");
    }
}

/// Appends `text` as a JSON string, as [`push_json`] would write it as a `Value`.
fn push_str(out: &mut Vec<u8>, text: &str) {
    if serde_json::to_writer(&mut *out, text).is_err() {
        out.extend_from_slice(b"null");
    }
}

/// A JSON answer with a status.
pub fn json(status: StatusCode, value: Value) -> Response {
    (status, axum::Json(value)).into_response()
}

/// A JSON answer from bytes already rendered.
pub fn json_bytes(status: StatusCode, bytes: Vec<u8>) -> Response {
    let mut response = (status, bytes).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use bunko_engine::records::DocInfo;
    use bunko_engine::revtree::RevTree;

    #[test]
    fn splices_special_members_around_the_stored_body() {
        let mut tree = RevTree::default();
        let rev: bunko_doc::RevId = "1-abc".parse().unwrap_or_else(|_| unreachable!());
        tree.push(rev.clone(), None, false);
        let doc = DocOut {
            id: "a\"b".into(),
            rev,
            deleted: false,
            body: br#"{"x":1.50,"y":[1]}"#.to_vec(),
            info: DocInfo { seq: 7, tree, size: 0 },
            revs_info: None,
            stored_rev: None,
            revs_limit: usize::MAX,
        };
        let plain = doc_json(&doc, &DocOpts::default());
        assert_eq!(plain, br#"{"_id":"a\"b","_rev":"1-abc","x":1.50,"y":[1]}"#);
        let with = doc_json(&doc, &DocOpts { revs: true, local_seq: true, ..Default::default() });
        let value: Value = serde_json::from_slice(&with).unwrap_or_default();
        assert_eq!(value["_revisions"], json!({"start": 1, "ids": ["abc"]}));
        assert_eq!(value["_local_seq"], json!(7));
        let mut written = Vec::new();
        push_written(&mut written, &doc.id, &doc.rev);
        let expected = json!({"ok": true, "id": "a\"b", "rev": "1-abc"});
        assert_eq!(serde_json::from_slice::<Value>(&written).unwrap_or_default(), expected);
        assert_eq!(written, br#"{"ok":true,"id":"a\"b","rev":"1-abc"}"#);
        let odd: bunko_doc::RevId = "2-a\"b".parse().unwrap_or_else(|_| unreachable!());
        let mut written = Vec::new();
        push_written(&mut written, "x", &odd);
        assert_eq!(
            written, br#"{"ok":true,"id":"x","rev":"2-a\"b"}"#,
            "a replicated hash is escaped"
        );
        let empty = DocOut { body: b"{}".to_vec(), ..doc };
        assert_eq!(doc_json(&empty, &DocOpts::default()), br#"{"_id":"a\"b","_rev":"1-abc"}"#);
    }
}
