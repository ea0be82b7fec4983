//! Request lines exactly as `curl -g` sends the URLs of CouchDB's and Cloudant's docs (issue
//! 12): raw `"`, `[`, `]`, `{`, `}`, `|`, `\`, `^`, `` ` `` and UTF-8 in path and query, over
//! raw sockets; keep-alive and pipelined requests; malformed requests answered with JSON.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};

use crate::harness::{ADMIN, ADMIN_PASSWORD, Server, enc};

/// One parsed response: status, headers (lowercased names) and the JSON body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

fn connect(s: &Server) -> TcpStream {
    let addr = s.base().trim_start_matches("http://");
    let tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    tcp
}

pub fn auth() -> String {
    let token =
        base64::engine::general_purpose::STANDARD.encode(format!("{ADMIN}:{ADMIN_PASSWORD}"));
    format!("Authorization: Basic {token}\r\n")
}

/// A GET request head with the target sent byte for byte.
fn get(target: &[u8], last: bool) -> Vec<u8> {
    let mut req = b"GET ".to_vec();
    req.extend_from_slice(target);
    let close = if last { "Connection: close\r\n" } else { "" };
    req.extend_from_slice(format!(" HTTP/1.1\r\nHost: x\r\n{}{close}\r\n", auth()).as_bytes());
    req
}

/// Sends `bytes` and reads every response until the server closes the connection.
pub fn exchange(s: &Server, bytes: &[u8]) -> Vec<Answer> {
    let mut tcp = connect(s);
    tcp.write_all(bytes).unwrap();
    let mut raw = Vec::new();
    tcp.read_to_end(&mut raw).unwrap();
    parse_all(&raw)
}

fn parse_all(mut raw: &[u8]) -> Vec<Answer> {
    let mut answers = Vec::new();
    while !raw.is_empty() {
        let end = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("head end") + 4;
        let head = String::from_utf8(raw[..end].to_vec()).unwrap();
        raw = &raw[end..];
        let mut lines = head.split("\r\n");
        let status = lines.next().unwrap().split(' ').nth(1).unwrap().parse().unwrap();
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        let header = |name: &str| headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
        let mut body = Vec::new();
        if header("transfer-encoding").is_some_and(|v| v == "chunked") {
            loop {
                let line_end = raw.windows(2).position(|w| w == b"\r\n").unwrap();
                let size =
                    usize::from_str_radix(std::str::from_utf8(&raw[..line_end]).unwrap(), 16);
                let size = size.unwrap();
                raw = &raw[line_end + 2..];
                body.extend_from_slice(&raw[..size]);
                raw = &raw[size + 2..];
                if size == 0 {
                    break;
                }
            }
        } else {
            let len: usize = header("content-length").map_or(0, |v| v.parse().unwrap());
            body.extend_from_slice(&raw[..len]);
            raw = &raw[len..];
        }
        let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
        answers.push(Answer { status, headers, body });
    }
    answers
}

/// The seed's readings database (shared/seeds 003) with its global `by-device` view.
fn readings() -> Server {
    let s = Server::start();
    assert_eq!(s.put_empty("/readings?partitioned=true").0, 201);
    for (id, device) in [
        ("bridge-9876:device-123456-20181211T11:13:24.123456Z", "device-123456"),
        ("bridge-9876:device-123456-20181213T09:00:00.000000Z", "device-123456"),
        ("bridge-1234:device-777-20181213T10:00:00.000000Z", "device-777"),
    ] {
        let doc = json!({"deviceID": device, "infrastructureID": id.split(':').next().unwrap()});
        s.put_doc("readings", id, &doc);
    }
    let ddoc = json!({"options": {"partitioned": false}, "views": {"by-device": {
        "map": "function(doc) { emit(doc.deviceID, doc.infrastructureID) }"}}});
    assert_eq!(s.put("/readings/_design/infrastructure-mapping", &ddoc).0, 201);
    s
}

#[test]
fn curl_g_view_keys_and_all_docs_startkey_are_accepted() {
    let s = readings();
    let view = b"/readings/_design/infrastructure-mapping/_view/by-device?keys=[\"device-123456\"]&limit=1";
    let got = exchange(&s, &get(view, true));
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].status, 200, "{:?}", got[0]);
    assert_eq!(
        got[0].body["rows"],
        json!([{"id": "bridge-9876:device-123456-20181211T11:13:24.123456Z",
                "key": "device-123456", "value": "bridge-9876"}])
    );

    let got = exchange(&s, &get(b"/readings/_all_docs?startkey=\"bridge-9\"&limit=1", true));
    assert_eq!(got[0].status, 200, "{:?}", got[0]);
    assert_eq!(got[0].body["rows"][0]["id"], "bridge-9876:device-123456-20181211T11:13:24.123456Z");
}

