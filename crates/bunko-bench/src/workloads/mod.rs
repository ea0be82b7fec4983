//! The workloads, one module each, and what they share ([`Ctx`]).
//!
//! A workload `run(ctx, rows)` creates its own uniquely named databases (through
//! [`Ctx::create_db`], which remembers them), preloads documents it does not measure with
//! [`Ctx::bulk_load`], measures one or more cases with [`crate::measure::drive`], and
//! pushes one [`Row`] per case. [`run`] deletes every database it created afterwards,
//! whatever happened.
//!
//! Features a server may not have yet (`_find`, `_partition`, views) are checked first by
//! [`Ctx::require`] on a small throwaway database; a 400/404/405/501 answer there turns into
//! [`Error::Unsupported`], and the workload (or that one case) is reported as skipped with
//! the answer as its reason. So the suite runs against today's Bunko and picks features up
//! as they land, without a list of what is implemented.

mod agg;
mod baseline;
mod changes;
mod disk;
mod elemmatch;
mod find;
mod limit;
mod load;
mod mongo;
mod partition;
mod read;
mod scale;
mod search;
mod soak;
mod txn;
mod view;
mod write;

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use reqwest::header::CONTENT_TYPE;
use reqwest::{Client, Method, RequestBuilder};
use serde::Deserialize;
use serde_json::Value;

use crate::cli::{Options, Sizes, Workload};
use crate::client::Server;
use crate::data::Readings;
use crate::error::{Error, Result};
use crate::measure::{Sample, Until, drive};
use crate::proc::{Probe, Usage};
use crate::report::Row;

/// The longest [`Ctx::settle`] waits for the server to go idle.
pub const SETTLE_MAX: Duration = Duration::from_secs(180);

/// A server feature that some workloads need.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Feature {
    /// `POST /{db}/_index` and `POST /{db}/_find`.
    Find,
    /// `GET /{db}/_partition/{p}/_all_docs`.
    Partition,
    /// `POST /{db}/_partition/{p}/_find`.
    PartitionFind,
    /// Design documents with a JavaScript map function, `GET .../_view/{name}`.
    View,
    /// Design documents with search `indexes`, `GET .../_search/{name}`.
    Search,
}

/// Everything a workload needs: the server, the options, and the databases it created.
pub struct Ctx {
    pub server: Arc<Server>,
    pub opts: Options,
    pub sizes: Sizes,
    run_id: String,
    next_db: AtomicUsize,
    dbs: std::sync::Mutex<Vec<String>>,
    features: tokio::sync::Mutex<HashMap<Feature, Option<String>>>,
}

impl Ctx {
    pub fn new(opts: &Options) -> Result<Ctx> {
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Ok(Ctx {
            server: Server::new(opts)?,
            opts: opts.clone(),
            sizes: Sizes::of(opts.scale)
                .with_partition(&opts.partition_sizes)
                .with_scale(&opts.scale_steps),
            run_id: base36(nanos ^ u64::from(std::process::id())),
            next_db: AtomicUsize::new(0),
            dbs: std::sync::Mutex::new(Vec::new()),
            features: tokio::sync::Mutex::new(HashMap::new()),
        })
    }

    pub fn duration(&self) -> Duration {
        self.opts.duration()
    }

    /// Starts measuring the server process, if `--pid` was given.
    pub fn probe(&self) -> Option<Probe> {
        self.opts.pid.and_then(Probe::start)
    }

    pub fn client(&self) -> Result<Client> {
        self.server.client()
    }

    /// A request with authentication, on a path relative to the server's URL.
    pub fn request(&self, client: &Client, method: Method, path: &str) -> RequestBuilder {
        self.server.request(client, method, path)
    }

    /// Fails with a clear message unless the server answers `GET /` and accepts our login.
    pub async fn connect(&self) -> Result {
        let client = self.client()?;
        let welcome = self.request(&client, Method::GET, "/");
        self.server.json(&client, welcome, "GET /").await?;
        let session = self.request(&client, Method::GET, "/_all_dbs?limit=1");
        self.server.send(&client, session, "GET /_all_dbs (checking admin credentials)").await?;
        Ok(())
    }

    /// Creates a new, uniquely named database and remembers it for [`Ctx::drop_dbs`].
    pub async fn create_db(&self, workload: Workload, partitioned: bool) -> Result<String> {
        let n = self.next_db.fetch_add(1, Ordering::Relaxed);
        let name = format!("bench-{}-{}-{n}", workload.name(), self.run_id);
        let path =
            if partitioned { format!("/{name}?partitioned=true") } else { format!("/{name}") };
        let client = self.client()?;
        let request = self.request(&client, Method::PUT, &path);
        self.dbs.lock().unwrap_or_else(|e| e.into_inner()).push(name.clone());
        self.server.send(&client, request, &format!("PUT {path}")).await?;
        Ok(name)
    }

