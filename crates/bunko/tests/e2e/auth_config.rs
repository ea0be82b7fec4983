//! Authentication as CouchDB configures it at run time (issue 16): the authentication
//! database named by `[chttpd_auth] authentication_db` (with its `_design/_auth`), logins
//! refused while a user document has conflicts, `password_regexp`, the `_:_` "no
//! credentials" login, and the proxy and JWT handlers of `[chttpd] authentication_handlers`
//! (`couch_httpd_auth.erl`, `couch_users_db.erl`, `jwtf.erl` give the answers).

use base64::Engine as _;
use hmac::{Hmac, Mac};
use reqwest::Method;
use serde_json::{Value, json};

use crate::harness::{Server, assert_error, send};

const CONFIG: &str = "/_node/_local/_config";
const FAST_HASH: [&str; 2] = ["--pbkdf2-iterations", "10"];

fn set(s: &Server, section: &str, key: &str, value: &str) {
    let (status, body) = s.put(&format!("{CONFIG}/{section}/{key}"), &json!(value));
    assert_eq!(status, 200, "{section}/{key}: {body}");
}

fn user(name: &str, password: &str, roles: &[&str]) -> Value {
    json!({"_id": format!("org.couchdb.user:{name}"), "name": name, "type": "user",
           "roles": roles, "password": password})
}

fn session_as(s: &Server, name: &str, password: &str) -> (u16, Value) {
    send(s.user_req(Method::GET, "/_session", name, password))
}

#[test]
fn the_authentication_database_follows_the_config_and_holds_the_auth_design_doc() {
    let s = Server::start_with(&FAST_HASH, &[]);
    let auth = s.get_doc("_users", "_design/_auth");
    assert!(auth["validate_doc_update"].is_string(), "{auth}");
    assert_eq!(s.post("/_users", &user("taro", "umi", &[])).0, 201);
    set(&s, "chttpd_auth", "authentication_db", "kaiin");
    s.create_db("kaiin");
    let auth = s.get_doc("kaiin", "_design/_auth");
    assert_eq!(auth["language"], "javascript");
    assert_eq!(s.post("/kaiin", &user("hanako", "yama", &["editor"])).0, 201);
    let stored = s.get_doc("kaiin", "org.couchdb.user:hanako");
    assert!(stored.get("password").is_none() && stored["derived_key"].is_string(), "{stored}");
    let (status, session) = session_as(&s, "hanako", "yama");
    assert_eq!(status, 200);
    assert_eq!(session["userCtx"], json!({"name": "hanako", "roles": ["editor"]}));
    assert_eq!(session["info"]["authentication_db"], "kaiin");
    let old = session_as(&s, "taro", "umi");
    assert_error(old, 401, "unauthorized", "Name or password is incorrect.");
    let untyped = json!({"_id": "org.couchdb.user:jiro", "name": "jiro", "roles": []});
    assert_error(s.post("/kaiin", &untyped), 403, "forbidden", "doc.type must be user");
    let (_, anon) = send(s.anon_req(Method::GET, "/_session").basic_auth("_", Some("_")));
    assert_eq!(anon["userCtx"], json!({"name": null, "roles": []}));
    assert!(anon["info"].get("authenticated").is_none(), "{anon}");
}

