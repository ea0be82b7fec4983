//! The replication protocol's requests to one endpoint (docs.couchdb.org, "Replication
//! Protocol"): database info, `_local` checkpoints, `_changes`, `_revs_diff`, `_bulk_get`
//! (falling back to `GET ?open_revs=` for servers without it), `_bulk_docs` with
//! `new_edits: false`. Transient failures (connection errors, `5xx`, `429`) are retried
//! with exponential backoff before the error reaches the job.

use std::time::Duration;

use reqwest::{Method, RequestBuilder, StatusCode};
use serde_json::{Map, Value, json};

use crate::endpoint::{Endpoint, Local};
use crate::error::{Error, Result};

/// Attempts of one request before its error stops the job (CouchDB's `retries_per_request`).
const RETRIES: u32 = 5;

/// A connection to one endpoint.
#[derive(Clone)]
pub struct Db {
    pub ep: Endpoint,
    client: reqwest::Client,
    /// The owner, whose credentials local endpoints carry.
    owner: Option<String>,
    local: Option<Local>,
}

/// One batch of `_changes`.
pub struct ChangesBatch {
    /// `(id, leaf revs)` of each row, in feed order.
    pub rows: Vec<(String, Vec<String>)>,
    /// The feed's `last_seq` (else the last row's seq).
    pub last_seq: Value,
    /// The feed's `pending` count, when the source reports it.
    pub pending: Option<u64>,
}

/// Which `_changes` rows a replication reads.
#[derive(Clone, Debug, Default)]
pub struct ChangesFilter {
    /// Query parameters (`filter`, the filter's own parameters).
    pub params: Vec<(String, String)>,
    /// A POST body (`doc_ids`, `selector`), else the feed is read with GET.
    pub body: Option<Value>,
}

