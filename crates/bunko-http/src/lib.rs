//! The CouchDB / IBM Cloudant HTTP API over [`bunko_engine`].
//!
//! Handlers are thin adapters: parse the request ([`params`], [`body`]), call the engine on
//! a blocking thread ([`blocking`]), render the answer ([`render`]). Long answers
//! (`_all_docs`, `_changes`) stream ([`stream`]). Every error becomes CouchDB's
//! `{"error", "reason"}` in one place, [`error`]. Authentication ([`auth`]) runs in
//! [`admission`], the one layer before any handler, and leaves a [`UserCtx`] in the
//! request. Before it, [`encoding`] inflates compressed request bodies and compresses
//! answers; outside it, [`headers`] adds `Server`, `X-Couch-Request-ID` and absolute
//! `Location`s, and [`jsonp`] wraps JSON answers in a `callback` when allowed. The server's
//! [`listener`] passes each connection through [`request_head`], which makes raw curl-style
//! request targets parse.
//!
//! Route modules: [`server`] (`/`, `/_up`, `/_all_dbs`, `/_uuids`, `/_session`), [`db`]
//! (`/{db}` and its admin endpoints), [`doc`] (`/{db}/{id}`, `_local`, `_design`), [`bulk`]
//! (`_bulk_docs`, `_bulk_get`, `_revs_diff`), [`all_docs`], [`changes`], [`partition`]
//! (`/{db}/_partition/{p}/…`), [`txn`] (`/_transaction`), [`procedure`]
//! (`/{db}/_design/{ddoc}/_procedures/{name}`), [`advise`] (`/{db}/_advise`, the
//! data-modeling advisor), [`dbs_info`] (`/_dbs_info`), [`db_updates`] (`/_db_updates`), [`local_docs`]
//! (`/{db}/_local_docs`), [`update`] (`/{db}/_design/{ddoc}/_update/{name}`), [`attachment`]
//! (`/{db}/{doc}/{name}`), [`node`] (`/_node/{node}`, `_config`, and [`metrics`]' `_stats`,
//! `_prometheus`), [`replicate`] (`/_replicate`, `/_scheduler/…`), [`console`] (`/_utils/`,
//! the web console), [`rewrite`] (`/{db}/_design/{ddoc}/_rewrite/…`).

pub mod admission;
pub mod advise;
pub mod all_docs;
pub mod attachment;
pub mod auth;
mod auth_handlers;
pub mod body;
pub mod bulk;
pub mod changes;
pub mod console;
pub mod copy;
pub mod ctype;
pub mod db;
pub mod db_updates;
pub mod dbs_info;
pub mod ddoc_info;
pub mod doc;
pub mod encoding;
pub mod error;
pub mod explain;
pub mod find;
mod form;
pub mod headers;
pub mod index;
pub mod jsonp;
mod jwt_auth;
pub mod listener;
pub mod local_docs;
pub mod metrics;
pub mod multipart;
pub mod node;
pub mod params;
mod part_headers;
pub mod partition;
pub mod prerouting;
pub mod procedure;
mod proxy_auth;
pub mod purge;
mod receive;
pub mod render;
pub mod replicate;
pub mod request_head;
pub mod rewrite;
pub mod rewrite_rules;
pub mod routes;
pub mod search;
pub mod seq;
pub mod server;
pub mod show_list;
pub mod stream;
pub mod txn;
pub mod update;
pub mod view;

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use axum::Router;
use axum::routing::{get, post};
use bunko_engine::Engine;
pub use bunko_engine::security::UserCtx;

use crate::error::{ApiError, ApiResult};

