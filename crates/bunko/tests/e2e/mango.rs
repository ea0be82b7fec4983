//! Mango: `_index`, `_find`, `_explain`, globally and per partition. Expected shapes follow
//! CouchDB 3.4 (`src/mango/test/*.py`, `mango_error.erl`); the index behaviour goes beyond it
//! (indexes maintained in the writing commit, multikey `$elemMatch`), as DESIGN.md §5 says.

use serde_json::{Value, json};

use crate::harness::{Server, assert_error, assert_error_kind};

fn find(s: &Server, path: &str, body: Value) -> Value {
    let (status, out) = s.post(path, &body);
    assert_eq!(status, 200, "{path} {body} -> {out}");
    out
}

fn ids(out: &Value) -> Vec<String> {
    out["docs"]
        .as_array()
        .map(|d| d.iter().filter_map(|d| d["_id"].as_str().map(String::from)).collect())
        .unwrap_or_default()
}

fn stats(out: &Value) -> (u64, u64) {
    let s = &out["execution_stats"];
    (
        s["total_keys_examined"].as_u64().unwrap_or(u64::MAX),
        s["total_docs_examined"].as_u64().unwrap_or(u64::MAX),
    )
}

fn create_index(s: &Server, db: &str, body: Value) -> Value {
    let (status, out) = s.post(&format!("/{db}/_index"), &body);
    assert_eq!(status, 200, "{body} -> {out}");
    out
}

