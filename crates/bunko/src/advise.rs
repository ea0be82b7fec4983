//! `bunko advise [--url URL] DB`: asks a running server for `GET /{db}/_advise` and prints
//! the findings as a readable report. Credentials come from the URL
//! (`http://user:pass@host:port`) or, failing that, from `BUNKO_ADMIN=user:password`.
//! `bunko advise --data DIR DB` opens a stopped server's store instead (the store is locked
//! while a server runs; the query log is then empty, so the query rules have nothing to see).

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::{Args, Parser};
use percent_encoding::{NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};
use serde_json::Value;

/// Text width of the report.
const WIDTH: usize = 92;

#[derive(Args, Debug)]
pub struct AdviseArgs {
    /// The database to check.
    pub db: String,
    /// The server (credentials may be in it: http://admin:secret@127.0.0.1:5984).
    #[arg(long, default_value = "http://127.0.0.1:5984")]
    pub url: String,
    /// Documents to sample (the server's default is 1000).
    #[arg(long)]
    pub sample_size: Option<u64>,
    /// Open the data directory of a stopped server instead of asking a running one.
    #[arg(long, conflicts_with = "url")]
    pub data: Option<PathBuf>,
    /// With --data: the server's configuration file (its size limits are the thresholds').
    #[arg(long, requires = "data")]
    pub config: Option<PathBuf>,
    /// Print the server's JSON answer instead of the report.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: AdviseArgs) -> anyhow::Result<()> {
    let advice = match &args.data {
        Some(dir) => open_and_advise(&args, dir)?,
        None => fetch(&args)?,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&advice)?);
    } else {
        print!("{}", report(&advice));
    }
    Ok(())
}

fn fetch(args: &AdviseArgs) -> anyhow::Result<Value> {
    let mut url = reqwest::Url::parse(&args.url).context("--url is not a URL")?;
    let user = percent_decode_str(url.username()).decode_utf8_lossy().into_owned();
    let pass = url.password().map(|p| percent_decode_str(p).decode_utf8_lossy().into_owned());
    let _ = url.set_username("");
    let _ = url.set_password(None);
    let credentials = match (user.is_empty(), pass) {
        (false, pass) => Some((user, pass)),
        (true, _) => std::env::var("BUNKO_ADMIN")
            .ok()
            .and_then(|a| a.split_once(':').map(|(u, p)| (u.to_string(), Some(p.to_string())))),
    };
    let db = utf8_percent_encode(&args.db, NON_ALPHANUMERIC).to_string();
    let mut target = url.join(&format!("{db}/_advise")).context("cannot build the URL")?;
    if let Some(n) = args.sample_size {
        target.query_pairs_mut().append_pair("sample_size", &n.to_string());
    }
    let client = reqwest::blocking::Client::builder()
        .timeout(std::time::Duration::from_secs(600))
        .build()?;
    let mut request = client.get(target.clone()).header("Accept", "application/json");
    if let Some((user, pass)) = credentials {
        request = request.basic_auth(user, pass);
    }
    let response = request.send().with_context(|| format!("cannot reach {}", url))?;
    let status = response.status();
    let body: Value = response.json().context("the server's answer is not JSON")?;
    if !status.is_success() {
        let field = |k: &str| body[k].as_str().unwrap_or("").to_string();
        bail!("{} {}: {}", status.as_u16(), field("error"), field("reason"));
    }
    Ok(body)
}

/// `bunko serve`'s options, to read the store's settings as the server does.
#[derive(Parser)]
struct Serve {
    #[command(flatten)]
    args: crate::config::ServeArgs,
}

