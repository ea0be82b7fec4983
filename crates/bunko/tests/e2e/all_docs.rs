//! `_all_docs` (GET and POST) parameter matrix and `_design_docs`.

use serde_json::{Value, json};

use crate::harness::{Server, assert_error, enc, ids};

/// Books and publishers from the Cosmos DB modeling guide (`pub-id` references), written in an
/// order different from their id order. Returns the server and id → rev.
fn library() -> (Server, std::collections::BTreeMap<String, String>) {
    let s = Server::start();
    s.create_db("db");
    let mut revs = std::collections::BTreeMap::new();
    for (id, body) in [
        ("3", json!({"name": "Taking over the world one JSON doc at a time"})),
        ("1", json!({"name": "Azure Cosmos DB 101", "pub-id": "mspress"})),
        ("mspress", json!({"name": "Microsoft Press"})),
        ("2", json!({"name": "Azure Cosmos DB for RDBMS Users", "pub-id": "mspress"})),
        ("100", json!({"name": "Learn about Azure Cosmos DB", "pub-id": "mspress"})),
        ("1000", json!({"name": "Deep Dive in to Azure Cosmos DB", "pub-id": "mspress"})),
    ] {
        revs.insert(id.to_string(), s.put_doc("db", id, &body));
    }
    (s, revs)
}

const ORDER: [&str; 6] = ["1", "100", "1000", "2", "3", "mspress"];

fn all(s: &Server, query: &str) -> Value {
    let (status, body) = s.get(&format!("/db/_all_docs{query}"));
    assert_eq!(status, 200, "_all_docs{query} -> {body}");
    body
}

fn key(k: &str) -> String {
    enc(&json!(k).to_string())
}

#[test]
fn all_docs_returns_every_doc_in_id_order_with_total_rows_and_offset() {
    let (s, revs) = library();
    let body = all(&s, "");
    let expected: Vec<Value> =
        ORDER.iter().map(|id| json!({"id": id, "key": id, "value": {"rev": revs[*id]}})).collect();
    assert_eq!(body, json!({"total_rows": 6, "offset": 0, "rows": expected}));
}

#[test]
fn all_docs_collates_ids_by_raw_code_point_order() {
    // all_docs_test.exs "Confirm that queries may assume raw collation".
    let s = Server::start();
    s.create_db("db");
    for id in ["a", "Z", "_design/x", "b", "1", "~", "é", "A"] {
        s.put_doc("db", &enc(id), &json!({}));
    }
    let body = all(&s, "");
    assert_eq!(ids(&body["rows"]), ["1", "A", "Z", "_design/x", "a", "b", "~", "é"]);
    let body = all(&s, &format!("?startkey={}&endkey={}", key("Z"), key("Z")));
    assert_eq!(ids(&body["rows"]), ["Z"]);
    let body = all(
        &s,
        &format!("?startkey={}&endkey={}", key("org.couchdb.user:"), key("org.couchdb.user;")),
    );
    assert_eq!(body["rows"], json!([]));
}

#[test]
fn all_docs_startkey_endkey_and_underscore_aliases_select_a_range() {
    let (s, _) = library();
    let body = all(&s, &format!("?startkey={}&endkey={}", key("100"), key("2")));
    assert_eq!(ids(&body["rows"]), ["100", "1000", "2"]);
    assert_eq!(body["offset"], 1);
    assert_eq!(body["total_rows"], 6);
    let body = all(&s, &format!("?start_key={}&end_key={}", key("100"), key("2")));
    assert_eq!(ids(&body["rows"]), ["100", "1000", "2"]);
    // Bounds need not exist.
    let body = all(&s, &format!("?startkey={}&endkey={}", key("10"), key("1999")));
    assert_eq!(ids(&body["rows"]), ["100", "1000"]);
    // offset counts the rows before startkey (all_docs_test.exs).
    let body = all(&s, &format!("?startkey={}", key("2")));
    assert_eq!(body["offset"], 3);
    assert_eq!(ids(&body["rows"]), ["2", "3", "mspress"]);
}

#[test]
fn all_docs_inclusive_end_false_excludes_endkey() {
    let (s, _) = library();
    let body = all(&s, &format!("?startkey={}&endkey={}&inclusive_end=false", key("1"), key("2")));
    assert_eq!(ids(&body["rows"]), ["1", "100", "1000"]);
    let body = all(&s, &format!("?endkey={}&inclusive_end=true", key("2")));
    assert_eq!(ids(&body["rows"]), ["1", "100", "1000", "2"]);
}

#[test]
fn all_docs_key_selects_exactly_one_row() {
    let (s, revs) = library();
    let body = all(&s, &format!("?key={}", key("mspress")));
    assert_eq!(
        body["rows"],
        json!([{"id": "mspress", "key": "mspress",
                                      "value": {"rev": revs["mspress"]}}])
    );
    let body = all(&s, &format!("?key={}", key("nope")));
    assert_eq!(body["rows"], json!([]));
}

