//! Content codings (issue 12): request bodies sent with `Content-Encoding: gzip|deflate`, as
//! the Cloudant SDKs send them, are inflated before parsing on every route, with the size
//! limit on the inflated bytes; unknown codings and corrupt streams get CouchDB's errors
//! (`chttpd:maybe_decompress`); answers are gzipped for `Accept-Encoding: gzip` except the
//! waiting `_changes` feeds, whose lines must arrive as they are written.

use std::io::{BufRead, BufReader, Read, Write};

use flate2::Compression;
use flate2::write::{GzEncoder, ZlibEncoder};
use reqwest::Method;
use serde_json::{Value, json};

use crate::harness::{Server, assert_error, body_json, send};
use crate::raw_targets::{auth, exchange};

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = GzEncoder::new(Vec::new(), Compression::fast());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

fn deflate(bytes: &[u8]) -> Vec<u8> {
    let mut enc = ZlibEncoder::new(Vec::new(), Compression::fast());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

/// Sends `body` as JSON with the given `Content-Encoding`.
fn encoded(s: &Server, method: Method, path: &str, coding: &str, body: Vec<u8>) -> (u16, Value) {
    send(
        s.req(method, path)
            .header("Content-Type", "application/json")
            .header("Content-Encoding", coding)
            .body(body),
    )
}

#[test]
fn gzip_and_deflate_bodies_are_inflated_on_every_body_route() {
    let s = Server::start();
    s.create_db("db");
    let doc = json!({"name": "Azure Cosmos DB 101", "pub-id": "mspress"});
    let (status, put) =
        encoded(&s, Method::PUT, "/db/book", "gzip", gzip(doc.to_string().as_bytes()));
    assert_eq!(status, 201, "{put}");
    assert_eq!(s.get_doc("db", "book")["name"], "Azure Cosmos DB 101");

    let bulk = json!({"docs": [{"_id": "thomas", "firstName": "Thomas"}, {"_id": "x", "n": 1}]});
    let (status, res) = encoded(
        &s,
        Method::POST,
        "/db/_bulk_docs",
        "deflate",
        deflate(bulk.to_string().as_bytes()),
    );
    assert_eq!(status, 201, "{res}");
    assert_eq!(s.get_doc("db", "thomas")["firstName"], "Thomas");

    let find = json!({"selector": {"firstName": "Thomas"}, "fields": ["_id"]});
    let (status, found) =
        encoded(&s, Method::POST, "/db/_find", "gzip", gzip(find.to_string().as_bytes()));
    assert_eq!(status, 200, "{found}");
    assert_eq!(found["docs"], json!([{"_id": "thomas"}]));

    let keys = json!({"keys": ["x", "book"]});
    let (status, rows) =
        encoded(&s, Method::POST, "/db/_all_docs", "identity", keys.to_string().into_bytes());
    assert_eq!(status, 200, "{rows}");
    let ids: Vec<&Value> = rows["rows"].as_array().unwrap().iter().map(|r| &r["id"]).collect();
    assert_eq!(ids, [&json!("x"), &json!("book")]);
}

#[test]
fn unknown_content_encoding_gets_415_and_changes_nothing() {
    let s = Server::start();
    s.create_db("db");
    let got = encoded(&s, Method::PUT, "/db/a", "br", b"{}".to_vec());
    assert_error(got, 415, "bad_content_type", "br is not a supported content encoding.");
    assert_eq!(s.get("/db/a").0, 404);
}

#[test]
fn truncated_or_corrupt_gzip_gets_400_and_changes_nothing() {
    let s = Server::start();
    s.create_db("db");
    let full = gzip(json!({"n": "x".repeat(10_000)}).to_string().as_bytes());
    let truncated = full[..full.len() / 2].to_vec();
    let reason = "Request body is not properly gzipped.";
    assert_error(encoded(&s, Method::PUT, "/db/a", "gzip", truncated), 400, "bad_request", reason);
    let garbage = b"{\"this is\": \"not gzip\"}".to_vec();
    assert_error(encoded(&s, Method::PUT, "/db/a", "gzip", garbage), 400, "bad_request", reason);
    assert_eq!(s.get("/db/a").0, 404);
}

/// 100 MB of JSON compressed under 1 MB: refused by the default 64 MiB request limit counted
/// on the inflated bytes, and the server keeps serving.
#[test]
fn hundred_megabytes_inflated_from_under_one_megabyte_get_413() {
    let s = Server::start();
    s.create_db("db");
    let mut enc = GzEncoder::new(Vec::new(), Compression::best());
    enc.write_all(b"{\"padding\": \"").unwrap();
    let block = vec![b'a'; 1 << 20];
    for _ in 0..100 {
        enc.write_all(&block).unwrap();
    }
    enc.write_all(b"\"}").unwrap();
    let body = enc.finish().unwrap();
    assert!(body.len() < 1 << 20, "compressed to {} bytes", body.len());
    // Over a raw socket: the answer comes before the body is read whole, and the server
    // then closes; an HTTP client library may report the close instead of the answer.
    let mut request = format!(
        "PUT /db/bomb HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{}Content-Type: application/json\r\n\
         Content-Encoding: gzip\r\nContent-Length: {}\r\n\r\n",
        auth(),
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(&body);
    let got = exchange(&s, &request);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].status, 413);
    assert_eq!(
        got[0].body,
        json!({"error": "too_large", "reason": "the request entity is too large"})
    );
    assert_eq!(s.get("/db/bomb").0, 404);
    assert_eq!(s.get("/_up").0, 200);
}

