//! Smoke test of the bench tool: every workload at `--scale smoke` against Bunko's real
//! router, served in this process on 127.0.0.1:0 over a temporary fjall store (wired as
//! `crates/bunko/src/main.rs` does; the `bunko` binary of another package is not visible
//! to these tests). Each workload must either measure something (nonzero throughput, no
//! errors) or be skipped with a reason; those Bunko already has must be measured. No
//! timing is asserted.

use std::sync::Arc;

use clap::Parser;

use bunko_bench::{Options, Row, Status, Workload};
use bunko_engine::{Config, Engine};
use bunko_http::{AppState, HttpConfig};
use bunko_storage::{Fjall, Store};

type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// A Bunko server on a free loopback port; stops with the runtime.
struct Bunko {
    url: String,
    store: Arc<Fjall>,
    /// The store's directory, for `--data-dir`.
    data: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

async fn start_bunko() -> Result<Bunko> {
    let dir = tempfile::Builder::new().prefix("bunko-bench-smoke-").tempdir()?;
    let data = dir.path().join("data");
    let store = Arc::new(Fjall::open(&data)?);
    let config =
        Config { admins: vec![("admin".to_string(), "secret".to_string())], ..Config::default() };
    let engine = Arc::new(Engine::open(store.clone(), config)?);
    engine.create_db(
        &bunko_engine::security::UserCtx::system(),
        bunko_engine::users::USERS_DB,
        false,
    )?;
    let state = AppState::new(engine, HttpConfig::default())?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, bunko_http::router(state)).await });
    Ok(Bunko { url, store, data, _dir: dir })
}

fn options(bunko: &Bunko, extra: &[&str]) -> Options {
    let pid = std::process::id().to_string();
    let base = [
        "bunko-bench",
        "--url",
        &bunko.url,
        "--user",
        "admin",
        "--password",
        "secret",
        "--scale",
        "smoke",
        "--duration",
        "300ms",
        "--label",
        "smoke",
        "--pid",
        &pid,
    ];
    Options::parse_from(base.iter().chain(extra))
}

