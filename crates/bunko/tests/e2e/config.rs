//! `/_node/{node}/_config` (issue 16, point 1): CouchDB 3.4's config API, applied at run time
//! and persisted in the data directory (`chttpd_node.erl` gives the shapes).

use reqwest::Method;
use serde_json::{Value, json};

use crate::harness::{Server, assert_error, assert_error_kind, send};

const CONFIG: &str = "/_node/_local/_config";

#[test]
fn the_node_answers_its_name_and_settings_as_strings() {
    let s = Server::start();
    let (status, node) = s.get("/_node/_local");
    assert_eq!((status, &node), (200, &json!({"name": "bunko@127.0.0.1"})));
    assert_eq!(s.get("/_node/bunko@127.0.0.1").1, node);
    let (status, all) = s.get(CONFIG);
    assert_eq!(status, 200);
    assert_eq!(all["couchdb"]["max_document_size"], "8000000", "{all}");
    assert_eq!(all["chttpd"]["max_http_request_size"], json!((64u64 << 20).to_string()));
    let admin = all["admins"]["admin"].as_str().unwrap_or_default();
    assert!(admin.starts_with("-pbkdf2:sha256-") && !admin.contains("secret"), "{admin}");
    let (_, section) = s.get(&format!("{CONFIG}/chttpd_auth"));
    assert_eq!(section["timeout"], "600");
    assert_eq!(s.get(&format!("{CONFIG}/chttpd_auth/timeout")).1, json!("600"));
    let missing = s.get(&format!("{CONFIG}/couchdb/nothing_here"));
    assert_error(missing, 404, "not_found", "unknown_config_value");
    assert_error(s.get("/_node/other@host/_config"), 404, "not_found", "no such node: other@host");
    assert_eq!(s.post(&format!("{CONFIG}/_reload"), &json!({})).1, json!({"ok": true}));
    // `_versions` names the JavaScript engine as CouchDB 3.4.3 with QuickJS does.
    let (status, versions) = s.get("/_node/_local/_versions");
    assert_eq!((status, &versions["javascript_engine"]), (200, &json!({"name": "quickjs"})));
    let post = s.post("/_node/_local/_versions", &json!({}));
    assert_error(post, 405, "method_not_allowed", "Only GET allowed");
}

/// `--node-name` (CouchDB's `-name`) renames the node: `/_node/{name}` and `/_membership`
/// follow it, as CouchDB's test suite expects of `node1@127.0.0.1`; `_config` shows where
/// the server keeps its data and listens.
#[test]
fn the_node_name_is_configurable() {
    let s = Server::start_with(&["--node-name", "node1@127.0.0.1"], &[]);
    let node = json!(["node1@127.0.0.1"]);
    assert_eq!(s.get("/_membership"), (200, json!({"all_nodes": node, "cluster_nodes": node})));
    assert_eq!(s.get("/_node/_local"), (200, json!({"name": "node1@127.0.0.1"})));
    let (status, all) = s.get("/_node/node1@127.0.0.1/_config");
    assert_eq!(status, 200);
    let port = s.base().rsplit(':').next().unwrap_or_default().trim_end_matches('/');
    assert_eq!(all["chttpd"]["port"], json!(port), "{all}");
    assert_eq!(all["chttpd"]["bind_address"], "127.0.0.1");
    assert_eq!(all["couchdb"]["database_dir"], json!(s.data_dir().display().to_string()));
    let old = s.get("/_node/bunko@127.0.0.1/_config");
    assert_error(old, 404, "not_found", "no such node: bunko@127.0.0.1");
}

/// `/_membership` names the node whose `_config` a client then sets: CouchDB's test suite
/// reads it before every setting it changes (`Couch.DBTest.set_config_raw`).
#[test]
fn membership_names_this_node_to_admins_only() {
    let s = Server::start();
    let node = json!(["bunko@127.0.0.1"]);
    assert_eq!(s.get("/_membership"), (200, json!({"all_nodes": node, "cluster_nodes": node})));
    assert_error_kind(send(s.anon_req(Method::GET, "/_membership")), 401, "unauthorized");
    let post = s.post("/_membership", &json!({}));
    assert_error(post, 405, "method_not_allowed", "Only GET allowed");
}

