//! Single-document CRUD and revision rules.

use reqwest::Method;
use serde_json::{Value, json};

use crate::harness::{Server, assert_error, body_json, enc, rev_gen, rev_hash, send};

/// The person from the Cosmos DB modeling guide: addresses and contact details embedded.
fn thomas() -> Value {
    json!({
        "firstName": "Thomas",
        "lastName": "Andersen",
        "addresses": [
            {"line1": "100 Some Street", "line2": "Unit 1", "city": "Seattle", "state": "WA",
             "zip": 98012}
        ],
        "contactDetails": [
            {"email": "thomas@andersen.com"},
            {"phone": "+1 555 555-5555", "extension": 5555}
        ]
    })
}

fn with(mut doc: Value, key: &str, value: Value) -> Value {
    doc.as_object_mut().unwrap().insert(key.to_string(), value);
    doc
}

fn keys(v: &Value) -> Vec<String> {
    v.as_object().unwrap().keys().cloned().collect()
}

fn setup() -> Server {
    let s = Server::start();
    s.create_db("db");
    s
}

#[test]
fn put_returns_201_with_ok_id_and_first_generation_rev() {
    let s = setup();
    let (status, body) = s.put("/db/thomas", &thomas());
    assert_eq!(status, 201, "{body}");
    assert_eq!(keys(&body), ["ok", "id", "rev"]);
    assert_eq!(body["ok"], true);
    assert_eq!(body["id"], "thomas");
    assert_eq!(rev_gen(body["rev"].as_str().unwrap()), 1);
}

#[test]
fn get_returns_id_rev_then_body_in_written_key_order() {
    let s = setup();
    let rev = s.put_doc("db", "thomas", &thomas());
    let resp = s.req(Method::GET, "/db/thomas").send().unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let ctype = resp.headers()["content-type"].to_str().unwrap().to_string();
    assert!(ctype.starts_with("application/json"), "Content-Type {ctype}");
    let doc = body_json(resp);
    assert_eq!(keys(&doc), ["_id", "_rev", "firstName", "lastName", "addresses", "contactDetails"]);
    let mut expected = json!({"_id": "thomas", "_rev": rev});
    for (k, v) in thomas().as_object().unwrap() {
        expected[k] = v.clone();
    }
    assert_eq!(doc, expected);
}

#[test]
fn numbers_and_unicode_round_trip_as_written() {
    let s = setup();
    let body = r#"{"big":12345678901234567890,"neg":-42,"float":1.5,"zero_float":1.0,"title":"文書データのモデル化","emoji":"📚","esc":"a\"b\\c\n"}"#;
    let (status, resp) = s.raw(Method::PUT, "/db/numbers", body);
    assert_eq!(status, 201, "{resp}");
    let text = s.req(Method::GET, "/db/numbers").send().unwrap().text().unwrap();
    assert!(text.contains("12345678901234567890"), "big integer kept exactly: {text}");
    assert!(text.contains("-42"), "{text}");
    assert!(text.contains("1.5"), "{text}");
    assert!(text.contains("1.0"), "a float stays a float: {text}");
    let doc: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(doc["title"], "文書データのモデル化");
    assert_eq!(doc["emoji"], "📚");
    assert_eq!(doc["esc"], "a\"b\\c\n");
}

#[test]
fn update_requires_current_rev_or_gets_409_conflict() {
    let s = setup();
    let r1 = s.put_doc("db", "thomas", &thomas());
    let conflict = "Document update conflict.";

    // No rev at all.
    assert_error(s.put("/db/thomas", &thomas()), 409, "conflict", conflict);
    // The current rev: a second generation.
    let r2 = s.put_doc("db", "thomas", &with(thomas(), "_rev", json!(r1)));
    assert_eq!(rev_gen(&r2), 2);
    // The old rev again.
    let stale = with(with(thomas(), "_rev", json!(r1)), "lastName", json!("X"));
    assert_error(s.put("/db/thomas", &stale), 409, "conflict", conflict);
    // A well-formed rev that never existed.
    let bogus = with(thomas(), "_rev", json!("2-0123456789abcdef0123456789abcdef"));
    assert_error(s.put("/db/thomas", &bogus), 409, "conflict", conflict);

    let doc = s.get_doc("db", "thomas");
    assert_eq!(doc["_rev"], r2);
    assert_eq!(doc["lastName"], "Andersen", "rejected edits changed nothing");
}

