//! `bunko-bench`: named workloads against any CouchDB-compatible server on this machine,
//! so that one run measures Bunko and another, with the same binary and options, a real
//! CouchDB. It is a leaf of the workspace: nothing depends on it.
//!
//! How a run goes:
//!
//! 1. [`cli::Options`] (clap) name the server, credentials (`POST /_session` cookie or
//!    Basic), the server's pid, the workloads and the scale.
//! 2. [`run`] checks the server answers ([`workloads::Ctx::connect`]), then runs each
//!    workload in order ([`workloads::run`]). A workload makes its own databases, fills
//!    them with generated ~1 KB documents ([`data`]), and drives closed-loop clients
//!    ([`measure`]): one `reqwest` client, hence one keep-alive connection, per simulated
//!    client ([`client`]). Latencies go into HdrHistograms; with `--pid`, [`proc`] reads
//!    the server's CPU time and peak RSS from `/proc`.
//! 3. Each workload's [`report::Row`]s are printed as a table as soon as it finishes, and
//!    appended as Markdown (`--markdown`) and JSON lines (`--json`). `--compare` turns the
//!    JSON lines of two runs into one Markdown table with ratios (`scripts/bench.sh`).
//!
//! Features the server lacks are skipped with the answer that showed it (see
//! [`workloads`]). `limit` and `baseline` need no server: they measure, in this process,
//! the storage engine alone and a bare axum handler, the ceilings that `load`, `write`
//! and `read` are quoted against.
//!
//! Every run is bounded: loads by their document counts, timed cases by `--duration`,
//! every request by [`client::REQUEST_TIMEOUT`]; and only loopback URLs are accepted.

pub mod cli;
pub mod client;
pub mod data;
pub mod error;
pub mod measure;
pub mod proc;
pub mod report;
pub mod workloads;

pub use cli::{Options, Workload};
pub use error::{Error, Result};
pub use report::{Row, Status};

/// Runs the workloads of `opts` in order. After each one its rows are printed to stdout
/// and appended to the `--markdown` and `--json` files. Returns every row; fails only if
/// the server cannot be reached or an output file cannot be written.
pub async fn run(opts: &Options) -> Result<Vec<Row>> {
    let ctx = workloads::Ctx::new(opts)?;
    if opts.workloads.iter().any(|w| workloads::uses_server(*w)) {
        ctx.connect()
            .await
            .map_err(|e| Error::Invalid(format!("cannot use the server at {}: {e}", opts.url)))?;
    }
    // A server just started (or still busy from an earlier run) would slow the first case.
    ctx.settle().await;
    let mut all = Vec::new();
    for &workload in &opts.workloads {
        let mut rows = workloads::run(&ctx, workload).await;
        for row in &mut rows {
            row.label.clone_from(&opts.label);
        }
        print!("{}", report::text_table(&opts.label, workload.name(), &rows));
        println!();
        if let Some(path) = &opts.markdown {
            report::append(path, &report::markdown_table(&opts.label, workload.name(), &rows))?;
        }
        if let Some(path) = &opts.json {
            report::append(path, &report::json_lines(&rows))?;
        }
        all.extend(rows);
    }
    Ok(all)
}

/// `--compare`: the Markdown comparison of one or two JSON lines files, printed and
/// appended to `--markdown` if given.
pub fn compare(opts: &Options) -> Result {
    let a = report::read_json_lines(&opts.compare[0])?;
    let b = match opts.compare.get(1) {
        Some(path) => report::read_json_lines(path)?,
        None => Vec::new(),
    };
    let table = report::compare(&a, &b);
    print!("{table}");
    if let Some(path) = &opts.markdown {
        report::append(path, &table)?;
    }
    Ok(())
}
