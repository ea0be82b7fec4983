//! Settings: command-line flags, the `BUNKO_ADMIN` environment variable and an optional
//! TOML file. Flags win over the file. These are the start-up values: changes made through
//! `/_node/{node}/_config` are persisted in the data directory and override them
//! (`bunko_engine::settings`, `docs/config.md`).
//!
//! ```toml
//! [admins]
//! admin = "secret"        # server admins: name = password
//!
//! [limits]
//! max_document_size = 8000000
//! max_request_size = 67108864
//! max_partition_size = 10737418240
//! transaction_lifetime = 60      # seconds a transaction may stay open (MongoDB's
//!                                # transactionLifetimeLimitSeconds)
//!
//! [chttpd_auth]
//! timeout = 600                  # seconds a session cookie lives
//! allow_persistent_cookies = true
//! iterations = 600000            # PBKDF2 rounds of new passwords
//!
//! [chttpd_auth_lockout]
//! mode = "enforce"               # or "warn", "off"
//! threshold = 5                  # failed logins from one address before the lockout
//! max_lifetime = 300000          # milliseconds a count lives
//! max_objects = 10000
//!
//! [storage]
//! memory_budget = 100663296 # resident bytes: cache, memtables, view pages, aggregations, rest
//! cache_size = 25165824   # fjall block cache, bytes
//! memtable_size = 6291456 # memtable flush threshold, bytes (capped by the data dir's own)
//! table_size = 67108864   # table size of the leveled compaction, bytes (a new data dir)
//! level0_tables = 4        # flushed tables merged into level 1 at once (a new data dir)
//! compression = "zstd"     # "zstd" (values), "lz4" (blocks), "deep" (blocks, levels 2+), "none"
//! ```

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use serde::Deserialize;

/// `bunko serve` options.
#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// Directory of the embedded store (created if missing).
    #[arg(long, default_value = "./bunko-data")]
    pub data: PathBuf,
    /// Address to listen on (`127.0.0.1:0` picks a free port).
    #[arg(long, default_value = "127.0.0.1:5984")]
    pub listen: SocketAddr,
    /// Address of the MongoDB wire-protocol listener, or `off` (`127.0.0.1:0` picks a free
    /// port).
    #[arg(long, default_value = "127.0.0.1:27017", value_parser = parse_mongo_listen)]
    pub mongo_listen: MongoListen,
    /// Seconds between two passes of the TTL monitor over MongoDB TTL indexes (MongoDB's
    /// `ttlMonitorSleepSecs`).
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    pub mongo_ttl_monitor_secs: u64,
    /// Bytes an aggregation `$group` or `$sort` may hold in memory before it spills to
    /// temporary keys in the store (or fails, with `allowDiskUse: false`): MongoDB's 100 MiB,
    /// or the query share of `--memory-budget` when a budget is set.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub mongo_agg_memory_limit: Option<u64>,
    /// Enables MongoDB's test commands (`configureFailPoint`), as `mongod --setParameter
    /// enableTestCommands=1` does: for running the drivers' specification tests, never in
    /// production.
    #[arg(long)]
    pub mongo_test_commands: bool,
    /// A TOML configuration file (admins, limits).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Largest document body in bytes (413 document_too_large beyond it).
    #[arg(long)]
    pub max_document_size: Option<usize>,
    /// Largest request body in bytes (413 too_large beyond it).
    #[arg(long)]
    pub max_request_size: Option<usize>,
    /// Largest size of one partition's documents in bytes (403 partition_overflow).
    #[arg(long)]
    pub max_partition_size: Option<u64>,
    /// PBKDF2 iterations for new `_users` passwords (default 600000, as CouchDB 3.4).
    #[arg(long)]
    pub pbkdf2_iterations: Option<u32>,
    /// Let database admins of `_users` change its `_security` (CouchDB's
    /// `users_db_security_editable`; off by default).
    #[arg(long)]
    pub users_db_security_editable: bool,
    /// Resident memory in bytes the server sizes itself to: the block cache, the memtables,
    /// view build pages and aggregation buffers get fixed shares of it, and the allocator
    /// returns free pages whenever it is passed (default 96 MiB; see docs/config.md).
    #[arg(long)]
    pub memory_budget: Option<u64>,
    /// Block cache of the store in bytes (default: a quarter of the memory budget).
    #[arg(long)]
    pub cache_size: Option<u64>,
    /// Memtable size in bytes (default: 1/16 of the memory budget; at most what the data
    /// directory was created with, docs/config.md). All memtables together keep to 3/16
    /// of the budget (at least two memtables).
    #[arg(long)]
    pub memtable_size: Option<u64>,
    /// Size of the tables the store's leveled compaction writes, in bytes, for a new store
    /// (default 64 MiB; an existing store keeps its own).
    #[arg(long)]
    pub table_size: Option<u64>,
    /// Flushed tables level 0 collects before they are merged into level 1, for a new store
    /// (2 to 16, default 4; an existing store keeps its own). Level 1 holds this many tables
    /// of `--table-size`: 8 and 32 MiB load faster and read slower (docs/config.md).
    #[arg(long)]
    pub level0_tables: Option<u8>,
    /// Compression: zstd (default: each value), lz4 (LZ4 data blocks), deep (LZ4 from
    /// level 2) or none. Blocks: chosen when a store is created; values: written from now on.
    #[arg(long)]
    pub compression: Option<bunko_storage::Compression>,
    /// This node's name, as `/_membership` and `/_node/_local` report it and
    /// `/_node/{name}/…` accepts it (CouchDB's `-name`, e.g. `node1@127.0.0.1`).
    #[arg(long, env = "BUNKO_NODE_NAME", default_value = bunko_http::node::DEFAULT_NODE)]
    pub node_name: String,
    /// Server admin as `name:password` (also from the BUNKO_ADMIN environment variable).
    #[arg(long, env = "BUNKO_ADMIN", hide_env_values = true)]
    pub admin: Option<String>,
}

