//! Request metrics for `/_node/{node}/_stats` (CouchDB's JSON shape) and
//! `/_node/{node}/_prometheus` (CouchDB 3.2's text exposition), read by the console's live
//! metrics view. One [`Timing`] per request counts it, its method and status
//! and adds its latency to a fixed-bucket histogram: a few relaxed atomic adds per request,
//! no lock. Documents written are the sum of the databases' update sequences, which the
//! engine's write path already keeps, so writes pay nothing extra.
//!
//! Unlike CouchDB, whose histograms cover a sliding 10-second window, these count since the
//! process started; a reader takes differences between two reads for rates and means.

use std::fmt::Write as _;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use axum::Router;
use axum::extract::{FromRequestParts, Path, Request};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Map, Value, json};

use crate::error::ApiError;
use crate::node::check;
use crate::{State, UserCtx, render};

/// Upper bounds of the latency buckets, in microseconds (the last bucket is unbounded).
const BOUNDS_US: [u64; 16] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000,
];
const METHODS: [&str; 6] = ["COPY", "DELETE", "GET", "HEAD", "POST", "PUT"];
/// The status codes CouchDB counts (`httpd_status_codes`), plus the others Bunko answers.
const CODES: [u16; 19] =
    [200, 201, 202, 204, 206, 301, 302, 304, 400, 401, 403, 404, 405, 406, 409, 412, 413, 415, 500];

/// The counters; one per server, in [`crate::AppState`].
#[derive(Default)]
pub struct Metrics {
    requests: AtomicU64,
    methods: [AtomicU64; METHODS.len()],
    codes: [AtomicU64; CODES.len()],
    buckets: [AtomicU64; BOUNDS_US.len() + 1],
    sum_us: AtomicU64,
    sum_sq_ms: AtomicU64,
    max_us: AtomicU64,
    min_us: AtomicU64,
}

impl Metrics {
    fn record(&self, method: &str, status: u16, micros: u64) {
        self.requests.fetch_add(1, Relaxed);
        if let Some(i) = METHODS.iter().position(|m| *m == method) {
            self.methods[i].fetch_add(1, Relaxed);
        }
        if let Some(i) = CODES.iter().position(|c| *c == status) {
            self.codes[i].fetch_add(1, Relaxed);
        }
        let bucket = BOUNDS_US.iter().position(|b| micros <= *b).unwrap_or(BOUNDS_US.len());
        self.buckets[bucket].fetch_add(1, Relaxed);
        self.sum_us.fetch_add(micros, Relaxed);
        let ms = micros / 1000;
        self.sum_sq_ms.fetch_add(ms.saturating_mul(ms), Relaxed);
        self.max_us.fetch_max(micros, Relaxed);
        // 0 means "no request yet"; a 0 µs request is recorded as 1 µs.
        let floor = micros.max(1);
        let _ =
            self.min_us.fetch_update(Relaxed, Relaxed, |m| (m == 0 || floor < m).then_some(floor));
    }

    fn counts(&self) -> Vec<u64> {
        self.buckets.iter().map(|b| b.load(Relaxed)).collect()
    }

    /// The upper bound (ms) of the bucket holding the `q` quantile (0..1).
    fn quantile_ms(&self, counts: &[u64], q: f64) -> f64 {
        let n: u64 = counts.iter().sum();
        let rank = (q * n as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, c) in counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let bound = BOUNDS_US.get(i).copied().unwrap_or(self.max_us.load(Relaxed));
                return bound as f64 / 1000.0;
            }
        }
        0.0
    }

    /// `couchdb.request_time` in CouchDB's histogram shape (milliseconds).
    fn request_time(&self) -> Value {
        let counts = self.counts();
        let n: u64 = counts.iter().sum();
        let mean = if n == 0 { 0.0 } else { self.sum_us.load(Relaxed) as f64 / n as f64 / 1000.0 };
        let variance = if n == 0 {
            0.0
        } else {
            (self.sum_sq_ms.load(Relaxed) as f64 / n as f64 - mean * mean).max(0.0)
        };
        let percentile: Vec<Value> =
            [(50, 0.5), (75, 0.75), (90, 0.9), (95, 0.95), (99, 0.99), (999, 0.999)]
                .iter()
                .map(|(p, q)| json!([p, self.quantile_ms(&counts, *q)]))
                .collect();
        let histogram: Vec<Value> = counts
            .iter()
            .enumerate()
            .map(|(i, c)| {
                json!([BOUNDS_US.get(i).map_or(f64::INFINITY, |b| *b as f64 / 1000.0), c])
            })
            .collect();
        json!({
            "value": {
                "min": self.min_us.load(Relaxed) as f64 / 1000.0,
                "max": self.max_us.load(Relaxed) as f64 / 1000.0,
                "arithmetic_mean": mean,
                "median": self.quantile_ms(&counts, 0.5),
                "variance": variance,
                "standard_deviation": variance.sqrt(),
                "percentile": percentile,
                "histogram": histogram,
                "n": n,
            },
            "type": "histogram",
            "desc": "length of a request inside Bunko, in milliseconds",
        })
    }
}

/// A request being counted: [`Timing::start`] when it comes in, [`Timing::count`] with its
/// answer. Started outside authentication (`crate::admission`), so refused requests count too.
pub struct Timing {
    started: Instant,
    method: axum::http::Method,
}

impl Timing {
    /// Starts timing `req`.
    pub fn start(req: &Request) -> Timing {
        Timing { started: Instant::now(), method: req.method().clone() }
    }

