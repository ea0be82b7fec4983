//! What the web console (issue 19) relies on, over plain HTTP so that it is checked even where
//! no browser can run: `/_utils/` serves the login page to anonymous visitors and the console
//! only after a login; `_stats` and `_prometheus` count requests in CouchDB's shapes;
//! `GET /{db}/_partitions` lists every partition's counters.

use reqwest::Method;
use serde_json::json;

use crate::harness::{ADMIN, ADMIN_PASSWORD, Server, auth_session_cookie, send};

fn text(s: &Server, path: &str, cookie: Option<&str>) -> (u16, String, String) {
    let mut req = s.anon_req(Method::GET, path).header("Accept", "text/html");
    if let Some(cookie) = cookie {
        req = req.header("Cookie", cookie);
    }
    let resp = req.send().expect("request");
    let status = resp.status().as_u16();
    let kind = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("");
    let kind = kind.to_string();
    (status, kind, resp.text().unwrap_or_default())
}

fn login(s: &Server) -> String {
    let resp = s
        .anon_req(Method::POST, "/_session")
        .json(&json!({"name": ADMIN, "password": ADMIN_PASSWORD}))
        .send()
        .expect("login");
    assert_eq!(resp.status().as_u16(), 200);
    auth_session_cookie(&resp).expect("an AuthSession cookie")
}

#[test]
fn console_is_the_login_page_until_a_session_exists() {
    let s = Server::start();
    let resp = s.anon_req(Method::GET, "/_utils").send().expect("request");
    assert_eq!(resp.status().as_u16(), 301, "CouchDB redirects /_utils to /_utils/");
    assert_eq!(resp.headers()["location"], "/_utils/");

    let (status, kind, page) = text(&s, "/_utils/", None);
    assert_eq!((status, kind.as_str()), (200, "text/html; charset=utf-8"));
    assert!(page.contains("id=\"login-form\"") && !page.contains("console.js"), "{page}");
    for asset in ["/_utils/login.js", "/_utils/console.css"] {
        assert_eq!(text(&s, asset, None).0, 200, "{asset} is part of the login page");
    }
    let (status, _, body) = text(&s, "/_utils/console.js", None);
    assert_eq!(status, 401, "the console's code needs a login: {body}");
    assert!(body.contains("unauthorized"));

    let cookie = login(&s);
    let (status, _, page) = text(&s, "/_utils/", Some(&cookie));
    assert_eq!(status, 200);
    assert!(page.contains("/_utils/console.js") && !page.contains("login-form"), "{page}");
    let (status, kind, code) = text(&s, "/_utils/console.js", Some(&cookie));
    assert_eq!((status, kind.as_str()), (200, "text/javascript"));
    assert!(code.contains("function route()"));
    // Writing to the console's paths is refused like any unknown method.
    let put = s.req(Method::PUT, "/_utils/console.js").body("x");
    assert_eq!(send(put).0, 405);
}

#[test]
fn stats_count_requests_in_couchdbs_shape() {
    let s = Server::start();
    s.create_db("kura");
    s.put_doc("kura", "d1", &json!({"title": "吾輩は猫である"}));
    assert_eq!(s.get("/kura/missing").0, 404);
    let (status, stats) = s.get("/_node/_local/_stats");
    assert_eq!(status, 200, "{stats}");
    let requests = stats["httpd"]["requests"]["value"].as_u64().unwrap_or(0);
    assert!(requests >= 3, "{stats}");
    assert_eq!(stats["httpd"]["requests"]["type"], "counter");
    assert!(stats["httpd_request_methods"]["PUT"]["value"].as_u64() >= Some(2));
    assert!(stats["httpd_status_codes"]["404"]["value"].as_u64() >= Some(1));
    assert!(stats["httpd_status_codes"]["201"]["value"].as_u64() >= Some(2));
    let time = &stats["couchdb"]["request_time"];
    assert_eq!(time["type"], "histogram");
    assert!(time["value"]["n"].as_u64() >= Some(3), "{time}");
    assert_eq!(time["value"]["percentile"][0][0], 50);
    // The document written, and `_users`' `_design/_auth`, written at start-up.
    assert_eq!(stats["couchdb"]["database_writes"]["value"], 2);
    assert!(stats["bunko"]["storage_bytes"]["value"].as_u64() > Some(0));
    let (_, again) = s.get("/_node/bunko@127.0.0.1/_stats");
    assert!(again["httpd"]["requests"]["value"].as_u64() > Some(requests), "counters grow");

    let resp = s.req(Method::GET, "/_node/_local/_prometheus").send().expect("request");
    assert!(resp.headers()["content-type"].to_str().unwrap_or("").starts_with("text/plain"));
    let body = resp.text().unwrap_or_default();
    assert!(body.contains("# TYPE couchdb_httpd_requests_total counter\n"), "{body}");
    assert!(body.contains("couchdb_httpd_request_methods{method=\"PUT\"} "), "{body}");
    assert!(body.contains("couchdb_request_time_seconds{quantile=\"0.5\"} "), "{body}");
    assert!(body.contains("\ncouchdb_database_writes_total 2\n"), "{body}");

    assert_eq!(s.get("/_node/other@host/_stats").0, 404);
    let anon = send(s.anon_req(Method::GET, "/_node/_local/_stats"));
    assert_eq!(anon.0, 401, "{}", anon.1);
}