#[test]
fn same_edit_gives_same_rev_in_two_fresh_databases() {
    let s = Server::start();
    s.create_db("one");
    s.create_db("two");
    let a1 = s.put_doc("one", "thomas", &thomas());
    let b1 = s.put_doc("two", "thomas", &thomas());
    assert_eq!(a1, b1, "revs are deterministic");
    let a2 = s.put_doc("one", "thomas", &with(thomas(), "_rev", json!(a1)));
    let b2 = s.put_doc("two", "thomas", &with(thomas(), "_rev", json!(b1)));
    assert_eq!(a2, b2);
    assert_ne!(a1, a2);
    let (_, da) = s.delete(&format!("/one/thomas?rev={a2}"));
    let (_, db) = s.delete(&format!("/two/thomas?rev={b2}"));
    assert_eq!(da["rev"], db["rev"]);

    // A different body gives a different rev.
    let other = s.put_doc("one", "william", &json!({"firstName": "William"}));
    let other2 = s.put_doc("two", "william", &json!({"firstName": "Willem"}));
    assert_ne!(rev_hash(&other), rev_hash(&other2));
}

#[test]
fn post_generates_a_uuid_id_and_location_header() {
    let s = setup();
    let resp = s.req(Method::POST, "/db").json(&json!({"name": "Azure Cosmos DB 101"})).send();
    let resp = resp.unwrap();
    assert_eq!(resp.status().as_u16(), 201);
    let location = resp.headers().get("location").map(|v| v.to_str().unwrap().to_string());
    let body = body_json(resp);
    assert_eq!(body["ok"], true);
    let id = body["id"].as_str().unwrap().to_string();
    assert_eq!(id.len(), 32, "generated id is a 32-hex uuid: {id}");
    assert!(id.bytes().all(|b| b.is_ascii_hexdigit()));
    assert_eq!(rev_gen(body["rev"].as_str().unwrap()), 1);
    assert!(
        location.as_deref().is_some_and(|l| l.ends_with(&format!("/db/{id}"))),
        "Location {location:?}"
    );
    assert_eq!(s.get_doc("db", &id)["name"], "Azure Cosmos DB 101");
}

#[test]
fn post_with_id_uses_it_and_conflicts_on_second_post() {
    let s = setup();
    let book = json!({"_id": "1", "name": "Azure Cosmos DB 101", "pub-id": "mspress"});
    let (status, body) = s.post("/db", &book);
    assert_eq!(status, 201);
    assert_eq!(body["id"], "1");
    assert_error(s.post("/db", &book), 409, "conflict", "Document update conflict.");
    assert_eq!(s.get_doc("db", "1")["pub-id"], "mspress");
}