    /// Creates the CouchDB database `bench-{workload}-{run}${coll}`, which the MongoDB front
    /// end sees as collection `coll` of database `bench-{workload}-{run}` (one such
    /// database per workload, so `$lookup` can join its collections).
    pub async fn create_collection(&self, workload: Workload, coll: &str) -> Result<String> {
        let name = format!("bench-{}-{}${coll}", workload.name(), self.run_id);
        let client = self.client()?;
        let path = format!("/{}", name.replace('$', "%24"));
        let request = self.request(&client, Method::PUT, &path);
        self.dbs.lock().unwrap_or_else(|e| e.into_inner()).push(name.replace('$', "%24"));
        self.server.send(&client, request, "PUT {db}").await?;
        Ok(name.replace('$', "%24"))
    }

    /// Deletes every database created so far (errors are ignored: this is cleanup), then
    /// waits for the server to go idle ([`Ctx::settle`]) and returns how long that took.
    pub async fn drop_dbs(&self) -> Option<Duration> {
        let names = std::mem::take(&mut *self.dbs.lock().unwrap_or_else(|e| e.into_inner()));
        if names.is_empty() {
            return None;
        }
        let client = self.client().ok()?;
        for name in names {
            let request = self.request(&client, Method::DELETE, &format!("/{name}"));
            let _ = self.server.send(&client, request, "DELETE").await;
        }
        self.settle().await
    }

    /// With `--pid`: waits until the server uses under 5% of a core over half a second, at
    /// most [`SETTLE_MAX`], so that background work (e.g. removing a deleted database's
    /// keys) does not slow the next case. Returns how long it waited; `None` without a pid.
    pub async fn settle(&self) -> Option<Duration> {
        let pid = self.opts.pid?;
        let began = Instant::now();
        let mut last = crate::proc::cpu_secs(pid)?;
        while began.elapsed() < SETTLE_MAX {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let now = crate::proc::cpu_secs(pid)?;
            if now - last < 0.025 {
                break;
            }
            last = now;
        }
        Some(began.elapsed())
    }

    /// Loads documents `0..docs` into `db` with `_bulk_docs`, [`Sizes::batch`] per request,
    /// from `clients` clients. `batch(n, range)` makes the body of batch `n`. Each request
    /// counts its documents, or fails if any document was rejected.
    pub async fn bulk_load<G>(&self, db: &str, docs: usize, clients: usize, batch: G) -> Sample
    where
        G: Fn(usize, Range<usize>) -> Bytes + Send + Sync + 'static,
    {
        let size = self.sizes.batch;
        let clients = match self.server.clients(clients) {
            Ok(clients) => clients,
            Err(err) => return Sample::failed(err.to_string()),
        };
        let (server, path) = (self.server.clone(), Arc::new(format!("/{db}/_bulk_docs")));
        let batch = Arc::new(batch);
        drive(clients, Until::Count(docs.div_ceil(size)), move |client, n| {
            let (server, path, batch) = (server.clone(), path.clone(), batch.clone());
            async move {
                let n = n as usize;
                let body = batch(n, n * size..((n + 1) * size).min(docs));
                let request = server
                    .request(&client, Method::POST, &path)
                    .header(CONTENT_TYPE, "application/json")
                    .body(body);
                let answer = server.send(&client, request, "POST _bulk_docs").await?;
                count_written(&answer)
            }
        })
        .await
    }

    /// Preloads `docs` readings with 4 clients; returns a note saying how long it took.
    pub async fn preload(&self, db: &str, readings: Readings) -> Result<String> {
        let began = Instant::now();
        let sample = self
            .bulk_load(db, readings.docs, 4, move |_, range| Bytes::from(readings.bulk(range)))
            .await;
        preload_note(&sample, began)
    }

    /// `connections` clients sending `request(random)` for `duration`; `request` gives the
    /// method, the path and an optional JSON body. Each request counts as one item.
    pub async fn timed_requests<F>(
        &self,
        connections: usize,
        duration: Duration,
        request: F,
    ) -> Result<Sample>
    where
        F: Fn(u64) -> (Method, String, Option<String>) + Send + Sync + 'static,
    {
        let clients = self.server.clients(connections)?;
        let (server, request) = (self.server.clone(), Arc::new(request));
        Ok(drive(clients, Until::Deadline(duration), move |client, r| {
            let (server, request) = (server.clone(), request.clone());
            async move {
                let (method, path, body) = request(r);
                let what = format!("{method} {}", path.split('?').next().unwrap_or_default());
                let mut builder = server.request(&client, method, &path);
                if let Some(body) = body {
                    builder = builder.header(CONTENT_TYPE, "application/json").body(body);
                }
                server.send(&client, builder, &what).await?;
                Ok(1)
            }
        })
        .await)
    }

