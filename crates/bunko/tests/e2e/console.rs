//! The web console at `/_utils/` (issue 19) in real headless Chromium, driven through
//! Debian's `chromedriver` with fantoccini (WebDriver): log in, create a partitioned
//! database, add documents, run a `_find` and see the explain picture name the index (after
//! creating the index the planner asked for with one click), edit a document and see its new
//! `_rev`, see and resolve a conflict, see the partition chart and the advisor's finding,
//! watch the live metrics, check a phone-sized viewport, log out and be refused; a member
//! who may not list databases opens hers by name.
//!
//! Screenshots of the main pages go to `target/console-screenshots/` (ignored by git).
//! When `chromium` or `chromedriver` is missing the test installs them with apt-get as root;
//! where it cannot (not root, no package source), it prints one `SKIP:` line and passes.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use fantoccini::elements::Element;
use fantoccini::error::CmdError;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;

use crate::harness::{ADMIN, ADMIN_PASSWORD, Server, enc};

/// How long an element or a text may take to appear: a slow debug build on a busy machine
/// (30 s was passed now and then while release builds ran beside the suite).
const WAIT: Duration = Duration::from_secs(90);
const CHROMIUM: &str = "/usr/bin/chromium";
/// The browser, its driver, and a Japanese font so that the screenshots show the seed data.
const INSTALL: &[&str] =
    &["install", "-y", "-qq", "chromium", "chromium-driver", "fonts-ipafont-gothic"];

type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;

/// `Ok(())` when chromium and chromedriver are there (installing them if needed and
/// allowed), else the reason to skip.
fn browser_installed() -> &'static std::result::Result<(), String> {
    static INSTALLED: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        let present = || Path::new(CHROMIUM).exists() && which("chromedriver").is_some();
        if present() {
            return Ok(());
        }
        let root =
            Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.trim_ascii() == b"0");
        if !root {
            return Err("SKIP: chromium/chromedriver are missing and we are not root".into());
        }
        for args in [&["update", "-qq"][..], INSTALL] {
            let status = Command::new("apt-get")
                .args(args)
                .env("DEBIAN_FRONTEND", "noninteractive")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .status();
            if !status.is_ok_and(|s| s.success()) {
                return Err(format!("SKIP: apt-get {} failed", args.join(" ")));
            }
        }
        if present() { Ok(()) } else { Err("SKIP: chromium is still missing after apt-get".into()) }
    })
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(program))
        .find(|p| p.exists())
}

/// A running chromedriver, killed on drop.
struct Driver {
    child: Child,
    port: u16,
}

impl Driver {
    fn start() -> Driver {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let child = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let deadline = Instant::now() + WAIT;
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not listen on {port}");
            std::thread::sleep(Duration::from_millis(50));
        }
        Driver { child, port }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn connect(port: u16, profile: &Path) -> Result<Client> {
    let args = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1280,800",
    ];
    let mut args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    args.push(format!("--user-data-dir={}", profile.display()));
    let caps = json!({"goog:chromeOptions": {"binary": CHROMIUM, "args": args}});
    let caps = caps.as_object().cloned().unwrap_or_default();
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    Ok(ClientBuilder::new(connector)
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{port}"))
        .await?)
}

/// Whether the browser gave up a command because the page navigated meanwhile (a login's
/// reload or a route change of the page racing the command; seen under load).
fn aborted_by_navigation(err: &CmdError) -> bool {
    matches!(err, CmdError::NotW3C(v) if v.as_str() == Some("aborted by navigation"))
}