#[test]
fn ids_with_slashes_colons_and_unicode_round_trip_when_url_encoded() {
    let s = setup();
    for id in ["a/b", "bridge-9876:device-123456-20181211T11:13:24.123456Z", "文書", "a b+c?d#e"]
    {
        let rev = s.put_doc("db", &enc(id), &json!({"reading": {"value": 12, "unit": "c"}}));
        let doc = s.get_doc("db", &enc(id));
        assert_eq!(doc["_id"], id);
        assert_eq!(doc["_rev"], rev);
    }
    let (_, all) = s.get("/db/_all_docs");
    let mut got = crate::harness::ids(&all["rows"]);
    got.sort();
    let mut expected: Vec<String> =
        ["a/b", "bridge-9876:device-123456-20181211T11:13:24.123456Z", "文書", "a b+c?d#e"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    expected.sort();
    assert_eq!(got, expected);
}

#[test]
fn design_docs_are_addressed_with_a_literal_slash() {
    let s = setup();
    let rev = s.put_doc("db", "_design/people", &json!({"language": "javascript", "views": {}}));
    let doc = s.get_doc("db", "_design/people");
    assert_eq!(doc["_id"], "_design/people");
    assert_eq!(doc["_rev"], rev);
    assert_eq!(doc["language"], "javascript");
    // chttpd_db: a GET with `_design%2F` redirects to the unencoded form.
    let resp = s.req(Method::GET, "/db/_design%2Fpeople").send().unwrap();
    assert_eq!(resp.status().as_u16(), 301);
    let location = resp.headers().get("location").map(|v| v.to_str().unwrap().to_string());
    assert!(
        location.as_deref().is_some_and(|l| l.ends_with("/db/_design/people")),
        "Location {location:?}"
    );
}

#[test]
fn delete_with_rev_leaves_a_tombstone_and_get_says_deleted() {
    let s = setup();
    let r1 = s.put_doc("db", "thomas", &thomas());
    let (status, body) = s.delete(&format!("/db/thomas?rev={r1}"));
    assert_eq!(status, 200, "{body}");
    assert_eq!(keys(&body), ["ok", "id", "rev"]);
    assert_eq!(body["id"], "thomas");
    let r2 = body["rev"].as_str().unwrap().to_string();
    assert_eq!(rev_gen(&r2), 2);

    assert_error(s.get("/db/thomas"), 404, "not_found", "deleted");
    // The tombstone itself can be read by rev.
    assert_eq!(
        s.get(&format!("/db/thomas?rev={r2}")),
        (200, json!({"_id": "thomas", "_rev": r2, "_deleted": true}))
    );
    let head = s.head("/db/thomas");
    assert_eq!(head.status().as_u16(), 404);
}

#[test]
fn delete_without_rev_is_conflict_and_missing_doc_is_not_found() {
    let s = setup();
    s.put_doc("db", "thomas", &thomas());
    assert_error(s.delete("/db/thomas"), 409, "conflict", "Document update conflict.");
    assert_error(
        s.delete("/db/thomas?rev=1-0123456789abcdef0123456789abcdef"),
        409,
        "conflict",
        "Document update conflict.",
    );
    assert_error(
        s.delete("/db/nobody?rev=1-0123456789abcdef0123456789abcdef"),
        404,
        "not_found",
        "missing",
    );
    assert_error(s.get("/db/nobody"), 404, "not_found", "missing");
    assert_eq!(s.get_doc("db", "thomas")["firstName"], "Thomas");
}

#[test]
fn deleting_with_put_deleted_true_keeps_the_body_in_the_tombstone() {
    let s = setup();
    let r1 = s.put_doc("db", "thomas", &thomas());
    let (status, body) =
        s.put("/db/thomas", &json!({"_rev": r1, "_deleted": true, "reason": "moved"}));
    assert_eq!(status, 201, "{body}");
    let r2 = body["rev"].as_str().unwrap().to_string();
    assert_error(s.get("/db/thomas"), 404, "not_found", "deleted");
    assert_eq!(
        s.get(&format!("/db/thomas?rev={r2}")),
        (200, json!({"_id": "thomas", "_rev": r2, "_deleted": true, "reason": "moved"}))
    );
}

#[test]
fn recreating_a_deleted_doc_continues_its_revision_history() {
    let s = setup();
    let r1 = s.put_doc("db", "thomas", &thomas());
    let (_, del) = s.delete(&format!("/db/thomas?rev={r1}"));
    let r3 = s.put_doc("db", "thomas", &json!({"firstName": "Thomas", "v": 2}));
    assert_eq!(rev_gen(&r3), 3, "recreate extends the deleted branch");
    let doc = s.get("/db/thomas?revs=true").1;
    assert_eq!(
        doc["_revisions"],
        json!({"start": 3, "ids": [rev_hash(&r3), rev_hash(del["rev"].as_str().unwrap()), rev_hash(&r1)]})
    );
    assert_eq!(doc["v"], 2);
    assert!(doc.get("addresses").is_none(), "old body not merged in: {doc}");
}

#[test]
fn get_old_rev_returns_its_body_until_compaction() {
    // basics_test.exs: after an update and a delete, GET ?rev=<old> is not 404.
    let s = setup();
    let r1 = s.put_doc("db", "thomas", &thomas());
    let r2 = s.put_doc("db", "thomas", &json!({"_rev": r1, "firstName": "Tom"}));
    let old = s.get(&format!("/db/thomas?rev={r1}"));
    assert_eq!(old.0, 200, "{}", old.1);
    assert_eq!(old.1["firstName"], "Thomas");
    assert_eq!(old.1["_rev"], r1);
    assert_eq!(s.get(&format!("/db/thomas?rev={r2}")).1["firstName"], "Tom");
    assert_error(
        s.get("/db/thomas?rev=1-0123456789abcdef0123456789abcdef"),
        404,
        "not_found",
        "missing",
    );
}

#[test]
fn revs_and_revs_info_describe_the_history() {
    let s = setup();
    let r1 = s.put_doc("db", "thomas", &thomas());
    let r2 = s.put_doc("db", "thomas", &with(thomas(), "_rev", json!(r1)));
    let r3 = s.put_doc("db", "thomas", &with(thomas(), "_rev", json!(r2)));

    let doc = s.get("/db/thomas?revs=true").1;
    assert_eq!(
        doc["_revisions"],
        json!({"start": 3, "ids": [rev_hash(&r3), rev_hash(&r2), rev_hash(&r1)]})
    );
    let doc = s.get("/db/thomas?revs_info=true").1;
    assert_eq!(
        doc["_revs_info"],
        json!([
            {"rev": r3, "status": "available"},
            {"rev": r2, "status": "available"},
            {"rev": r1, "status": "available"}
        ])
    );
    // Without the options neither field appears.
    let doc = s.get_doc("db", "thomas");
    assert!(doc.get("_revisions").is_none() && doc.get("_revs_info").is_none(), "{doc}");
}

/// Builds "doc" through `new_edits=false` PUTs with the tree
/// `1-x -> 2-aaaa -> 3-dddd (deleted)`, `1-x -> 2-bbbb`, `1-x -> 2-cccc`.
/// Returns (1-x, 2-bbbb, 2-cccc, 3-dddd).
fn conflicted(s: &Server) -> (String, String, String, String) {
    let r1 = s.put_doc("db", "doc", &json!({"v": 1}));
    let a = "2-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa".to_string();
    let b = "2-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb".to_string();
    let c = "2-cccccccccccccccccccccccccccccccc".to_string();
    let d = "3-dddddddddddddddddddddddddddddddd".to_string();
    for (rev, v) in [(&a, "a"), (&b, "b"), (&c, "c")] {
        let body = json!({"_rev": rev, "v": v,
            "_revisions": {"start": 2, "ids": [rev_hash(rev), rev_hash(&r1)]}});
        let (status, resp) = s.put("/db/doc?new_edits=false", &body);
        assert_eq!(status, 201, "{resp}");
        assert_eq!(resp, json!({"ok": true, "id": "doc", "rev": rev}));
    }
    let body = json!({"_rev": d, "_deleted": true,
        "_revisions": {"start": 3, "ids": [rev_hash(&d), rev_hash(&a), rev_hash(&r1)]}});
    let (status, resp) = s.put("/db/doc?new_edits=false", &body);
    assert_eq!(status, 201, "{resp}");
    (r1, b, c, d)
}

#[test]
fn conflicts_and_deleted_conflicts_list_the_losing_leaves() {
    let s = setup();
    let (_r1, b, c, d) = conflicted(&s);
    // Winner: live beats deleted (3-d is deleted despite its higher generation), then the
    // higher rev string: 2-c > 2-b.
    let doc = s.get_doc("db", "doc");
    assert_eq!(doc["_rev"], c);
    assert_eq!(doc["v"], "c");
    assert!(doc.get("_conflicts").is_none(), "only with ?conflicts=true: {doc}");

    let doc = s.get("/db/doc?conflicts=true").1;
    assert_eq!(doc["_conflicts"], json!([b]));
    assert!(doc.get("_deleted_conflicts").is_none(), "{doc}");

    let doc = s.get("/db/doc?deleted_conflicts=true").1;
    assert_eq!(doc["_deleted_conflicts"], json!([d]));
    assert!(doc.get("_conflicts").is_none(), "{doc}");
}

#[test]
fn open_revs_all_returns_every_leaf_as_json() {
    let s = setup();
    let (_r1, b, c, d) = conflicted(&s);
    let (status, body) = s.get("/db/doc?open_revs=all");
    assert_eq!(status, 200, "{body}");
    let mut leaves: Vec<(String, Value)> = body
        .as_array()
        .unwrap_or_else(|| panic!("array: {body}"))
        .iter()
        .map(|r| {
            let d = &r["ok"];
            (d["_rev"].as_str().unwrap_or_else(|| panic!("ok row: {r}")).to_string(), d.clone())
        })
        .collect();
    leaves.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        leaves,
        vec![
            (b.clone(), json!({"_id": "doc", "_rev": b, "v": "b"})),
            (c.clone(), json!({"_id": "doc", "_rev": c, "v": "c"})),
            (d.clone(), json!({"_id": "doc", "_rev": d, "_deleted": true})),
        ]
    );
}

