//! Logging in, as CouchDB 3.4 guards it (issue 11): session cookies bound to the user's
//! password salt (`cookie_auth_test.exs`), the lockout after repeated failures
//! (`auth_lockout_test.exs`), PBKDF2's default cost, and the inputs CouchDB's decoder refuses
//! (`1e400`, bytes that are not UTF-8 in a query).

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use crate::harness::{ADMIN, Server, assert_error, auth_session_cookie, send};

const LOCKED: &str = "Account is temporarily locked due to multiple authentication failures";
const BAD_LOGIN: &str = "Name or password is incorrect.";

/// A server whose configuration file holds `toml`, with cheap password hashing.
fn start_with_config(toml: &str) -> (Server, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("bunko.toml");
    std::fs::write(&path, toml).expect("config");
    let path = path.to_str().expect("utf-8 path").to_string();
    (Server::start_with(&["--config", &path, "--pbkdf2-iterations", "10"], &[]), dir)
}

fn create_user(s: &Server, name: &str, password: &str) -> String {
    let id = format!("org.couchdb.user:{name}");
    let doc = json!({"_id": id, "name": name, "password": password, "roles": [], "type": "user"});
    let (status, body) = s.put(&format!("/_users/{id}"), &doc);
    assert_eq!(status, 201, "create user {name}: {body}");
    body["rev"].as_str().expect("rev").to_string()
}

/// Logs in with `POST /_session`; the cookie.
fn login(s: &Server, name: &str, password: &str) -> String {
    let body = json!({"name": name, "password": password});
    let resp = s.anon_req(Method::POST, "/_session").json(&body).send().expect("login");
    assert_eq!(resp.status().as_u16(), 200, "login as {name}");
    auth_session_cookie(&resp).expect("Set-Cookie: AuthSession")
}

fn session_name(s: &Server, cookie: &str) -> Value {
    let (status, body) = send(s.anon_req(Method::GET, "/_session").header("Cookie", cookie));
    assert_eq!(status, 200, "{body}");
    body["userCtx"]["name"].clone()
}

fn basic(s: &Server, user: &str, password: &str) -> (u16, Value) {
    send(s.user_req(Method::GET, "/_session", user, password))
}

#[test]
fn a_password_change_or_a_deleted_user_voids_their_session_cookies() {
    let (s, _dir) = start_with_config("");
    let rev = create_user(&s, "ada", "first");
    let cookie = login(&s, "ada", "first");
    assert_eq!(session_name(&s, &cookie), "ada");

    let id = "/_users/org.couchdb.user:ada";
    let doc =
        json!({"name": "ada", "password": "second", "roles": [], "type": "user", "_rev": rev});
    let (status, body) = send(s.user_req(Method::PUT, id, "ada", "first").json(&doc));
    assert_eq!(status, 201, "ada changes her password: {body}");
    assert_eq!(session_name(&s, &cookie), Value::Null, "the old cookie is void at once");
    let (status, _) = send(s.anon_req(Method::GET, "/_all_dbs").header("Cookie", &cookie));
    assert_eq!(status, 401);

    let cookie = login(&s, "ada", "second");
    assert_eq!(session_name(&s, &cookie), "ada");
    let rev = s.get(id).1["_rev"].as_str().expect("rev").to_string();
    let (status, _) = s.delete(&format!("{id}?rev={rev}"));
    assert_eq!(status, 200);
    assert_eq!(session_name(&s, &cookie), Value::Null, "a deleted user's cookie is void");
}

#[test]
fn malformed_cookies_are_refused_and_forged_ones_are_anonymous() {
    let (s, _dir) = start_with_config("");
    let req = |cookie: &str| send(s.anon_req(Method::GET, "/_session").header("Cookie", cookie));
    let reason = "Malformed AuthSession cookie. Please clear your cookies.";
    assert_error(req("AuthSession=bm8tY29sb25z"), 400, "bad_request", reason);
    // `admin:1:00`, signed with nothing: well formed, not valid.
    let (status, body) = req("AuthSession=YWRtaW46MTowMA");
    assert_eq!((status, &body["userCtx"]["name"]), (200, &Value::Null), "{body}");
}

#[test]
fn cookies_are_persistent_unless_configured_otherwise() {
    let set_cookie = |s: &Server| {
        let body = json!({"name": ADMIN, "password": "secret"});
        let resp = s.anon_req(Method::POST, "/_session").json(&body).send().expect("login");
        resp.headers()["set-cookie"].to_str().expect("ascii").to_string()
    };
    let (s, _dir) = start_with_config("[chttpd_auth]\ntimeout = 1234\n");
    assert!(set_cookie(&s).contains("Max-Age=1234"), "{}", set_cookie(&s));
    let (s, _dir) = start_with_config("[chttpd_auth]\nallow_persistent_cookies = false\n");
    let header = set_cookie(&s);
    assert!(!header.contains("Max-Age") && header.contains("HttpOnly"), "{header}");
}

