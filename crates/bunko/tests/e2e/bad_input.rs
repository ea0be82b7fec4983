//! Bad input: every rejected request gets a CouchDB-style error and changes nothing.

use reqwest::Method;
use serde_json::{Value, json};

use crate::harness::{Server, assert_error, assert_error_kind, send};

/// What must not change: every document with its body, the counts and the update seq.
fn snapshot(s: &Server) -> Value {
    let (_, all) = s.get("/db/_all_docs?include_docs=true");
    let (_, changes) = s.get("/db/_changes");
    let info = s.db_info("db");
    json!({"all": all, "changes": changes, "doc_count": info["doc_count"],
           "doc_del_count": info["doc_del_count"], "update_seq": info["update_seq"]})
}

/// A server with database `db` holding Thomas (embedded addresses) and a book.
fn setup_with(args: &[&str]) -> (Server, Value) {
    let s = Server::start_with(args, &[]);
    s.create_db("db");
    s.put_doc(
        "db",
        "thomas",
        &json!({"firstName": "Thomas", "addresses": [{"city": "Seattle", "zip": 98012}]}),
    );
    s.put_doc("db", "1", &json!({"name": "Azure Cosmos DB 101", "pub-id": "mspress"}));
    let snap = snapshot(&s);
    (s, snap)
}

fn setup() -> (Server, Value) {
    setup_with(&[])
}

#[track_caller]
fn assert_unchanged(s: &Server, before: &Value) {
    assert_eq!(&snapshot(s), before, "stored data changed after a rejected request");
}

const INVALID_JSON: &str = "invalid UTF-8 JSON";

#[test]
fn malformed_json_is_400_bad_request_everywhere() {
    let (s, before) = setup();
    for body in [r#"{"a": 1"#, r#"{"a": }"#, "{'a': 1}", r#"{"a": 1} trailing"#, "nul", ""] {
        for (method, path) in [
            (Method::PUT, "/db/new"),
            (Method::PUT, "/db/thomas"),
            (Method::POST, "/db"),
            (Method::POST, "/db/_bulk_docs"),
            (Method::POST, "/db/_all_docs"),
            (Method::POST, "/db/_bulk_get"),
            (Method::POST, "/db/_revs_diff"),
        ] {
            let got = s.raw(method.clone(), path, body);
            if body.is_empty() {
                // An empty body is either "Missing request body" or invalid JSON; both 400.
                assert_error_kind(got, 400, "bad_request");
            } else {
                assert_error(got, 400, "bad_request", INVALID_JSON);
            }
        }
    }
    assert_unchanged(&s, &before);
}

#[test]
fn invalid_utf8_is_400_bad_request() {
    let (s, before) = setup();
    let mut body = br#"{"name": ""#.to_vec();
    body.extend_from_slice(&[0xff, 0xfe, 0xc3]);
    body.extend_from_slice(br#""}"#);
    assert_error(s.raw(Method::PUT, "/db/bad", body.clone()), 400, "bad_request", INVALID_JSON);
    assert_error(s.raw(Method::POST, "/db", body.clone()), 400, "bad_request", INVALID_JSON);
    // A lone surrogate escape is not valid Unicode either.
    let got = s.raw(Method::PUT, "/db/bad", r#"{"name": "\ud800"}"#);
    assert_eq!(got.0, 400, "{}", got.1);
    assert_unchanged(&s, &before);
}

#[test]
fn document_body_must_be_an_object() {
    // basics_test.exs "PUT error when body not an object".
    let (s, before) = setup();
    for body in ["[]", "\"thomas\"", "42", "null", "true"] {
        assert_error(
            s.raw(Method::PUT, "/db/bar", body),
            400,
            "bad_request",
            "Document must be a JSON object",
        );
        let got = s.raw(Method::POST, "/db", body);
        assert_error_kind(got, 400, "bad_request");
    }
    // Inside _bulk_docs a non-object doc fails the request too.
    let got = s.post("/db/_bulk_docs", &json!({"docs": [{"_id": "ok"}, 5]}));
    assert_error_kind(got, 400, "bad_request");
    assert_unchanged(&s, &before);
}

#[test]
fn very_deep_nesting_is_rejected_cleanly() {
    let (s, before) = setup();
    let depth = 100_000;
    let arrays = format!("{{\"deep\": {}{}}}", "[".repeat(depth), "]".repeat(depth));
    let got = s.raw(Method::PUT, "/db/deep", arrays);
    assert!((400..500).contains(&got.0), "a 4xx error, got {} {}", got.0, got.1);
    assert!(got.1["error"].is_string() && got.1["reason"].is_string(), "{}", got.1);

    let objects = format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth));
    let got = s.raw(Method::POST, "/db", objects);
    assert!((400..500).contains(&got.0), "a 4xx error, got {} {}", got.0, got.1);

    let unterminated = "[".repeat(depth);
    let got = s.raw(Method::POST, "/db/_bulk_docs", unterminated);
    assert_eq!(got.0, 400, "{}", got.1);

    assert_eq!(s.get("/_up").0, 200, "server survived");
    assert_unchanged(&s, &before);
}