#[test]
fn all_docs_startkey_docid_acts_as_startkey_without_startkey() {
    // couch_mrview_util:ad_skey_opts / ad_ekey_opts.
    let (s, _) = library();
    let body = all(&s, "?startkey_docid=2&endkey_docid=3");
    assert_eq!(ids(&body["rows"]), ["2", "3"]);
}

#[test]
fn all_docs_limit_and_skip_page_through_rows() {
    let (s, _) = library();
    assert_eq!(ids(&all(&s, "?limit=2")["rows"]), ["1", "100"]);
    let body = all(&s, "?limit=2&skip=2");
    assert_eq!(ids(&body["rows"]), ["1000", "2"]);
    assert_eq!(body["offset"], 2, "offset includes skip");
    assert_eq!(all(&s, "?limit=0")["rows"], json!([]));
    let body = all(&s, "?skip=100");
    assert_eq!(body["rows"], json!([]));
    assert_eq!(body["offset"], 6, "offset is capped at total_rows");
}

#[test]
fn all_docs_descending_reverses_order_and_swaps_bounds() {
    let (s, _) = library();
    let body = all(&s, "?descending=true");
    let mut rev = ORDER.to_vec();
    rev.reverse();
    assert_eq!(ids(&body["rows"]), rev);
    assert_eq!(body["offset"], 0);
    let body = all(&s, &format!("?descending=true&startkey={}&endkey={}", key("2"), key("100")));
    assert_eq!(ids(&body["rows"]), ["2", "1000", "100"]);
    assert_eq!(body["offset"], 2, "rows after startkey in descending order");
    let body = all(&s, "?descending=true&limit=2&skip=1");
    assert_eq!(ids(&body["rows"]), ["3", "2"]);
    // A range in the wrong direction is simply empty for _all_docs (CouchDB's
    // "No rows can match your key range" check applies to views only).
    let body = all(&s, &format!("?startkey={}&endkey={}", key("3"), key("1")));
    assert_eq!(body["rows"], json!([]));
}

#[test]
fn all_docs_include_docs_embeds_bodies() {
    let (s, revs) = library();
    let body = all(&s, &format!("?include_docs=true&key={}", key("1")));
    assert_eq!(
        body["rows"],
        json!([{"id": "1", "key": "1", "value": {"rev": revs["1"]},
                "doc": {"_id": "1", "_rev": revs["1"], "name": "Azure Cosmos DB 101",
                        "pub-id": "mspress"}}])
    );
}

