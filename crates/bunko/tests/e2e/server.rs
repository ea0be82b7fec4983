//! Server-level endpoints: `/`, `/_up`, `/_uuids`, `/_all_dbs`.

use reqwest::Method;
use serde_json::json;

use crate::harness::{Server, assert_error, assert_error_kind, send};

#[test]
fn welcome_says_couchdb_welcome_with_version_vendor_and_features() {
    let s = Server::start();
    // `GET /` is open to anonymous clients.
    let (status, body) = send(s.anon_req(Method::GET, "/"));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["couchdb"], "Welcome");
    assert!(body["version"].as_str().is_some_and(|v| !v.is_empty()), "version: {body}");
    assert!(body["vendor"]["name"].as_str().is_some_and(|v| !v.is_empty()), "vendor: {body}");
    let features = body["features"].as_array().unwrap_or_else(|| panic!("features: {body}"));
    assert!(features.iter().all(|f| f.is_string()), "features are strings: {body}");
    assert!(body["uuid"].is_string(), "server uuid: {body}");
}

#[test]
fn welcome_server_uuid_is_stable_across_requests() {
    let s = Server::start();
    let (_, a) = s.get("/");
    let (_, b) = s.get("/");
    assert_eq!(a["uuid"], b["uuid"]);
}

#[test]
fn up_is_ok_for_anonymous_clients() {
    let s = Server::start();
    let (status, body) = send(s.anon_req(Method::GET, "/_up"));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "ok");
}

#[test]
fn uuids_default_to_one_and_count_gives_that_many_distinct() {
    let s = Server::start();
    let (status, body) = s.get("/_uuids");
    assert_eq!(status, 200);
    let one = body["uuids"].as_array().expect("uuids");
    assert_eq!(one.len(), 1);
    assert_eq!(one[0].as_str().map(str::len), Some(32), "uuid is 32 hex chars: {body}");

    let (status, body) = s.get("/_uuids?count=1000");
    assert_eq!(status, 200);
    let many: Vec<&str> =
        body["uuids"].as_array().expect("uuids").iter().map(|u| u.as_str().unwrap()).collect();
    assert_eq!(many.len(), 1000);
    let distinct: std::collections::HashSet<_> = many.iter().collect();
    assert_eq!(distinct.len(), 1000, "no duplicate uuids");
    assert!(many.iter().all(|u| u.len() == 32 && u.bytes().all(|b| b.is_ascii_hexdigit())));
}

#[test]
fn uuids_count_over_1000_is_bad_request() {
    // couch_httpd_misc_handlers:handle_uuids_req: max_count 1000.
    let s = Server::start();
    assert_error(s.get("/_uuids?count=1001"), 400, "bad_request", "count parameter too large");
}

#[test]
fn uuids_responses_are_not_cacheable() {
    let s = Server::start();
    let resp = s.req(Method::GET, "/_uuids").send().unwrap();
    let cc = resp.headers().get("cache-control").map(|v| v.to_str().unwrap().to_string());
    assert!(cc.as_deref().is_some_and(|v| v.contains("no-cache")), "Cache-Control: {cc:?}");
}

#[test]
fn uuids_post_is_method_not_allowed() {
    let s = Server::start();
    let got = send(s.req(Method::POST, "/_uuids"));
    assert_error_kind(got, 405, "method_not_allowed");
}

#[test]
fn all_dbs_lists_sorted_names_with_limit_skip_and_ranges() {
    let s = Server::start();
    for db in ["people", "books", "messages", "readings", "authors"] {
        s.create_db(db);
    }
    // System databases (e.g. `_users`) may exist; look only at ours.
    let (status, all) = s.get("/_all_dbs");
    assert_eq!(status, 200);
    let ours: Vec<&str> = all
        .as_array()
        .expect("array")
        .iter()
        .map(|v| v.as_str().unwrap())
        .filter(|n| !n.starts_with('_'))
        .collect();
    assert_eq!(ours, ["authors", "books", "messages", "people", "readings"]);

    assert_eq!(s.get("/_all_dbs?limit=0"), (200, json!([])));
    assert_eq!(
        s.get("/_all_dbs?startkey=%22b%22&endkey=%22n%22"),
        (200, json!(["books", "messages"]))
    );
    assert_eq!(
        s.get("/_all_dbs?start_key=%22books%22&limit=2"),
        (200, json!(["books", "messages"]))
    );
    assert_eq!(
        s.get("/_all_dbs?startkey=%22books%22&skip=1&limit=2"),
        (200, json!(["messages", "people"]))
    );
    assert_eq!(
        s.get("/_all_dbs?descending=true&startkey=%22people%22&endkey=%22books%22"),
        (200, json!(["people", "messages", "books"]))
    );
    assert_eq!(
        s.get("/_all_dbs?startkey=%22books%22&endkey=%22people%22&inclusive_end=false"),
        (200, json!(["books", "messages"]))
    );
}

#[test]
fn all_dbs_requires_admin() {
    // CouchDB 3: [chttpd] admin_only_all_dbs = true.
    let s = Server::start();
    let got = send(s.anon_req(Method::GET, "/_all_dbs"));
    assert_error_kind(got, 401, "unauthorized");
}

#[test]
fn all_dbs_subpath_is_not_found() {
    // `_all_dbs/_all_docs` is not a database (basics_test.exs).
    let s = Server::start();
    let got = s.get("/_all_dbs/_all_docs");
    assert_error_kind(got, 404, "not_found");
}