/// Server settings the HTTP layer needs.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// Largest request body in bytes (`413 too_large` beyond it).
    pub max_request_size: usize,
    /// Lifetime of an `AuthSession` cookie, in seconds (CouchDB's `[chttpd_auth] timeout`).
    pub session_timeout: u64,
    /// Whether cookies carry `Max-Age` and so outlive the browser session (CouchDB's
    /// `[chttpd_auth] allow_persistent_cookies`).
    pub persistent_cookies: bool,
    /// This node's name (`GET /_node/_local`, `/_membership`, the `node` of tasks); CouchDB
    /// names a node `name@host`.
    pub node_name: String,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            max_request_size: 64 << 20,
            session_timeout: 600,
            persistent_cookies: true,
            node_name: node::DEFAULT_NODE.to_string(),
        }
    }
}

/// Shared state of all handlers.
pub struct AppState {
    pub engine: Arc<Engine>,
    /// The start-up settings; the ones `_config` changes are read from `auth` and
    /// `max_request_size`.
    pub config: HttpConfig,
    /// Largest request body in bytes (`chttpd/max_http_request_size`), changed at run time.
    pub max_request_size: AtomicUsize,
    pub auth: auth::Auth,
    pub started: Instant,
    /// This server's stable uuid (`GET /`), kept in the store.
    pub server_uuid: String,
    /// The full-text search indexes (in memory unless [`AppState::with_search`] names a
    /// directory).
    pub search: Arc<bunko_search::Search>,
    /// The running replications (`/_replicate`, the `_replicator` database).
    pub replicator: std::sync::Arc<bunko_replicator::Replicator>,
    /// Request counters for `_stats` and `_prometheus`.
    pub metrics: metrics::Metrics,
}

pub type State = Arc<AppState>;

impl AppState {
    pub fn new(engine: Arc<Engine>, config: HttpConfig) -> bunko_engine::Result<State> {
        seq::set_node(&config.node_name);
        AppState::with_search(engine, config, bunko_search::Search::new(None))
    }

    /// The state with search indexes kept by `search` (in a directory, for a server).
    pub fn with_search(
        engine: Arc<Engine>,
        config: HttpConfig,
        search: Arc<bunko_search::Search>,
    ) -> bunko_engine::Result<State> {
        let auth = auth::Auth::new(&engine, &config)?;
        let uuid = engine.meta_or_init("server_uuid", || engine.uuids().next().into_bytes())?;
        let server_uuid = String::from_utf8_lossy(&uuid).into_owned();
        let settings = engine.settings();
        settings.seed("chttpd", "max_http_request_size", &config.max_request_size.to_string());
        settings.seed("chttpd_auth", "timeout", &config.session_timeout.to_string());
        let persistent = config.persistent_cookies.to_string();
        settings.seed("chttpd_auth", "allow_persistent_cookies", &persistent);
        let replicator = bunko_replicator::Replicator::new(engine.clone(), server_uuid.clone());
        let state = AppState {
            replicator,
            max_request_size: AtomicUsize::new(config.max_request_size),
            engine,
            config,
            auth,
            started: Instant::now(),
            server_uuid,
            search,
            metrics: metrics::Metrics::default(),
        };
        state.refresh();
        Ok(Arc::new(state))
    }

    /// This node's name.
    pub fn node(&self) -> &str {
        &self.config.node_name
    }

    /// Tells the replicator this server's address (known once it listens; also shown as
    /// `chttpd/port` and `bind_address` in `_config`): local endpoints
    /// are reached there with an `AuthSession` cookie of the replication's owner, so their
    /// writes pass the write gate as that user. Starts following `_replicator`.
    pub fn serve_at(self: &Arc<Self>, addr: std::net::SocketAddr) {
        let weak = Arc::downgrade(self);
        let credentials: bunko_replicator::endpoint::Credentials = Arc::new(move |name| {
            let state = weak.upgrade()?;
            let login = state.engine.logins().lookup(&state.engine, name?).ok()??;
            let cookie = state.auth.cookie_now(&login);
            Some(("Cookie".to_string(), format!("AuthSession={cookie}")))
        });
        let settings = self.engine.settings();
        settings.seed("chttpd", "port", &addr.port().to_string());
        settings.seed("chttpd", "bind_address", &addr.ip().to_string());
        let base = format!("http://{addr}/");
        self.replicator.set_local(bunko_replicator::Local { base, credentials });
        tokio::spawn(self.replicator.clone().watch_replicator_db());
    }