#[test]
fn moderate_nesting_is_accepted() {
    // The depth limit must not reject ordinary documents (64 levels here).
    let (s, _) = setup();
    let depth = 64;
    let body = format!("{{\"deep\": {}1{}}}", "[".repeat(depth), "]".repeat(depth));
    let (status, resp) = s.raw(Method::PUT, "/db/deep", body);
    assert_eq!(status, 201, "{resp}");
}

#[test]
fn document_over_max_document_size_is_413_document_too_large() {
    let (s, before) = setup_with(&["--max-document-size", "1000"]);
    let big = json!({"blob": "x".repeat(5000)});
    assert_error(s.put("/db/big", &big), 413, "document_too_large", "big");
    let mut with_id = big.clone();
    with_id["_id"] = json!("big2");
    assert_error(s.post("/db", &with_id), 413, "document_too_large", "big2");
    // Updating an existing document past the limit fails the same way.
    let rev = s.get_doc("db", "thomas")["_rev"].clone();
    let mut update = big.clone();
    update["_rev"] = rev;
    assert_error(s.put("/db/thomas", &update), 413, "document_too_large", "thomas");
    // In _bulk_docs one oversized document fails the whole request (couch_doc
    // from_json_obj_validate throws before anything is written).
    let mut in_bulk = big.clone();
    in_bulk["_id"] = json!("big3");
    let got = s.post("/db/_bulk_docs", &json!({"docs": [{"_id": "small"}, in_bulk]}));
    assert_error(got, 413, "document_too_large", "big3");
    assert_unchanged(&s, &before);

    // Just under the limit is fine.
    let (status, body) = s.put("/db/fits", &json!({"blob": "x".repeat(500)}));
    assert_eq!(status, 201, "{body}");
}

#[test]
fn request_over_max_request_size_is_413_too_large() {
    let (s, before) = setup_with(&["--max-request-size", "10000"]);
    let docs: Vec<Value> =
        (0..100).map(|i| json!({"_id": format!("r{i}"), "pad": "y".repeat(200)})).collect();
    let got = s.post("/db/_bulk_docs", &json!({"docs": docs}));
    assert_error(got, 413, "too_large", "the request entity is too large");
    let got = s.put("/db/huge", &json!({"pad": "z".repeat(20_000)}));
    assert_eq!(got.0, 413, "{}", got.1);
    assert_unchanged(&s, &before);
    // A small request still works on the same server.
    assert_eq!(s.put("/db/small", &json!({"v": 1})).0, 201);
}

#[test]
fn default_max_document_size_is_8mb() {
    let (s, before) = setup();
    let big = json!({"blob": "x".repeat(8_100_000)});
    assert_error(s.put("/db/big", &big), 413, "document_too_large", "big");
    assert_unchanged(&s, &before);
}

#[test]
fn bad_document_ids_are_400_illegal_docid() {
    // invalid_docids_test.exs and couch_doc:validate_docid.
    let (s, before) = setup();
    let underscore = "Only reserved document ids may start with underscore.";
    assert_error(s.put("/db/_other", &json!({})), 400, "illegal_docid", underscore);
    assert_error(s.put("/db/_tmp_view", &json!({})), 400, "illegal_docid", underscore);
    assert_error(s.post("/db", &json!({"_id": "_invalid"})), 400, "illegal_docid", underscore);
    assert_error(
        s.post("/db", &json!({"_id": 1})),
        400,
        "illegal_docid",
        "Document id must be a string",
    );
    assert_error(
        s.post("/db", &json!({"_id": "_design/"})),
        400,
        "illegal_docid",
        "Illegal document id `_design/`",
    );
    let got = s.post("/db/_bulk_docs", &json!({"docs": [{"_id": "_invalid"}]}));
    assert_error_kind(got, 400, "illegal_docid");
    for path in ["/db/_local", "/db/_local/", "/db/_local%2F", "/db/_local/foo/bar"] {
        let got = s.put(path, &json!({}));
        assert_eq!(got.0, 400, "PUT {path} -> {}", got.1);
        assert_eq!(got.1["error"], "bad_request", "PUT {path}");
    }
    assert_unchanged(&s, &before);
}

