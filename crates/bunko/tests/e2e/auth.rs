//! Authentication (Basic, `_session` cookies), the `_users` database and per-database
//! `_security` (members and admins by name and by role).

use reqwest::Method;
use serde_json::{Value, json};

use crate::harness::{
    ADMIN, ADMIN_PASSWORD, Server, assert_error, assert_error_kind, auth_session_cookie, body_json,
    send,
};

const BAD_LOGIN: &str = "Name or password is incorrect.";

/// Makes sure `_users` exists (CouchDB's setup creates it; Bunko may create it on start).
fn ensure_users_db(s: &Server) {
    let (status, body) = s.put_empty("/_users");
    assert!(status == 201 || status == 412, "PUT /_users -> {status} {body}");
}

/// Creates user `name` with `password` and `roles` as the admin; returns the doc's rev.
fn create_user(s: &Server, name: &str, password: &str, roles: &[&str]) -> String {
    ensure_users_db(s);
    let doc = json!({"_id": format!("org.couchdb.user:{name}"), "name": name,
                     "password": password, "roles": roles, "type": "user"});
    let (status, body) = s.put(&format!("/_users/org.couchdb.user:{name}"), &doc);
    assert_eq!(status, 201, "create user {name}: {body}");
    body["rev"].as_str().unwrap().to_string()
}

fn as_user(s: &Server, method: Method, path: &str, user: &str, pass: &str) -> (u16, Value) {
    send(s.user_req(method, path, user, pass))
}

#[test]
fn anonymous_requests_are_unauthorized_except_welcome_up_and_session() {
    let s = Server::start();
    s.create_db("db");
    s.put_doc("db", "doc", &json!({}));
    for (method, path) in [
        (Method::GET, "/db"),
        (Method::GET, "/db/doc"),
        (Method::GET, "/db/_all_docs"),
        (Method::GET, "/db/_changes"),
        (Method::PUT, "/db/other"),
        (Method::PUT, "/newdb"),
        (Method::DELETE, "/db"),
        (Method::GET, "/_all_dbs"),
        (Method::GET, "/_uuids"),
    ] {
        let got = send(s.anon_req(method.clone(), path).json(&json!({})));
        assert_error_kind(got, 401, "unauthorized");
    }
    assert_eq!(send(s.anon_req(Method::GET, "/")).0, 200);
    assert_eq!(send(s.anon_req(Method::GET, "/_up")).0, 200);
    assert_eq!(send(s.anon_req(Method::GET, "/_session")).0, 200);
    // Nothing was written by the rejected requests.
    assert_error(s.get("/newdb"), 404, "not_found", "Database does not exist.");
    assert_error(s.get("/db/other"), 404, "not_found", "missing");
}

#[test]
fn anonymous_session_has_null_name_and_no_roles() {
    let s = Server::start();
    let (status, body) = send(s.anon_req(Method::GET, "/_session"));
    assert_eq!(status, 200);
    assert_eq!(body["ok"], true);
    assert_eq!(body["userCtx"], json!({"name": null, "roles": []}));
    assert!(body["info"]["authentication_handlers"].is_array(), "{body}");
    assert!(body["info"].get("authenticated").is_none(), "{body}");
}

#[test]
fn basic_auth_as_admin_gives_admin_role_and_wrong_password_is_401() {
    let s = Server::start();
    let (status, body) = s.get("/_session");
    assert_eq!(status, 200);
    assert_eq!(body["userCtx"], json!({"name": ADMIN, "roles": ["_admin"]}));
    assert_eq!(body["info"]["authenticated"], "default");

    let got = as_user(&s, Method::GET, "/_all_dbs", ADMIN, "wrong");
    assert_error(got, 401, "unauthorized", BAD_LOGIN);
    let got = as_user(&s, Method::GET, "/_session", "nobody", "x");
    assert_error(got, 401, "unauthorized", BAD_LOGIN);
}

