//! Command-line options, the workload names, and how big each workload is at each
//! [`Scale`].

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, ValueEnum};

/// Runs named workloads against a CouchDB-compatible server on this machine and prints
/// throughput, latency percentiles and (with --pid) the server's peak RSS and CPU time.
#[derive(Parser, Debug, Clone)]
#[command(name = "bunko-bench", version, about)]
pub struct Options {
    /// Base URL of the server; loopback addresses only.
    #[arg(long, default_value = "http://127.0.0.1:5984")]
    pub url: String,
    /// Server admin name.
    #[arg(long, default_value = "admin")]
    pub user: String,
    /// Server admin password (also from BENCH_PASSWORD).
    #[arg(long, env = "BENCH_PASSWORD", default_value = "", hide_env_values = true)]
    pub password: String,
    /// How requests authenticate: one `POST /_session` cookie, or Basic on every request.
    #[arg(long, value_enum, default_value_t = AuthMode::Cookie)]
    pub auth: AuthMode,
    /// The server's process id: adds its peak RSS (VmHWM) and CPU time to every result.
    #[arg(long)]
    pub pid: Option<u32>,
    /// Comma-separated workloads to run, in this order (`scale` only when named).
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = Workload::DEFAULT)]
    pub workloads: Vec<Workload>,
    /// `smoke`: a few hundred documents and ~1 s per timed case; `full`: the sizes of
    /// docs/performance.md.
    #[arg(long, value_enum, default_value_t = Scale::Full)]
    pub scale: Scale,
    /// Length of each timed case, e.g. `10s`, `500ms`, `2m` (default 10s full, 1s smoke).
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Database sizes of `partition-scaling`, comma-separated (default: the scale's three).
    #[arg(long, value_delimiter = ',')]
    pub partition_sizes: Vec<usize>,
    /// Database sizes `scale` grows through, comma-separated (default 200000,1000000,
    /// 10000000 full, 200,400 smoke).
    #[arg(long, value_delimiter = ',')]
    pub scale_steps: Vec<usize>,
    /// The server's MongoDB wire protocol (Bunko's `--mongo-listen`), for the `mongo` and
    /// `agg` workloads; loopback only. Without credentials in it, `--user` and `--password`
    /// log in.
    #[arg(long, env = "BENCH_MONGO_URL", default_value = "mongodb://127.0.0.1:27017")]
    pub mongo_url: String,
    /// Name of this server in the output (e.g. `bunko`, `couchdb`).
    #[arg(long, default_value = "server")]
    pub label: String,
    /// Append one Markdown table per workload to this file.
    #[arg(long)]
    pub markdown: Option<PathBuf>,
    /// Append one JSON object per result line to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// The server's data directory (Bunko's `--data`): `load` then reports a database's
    /// disk size as the growth of this directory instead of CouchDB's `sizes.file`.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Directory for the in-process stores of `limit` (default: the system temp dir).
    #[arg(long)]
    pub temp_dir: Option<PathBuf>,
    /// Runs nothing: reads one or two --json files (bunko first) and prints the Markdown
    /// comparison with ratios, also appended to --markdown if given.
    #[arg(long, num_args = 1..=2, value_name = "JSONL")]
    pub compare: Vec<PathBuf>,
}

impl Options {
    /// The length of each timed case.
    pub fn duration(&self) -> Duration {
        self.duration.unwrap_or(match self.scale {
            Scale::Smoke => Duration::from_secs(1),
            Scale::Full => Duration::from_secs(10),
        })
    }
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMode {
    Cookie,
    Basic,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    Smoke,
    Full,
}

/// The workloads, in their default order.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Workload {
    Load,
    Write,
    Read,
    Changes,
    Find,
    Elemmatch,
    PartitionScaling,
    View,
    Search,
    Limit,
    Baseline,
    Txn,
    Agg,
    Scale,
    Mongo,
    Soak,
}

impl Workload {
    /// What runs when no workload is named: all but `scale` (10M documents, ~10 GB).
    pub const DEFAULT: [Workload; 13] = [
        Workload::Load,
        Workload::Write,
        Workload::Read,
        Workload::Changes,
        Workload::Find,
        Workload::Elemmatch,
        Workload::PartitionScaling,
        Workload::View,
        Workload::Search,
        Workload::Limit,
        Workload::Baseline,
        Workload::Txn,
        Workload::Agg,
    ];