#[test]
fn a_changed_limit_applies_at_once_and_after_a_restart() {
    let mut s = Server::start();
    s.create_db("files");
    let big = json!({"text": "x".repeat(2000)});
    assert_eq!(s.put("/files/before", &big).0, 201);
    let path = format!("{CONFIG}/couchdb/max_document_size");
    assert_eq!(s.put(&path, &json!("1000")).1, json!("8000000"));
    let refused = s.put("/files/big", &big);
    assert_eq!((refused.0, refused.1["error"].as_str()), (413, Some("document_too_large")));
    // Unknown settings are kept, as CouchDB keeps them.
    assert_eq!(s.put(&format!("{CONFIG}/vendor/flavour"), &json!("plain")).1, json!(""));
    let request_limit = format!("{CONFIG}/chttpd/max_http_request_size");
    s.put(&request_limit, &json!("3000"));
    let body = json!({"text": "y".repeat(5000)});
    assert_eq!(s.post("/files/_bulk_docs", &json!({"docs": [body]})).1["error"], "too_large");
    assert_eq!(s.put_empty("/parts?partitioned=true").0, 201);
    s.put(&format!("{CONFIG}/query_server_config/partition_query_limit"), &json!("10"));
    let reason = "Limit is too large, must not exceed 10";
    let over = s.get("/parts/_partition/p/_all_docs?limit=11");
    assert_error(over, 400, "query_parse_error", reason);
    assert!(s.terminate());
    s.restart();
    assert_eq!(s.put("/files/big", &big).0, 413);
    let over = s.get("/parts/_partition/p/_all_docs?limit=11");
    assert_error(over, 400, "query_parse_error", reason);
    assert_eq!(s.get(&path).1, json!("1000"));
    assert_eq!(s.get(&format!("{CONFIG}/vendor/flavour")).1, json!("plain"));
    // Deleting the change brings back CouchDB's default.
    assert_eq!(s.delete(&path).1, json!("1000"));
    assert_error(s.delete(&path), 404, "not_found", "unknown_config_value");
    assert_eq!(s.put("/files/big", &big).0, 201);
}

#[test]
fn values_must_be_json_strings_of_the_right_kind() {
    let s = Server::start();
    let path = format!("{CONFIG}/couchdb/max_document_size");
    assert_error(s.put(&path, &json!(1000)), 400, "bad_request", "a JSON string expected");
    assert_eq!(s.put(&path, &json!("lots")).0, 400);
    let blacklisted = s.put(&format!("{CONFIG}/query_servers/js"), &json!("/bin/sh"));
    let reason = "Config section blacklisted for modification over HTTP API.";
    assert_error(blacklisted, 403, "forbidden", reason);
    assert_eq!(s.get(&path).1, json!("8000000"));
}

#[test]
fn an_admin_added_through_config_logs_in_and_others_are_refused() {
    let mut s = Server::start_with(&["--pbkdf2-iterations", "10"], &[]);
    let path = format!("{CONFIG}/admins/root");
    let (status, old) = s.put(&path, &json!("s3cret"));
    assert_eq!((status, old), (200, json!("")));
    let stored = s.get(&path).1;
    let stored = stored.as_str().unwrap_or_default();
    assert!(stored.starts_with("-pbkdf2:sha256-") && stored.ends_with(",10"), "{stored}");
    let (status, session) = send(s.user_req(Method::GET, "/_session", "root", "s3cret"));
    assert_eq!(status, 200);
    assert_eq!(session["userCtx"]["roles"], json!(["_admin"]));
    assert_eq!(send(s.user_req(Method::PUT, "/made_by_root", "root", "s3cret")).0, 201);
    let user = json!({"_id": "org.couchdb.user:bob", "name": "bob", "type": "user",
                      "roles": [], "password": "pw"});
    assert_eq!(s.put("/_users/org.couchdb.user:bob", &user).0, 201);
    let not_admin = "You are not a server admin.";
    let as_bob = |method: Method, path: &str| send(s.user_req(method, path, "bob", "pw"));
    assert_error(as_bob(Method::GET, CONFIG), 401, "unauthorized", not_admin);
    let put =
        send(s.user_req(Method::PUT, &format!("{CONFIG}/admins/bob"), "bob", "pw").json(&"x"));
    assert_error(put, 401, "unauthorized", not_admin);
    let anon = send(s.anon_req(Method::GET, "/_node/_local"));
    assert_eq!(anon.0, 401);
    assert!(s.terminate());
    s.restart();
    let (status, _) = send(s.user_req(Method::GET, "/_session", "root", "s3cret"));
    assert_eq!(status, 200);
    assert_eq!(s.delete(&path).0, 200);
    let gone = send(s.user_req(Method::PUT, "/made_again", "root", "s3cret"));
    assert_eq!(gone.0, 401, "{}", gone.1);
    let admins: Value = s.get(&format!("{CONFIG}/admins")).1;
    assert_eq!(admins.as_object().map(|a| a.len()), Some(1), "{admins}");
}
