//! A replication request (`POST /_replicate` body or `_replicator` document), parsed and
//! checked as CouchDB's `couch_replicator_parse` does, and its replication id
//! (`couch_replicator_ids`, version 4): the MD5 of the Erlang term
//! `[ServerUuid, SourceInfo, TargetInfo | Filter]`, so a checkpoint written by CouchDB's
//! replicator for the same endpoints names the same `_local/<id>` document.

use std::time::Duration;

use bunko_doc::etf::Writer;
use md5::{Digest, Md5};
use serde_json::{Map, Value, json};

use crate::client::{ChangesFilter, Db};
use crate::endpoint::{Endpoint, Local};
use crate::error::{Error, Result};

/// The replication id version this replicator computes (written into checkpoints).
pub const REP_ID_VERSION: u64 = 4;

/// A parsed replication.
#[derive(Clone, Debug)]
pub struct Spec {
    pub source: Endpoint,
    pub target: Endpoint,
    pub continuous: bool,
    pub create_target: bool,
    pub create_target_params: Map<String, Value>,
    pub doc_ids: Option<Vec<String>>,
    /// `ddoc/name`, or a built-in filter (`_doc_ids`, `_selector`, `_design`, `_view`).
    pub filter: Option<String>,
    pub query_params: Map<String, Value>,
    pub selector: Option<Value>,
    pub since_seq: Option<Value>,
    pub winning_revs_only: bool,
    pub checkpoint_interval: Duration,
    pub batch_size: usize,
    /// Whose credentials local endpoints carry (`None`: admin party).
    pub owner: Option<String>,
    /// The source code of a design-document filter, once fetched from the source
    /// ([`Spec::resolve_filter`]): the id hashes it, as CouchDB does.
    pub filter_code: Option<String>,
}

fn flag(body: &Map<String, Value>, key: &str) -> bool {
    matches!(body.get(key), Some(Value::Bool(true)))
}

