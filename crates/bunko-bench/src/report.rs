//! Results and their three renderings: a plain-text table per workload (stdout), a
//! Markdown table per workload (`--markdown`), and one JSON object per [`Row`]
//! (`--json`), from which [`compare`] builds the Bunko/CouchDB table with ratios.

use std::fmt::Write;
use std::io::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::measure::Sample;
use crate::proc::Usage;

/// Whether a case was measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    /// The server lacks the feature; `reason` says which request told.
    Skipped,
    /// Something went wrong that is not a missing feature; `reason` says what.
    Failed,
}

/// One measured (or skipped) case of a workload: one line of JSON, one table row.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Row {
    pub label: String,
    pub workload: String,
    pub case: String,
    pub status: Status,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// What `throughput` counts per second: `docs/s`, `req/s` or `rows/s`; or `MB` for a
    /// disk size (see [`Row::size`]), where `throughput` holds the size.
    #[serde(default)]
    pub unit: String,
    #[serde(default)]
    pub throughput: f64,
    #[serde(default)]
    pub items: u64,
    #[serde(default)]
    pub requests: u64,
    #[serde(default)]
    pub errors: u64,
    #[serde(default)]
    pub secs: f64,
    #[serde(default)]
    pub p50_ms: Option<f64>,
    #[serde(default)]
    pub p95_ms: Option<f64>,
    #[serde(default)]
    pub p99_ms: Option<f64>,
    #[serde(default)]
    pub max_ms: Option<f64>,
    #[serde(default)]
    pub server_peak_rss_mb: Option<f64>,
    #[serde(default)]
    pub server_cpu_s: Option<f64>,
    #[serde(default)]
    pub server_cores: Option<f64>,
    /// CPU seconds the load generator (bunko-bench's client threads) spent in the case.
    #[serde(default)]
    pub client_cpu_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Row {
    fn new(workload: &str, case: &str, status: Status) -> Row {
        Row {
            label: String::new(),
            workload: workload.to_string(),
            case: case.to_string(),
            status,
            reason: None,
            unit: String::new(),
            throughput: 0.0,
            items: 0,
            requests: 0,
            errors: 0,
            secs: 0.0,
            p50_ms: None,
            p95_ms: None,
            p99_ms: None,
            max_ms: None,
            server_peak_rss_mb: None,
            server_cpu_s: None,
            server_cores: None,
            client_cpu_s: None,
            note: None,
        }
    }

    /// A measured case. Errors during the run are kept in the note.
    pub fn measured(
        workload: &str,
        case: &str,
        unit: &str,
        sample: &Sample,
        usage: Option<Usage>,
    ) -> Row {
        let mut row = Row::new(workload, case, Status::Ok);
        row.unit = unit.to_string();
        row.throughput = sample.throughput();
        row.items = sample.items;
        row.requests = sample.requests;
        row.errors = sample.errors;
        row.secs = sample.elapsed.as_secs_f64();
        row.p50_ms = sample.latency_ms(0.50);
        row.p95_ms = sample.latency_ms(0.95);
        row.p99_ms = sample.latency_ms(0.99);
        row.max_ms = sample.latency_ms(1.0);
        if let Some(usage) = usage {
            row.server_peak_rss_mb = Some(usage.peak_rss_mb);
            row.server_cpu_s = Some(usage.cpu_secs);
            row.server_cores = Some(usage.cores);
            row.client_cpu_s = usage.client_cpu_secs;
            if !usage.peak_reset {
                row = row.note("peak RSS since server start (VmHWM could not be reset)");
            }
        }
        if let Some(error) = &sample.first_error {
            row = row.note(&format!("{} errors, first: {error}", sample.errors));
        }
        row
    }

    /// A size rather than a rate: `mb` megabytes (10^6 bytes) for `items` documents.
    pub fn size(workload: &str, case: &str, mb: f64, items: u64) -> Row {
        let mut row = Row::new(workload, case, Status::Ok);
        row.unit = "MB".to_string();
        row.throughput = mb;
        row.items = items;
        row
    }

    pub fn skipped(workload: &str, case: &str, reason: &str) -> Row {
        Row { reason: Some(reason.to_string()), ..Row::new(workload, case, Status::Skipped) }
    }

    pub fn failed(workload: &str, case: &str, reason: &str) -> Row {
        Row { reason: Some(reason.to_string()), ..Row::new(workload, case, Status::Failed) }
    }

    /// The server's CPU time per 1,000 items (documents, requests or rows: what the
    /// throughput counts), in milliseconds: what a case costs, not only how fast it runs.
    pub fn cpu_ms_per_1k(&self) -> Option<f64> {
        per_1k(self.server_cpu_s?, self.items)
    }

    /// The same for the load generator's CPU time.
    pub fn client_cpu_ms_per_1k(&self) -> Option<f64> {
        per_1k(self.client_cpu_s?, self.items)
    }

    /// Adds a remark (joined with `; ` to earlier ones).
    pub fn note(mut self, note: &str) -> Row {
        self.note = Some(match self.note.take() {
            Some(earlier) => format!("{earlier}; {note}"),
            None => note.to_string(),
        });
        self
    }
}