#[test]
fn open_revs_list_returns_ok_and_missing_in_request_order() {
    let s = setup();
    let r1 = s.put_doc("db", "thomas", &thomas());
    let r2 = s.put_doc("db", "thomas", &json!({"_rev": r1, "firstName": "Tom"}));
    let missing = "9-0123456789abcdef0123456789abcdef";
    let query = enc(&json!([r2, missing]).to_string());
    let (status, body) = s.get(&format!("/db/thomas?open_revs={query}"));
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        json!([
            {"ok": {"_id": "thomas", "_rev": r2, "firstName": "Tom"}},
            {"missing": missing}
        ])
    );
}

#[test]
fn latest_true_follows_an_old_rev_to_its_leaf() {
    let s = setup();
    let r1 = s.put_doc("db", "thomas", &thomas());
    let r2 = s.put_doc("db", "thomas", &json!({"_rev": r1, "firstName": "Tom"}));
    let query = enc(&json!([r1]).to_string());
    let (status, body) = s.get(&format!("/db/thomas?open_revs={query}&latest=true"));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, json!([{"ok": {"_id": "thomas", "_rev": r2, "firstName": "Tom"}}]));
    let (status, body) = s.get(&format!("/db/thomas?rev={r1}&latest=true"));
    assert_eq!((status, body["_rev"].clone()), (200, json!(r2)));
}