    /// Applies the HTTP layer's settings after a `_config` change (and the persisted changes
    /// at start-up): a deleted setting falls back to CouchDB's default.
    pub fn refresh(&self) {
        let settings = self.engine.settings();
        let defaults = HttpConfig::default();
        let size = settings.get_u64("chttpd", "max_http_request_size");
        let size = size.map_or(defaults.max_request_size, |n| n.min(usize::MAX as u64) as usize);
        self.max_request_size.store(size, Relaxed);
        let timeout = settings.get_u64("chttpd_auth", "timeout");
        self.auth.timeout.store(timeout.unwrap_or(defaults.session_timeout), Relaxed);
        let persistent = settings.get_bool("chttpd_auth", "allow_persistent_cookies");
        self.auth.persistent.store(persistent.unwrap_or(defaults.persistent_cookies), Relaxed);
        let require = settings.get_bool("chttpd", "require_valid_user");
        self.auth.require_valid_user.store(require.unwrap_or(true), Relaxed);
    }
}

/// The complete router of the CouchDB API, after [`prerouting`] (`+` in paths,
/// `X-HTTP-Method-Override`).
pub fn router(state: State) -> Router {
    let outer = state.clone();
    let prepare = move |req| prerouting::prepare(&outer, req);
    Router::new().fallback_service(api(state)).layer(tower::util::MapRequestLayer::new(prepare))
}

fn api(state: State) -> Router {
    Router::new()
        .merge(server::routes())
        .merge(db::routes())
        .merge(all_docs::routes())
        .merge(changes::routes())
        .merge(bulk::routes())
        .merge(partition::routes())
        .merge(index::routes())
        .merge(find::routes())
        .merge(view::routes())
        .merge(search::routes())
        .merge(procedure::routes())
        .merge(advise::routes())
        .merge(node::routes())
        .merge(metrics::routes())
        .merge(console::routes())
        .merge(doc::routes())
        .merge(attachment::routes())
        .merge(replicate::routes())
        .merge(dbs_info::routes())
        .merge(db_updates::routes())
        .merge(local_docs::routes())
        .merge(update::routes())
        .merge(purge::routes())
        .merge(show_list::routes())
        .merge(rewrite::routes())
        .route("/{db}/_compact", post(db::compact))
        .route("/_active_tasks", get(server::active_tasks))
        .route("/_transaction", post(txn::post))
        .method_not_allowed_fallback(method_not_allowed)
        .fallback(not_found)
        // The body limit sits inside the decompression layer, so it counts inflated bytes
        // ([`body::RawBody`]).
        .layer(axum::middleware::from_fn_with_state(state.clone(), admission::admit))
        .layer(encoding::decompression())
        // `jsonp::wrap` runs `encoding::check` inside it (one layer for both).
        .layer(axum::middleware::from_fn_with_state(state.clone(), jsonp::wrap))
        .layer(encoding::compression())
        .layer(axum::middleware::from_fn_with_state(state.clone(), headers::middleware))
        .with_state(state)
}

async fn method_not_allowed() -> ApiError {
    ApiError::Other(
        axum::http::StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "Only GET,HEAD,PUT,POST,DELETE allowed".to_string(),
    )
}

async fn not_found() -> ApiError {
    ApiError::not_found("missing")
}

/// Runs blocking engine work off the async threads.
pub async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> ApiResult<T> + Send + 'static,
) -> ApiResult<T> {
    tokio::task::spawn_blocking(work).await.unwrap_or_else(|_| {
        Err(ApiError::Other(
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            "internal_server_error",
            "a worker thread failed".to_string(),
        ))
    })
}