/// Milliseconds per 1,000 of `items` for `cpu` seconds.
fn per_1k(cpu: f64, items: u64) -> Option<f64> {
    (items > 0).then(|| cpu * 1e6 / items as f64)
}

fn ms(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_string(), |v| format!("{v:.2}"))
}

fn num(value: Option<f64>, decimals: usize) -> String {
    value.map_or_else(|| "-".to_string(), |v| format!("{v:.decimals$}"))
}

/// The cells of a measured row, after its case.
fn cells(row: &Row) -> Vec<String> {
    vec![
        format!("{:.0} {}", row.throughput, row.unit),
        ms(row.p50_ms),
        ms(row.p95_ms),
        ms(row.p99_ms),
        row.errors.to_string(),
        row.requests.to_string(),
        format!("{:.2}", row.secs),
        num(row.server_peak_rss_mb, 0),
        match (row.server_cpu_s, row.server_cores) {
            (Some(cpu), Some(cores)) => format!("{cpu:.1} ({cores:.2})"),
            _ => "-".to_string(),
        },
        num(row.cpu_ms_per_1k(), 1),
        num(row.client_cpu_ms_per_1k(), 1),
    ]
}

const HEADERS: [&str; 12] = [
    "case",
    "throughput",
    "p50 ms",
    "p95 ms",
    "p99 ms",
    "errors",
    "requests",
    "secs",
    "peak RSS MB",
    "CPU s (cores)",
    "CPU ms/1k",
    "client CPU ms/1k",
];

/// A plain-text table of one workload's rows; skipped and failed cases follow as lines.
pub fn text_table(label: &str, workload: &str, rows: &[Row]) -> String {
    let mut out = format!("== {workload} ({label}) ==\n");
    let table: Vec<Vec<String>> = rows
        .iter()
        .filter(|row| row.status == Status::Ok)
        .map(|row| std::iter::once(row.case.clone()).chain(cells(row)).collect())
        .collect();
    if !table.is_empty() {
        let header: Vec<String> = HEADERS.iter().map(|h| h.to_string()).collect();
        let widths: Vec<usize> = (0..HEADERS.len())
            .map(|c| table.iter().chain([&header]).map(|r| r[c].len()).max().unwrap_or(0))
            .collect();
        for line in std::iter::once(&header).chain(&table) {
            for (c, cell) in line.iter().enumerate() {
                if c == 0 {
                    let _ = write!(out, "{cell:<w$}", w = widths[c]);
                } else {
                    let _ = write!(out, "  {cell:>w$}", w = widths[c]);
                }
            }
            out.push('\n');
        }
    }
    for row in rows {
        match row.status {
            Status::Ok => {
                if let Some(note) = &row.note {
                    let _ = writeln!(out, "  note ({}): {note}", row.case);
                }
            }
            Status::Skipped | Status::Failed => {
                let what = if row.status == Status::Skipped { "skipped" } else { "FAILED" };
                let reason = row.reason.as_deref().unwrap_or("");
                let _ = writeln!(out, "  {what}: {}: {reason}", row.case);
            }
        }
    }
    out
}

/// A Markdown section with one workload's rows.
pub fn markdown_table(label: &str, workload: &str, rows: &[Row]) -> String {
    let mut out = format!("### {workload} ({label})\n\n| {} | note |\n", HEADERS.join(" | "));
    let _ = writeln!(out, "|{}", "---|".repeat(HEADERS.len() + 1));
    for row in rows {
        let (cells, note) = match row.status {
            Status::Ok => (cells(row), row.note.clone().unwrap_or_default()),
            status => {
                let what = if status == Status::Skipped { "skipped" } else { "failed" };
                let mut cells = vec![what.to_string()];
                cells.resize(HEADERS.len() - 1, String::new());
                (cells, row.reason.clone().unwrap_or_default())
            }
        };
        let _ = writeln!(out, "| {} | {} | {} |", row.case, cells.join(" | "), escape(&note));
    }
    out.push('\n');
    out
}