    /// `Ok` if the server has `feature`, else [`Error::Unsupported`] with the answer that
    /// showed it. Probed once per run on a throwaway database.
    pub async fn require(&self, feature: Feature) -> Result {
        let mut known = self.features.lock().await;
        let missing = match known.get(&feature) {
            Some(missing) => missing.clone(),
            None => {
                let missing = match self.probe_feature(feature).await {
                    Ok(()) => None,
                    Err(err) if err.means_unsupported() => Some(err.to_string()),
                    Err(err) => return Err(err),
                };
                known.insert(feature, missing.clone());
                missing
            }
        };
        missing.map_or(Ok(()), |reason| Err(Error::Unsupported(reason)))
    }

    async fn probe_feature(&self, feature: Feature) -> Result {
        let partitioned = matches!(feature, Feature::Partition | Feature::PartitionFind);
        let n = self.next_db.fetch_add(1, Ordering::Relaxed);
        let name = format!("bench-probe-{}-{n}", self.run_id);
        let client = self.client()?;
        let created = async {
            let path =
                if partitioned { format!("/{name}?partitioned=true") } else { format!("/{name}") };
            self.send(&client, Method::PUT, &path, None).await?;
            let body = Readings::new(10).bulk(0..10);
            self.send(&client, Method::POST, &format!("/{name}/_bulk_docs"), Some(body)).await?;
            self.probe_requests(&client, &name, feature).await
        }
        .await;
        let _ = self.send(&client, Method::DELETE, &format!("/{name}"), None).await;
        created
    }

    async fn probe_requests(&self, client: &Client, db: &str, feature: Feature) -> Result {
        let find = r#"{"selector":{"deviceID":"device-0"},"limit":1}"#.to_string();
        match feature {
            Feature::Find => {
                let index = r#"{"index":{"fields":["deviceID"]},"name":"probe","type":"json"}"#;
                self.send(client, Method::POST, &format!("/{db}/_index"), Some(index.into()))
                    .await?;
                self.send(client, Method::POST, &format!("/{db}/_find"), Some(find)).await?;
            }
            Feature::Partition => {
                let path = format!("/{db}/_partition/bridge-0/_all_docs?limit=1");
                self.send(client, Method::GET, &path, None).await?;
            }
            Feature::PartitionFind => {
                let path = format!("/{db}/_partition/bridge-0/_find");
                self.send(client, Method::POST, &path, Some(find)).await?;
            }
            Feature::View => {
                let ddoc = r#"{"views":{"v":{"map":"function(doc){ emit(doc.deviceID, 1) }"}}}"#;
                let path = format!("/{db}/_design/probe");
                self.send(client, Method::PUT, &path, Some(ddoc.into())).await?;
                self.send(client, Method::GET, &format!("{path}/_view/v?limit=1"), None).await?;
            }
            Feature::Search => {
                let ddoc =
                    r#"{"indexes":{"s":{"index":"function(doc){ index('d', doc.deviceID); }"}}}"#;
                let path = format!("/{db}/_design/probe");
                self.send(client, Method::PUT, &path, Some(ddoc.into())).await?;
                self.send(client, Method::GET, &format!("{path}/_search/s?q=*:*&limit=1"), None)
                    .await?;
            }
        }
        Ok(())
    }

    /// One request with an optional JSON body; the answer parsed as JSON (`null` if empty).
    pub async fn send(
        &self,
        client: &Client,
        method: Method,
        path: &str,
        body: Option<String>,
    ) -> Result<Value> {
        let what = format!("{method} {}", self.redact(path));
        let mut request = self.request(client, method, path);
        if let Some(body) = body {
            request = request.header(CONTENT_TYPE, "application/json").body(body);
        }
        let answer = self.server.send(client, request, &what).await?;
        Ok(serde_json::from_slice(&answer).unwrap_or(Value::Null))
    }

    /// `path` with this run's database names shortened to `{db}`, for messages.
    fn redact(&self, path: &str) -> String {
        match path.strip_prefix('/').and_then(|p| p.split_once('/')) {
            Some((db, rest)) if db.starts_with("bench-") => format!("/{{db}}/{rest}"),
            _ if path.starts_with("/bench-") => "/{db}".to_string(),
            _ => path.to_string(),
        }
    }
}