impl Db {
    pub fn new(ep: Endpoint, owner: Option<String>, local: Option<Local>) -> Result<Db> {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(30))
            .user_agent(concat!("Bunko-Replicator/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Db { ep, client, owner, local })
    }

    pub(crate) fn request(&self, method: Method, url: &str) -> RequestBuilder {
        let mut req = self.client.request(method, url).header("Accept", "application/json");
        for (name, value) in &self.ep.headers {
            req = req.header(name, value);
        }
        if let Some(basic) = self.ep.basic() {
            req = req.header("Authorization", basic);
        } else if self.ep.local.is_some()
            && let Some(local) = &self.local
            && let Some((name, value)) = (local.credentials)(self.owner.as_deref())
        {
            req = req.header(name, value);
        }
        req
    }

    /// Sends a request built by `build`, retrying transient failures; returns the status
    /// and JSON body.
    pub(crate) fn client(&self) -> &reqwest::Client {
        &self.client
    }

    pub(crate) async fn send(
        &self,
        build: impl Fn() -> RequestBuilder,
    ) -> Result<(StatusCode, Value)> {
        let mut wait = Duration::from_millis(250);
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.send_once(build()).await {
                Err(err) if err.is_transient() && attempt < RETRIES => {
                    tracing::debug!(%err, url = %self.ep.shown(), "replicator request retried");
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(10));
                }
                other => return other,
            }
        }
    }

    async fn send_once(&self, req: RequestBuilder) -> Result<(StatusCode, Value)> {
        let resp = req.send().await?;
        let status = resp.status();
        let url = resp.url().to_string();
        let bytes = resp.bytes().await?;
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        if status.is_server_error() || status.as_u16() == 429 {
            return Err(Error::Http { status: status.as_u16(), body, url });
        }
        Ok((status, body))
    }

    /// Sends and turns any non-2xx answer into an error.
    async fn ok(&self, build: impl Fn() -> RequestBuilder) -> Result<Value> {
        let (status, body) = self.send(build).await?;
        if !status.is_success() {
            return Err(Error::Http { status: status.as_u16(), body, url: self.ep.shown() });
        }
        Ok(body)
    }

    /// `GET /{db}`; `None` when the database does not exist.
    pub async fn info(&self) -> Result<Option<Value>> {
        let url = self.ep.url.to_string();
        let (status, body) = self.send(|| self.request(Method::GET, &url)).await?;
        match status {
            s if s.is_success() => Ok(Some(body)),
            StatusCode::NOT_FOUND => Ok(None),
            s => Err(Error::Http { status: s.as_u16(), body, url }),
        }
    }

    /// `PUT /{db}` with `create_target_params` (`q`, `n`, `partitioned`) as its query.
    pub async fn create(&self, params: &Map<String, Value>) -> Result<()> {
        let mut url = self.ep.url.clone();
        for (k, v) in params {
            let text = v.as_str().map_or_else(|| v.to_string(), str::to_string);
            url.query_pairs_mut().append_pair(k, &text);
        }
        let url = url.to_string();
        let (status, body) = self.send(|| self.request(Method::PUT, &url)).await?;
        // 412: created meanwhile by someone else, which is what we wanted.
        if status.is_success() || status == StatusCode::PRECONDITION_FAILED {
            return Ok(());
        }
        Err(Error::Http { status: status.as_u16(), body, url })
    }

    /// A `_local` document, or `None`.
    pub async fn get_local(&self, id: &str) -> Result<Option<Value>> {
        let url = self.ep.join(&format!("_local/{id}"));
        let (status, body) = self.send(|| self.request(Method::GET, &url)).await?;
        match status {
            s if s.is_success() => Ok(Some(body)),
            StatusCode::NOT_FOUND => Ok(None),
            s => Err(Error::Http { status: s.as_u16(), body, url }),
        }
    }

    /// Writes a `_local` document; returns its new `rev`.
    pub async fn put_local(&self, id: &str, body: &Value) -> Result<Option<String>> {
        let url = self.ep.join(&format!("_local/{id}"));
        let answer = self.ok(|| self.request(Method::PUT, &url).json(body)).await?;
        Ok(answer.get("rev").and_then(Value::as_str).map(str::to_string))
    }

    /// One batch of `_changes` after `since` (`style=all_docs`), `longpoll` when `wait`.
    pub async fn changes(
        &self,
        since: &Value,
        limit: usize,
        filter: &ChangesFilter,
        wait: Option<Duration>,
    ) -> Result<ChangesBatch> {
        let mut url = reqwest::Url::parse(&self.ep.join("_changes"))
            .map_err(|e| Error::Transport(e.to_string()))?;
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("style", "all_docs");
            q.append_pair("since", &seq_text(since));
            q.append_pair("limit", &limit.to_string());
            if let Some(wait) = wait {
                q.append_pair("feed", "longpoll");
                q.append_pair("timeout", &wait.as_millis().to_string());
            }
            for (k, v) in &filter.params {
                q.append_pair(k, v);
            }
        }
        let url = url.to_string();
        let body = match &filter.body {
            Some(body) => self.ok(|| self.request(Method::POST, &url).json(body)).await?,
            None => self.ok(|| self.request(Method::GET, &url)).await?,
        };
        parse_changes(body, since)
    }

    /// `POST /{db}/_revs_diff`: id → the revisions the target lacks, and their ancestors
    /// it has.
    pub async fn revs_diff(&self, request: &Map<String, Value>) -> Result<Map<String, Value>> {
        let url = self.ep.join("_revs_diff");
        let body = self.ok(|| self.request(Method::POST, &url).json(request)).await?;
        match body {
            Value::Object(map) => Ok(map),
            _ => Ok(Map::new()),
        }
    }

    /// The given revisions with `_revisions` and inline attachments: `_bulk_get`, or one
    /// `GET ?open_revs=` per document when the source has no `_bulk_get`.
    pub async fn fetch(&self, wanted: &[(String, Vec<String>)]) -> Result<Vec<Value>> {
        let url =
            self.ep.join("_bulk_get?revs=true&attachments=true&latest=true&att_encoding_info=true");
        let docs: Vec<Value> = wanted
            .iter()
            .flat_map(|(id, revs)| revs.iter().map(move |rev| json!({"id": id, "rev": rev})))
            .collect();
        let body = json!({"docs": docs});
        let (status, answer) = self.send(|| self.request(Method::POST, &url).json(&body)).await?;
        if status.is_success() {
            return Ok(bulk_get_docs(answer));
        }
        if !matches!(status.as_u16(), 400 | 404 | 405 | 406) {
            return Err(Error::Http { status: status.as_u16(), body: answer, url });
        }
        let mut out = Vec::new();
        for (id, revs) in wanted {
            out.extend(self.open_revs(id, revs).await?);
        }
        Ok(out)
    }

    async fn open_revs(&self, id: &str, revs: &[String]) -> Result<Vec<Value>> {
        let mut url = reqwest::Url::parse(&self.ep.join(&doc_path(id)))
            .map_err(|e| Error::Transport(e.to_string()))?;
        url.query_pairs_mut()
            .append_pair("revs", "true")
            .append_pair("latest", "true")
            .append_pair("attachments", "true")
            .append_pair("att_encoding_info", "true")
            .append_pair("open_revs", &serde_json::to_string(revs).unwrap_or_default());
        let url = url.to_string();
        let answer = self.ok(|| self.request(Method::GET, &url)).await?;
        let rows = answer.as_array().cloned().unwrap_or_default();
        Ok(rows.into_iter().filter_map(|mut row| row.get_mut("ok").map(Value::take)).collect())
    }

    /// `POST /{db}/_bulk_docs` with `new_edits: false`; returns how many were refused.
    pub async fn bulk_docs(&self, docs: &[Value]) -> Result<u64> {
        let url = self.ep.join("_bulk_docs");
        let body = json!({"docs": docs, "new_edits": false});
        let answer = self.ok(|| self.request(Method::POST, &url).json(&body)).await?;
        let failed = answer
            .as_array()
            .map_or(0, |rows| rows.iter().filter(|r| r.get("error").is_some()).count());
        Ok(failed as u64)
    }

    /// `GET /{db}/{ddoc}`: a design document of the source (filter functions).
    pub async fn get_doc(&self, id: &str) -> Result<Value> {
        let url = self.ep.join(&doc_path(id));
        self.ok(|| self.request(Method::GET, &url)).await
    }
}