/// An existing database named the authentication database takes user documents of any
/// shape until it holds `_design/_auth`, which it gets when the server next follows it
/// (after a database is deleted), as CouchDB's auth cache restarts; CouchDB's
/// `security_validation_test.exs` loads its users that way. The role rules hold throughout.
#[test]
fn an_existing_database_named_for_logins_gets_the_auth_rules_once_followed() {
    let s = Server::start_with(&FAST_HASH, &[]);
    s.create_db("kaiin");
    set(&s, "chttpd_auth", "authentication_db", "kaiin");
    assert_eq!(s.get("/kaiin/_design/_auth").0, 404, "not followed yet");
    let untyped = json!({"_id": "org.couchdb.user:jiro", "name": "jiro", "roles": [],
                         "password": "kawa"});
    assert_eq!(s.post("/kaiin", &untyped).0, 201);
    let stored = s.get_doc("kaiin", "org.couchdb.user:jiro");
    assert!(stored.get("password").is_none() && stored["derived_key"].is_string(), "{stored}");
    let (status, session) = session_as(&s, "jiro", "kawa");
    assert_eq!((status, &session["userCtx"]["name"]), (200, &json!("jiro")), "{session}");
    let mut own = stored.clone();
    own["roles"] = json!(["_admin"]);
    let put =
        send(s.user_req(Method::PUT, "/kaiin/org.couchdb.user:jiro", "jiro", "kawa").json(&own));
    assert_error(put, 403, "forbidden", "Only _admin may edit roles");

    s.create_db("tmp");
    assert_eq!(s.delete("/tmp").0, 200);
    let auth = s.get_doc("kaiin", "_design/_auth");
    assert!(auth["validate_doc_update"].is_string(), "{auth}");
    let saburo = json!({"_id": "org.couchdb.user:saburo", "name": "saburo", "roles": []});
    assert_error(s.post("/kaiin", &saburo), 403, "forbidden", "doc.type must be user");
}

#[test]
fn a_user_whose_document_has_conflicts_cannot_log_in() {
    let s = Server::start_with(&FAST_HASH, &[]);
    assert_eq!(s.post("/_users", &user("saburo", "kawa", &[])).0, 201);
    assert_eq!(session_as(&s, "saburo", "kawa").0, 200);
    // A sibling of the first revision, as a replication brings it.
    let mut other = s.get_doc("_users", "org.couchdb.user:saburo");
    other["_rev"] = json!("1-0123456789abcdef0123456789abcdef");
    other["kaisha"] = json!("betsu");
    let (status, _) = s.post("/_users/_bulk_docs", &json!({"docs": [other], "new_edits": false}));
    assert_eq!(status, 201);
    let reason = "User document conflicts must be resolved before the document is used for \
                  authentication purposes.";
    assert_error(session_as(&s, "saburo", "kawa"), 401, "unauthorized", reason);
    set(&s, "chttpd_auth", "allow_conflicted_user_docs", "true");
    assert_eq!(session_as(&s, "saburo", "kawa").0, 200);
}

