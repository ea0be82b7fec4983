//! What CouchDB 3.4's `chttpd` does to every request and answer (issue 16; its
//! `http_test.exs`, `basics_test.exs`, `method_override_test.exs`): absolute `Location`s
//! on `201`s built from `Host`, `X-Forwarded-Host` (or `chttpd/x_forwarded_host`'s header)
//! and `X-Forwarded-Proto`/`-Ssl`, with `couch_util:url_encode`; `Server`;
//! `X-Couch-Request-ID`; `+` in a path as a space (`chttpd/decode_plus_to_space`); and
//! `X-HTTP-Method-Override` on `POST`. The expected values are CouchDB 3.4.3's.

use reqwest::Method;
use reqwest::blocking::Response;
use serde_json::json;

use crate::harness::{Server, body_json, send};

fn header(resp: &Response, name: &str) -> Option<String> {
    resp.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_string)
}

fn location(resp: Response) -> Option<String> {
    assert_eq!(resp.status().as_u16(), 201, "created");
    header(&resp, "location")
}

#[test]
fn created_resources_have_absolute_locations() {
    let s = Server::start();
    let base = s.base().to_string();
    let put_db = s.req(Method::PUT, "/books").send().expect("PUT db");
    assert_eq!(location(put_db), Some(format!("{base}/books")));
    let forwarded = s.req(Method::PUT, "/books/b1").header("X-Forwarded-Host", "mysite.com");
    let resp = forwarded.json(&json!({"title": "吾輩は猫である"})).send().expect("PUT doc");
    assert_eq!(location(resp), Some("http://mysite.com/books/b1".to_string()));
    let https = s.req(Method::PUT, "/books/b2").header("X-Forwarded-Proto", "https");
    let resp = https.header("Host", "example.org:8443").json(&json!({})).send().expect("PUT");
    assert_eq!(location(resp), Some("https://example.org:8443/books/b2".to_string()));
    let ssl = s.req(Method::PUT, "/books/b3").header("X-Forwarded-Ssl", "on");
    let resp = ssl.json(&json!({})).send().expect("PUT");
    assert_eq!(location(resp), Some(format!("https{}/books/b3", &base[4..])));
    // `couch_util:url_encode`: a space is `%20`, `+` `%2B`, `/` `%2F`, and so is the `/`
    // of `_design/` and `_local/`.
    let post = s.req(Method::POST, "/books").json(&json!({"_id": "a b+c"})).send().expect("POST");
    assert_eq!(location(post), Some(format!("{base}/books/a%20b%2Bc")));
    let design = s.req(Method::PUT, "/books/_design/shelf").json(&json!({})).send().expect("PUT");
    assert_eq!(location(design), Some(format!("{base}/books/_design%2Fshelf")));
    let local = s.req(Method::PUT, "/books/_local/mark").json(&json!({})).send().expect("PUT");
    assert_eq!(location(local), Some(format!("{base}/books/_local%2Fmark")));
    let att = s.req(Method::PUT, "/books/docid%0A/%E8%A1%A8%E7%B4%99%2Fa%20b.txt");
    let resp = att.header("Content-Type", "text/plain").body("x").send().expect("PUT att");
    let want = format!("{base}/books/docid%0A/%E8%A1%A8%E7%B4%99%2Fa%20b.txt");
    assert_eq!(location(resp), Some(want));
    let batch = s.req(Method::PUT, "/books/b4?batch=ok").json(&json!({})).send().expect("PUT");
    assert_eq!((batch.status().as_u16(), header(&batch, "location")), (202, None));
}

#[test]
fn a_configured_forwarded_host_header_names_the_host() {
    let s = Server::start();
    s.create_db("books");
    let set = s.put("/_node/_local/_config/chttpd/x_forwarded_host", &json!("X-Host"));
    assert_eq!(set.0, 200);
    let put = s.req(Method::PUT, "/books/b1").header("X-Host", "mysite2.com");
    let resp = put.header("X-Forwarded-Host", "ignored.com").json(&json!({})).send().expect("PUT");
    assert_eq!(location(resp), Some("http://mysite2.com/books/b1".to_string()));
}