    /// Counts the request with the status of its answer and the time since [`Timing::start`].
    pub fn count(self, state: &State, response: &Response) {
        let micros = self.started.elapsed().as_micros().min(u64::MAX as u128) as u64;
        state.metrics.record(self.method.as_str(), response.status().as_u16(), micros);
    }
}

pub fn routes() -> Router<State> {
    Router::new()
        .route("/_node/{node}/_stats", get(stats))
        .route("/_node/{node}/_prometheus", get(prometheus))
}

fn counter(value: u64, desc: &str) -> Value {
    json!({"value": value, "type": "counter", "desc": desc})
}

fn gauge(value: u64, desc: &str) -> Value {
    json!({"value": value, "type": "gauge", "desc": desc})
}

/// What the engine knows: documents written (sum of update sequences), databases, bytes.
struct Storage {
    writes: u64,
    databases: u64,
    bytes: u64,
}

fn storage(state: &State) -> Storage {
    let names = state.engine.db_names();
    let mut out = Storage { writes: 0, databases: names.len() as u64, bytes: 0 };
    for db in names.iter().filter_map(|name| state.engine.get_db(name)) {
        let info = db.info();
        out.writes += info.update_seq;
        out.bytes += info.disk_size;
    }
    out
}

/// A request for this node's numbers by a server admin: the server's state, checked.
struct NodeAdmin(State);

impl FromRequestParts<State> for NodeAdmin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &State) -> Result<Self, ApiError> {
        let Path(node) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|rejection| ApiError::bad_request(rejection.body_text()))?;
        let ctx = parts.extensions.get::<UserCtx>().cloned().unwrap_or_default();
        check(state, &ctx, &node)?;
        Ok(NodeAdmin(state.clone()))
    }
}

/// `GET /_node/{node}/_stats`: CouchDB's `{group: {name: {value, type, desc}}}`.
async fn stats(NodeAdmin(state): NodeAdmin) -> Response {
    let m = &state.metrics;
    let store = storage(&state);
    let methods: Map<String, Value> = METHODS
        .iter()
        .zip(&m.methods)
        .map(|(name, c)| {
            (name.to_string(), counter(c.load(Relaxed), &format!("number of HTTP {name} requests")))
        })
        .collect();
    let codes: Map<String, Value> = CODES
        .iter()
        .zip(&m.codes)
        .map(|(code, c)| {
            (
                code.to_string(),
                counter(c.load(Relaxed), &format!("number of HTTP {code} responses")),
            )
        })
        .collect();
    let body = json!({
        "couchdb": {
            "request_time": m.request_time(),
            "database_writes": counter(store.writes, "number of times a document was changed"),
            "open_databases": gauge(store.databases, "number of databases"),
            "uptime": gauge(state.started.elapsed().as_secs(), "seconds since the server started"),
        },
        "httpd": {"requests": counter(m.requests.load(Relaxed), "number of HTTP requests")},
        "httpd_request_methods": methods,
        "httpd_status_codes": codes,
        "bunko": {
            "storage_bytes": gauge(store.bytes, "bytes of stored documents and revision trees"),
        },
    });
    render::json(StatusCode::OK, body)
}

/// `GET /_node/{node}/_prometheus`: the same numbers in Prometheus' text format 0.0.4.
async fn prometheus(NodeAdmin(state): NodeAdmin) -> Response {
    let m = &state.metrics;
    let store = storage(&state);
    let mut out = String::new();
    let mut family = |name: &str, kind: &str, lines: Vec<(String, String)>| {
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for (suffix, value) in lines {
            let _ = writeln!(out, "{name}{suffix} {value}");
        }
    };
    let one = |v: u64| vec![(String::new(), v.to_string())];
    family("couchdb_httpd_requests_total", "counter", one(m.requests.load(Relaxed)));
    let methods = METHODS.iter().zip(&m.methods);
    let methods =
        methods.map(|(k, c)| (format!("{{method=\"{k}\"}}"), c.load(Relaxed).to_string()));
    family("couchdb_httpd_request_methods", "counter", methods.collect());
    let codes = CODES.iter().zip(&m.codes);
    let codes = codes.map(|(k, c)| (format!("{{code=\"{k}\"}}"), c.load(Relaxed).to_string()));
    family("couchdb_httpd_status_codes", "counter", codes.collect());
    let counts = m.counts();
    let mut summary: Vec<(String, String)> = [0.5, 0.75, 0.9, 0.95, 0.99, 0.999]
        .iter()
        .map(|q| {
            (format!("{{quantile=\"{q}\"}}"), (m.quantile_ms(&counts, *q) / 1000.0).to_string())
        })
        .collect();
    summary.push(("_sum".into(), (m.sum_us.load(Relaxed) as f64 / 1e6).to_string()));
    summary.push(("_count".into(), counts.iter().sum::<u64>().to_string()));
    family("couchdb_request_time_seconds", "summary", summary);
    family("couchdb_database_writes_total", "counter", one(store.writes));
    family("couchdb_open_databases", "gauge", one(store.databases));
    family("couchdb_uptime_seconds", "counter", one(state.started.elapsed().as_secs()));
    family("bunko_storage_bytes", "gauge", one(store.bytes));
    let mut response = (StatusCode::OK, out).into_response();
    let kind = HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8");
    response.headers_mut().insert(header::CONTENT_TYPE, kind);
    response
}