#[test]
fn session_login_with_json_sets_auth_session_cookie_that_authenticates() {
    let s = Server::start();
    s.create_db("db");
    let resp = s
        .anon_req(Method::POST, "/_session")
        .json(&json!({"name": ADMIN, "password": ADMIN_PASSWORD}))
        .send()
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let cookie = auth_session_cookie(&resp).expect("Set-Cookie: AuthSession=...");
    assert!(cookie.len() > "AuthSession=".len(), "{cookie}");
    let raw = resp.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(raw.contains("HttpOnly"), "cookie is HttpOnly: {raw}");
    assert!(raw.contains("Path=/"), "cookie path: {raw}");
    assert_eq!(body_json(resp), json!({"ok": true, "name": ADMIN, "roles": ["_admin"]}));

    let (status, body) = send(s.anon_req(Method::GET, "/_session").header("Cookie", &cookie));
    assert_eq!(status, 200);
    assert_eq!(body["userCtx"], json!({"name": ADMIN, "roles": ["_admin"]}));
    assert_eq!(body["info"]["authenticated"], "cookie");
    let (status, body) = send(s.anon_req(Method::GET, "/db").header("Cookie", &cookie));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["db_name"], "db");
}

#[test]
fn session_login_with_form_encoding_works() {
    let s = Server::start();
    let resp = s
        .anon_req(Method::POST, "/_session")
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(format!("name={ADMIN}&password={ADMIN_PASSWORD}"))
        .send()
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert!(auth_session_cookie(&resp).is_some());
    assert_eq!(body_json(resp), json!({"ok": true, "name": ADMIN, "roles": ["_admin"]}));
}

#[test]
fn session_login_with_wrong_password_is_401_without_cookie() {
    let s = Server::start();
    let resp = s
        .anon_req(Method::POST, "/_session")
        .json(&json!({"name": ADMIN, "password": "nope"}))
        .send()
        .unwrap();
    assert_eq!(resp.status().as_u16(), 401);
    let cookie = auth_session_cookie(&resp);
    assert!(
        cookie.as_deref().is_none_or(|c| c == "AuthSession="),
        "no usable session cookie: {cookie:?}"
    );
    assert_eq!(body_json(resp), json!({"error": "unauthorized", "reason": BAD_LOGIN}));
}

#[test]
fn session_delete_logs_out_and_clears_the_cookie() {
    let s = Server::start();
    let http = reqwest::blocking::Client::builder().cookie_store(true).build().unwrap();
    let resp = http
        .post(s.url("/_session"))
        .json(&json!({"name": ADMIN, "password": ADMIN_PASSWORD}))
        .send()
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    // The client's cookie jar now authenticates it.
    let body = body_json(http.get(s.url("/_session")).send().unwrap());
    assert_eq!(body["userCtx"]["name"], ADMIN);
    assert_eq!(http.get(s.url("/_all_dbs")).send().unwrap().status().as_u16(), 200);

    let resp = http.delete(s.url("/_session")).send().unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(auth_session_cookie(&resp).as_deref(), Some("AuthSession="), "cookie cleared");
    assert_eq!(body_json(resp), json!({"ok": true}));
    let body = body_json(http.get(s.url("/_session")).send().unwrap());
    assert_eq!(body["userCtx"], json!({"name": null, "roles": []}));
    assert_eq!(http.get(s.url("/_all_dbs")).send().unwrap().status().as_u16(), 401);
}

#[test]
fn tampered_session_cookie_is_rejected() {
    let s = Server::start();
    let resp = s
        .anon_req(Method::POST, "/_session")
        .json(&json!({"name": ADMIN, "password": ADMIN_PASSWORD}))
        .send()
        .unwrap();
    let cookie = auth_session_cookie(&resp).unwrap();
    // Change one hex digit of the signature (`name:time:signature`), keeping the cookie well
    // formed. (Changing the last base64 character was flaky: it may only touch padding bits,
    // which a strict decoder refuses with 400.)
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let mut text = String::from_utf8(b64.decode(&cookie["AuthSession=".len()..]).unwrap()).unwrap();
    let last = text.pop().unwrap();
    text.push(if last == '0' { '1' } else { '0' });
    let forged = format!("AuthSession={}", b64.encode(text));
    let (status, body) = send(s.anon_req(Method::GET, "/_all_dbs").header("Cookie", forged));
    assert_eq!(status, 401, "{body}");
}

