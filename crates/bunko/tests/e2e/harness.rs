//! Spawns the real `bunko` binary on port 0 with a fresh data directory and talks HTTP to it.
//!
//! Every test starts its own [`Server`]; the process is killed when the value drops. The data
//! directory outlives restarts ([`Server::kill9`], [`Server::terminate`], [`Server::restart`]) so
//! that crash and persistence tests can reopen the same files.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use reqwest::Method;
use reqwest::blocking::{Client, RequestBuilder, Response};
use serde_json::Value;

pub const ADMIN: &str = "admin";
pub const ADMIN_PASSWORD: &str = "secret";

/// How long a server gets to print its listening line.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);
/// Generous default so that a slow debug build never fails a test by itself.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

/// A running `bunko serve` process.
pub struct Server {
    child: Option<Child>,
    /// Owns the temporary directory (data + log); removed on drop.
    dir: tempfile::TempDir,
    args: Vec<String>,
    env: Vec<(String, String)>,
    base: String,
    /// `127.0.0.1:PORT` of the MongoDB listener (empty when it is off).
    mongo: String,
    client: Client,
    anon: Client,
    starts: usize,
}

impl Server {
    /// Starts a server with default options and `BUNKO_ADMIN=admin:secret`.
    pub fn start() -> Server {
        Server::start_with(&[], &[])
    }

    /// Starts a server with extra command-line arguments and environment variables.
    pub fn start_with(args: &[&str], env: &[(&str, &str)]) -> Server {
        let dir = tempfile::Builder::new().prefix("bunko-e2e-").tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("data")).expect("data dir");
        let mut server = Server {
            child: None,
            dir,
            args: args.iter().map(|s| s.to_string()).collect(),
            env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            base: String::new(),
            mongo: String::new(),
            client: client(),
            anon: client(),
            starts: 0,
        };
        server.spawn();
        server
    }

    /// The server process's id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join(format!("server-{}.log", self.starts))
    }

    fn spawn(&mut self) {
        self.starts += 1;
        let log = std::fs::File::create(self.log_path()).expect("log file");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_bunko"));
        cmd.arg("serve")
            .arg("--data")
            .arg(self.data_dir())
            .arg("--listen")
            .arg("127.0.0.1:0")
            .args(&self.args)
            .env("BUNKO_ADMIN", format!("{ADMIN}:{ADMIN_PASSWORD}"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log));
        // Every server gets its own ephemeral MongoDB port unless the test chose one (or off).
        let mongo_chosen = self.args.iter().any(|a| a == "--mongo-listen");
        if !mongo_chosen {
            cmd.arg("--mongo-listen").arg("127.0.0.1:0");
        }
        let mongo_on = !self.args.windows(2).any(|w| w[0] == "--mongo-listen" && w[1] == "off");
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn bunko");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            // The HTTP line, then the MongoDB line when that listener is on.
            for _ in 0..if mongo_on { 2 } else { 1 } {
                let mut line = String::new();
                let _ = reader.read_line(&mut line);
                let _ = tx.send(line);
            }
            // Keep draining so that the server never blocks on a full pipe.
            let mut sink = Vec::new();
            let _ = reader.read_to_end(&mut sink);
        });
        let line = match rx.recv_timeout(STARTUP_TIMEOUT) {
            Ok(line) => line,
            Err(_) => {
                let _ = child.kill();
                panic!("bunko did not print its listening line; log:\n{}", self.log());
            }
        };
        self.child = Some(child);
        let prefix = "bunko listening on ";
        let url = line.trim_end();
        assert!(
            url.starts_with(prefix),
            "unexpected first stdout line {line:?}; log:\n{}",
            self.log()
        );
        self.base = url[prefix.len()..].trim_end_matches('/').to_string();
        self.mongo = String::new();
        if mongo_on {
            let line = rx.recv_timeout(STARTUP_TIMEOUT).unwrap_or_default();
            let mongo_prefix = "bunko listening on mongodb://";
            let addr = line.trim_end().strip_prefix(mongo_prefix);
            assert!(addr.is_some(), "no MongoDB listening line: {line:?}; log:\n{}", self.log());
            self.mongo = addr.unwrap_or_default().to_string();
        }
    }

    /// `127.0.0.1:PORT` of the MongoDB listener.
    pub fn mongo_addr(&self) -> &str {
        &self.mongo
    }

    /// The server's stderr so far (for failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// `kill -9`: no chance to flush anything.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM, then waits for a graceful exit; returns whether it exited successfully.
    pub fn terminate(&mut self) -> bool {
        let Some(mut child) = self.child.take() else { return true };
        let status = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
        assert!(status.map(|s| s.success()).unwrap_or(false), "could not send SIGTERM");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match child.try_wait() {
                Ok(Some(status)) => return status.success(),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("bunko did not exit within 30 s of SIGTERM");
                }
            }
        }
    }

    /// Starts the binary again on the same data directory (after `kill9` or `terminate`).
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "stop the server before restarting it");
        self.spawn();
    }

    // ---- requests ----------------------------------------------------------------------------

    /// A request authenticated as the server admin.
    pub fn req(&self, method: Method, path: &str) -> RequestBuilder {
        self.client
            .request(method, self.url(path))
            .basic_auth(ADMIN, Some(ADMIN_PASSWORD))
            .header("Accept", "application/json")
    }

    /// A request without credentials.
    pub fn anon_req(&self, method: Method, path: &str) -> RequestBuilder {
        self.anon.request(method, self.url(path)).header("Accept", "application/json")
    }

    /// A request with Basic auth as `user`.
    pub fn user_req(&self, method: Method, path: &str, user: &str, pass: &str) -> RequestBuilder {
        self.anon_req(method, path).basic_auth(user, Some(pass))
    }

    pub fn get(&self, path: &str) -> (u16, Value) {
        send(self.req(Method::GET, path))
    }

    pub fn delete(&self, path: &str) -> (u16, Value) {
        send(self.req(Method::DELETE, path))
    }

    pub fn head(&self, path: &str) -> Response {
        self.req(Method::HEAD, path).send().expect("HEAD")
    }

    pub fn put(&self, path: &str, body: &Value) -> (u16, Value) {
        send(self.req(Method::PUT, path).json(body))
    }

    pub fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        send(self.req(Method::POST, path).json(body))
    }

    /// PUT without a body (database creation).
    pub fn put_empty(&self, path: &str) -> (u16, Value) {
        send(self.req(Method::PUT, path))
    }

    /// Sends raw bytes as `application/json`.
    pub fn raw(&self, method: Method, path: &str, body: impl Into<Vec<u8>>) -> (u16, Value) {
        send(self.req(method, path).header("Content-Type", "application/json").body(body.into()))
    }

    /// Creates database `db`, asserting 201 `{"ok":true}`.
    pub fn create_db(&self, db: &str) {
        let (status, body) = self.put_empty(&format!("/{db}"));
        assert_eq!((status, body), (201, serde_json::json!({"ok": true})), "create db {db}");
    }

    /// PUTs a document and returns its new rev, asserting 201.
    pub fn put_doc(&self, db: &str, id: &str, body: &Value) -> String {
        let (status, resp) = self.put(&format!("/{db}/{id}"), body);
        assert_eq!(status, 201, "PUT /{db}/{id} -> {resp}");
        assert_eq!(resp["ok"], true, "{resp}");
        resp["rev"].as_str().expect("rev").to_string()
    }

    /// GETs a document, asserting 200.
    pub fn get_doc(&self, db: &str, id: &str) -> Value {
        let (status, body) = self.get(&format!("/{db}/{id}"));
        assert_eq!(status, 200, "GET /{db}/{id} -> {body}");
        body
    }

    /// The database info object, asserting 200.
    pub fn db_info(&self, db: &str) -> Value {
        let (status, body) = self.get(&format!("/{db}"));
        assert_eq!(status, 200, "GET /{db} -> {body}");
        body
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("---- bunko stderr ({}) ----\n{}", self.log_path().display(), self.log());
        }
        self.kill9();
    }
}