impl Spec {
    /// Parses a request body; `owner` is the user making it.
    pub fn parse(
        body: &Map<String, Value>,
        owner: Option<String>,
        local: Option<&Local>,
    ) -> Result<Spec> {
        let source = body.get("source").ok_or(Error::Param("Missing source"))?;
        let target = body.get("target").ok_or(Error::Param("Missing target"))?;
        let doc_ids = match body.get("doc_ids") {
            None | Some(Value::Null) => None,
            Some(Value::Array(ids)) => {
                let mut ids: Vec<String> = ids
                    .iter()
                    .map(|v| {
                        v.as_str()
                            .map(decode)
                            .ok_or(Error::Param("parameter `doc_ids` must be an array"))
                    })
                    .collect::<Result<_>>()?;
                ids.sort();
                ids.dedup();
                Some(ids)
            }
            Some(_) => return Err(Error::Param("parameter `doc_ids` must be an array")),
        };
        let selector = match body.get("selector") {
            None | Some(Value::Null) => None,
            Some(v @ Value::Object(_)) => Some(v.clone()),
            Some(_) => return Err(Error::Param("parameter `selector` must be a JSON object")),
        };
        let filter = match body.get("filter") {
            None | Some(Value::Null) => None,
            Some(Value::String(f)) => Some(f.clone()),
            Some(_) => return Err(Error::Param("parameter `filter` must be a string")),
        };
        let exclusive = [doc_ids.is_some(), filter.is_some(), selector.is_some()];
        if exclusive.iter().filter(|b| **b).count() > 1 {
            return Err(Error::Param("`doc_ids`,`filter`,`selector` are mutually exclusive"));
        }
        if let Some(f) = &filter
            && !f.starts_with('_')
            && f.split_once('/').is_none_or(|(d, n)| d.is_empty() || n.is_empty())
        {
            return Err(Error::Invalid(format!(
                "Invalid filter. Must match `ddocname/filtername` or `_design/ddocname/filtername`. Got: {f}"
            )));
        }
        let query_params = match body.get("query_params") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(_) => return Err(Error::Param("parameter `query_params` must be an object")),
        };
        let create_target_params = match body.get("create_target_params") {
            None => Map::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(_) => {
                return Err(Error::Param("parameter `create_target_params` must be an object"));
            }
        };
        let number =
            |key: &str, default: u64| body.get(key).and_then(Value::as_u64).unwrap_or(default);
        Ok(Spec {
            source: Endpoint::parse(source, "source", local)?,
            target: Endpoint::parse(target, "target", local)?,
            continuous: flag(body, "continuous"),
            create_target: flag(body, "create_target"),
            create_target_params,
            doc_ids,
            filter: filter.map(|f| f.strip_prefix("_design/").map(str::to_string).unwrap_or(f)),
            query_params,
            selector,
            since_seq: body.get("since_seq").filter(|v| !v.is_null()).cloned(),
            winning_revs_only: flag(body, "winning_revs_only"),
            checkpoint_interval: Duration::from_millis(
                number("checkpoint_interval", 30_000).max(100),
            ),
            batch_size: number("worker_batch_size", 500).clamp(1, 10_000) as usize,
            owner,
            filter_code: None,
        })
    }

    /// Fetches a design-document filter's code from the source (`filters.{name}` of
    /// `_design/{ddoc}`, trimmed as `couch_replicator_filters:fetch` does), so that the id
    /// changes when the filter does. A missing document or function fails the replication.
    pub async fn resolve_filter(&mut self, local: Option<&Local>) -> Result<()> {
        let Some((ddoc, name)) =
            self.filter.as_deref().filter(|f| !f.starts_with('_')).and_then(|f| f.split_once('/'))
        else {
            return Ok(());
        };
        let source = Db::new(self.source.clone(), self.owner.clone(), local.cloned())?;
        let doc = source.get_doc(&format!("_design/{ddoc}")).await?;
        let code =
            doc.pointer(&format!("/filters/{name}")).and_then(Value::as_str).ok_or_else(|| {
                Error::Invalid(format!(
                    "Couldn't find filter `{name}` in design document `_design/{ddoc}`"
                ))
            })?;
        self.filter_code = Some(code.trim().to_string());
        Ok(())
    }

    /// The base replication id (the checkpoint document is `_local/<base id>`).
    pub fn base_id(&self, server_uuid: &str) -> String {
        let mut w = Writer::new();
        let extra = self.filter_terms();
        w.list_header(3 + extra.len());
        w.binary(server_uuid.as_bytes());
        endpoint_term(&mut w, &self.source);
        endpoint_term(&mut w, &self.target);
        for term in extra {
            match term {
                Term::Binary(text) => w.binary(text.as_bytes()),
                Term::Json(value) => w.json(&value),
            };
        }
        w.nil();
        hex::encode(Md5::digest(w.finish()))
    }

    /// The full id: the base id with `+continuous` and `+create_target` as CouchDB adds.
    pub fn rep_id(&self, server_uuid: &str) -> String {
        let mut id = self.base_id(server_uuid);
        if self.continuous {
            id.push_str("+continuous");
        }
        if self.create_target {
            id.push_str("+create_target");
        }
        id
    }

    /// The terms appended to the id for a filter, `winning_revs_only` and `since_seq`.
    fn filter_terms(&self) -> Vec<Term> {
        let mut terms = Vec::new();
        if let Some(filter) = &self.filter {
            // A design-document filter is hashed by its code (fetched from the source);
            // a built-in one by its name.
            terms.push(Term::Binary(self.filter_code.clone().unwrap_or_else(|| filter.clone())));
            terms.push(Term::Json(Value::Object(self.query_params.clone())));
        } else if let Some(ids) = &self.doc_ids {
            terms.push(Term::Json(json!(ids)));
        } else if let Some(selector) = &self.selector {
            terms.push(Term::Json(sorted(selector)));
        }
        if self.winning_revs_only {
            terms.push(Term::Binary("winning_revs_only".into()));
        }
        if let Some(since) = &self.since_seq {
            terms.push(Term::Json(since.clone()));
        }
        terms
    }

    /// The `_changes` parameters of the replication's filter.
    pub fn changes_filter(&self) -> ChangesFilter {
        let mut out = ChangesFilter::default();
        if let Some(ids) = &self.doc_ids {
            out.params.push(("filter".into(), "_doc_ids".into()));
            out.body = Some(json!({"doc_ids": ids}));
        } else if let Some(selector) = &self.selector {
            out.params.push(("filter".into(), "_selector".into()));
            out.body = Some(json!({"selector": selector}));
        } else if let Some(filter) = &self.filter {
            out.params.push(("filter".into(), filter.clone()));
            for (k, v) in &self.query_params {
                out.params
                    .push((k.clone(), v.as_str().map_or_else(|| v.to_string(), str::to_string)));
            }
        }
        out
    }
}