/// Opens the store in `dir` (refused while a server holds it) and advises on one database.
fn open_and_advise(args: &AdviseArgs, dir: &std::path::Path) -> anyhow::Result<Value> {
    let mut argv = vec!["serve".into(), "--data".into(), dir.as_os_str().to_owned()];
    if let Some(config) = &args.config {
        argv.extend(["--config".into(), config.as_os_str().to_owned()]);
    }
    let settings = crate::config::Settings::load(&Serve::try_parse_from(argv)?.args)?;
    anyhow::ensure!(dir.is_dir(), "no data directory {}", dir.display());
    let store = bunko_storage::Fjall::open_with(dir, settings.storage)
        .with_context(|| format!("cannot open the store in {}", dir.display()))?;
    let store: Arc<dyn bunko_storage::Store> = Arc::new(store);
    let engine = bunko_engine::Engine::open(store.clone(), settings.engine)?;
    let mut options = bunko_engine::advisor::Options::default();
    if let Some(n) = args.sample_size {
        options.sample_size = n as usize;
    }
    let advice = engine.db(&args.db)?.advise(&options);
    drop(engine);
    store.close()?;
    Ok(serde_json::to_value(advice?)?)
}

/// The report for one `_advise` answer.
pub fn report(advice: &Value) -> String {
    let mut out = String::new();
    let s = &advice["sample"];
    out += &format!("Bunko advisor: database \"{}\"\n", advice["db_name"].as_str().unwrap_or(""));
    out += &format!(
        "Sampled {} of {} documents ({} seen, {}) in {} ms.\n",
        s["size"],
        s["doc_count"],
        s["scanned"],
        if s["complete"] == true { "complete pass" } else { "time budget reached" },
        s["elapsed_ms"]
    );
    let o = &advice["observed"];
    out += &format!(
        "Query log: {} queries in {} shapes, {} lookups by id.\n\n",
        o["queries"], o["query_shapes"], o["lookups"]
    );
    let findings = advice["findings"].as_array().cloned().unwrap_or_default();
    if findings.is_empty() {
        let checked: Vec<&str> = advice["rules_checked"]
            .as_array()
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        out += "No findings: the data follows every rule checked.\n";
        out += &wrap(&format!("Rules checked: {}.", checked.join(", ")), "");
        return out;
    }
    for (n, f) in findings.iter().enumerate() {
        out += &finding(n + 1, f);
    }
    out
}

fn finding(n: usize, f: &Value) -> String {
    let text = |v: &Value| v.as_str().unwrap_or("").to_string();
    let mut out = format!(
        "{n}. [{}] {}: {}\n",
        text(&f["severity"]).to_uppercase(),
        text(&f["rule"]),
        text(&f["summary"])
    );
    out += &format!("   Guide ({}):\n", text(&f["guide"]["source"]));
    out += &wrap(&text(&f["guide"]["rule"]), "     ");
    out += "   Evidence:\n";
    if let Value::Object(evidence) = &f["evidence"] {
        for (key, value) in evidence {
            out += &wrap(&format!("{key}: {value}"), "     ");
        }
    }
    out += "   Suggestion:\n";
    out += &wrap(&text(&f["suggestion"]), "     ");
    out + "\n"
}

/// `text` wrapped at [`WIDTH`] columns, each line after `indent`.
fn wrap(text: &str, indent: &str) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && indent.len() + line.len() + 1 + word.len() > WIDTH {
            out += &format!("{indent}{line}\n");
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        out += &format!("{indent}{line}\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn long_text_wraps_under_the_indent() {
        let text = "word ".repeat(40);
        let wrapped = wrap(&text, "  ");
        assert!(wrapped.lines().all(|l| l.len() <= WIDTH && l.starts_with("  word")));
        assert_eq!(wrapped.split_whitespace().count(), 40);
    }

    #[test]
    fn a_report_without_findings_lists_the_rules() {
        let advice = json!({"db_name": "people", "sample": {"size": 2, "doc_count": 2,
            "scanned": 2, "complete": true, "elapsed_ms": 1},
            "observed": {"queries": 0, "query_shapes": 0},
            "rules_checked": ["unbounded-array"], "findings": []});
        let text = report(&advice);
        assert!(text.contains("No findings") && text.contains("unbounded-array"), "{text}");
    }
}
