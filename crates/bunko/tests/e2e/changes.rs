//! `_changes`: normal, longpoll, continuous and eventsource feeds and their parameters.

use std::io::{BufRead, BufReader};
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};

use crate::harness::{Server, assert_error, assert_seq, enc, ids};

/// IoT readings from the Cloudant partitioning walkthrough.
fn reading(device: &str, value: i64) -> Value {
    json!({"deviceID": device, "infrastructureID": "bridge-9876",
           "ts": "20181211T11:13:24.123456Z",
           "reading": {"temperature": {"value": value, "unit": "c"}}})
}

fn setup() -> Server {
    let s = Server::start();
    s.create_db("db");
    s
}

fn changes(s: &Server, query: &str) -> Value {
    let (status, body) = s.get(&format!("/db/_changes{query}"));
    assert_eq!(status, 200, "_changes{query} -> {body}");
    body
}

fn rev_of(row: &Value) -> &str {
    row["changes"][0]["rev"].as_str().unwrap_or_else(|| panic!("row without rev: {row}"))
}

#[test]
fn changes_lists_each_document_once_at_its_latest_change() {
    let s = setup();
    let a1 = s.put_doc("db", "a", &reading("device-1", 10));
    let b1 = s.put_doc("db", "b", &reading("device-2", 11));
    let c1 = s.put_doc("db", "c", &reading("device-3", 12));
    let a2 = s.put_doc("db", "a", &json!({"_rev": a1, "v": 2}));
    let (_, del) = s.delete(&format!("/db/b?rev={b1}"));

    let body = changes(&s, "");
    let rows = body["results"].as_array().unwrap();
    assert_eq!(ids(&body["results"]), ["c", "a", "b"], "ordered by each doc's latest seq");
    assert_eq!(rows[0], json!({"seq": rows[0]["seq"], "id": "c", "changes": [{"rev": c1}]}));
    assert_eq!(rows[1], json!({"seq": rows[1]["seq"], "id": "a", "changes": [{"rev": a2}]}));
    assert_eq!(
        rows[2],
        json!({"seq": rows[2]["seq"], "id": "b", "changes": [{"rev": del["rev"]}], "deleted": true})
    );
    for row in rows {
        assert_seq(&row["seq"]);
    }
    let seqs: std::collections::HashSet<String> =
        rows.iter().map(|r| r["seq"].as_str().unwrap().to_string()).collect();
    assert_eq!(seqs.len(), 3, "distinct seqs");
    assert_eq!(body["last_seq"], rows[2]["seq"]);
    assert_eq!(body["pending"], 0);
    assert_eq!(body["last_seq"], s.db_info("db")["update_seq"]);
}

#[test]
fn changes_on_an_empty_database_is_empty_with_a_last_seq() {
    let s = setup();
    let body = changes(&s, "");
    assert_eq!(body["results"], json!([]));
    assert_eq!(body["pending"], 0);
    assert!(body.get("last_seq").is_some(), "{body}");
}

#[test]
fn changes_since_a_seq_returns_only_later_changes() {
    let s = setup();
    s.put_doc("db", "a", &reading("device-1", 1));
    s.put_doc("db", "b", &reading("device-2", 2));
    let first = changes(&s, "");
    let after_a = first["results"][0]["seq"].as_str().unwrap().to_string();
    s.put_doc("db", "c", &reading("device-3", 3));

    assert_eq!(ids(&changes(&s, &format!("?since={}", enc(&after_a)))["results"]), ["b", "c"]);
    let since_last = changes(&s, &format!("?since={}", enc(first["last_seq"].as_str().unwrap())));
    assert_eq!(ids(&since_last["results"]), ["c"]);
    assert_eq!(ids(&changes(&s, "?since=0")["results"]), ["a", "b", "c"]);

    let now = changes(&s, "?since=now");
    assert_eq!(now["results"], json!([]));
    assert_eq!(now["last_seq"], s.db_info("db")["update_seq"]);
}