/// What every request passes before its handler, in CouchDB's order: authentication
/// first (an anonymous request is `401` whatever else is wrong with it), then the UTF-8
/// and content-type checks; each refusal is counted like a handler's answer.
#[test]
fn refusals_before_a_handler_keep_their_order_and_are_counted() {
    let s = Server::start();
    s.create_db("kura");
    let anon_bad_path = send(s.anon_req(Method::GET, "/kura/%FF"));
    assert_eq!(anon_bad_path.0, 401, "{}", anon_bad_path.1);
    assert_eq!(anon_bad_path.1["error"], "unauthorized");
    let bad_path = send(s.req(Method::GET, "/kura/%FF"));
    assert_eq!(bad_path.0, 400, "{}", bad_path.1);
    assert_eq!(bad_path.1["reason"], "invalid UTF-8 in the request path");
    let bad_query = send(s.req(Method::GET, "/kura/_all_docs?limit%FF=1"));
    assert_eq!(bad_query.0, 400, "{}", bad_query.1);
    let find = s.req(Method::POST, "/kura/_find").header("Content-Type", "text/plain");
    let text = send(find.body(r#"{"selector": {}}"#));
    assert_eq!((text.0, text.1["error"].as_str()), (415, Some("bad_content_type")), "{}", text.1);
    let anon_text = s.anon_req(Method::POST, "/kura/_find").header("Content-Type", "text/plain");
    assert_eq!(send(anon_text.body("{}")).0, 401, "authentication comes first");
    let (_, stats) = s.get("/_node/_local/_stats");
    let codes = &stats["httpd_status_codes"];
    assert_eq!(codes["401"]["value"], 2, "{stats}");
    assert_eq!(codes["400"]["value"], 2, "{stats}");
    assert_eq!(codes["415"]["value"], 1, "{stats}");
    // A read is answered with no `Location`; a write still gets its absolute one.
    s.put_doc("kura", "d1", &json!({"title": "草枕"}));
    let read = s.req(Method::GET, "/kura/d1").send().expect("GET");
    assert_eq!(read.status().as_u16(), 200);
    assert!(read.headers().get("location").is_none());
    assert!(read.headers().get("x-couch-request-id").is_some());
    let write = s.req(Method::PUT, "/kura/d2").json(&json!({})).send().expect("PUT");
    let location = write.headers().get("location").and_then(|v| v.to_str().ok());
    assert_eq!(location, Some(format!("{}/kura/d2", s.base()).as_str()));
}

#[test]
fn partitions_lists_every_partitions_counters() {
    let s = Server::start();
    assert_eq!(s.put_empty("/kura?partitioned=true").0, 201);
    let docs: Vec<_> = [("tokyo", 3), ("osaka", 1)]
        .iter()
        .flat_map(|(p, n)| (0..*n).map(move |i| json!({"_id": format!("{p}:{i}"), "n": i})))
        .collect();
    assert_eq!(s.post("/kura/_bulk_docs", &json!({"docs": docs})).0, 201);
    let (status, body) = s.get("/kura/_partitions");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["truncated"], false);
    let list = body["partitions"].as_array().cloned().unwrap_or_default();
    let counts: Vec<_> =
        list.iter().map(|p| (p["partition"].clone(), p["doc_count"].clone())).collect();
    assert_eq!(counts, [(json!("osaka"), json!(1)), (json!("tokyo"), json!(3))]);
    let (_, one) = s.get("/kura/_partition/tokyo");
    assert_eq!(list[1]["sizes"], one["sizes"], "the same counters as the partition's own info");
    let (_, limited) = s.get("/kura/_partitions?limit=1");
    assert_eq!(
        (limited["partitions"].as_array().map(Vec::len), &limited["truncated"]),
        (Some(1), &json!(true))
    );

    s.create_db("plain");
    let (status, body) = s.get("/plain/_partitions");
    assert_eq!((status, &body["reason"]), (400, &json!("database is not partitioned")));
    assert_eq!(s.get("/kura/_partitions?limit=x").0, 400);
}