#[test]
fn new_passwords_must_match_password_regexp() {
    let s = Server::start_with(&FAST_HASH, &[]);
    let rules = r#"[{".{10,}"}, {"[A-Z]+", "Requirement 2."}, {"\\d+", ""}]"#;
    set(&s, "couch_httpd_auth", "password_regexp", rules);
    let base = "Password does not conform to requirements.";
    assert_error(s.post("/_users", &user("shiro", "short", &[])), 400, "bad_request", base);
    let upper = format!("{base} Requirement 2.");
    let (status, body) = s.post("/_users", &user("shiro", "longenough", &[]));
    assert_error((status, body), 400, "bad_request", &upper);
    assert_error(s.post("/_users", &user("shiro", "LongEnough", &[])), 400, "bad_request", base);
    assert_eq!(s.post("/_users", &user("shiro", "LongEnough7", &[])).0, 201);
    set(&s, "couch_httpd_auth", "password_regexp", r#"{{".{10,}"}}"#);
    let refused = s.post("/_users", &user("goro", "Whatever123", &[]));
    assert_error(refused, 403, "forbidden", "Server cannot hash passwords at this time.");
    assert_eq!(s.get("/_users/org.couchdb.user:goro").0, 404);
}

const HANDLERS: &str = "{chttpd_auth, jwt_authentication_handler}, \
    {chttpd_auth, proxy_authentication_handler}, {chttpd_auth, cookie_authentication_handler}, \
    {chttpd_auth, default_authentication_handler}";

fn proxy_session(s: &Server, token: Option<&str>) -> Value {
    let mut req = s
        .anon_req(Method::GET, "/_session")
        .header("X-Auth-CouchDB-UserName", "sakura")
        .header("X-Auth-CouchDB-Roles", "kanri, henshu");
    if let Some(token) = token {
        req = req.header("X-Auth-CouchDB-Token", token);
    }
    send(req).1
}

fn hmac_sha1_hex(secret: &str, message: &str) -> String {
    let mut mac = Hmac::<sha1::Sha1>::new_from_slice(secret.as_bytes()).expect("hmac key");
    mac.update(message.as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

#[test]
fn proxy_headers_count_only_when_the_handler_is_configured_and_signed() {
    let s = Server::start_with(&FAST_HASH, &[]);
    assert_eq!(proxy_session(&s, None)["userCtx"]["name"], Value::Null);
    set(&s, "chttpd", "authentication_handlers", HANDLERS);
    let session = proxy_session(&s, None);
    assert_eq!(session["userCtx"], json!({"name": "sakura", "roles": ["kanri", "henshu"]}));
    assert_eq!(session["info"]["authenticated"], "proxy");
    let handlers = json!(["jwt", "proxy", "cookie", "default"]);
    assert_eq!(session["info"]["authentication_handlers"], handlers);
    set(&s, "chttpd_auth", "proxy_use_secret", "true");
    // No secret configured: Bunko trusts no token (CouchDB would trust any).
    assert_eq!(proxy_session(&s, Some("00"))["userCtx"]["name"], Value::Null);
    set(&s, "chttpd_auth", "secret", "himitsu");
    let good = hmac_sha1_hex("himitsu", "sakura");
    assert_eq!(proxy_session(&s, Some(&good))["userCtx"]["name"], "sakura");
    let forged = hmac_sha1_hex("other", "sakura");
    assert_eq!(proxy_session(&s, Some(&forged))["userCtx"]["name"], Value::Null);
    assert_eq!(proxy_session(&s, None)["userCtx"]["name"], Value::Null);
}

fn hs256(secret: &str, claims: &Value) -> String {
    let key = jsonwebtoken::EncodingKey::from_secret(secret.as_bytes());
    let header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256);
    jsonwebtoken::encode(&header, claims, &key).expect("token")
}

fn bearer(s: &Server, token: &str) -> (u16, Value) {
    send(s.anon_req(Method::GET, "/_session").bearer_auth(token))
}

#[test]
fn bearer_tokens_are_checked_as_couchdb_does() {
    let s = Server::start_with(&FAST_HASH, &[]);
    set(&s, "chttpd", "authentication_handlers", HANDLERS);
    let secret = "zxczxc12zxczxc12";
    set(&s, "jwt_keys", "hmac:_default", &base64::engine::general_purpose::STANDARD.encode(secret));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let claims = json!({"sub": "momo", "exp": now + 60, "_couchdb.roles": ["dokusha"]});
    let (status, session) = bearer(&s, &hs256(secret, &claims));
    assert_eq!(status, 200);
    assert_eq!(session["userCtx"], json!({"name": "momo", "roles": ["dokusha"]}));
    assert_eq!(session["info"]["authenticated"], "jwt");
    let expired = json!({"sub": "momo", "exp": now - 10});
    assert_error(bearer(&s, &hs256(secret, &expired)), 401, "unauthorized", "exp not in future");
    let no_exp = json!({"sub": "momo"});
    assert_error(bearer(&s, &hs256(secret, &no_exp)), 400, "bad_request", "Missing exp claim");
    let forged = hs256("another-secret!!", &claims);
    assert_error(bearer(&s, &forged), 400, "bad_request", "Bad HMAC in authentication token");
    assert_error(bearer(&s, "abc"), 400, "bad_request", "Malformed authentication token");
    set(&s, "jwt_auth", "required_claims", r#"{iss, "hello"}"#);
    let wrong_iss = json!({"sub": "momo", "iss": "goodbye"});
    assert_error(bearer(&s, &hs256(secret, &wrong_iss)), 400, "bad_request", "Invalid iss claim");
    let right_iss = json!({"sub": "momo", "iss": "hello"});
    assert_eq!(bearer(&s, &hs256(secret, &right_iss)).1["userCtx"]["name"], "momo");
}

/// `[chttpd] require_valid_user`: Bunko refuses anonymous requests by default; set false
/// (CouchDB's default) they reach the databases' security as in CouchDB, which CouchDB's
/// `users_db_security_test.exs` (anonymous sign-up) and `replication_test.exs` (a missing
/// source named without credentials is `db_not_found`) rely on.
#[test]
fn without_require_valid_user_anonymous_requests_meet_the_security_gates() {
    let s = Server::start_with(&FAST_HASH, &[]);
    s.create_db("closed");
    let anon = |method: Method, path: &str| send(s.anon_req(method, path));
    let signup = |doc: &Value| send(s.anon_req(Method::POST, "/_users").json(doc));
    assert_error(anon(Method::GET, "/missing"), 401, "unauthorized", "Authentication required.");
    assert_eq!(signup(&user("neko", "nyan", &[])).0, 401);

    set(&s, "chttpd", "require_valid_user", "false");
    assert_error(anon(Method::GET, "/missing"), 404, "not_found", "Database does not exist.");
    let refused = "You are not authorized to access this db.";
    assert_error(anon(Method::GET, "/closed/_all_docs"), 401, "unauthorized", refused);
    assert_error(anon(Method::PUT, "/created"), 401, "unauthorized", "You are not a server admin.");
    assert_error(
        anon(Method::GET, "/_all_dbs"),
        401,
        "unauthorized",
        "You are not a server admin.",
    );
    let (status, created) = signup(&user("neko", "nyan", &[]));
    assert_eq!(status, 201, "{created}");
    assert_eq!(session_as(&s, "neko", "nyan").1["userCtx"]["name"], "neko");
    let id = "/_users/org.couchdb.user:neko";
    assert_error(anon(Method::GET, id), 404, "not_found", "missing");
    let boss = signup(&user("inu", "wan", &["boss"]));
    assert_error(boss, 403, "forbidden", "Only _admin may set roles");
    let rev = created["rev"].as_str().unwrap();
    let takeover = json!({"_rev": rev, "name": "neko", "type": "user", "roles": [],
                          "password": "mine"});
    let (status, body) = send(s.anon_req(Method::PUT, id).json(&takeover));
    assert_eq!(
        (status, body["reason"].as_str()),
        (403, Some("You may only update your own user document."))
    );
    let (status, _) = anon(Method::DELETE, &format!("{id}?rev={rev}"));
    assert_eq!(status, 403);
    assert_eq!(session_as(&s, "neko", "nyan").0, 200, "the password is unchanged");
}

/// `[chttpd_auth] pbkdf2_prf` and `upgrade_hash_on_auth`: new passwords are hashed with
/// the configured function, and a login re-hashes a password stored with older settings,
/// keeping its salt (CouchDB's `couch_password_hasher`, `users_db_security_test.exs`).
#[test]
fn a_login_upgrades_a_hash_made_with_older_settings() {
    let s = Server::start_with(&FAST_HASH, &[]);
    assert_eq!(s.post("/_users", &user("tama", "neko", &[])).0, 201);
    let id = "org.couchdb.user:tama";
    let before = s.get_doc("_users", id);
    assert_eq!(
        (before["iterations"].as_u64(), before["pbkdf2_prf"].as_str()),
        (Some(10), Some("sha256"))
    );

    set(&s, "chttpd_auth", "iterations", "3");
    assert_eq!(session_as(&s, "tama", "neko").0, 200);
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(s.get_doc("_users", id)["iterations"], 10, "off by default: no upgrade");

    set(&s, "chttpd_auth", "upgrade_hash_on_auth", "true");
    assert_eq!(session_as(&s, "tama", "neko").0, 200);
    let upgraded = eventually_doc(&s, id, |doc| doc["iterations"] == 3);
    assert_eq!(upgraded["salt"], before["salt"], "the salt is kept");
    assert_ne!(upgraded["derived_key"], before["derived_key"]);
    assert!(upgraded.get("password").is_none() && upgraded.get("preserve_salt").is_none());
    assert_eq!(session_as(&s, "tama", "neko").0, 200);
    assert_eq!(session_as(&s, "tama", "inu").0, 401);

    // Off again, so that the login of the next write does not re-hash first (a `409`).
    set(&s, "chttpd_auth", "upgrade_hash_on_auth", "false");
    set(&s, "chttpd_auth", "pbkdf2_prf", "sha512");
    let mut changed = upgraded.clone();
    changed["password"] = json!("sakana");
    let (status, body) =
        send(s.user_req(Method::PUT, &format!("/_users/{id}"), "tama", "neko").json(&changed));
    assert_eq!(status, 201, "{body}");
    let stored = s.get_doc("_users", id);
    assert_eq!(stored["pbkdf2_prf"], "sha512");
    assert_eq!(stored["derived_key"].as_str().map(str::len), Some(128));
    assert_ne!(stored["salt"], upgraded["salt"], "a new password gets a new salt");
    assert_eq!(session_as(&s, "tama", "sakana").0, 200);
}

/// Polls `_users/{id}` until `done` holds.
fn eventually_doc(s: &Server, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    for _ in 0..100 {
        let doc = s.get_doc("_users", id);
        if done(&doc) {
            return doc;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("{id} never reached the expected state: {}", s.get_doc("_users", id));
}

/// The authentication database's design documents are its admins' alone: a view or list
/// is `403` (CouchDB's "Only administrators can view design docs in the users database.")
/// for users and anonymous clients alike, while a show runs on the reader's own document
/// (`users_db_security_test.exs`).
#[test]
fn only_admins_of_the_users_database_use_its_design_documents() {
    let s = Server::start_with(&FAST_HASH, &[]);
    set(&s, "chttpd", "require_valid_user", "false");
    assert_eq!(s.post("/_users", &user("tom", "couch", &[])).0, 201);
    assert_eq!(s.post("/_users", &user("spike", "foobar", &[])).0, 201);
    let ddoc = json!({"views": {"names": {"map": "function(doc) { emit(doc._id, null); }"}},
        "lists": {"all": "function(head, req) { var row; while (row = getRow()) { send(row.key + '\\n'); } }"},
        "shows": {"name": "function(doc, req) { return doc ? doc.name : 'none'; }"}});
    assert_eq!(s.put("/_users/_design/auth_ui", &ddoc).0, 201);
    let reason = "Only administrators can view design docs in the users database.";
    let as_tom = |path: &str| send(s.user_req(Method::GET, path, "tom", "couch"));
    for path in ["/_users/_design/auth_ui/_view/names", "/_users/_design/auth_ui/_list/all/names"] {
        assert_error(send(s.anon_req(Method::GET, path)), 403, "forbidden", reason);
        assert_error(as_tom(path), 403, "forbidden", reason);
    }
    assert_error(as_tom("/_users/_design/auth_ui"), 403, "forbidden", reason);
    let (status, rows) = s.get("/_users/_design/auth_ui/_view/names");
    assert_eq!((status, rows["total_rows"].as_u64()), (200, Some(2)), "{rows}");
    let own = s.user_req(
        Method::GET,
        "/_users/_design/auth_ui/_show/name/org.couchdb.user:tom",
        "tom",
        "couch",
    );
    let resp = own.send().expect("show");
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.text().expect("text"), "tom");
    let other = as_tom("/_users/_design/auth_ui/_show/name/org.couchdb.user:spike");
    assert_error(other, 404, "not_found", "missing");
}