fn escape(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

/// One JSON object per row, each on its own line.
pub fn json_lines(rows: &[Row]) -> String {
    rows.iter().filter_map(|row| serde_json::to_string(row).ok()).map(|line| line + "\n").collect()
}

pub fn read_json_lines(path: &Path) -> Result<Vec<Row>> {
    let text = std::fs::read_to_string(path)?;
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            serde_json::from_str(line)
                .map_err(|e| Error::Invalid(format!("{}: bad result line: {e}", path.display())))
        })
        .collect()
}

pub fn append(path: &Path, text: &str) -> Result {
    let mut file = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
    file.write_all(text.as_bytes())?;
    Ok(())
}

/// Pairs of (workload, case) whose throughput is quoted as a fraction of another's: what
/// Bunko reaches over HTTP against what its storage engine or a bare axum server allows.
pub const CEILINGS: [(&str, &str, &str, &str); 4] = [
    ("load", "plain, 1 client", "limit", "1 writer, 1000 docs/commit"),
    ("load", "plain, 4 clients", "limit", "4 writers, 1000 docs/commit"),
    ("write", "64 clients", "limit", "64 writers, 1 doc/commit"),
    ("read", "point GET, 32 connections", "baseline", "point GET, 32 connections"),
];

/// The Markdown comparison of two runs (`a` is Bunko, `b` e.g. CouchDB): throughput and
/// p99 of every case of `a` beside `b`'s with the ratio a/b, then `a`'s ceilings. With `b`
/// empty, `a`'s figures alone.
pub fn compare(a: &[Row], b: &[Row]) -> String {
    let label = |rows: &[Row], default: &str| {
        rows.first().map_or_else(|| default.to_string(), |row| row.label.clone())
    };
    let (la, lb) = (label(a, "a"), label(b, "b"));
    let find = |rows: &[Row], workload: &str, case: &str| {
        rows.iter().find(|row| row.workload == workload && row.case == case).cloned()
    };
    let value = |row: &Option<Row>| match row {
        Some(row) if row.status == Status::Ok => format!("{:.0}", row.throughput),
        Some(row) if row.status == Status::Skipped => "skipped".to_string(),
        Some(_) => "failed".to_string(),
        None => "-".to_string(),
    };
    let ok = |row: &Option<Row>| row.clone().filter(|row| row.status == Status::Ok);
    let ratio = |x: Option<f64>, y: Option<f64>| match (x, y) {
        (Some(x), Some(y)) if y > 0.0 => format!("{:.2}", x / y),
        _ => "-".to_string(),
    };
    let mut out = String::new();
    if b.is_empty() {
        let _ = writeln!(
            out,
            "| workload | case | unit | {la} | p99 ms | CPU ms/1k |\n|---|---|---|---|---|---|"
        );
    } else {
        let _ = writeln!(
            out,
            "| workload | case | unit | {la} | {lb} | {la}/{lb} | p99 ms {la} | p99 ms {lb} \
             | CPU ms/1k {la} | CPU ms/1k {lb} |\n|---|---|---|---|---|---|---|---|---|---|"
        );
    }
    for row in a {
        let ra = Some(row.clone());
        let rb = find(b, &row.workload, &row.case);
        let through = |r: &Option<Row>| ok(r).map(|r| r.throughput);
        let p99 = |r: &Option<Row>| ok(r).and_then(|r| r.p99_ms);
        let cpu = |r: &Option<Row>| num(ok(r).and_then(|r| r.cpu_ms_per_1k()), 1);
        let (w, c, u) = (&row.workload, &row.case, &row.unit);
        let _ = if b.is_empty() {
            let (v, p, k) = (value(&ra), ms(p99(&ra)), cpu(&ra));
            writeln!(out, "| {w} | {c} | {u} | {v} | {p} | {k} |")
        } else {
            writeln!(
                out,
                "| {w} | {c} | {u} | {} | {} | {} | {} | {} | {} | {} |",
                value(&ra),
                value(&rb),
                ratio(through(&ra), through(&rb)),
                ms(p99(&ra)),
                ms(p99(&rb)),
                cpu(&ra),
                cpu(&rb),
            )
        };
    }
    out.push_str(&disk_notes(a.iter().chain(b)));
    let _ = writeln!(
        out,
        "\n{la} against its ceilings (same machine, same run):\n\n\
         | measured | ceiling | fraction |\n|---|---|---|"
    );
    for (w, c, cw, cc) in CEILINGS {
        let (x, y) = (ok(&find(a, w, c)), ok(&find(a, cw, cc)));
        let _ = writeln!(
            out,
            "| {w}: {c} ({}) | {cw}: {cc} ({}) | {} |",
            value(&x),
            value(&y),
            ratio(x.as_ref().map(|r| r.throughput), y.as_ref().map(|r| r.throughput)),
        );
    }
    out
}