pub fn client() -> Client {
    Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("http client")
}

/// Sends a request and returns (status, JSON body). An empty body is `null`; a body that is not
/// JSON comes back as a JSON string so that assertions show it.
pub fn send(req: RequestBuilder) -> (u16, Value) {
    let resp = req.send().expect("request failed (server down?)");
    let status = resp.status().as_u16();
    (status, body_json(resp))
}

pub fn body_json(resp: Response) -> Value {
    let bytes = resp.bytes().expect("read body");
    if bytes.is_empty() {
        return Value::Null;
    }
    serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
}

/// Asserts a CouchDB error response: exact status, `error` and `reason`.
#[track_caller]
pub fn assert_error(got: (u16, Value), status: u16, error: &str, reason: &str) {
    let expected = serde_json::json!({"error": error, "reason": reason});
    assert_eq!(got, (status, expected));
}

/// Asserts a CouchDB error response: exact status and `error`, `reason` any string.
#[track_caller]
pub fn assert_error_kind(got: (u16, Value), status: u16, error: &str) {
    assert_eq!(got.0, status, "status; body {}", got.1);
    assert_eq!(got.1["error"], error, "error in {}", got.1);
    assert!(got.1["reason"].is_string(), "reason must be a string in {}", got.1);
}

/// `N-<32 lowercase hex>`; returns N.
#[track_caller]
pub fn rev_gen(rev: &str) -> u64 {
    let (generation, hash) = rev.split_once('-').unwrap_or_else(|| panic!("bad rev {rev:?}"));
    assert_eq!(hash.len(), 32, "rev hash must be 32 hex digits: {rev:?}");
    assert!(
        hash.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
        "rev hash must be lowercase hex: {rev:?}"
    );
    generation.parse().unwrap_or_else(|_| panic!("bad rev generation {rev:?}"))
}

/// The hash part of a rev.
pub fn rev_hash(rev: &str) -> &str {
    rev.split_once('-').map(|(_, h)| h).unwrap_or("")
}

/// Percent-encodes a document id for use as one path segment.
pub fn enc(id: &str) -> String {
    let mut out = String::new();
    for b in id.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// Reads the `Set-Cookie: AuthSession=...` value (without attributes) from a response.
pub fn auth_session_cookie(resp: &Response) -> Option<String> {
    resp.headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter_map(|v| v.split(';').next())
        .find(|kv| kv.trim_start().starts_with("AuthSession="))
        .map(|kv| kv.trim().to_string())
}

/// The ids of `rows` in order.
pub fn ids(rows: &Value) -> Vec<String> {
    rows.as_array()
        .expect("rows array")
        .iter()
        .map(|r| r["id"].as_str().unwrap_or("<no id>").to_string())
        .collect()
}

/// Asserts that a value is a non-empty JSON string (CouchDB 3 sequences are opaque strings).
#[track_caller]
pub fn assert_seq(seq: &Value) {
    let number = seq.as_str().and_then(|s| s.split_once('-')).map(|(n, _)| n.parse::<u64>());
    assert!(
        matches!(number, Some(Ok(_))),
        "sequence must be CouchDB's \"N-opaque\" string, got {seq}"
    );
}