/// A small bomb against a small limit: the inflated size decides, not the bytes on the wire.
#[test]
fn gzip_bomb_is_refused_by_the_inflated_size_limit() {
    let s = Server::start_with(&["--max-request-size", "100000"], &[]);
    s.create_db("db");
    let inflated = format!("{{\"z\": \"{}\"}}", "0".repeat(5_000_000));
    let body = gzip(inflated.as_bytes());
    assert!(body.len() < 100_000);
    let got = encoded(&s, Method::POST, "/db/_bulk_docs", "gzip", body);
    assert_error(got, 413, "too_large", "the request entity is too large");
    // Just under the limit inflated passes.
    let small = json!({"z": "0".repeat(90_000)}).to_string();
    assert_eq!(encoded(&s, Method::PUT, "/db/ok", "gzip", gzip(small.as_bytes())).0, 201);
}

#[test]
fn large_answers_are_gzipped_for_accept_encoding_gzip() {
    let s = Server::start();
    s.create_db("db");
    let docs: Vec<Value> =
        (0..200).map(|i| json!({"_id": format!("doc-{i:04}"), "n": i})).collect();
    assert_eq!(s.post("/db/_bulk_docs", &json!({"docs": docs})).0, 201);
    let plain = s.get("/db/_all_docs?include_docs=true").1;
    let resp = s
        .req(Method::GET, "/db/_all_docs?include_docs=true")
        .header("Accept-Encoding", "gzip")
        .send()
        .unwrap();
    assert_eq!(resp.headers()["content-encoding"], "gzip");
    let mut text = String::new();
    flate2::read::GzDecoder::new(resp).read_to_string(&mut text).unwrap();
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), plain);
    // A small answer is sent as it is.
    let resp = s.req(Method::GET, "/db/doc-0001").header("Accept-Encoding", "gzip").send();
    let resp = resp.unwrap();
    assert!(resp.headers().get("content-encoding").is_none());
    assert_eq!(body_json(resp)["n"], 1);
}

/// A continuous feed is never held back by the compressor: its first line arrives while the
/// feed is still open (the request has no timeout, so only an unbuffered line can arrive).
#[test]
fn continuous_changes_lines_arrive_with_accept_encoding_gzip() {
    let s = Server::start();
    s.create_db("db");
    s.put_doc("db", "a", &json!({"n": 1}));
    let resp = s
        .req(Method::GET, "/db/_changes?feed=continuous&since=0&heartbeat=10000")
        .header("Accept-Encoding", "gzip")
        .send()
        .unwrap();
    assert!(resp.headers().get("content-encoding").is_none());
    let mut line = String::new();
    BufReader::new(resp).read_line(&mut line).unwrap();
    let change: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(change["id"], "a");
}