#[test]
fn answers_name_the_server_and_the_request() {
    let s = Server::start();
    let resp = s.req(Method::GET, "/_up").send().expect("GET");
    assert_eq!(header(&resp, "x-couchdb-body-time").as_deref(), Some("0"));
    let server = header(&resp, "server").unwrap_or_default();
    assert!(server.starts_with("CouchDB/3.4.3 (Bunko/"), "{server}");
    let id = header(&resp, "x-couch-request-id").unwrap_or_default();
    assert!(id.len() == 10 && id.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
    let given = s.req(Method::GET, "/_up").header("X-Couch-Request-ID", "my_id-1").send();
    assert_eq!(given.ok().and_then(|r| header(&r, "x-couch-request-id")), Some("my_id-1".into()));
    let bad = s.req(Method::GET, "/nothing").header("X-Couch-Request-ID", "bad!id").send();
    let bad = bad.expect("GET");
    assert_eq!(bad.status().as_u16(), 404, "errors carry them too");
    let id = header(&bad, "x-couch-request-id").unwrap_or_default();
    assert!(id.len() == 10 && id != "bad!id", "an invalid id is replaced: {id}");
}

/// JSONP, off by default; with `chttpd/allow_jsonp` a JSON answer, streamed or not, is
/// wrapped in the callback as `couch_httpd` does (`jsonp_test.exs`).
#[test]
fn jsonp_wraps_json_answers_in_the_callback_when_allowed() {
    let s = Server::start();
    s.create_db("books");
    s.put_doc("books", "b1", &json!({"title": "坊っちゃん"}));
    let get = |path: &str| {
        let resp = s.req(Method::GET, path).send().expect("GET");
        let kind = header(&resp, "content-type").unwrap_or_default();
        (resp.status().as_u16(), kind, resp.text().unwrap_or_default())
    };
    let (status, kind, body) = get("/books/b1?callback=cb");
    assert_eq!((status, kind.as_str()), (200, "application/json"), "off by default");
    assert!(body.starts_with('{'), "{body}");
    assert_eq!(s.put("/_node/_local/_config/chttpd/allow_jsonp", &json!("true")).0, 200);
    let (status, kind, body) = get("/books/b1?callback=cb");
    assert_eq!((status, kind.as_str()), (200, "application/javascript"));
    let inner = body.strip_prefix("/* CouchDB */cb(").and_then(|b| b.trim_end().strip_suffix(");"));
    let doc: serde_json::Value =
        serde_json::from_str(inner.unwrap_or_default()).unwrap_or_default();
    assert_eq!(doc["title"], "坊っちゃん", "{body}");
    let (_, _, feed) = get("/books/_changes?callback=feed");
    assert!(feed.starts_with("/* CouchDB */feed({\"results\""), "{feed}");
    let (status, _, bad) = get("/books/b1?callback=cb%22");
    assert_eq!(status, 400);
    assert_eq!(bad, r#"{"error":"bad_request","reason":"invalid_callback"}"#);
}

#[test]
fn plus_in_a_path_is_a_space_unless_configured() {
    let s = Server::start();
    s.create_db("books");
    let (status, body) = s.put("/books/test+doc+2", &json!({}));
    assert_eq!((status, &body["id"]), (201, &json!("test doc 2")));
    let (status, body) = s.put("/books/a%2Bb", &json!({}));
    assert_eq!((status, &body["id"]), (201, &json!("a+b")));
    let off = s.put("/_node/_local/_config/chttpd/decode_plus_to_space", &json!("false"));
    assert_eq!(off.0, 200);
    let (status, body) = s.put("/books/test+doc", &json!({}));
    assert_eq!((status, &body["id"]), (201, &json!("test+doc")));
}

#[test]
fn method_override_applies_to_post_only() {
    let s = Server::start();
    s.create_db("books");
    let put = s.req(Method::POST, "/books/fnord").header("X-HTTP-Method-Override", "PUT");
    let (status, created) = send(put.json(&json!({"title": "坊っちゃん"})));
    assert_eq!((status, &created["id"]), (201, &json!("fnord")));
    let rev = created["rev"].as_str().unwrap_or_default().to_string();
    let ignored = s.req(Method::GET, "/books/fnord").header("X-HTTP-Method-Override", "DELETE");
    assert_eq!(body_json(ignored.send().expect("GET"))["title"], "坊っちゃん");
    let delete = s.req(Method::POST, &format!("/books/fnord?rev={rev}"));
    let (status, _) = send(delete.header("X-HTTP-Method-Override", "DELETE"));
    assert_eq!(status, 200);
    assert_eq!(s.get("/books/fnord").0, 404);
}