/// Runs a command that changes nothing (a script that reads, a lookup, a `goto`) again
/// while the browser answers [`aborted_by_navigation`], at most ten times.
async fn again<T, F, Fut>(mut command: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = std::result::Result<T, CmdError>>,
{
    for _ in 0..10 {
        match command().await {
            Err(err) if aborted_by_navigation(&err) => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            done => return Ok(done?),
        }
    }
    Ok(command().await?)
}

/// One browser session against one server.
struct Ui {
    c: Client,
    base: String,
    shots: PathBuf,
}

impl Ui {
    /// Resizes the window so that the page itself gets `width` × `height` pixels.
    async fn viewport(&self, width: u32, height: u32) -> Result {
        self.c.set_window_size(width, height).await?;
        let inner = "return [window.innerWidth, window.innerHeight];";
        let got = again(|| self.c.execute(inner, vec![])).await?;
        let (w, h) = (got[0].as_u64().unwrap_or(0) as u32, got[1].as_u64().unwrap_or(0) as u32);
        let (w, h) = (2 * width - w.min(2 * width), 2 * height - h.min(2 * height));
        Ok(self.c.set_window_size(w, h).await?)
    }

    async fn open(&self, path: &str) -> Result {
        let url = format!("{}{path}", self.base);
        again(|| self.c.goto(&url)).await
    }

    async fn find(&self, css: &str) -> Result<Element> {
        again(|| self.c.wait().at_most(WAIT).for_element(Locator::Css(css))).await
    }

    /// Clicks; a click whose own navigation ended the command has been done.
    async fn click(&self, css: &str) -> Result {
        match self.find(css).await?.click().await {
            Err(err) if aborted_by_navigation(&err) => Ok(()),
            done => Ok(done?),
        }
    }

    async fn fill(&self, css: &str, text: &str) -> Result {
        let el = self.find(css).await?;
        el.clear().await?;
        Ok(el.send_keys(text).await?)
    }

    /// Replaces a textarea's text at once (typing a long JSON document key by key is slow)
    /// and fires `input` as typing would.
    async fn set_value(&self, css: &str, text: &str) -> Result {
        self.find(css).await?;
        let script = "const el = document.querySelector(arguments[0]); el.value = arguments[1];
                      el.dispatchEvent(new Event('input'));";
        again(|| self.c.execute(script, vec![json!(css), json!(text)])).await?;
        Ok(())
    }

    /// Waits until the element's text satisfies `ok`, and returns it.
    async fn text_until(&self, css: &str, ok: impl Fn(&str) -> bool) -> Result<String> {
        let deadline = Instant::now() + WAIT;
        loop {
            let text = match self.c.find(Locator::Css(css)).await {
                Ok(el) => el.text().await.unwrap_or_default(),
                Err(_) => String::new(),
            };
            if ok(&text) {
                return Ok(text);
            }
            if Instant::now() > deadline {
                return Err(format!("{css}: text {text:?} never matched").into());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn shot(&self, name: &str) -> Result {
        // Notices fade after a few seconds; the test is quicker than that.
        let clear = "document.getElementById('status')?.replaceChildren();";
        again(|| self.c.execute(clear, vec![])).await?;
        let png = self.c.screenshot().await?;
        std::fs::write(self.shots.join(format!("{name}.png")), png)?;
        Ok(())
    }

    /// `fetch(path)` from the page, with the page's cookies: the status.
    async fn fetch_status(&self, path: &str) -> Result<u64> {
        let script = "const done = arguments[1];
                      fetch(arguments[0], {credentials: 'same-origin'}).then(r => done(r.status));";
        let status = again(|| self.c.execute_async(script, vec![json!(path)])).await?;
        Ok(status.as_u64().unwrap_or(0))
    }
}

fn shots_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/console-screenshots");
    std::fs::create_dir_all(&dir).expect("create the screenshot folder");
    dir
}

/// Shops in three partitions, Tokyo holding most (the skew the chart and the advisor show).
fn seed_shops(s: &Server) {
    let wards = ["浅草", "渋谷", "新宿", "上野", "銀座"];
    let mut docs = Vec::new();
    for (city, n) in [("tokyo", 80), ("osaka", 15), ("nagoya", 10)] {
        for i in 0..n {
            docs.push(json!({"_id": format!("{city}:shop{i:03}"), "type": "shop", "city": city,
                             "name": format!("{}の本屋 {i}", wards[i % wards.len()]), "stock": i}));
        }
    }
    let (status, body) = s.post("/kura/_bulk_docs", &json!({"docs": docs}));
    assert_eq!(status, 201, "{body}");
}

#[test]
fn console_in_headless_chromium() -> Result {
    if let Err(skip) = browser_installed() {
        println!("{skip}");
        return Ok(());
    }
    let s = Server::start();
    let driver = Driver::start();
    let profile = tempfile::tempdir()?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let c = rt.block_on(connect(driver.port, profile.path()))?;
    let ui = Ui { c, base: s.base().to_string(), shots: shots_dir() };
    let outcome = scenario(&s, &ui, &rt);
    if outcome.is_err() {
        let _ = rt.block_on(ui.shot("failure"));
    }
    let _ = rt.block_on(ui.c.clone().close());
    outcome
}

fn scenario(s: &Server, ui: &Ui, rt: &tokio::runtime::Runtime) -> Result {
    rt.block_on(log_in_and_create(ui))?;
    seed_shops(s);
    rt.block_on(query_and_explain(ui))?;
    rt.block_on(explain_names(ui, &created_index(s)?))?;
    let rev = rt.block_on(edit_document(ui))?;
    assert_eq!(
        s.get_doc("kura", &enc("tokyo:t1"))["_rev"],
        json!(rev),
        "the page shows the stored rev"
    );
    // A replicated sibling of the same generation: a conflict the page must show.
    let sibling = json!({"_id": "tokyo:t1", "_rev": "2-ffffffffffffffffffffffffffffffff",
                         "type": "shop", "name": "ライバル", "city": "tokyo"});
    let (status, body) =
        s.post("/kura/_bulk_docs", &json!({"docs": [sibling], "new_edits": false}));
    assert_eq!(status, 201, "{body}");
    rt.block_on(resolve_conflict(ui))?;
    let doc = s.get(&format!("/kura/{}?conflicts=true", enc("tokyo:t1"))).1;
    assert!(doc.get("_conflicts").is_none(), "resolved: {doc}");
    let memo = tempfile::Builder::new().prefix("memo").suffix(".txt").tempfile()?;
    std::fs::write(memo.path(), "吾輩は猫である。名前はまだ無い。")?;
    rt.block_on(attachment_view_security(ui, memo.path()))?;
    let stored = s.get(&format!("/kura/{}", enc("tokyo:t1"))).1;
    let name = memo.path().file_name().and_then(|n| n.to_str()).unwrap_or_default();
    assert_eq!(stored["_attachments"][name]["length"], 48, "uploaded: {stored}");
    assert_eq!(s.get("/kura/_security").1["members"]["names"], json!(["hanako"]));
    rt.block_on(partitions_advisor_server(ui))?;
    rt.block_on(phone_and_keyboard(ui))?;
    let hanako = json!({"_id": "org.couchdb.user:hanako", "name": "hanako", "type": "user",
                        "roles": [], "password": "sakura"});
    assert_eq!(s.put("/_users/org.couchdb.user:hanako", &hanako).0, 201);
    rt.block_on(log_out(ui))?;
    rt.block_on(member_opens_by_name(ui))
}

async fn log_in_and_create(ui: &Ui) -> Result {
    ui.open("/_utils").await?;
    ui.viewport(1280, 800).await?;
    ui.find("#login-form").await?;
    assert_eq!(ui.fetch_status("/_utils/console.js").await?, 401, "the console needs a login");
    ui.shot("01-login").await?;
    ui.fill("#login-name", ADMIN).await?;
    ui.fill("#login-password", "wrong").await?;
    ui.click("#login-submit").await?;
    ui.text_until("#login-error", |t| t.contains("incorrect")).await?;
    ui.fill("#login-password", ADMIN_PASSWORD).await?;
    ui.click("#login-submit").await?;
    ui.find("#logout").await?;
    ui.text_until("#whoami", |t| t == ADMIN).await?;
    ui.fill("#db-name", "kura").await?;
    ui.click("#db-partitioned").await?;
    ui.click("#db-create").await?;
    ui.click("#new-doc").await?;
    ui.fill("#new-doc-id", "tokyo:t1").await?;
    ui.set_value("#doc-editor", r#"{"type": "shop", "name": "浅草文庫", "city": "tokyo"}"#).await?;
    ui.click("#doc-save").await?;
    ui.text_until("#doc-rev", |t| t.starts_with("1-")).await?;
    Ok(())
}

async fn query_and_explain(ui: &Ui) -> Result {
    ui.open("/_utils/#/db/kura/docs").await?;
    ui.text_until("#docs-table", |t| t.contains("nagoya:shop000")).await?;
    ui.shot("02-documents").await?;
    ui.open("/_utils/#/db/kura/query").await?;
    ui.set_value("#mango", r#"{"selector": {"city": "osaka"}}"#).await?;
    ui.click("#run-find").await?;
    ui.text_until(".explain-index", |t| t == "_all_docs").await?;
    ui.text_until("#results-table", |t| t.contains("osaka:shop014")).await?;
    // One click creates the index the planner wanted; the picture then names it.
    ui.click("#create-wanted-index").await?;
    ui.text_until(".explain-index", |t| !t.is_empty() && t != "_all_docs").await?;
    Ok(())
}

/// The name of the index on `city` the console created.
fn created_index(s: &Server) -> Result<String> {
    let (_, indexes) = s.get("/kura/_index");
    let found = indexes["indexes"]
        .as_array()
        .and_then(|all| all.iter().find(|i| i["def"]["fields"] == json!([{"city": "asc"}])))
        .and_then(|i| i["name"].as_str())
        .map(str::to_string);
    Ok(found.ok_or_else(|| format!("no index on city: {indexes}"))?)
}

async fn explain_names(ui: &Ui, index: &str) -> Result {
    ui.text_until(".explain-index", |t| t == index).await?;
    ui.text_until("#explain-stats", |t| t.contains("returned") && t.contains("15")).await?;
    let scroll = "document.getElementById('explain-plan').scrollIntoView();";
    again(|| ui.c.execute(scroll, vec![])).await?;
    ui.shot("03-query-explain").await?;
    Ok(())
}

/// Edits the document; returns the new `_rev` the page shows.
async fn edit_document(ui: &Ui) -> Result<String> {
    ui.open(&format!("/_utils/#/db/kura/doc/{}", enc("tokyo:t1"))).await?;
    let old = ui.text_until("#doc-rev", |t| t.starts_with("1-")).await?;
    ui.set_value("#doc-editor", "{\"type\": \"shop\",").await?;
    ui.text_until("#doc-editor-error", |t| t.contains("Invalid JSON")).await?;
    ui.set_value("#doc-editor", &format!(r#"{{"_id": "tokyo:t1", "_rev": "{old}", "type": "shop", "name": "浅草文庫", "city": "tokyo", "open": true}}"#)).await?;
    ui.click("#doc-save").await?;
    let rev = ui.text_until("#doc-rev", |t| t.starts_with("2-")).await?;
    Ok(rev)
}

async fn resolve_conflict(ui: &Ui) -> Result {
    again(|| ui.c.refresh()).await?;
    ui.text_until("#conflicts", |t| t.contains("1 conflict")).await?;
    ui.shot("04-conflict").await?;
    let winner = ui.text_until("#doc-rev", |t| t.starts_with("2-")).await?;
    ui.click(&format!(".keep-rev[data-rev=\"{winner}\"]")).await?;
    ui.text_until("#conflicts", |t| t.contains("No conflicts")).await?;
    Ok(())
}

/// Uploads `file` to the document and downloads it, defines a view and runs it grouped, runs
/// a search on the same design document, and
/// names a member in `_security`.
async fn attachment_view_security(ui: &Ui, file: &Path) -> Result {
    ui.find("#att-file").await?.send_keys(&file.display().to_string()).await?;
    ui.click("#att-upload").await?;
    let name = file.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    ui.text_until("#att-table", |t| t.contains(name) && t.contains("48")).await?;
    let href = ui.find("#att-table a").await?.attr("href").await?.unwrap_or_default();
    assert_eq!(ui.fetch_status(&href).await?, 200, "download {href}");

    ui.open("/_utils/#/db/kura/indexes").await?;
    ui.text_until("#index-table", |t| t.contains("city")).await?;
    let ddoc = r#"{"_id": "_design/shops", "options": {"partitioned": false}, "views":
        {"by_city": {"map": "function (doc) { if (doc.city) emit(doc.city, 1); }", "reduce": "_count"}},
        "indexes": {"cities": {"index": "function (doc) { if (doc.city) index('city', doc.city, {store: true}); }"}}}"#;
    ui.set_value("#ddoc-editor", ddoc).await?;
    ui.click("#ddoc-save").await?;
    ui.text_until("#ddoc-table", |t| t.contains("_design/shops") && t.contains("by_city")).await?;
    ui.open("/_utils/#/db/kura/query").await?;
    ui.find("#view-select").await?;
    ui.click("#view-group").await?;
    ui.click("#run-view").await?;
    ui.text_until("#query-view-out", |t| t.contains("\"tokyo\"") && t.contains("81")).await?;
    ui.fill("#search-query", "city:tokyo").await?;
    ui.click("#run-search").await?;
    ui.text_until("#search-out", |t| t.contains("81 matches") && t.contains("tokyo")).await?;

    ui.open("/_utils/#/db/kura/security").await?;
    ui.fill("#sec-members-names", "hanako").await?;
    ui.click("#sec-save").await?;
    ui.text_until("#status", |t| t.contains("Security saved")).await?;
    Ok(())
}

async fn partitions_advisor_server(ui: &Ui) -> Result {
    ui.open("/_utils/#/db/kura/partitions").await?;
    let chart = ui.text_until("#partition-chart", |t| t.contains("nagoya")).await?;
    let order: Vec<usize> =
        ["tokyo", "osaka", "nagoya"].iter().filter_map(|p| chart.find(p)).collect();
    assert!(order.len() == 3 && order.windows(2).all(|w| w[0] < w[1]), "largest first: {chart}");
    ui.text_until("#largest-share", |t| t == "76%").await?;
    ui.shot("05-partitions").await?;
    ui.open("/_utils/#/db/kura/advisor").await?;
    ui.text_until("#advisor", |t| t.contains("partition-hot-spot") && t.contains("tokyo")).await?;
    ui.shot("06-advisor").await?;
    ui.open("/_utils/#/server").await?;
    // The second sample gives a rate: the view updates itself.
    ui.text_until("#metric-rps", |t| t.parse::<f64>().is_ok()).await?;
    ui.text_until("#metric-storage", |t| t.ends_with("KB")).await?;
    ui.shot("07-server").await?;
    Ok(())
}

async fn phone_and_keyboard(ui: &Ui) -> Result {
    ui.viewport(390, 844).await?;
    for (page, name) in [("#/", "08-phone-databases"), ("#/db/kura/query", "09-phone-query")] {
        ui.open(&format!("/_utils/{page}")).await?;
        ui.find("nav.tabs, #db-table").await?;
        let overflow = ui
            .c
            .execute("return document.documentElement.scrollWidth - window.innerWidth;", vec![])
            .await?;
        assert!(
            overflow.as_i64().unwrap_or(99) <= 1,
            "{page} scrolls sideways on a phone: {overflow}"
        );
        ui.shot(name).await?;
    }
    ui.viewport(1280, 800).await?;
    // Keyboard: after a page change focus is on the content and Tab reaches its first
    // control; on a fresh load the first Tab reaches the skip link; Enter follows a link.
    ui.open("/_utils/#/").await?;
    ui.find("#db-table").await?;
    ui.c.active_element().await?.send_keys("\u{E004}").await?;
    let focused = again(|| ui.c.execute("return document.activeElement.id;", vec![])).await?;
    assert_eq!(focused, json!("db-name"));
    again(|| ui.c.refresh()).await?;
    ui.find("#db-table").await?;
    ui.c.active_element().await?.send_keys("\u{E004}").await?;
    let html = "return document.activeElement.outerHTML.slice(0, 80);";
    let focused = again(|| ui.c.execute(html, vec![])).await?;
    assert!(
        focused.as_str().unwrap_or_default().contains("class=\"skip\""),
        "Tab focused {focused}"
    );
    ui.c.execute("document.querySelector('a[href=\"#/server\"]').focus();", vec![]).await?;
    // Enter follows the link: a navigation that may end the command itself.
    match ui.c.active_element().await?.send_keys("\u{E007}").await {
        Err(err) if aborted_by_navigation(&err) => {}
        done => done?,
    }
    ui.find("#metrics").await?;
    Ok(())
}

async fn log_out(ui: &Ui) -> Result {
    ui.click("#logout").await?;
    ui.find("#login-form").await?;
    assert_eq!(ui.fetch_status("/_utils/console.js").await?, 401);
    assert_eq!(ui.fetch_status("/kura/_all_docs").await?, 401);
    ui.open("/_utils/#/db/kura/docs").await?;
    ui.find("#login-form").await?;
    let console = ui.c.find_all(Locator::Css("#docs-table, #logout")).await?;
    assert!(console.is_empty(), "after logging out the console is refused");
    Ok(())
}

/// A member who may not list databases opens hers by name, then logs out.
async fn member_opens_by_name(ui: &Ui) -> Result {
    ui.fill("#login-name", "hanako").await?;
    ui.fill("#login-password", "sakura").await?;
    ui.click("#login-submit").await?;
    ui.find("#logout").await?;
    ui.open("/_utils/#/").await?;
    ui.fill("#open-db-name", "kura").await?;
    ui.find("#open-db-name").await?.send_keys("\u{E007}").await?;
    ui.text_until("#docs-table", |t| t.contains("nagoya:shop000")).await?;
    ui.open("/_utils/#/server").await?;
    ui.text_until("#metric-rps", |t| t == "n/a").await?;
    ui.click("#logout").await?;
    ui.find("#login-form").await?;
    Ok(())
}
