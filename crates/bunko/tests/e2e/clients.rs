//! The clients people use against Cloudant and CouchDB, run against the real server (issue
//! 12): the IBM Cloudant Python and Node SDKs at their default settings (gzip request
//! bodies) through the partition walkthrough of the Cloudant docs, nano through CRUD, views
//! and `_changes`, PouchDB replicating both ways with a conflict; and over MongoDB's wire
//! protocol (issue 13) mongosh typing the seeds' models and the Node driver. The scripts live in
//! `tests/clients/` and check their own results; each prints `ok <step>` lines and `ALL OK`.
//!
//! The packages (pinned in `tests/clients/package-lock.json` and `requirements.txt`) are
//! installed by the first test that needs them into `.deps/clients/` at the workspace root
//! (ignored by git), once: a stamp file holding the pins makes later runs skip the install.
//! A test is skipped, with one line saying so, only when the package registry cannot be
//! reached; any other install failure fails it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::harness::{ADMIN, ADMIN_PASSWORD, Server};

/// A script that has not finished by then has hung.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(300);

fn scripts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients")
}

fn deps() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.deps/clients")
}

/// Runs `cmd`, returning its output, or a description of why it could not start.
fn run(cmd: &mut Command) -> Result<Output, String> {
    cmd.stdin(Stdio::null()).output().map_err(|err| format!("cannot run {cmd:?}: {err}"))
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// What an install gives: the path to use, or the line saying why the test is skipped.
type Installed = Result<PathBuf, String>;

/// Installs unless `dir`'s stamp already holds `pins`; `probe` tells whether the registry
/// answers at all when the install fails.
fn install(
    dir: &Path,
    pins: &str,
    steps: Vec<Command>,
    mut probe: Command,
    registry: &str,
) -> Result<(), String> {
    let stamp = dir.join(".installed");
    if std::fs::read_to_string(&stamp).is_ok_and(|s| s == pins) {
        return Ok(());
    }
    let _ = std::fs::remove_file(&stamp);
    for mut step in steps {
        let output = run(&mut step).unwrap_or_else(|err| panic!("{err}"));
        if !output.status.success() {
            let reachable = run(&mut probe).is_ok_and(|o| o.status.success());
            if !reachable {
                return Err(format!("SKIP: the {registry} registry is unreachable"));
            }
            panic!("installing the {registry} packages failed: {step:?}\n{}", text(&output));
        }
    }
    std::fs::write(&stamp, pins).expect("write the install stamp");
    Ok(())
}

/// `node_modules` with the pinned Node packages.
fn node_modules() -> &'static Installed {
    static NODE: OnceLock<Installed> = OnceLock::new();
    NODE.get_or_init(|| {
        let dir = deps().join("node");
        std::fs::create_dir_all(&dir).expect("create .deps/clients/node");
        let mut pins = String::new();
        for file in ["package.json", "package-lock.json"] {
            std::fs::copy(scripts().join(file), dir.join(file)).expect("copy the npm pins");
            pins += &std::fs::read_to_string(scripts().join(file)).expect("read the npm pins");
        }
        let mut ci = Command::new("npm");
        ci.args(["ci", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error"])
            .args(["--fetch-timeout=60000", "--fetch-retries=1"])
            .current_dir(&dir);
        let mut ping = Command::new("npm");
        ping.args(["ping", "--fetch-timeout=15000", "--fetch-retries=0"]).current_dir(&dir);
        install(&dir, &pins, vec![ci], ping, "npm")?;
        Ok(dir.join("node_modules"))
    })
}

/// The Python interpreter of a virtual environment with the pinned packages.
fn python() -> &'static Installed {
    static PYTHON: OnceLock<Installed> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let dir = deps().join("python");
        std::fs::create_dir_all(&dir).expect("create .deps/clients/python");
        let requirements = scripts().join("requirements.txt");
        let pins = std::fs::read_to_string(&requirements).expect("read requirements.txt");
        let python = dir.join("venv/bin/python");
        let mut venv = Command::new("python3");
        venv.args(["-m", "venv", "--clear"]).arg(dir.join("venv"));
        let mut pip = Command::new(&python);
        pip.args(["-m", "pip", "install", "--disable-pip-version-check", "--no-input", "-q"])
            .args(["--timeout", "60", "--retries", "1", "-r"])
            .arg(&requirements);
        let mut probe = Command::new("python3");
        probe.args(["-m", "pip", "index", "versions", "ibmcloudant"]);
        probe.args(["--disable-pip-version-check", "--timeout", "15", "--retries", "0"]);
        install(&dir, &pins, vec![venv, pip], probe, "PyPI")?;
        Ok(python)
    })
}

