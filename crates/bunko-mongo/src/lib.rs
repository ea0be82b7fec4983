//! The MongoDB wire-protocol front end: a thin adapter over `bunko-engine`, beside
//! `bunko-http` (DESIGN.md §9). One request, in the order of the modules:
//!
//! 1. [`serve`] accepts connections; `conn` reads each message ([`wire`]: header,
//!    `OP_MSG`/`OP_QUERY`/`OP_COMPRESSED`, size limits) and runs its command on a blocking
//!    thread, since engine calls block; the syncs its writes wait for are awaited on the
//!    runtime afterwards (`acks`).
//! 2. `commands` looks the command up in one table (one module per family: handshake and
//!    admin, authentication, databases and collections, CRUD, cursors), refuses it with
//!    `Unauthorized` (13) on a connection that has not authenticated unless it is part of the
//!    handshake, and checks the fields every command may carry (`$db`, `lsid`, ...).
//! 3. Data is reached only through engine methods that take the connection's `UserCtx`, so
//!    the write gate applies exactly as over HTTP ([`auth`]: SCRAM-SHA-256 and SCRAM-SHA-1
//!    against the same users). A collection `db.coll` is one engine database ([`names`]);
//!    documents are stored as JSON text with Extended JSON wrappers (`bunko_doc::ejson`).
//! 4. Every failure becomes `{ok: 0, errmsg, code, codeName}` in [`error`]; the connection
//!    survives every bad command.

mod acks;
pub mod auth;
mod bit_mask;
mod clock;
mod commands;
mod conn;
mod cursors;
pub mod error;
mod fail_point;
pub mod names;
mod projection;
mod query;
mod record_meta;
mod retried;
mod sessions;
mod snapshots;
mod ttl;
pub mod wire;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bunko_engine::Engine;
use tokio::net::TcpListener;

/// Settings of the MongoDB listener.
#[derive(Debug, Clone)]
pub struct MongoConfig {
    /// How long an idle cursor lives (MongoDB: 10 minutes).
    pub cursor_timeout: Duration,
    /// The data directory, as `getCmdLineOpts` reports it.
    pub data_dir: String,
    /// How often TTL indexes delete expired documents (MongoDB's `ttlMonitorSleepSecs`).
    pub ttl_monitor_sleep: Duration,
    /// Bytes an aggregation's blocking stage (`$group`, `$sort`) may hold in memory before
    /// it spills to temporary keys (MongoDB's 100 MiB per stage).
    pub agg_memory_limit: usize,
    /// Test commands (`configureFailPoint`), as MongoDB's `enableTestCommands`: never in
    /// production.
    pub test_commands: bool,
}

impl Default for MongoConfig {
    fn default() -> Self {
        Self {
            cursor_timeout: Duration::from_secs(600),
            data_dir: String::new(),
            ttl_monitor_sleep: Duration::from_secs(60),
            agg_memory_limit: bunko_query::agg::MEMORY_LIMIT,
            test_commands: false,
        }
    }
}

/// State shared by every connection.
pub struct Server {
    engine: Arc<Engine>,
    auth: auth::Auth,
    cursors: cursors::Cursors,
    streams: commands::change_stream::registry::Streams,
    /// Open tailable cursors on capped collections.
    tails: commands::capped::Tails,
    sessions: sessions::Sessions,
    config: MongoConfig,
    started: Instant,
    process_id: bson::oid::ObjectId,
    next_conn: AtomicI64,
    open: AtomicU64,
    fail_points: fail_point::FailPoints,
    clock: clock::Clock,
    snapshots: snapshots::History,
}

impl Server {
    pub fn new(engine: Arc<Engine>, config: MongoConfig) -> Arc<Server> {
        let clock = clock::Clock::after(&engine);
        retried::forget_expired(&engine);
        Arc::new(Server {
            engine,
            auth: auth::Auth::default(),
            cursors: cursors::Cursors::new(config.cursor_timeout),
            streams: commands::change_stream::registry::Streams::new(config.cursor_timeout),
            tails: commands::capped::Tails::new(config.cursor_timeout),
            sessions: sessions::Sessions::default(),
            config,
            started: Instant::now(),
            process_id: bson::oid::ObjectId::new(),
            next_conn: AtomicI64::new(1),
            open: AtomicU64::new(0),
            fail_points: fail_point::FailPoints::default(),
            clock,
            snapshots: snapshots::History::default(),
        })
    }

    fn connections(&self) -> (u64, i64) {
        (self.open.load(Ordering::Relaxed), self.next_conn.load(Ordering::Relaxed) - 1)
    }
}

/// Accepts connections until `shutdown` completes.
pub async fn serve(
    listener: TcpListener,
    server: Arc<Server>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    let every = server.config.ttl_monitor_sleep;
    let ttl = tokio::spawn(ttl::monitor(server.engine.clone(), every));
    loop {
        let accepted = tokio::select! {
            _ = &mut shutdown => {
                ttl.abort();
                return;
            }
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, peer)) => {
                let server = server.clone();
                tokio::spawn(conn::run(server, stream, peer));
            }
            Err(err) => {
                tracing::warn!(%err, "mongo accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// One connection's state.
pub(crate) struct Session {
    pub id: i64,
    pub peer: SocketAddr,
    pub local: SocketAddr,
    pub user: Option<bunko_engine::security::UserCtx>,
    /// The `_users` update seq `user` was last read at ([`auth::refresh`]).
    pub user_seq: Option<u64>,
    /// A SCRAM exchange in progress, and whether the client skips its empty last step.
    pub scram: Option<(auth::Conversation, bool)>,
    pub compressors: Vec<wire::Compressor>,
    /// Set by a change stream's `getMore` that found nothing yet: `conn.rs` waits, then
    /// runs the command again.
    pub wait: Option<commands::change_stream::registry::Wait>,
    /// The deadline of the `getMore` being waited on.
    pub await_until: Option<std::time::Instant>,
    /// `client.application.name` of the handshake (a fail point's `appName`).
    pub app_name: Option<String>,
    /// Set by a fail point's `closeConnection`: `conn.rs` drops the connection unanswered.
    pub close: bool,
    /// The syncs the current command's writes wait for ([`acks`]).
    pub unsynced: acks::Unsynced,
    /// Whether the current request's documents are known to be within the size limit
    /// ([`wire::Request::sized`]).
    pub sized: bool,
    /// The current insert's documents as they came ([`wire::Request::documents`]).
    pub documents: Option<Vec<bson::RawDocumentBuf>>,
    /// A first batch written as BSON from the stored text ([`commands::point_read`]).
    pub raw_batch: commands::point_read::RawBatch,
}

impl Session {
    /// A new connection's state: not authenticated, nothing pending.
    fn new(id: i64, peer: SocketAddr, local: SocketAddr) -> Session {
        Session {
            id,
            peer,
            local,
            user: None,
            user_seq: None,
            scram: None,
            compressors: Vec::new(),
            wait: None,
            await_until: None,
            app_name: None,
            close: false,
            unsynced: Default::default(),
            sized: false,
            documents: None,
            raw_batch: Default::default(),
        }
    }
}