/// Each of the bytes hyper's URI parser refuses, raw in a document id and in a query key.
#[test]
fn every_refused_byte_and_utf8_reach_the_document() {
    let s = Server::start();
    s.create_db("db");
    let id = "a\"[]{}|\\^`b-\u{6587}\u{5eab}";
    s.put_doc("db", &enc(id), &json!({"n": 1}));
    let mut target = b"/db/".to_vec();
    target.extend_from_slice(id.as_bytes());
    let got = exchange(&s, &get(&target, true));
    assert_eq!(got[0].status, 200, "{:?}", got[0]);
    assert_eq!(got[0].body["_id"], id);

    let mut target = b"/db/_all_docs?key=\"".to_vec();
    target.extend_from_slice(id.replace(['"', '\\'], "").as_bytes());
    target.extend_from_slice(b"\"");
    let got = exchange(&s, &get(&target, true));
    assert_eq!(got[0].status, 200, "{:?}", got[0]);
    assert_eq!(got[0].body["rows"], json!([]));
    let target = b"/db/_all_docs?keys=[\"a\\\"[]{}|\\\\^`b-\xe6\x96\x87\xe5\xba\xab\"]";
    let got = exchange(&s, &get(target, true));
    assert_eq!(got[0].status, 200, "{:?}", got[0]);
    assert_eq!(got[0].body["rows"][0]["id"], id, "{:?}", got[0]);
}

/// Keep-alive and pipelining: a body with quotes passes untouched, and every later request
/// line is normalised too.
#[test]
fn pipelined_requests_with_bodies_and_raw_targets() {
    let s = Server::start();
    s.create_db("db");
    let body = br#"{"text": "GET /db/[x] HTTP/1.1\r\n\r\n"}"#;
    let mut bytes = format!(
        "PUT /db/%22q%22 HTTP/1.1\r\nHost: x\r\n{}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        auth(),
        body.len()
    )
    .into_bytes();
    bytes.extend_from_slice(body);
    bytes.extend_from_slice(&get(b"/db/\"q\"", false));
    bytes.extend_from_slice(&get(b"/db/_all_docs?keys=[\"\\\"q\\\"\"]", true));
    let got = exchange(&s, &bytes);
    assert_eq!(got.len(), 3, "{got:?}");
    assert_eq!(got[0].status, 201, "{:?}", got[0]);
    assert_eq!(got[1].body["_id"], "\"q\"", "{got:?}");
    assert_eq!(got[1].body["text"], "GET /db/[x] HTTP/1.1\r\n\r\n");
    assert_eq!(got[2].body["rows"][0]["id"], "\"q\"");
}

#[test]
fn malformed_requests_get_json_400_not_an_empty_answer() {
    let s = Server::start();
    for bytes in [
        &b"GET /a b c HTTP/1.1\r\nHost: x\r\n\r\n"[..],
        b"GET /\x01 HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET / HTTP/1.1\r\nbad header line\r\n\r\n",
        b"PUT /db HTTP/1.1\r\nContent-Length: nope\r\n\r\n",
        b"GET / HTTP/3.0\r\n\r\n",
    ] {
        let got = exchange(&s, bytes);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].status, 400);
        assert_eq!(got[0].body["error"], "bad_request", "{got:?}");
        assert!(got[0].body["reason"].as_str().is_some_and(|r| !r.is_empty()));
        let ctype = got[0].headers.iter().find(|(n, _)| n == "content-type");
        assert!(ctype.is_some_and(|(_, v)| v.starts_with("application/json")), "{got:?}");
    }
    // A request after a good one on the same connection is judged on its own.
    let mut bytes = get(b"/", false);
    bytes.extend_from_slice(b"GET /a b c HTTP/1.1\r\n\r\n");
    let got = exchange(&s, &bytes);
    assert_eq!(got.iter().map(|a| a.status).collect::<Vec<_>>(), [200, 400]);
    assert_eq!(got[0].body["couchdb"], "Welcome");
    assert_eq!(s.get("/_up").0, 200);
}