    /// Every workload: [`Workload::DEFAULT`], then `mongo` (which needs `--mongo-url`),
    /// `soak` (as long as `--duration`) and `scale`.
    pub const ALL: [Workload; 16] = {
        let mut all = [Workload::Scale; 16];
        all[13] = Workload::Mongo;
        all[14] = Workload::Soak;
        let mut i = 0;
        while i < Self::DEFAULT.len() {
            all[i] = Self::DEFAULT[i];
            i += 1;
        }
        all
    };
    /// The name used on the command line and in the output.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Load => "load",
            Workload::Write => "write",
            Workload::Read => "read",
            Workload::Changes => "changes",
            Workload::Find => "find",
            Workload::Elemmatch => "elemmatch",
            Workload::PartitionScaling => "partition-scaling",
            Workload::View => "view",
            Workload::Search => "search",
            Workload::Limit => "limit",
            Workload::Baseline => "baseline",
            Workload::Txn => "txn",
            Workload::Agg => "agg",
            Workload::Scale => "scale",
            Workload::Mongo => "mongo",
            Workload::Soak => "soak",
        }
    }
}

impl std::fmt::Display for Workload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Document counts of each workload at a scale.
#[derive(Debug, Clone)]
pub struct Sizes {
    /// Documents per `load` case.
    pub load: usize,
    /// Documents per `_bulk_docs` request (1000 at full scale).
    pub batch: usize,
    /// Documents preloaded for `read`.
    pub read: usize,
    /// Documents preloaded for `find`.
    pub find: usize,
    /// Documents preloaded for `elemmatch`.
    pub elemmatch: usize,
    /// Database sizes of `partition-scaling`.
    pub partition: Vec<usize>,
    /// The database sizes `scale` grows through.
    pub scale: Vec<usize>,
    /// Documents preloaded for `view`.
    pub view: usize,
    /// Documents per bulk case of `limit`.
    pub limit: usize,
    /// Readings `agg` groups, sorts and counts.
    pub agg: usize,
    /// Documents `agg`'s `$lookup` joins.
    pub lookup: usize,
}

impl Sizes {
    pub fn of(scale: Scale) -> Sizes {
        match scale {
            Scale::Full => Sizes {
                load: 200_000,
                batch: 1000,
                read: 100_000,
                find: 200_000,
                elemmatch: 100_000,
                partition: vec![10_000, 100_000, 1_000_000],
                scale: vec![200_000, 1_000_000, 10_000_000],
                view: 200_000,
                limit: 200_000,
                agg: 200_000,
                lookup: 10_000,
            },
            Scale::Smoke => Sizes {
                load: 400,
                batch: 100,
                read: 300,
                find: 300,
                elemmatch: 300,
                partition: vec![100, 200, 400],
                scale: vec![200, 400],
                view: 300,
                limit: 2000,
                agg: 300,
                lookup: 200,
            },
        }
    }

    /// These sizes with `partition` replaced by `sizes`, unless it is empty.
    pub fn with_partition(mut self, sizes: &[usize]) -> Sizes {
        if !sizes.is_empty() {
            self.partition = sizes.to_vec();
        }
        self
    }

    pub fn with_scale(mut self, steps: &[usize]) -> Sizes {
        if !steps.is_empty() {
            self.scale = steps.to_vec();
        }
        self
    }
}

/// Parses `10s`, `500ms`, `2m`, `1.5s` (a number and a unit: ms, s or m).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().map_err(|_| format!("invalid duration {text:?}"))?;
    let secs = match unit {
        "ms" => number / 1000.0,
        "s" | "" => number,
        "m" => number * 60.0,
        _ => return Err(format!("invalid duration unit in {text:?} (use ms, s or m)")),
    };
    Duration::try_from_secs_f64(secs).map_err(|e| format!("invalid duration {text:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("5h").is_err());
        assert!(parse_duration("s").is_err());
    }

    #[test]
    fn workload_names_match_the_command_line() {
        for workload in Workload::ALL {
            let parsed = Workload::from_str(workload.name(), false);
            assert_eq!(parsed, Ok(workload));
        }
    }
}