#[test]
fn local_seq_reports_the_documents_sequence() {
    let s = setup();
    s.put_doc("db", "a", &json!({}));
    s.put_doc("db", "b", &json!({}));
    let a = s.get("/db/a?local_seq=true").1;
    let b = s.get("/db/b?local_seq=true").1;
    // basics_test.exs: the first write in a fresh database has _local_seq 1.
    assert_eq!(a["_local_seq"], 1, "{a}");
    assert_eq!(b["_local_seq"], 2, "{b}");
    assert!(s.get_doc("db", "a").get("_local_seq").is_none());
}

#[test]
fn etag_is_the_quoted_rev_and_if_none_match_gives_304() {
    let s = setup();
    let rev = s.put_doc("db", "thomas", &thomas());
    let resp = s.req(Method::GET, "/db/thomas").send().unwrap();
    let etag = resp.headers().get("etag").map(|v| v.to_str().unwrap().to_string());
    assert_eq!(etag, Some(format!("\"{rev}\"")));

    let resp = s
        .req(Method::GET, "/db/thomas")
        .header("If-None-Match", format!("\"{rev}\""))
        .send()
        .unwrap();
    assert_eq!(resp.status().as_u16(), 304);
    // CouchDB 3.4.3 says so (`basics_test.exs` checks it).
    assert_eq!(resp.headers().get("content-length").map(|v| v.as_bytes()), Some(&b"0"[..]));
    assert!(resp.bytes().unwrap().is_empty(), "304 has no body");
    // A weak ETag matches too (CouchDB's `etag_match`, `etags_head_test.exs`).
    let weak = s.req(Method::GET, "/db/thomas").header("If-None-Match", format!("W/\"{rev}\""));
    assert_eq!(weak.send().unwrap().status().as_u16(), 304);

    let resp = s
        .req(Method::GET, "/db/thomas")
        .header("If-None-Match", "\"1-00000000000000000000000000000000\"")
        .send()
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
}