#[test]
fn unknown_special_fields_are_400_doc_validation() {
    // basics_test.exs "Check for invalid document members".
    let (s, before) = setup();
    for (field, value) in [
        ("_zing", json!(4)),
        ("_zoom", json!("hello")),
        ("_fan", json!("something smells delicious")),
        ("_bing", json!({"wha?": "soda can"})),
    ] {
        let reason = format!("Bad special document member: {field}");
        let doc = json!({"zane": "goldfish", field: value});
        assert_error(s.put("/db/goldfish", &doc), 400, "doc_validation", &reason);
        assert_error(s.post("/db", &doc), 400, "doc_validation", &reason);
        let got = s.post("/db/_bulk_docs", &json!({"docs": [doc]}));
        assert_eq!(got.0, 400, "{}", got.1);
    }
    assert_unchanged(&s, &before);
}

#[test]
fn malformed_rev_is_400_bad_request() {
    let (s, before) = setup();
    assert_error(
        s.put("/db/thomas", &json!({"_rev": "garbage", "v": 1})),
        400,
        "bad_request",
        "Invalid rev format",
    );
    assert_error(s.delete("/db/thomas?rev=garbage"), 400, "bad_request", "Invalid rev format");
    assert_unchanged(&s, &before);
}

#[test]
fn bad_query_parameter_values_are_400() {
    let (s, before) = setup();
    assert_error(
        s.get("/db/_all_docs?limit=abc"),
        400,
        "query_parse_error",
        "Invalid value for integer: \"abc\"",
    );
    assert_error(
        s.get("/db/_all_docs?skip=-5"),
        400,
        "query_parse_error",
        "Invalid value for positive integer: \"-5\"",
    );
    assert_error(
        s.get("/db/_all_docs?include_docs=maybe"),
        400,
        "query_parse_error",
        "Invalid boolean parameter: \"maybe\"",
    );
    // CouchDB answers 500 for these (list_to_integer badarg); a clean 400 is required here.
    for query in ["limit=abc", "timeout=soon", "since=%7Bbad", "style=sideways"] {
        let got = s.get(&format!("/db/_changes?{query}"));
        assert_eq!(got.0, 400, "_changes?{query} -> {}", got.1);
        assert!(got.1["error"].is_string(), "{}", got.1);
    }
    assert_unchanged(&s, &before);
}

/// Bad attachments get CouchDB's errors (`couch_att:inline_from_json`,
/// `couch_doc:merge_stubs`, `validate_attachment_name`) and store nothing.
#[test]
fn bad_attachments_are_refused_with_couchdbs_errors_and_nothing_is_stored() {
    let (s, before) = setup();
    let with = |atts: Value| json!({"name": "with file", "_attachments": atts});
    let bad_data = with(json!({"a.txt": {"content_type": "text/plain", "data": "%%%"}}));
    let reason = "Invalid attachment data for a.txt";
    assert_error(s.put("/db/withfile", &bad_data), 400, "bad_request", reason);
    assert_error(s.post("/db", &bad_data), 400, "bad_request", reason);
    let mut in_bulk = bad_data.clone();
    in_bulk["_id"] = json!("withfile2");
    let (status, rows) = s.post("/db/_bulk_docs", &json!({"docs": [in_bulk]}));
    assert_eq!((status, &rows["error"]), (400, &json!("bad_request")), "{rows}");
    let stub = with(json!({"a.txt": {"stub": true}}));
    let missing = "Invalid attachment stub in withfile for a.txt";
    assert_error(s.put("/db/withfile", &stub), 412, "missing_stub", missing);
    let underscore = with(json!({"_a": {"data": "aGVsbG8="}}));
    let reason = "Attachment name '_a' starts with prohibited character '_'";
    assert_error(s.put("/db/withfile", &underscore), 400, "bad_request", reason);
    assert_eq!(s.put("/db/withfile", &with(json!("file"))).0, 400);
    let local = with(json!({"a.txt": {"data": "aGVsbG8="}}));
    let reason = "_local documents do not accept attachments.";
    assert_error(s.put("/db/_local/x", &local), 400, "bad_request", reason);
    let got = send(s.req(Method::PUT, "/db/_local/x/a.txt").body("hello"));
    assert_error(got, 400, "bad_request", reason);
    // A standalone upload naming a revision the document does not have (CouchDB 3.4.3's
    // answer: 409 with `not_found`).
    let got = send(
        s.req(Method::PUT, "/db/thomas/photo.jpg?rev=1-0123456789abcdef0123456789abcdef")
            .header("Content-Type", "image/jpeg")
            .body(vec![0xffu8, 0xd8, 0xff]),
    );
    assert_error(got, 409, "not_found", "missing_rev");
    assert_unchanged(&s, &before);
}