/// Runs one workload and returns its rows; a workload that stops early adds a skipped or
/// failed row saying why. Deletes the databases it created.
pub async fn run(ctx: &Ctx, workload: Workload) -> Vec<Row> {
    let mut rows = Vec::new();
    let result = match workload {
        Workload::Load => load::run(ctx, &mut rows).await,
        Workload::Write => write::run(ctx, &mut rows).await,
        Workload::Read => read::run(ctx, &mut rows).await,
        Workload::Changes => changes::run(ctx, &mut rows).await,
        Workload::Find => find::run(ctx, &mut rows).await,
        Workload::Elemmatch => elemmatch::run(ctx, &mut rows).await,
        Workload::PartitionScaling => partition::run(ctx, &mut rows).await,
        Workload::View => view::run(ctx, &mut rows).await,
        Workload::Search => search::run(ctx, &mut rows).await,
        Workload::Limit => limit::run(ctx, &mut rows).await,
        Workload::Baseline => baseline::run(ctx, &mut rows).await,
        Workload::Txn => txn::run(ctx, &mut rows).await,
        Workload::Scale => scale::run(ctx, &mut rows).await,
        Workload::Mongo => mongo::run(ctx, &mut rows).await,
        Workload::Agg => agg::run(ctx, &mut rows).await,
        Workload::Soak => soak::run(ctx, &mut rows).await,
    };
    note_busy(&mut rows, ctx.drop_dbs().await);
    let case = if rows.is_empty() { "all cases" } else { "remaining cases" };
    match result {
        Ok(()) => {}
        Err(Error::Unsupported(reason)) => rows.push(Row::skipped(workload.name(), case, &reason)),
        Err(err) => rows.push(Row::failed(workload.name(), case, &err.to_string())),
    }
    rows
}

/// Notes on the last row how long the server stayed busy after its databases were
/// deleted, if that was more than a second.
pub fn note_busy(rows: &mut [Row], busy: Option<Duration>) {
    let (Some(busy), Some(last)) = (busy, rows.last_mut()) else { return };
    let note = if busy >= SETTLE_MAX {
        format!("server still busy {:.0} s after its databases were deleted", busy.as_secs_f64())
    } else if busy >= Duration::from_secs(1) {
        format!("server busy {:.0} s after its databases were deleted", busy.as_secs_f64())
    } else {
        return;
    };
    *last = last.clone().note(&note);
}

/// Whether a workload talks to the server (all but `limit` and `baseline`).
pub fn uses_server(workload: Workload) -> bool {
    !matches!(workload, Workload::Limit | Workload::Baseline)
}

/// The usage measured by `probe`, if any.
pub fn usage(probe: Option<Probe>) -> Option<Usage> {
    probe.and_then(Probe::finish)
}

/// `N` clients.
pub fn clients_case(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

/// A preload must have written everything; says how long it took.
fn preload_note(sample: &Sample, began: Instant) -> Result<String> {
    if let Some(error) = &sample.first_error {
        return Err(Error::Invalid(format!("preloading failed: {error}")));
    }
    Ok(format!("preloaded {} docs in {:.1} s", sample.items, began.elapsed().as_secs_f64()))
}

/// The number of documents a `_bulk_docs` answer reports written; an error if any failed.
fn count_written(answer: &[u8]) -> Result<u64> {
    #[derive(Deserialize)]
    struct Item {
        #[serde(default)]
        error: Option<String>,
        #[serde(default)]
        reason: Option<String>,
    }
    let items: Vec<Item> = serde_json::from_slice(answer)
        .map_err(|e| Error::Invalid(format!("_bulk_docs answered unexpected JSON: {e}")))?;
    let failed: Vec<&Item> = items.iter().filter(|item| item.error.is_some()).collect();
    match failed.first() {
        None => Ok(items.len() as u64),
        Some(first) => Err(Error::Invalid(format!(
            "_bulk_docs rejected {} of {} docs, first: {} ({})",
            failed.len(),
            items.len(),
            first.error.as_deref().unwrap_or_default(),
            first.reason.as_deref().unwrap_or_default(),
        ))),
    }
}

fn base36(mut n: u64) -> String {
    let digits = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    while n > 0 || out.is_empty() {
        out.push(digits[(n % 36) as usize]);
        n /= 36;
    }
    out.reverse();
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bulk_answers_count_written_docs_and_reject_failures() {
        let ok = br#"[{"ok":true,"id":"a","rev":"1-x"},{"ok":true,"id":"b","rev":"1-y"}]"#;
        assert_eq!(count_written(ok).unwrap(), 2);
        let bad = br#"[{"ok":true,"id":"a","rev":"1-x"},{"id":"b","error":"conflict","reason":"Document update conflict."}]"#;
        let err = count_written(bad).unwrap_err().to_string();
        assert!(err.contains("rejected 1 of 2 docs, first: conflict"), "{err}");
    }

    #[test]
    fn base36_names_are_lowercase() {
        assert_eq!(base36(0), "0");
        assert_eq!(base36(36 * 36 + 35), "10z");
    }
}
