//! `_design/{d}/_rewrite/…` (issue 16): rewrite rules and rewrite functions, as CouchDB
//! 3.4's `chttpd_rewrite` serves them (its `rewrite_test.exs` and `rewrite_js_test.exs`).
//! Every expected answer here is CouchDB 3.4.3's for the same requests.

use reqwest::Method;
use serde_json::{Value, json};

use crate::harness::{Server, assert_error, send};

const DB: &str = "books";

fn set_up(s: &Server) {
    s.create_db(DB);
    let rules = json!({
        "_attachments": {"about.txt": {"content_type": "text/plain", "data": "5pu45bqr"}},
        "rewrites": [
            {"from": "about", "to": "about.txt"},
            {"from": "book/:id", "to": "../../:id", "method": "GET"},
            {"from": "by/:author", "to": "_view/by_author",
             "query": {"key": ":author", "include_docs": ":docs"}, "formats": {"docs": "bool"}},
            {"from": "year/:y", "to": "_view/by_year", "query": {"key": ":y"},
             "formats": {"y": "int"}},
            {"from": "all/*", "to": "../../*"}
        ],
        "views": {
            "by_author": {"map": "function(doc) { if (doc.author) emit(doc.author, doc.title); }"},
            "by_year": {"map": "function(doc) { if (doc.year) emit(doc.year, doc.title); }"}
        }
    });
    s.put_doc(DB, "_design/books", &rules);
    s.put_doc(DB, "_design/up", &json!({"rewrites": [{"from": "up", "to": "../../../_uuids"}]}));
    s.put_doc(DB, "_design/none", &json!({}));
    let function = "function(req) {
        if (req.path[4] == 'code') return {code: 418, body: 'teapot', headers: {'X-Book': 'yes'}};
        if (req.path[4] == 'nothing') return;
        if (req.path[4] == 'throw') throw({forbidden: 'no'});
        if (req.path[4] == 'nopath') return {method: 'GET'};
        if (req.path[4] == 'loop') return '_rewrite/loop';
        return {path: '../../' + req.path.slice(4).join('/'), query: {revs: 'true'}};
    }";
    s.put_doc(DB, "_design/js", &json!({"rewrites": function}));
    s.put_doc(DB, "b1", &json!({"title": "吾輩は猫である", "author": "夏目漱石", "year": 1905}));
    s.put_doc(DB, "b2", &json!({"title": "坊っちゃん", "author": "夏目漱石", "year": 1906}));
    s.put_doc(DB, "a b", &json!({"title": "space"}));
}

fn get(s: &Server, path: &str) -> (u16, String, String) {
    let resp = send_raw(s, Method::GET, path);
    let kind = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let status = resp.status().as_u16();
    (status, kind, resp.text().unwrap_or_default())
}

fn send_raw(s: &Server, method: Method, path: &str) -> reqwest::blocking::Response {
    s.req(method, &format!("/{DB}/_design/{path}")).send().expect("request")
}

#[test]
fn rules_rewrite_to_attachments_documents_and_views() {
    let s = Server::start();
    set_up(&s);
    let about = get(&s, "books/_rewrite/about");
    assert_eq!(about, (200, "text/plain".to_string(), "書庫".to_string()));
    let (status, _, body) = get(&s, "books/_rewrite/book/b1");
    let doc: Value = serde_json::from_str(&body).unwrap_or_default();
    assert_eq!((status, &doc["title"]), (200, &json!("吾輩は猫である")));
    let put =
        send(s.req(Method::PUT, &format!("/{DB}/_design/books/_rewrite/book/b1")).json(&json!({})));
    assert_error(put, 404, "not_found", "missing");
    let (status, _, body) = get(&s, "books/_rewrite/year/1906");
    let rows: Value = serde_json::from_str(&body).unwrap_or_default();
    let want = json!({"total_rows": 2, "offset": 1,
        "rows": [{"id": "b2", "key": 1906, "value": "坊っちゃん"}]});
    assert_eq!((status, rows), (200, want), "`formats` made the key an integer");
    // A binding without a value stays `:docs`, which the view refuses as CouchDB's does.
    let (status, _, body) = get(&s, "books/_rewrite/by/%E5%A4%8F%E7%9B%AE%E6%BC%B1%E7%9F%B3");
    let error: Value = serde_json::from_str(&body).unwrap_or_default();
    let want =
        json!({"error": "query_parse_error", "reason": "Invalid boolean parameter: \":docs\""});
    assert_eq!((status, error), (400, want));
    // `*` carries the rest of the path; `+` in a path is a space, as in CouchDB.
    let (status, _, body) = get(&s, "books/_rewrite/all/a+b");
    let doc: Value = serde_json::from_str(&body).unwrap_or_default();
    assert_eq!((status, &doc["_id"]), (200, &json!("a b")));
}

#[test]
fn unmatched_insecure_and_missing_rewrites_fail_as_in_couchdb() {
    let s = Server::start();
    set_up(&s);
    let path = |p: &str| format!("/{DB}/_design/{p}");
    assert_error(s.get(&path("books/_rewrite/nomatch")), 404, "not_found", "missing");
    let up = s.get(&path("up/_rewrite/up"));
    assert_error(up, 500, "insecure_rewrite_rule", "too many ../.. segments");
    assert_error(s.get(&path("none/_rewrite/x")), 404, "rewrite_error", "Invalid path.");
    assert_error(s.get(&path("missing/_rewrite/x")), 404, "not_found", "missing");
}

#[test]
fn rewrite_functions_answer_paths_or_their_own_response() {
    let s = Server::start();
    set_up(&s);
    let (status, _, body) = get(&s, "js/_rewrite/b1");
    let doc: Value = serde_json::from_str(&body).unwrap_or_default();
    assert_eq!((status, &doc["_revisions"]["start"]), (200, &json!(1)), "query revs=true");
    let resp = send_raw(&s, Method::GET, "js/_rewrite/code");
    assert_eq!(resp.status().as_u16(), 418);
    assert_eq!(resp.headers().get("x-book").and_then(|v| v.to_str().ok()), Some("yes"));
    assert!(resp.headers().get("content-type").is_none(), "only the function's headers");
    assert_eq!(resp.text().unwrap_or_default(), "teapot");
    let path = |p: &str| format!("/{DB}/_design/js/_rewrite/{p}");
    assert_error(s.get(&path("nothing")), 404, "rewrite_error", "Invalid path.");
    let nopath = s.get(&path("nopath"));
    assert_error(nopath, 500, "rewrite_error", "Rewrite result must produce a new path.");
    let thrown = s.get(&path("throw"));
    let reason = "function raised error: [object Object] \nstacktrace: undefined";
    assert_error(thrown, 500, "rewrite_error", reason);
    // A rewrite to itself stops at `chttpd/rewrite_limit` (100) without harm.
    let looped = s.get(&path("loop"));
    assert_error(looped, 400, "bad_request", "Exceeded rewrite recursion limit");
    assert_eq!(s.get("/").0, 200, "the server still answers");
}