/// Runs a client script against `s`, asserting it passed every step in `steps`.
fn check_script(s: &Server, mut cmd: Command, steps: &[&str]) {
    let base = s.base().to_string();
    let with_auth = base.replacen("http://", &format!("http://{ADMIN}:{ADMIN_PASSWORD}@"), 1);
    cmd.current_dir(scripts())
        .env("CLOUDANT_URL", &base)
        .env("CLOUDANT_AUTH_TYPE", "BASIC")
        .env("CLOUDANT_USERNAME", ADMIN)
        .env("CLOUDANT_PASSWORD", ADMIN_PASSWORD)
        .env("BUNKO_URL", &base)
        .env("BUNKO_URL_WITH_AUTH", with_auth)
        .env("BUNKO_USER", ADMIN)
        .env("BUNKO_PASSWORD", ADMIN_PASSWORD)
        .env("MONGO_URL", mongo_url(s))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().unwrap_or_else(|err| panic!("cannot run {cmd:?}: {err}"));
    let output = wait(child, &cmd);
    let out = text(&output);
    assert!(output.status.success(), "{cmd:?} failed:\n{out}\nserver log:\n{}", s.log());
    for step in steps {
        assert!(out.lines().any(|l| l == format!("ok {step}")), "no `ok {step}` in:\n{out}");
    }
    assert!(out.lines().any(|l| l == "ALL OK"), "{out}");
}