/// One term of the id after the endpoints.
enum Term {
    Binary(String),
    Json(Value),
}

/// `{remote, User, Host, NonDefaultPort, Path, Headers, undefined}` (CouchDB's
/// `get_v4_endpoint`), or `{local, DbName}` for a database of this server, which keeps the
/// id stable when the server's port changes.
fn endpoint_term(w: &mut Writer, ep: &Endpoint) {
    if let Some(name) = &ep.local {
        w.tuple_header(2).atom("local").binary(name.as_bytes());
        return;
    }
    w.tuple_header(7).atom("remote");
    match &ep.user {
        Some(user) => w.string(user.as_bytes()),
        None => w.atom("undefined"),
    };
    w.string(ep.url.host_str().unwrap_or_default().as_bytes());
    match (ep.url.scheme(), ep.url.port_or_known_default()) {
        ("https", Some(443)) | ("http", Some(80 | 5984)) | (_, None) => w.atom("default"),
        (_, Some(port)) => w.integer(i64::from(port)),
    };
    w.string(ep.url.path().as_bytes());
    if ep.headers.is_empty() {
        w.nil();
    } else {
        w.list_header(ep.headers.len());
        for (k, v) in &ep.headers {
            w.tuple_header(2).string(k.as_bytes()).string(v.as_bytes());
        }
        w.nil();
    }
    w.atom("undefined");
}

/// Object keys sorted at every level (CouchDB's `ejsort` of a selector).
fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<_> = map.keys().collect();
            keys.sort();
            Value::Object(keys.into_iter().map(|k| (k.clone(), sorted(&map[k]))).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

fn decode(text: &str) -> String {
    percent_encoding::percent_decode_str(text).decode_utf8_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(body: Value) -> Result<Spec> {
        Spec::parse(body.as_object().ok_or(Error::Param("object"))?, None, None)
    }

    #[test]
    fn the_id_ignores_the_password_and_marks_continuous_and_create_target() -> Result<()> {
        let a = spec(json!({"source": "http://u:p1@h:5984/a", "target": "http://h/b"}))?;
        let b = spec(json!({"source": "http://u:p2@h/a", "target": "http://h:80/b/",
            "continuous": true, "create_target": true}))?;
        assert_eq!(a.base_id("uuid"), b.base_id("uuid"));
        assert_eq!(b.rep_id("uuid"), format!("{}+continuous+create_target", a.base_id("uuid")));
        assert_ne!(a.base_id("uuid"), a.base_id("other"));
        let c = spec(json!({"source": "http://v:p1@h/a", "target": "http://h/b"}))?;
        assert_ne!(a.base_id("uuid"), c.base_id("uuid"));
        Ok(())
    }

    #[test]
    fn filters_are_mutually_exclusive() {
        let both = json!({"source": "http://h/a", "target": "http://h/b", "doc_ids": ["x"],
            "selector": {"a": 1}});
        assert!(matches!(spec(both), Err(Error::Param(_))));
        let bad = json!({"source": "http://h/a", "target": "http://h/b", "filter": "nofilter"});
        assert!(spec(bad).is_err());
    }
}