#[test]
fn user_doc_password_is_replaced_by_pbkdf2_fields_on_write() {
    let s = Server::start();
    create_user(&s, "alice", "wonderland", &["reader"]);
    let doc = s.get_doc("_users", "org.couchdb.user:alice");
    assert!(doc.get("password").is_none(), "clear-text password must not be stored: {doc}");
    assert_eq!(doc["password_scheme"], "pbkdf2");
    assert!(doc["iterations"].as_u64().is_some_and(|n| n > 0), "{doc}");
    let key = doc["derived_key"].as_str().unwrap_or_else(|| panic!("derived_key: {doc}"));
    assert!(key.len() >= 40 && key.bytes().all(|b| b.is_ascii_hexdigit()), "hex key: {key}");
    assert!(doc["salt"].as_str().is_some_and(|s| !s.is_empty()), "{doc}");
    assert_eq!(doc["name"], "alice");
    assert_eq!(doc["roles"], json!(["reader"]));
    assert_eq!(doc["type"], "user");
}

#[test]
fn a_user_from_users_db_can_log_in_with_basic_and_session() {
    let s = Server::start();
    create_user(&s, "alice", "wonderland", &["reader"]);
    let (status, body) = as_user(&s, Method::GET, "/_session", "alice", "wonderland");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["userCtx"], json!({"name": "alice", "roles": ["reader"]}));

    let resp = s
        .anon_req(Method::POST, "/_session")
        .json(&json!({"name": "alice", "password": "wonderland"}))
        .send()
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let cookie = auth_session_cookie(&resp).expect("cookie");
    assert_eq!(body_json(resp), json!({"ok": true, "name": "alice", "roles": ["reader"]}));
    let (_, body) = send(s.anon_req(Method::GET, "/_session").header("Cookie", cookie));
    assert_eq!(body["userCtx"], json!({"name": "alice", "roles": ["reader"]}));

    let got = as_user(&s, Method::GET, "/_session", "alice", "wrong");
    assert_error(got, 401, "unauthorized", BAD_LOGIN);
}

#[test]
fn a_users_new_password_takes_effect_and_the_old_one_stops_working() {
    let s = Server::start();
    let rev = create_user(&s, "alice", "wonderland", &[]);
    let doc = json!({"_id": "org.couchdb.user:alice", "_rev": rev, "name": "alice",
                     "password": "looking-glass", "roles": [], "type": "user"});
    let (status, body) = s.put("/_users/org.couchdb.user:alice", &doc);
    assert_eq!(status, 201, "{body}");
    let got = as_user(&s, Method::GET, "/_session", "alice", "wonderland");
    assert_error(got, 401, "unauthorized", BAD_LOGIN);
    let (status, body) = as_user(&s, Method::GET, "/_session", "alice", "looking-glass");
    assert_eq!((status, body["userCtx"]["name"].clone()), (200, json!("alice")));
}

#[test]
fn a_user_can_read_only_their_own_user_doc() {
    let s = Server::start();
    create_user(&s, "alice", "wonderland", &[]);
    create_user(&s, "bob", "builder", &[]);
    let (status, own) =
        as_user(&s, Method::GET, "/_users/org.couchdb.user:alice", "alice", "wonderland");
    assert_eq!(status, 200, "{own}");
    assert_eq!(own["name"], "alice");
    // couch_users_db:after_doc_read: another user's doc is not found.
    let got = as_user(&s, Method::GET, "/_users/org.couchdb.user:bob", "alice", "wonderland");
    assert_error(got, 404, "not_found", "missing");
}

#[test]
fn database_creation_and_deletion_need_a_server_admin() {
    let s = Server::start();
    create_user(&s, "alice", "wonderland", &[]);
    s.create_db("db");
    let got = as_user(&s, Method::PUT, "/alicedb", "alice", "wonderland");
    assert_error(got, 401, "unauthorized", "You are not a server admin.");
    let got = as_user(&s, Method::DELETE, "/db", "alice", "wonderland");
    assert_error(got, 401, "unauthorized", "You are not a server admin.");
    assert_error(s.get("/alicedb"), 404, "not_found", "Database does not exist.");
    assert_eq!(s.db_info("db")["db_name"], "db");
}

#[test]
fn new_databases_are_admin_only_for_other_users() {
    let s = Server::start();
    create_user(&s, "alice", "wonderland", &[]);
    s.create_db("db");
    s.put_doc("db", "doc", &json!({}));
    let got = as_user(&s, Method::GET, "/db/doc", "alice", "wonderland");
    assert_error(got, 403, "forbidden", "You are not allowed to access this db.");
    let got = send(s.anon_req(Method::GET, "/db/doc"));
    assert_error_kind(got, 401, "unauthorized");
}