#[test]
fn unsupported_methods_are_405() {
    let (s, before) = setup();
    assert_error_kind(send(s.req(Method::PUT, "/db/_all_docs")), 405, "method_not_allowed");
    assert_error_kind(send(s.req(Method::GET, "/db/_bulk_docs")), 405, "method_not_allowed");
    assert_error_kind(send(s.req(Method::GET, "/db/_revs_diff")), 405, "method_not_allowed");
    assert_unchanged(&s, &before);
}

#[test]
fn garbage_requests_never_crash_the_server() {
    let (s, before) = setup();
    for (method, path, body) in [
        (Method::POST, "/db/_bulk_docs", r#"{"docs": [{"_id": {"nested": true}}]}"#),
        (Method::POST, "/db/_bulk_docs", r#"{"docs": [{"_rev": 5}]}"#),
        (
            Method::POST,
            "/db/_bulk_docs",
            r#"{"docs": [{"_id": "x", "_revisions": "nope"}], "new_edits": false}"#,
        ),
        (Method::POST, "/db/_bulk_docs", r#"{"docs": [{"_id": "x", "_deleted": "yes"}]}"#),
        (Method::POST, "/db/_bulk_get", r#"{"docs": [5, {"rev": "1-x"}]}"#),
        (Method::POST, "/db/_revs_diff", r#"{"thomas": "not-a-list"}"#),
        (Method::POST, "/db/_all_docs", r#"{"keys": [1, null, {"a": 2}]}"#),
        (Method::PUT, "/db/_security", r#"{"members": "everyone"}"#),
        (Method::PUT, "/db/_revs_limit", r#""many""#),
        (Method::POST, "/db/_changes?filter=_doc_ids", r#"{"doc_ids": "thomas"}"#),
    ] {
        let (status, resp) = s.raw(method.clone(), path, body);
        assert!(status < 500, "{method} {path} {body} -> {status} {resp}");
        assert_eq!(s.get("/_up").0, 200, "alive after {method} {path} {body}");
        assert_eq!(
            snapshot(&s),
            before,
            "stored data changed by {method} {path} {body} -> {status} {resp}"
        );
    }
}

/// CouchDB's `validate_ctype`: a JSON-body `POST` without `Content-Type: application/json`
/// (curl's `-d` sends `application/x-www-form-urlencoded`) is `415 bad_content_type` and
/// writes nothing; `; charset=…` is fine.
#[test]
fn json_posts_need_a_json_content_type() {
    let (s, before) = setup();
    assert_eq!(
        s.put("/db/_design/v", &json!({"views": {"v": {"map": "function(d) { emit(1); }"}}})).0,
        201
    );
    let before_views = snapshot(&s);
    let doc = r#"{"docs": [{"_id": "new"}], "keys": [], "selector": {"a": 1}}"#;
    for path in ["/db", "/db/_bulk_docs", "/db/_all_docs", "/db/_find", "/db/_design/v/_view/v"] {
        for ctype in [Some("application/x-www-form-urlencoded"), Some("text/plain"), None] {
            let mut req = s.req(Method::POST, path).body(doc);
            if let Some(ctype) = ctype {
                req = req.header("Content-Type", ctype);
            }
            assert_error(
                send(req),
                415,
                "bad_content_type",
                "Content-Type must be application/json",
            );
        }
    }
    assert_unchanged(&s, &before_views);
    let charset = s
        .req(Method::POST, "/db/_all_docs")
        .header("Content-Type", "application/json; charset=utf-8")
        .body(r#"{"keys": ["thomas"]}"#);
    let (status, rows) = send(charset);
    assert_eq!(status, 200, "{rows}");
    assert_eq!(rows["rows"][0]["id"], "thomas");
    drop(before);
}