#[test]
fn head_document_gives_status_and_etag_without_body() {
    let s = setup();
    let rev = s.put_doc("db", "thomas", &thomas());
    let resp = s.head("/db/thomas");
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(
        resp.headers().get("etag").map(|v| v.to_str().unwrap().to_string()),
        Some(format!("\"{rev}\""))
    );
    assert!(resp.bytes().unwrap().is_empty());
    assert_eq!(s.head("/db/nobody").status().as_u16(), 404);
}

#[test]
fn if_match_header_supplies_the_rev_for_put_and_delete() {
    let s = setup();
    let r1 = s.put_doc("db", "thomas", &thomas());
    let (status, body) = send(
        s.req(Method::PUT, "/db/thomas").header("If-Match", r1.as_str()).json(&json!({"v": 2})),
    );
    assert_eq!(status, 201, "{body}");
    let r2 = body["rev"].as_str().unwrap().to_string();
    assert_eq!(rev_gen(&r2), 2);

    // A stale If-Match is a conflict.
    let got = send(
        s.req(Method::PUT, "/db/thomas").header("If-Match", r1.as_str()).json(&json!({"v": 3})),
    );
    assert_error(got, 409, "conflict", "Document update conflict.");

    // If-Match that disagrees with the body's _rev (conflicts_test.exs).
    let got = send(
        s.req(Method::PUT, "/db/thomas")
            .header("If-Match", "1-foobar")
            .json(&json!({"_rev": r2, "v": 3})),
    );
    assert_error(got, 400, "bad_request", "Document rev and etag have different values");

    let (status, body) = send(s.req(Method::DELETE, "/db/thomas").header("If-Match", r2.as_str()));
    assert_eq!(status, 200, "{body}");
    assert_error(s.get("/db/thomas"), 404, "not_found", "deleted");
}

#[test]
fn rev_query_parameter_supplies_the_rev_and_must_match_the_body() {
    let s = setup();
    let r1 = s.put_doc("db", "thomas", &thomas());
    let (status, body) = s.put(&format!("/db/thomas?rev={r1}"), &json!({"v": 2}));
    assert_eq!(status, 201, "{body}");
    let r2 = body["rev"].as_str().unwrap().to_string();
    assert_error(
        s.put(&format!("/db/thomas?rev={r1}"), &json!({"_rev": r2, "v": 3})),
        400,
        "bad_request",
        "Document rev from request body and query string have different values",
    );
    assert_eq!(s.get_doc("db", "thomas")["v"], 2);
}

#[test]
fn new_edits_false_put_stores_the_given_rev_verbatim() {
    let s = setup();
    let rev = "5-0123456789abcdef0123456789abcdef";
    let (status, body) = s.put("/db/replicated?new_edits=false", &json!({"_rev": rev, "v": 1}));
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["rev"], rev);
    assert_eq!(s.get_doc("db", "replicated"), json!({"_id": "replicated", "_rev": rev, "v": 1}));
}

#[test]
fn read_only_special_fields_from_a_get_can_be_written_back() {
    // couch_doc:transfer_fields ignores _revs_info, _local_seq, _conflicts, _deleted_conflicts.
    let s = setup();
    s.put_doc("db", "thomas", &thomas());
    let doc = s.get("/db/thomas?revs_info=true&local_seq=true&conflicts=true").1;
    let mut doc = doc.clone();
    doc["_conflicts"] = json!([]);
    doc["_deleted_conflicts"] = json!([]);
    let (status, body) = s.put("/db/thomas", &doc);
    assert_eq!(status, 201, "{body}");
    let stored = s.get_doc("db", "thomas");
    for field in ["_revs_info", "_local_seq", "_conflicts", "_deleted_conflicts"] {
        assert!(stored.get(field).is_none(), "{field} is not stored: {stored}");
    }
    assert_eq!(stored["addresses"], thomas()["addresses"]);
}