/// `pending` counts every later change exactly while a client pages through a feed longer
/// than the counts' blocks (256 seqs) with `limit`, as PouchDB's replicator does, and stays
/// exact after updates move documents to new seqs and deletions.
#[test]
fn pending_stays_exact_while_a_long_feed_is_paged_and_documents_move() {
    let s = setup();
    let docs: Vec<Value> = (0..1200).map(|i| json!({"_id": format!("r{i:04}"), "n": i})).collect();
    let (status, written) = s.post("/db/_bulk_docs", &json!({"docs": docs}));
    assert_eq!(status, 201, "{written}");
    // Move 300 documents (every fourth) to new seqs; delete 100 of them again.
    let moved: Vec<Value> = written
        .as_array()
        .unwrap()
        .iter()
        .step_by(4)
        .map(|r| json!({"_id": r["id"], "_rev": r["rev"], "n": -1}))
        .collect();
    let (_, moved) = s.post("/db/_bulk_docs", &json!({"docs": moved}));
    let deleted: Vec<Value> = moved
        .as_array()
        .unwrap()
        .iter()
        .step_by(3)
        .map(|r| json!({"_id": r["id"], "_rev": r["rev"], "_deleted": true}))
        .collect();
    assert_eq!(s.post("/db/_bulk_docs", &json!({"docs": deleted})).0, 201);
    let (mut since, mut seen) = ("0".to_string(), 0u64);
    loop {
        let page = changes(&s, &format!("?limit=97&since={}", enc(&since)));
        let rows = page["results"].as_array().unwrap().len() as u64;
        seen += rows;
        assert_eq!(page["pending"], 1200 - seen, "after {seen} rows");
        since = page["last_seq"].as_str().unwrap().to_string();
        if rows < 97 {
            break;
        }
    }
    assert_eq!(seen, 1200, "one row per document");
    // From an old seq: only the documents whose latest change is later.
    let page = changes(&s, "?limit=1&since=600");
    assert_eq!(page["pending"], 1200 - (600 - 150) - 1, "150 documents left seqs 1-600");
}

#[test]
fn changes_limit_truncates_and_reports_pending() {
    let s = setup();
    for id in ["a", "b", "c", "d"] {
        s.put_doc("db", id, &json!({}));
    }
    let body = changes(&s, "?limit=1");
    assert_eq!(ids(&body["results"]), ["a"]);
    assert_eq!(body["last_seq"], body["results"][0]["seq"]);
    assert_eq!(body["pending"], 3);
    let body = changes(&s, "?limit=3");
    assert_eq!(ids(&body["results"]), ["a", "b", "c"]);
    assert_eq!(body["pending"], 1);
    // Paging with since=last_seq continues where the page ended.
    let next = changes(&s, &format!("?limit=3&since={}", enc(body["last_seq"].as_str().unwrap())));
    assert_eq!(ids(&next["results"]), ["d"]);
    assert_eq!(next["pending"], 0);
}

#[test]
fn changes_descending_lists_newest_first() {
    let s = setup();
    for id in ["a", "b", "c"] {
        s.put_doc("db", id, &json!({}));
    }
    assert_eq!(ids(&changes(&s, "?descending=true")["results"]), ["c", "b", "a"]);
    assert_eq!(ids(&changes(&s, "?descending=true&limit=1")["results"]), ["c"]);
}

#[test]
fn changes_include_docs_embeds_bodies_and_tombstones() {
    let s = setup();
    let a = s.put_doc("db", "a", &reading("device-1", 7));
    let b = s.put_doc("db", "b", &json!({"x": 1}));
    let (_, del) = s.delete(&format!("/db/b?rev={b}"));
    let body = changes(&s, "?include_docs=true");
    let rows = body["results"].as_array().unwrap();
    let mut expected = reading("device-1", 7);
    expected["_id"] = json!("a");
    expected["_rev"] = json!(a);
    assert_eq!(rows[0]["doc"], s.get_doc("db", "a"));
    assert_eq!(rows[0]["doc"]["reading"], expected["reading"]);
    assert_eq!(rows[1]["doc"], json!({"_id": "b", "_rev": del["rev"], "_deleted": true}));
    assert!(changes(&s, "")["results"][0].get("doc").is_none());
}

#[test]
fn changes_style_all_docs_and_conflicts_show_every_leaf() {
    let s = setup();
    let r1 = s.put_doc("db", "doc", &json!({"v": 1}));
    let (x, y) = ("2-aa01552213fafa022e6167113ed01087", "2-ff01552213fafa022e6167113ed01087");
    for rev in [x, y] {
        let (status, _) = s.put("/db/doc?new_edits=false", &json!({"_rev": rev, "v": rev}));
        assert_eq!(status, 201);
    }
    // Winner first, then the losers in CouchDB's order.
    let body = changes(&s, "?style=all_docs");
    assert_eq!(body["results"][0]["changes"], json!([{"rev": y}, {"rev": x}, {"rev": r1}]));
    let body = changes(&s, "");
    assert_eq!(body["results"][0]["changes"], json!([{"rev": y}]));
    let body = changes(&s, "?include_docs=true&conflicts=true");
    assert_eq!(body["results"][0]["doc"]["_rev"], y);
    assert_eq!(body["results"][0]["doc"]["_conflicts"], json!([x, r1]));
}