#[test]
fn all_docs_post_keys_returns_rows_in_key_order_with_missing_and_deleted() {
    let (s, revs) = library();
    let (_, del) = s.delete(&format!("/db/3?rev={}", revs["3"]));
    let del_rev = del["rev"].as_str().unwrap().to_string();
    let (status, body) = s.post("/db/_all_docs", &json!({"keys": ["mspress", "nope", "3", "1"]}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        json!({"total_rows": 5, "offset": null, "rows": [
            {"id": "mspress", "key": "mspress", "value": {"rev": revs["mspress"]}},
            {"key": "nope", "error": "not_found"},
            {"id": "3", "key": "3", "value": {"rev": del_rev, "deleted": true}},
            {"id": "1", "key": "1", "value": {"rev": revs["1"]}}
        ]})
    );
}

#[test]
fn all_docs_keys_with_include_docs_gives_null_doc_for_deleted() {
    let (s, revs) = library();
    let (_, del) = s.delete(&format!("/db/3?rev={}", revs["3"]));
    let (status, body) =
        s.post("/db/_all_docs?include_docs=true", &json!({"keys": ["3", "nope", "2"]}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["rows"],
        json!([
            {"id": "3", "key": "3", "value": {"rev": del["rev"], "deleted": true}, "doc": null},
            {"key": "nope", "error": "not_found"},
            {"id": "2", "key": "2", "value": {"rev": revs["2"]},
             "doc": {"_id": "2", "_rev": revs["2"], "name": "Azure Cosmos DB for RDBMS Users",
                     "pub-id": "mspress"}}
        ])
    );
}

#[test]
fn all_docs_get_keys_parameter_matches_post() {
    let (s, _) = library();
    let keys = enc(&json!(["2", "1", "nope"]).to_string());
    let get = all(&s, &format!("?keys={keys}"));
    let (_, post) = s.post("/db/_all_docs", &json!({"keys": ["2", "1", "nope"]}));
    assert_eq!(get, post);
    assert_eq!(get["rows"].as_array().map(Vec::len), Some(3));
}

#[test]
fn all_docs_keys_respect_limit_skip_and_descending() {
    let (s, _) = library();
    let (_, body) = s.post("/db/_all_docs", &json!({"keys": ["1", "2", "3"], "limit": 2}));
    assert_eq!(ids(&body["rows"]), ["1", "2"]);
    let (_, body) = s.post("/db/_all_docs?skip=1", &json!({"keys": ["1", "2", "3"]}));
    assert_eq!(ids(&body["rows"]), ["2", "3"]);
    let (_, body) = s.post("/db/_all_docs?descending=true", &json!({"keys": ["1", "2", "3"]}));
    assert_eq!(ids(&body["rows"]), ["3", "2", "1"]);
    // The query string wins over the body (all_docs_test.exs).
    let (_, body) = s.post("/db/_all_docs?limit=1", &json!({"keys": ["1", "2"], "limit": 2}));
    assert_eq!(ids(&body["rows"]), ["1"]);
}

#[test]
fn all_docs_post_with_empty_body_object_lists_everything() {
    let (s, _) = library();
    let (status, body) = s.post("/db/_all_docs", &json!({}));
    assert_eq!(status, 200);
    assert_eq!(ids(&body["rows"]), ORDER);
}

#[test]
fn all_docs_post_body_must_be_object_with_array_keys() {
    // basics_test.exs "_all_docs POST error when multi-get is not a {'key': [...]} structure".
    let (s, _) = library();
    assert_error(
        s.post("/db/_all_docs", &json!([])),
        400,
        "bad_request",
        "Request body must be a JSON object",
    );
    assert_error(
        s.post("/db/_all_docs", &json!({"keys": 1})),
        400,
        "bad_request",
        "`keys` body member must be an array.",
    );
}

#[test]
fn all_docs_conflicts_true_with_include_docs_shows_conflicts() {
    let (s, revs) = library();
    let branch = "2-ff01552213fafa022e6167113ed01087";
    let (status, _) = s.put(
        "/db/3?new_edits=false",
        &json!({"_rev": "2-aa01552213fafa022e6167113ed01087", "value": "X"}),
    );
    assert_eq!(status, 201);
    let (status, _) = s.put("/db/3?new_edits=false", &json!({"_rev": branch, "value": "Z"}));
    assert_eq!(status, 201);
    let body = all(&s, &format!("?include_docs=true&conflicts=true&key={}", key("3")));
    let row = &body["rows"][0];
    assert_eq!(row["value"]["rev"], branch);
    assert_eq!(row["doc"]["_rev"], branch);
    assert_eq!(row["doc"]["_conflicts"], json!(["2-aa01552213fafa022e6167113ed01087", revs["3"]]));
}

#[test]
fn all_docs_update_seq_true_adds_the_database_seq() {
    let (s, _) = library();
    let body = all(&s, "?update_seq=true&limit=1");
    let info = s.db_info("db");
    assert_eq!(body["update_seq"], info["update_seq"]);
    assert!(all(&s, "?limit=1").get("update_seq").is_none());
}

#[test]
fn all_docs_excludes_deleted_documents() {
    let (s, revs) = library();
    s.delete(&format!("/db/mspress?rev={}", revs["mspress"]));
    let body = all(&s, "");
    assert_eq!(ids(&body["rows"]), ["1", "100", "1000", "2", "3"]);
    assert_eq!(body["total_rows"], 5);
}

#[test]
fn all_docs_rejects_bad_parameter_values() {
    // couch_mrview_http:parse_int / parse_boolean.
    let (s, _) = library();
    assert_error(
        s.get("/db/_all_docs?limit=abc"),
        400,
        "query_parse_error",
        "Invalid value for integer: \"abc\"",
    );
    assert_error(
        s.get("/db/_all_docs?limit=-1"),
        400,
        "query_parse_error",
        "Invalid value for positive integer: \"-1\"",
    );
    assert_error(
        s.get("/db/_all_docs?descending=yes"),
        400,
        "query_parse_error",
        "Invalid boolean parameter: \"yes\"",
    );
    let (status, body) = s.get("/db/_all_docs?startkey=notjson");
    assert_eq!(status, 400, "{body}");
}

#[test]
fn design_docs_lists_only_design_documents() {
    let (s, _) = library();
    let r1 = s.put_doc("db", "_design/books", &json!({"views": {}}));
    let r2 = s.put_doc("db", "_design/authors", &json!({"views": {}}));
    let (status, body) = s.get("/db/_design_docs");
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["rows"],
        json!([
            {"id": "_design/authors", "key": "_design/authors", "value": {"rev": r2}},
            {"id": "_design/books", "key": "_design/books", "value": {"rev": r1}}
        ])
    );
    assert_eq!(body["total_rows"], 2);
    // _all_docs still lists them among the others.
    let ids_all = ids(&all(&s, "")["rows"]);
    assert!(ids_all.contains(&"_design/books".to_string()), "{ids_all:?}");
    assert_eq!(all(&s, "")["total_rows"], 8);
}