/// Waits until `_find` with `body` no longer warns of a full scan (the index is built).
fn wait_for_index(s: &Server, path: &str, body: &Value) -> Value {
    for _ in 0..200 {
        let out = find(s, path, body.clone());
        if out.get("warning").is_none() {
            return out;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("index never became usable for {body}");
}

/// Readings of `devices` devices in each of `bridges` partitions, `per` readings each.
fn load_readings(s: &Server, db: &str, bridges: usize, devices: usize, per: usize) {
    let mut docs = Vec::new();
    for b in 0..bridges {
        for d in 0..devices {
            for t in 0..per {
                let device = format!("device-{b}-{d}");
                docs.push(json!({"_id": format!("bridge-{b}:{device}-{t:04}"), "deviceID": device,
                    "infrastructureID": format!("bridge-{b}"), "ts": t, "type": "reading"}));
            }
        }
    }
    for chunk in docs.chunks(1000) {
        let (status, _) = s.post(&format!("/{db}/_bulk_docs"), &json!({"docs": chunk}));
        assert_eq!(status, 201);
    }
}

#[test]
fn the_iot_walkthrough_queries_one_partition_through_a_partitioned_index() {
    let s = Server::start();
    s.put_empty("/readings?partitioned=true");
    load_readings(&s, "readings", 3, 4, 10);
    let created = create_index(
        &s,
        "readings",
        json!({"index": {"fields": ["deviceID", "ts"]}, "name": "deviceID-readings",
               "type": "json", "partitioned": true}),
    );
    assert_eq!(created["result"], "created");
    assert_eq!(created["name"], "deviceID-readings");
    let query = json!({"selector": {"deviceID": {"$eq": "device-1-2"}, "ts": {"$gte": 5}},
        "sort": [{"deviceID": "desc"}, {"ts": "desc"}], "limit": 3, "execution_stats": true});
    let out = wait_for_index(&s, "/readings/_partition/bridge-1/_find", &query);
    assert_eq!(
        ids(&out),
        ["bridge-1:device-1-2-0009", "bridge-1:device-1-2-0008", "bridge-1:device-1-2-0007"]
    );
    // Only the rows returned, plus (as in CouchDB) the next match that ends the page.
    assert_eq!(stats(&out), (4, 4), "only the rows returned were read: {out}");
    // All readings of one device: `ts` is not required, so (as in CouchDB) the
    // (deviceID, ts) index cannot serve it, and the query scans the partition's 40
    // documents, not the database's 120.
    let all = find(
        &s,
        "/readings/_partition/bridge-1/_find",
        json!({"selector": {"deviceID": {"$eq": "device-1-2"}}, "execution_stats": true}),
    );
    assert_eq!(ids(&all).len(), 10);
    assert_eq!(stats(&all), (40, 40));
    // The partitioned index serves no global query: that one scans every document.
    let global = find(
        &s,
        "/readings/_find",
        json!({"selector": {"deviceID": "device-1-2"}, "execution_stats": true}),
    );
    assert_eq!(ids(&global).len(), 10);
    // 120 documents read for 10 results: CouchDB's second warning line too.
    assert_eq!(
        global["warning"],
        "No matching index found, create an index to optimize query time.\nThe number of \
         documents examined is high in proportion to the number of results returned. \
         Consider adding a more specific index to improve this."
    );
    // The 120 readings and the design document, which CouchDB reads and skips.
    assert_eq!(stats(&global).1, 121);
    // Sorting globally needs a global index.
    assert_error(
        s.post("/readings/_find", &json!({"selector": {"deviceID": "d"}, "sort": ["ts"]})),
        400,
        "no_usable_index",
        "No global index exists for this sort, try indexing by the sort fields.",
    );
    // A global index on the device answers the global question.
    create_index(&s, "readings", json!({"index": {"fields": ["deviceID"]}, "partitioned": false}));
    let out = wait_for_index(
        &s,
        "/readings/_find",
        &json!({"selector": {"deviceID": "device-2-0"}, "limit": 1, "execution_stats": true}),
    );
    assert_eq!(out["docs"][0]["infrastructureID"], "bridge-2");
    // The one row returned and the next match, which ends the page (as in CouchDB).
    assert_eq!(stats(&out).1, 2);
}

#[test]
fn a_partition_query_reads_the_same_keys_however_many_other_partitions_exist() {
    let s = Server::start();
    s.put_empty("/small?partitioned=true");
    s.put_empty("/large?partitioned=true");
    load_readings(&s, "small", 2, 2, 5);
    load_readings(&s, "large", 40, 2, 5);
    let query = json!({"selector": {"deviceID": "device-1-1"}, "execution_stats": true});
    let mut seen = Vec::new();
    for db in ["small", "large"] {
        create_index(&s, db, json!({"index": {"fields": ["deviceID"]}, "ddoc": "d", "name": "n"}));
        let out = wait_for_index(&s, &format!("/{db}/_partition/bridge-1/_find"), &query);
        let scan = find(
            &s,
            &format!("/{db}/_partition/bridge-1/_find"),
            json!({"selector": {"ts": {"$gte": 0}}, "execution_stats": true}),
        );
        seen.push((ids(&out).len(), stats(&out), stats(&scan)));
    }
    assert_eq!(seen[0], seen[1], "cost depends only on the partition: {seen:?}");
    assert_eq!(seen[0].0, 5);
    assert_eq!(seen[0].2, (10, 10), "a partition scan without an index reads only the partition");
}

#[test]
fn elem_match_on_links_uses_the_multikey_index() {
    // The single-collection pattern: students and classes linked by `links`.
    let s = Server::start();
    s.create_db("school");
    let mut docs = Vec::new();
    for i in 0..200 {
        let class = format!("C{}", i % 10);
        docs.push(json!({"_id": format!("student-{i:03}"), "doc_type": "student",
            "links": [{"target": class, "doc_type": "class"}, {"target": format!("S{i}"), "doc_type": "self"}]}));
    }
    s.post("/school/_bulk_docs", &json!({"docs": docs}));
    let query = json!({"selector": {"links": {"$elemMatch": {"target": "C3", "doc_type": "class"}}},
        "execution_stats": true, "limit": 100});
    let before = find(&s, "/school/_find", query.clone());
    assert_eq!(ids(&before).len(), 20);
    assert_eq!(stats(&before).1, 200, "without an index every document is read");
    create_index(&s, "school", json!({"index": {"fields": ["links.target", "links.doc_type"]}}));
    let after = wait_for_index(&s, "/school/_find", &query);
    assert_eq!(ids(&after), ids(&before));
    assert_eq!(stats(&after), (20, 20), "only the matching documents are read");
    // Fields of one element pair up: target C3 with doc_type self matches nothing.
    let none = find(
        &s,
        "/school/_find",
        json!({"selector": {"links": {"$elemMatch": {"target": "C3", "doc_type": "self"}}}, "execution_stats": true}),
    );
    assert_eq!(ids(&none).len(), 0);
    assert_eq!(stats(&none).1, 0);
}

#[test]
fn indexes_follow_every_write_without_a_rebuild() {
    let s = Server::start();
    s.create_db("msgs");
    create_index(
        &s,
        "msgs",
        json!({"index": {"fields": ["posted_by"]}, "ddoc": "by-author", "name": "posted_by"}),
    );
    let rev = s.put_doc("msgs", "m1", &json!({"posted_by": "ann", "text": "hi"}));
    s.put_doc("msgs", "m2", &json!({"posted_by": "bob", "text": "yo"}));
    let q = |who: &str| json!({"selector": {"posted_by": who}, "execution_stats": true});
    let out = find(&s, "/msgs/_find", q("ann"));
    assert_eq!(ids(&out), ["m1"]);
    assert!(out.get("warning").is_none(), "{out}");
    let rev = s.put_doc("msgs", "m1", &json!({"_rev": rev, "posted_by": "bob", "text": "hi"}));
    assert_eq!(ids(&find(&s, "/msgs/_find", q("ann"))), Vec::<String>::new());
    assert_eq!(ids(&find(&s, "/msgs/_find", q("bob"))), ["m1", "m2"]);
    assert_eq!(s.delete(&format!("/msgs/m1?rev={rev}")).0, 200);
    let out = find(&s, "/msgs/_find", q("bob"));
    assert_eq!(ids(&out), ["m2"]);
    assert_eq!(stats(&out), (1, 1), "the deleted document left the index");
}

#[test]
fn an_index_over_existing_documents_is_built_in_the_background_while_writes_continue() {
    let mut s = Server::start();
    s.create_db("db");
    let docs: Vec<Value> =
        (0..3000).map(|i| json!({"_id": format!("d{i:05}"), "n": i % 7})).collect();
    for chunk in docs.chunks(1000) {
        s.post("/db/_bulk_docs", &json!({"docs": chunk}));
    }
    create_index(&s, "db", json!({"index": {"fields": ["n"]}, "ddoc": "n", "name": "n"}));
    // While it builds, the build is an `indexer` task (it may already be done).
    let (_, tasks) = s.get("/_active_tasks");
    for task in tasks.as_array().cloned().unwrap_or_default() {
        assert_eq!(
            (task["type"].as_str(), task["database"].as_str()),
            (Some("indexer"), Some("db"))
        );
        assert_eq!(task["design_document"], "_design/n");
        assert_eq!(task["total_changes"], 3001, "the documents and the design document");
    }
    for i in 0..50 {
        s.put_doc("db", &format!("new{i:03}"), &json!({"n": 3}));
    }
    let query = json!({"selector": {"n": 3}, "limit": 10000, "execution_stats": true});
    let indexed = wait_for_index(&s, "/db/_find", &query);
    assert_eq!(s.get("/_active_tasks"), (200, json!([])), "no build is left running");
    let expected = 3000 / 7 + 1 + 50;
    assert_eq!(ids(&indexed).len(), expected);
    assert_eq!(stats(&indexed).1 as usize, expected);
    s.terminate();
    s.restart();
    let again = find(&s, "/db/_find", query);
    assert!(again.get("warning").is_none(), "the index survives a restart");
    assert_eq!(ids(&again), ids(&indexed));
}

#[test]
fn bookmarks_page_through_results_and_tampering_is_refused() {
    let s = Server::start();
    s.create_db("db");
    let docs: Vec<Value> = (0..7).map(|i| json!({"_id": format!("d{i}"), "v": i})).collect();
    s.post("/db/_bulk_docs", &json!({"docs": docs}));
    create_index(&s, "db", json!({"index": {"fields": ["v"]}}));
    wait_for_index(&s, "/db/_find", &json!({"selector": {"v": 0}}));
    let mut seen = Vec::new();
    let mut bookmark = Value::Null;
    for _ in 0..5 {
        let out = find(
            &s,
            "/db/_find",
            json!({"selector": {"v": {"$gte": 0}}, "limit": 3, "bookmark": bookmark}),
        );
        if ids(&out).is_empty() {
            break;
        }
        seen.extend(ids(&out));
        bookmark = out["bookmark"].clone();
    }
    assert_eq!(seen, ["d0", "d1", "d2", "d3", "d4", "d5", "d6"]);
    assert_error_kind(
        s.post("/db/_find", &json!({"selector": {"v": 1}, "bookmark": "not-a-bookmark"})),
        400,
        "invalid_bookmark",
    );
    assert_eq!(s.get("/db/_all_docs").1["total_rows"], 8, "nothing changed");
}

#[test]
fn index_management_answers_as_couchdb() {
    let s = Server::start();
    s.create_db("db");
    let body = json!({"index": {"fields": ["foo", "bar"]}, "name": "idx_01", "ddoc": "dd"});
    assert_eq!(
        create_index(&s, "db", body.clone()),
        json!({"result": "created", "id": "_design/dd", "name": "idx_01"})
    );
    assert_eq!(create_index(&s, "db", body)["result"], "exists");
    let auto = create_index(&s, "db", json!({"index": {"fields": ["hello"]}}));
    assert_eq!(auto["id"], format!("_design/{}", auto["name"].as_str().unwrap_or_default()));
    let (_, list) = s.get("/db/_index");
    assert_eq!(list["total_rows"], 3);
    assert_eq!(list["indexes"][0]["name"], "_all_docs");
    assert_eq!(list["indexes"][1]["def"], json!({"fields": [{"foo": "asc"}, {"bar": "asc"}]}));
    let ddoc = s.get_doc("db", "_design/dd");
    assert_eq!(ddoc["language"], "query");
    assert_eq!(ddoc["views"]["idx_01"]["map"]["fields"], json!({"foo": "asc", "bar": "asc"}));

    let bad = |body: Value, error: &str| assert_error_kind(s.post("/db/_index", &body), 400, error);
    bad(json!({"index": {"fields": ["a"]}, "nope": 1}), "invalid_key");
    bad(json!({"name": "x"}), "missing_required_key");
    bad(json!({"index": {"fields": [{"foo": "asc"}, {"bar": "desc"}]}}), "unsupported_mixed_sort");
    bad(json!({"index": {"fields": ["foo"]}, "type": "geo"}), "invalid_index");
    bad(json!({"index": {"fields": ["foo"]}, "name": ""}), "invalid_empty_string");
    bad(json!({"index": "bing"}), "invalid_index");
    bad(json!({"index": {"fields": ["foo"]}, "partitioned": true}), "invalid_design_doc");
    assert_error(
        s.raw(
            reqwest::Method::POST,
            "/db/_index",
            "{\"index\": {\"fields\": [\"a\"]}, \"partitioned:\" true}",
        ),
        400,
        "bad_request",
        "invalid UTF-8 JSON",
    );

    assert_eq!(s.delete("/db/_index/dd/json/idx_01"), (200, json!({"ok": true})));
    assert_error_kind(s.delete("/db/_index/dd/json/idx_01"), 404, "not_found");
    assert_eq!(s.get("/db/_design/dd").0, 404, "an emptied design document is deleted");
    assert_error_kind(s.get("/db/_index/_bulk_delete"), 405, "method_not_allowed");
    assert_error_kind(s.get("/db/_index/a/b"), 404, "not_found");
    let ddoc_id = auto["id"].clone();
    let (status, out) =
        s.post("/db/_index/_bulk_delete", &json!({"docids": [ddoc_id, "_design/none"]}));
    assert_eq!(status, 200);
    assert_eq!(out["success"], json!([{"id": ddoc_id, "ok": true}]));
    assert_eq!(out["fail"][0]["id"], "_design/none");
    assert_eq!(s.get("/db/_index").1["total_rows"], 1);
}

#[test]
fn find_validates_its_request_and_changes_nothing() {
    let s = Server::start();
    s.create_db("db");
    s.put_doc("db", "a", &json!({"x": 1}));
    let bad = |body: Value, error: &str| assert_error_kind(s.post("/db/_find", &body), 400, error);
    bad(json!({}), "missing_required_key");
    bad(json!({"selector": []}), "invalid_selector_json");
    bad(json!({"selector": {"x": {"$bogus": 1}}}), "invalid_operator");
    bad(json!({"selector": {}, "limit": -1}), "invalid_non_neg_integer");
    bad(json!({"selector": {}, "what": 1}), "invalid_key");
    bad(json!({"selector": {}, "sort": "x"}), "invalid_sort_json");
    bad(json!({"selector": {}, "fields": "x"}), "invalid_fields");
    let out = find(&s, "/db/_find", json!({"selector": {"x": {"$gt": 0}}, "fields": ["x"]}));
    assert_eq!(out["docs"], json!([{"x": 1}]));
    assert_eq!(s.db_info("db")["doc_count"], 1);
}