fn wait(mut child: std::process::Child, cmd: &Command) -> Output {
    let started = Instant::now();
    while child.try_wait().expect("wait for the client script").is_none() {
        if started.elapsed() > SCRIPT_TIMEOUT {
            let _ = child.kill();
            panic!("{cmd:?} did not finish");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().expect("client script output")
}

fn mongo_url(s: &Server) -> String {
    format!("mongodb://{ADMIN}:{ADMIN_PASSWORD}@{}/?authSource=admin", s.mongo_addr())
}

/// A command of the pinned Node packages, or `None` (after saying why) without the registry.
fn with_node_modules(make: impl FnOnce(&Path) -> Command) -> Option<Command> {
    match node_modules() {
        Ok(modules) => Some(make(modules)),
        Err(skip) => {
            eprintln!("{skip}");
            None
        }
    }
}

/// `mongosh <uri> --quiet --file <script>` at mongosh's defaults, its home (logs, history)
/// inside `.deps/` rather than the user's.
fn mongosh(s: &Server, script: &str) -> Option<Command> {
    with_node_modules(|modules| {
        let home = deps().join("mongosh-home");
        std::fs::create_dir_all(&home).expect("create the mongosh home");
        let mut cmd = Command::new(modules.join(".bin/mongosh"));
        cmd.arg(mongo_url(s)).args(["--quiet", "--file", script]).env("HOME", home);
        cmd
    })
}

fn node(script: &str) -> Option<Command> {
    with_node_modules(|modules| {
        let mut cmd = Command::new("node");
        cmd.arg(script).env("NODE_PATH", modules);
        cmd
    })
}

const WALKTHROUGH: &[&str] = &[
    "gzip request bodies on",
    "partition info",
    "partition _all_docs",
    "partition _find today",
    "partition _find device today",
    "partition _explain",
    "global view keys+limit",
    "partitioned view",
    "_changes",
];

#[test]
fn cloudant_python_sdk_partition_walkthrough() {
    let python = match python() {
        Ok(python) => python,
        Err(skip) => return eprintln!("{skip}"),
    };
    let s = Server::start();
    let mut cmd = Command::new(python);
    cmd.arg("cloudant_walkthrough.py");
    let mut steps = WALKTHROUGH.to_vec();
    steps.extend(["put_database partitioned", "post_bulk_docs", "post_index deviceID-readings"]);
    check_script(&s, cmd, &steps);
}

#[test]
fn cloudant_node_sdk_partition_walkthrough() {
    let Some(cmd) = node("cloudant_walkthrough.js") else { return };
    let s = Server::start();
    let mut steps = WALKTHROUGH.to_vec();
    steps.extend(["putDatabase partitioned", "postBulkDocs", "postIndex deviceID-readings"]);
    check_script(&s, cmd, &steps);
}

#[test]
fn nano_crud_views_and_changes() {
    let Some(cmd) = node("nano_crud.js") else { return };
    let s = Server::start();
    let steps = [
        "insert + get",
        "update + conflict",
        "bulk + list",
        "view keys + reduce",
        "destroy",
        "changes",
        "changes longpoll",
    ];
    check_script(&s, cmd, &steps);
}

#[test]
fn pouchdb_replicates_both_ways_with_attachments_and_a_conflict() {
    let Some(cmd) = node("pouchdb_sync.js") else { return };
    let s = Server::start();
    let steps = [
        "push to Bunko",
        "attachments pushed to Bunko",
        "pull from Bunko",
        "attachments pulled from Bunko",
        "conflict replicated both ways, same winner",
        "conflict resolved and replicated",
    ];
    check_script(&s, cmd, &steps);
}

/// Issue 14, point 5: a collection written with pymongo and updated over MongoDB (a new
/// `_rev`) replicates to PouchDB; PouchDB's edit replicates back and pymongo reads it.
#[test]
fn pouchdb_replicates_a_mongodb_collection_and_back() {
    let Some(cmd) = node("pouchdb_mongo.js") else { return };
    let s = Server::start();
    let insert = r#"
c = client()
books = c.shop.books
books.insert_one({"_id": "b1", "title": "吾輩は猫である", "pub": ObjectId("612d1e835ebee16872a109a4"),
                  "published": datetime.datetime(1905, 1, 1, tzinfo=datetime.timezone.utc), "copies": Int64(3)})
books.update_one({"_id": "b1"}, {"$set": {"copies": Int64(3)}, "$unset": {"draft": ""}})
books.update_one({"_id": "b1"}, {"$set": {"edition": 1}})
print(json.dumps({"ok": True}))
"#;
    let Some(_) = crate::mongo::python(&s, insert) else { return };
    let (_, doc) = s.get("/shop%24books/b1");
    assert!(doc["_rev"].as_str().is_some_and(|r| r.starts_with("2-")), "{doc}");
    check_script(&s, cmd, &["pull a collection", "push an edit back"]);
    let read = r#"
doc = client().shop.books.find_one({"_id": "b1"})
assert doc["stock"] == 7 and doc["copies"] == Int64(3) and isinstance(doc["copies"], Int64), doc
assert doc["pub"] == ObjectId("612d1e835ebee16872a109a4"), doc
print(json.dumps({"ok": True}))
"#;
    assert_eq!(crate::mongo::python(&s, read), Some(serde_json::json!({"ok": true})));
}

/// Issue 13: the seeds' MongoDB models typed into mongosh as the guides write them, at
/// mongosh's default settings (its own handshake, `buildInfo`, `getParameter`,
/// `atlasVersion`, `getLog` ...): embedded addresses, the subset pattern, the `links` model
/// answered by an index scan, parent references with an index, `$lookup`, shell helpers.
#[test]
fn mongosh_runs_the_seeds_models() {
    let s = Server::start();
    let Some(cmd) = mongosh(&s, "mongosh_seeds.js") else { return };
    let steps = [
        "embedded addresses",
        "subset pattern",
        "links model with an index scan",
        "parent references with an index",
        "$lookup",
        "shell helpers",
    ];
    check_script(&s, cmd, &steps);
}

/// Issue 13: the Node driver's CRUD, `withTransaction`, a change stream and `bulkWrite`.
#[test]
fn node_driver_crud_transactions_change_streams_and_bulk_write() {
    let Some(cmd) = node("node_driver.js") else { return };
    let s = Server::start();
    check_script(&s, cmd, &["crud", "withTransaction", "change stream", "bulkWrite"]);
}