/// Where the MongoDB listener listens, if anywhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MongoListen(pub Option<SocketAddr>);

fn parse_mongo_listen(text: &str) -> Result<MongoListen, String> {
    if text.eq_ignore_ascii_case("off") {
        return Ok(MongoListen(None));
    }
    text.parse().map(|a| MongoListen(Some(a))).map_err(|e| format!("{e} (an address, or off)"))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    admins: BTreeMap<String, String>,
    #[serde(default)]
    limits: Limits,
    #[serde(default)]
    storage: Storage,
    #[serde(default)]
    chttpd_auth: ChttpdAuth,
    #[serde(default)]
    chttpd_auth_lockout: Lockout,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ChttpdAuth {
    timeout: Option<u64>,
    allow_persistent_cookies: Option<bool>,
    iterations: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Lockout {
    mode: Option<String>,
    threshold: Option<u32>,
    max_lifetime: Option<u64>,
    max_objects: Option<usize>,
}

impl Lockout {
    fn apply(&self, to: &mut bunko_engine::login::LockoutConfig) -> anyhow::Result<()> {
        use bunko_engine::login::LockoutMode;
        if let Some(mode) = &self.mode {
            to.mode = match mode.as_str() {
                "enforce" => LockoutMode::Enforce,
                "warn" => LockoutMode::Warn,
                "off" => LockoutMode::Off,
                other => anyhow::bail!(
                    "chttpd_auth_lockout.mode must be enforce, warn or off, not {other:?}"
                ),
            };
        }
        to.threshold = self.threshold.unwrap_or(to.threshold);
        if let Some(ms) = self.max_lifetime {
            to.max_lifetime = std::time::Duration::from_millis(ms);
        }
        to.max_objects = self.max_objects.unwrap_or(to.max_objects).max(1);
        Ok(())
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Storage {
    memory_budget: Option<u64>,
    cache_size: Option<u64>,
    memtable_size: Option<u64>,
    table_size: Option<u64>,
    level0_tables: Option<u8>,
    compression: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Limits {
    max_document_size: Option<usize>,
    max_request_size: Option<usize>,
    max_partition_size: Option<u64>,
    transaction_lifetime: Option<u64>,
}

/// Everything the binary wires together.
pub struct Settings {
    pub data: PathBuf,
    pub listen: SocketAddr,
    /// The MongoDB listener's address; `None`: off.
    pub mongo_listen: Option<SocketAddr>,
    pub mongo_ttl_monitor: std::time::Duration,
    pub mongo_agg_memory_limit: usize,
    pub mongo_test_commands: bool,
    pub engine: bunko_engine::Config,
    pub http: bunko_http::HttpConfig,
    pub storage: bunko_storage::FjallOptions,
    /// `--memory-budget` in bytes (the default if not given).
    pub memory_budget: u64,
}

impl Settings {
    pub fn load(args: &ServeArgs) -> anyhow::Result<Settings> {
        let file: File = match &args.config {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read {}", path.display()))?;
                toml::from_str(&text)
                    .with_context(|| format!("invalid config {}", path.display()))?
            }
            None => File::default(),
        };
        let mut engine = bunko_engine::Config::default();
        let mut http = bunko_http::HttpConfig::default();
        if let Some(size) = args.max_document_size.or(file.limits.max_document_size) {
            engine.limits.max_document_size = size;
        }
        if let Some(size) = args.max_request_size.or(file.limits.max_request_size) {
            http.max_request_size = size;
        }
        if let Some(size) = args.max_partition_size.or(file.limits.max_partition_size) {
            engine.max_partition_size = size;
        }
        if let Some(seconds) = file.limits.transaction_lifetime {
            engine.txn_lifetime = std::time::Duration::from_secs(seconds.max(1));
        }
        if let Some(iterations) = args.pbkdf2_iterations.or(file.chttpd_auth.iterations) {
            engine.pbkdf2_iterations = iterations.max(1);
        }
        http.session_timeout = file.chttpd_auth.timeout.unwrap_or(http.session_timeout);
        http.persistent_cookies =
            file.chttpd_auth.allow_persistent_cookies.unwrap_or(http.persistent_cookies);
        http.node_name = args.node_name.clone();
        file.chttpd_auth_lockout.apply(&mut engine.lockout)?;
        engine.users_db_security_editable = args.users_db_security_editable;
        engine.admins = file.admins.into_iter().collect();
        if let Some(admin) = &args.admin {
            let (name, password) =
                admin.split_once(':').context("BUNKO_ADMIN must be name:password")?;
            engine.admins.push((name.to_string(), password.to_string()));
        }
        if engine.admins.is_empty() {
            tracing::warn!(
                "no server admin configured (set BUNKO_ADMIN=name:password): \
                 every request except GET / and /_up will be refused"
            );
        }
        let budget = args.memory_budget.or(file.storage.memory_budget);
        if let Some(bytes) = budget {
            let least = bunko_storage::MemoryBudget::MIN.0;
            anyhow::ensure!(bytes >= least, "memory_budget must be at least {least} bytes");
        }
        let memory_budget = budget.map(bunko_storage::MemoryBudget).unwrap_or_default();
        let shares = memory_budget.split();
        engine.view_page_bytes = shares.view_page_bytes;
        let agg_memory_limit = match (args.mongo_agg_memory_limit, budget) {
            (Some(bytes), _) => bytes,
            (None, Some(_)) => shares.query_bytes,
            (None, None) => bunko_mongo::MongoConfig::default().agg_memory_limit as u64,
        };
        let mut storage = bunko_storage::FjallOptions::from_budget(memory_budget);
        if let Some(bytes) = args.cache_size.or(file.storage.cache_size) {
            storage.cache_bytes = bytes;
        }
        if let Some(bytes) = args.memtable_size.or(file.storage.memtable_size) {
            anyhow::ensure!(
                bytes >= bunko_storage::FjallOptions::MIN_MEMTABLE_BYTES,
                "memtable_size must be at least {} bytes",
                bunko_storage::FjallOptions::MIN_MEMTABLE_BYTES
            );
            storage.memtable_bytes = bytes;
        }
        if let Some(bytes) = args.table_size.or(file.storage.table_size) {
            let least = bunko_storage::FjallOptions::MIN_TABLE_BYTES;
            anyhow::ensure!(bytes >= least, "table_size must be at least {least} bytes");
            storage.table_bytes = bytes;
        }
        if let Some(tables) = args.level0_tables.or(file.storage.level0_tables) {
            let range = bunko_storage::FjallOptions::LEVEL0_TABLES_RANGE;
            anyhow::ensure!(
                range.contains(&tables),
                "level0_tables must be from {} to {}",
                range.start(),
                range.end()
            );
            storage.level0_tables = tables;
        }
        if let Some(compression) = args.compression {
            storage.compression = compression;
        } else if let Some(text) = &file.storage.compression {
            storage.compression = text.parse().map_err(anyhow::Error::msg)?;
        }
        Ok(Settings {
            data: args.data.clone(),
            listen: args.listen,
            mongo_listen: args.mongo_listen.0,
            mongo_ttl_monitor: std::time::Duration::from_secs(args.mongo_ttl_monitor_secs),
            mongo_agg_memory_limit: usize::try_from(agg_memory_limit).unwrap_or(usize::MAX),
            mongo_test_commands: args.mongo_test_commands,
            engine,
            http,
            storage,
            memory_budget: memory_budget.bytes(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        serve: ServeArgs,
    }

    fn load(args: &[&str]) -> anyhow::Result<Settings> {
        let cli = Cli::try_parse_from(std::iter::once("bunko").chain(args.iter().copied()))?;
        Settings::load(&cli.serve)
    }

    #[test]
    fn storage_sizes_come_from_flags_then_file() -> anyhow::Result<()> {
        let defaults = load(&[])?.storage;
        assert_eq!(defaults, bunko_storage::FjallOptions::default());
        let dir = tempfile::tempdir()?;
        let file = dir.path().join("bunko.toml");
        std::fs::write(&file, "[storage]\ncache_size = 1000000\nmemtable_size = 2000000\n")?;
        let path = file.to_str().context("path")?;
        let from_file = load(&["--config", path])?.storage;
        assert_eq!((from_file.cache_bytes, from_file.memtable_bytes), (1_000_000, 2_000_000));
        let flag = load(&["--config", path, "--memtable-size", "4000000"])?.storage;
        assert_eq!((flag.cache_bytes, flag.memtable_bytes), (1_000_000, 4_000_000));
        Ok(())
    }

    #[test]
    fn compaction_shape_comes_from_flags_then_file_and_is_checked() -> anyhow::Result<()> {
        let defaults = load(&[])?.storage;
        assert_eq!((defaults.table_bytes, defaults.level0_tables), (64 << 20, 4));
        let dir = tempfile::tempdir()?;
        let file = dir.path().join("bunko.toml");
        std::fs::write(&file, "[storage]\ntable_size = 16777216\nlevel0_tables = 4\n")?;
        let path = file.to_str().context("path")?;
        let from_file = load(&["--config", path])?.storage;
        assert_eq!((from_file.table_bytes, from_file.level0_tables), (16 << 20, 4));
        let flags = load(&["--config", path, "--table-size", "67108864", "--level0-tables", "12"])?;
        assert_eq!((flags.storage.table_bytes, flags.storage.level0_tables), (64 << 20, 12));
        let small = load(&["--table-size", "1000"]).err().map(|e| e.to_string());
        assert!(small.is_some_and(|e| e.contains("table_size must be at least 1048576 bytes")));
        for tables in ["1", "17"] {
            let err = load(&["--level0-tables", tables]).err().map(|e| e.to_string());
            assert!(err.is_some_and(|e| e.contains("level0_tables must be from 2 to 16")));
        }
        Ok(())
    }

    #[test]
    fn the_memory_budget_sizes_cache_memtables_pages_and_aggregations() -> anyhow::Result<()> {
        let default = load(&[])?;
        assert_eq!(
            (default.storage.cache_bytes, default.storage.memtable_bytes),
            (24 << 20, 6 << 20)
        );
        assert_eq!(default.storage.memtables_bytes, 18 << 20);
        assert_eq!(default.memory_budget, 96 << 20);
        assert_eq!(default.engine.view_page_bytes, 6 << 20);
        assert_eq!(default.mongo_agg_memory_limit, 100 << 20, "MongoDB's limit without a budget");
        let small = load(&["--memory-budget", "67108864"])?;
        assert_eq!((small.storage.cache_bytes, small.storage.memtable_bytes), (16 << 20, 4 << 20));
        assert_eq!(small.storage.memtables_bytes, 12 << 20);
        assert_eq!(small.memory_budget, 64 << 20);
        assert_eq!(small.engine.view_page_bytes, 4 << 20);
        assert_eq!(small.mongo_agg_memory_limit, 16 << 20);
        let dir = tempfile::tempdir()?;
        let file = dir.path().join("bunko.toml");
        std::fs::write(&file, "[storage]\nmemory_budget = 268435456\n")?;
        let path = file.to_str().context("path")?;
        let args = ["--config", path, "--cache-size", "1000000", "--mongo-agg-memory-limit", "5"];
        let mixed = load(&args)?;
        assert_eq!(
            (mixed.storage.cache_bytes, mixed.storage.memtable_bytes),
            (1_000_000, 16 << 20)
        );
        assert_eq!((mixed.storage.memtables_bytes, mixed.memory_budget), (48 << 20, 256 << 20));
        assert_eq!(mixed.mongo_agg_memory_limit, 5);
        let err = load(&["--memory-budget", "1000"]).err().map(|e| e.to_string());
        assert!(err.is_some_and(|e| e.contains("memory_budget must be at least")));
        Ok(())
    }

    #[test]
    fn mongo_listener_is_on_by_default_and_can_be_off() -> anyhow::Result<()> {
        assert_eq!(load(&[])?.mongo_listen, Some("127.0.0.1:27017".parse()?));
        assert_eq!(load(&["--mongo-listen", "off"])?.mongo_listen, None);
        assert_eq!(
            load(&["--mongo-listen", "127.0.0.1:0"])?.mongo_listen,
            Some("127.0.0.1:0".parse()?)
        );
        assert!(load(&["--mongo-listen", "nowhere"]).is_err());
        Ok(())
    }

    #[test]
    fn compression_from_flag_or_file() -> anyhow::Result<()> {
        use bunko_storage::Compression;
        assert_eq!(load(&[])?.storage.compression, Compression::Zstd);
        assert_eq!(load(&["--compression", "none"])?.storage.compression, Compression::None);
        let dir = tempfile::tempdir()?;
        let file = dir.path().join("bunko.toml");
        std::fs::write(&file, "[storage]\ncompression = \"deep\"\n")?;
        let path = file.to_str().context("path")?;
        assert_eq!(load(&["--config", path])?.storage.compression, Compression::Deep);
        std::fs::write(&file, "[storage]\ncompression = \"brotli\"\n")?;
        let err = load(&["--config", path]).err().map(|e| e.to_string());
        assert!(err.is_some_and(|e| e.contains("unknown compression")), "brotli is refused");
        Ok(())
    }

    #[test]
    fn tiny_memtables_are_refused() {
        let err = load(&["--memtable-size", "1000"]).err().map(|e| e.to_string());
        assert!(err.is_some_and(|e| e.contains("memtable_size must be at least")));
    }
}