#[test]
fn changes_filter_doc_ids_by_get_parameter_and_post_body() {
    let s = setup();
    for id in ["doc1", "doc2", "doc3", "doc4"] {
        s.put_doc("db", id, &json!({}));
    }
    let doc_ids = enc(&json!(["doc3", "doc1", "nope"]).to_string());
    let body = changes(&s, &format!("?filter=_doc_ids&doc_ids={doc_ids}"));
    assert_eq!(ids(&body["results"]), ["doc1", "doc3"]);

    let (status, body) =
        s.post("/db/_changes?filter=_doc_ids", &json!({"doc_ids": ["doc4", "doc2"]}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(ids(&body["results"]), ["doc2", "doc4"]);
}

#[test]
fn changes_filter_design_returns_only_design_docs() {
    let s = setup();
    s.put_doc("db", "doc1", &json!({}));
    s.put_doc("db", "_design/readings", &json!({"views": {}}));
    s.put_doc("db", "doc2", &json!({}));
    let body = changes(&s, "?filter=_design");
    assert_eq!(ids(&body["results"]), ["_design/readings"]);
}

#[test]
fn changes_rejects_bad_parameters() {
    // changes_test.exs and chttpd_db:handle_changes_req.
    let s = setup();
    assert_error(
        s.get("/db/_changes?feed=continuous&heartbeat=-1000"),
        400,
        "bad_request",
        "The heartbeat value should be a positive integer (in milliseconds).",
    );
    assert_error(
        s.get("/db/_changes?feed=continuous&heartbeat=a1000"),
        400,
        "bad_request",
        "Invalid heartbeat value. Expecting a positive integer value (in milliseconds).",
    );
    assert_error(
        s.get("/db/_changes?feed=sideways"),
        400,
        "bad_request",
        "Supported `feed` types: normal, continuous, live, longpoll, eventsource",
    );
    assert_error(
        s.raw(Method::POST, "/db/_changes?filter=_doc_ids", r#"["doc1"]"#),
        400,
        "bad_request",
        "Request body must be a JSON object",
    );
    assert_error(s.get("/nope/_changes"), 404, "not_found", "Database does not exist.");
}

#[test]
fn longpoll_returns_as_soon_as_a_write_arrives() {
    let s = setup();
    s.put_doc("db", "old", &json!({}));
    let url = s.url("/db/_changes?feed=longpoll&since=now&timeout=30000");
    let waiter = std::thread::spawn(move || {
        let started = Instant::now();
        let resp = crate::harness::client()
            .get(url)
            .basic_auth(crate::harness::ADMIN, Some(crate::harness::ADMIN_PASSWORD))
            .send()
            .unwrap();
        let status = resp.status().as_u16();
        (status, crate::harness::body_json(resp), started.elapsed())
    });
    std::thread::sleep(Duration::from_millis(500));
    let rev = s.put_doc("db", "new", &reading("device-9", 99));
    let (status, body, elapsed) = waiter.join().unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(ids(&body["results"]), ["new"]);
    assert_eq!(rev_of(&body["results"][0]), rev);
    assert_eq!(body["last_seq"], body["results"][0]["seq"]);
    assert!(elapsed >= Duration::from_millis(400), "it waited for the write: {elapsed:?}");
    assert!(elapsed < Duration::from_secs(10), "it did not wait for the timeout: {elapsed:?}");
}

#[test]
fn longpoll_returns_existing_changes_immediately() {
    let s = setup();
    s.put_doc("db", "a", &json!({}));
    let started = Instant::now();
    let body = changes(&s, "?feed=longpoll&since=0&timeout=30000");
    assert_eq!(ids(&body["results"]), ["a"]);
    assert!(started.elapsed() < Duration::from_secs(10));
}

/// CouchDB's seqs are `"N-opaque"` strings whose number counts the writes
/// (`changes_async_test.exs` reads the `1-`, `2-` prefixes of longpoll `last_seq`s).
#[test]
fn seqs_are_n_dash_opaque_strings_whose_number_counts_the_writes() {
    let s = setup();
    let number = |v: &Value| v.as_str().and_then(|s| Some(s.split_once('-')?.0.to_string()));
    s.put_doc("db", "1", &json!({}));
    let first = changes(&s, "?feed=longpoll");
    assert_eq!(number(&first["last_seq"]).as_deref(), Some("1"), "{first}");
    s.put_doc("db", "2", &json!({}));
    let since = enc(first["last_seq"].as_str().unwrap());
    let next = changes(&s, &format!("?feed=longpoll&since={since}"));
    assert_eq!(ids(&next["results"]), ["2"]);
    assert_eq!(number(&next["last_seq"]).as_deref(), Some("2"), "{next}");
    assert_eq!(number(&next["results"][0]["seq"]).as_deref(), Some("2"));
    assert_eq!(s.db_info("db")["update_seq"], next["last_seq"]);
    // A bare number, as CouchDB 1.x clients send it, is still a `since`.
    assert_eq!(ids(&changes(&s, "?since=1")["results"]), ["2"]);
}

#[test]
fn longpoll_without_writes_ends_after_timeout_with_empty_results() {
    let s = setup();
    s.put_doc("db", "a", &json!({}));
    let update_seq = s.db_info("db")["update_seq"].clone();
    let started = Instant::now();
    let body = changes(&s, "?feed=longpoll&since=now&timeout=700");
    let elapsed = started.elapsed();
    assert_eq!(body["results"], json!([]));
    assert_eq!(body["last_seq"], update_seq);
    assert!(elapsed >= Duration::from_millis(600), "waited for the timeout: {elapsed:?}");
    assert!(elapsed < Duration::from_secs(10), "{elapsed:?}");
}

/// Reads a streaming response line by line until EOF.
fn read_lines(resp: reqwest::blocking::Response) -> Vec<String> {
    BufReader::new(resp).lines().map(|l| l.expect("read line")).collect()
}

#[test]
fn continuous_feed_emits_one_json_object_per_line_then_last_seq_after_timeout() {
    let s = setup();
    let a = s.put_doc("db", "a", &json!({}));
    let url = s.url("/db/_changes?feed=continuous&since=0&timeout=1500");
    let reader = std::thread::spawn(move || {
        let resp = crate::harness::client()
            .get(url)
            .basic_auth(crate::harness::ADMIN, Some(crate::harness::ADMIN_PASSWORD))
            .send()
            .unwrap();
        assert_eq!(resp.status().as_u16(), 200);
        read_lines(resp)
    });
    std::thread::sleep(Duration::from_millis(400));
    let b = s.put_doc("db", "b", &json!({}));
    let lines = reader.join().unwrap();
    let objects: Vec<Value> = lines
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("line {l:?} is not JSON: {e}")))
        .collect();
    assert_eq!(objects.len(), 3, "two changes and the last_seq line: {lines:?}");
    assert_eq!(objects[0]["id"], "a");
    assert_eq!(rev_of(&objects[0]), a);
    assert_eq!(objects[1]["id"], "b");
    assert_eq!(rev_of(&objects[1]), b);
    assert_eq!(objects[2], json!({"last_seq": objects[1]["seq"], "pending": 0}));
}

#[test]
fn continuous_feed_sends_heartbeat_newlines_while_idle() {
    let s = setup();
    let resp = s.req(Method::GET, "/db/_changes?feed=continuous&since=now&heartbeat=100").send();
    let resp = resp.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let mut reader = BufReader::new(resp);
    let started = Instant::now();
    let mut blank = 0;
    while blank < 3 {
        let mut line = String::new();
        let n = reader.read_line(&mut line).unwrap();
        assert!(n > 0, "feed ended before three heartbeats");
        assert_eq!(line, "\n", "only heartbeats on an idle feed");
        blank += 1;
    }
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    // Dropping the reader closes the connection; the server must survive that.
    drop(reader);
    assert_eq!(s.get("/_up").0, 200);
}

/// A browser's EventSource reconnects with `Last-Event-ID`, which overrides `since`
/// (`changes_async_test.exs`, COUCHDB-1852).
#[test]
fn eventsource_resumes_after_the_last_event_id() {
    let s = setup();
    for id in ["a", "b", "c", "d"] {
        s.put_doc("db", id, &json!({}));
    }
    let all = changes(&s, "");
    let second = all["results"][1]["seq"].as_str().unwrap().to_string();
    let url = "/db/_changes?feed=eventsource&timeout=100&since=0";
    let resp = s.req(Method::GET, url).header("Last-Event-ID", &second).send().unwrap();
    let text = resp.text().unwrap();
    let ids: Vec<String> = text
        .split("\n\n")
        .filter_map(|event| event.lines().find_map(|l| l.strip_prefix("data: ")))
        .filter_map(|data| {
            serde_json::from_str::<Value>(data).ok()?["id"].as_str().map(String::from)
        })
        .collect();
    assert_eq!(ids, ["c", "d"], "{text}");
}

#[test]
fn eventsource_feed_frames_changes_as_server_sent_events() {
    let s = setup();
    s.put_doc("db", "a", &json!({}));
    let resp = s.req(Method::GET, "/db/_changes?feed=eventsource&since=0&timeout=500").send();
    let resp = resp.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let ctype = resp.headers()["content-type"].to_str().unwrap().to_string();
    assert!(ctype.starts_with("text/event-stream"), "Content-Type {ctype}");
    let text = resp.text().unwrap();
    let first = text.split("\n\n").next().unwrap();
    let mut lines = first.lines();
    let data = lines.next().unwrap().strip_prefix("data: ").expect("data: line");
    let change: Value = serde_json::from_str(data).unwrap();
    assert_eq!(change["id"], "a");
    let id = lines.next().unwrap().strip_prefix("id: ").expect("id: line");
    assert_eq!(id, change["seq"].to_string(), "id is the JSON-encoded seq");
}