/// For the rows that are disk sizes (unit `MB`): that smaller is better, and how each
/// server's size was measured (the rows' notes). Empty if there are none.
fn disk_notes<'a>(rows: impl Iterator<Item = &'a Row>) -> String {
    let mut out = String::new();
    for row in rows.filter(|row| row.unit == "MB" && row.status == Status::Ok) {
        if out.is_empty() {
            out.push_str(
                "\nDisk sizes (unit MB, 10^6 bytes) are smaller-is-better; measured as:\n\n",
            );
        }
        let note = row.note.as_deref().unwrap_or("");
        let _ = writeln!(out, "- {} {}: {}", row.label, row.case, escape(note));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn row(workload: &str, case: &str, throughput: f64, label: &str) -> Row {
        let mut row = Row::measured(workload, case, "req/s", &Sample::single(1, ms1()), None);
        row.throughput = throughput;
        row.label = label.to_string();
        row
    }

    fn ms1() -> Duration {
        Duration::from_millis(1)
    }

    #[test]
    fn rows_round_trip_through_json_lines() {
        let rows = vec![row("read", "x", 10.0, "bunko"), Row::skipped("find", "y", "405")];
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.jsonl");
        append(&path, &json_lines(&rows)).unwrap();
        let back = read_json_lines(&path).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(back[0].throughput, 10.0);
        assert_eq!(back[1].status, Status::Skipped);
        assert_eq!(back[1].reason.as_deref(), Some("405"));
    }

    #[test]
    fn comparison_shows_ratios_and_ceilings() {
        let a = vec![
            row("read", "point GET, 32 connections", 300.0, "bunko"),
            row("baseline", "point GET, 32 connections", 600.0, "bunko"),
        ];
        let b = vec![row("read", "point GET, 32 connections", 100.0, "couchdb")];
        let table = compare(&a, &b);
        assert!(table.contains("| read | point GET, 32 connections | req/s | 300 | 100 | 3.00 |"));
        assert!(table.contains("| CPU ms/1k bunko | CPU ms/1k couchdb |"), "{table}");
        assert!(table.contains("| 0.50 |"), "{table}");
    }

    #[test]
    fn comparison_explains_disk_sizes() {
        let mut a = vec![row("read", "x", 1.0, "bunko")];
        a.push(
            Row { label: "bunko".into(), ..Row::size("load", "disk after load, plain", 90.0, 5) }
                .note("growth of the data directory"),
        );
        let b = vec![Row {
            label: "couchdb".into(),
            ..Row::size("load", "disk after load, plain", 180.0, 5)
        }];
        let table = compare(&a, &b);
        assert!(
            table.contains("| load | disk after load, plain | MB | 90 | 180 | 0.50 |"),
            "{table}"
        );
        assert!(
            table.contains("- bunko disk after load, plain: growth of the data directory"),
            "{table}"
        );
        assert!(!compare(&a[..1], &[]).contains("smaller-is-better"));
    }

    #[test]
    fn cpu_per_thousand_items_is_server_cpu_over_items() {
        let mut a = row("write", "64 clients", 1000.0, "bunko");
        a.items = 20_000;
        a.server_cpu_s = Some(3.0);
        assert_eq!(a.cpu_ms_per_1k(), Some(150.0)); // 3 s over 20k docs: 150 ms per 1000
        assert!(markdown_table("bunko", "write", &[a.clone()]).contains("| 150.0 |"));
        assert!(compare(&[a], &[]).contains("| 150.0 |"));
        let sized = Row::size("load", "disk", 10.0, 5);
        assert_eq!(sized.cpu_ms_per_1k(), None);
    }

    #[test]
    fn client_cpu_is_its_own_column() {
        let mut a = row("read", "point GET, 32 connections", 1000.0, "bunko");
        a.items = 10_000;
        a.server_cpu_s = Some(1.0);
        a.client_cpu_s = Some(2.5);
        assert_eq!(a.client_cpu_ms_per_1k(), Some(250.0));
        let table = markdown_table("bunko", "read", &[a]);
        assert!(table.contains("| CPU ms/1k | client CPU ms/1k | note |"), "{table}");
        assert!(table.contains("| 100.0 | 250.0 |"), "{table}");
    }

    #[test]
    fn tables_list_skipped_cases_with_their_reason() {
        let rows = vec![row("read", "x", 10.0, "l"), Row::skipped("read", "y", "no _find")];
        let text = text_table("l", "read", &rows);
        assert!(text.contains("skipped: y: no _find"));
        let md = markdown_table("l", "read", &rows);
        assert!(md.contains("| y | skipped |"));
    }
}
