//! The `bunko` binary: command line, configuration and wiring, nothing else. It opens the
//! embedded store (`bunko-storage`), the engine over it, and serves the CouchDB HTTP API
//! (`bunko-http`) and, unless `--mongo-listen off`, the MongoDB wire protocol
//! (`bunko-mongo`) on the same engine until SIGTERM or Ctrl-C, then lets in-flight requests
//! finish and closes the store.

mod advise;
mod config;
mod memory;

use std::sync::Arc;

use anyhow::Context;
use clap::{Parser, Subcommand};
use tokio::net::TcpListener;

use crate::config::ServeArgs;

/// jemalloc instead of glibc malloc, which kept hundreds of MB of freed memory in its
/// per-thread arenas after bulk loads (measurements beside the dependency in Cargo.toml).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Bunko: a document database that speaks the CouchDB / IBM Cloudant HTTP API.
#[derive(Parser)]
#[command(version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the server on the embedded store.
    Serve(ServeArgs),
    /// Check a database against the data-modeling guides' rules (asks a running server, or
    /// opens a stopped one's store with --data).
    Advise(advise::AdviseArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // A report on the terminal is not interleaved with the store's progress lines.
    let default_log = match cli.command {
        Command::Advise(_) => "error",
        Command::Serve(_) => "info",
    };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("BUNKO_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_log)),
        )
        .init();
    match cli.command {
        Command::Serve(args) => serve(args),
        Command::Advise(args) => advise::run(args),
    }
}

fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let settings = config::Settings::load(&args)?;
    memory::watch(settings.memory_budget);
    std::fs::create_dir_all(&settings.data)
        .with_context(|| format!("cannot create data directory {}", settings.data.display()))?;
    let store = bunko_storage::Fjall::open_with(&settings.data, settings.storage)
        .with_context(|| format!("cannot open the store in {}", settings.data.display()))?;
    let store: Arc<dyn bunko_storage::Store> = Arc::new(store);
    let engine = Arc::new(bunko_engine::Engine::open(store.clone(), settings.engine.clone())?);
    engine.ensure_users_db(&bunko_engine::security::UserCtx::system())?;
    if engine.get_db(bunko_replicator_db()).is_none() {
        engine.create_db(
            &bunko_engine::security::UserCtx::system(),
            bunko_replicator_db(),
            false,
        )?;
    }
    // Views load every database's view groups and keep them current after writes.
    bunko_views::register(&engine);
    let search = bunko_search::Search::new(Some(settings.data.join("search")));
    // `_find` on Mango text indexes goes to the search service; a deleted database's
    // search indexes go with it.
    engine.set_text_search(std::sync::Arc::new(bunko_search::MangoText(search.clone())));
    search.register(&engine);
    let state =
        bunko_http::AppState::with_search(engine.clone(), settings.http.clone(), search.clone())?;
    let data_dir = settings.data.display().to_string();
    engine.settings().seed("couchdb", "database_dir", &data_dir);
    // Removes the search indexes of databases deleted while the server was down, then
    // reopens every search index, so the background updaters keep them current.
    let (loading, load_engine) = (search, engine.clone());
    std::thread::spawn(move || {
        loading.remove_dropped(&load_engine);
        for db in load_engine.db_names().iter().filter_map(|n| load_engine.get_db(n)) {
            if let Err(err) = loading.load(&db) {
                tracing::warn!(%err, db = db.name(), "search indexes not reopened");
            }
        }
    });
    let mongo_config = bunko_mongo::MongoConfig {
        data_dir: settings.data.display().to_string(),
        ttl_monitor_sleep: settings.mongo_ttl_monitor,
        agg_memory_limit: settings.mongo_agg_memory_limit,
        test_commands: settings.mongo_test_commands,
        ..Default::default()
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let mongo_engine = engine.clone();
    runtime.block_on(async move {
        let listener = TcpListener::bind(&settings.listen)
            .await
            .with_context(|| format!("cannot listen on {}", settings.listen))?;
        let addr = listener.local_addr()?;
        state.serve_at(addr);
        let mongo = match settings.mongo_listen {
            Some(at) => Some(
                TcpListener::bind(at)
                    .await
                    .with_context(|| format!("cannot listen for MongoDB on {at}"))?,
            ),
            None => None,
        };
        tracing::info!(data = %settings.data.display(), "bunko is ready");
        println!("bunko listening on http://{addr}");
        let (stop, stopped) = tokio::sync::watch::channel(false);
        if let Some(mongo) = mongo {
            println!("bunko listening on mongodb://{}", mongo.local_addr()?);
            let server = bunko_mongo::Server::new(mongo_engine, mongo_config);
            let mut stopped = stopped.clone();
            tokio::spawn(bunko_mongo::serve(mongo, server, async move {
                let _ = stopped.wait_for(|s| *s).await;
            }));
        }
        // TCP_NODELAY, and raw curl-style request targets normalised before hyper parses them.
        let listener = bunko_http::listener::Listener(listener);
        // Connection info gives the login lockout the client's address.
        let app = bunko_http::router(state)
            .into_make_service_with_connect_info::<bunko_http::listener::Peer>();
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                shutdown_signal().await;
                let _ = stop.send(true);
            })
            .await?;
        tracing::info!("shutting down: in-flight requests finished, closing the store");
        anyhow::Ok(())
    })?;
    // MongoDB connections are tasks of the runtime: let their in-flight commands finish.
    runtime.shutdown_timeout(std::time::Duration::from_secs(10));
    store.close()?;
    drop(engine);
    Ok(())
}

/// The replicator database, created at start-up as CouchDB does.
fn bunko_replicator_db() -> &'static str {
    "_replicator"
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(_) => return std::future::pending().await,
            };
        tokio::select! {
            _ = ctrl_c => {},
            _ = term.recv() => {},
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