/// A document's path: `_design/` kept literal, the rest percent-encoded.
pub(crate) fn doc_path(id: &str) -> String {
    let enc = |s: &str| percent_encoding::utf8_percent_encode(s, ID).to_string();
    match id.strip_prefix("_design/") {
        Some(name) => format!("_design/{}", enc(name)),
        None => enc(id),
    }
}

/// `{doc path}/{name}` of an attachment, the name percent-encoded whole.
pub(crate) fn attachment_path(id: &str, name: &str) -> String {
    let name = percent_encoding::utf8_percent_encode(name, ID);
    format!("{}/{name}", doc_path(id))
}

const ID: &percent_encoding::AsciiSet =
    &percent_encoding::NON_ALPHANUMERIC.remove(b'_').remove(b'-').remove(b'.').remove(b'~');

/// A seq as a query parameter: strings as they are, anything else as JSON.
pub fn seq_text(seq: &Value) -> String {
    seq.as_str().map_or_else(|| seq.to_string(), str::to_string)
}

fn parse_changes(body: Value, since: &Value) -> Result<ChangesBatch> {
    let mut rows = Vec::new();
    let mut last = None;
    let results = body.get("results").and_then(Value::as_array).cloned().unwrap_or_default();
    for row in results {
        let Some(id) = row.get("id").and_then(Value::as_str) else { continue };
        let revs = row
            .get("changes")
            .and_then(Value::as_array)
            .map(|c| c.iter().filter_map(|r| r.get("rev")?.as_str().map(str::to_string)).collect())
            .unwrap_or_default();
        rows.push((id.to_string(), revs));
        last = row.get("seq").cloned();
    }
    let last_seq = body.get("last_seq").cloned().or(last).unwrap_or_else(|| since.clone());
    let pending = body.get("pending").and_then(Value::as_u64);
    Ok(ChangesBatch { rows, last_seq, pending })
}

fn bulk_get_docs(answer: Value) -> Vec<Value> {
    let results = answer.get("results").and_then(Value::as_array).cloned().unwrap_or_default();
    results
        .into_iter()
        .flat_map(|r| r.get("docs").and_then(Value::as_array).cloned().unwrap_or_default())
        .filter_map(|mut d| d.get_mut("ok").map(Value::take))
        .collect()
}