#[test]
fn five_failures_lock_the_account_for_that_address_even_with_the_right_password() {
    let (s, _dir) = start_with_config("");
    create_user(&s, "bob", "right");
    for _ in 0..5 {
        assert_error(basic(&s, "bob", "wrong"), 401, "unauthorized", BAD_LOGIN);
    }
    assert_error(basic(&s, "bob", "right"), 403, "forbidden", LOCKED);
    let form =
        s.anon_req(Method::POST, "/_session").json(&json!({"name": "bob", "password": "right"}));
    assert_error(send(form), 403, "forbidden", LOCKED);
    // Another account from the same address is not locked.
    create_user(&s, "carol", "pw");
    assert_eq!(basic(&s, "carol", "pw").0, 200);
    // The server admin is counted too (auth_lockout_test.exs uses one).
    for _ in 0..5 {
        assert_eq!(basic(&s, ADMIN, "wrong").0, 401);
    }
    assert_error(basic(&s, ADMIN, "secret"), 403, "forbidden", LOCKED);
}

#[test]
fn a_lockout_ends_after_max_lifetime_and_warn_mode_only_counts() {
    let (s, _dir) =
        start_with_config("[chttpd_auth_lockout]\nthreshold = 2\nmax_lifetime = 1500\n");
    create_user(&s, "bob", "right");
    for _ in 0..2 {
        assert_eq!(basic(&s, "bob", "wrong").0, 401);
    }
    assert_error(basic(&s, "bob", "right"), 403, "forbidden", LOCKED);
    std::thread::sleep(Duration::from_millis(1600));
    assert_eq!(basic(&s, "bob", "right").0, 200, "the count expired");

    let (s, _dir) = start_with_config("[chttpd_auth_lockout]\nmode = \"warn\"\nthreshold = 2\n");
    create_user(&s, "bob", "right");
    for _ in 0..6 {
        assert_error(basic(&s, "bob", "wrong"), 401, "unauthorized", BAD_LOGIN);
    }
    assert_eq!(basic(&s, "bob", "right").0, 200);
}

#[test]
fn new_passwords_get_couchdbs_600000_pbkdf2_rounds_by_default() {
    let s = Server::start();
    create_user(&s, "dora", "pw");
    let (_, doc) = s.get("/_users/org.couchdb.user:dora");
    assert_eq!(doc["iterations"], 600_000, "{doc}");
    assert_eq!(doc["pbkdf2_prf"], "sha256");
    // Verified once, then from the credential cache.
    for _ in 0..3 {
        assert_eq!(basic(&s, "dora", "pw").0, 200);
    }
}

#[test]
fn numbers_a_double_cannot_hold_are_refused_and_nothing_is_written() {
    let s = Server::start();
    s.create_db("db");
    let bad = r#"{"a": 1e400}"#;
    let put =
        send(s.req(Method::PUT, "/db/doc").header("Content-Type", "application/json").body(bad));
    assert_error(put, 400, "bad_request", "invalid UTF-8 JSON");
    let post =
        send(s.req(Method::POST, "/db").header("Content-Type", "application/json").body(bad));
    assert_error(post, 400, "bad_request", "invalid UTF-8 JSON");
    let bulk = s.req(Method::POST, "/db/_bulk_docs").header("Content-Type", "application/json");
    assert_error(send(bulk.body(bulk_body())), 400, "bad_request", "invalid UTF-8 JSON");
    assert_eq!(s.db_info("db")["doc_count"], 0, "nothing was written");
    let big = format!(r#"{{"n": {}}}"#, "9".repeat(40));
    let ok = s.req(Method::PUT, "/db/big").header("Content-Type", "application/json").body(big);
    assert_eq!(send(ok).0, 201, "integers of any size are fine, as in CouchDB");
}

fn bulk_body() -> &'static str {
    r#"{"docs": [{"_id": "x", "a": 1}, {"_id": "y", "b": -2.5e999}]}"#
}

#[test]
fn bytes_that_are_not_utf8_in_a_query_are_refused() {
    let s = Server::start();
    s.create_db("db");
    let got = s.get("/db/_all_docs?key=%22%FF%22");
    assert_error(got, 400, "bad_request", "invalid UTF-8 in query parameter `key`");
    assert_eq!(s.get("/db/_all_docs?key=%22%C3%A9%22").0, 200, "valid UTF-8 still works");
}

#[test]
fn session_login_redirects_with_next_and_fail_as_couchdb_does() {
    let (s, _dir) = start_with_config("");
    let client = reqwest::blocking::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    let login = |query: &str, password: &str| {
        let url = s.url(&format!("/_session?{query}"));
        let body = json!({"name": ADMIN, "password": password});
        client.post(url).json(&body).send().expect("login")
    };
    let ok = login("next=/_up", "secret");
    assert_eq!(ok.status().as_u16(), 302);
    let location = ok.headers()["location"].to_str().expect("ascii").to_string();
    assert!(location.ends_with("/_up") && location.starts_with("http://"), "{location}");
    assert!(auth_session_cookie(&ok).is_some_and(|c| c.len() > "AuthSession=".len()));
    let failed = login("fail=/_up", "wrong");
    assert_eq!(failed.status().as_u16(), 302);
    assert!(failed.headers()["location"].to_str().is_ok_and(|l| l.ends_with("/_up")));
    assert_eq!(auth_session_cookie(&failed).as_deref(), Some("AuthSession="), "cleared");
    assert_eq!(login("next=https://elsewhere.example/", "secret").status().as_u16(), 400);
}