#[test]
fn security_members_by_name_can_read_and_write_and_others_are_forbidden() {
    let s = Server::start();
    create_user(&s, "alice", "wonderland", &[]);
    create_user(&s, "bob", "builder", &[]);
    s.create_db("db");
    s.put_doc("db", "doc", &json!({"v": 1}));
    let sec =
        json!({"members": {"names": ["alice"], "roles": []}, "admins": {"names": [], "roles": []}});
    assert_eq!(s.put("/db/_security", &sec), (200, json!({"ok": true})));

    let (status, doc) = as_user(&s, Method::GET, "/db/doc", "alice", "wonderland");
    assert_eq!((status, doc["v"].clone()), (200, json!(1)));
    let (status, body) =
        send(s.user_req(Method::PUT, "/db/by-alice", "alice", "wonderland").json(&json!({"a": 1})));
    assert_eq!(status, 201, "{body}");
    let (status, _) = as_user(&s, Method::GET, "/db/_all_docs", "alice", "wonderland");
    assert_eq!(status, 200);

    for (method, path) in
        [(Method::GET, "/db/doc"), (Method::GET, "/db"), (Method::PUT, "/db/by-bob")]
    {
        let got = send(s.user_req(method, path, "bob", "builder").json(&json!({})));
        assert_error(got, 403, "forbidden", "You are not allowed to access this db.");
    }
    // Anonymous: 401. (CouchDB's reason depends on require_valid_user: "You are not
    // authorized to access this db." or "Authentication required."; Bunko always requires it.)
    let got = send(s.anon_req(Method::GET, "/db/doc"));
    assert_error_kind(got, 401, "unauthorized");
    assert_error(s.get("/db/by-bob"), 404, "not_found", "missing");
}

#[test]
fn security_members_by_role_grant_access() {
    let s = Server::start();
    create_user(&s, "alice", "wonderland", &["readers"]);
    create_user(&s, "bob", "builder", &["writers"]);
    s.create_db("db");
    s.put_doc("db", "doc", &json!({}));
    let sec = json!({"members": {"names": [], "roles": ["readers"]}});
    assert_eq!(s.put("/db/_security", &sec).0, 200);
    assert_eq!(as_user(&s, Method::GET, "/db/doc", "alice", "wonderland").0, 200);
    let got = as_user(&s, Method::GET, "/db/doc", "bob", "builder");
    assert_error(got, 403, "forbidden", "You are not allowed to access this db.");
}

#[test]
fn members_cannot_write_design_docs_or_security_but_db_admins_can() {
    let s = Server::start();
    create_user(&s, "alice", "wonderland", &[]);
    create_user(&s, "jan", "apple", &["ops"]);
    s.create_db("db");
    let sec = json!({"members": {"names": ["alice"]}, "admins": {"roles": ["ops"]}});
    assert_eq!(s.put("/db/_security", &sec).0, 200);

    let ddoc = json!({"views": {}});
    let got = send(s.user_req(Method::PUT, "/db/_design/x", "alice", "wonderland").json(&ddoc));
    assert_error(got, 403, "forbidden", "You are not a db or server admin.");
    let got =
        send(s.user_req(Method::PUT, "/db/_security", "alice", "wonderland").json(&json!({})));
    assert_error(got, 403, "forbidden", "You are not a db or server admin.");
    assert_error(s.get("/db/_design/x"), 404, "not_found", "missing");

    // jan is a database admin through the "ops" role (and so also a member).
    let (status, body) = send(s.user_req(Method::PUT, "/db/_design/x", "jan", "apple").json(&ddoc));
    assert_eq!(status, 201, "{body}");
    let (status, _) = as_user(&s, Method::GET, "/db/_security", "jan", "apple");
    assert_eq!(status, 200);
    let (status, body) = send(
        s.user_req(Method::PUT, "/db/_security", "jan", "apple")
            .json(&json!({"members": {"names": ["alice", "bob"]}, "admins": {"roles": ["ops"]}})),
    );
    assert_eq!(status, 200, "{body}");
    // A database admin is still not a server admin.
    let got = as_user(&s, Method::DELETE, "/db", "jan", "apple");
    assert_error(got, 401, "unauthorized", "You are not a server admin.");
}