/// Measured with a nonzero throughput (or size) and no errors, or skipped with a reason.
fn check(row: &Row) {
    match row.status {
        Status::Ok if row.unit == "MB" => {
            assert!(row.throughput > 0.0, "{}/{}: zero size", row.workload, row.case);
        }
        Status::Ok => {
            assert!(row.throughput > 0.0, "{}/{}: zero throughput", row.workload, row.case);
            assert_eq!(row.errors, 0, "{}/{}: errors: {:?}", row.workload, row.case, row.note);
            assert!(row.p99_ms.is_some(), "{}/{}: no latency", row.workload, row.case);
            assert!(row.server_peak_rss_mb.is_some(), "{}/{}: no RSS", row.workload, row.case);
        }
        Status::Skipped => {
            assert!(row.reason.as_deref().is_some_and(|r| !r.is_empty()), "{row:?}");
        }
        Status::Failed => panic!("{}/{} failed: {:?}", row.workload, row.case, row.reason),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_workload_measures_or_says_why_not() -> Result {
    let bunko = start_bunko().await?;
    let out = tempfile::tempdir()?;
    let json = out.path().join("smoke.jsonl");
    let markdown = out.path().join("smoke.md");
    let data = bunko.data.to_str().ok_or("path")?.to_string();
    let files = [
        "--json",
        json.to_str().ok_or("path")?,
        "--markdown",
        markdown.to_str().ok_or("path")?,
        "--data-dir",
        &data,
    ];
    let rows = bunko_bench::run(&options(&bunko, &files)).await?;

    for row in &rows {
        check(row);
    }
    for workload in Workload::DEFAULT {
        assert!(rows.iter().any(|r| r.workload == workload.name()), "{workload} has no row");
    }
    assert!(!rows.iter().any(|r| r.workload == "scale"), "scale runs only when named");
    // What Bunko has today must be measured, not skipped.
    for workload in ["load", "write", "read", "txn", "limit", "baseline"] {
        let measured = rows.iter().filter(|r| r.workload == workload);
        assert!(measured.clone().all(|r| r.status == Status::Ok), "{workload} was not measured");
    }
    // Four load cases and the first one's disk size, as loaded and after compaction.
    assert_eq!(rows.iter().filter(|r| r.workload == "load").count(), 6);
    let disk: Vec<&Row> = rows.iter().filter(|r| r.unit == "MB").collect();
    assert_eq!(disk.len(), 2);
    assert!(disk.iter().all(|r| r.note.as_deref().is_some_and(|n| n.contains("data directory"))));

    // The run cleaned up after itself.
    let names: Vec<String> = reqwest::Client::new()
        .get(format!("{}/_all_dbs", bunko.url))
        .basic_auth("admin", Some("secret"))
        .send()
        .await?
        .json()
        .await?;
    assert!(names.iter().all(|name| !name.starts_with("bench-")), "left behind: {names:?}");

    // The files hold the same rows, and --compare reads them back.
    let lines = std::fs::read_to_string(&json)?;
    assert_eq!(lines.lines().count(), rows.len());
    assert!(std::fs::read_to_string(&markdown)?.contains("### load (smoke)"));
    let compare = options(&bunko, &["--compare", json.to_str().ok_or("path")?]);
    bunko_bench::compare(&compare)?;
    bunko.store.close()?;
    Ok(())
}

/// `scale` grows one database through its steps and measures every case at each, with
/// the disk size and the server's RSS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_measures_every_step() -> Result {
    let bunko = start_bunko().await?;
    let data = bunko.data.to_str().ok_or("path")?.to_string();
    let extra = ["--workloads", "scale", "--scale-steps", "200,500", "--data-dir", &data];
    let rows = bunko_bench::run(&options(&bunko, &extra)).await?;
    for row in &rows {
        check(row);
        assert_eq!(row.status, Status::Ok, "{row:?}");
    }
    for step in ["200", "500"] {
        let cases: Vec<&Row> =
            rows.iter().filter(|r| r.case.starts_with(&format!("{step} docs: "))).collect();
        assert_eq!(cases.len(), 5, "{step}: {cases:?}");
        let disk = cases.iter().find(|r| r.unit == "MB").ok_or("no disk row")?;
        assert!(disk.note.as_deref().is_some_and(|n| n.contains("RSS")), "{disk:?}");
    }
    let load = rows.iter().find(|r| r.case == "500 docs: load, 4 clients").ok_or("no load")?;
    assert_eq!(load.items, 300, "the second step loads only the new documents");
    bunko.store.close()?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn basic_auth_works_too() -> Result {
    let bunko = start_bunko().await?;
    let opts = options(&bunko, &["--auth", "basic", "--workloads", "write,read"]);
    let rows = bunko_bench::run(&opts).await?;
    assert_eq!(rows.len(), 2);
    for row in &rows {
        assert_eq!(row.status, Status::Ok, "{row:?}");
        check(row);
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disk_size_without_data_dir_is_sizes_file() -> Result {
    let bunko = start_bunko().await?;
    let rows = bunko_bench::run(&options(&bunko, &["--workloads", "load"])).await?;
    let disk: Vec<&Row> = rows.iter().filter(|r| r.unit == "MB").collect();
    assert_eq!(disk.len(), 2, "{rows:?}");
    for row in disk {
        check(row);
        assert!(row.note.as_deref().is_some_and(|n| n.contains("sizes.file")), "{row:?}");
    }
    Ok(())
}

#[tokio::test]
async fn remote_urls_are_refused() {
    let opts = Options::parse_from(["bunko-bench", "--url", "http://192.168.1.1:5984"]);
    let err = bunko_bench::run(&opts).await.expect_err("must refuse a non-loopback URL");
    assert!(err.to_string().contains("loopback"), "{err}");
}
