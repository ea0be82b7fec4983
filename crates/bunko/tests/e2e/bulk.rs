//! `_bulk_docs`, replication writes (`new_edits=false`), `_bulk_get`, `_revs_diff`, `_local`
//! documents and the small per-database endpoints (`_revs_limit`, `_security`,
//! `_ensure_full_commit`, `_compact`).

use reqwest::Method;
use serde_json::{Value, json};

use crate::harness::{Server, assert_error, rev_gen, rev_hash, send};

fn setup() -> Server {
    let s = Server::start();
    s.create_db("db");
    s
}

/// Message documents with parent references (`posted_by`), from the schema-design guide.
fn messages(n: usize) -> Vec<Value> {
    (1..=n)
        .map(|i| {
            json!({"_id": format!("m{i}"), "subject": format!("Books on kinematics #{i}"),
                   "posted_by": "student-sammy"})
        })
        .collect()
}

fn bulk(s: &Server, body: Value) -> (u16, Value) {
    s.post("/db/_bulk_docs", &body)
}

fn rows(v: &Value) -> &Vec<Value> {
    v.as_array().unwrap_or_else(|| panic!("expected an array, got {v}"))
}

#[test]
fn bulk_docs_creates_updates_and_deletes_many_documents() {
    let s = setup();
    let (status, created) = bulk(&s, json!({"docs": messages(5)}));
    assert_eq!(status, 201, "{created}");
    let created = rows(&created).clone();
    assert_eq!(created.len(), 5);
    for (i, row) in created.iter().enumerate() {
        assert_eq!(row["ok"], true, "{row}");
        assert_eq!(row["id"], format!("m{}", i + 1));
        assert_eq!(rev_gen(row["rev"].as_str().unwrap()), 1);
    }

    let updates: Vec<Value> = created
        .iter()
        .map(|r| json!({"_id": r["id"], "_rev": r["rev"], "subject": "edited"}))
        .collect();
    let (status, updated) = bulk(&s, json!({"docs": updates}));
    assert_eq!(status, 201);
    assert!(rows(&updated).iter().all(|r| rev_gen(r["rev"].as_str().unwrap()) == 2), "{updated}");
    assert_eq!(s.get_doc("db", "m3")["subject"], "edited");

    let deletes: Vec<Value> = rows(&updated)
        .iter()
        .map(|r| json!({"_id": r["id"], "_rev": r["rev"], "_deleted": true}))
        .collect();
    let (status, deleted) = bulk(&s, json!({"docs": deletes}));
    assert_eq!(status, 201);
    assert!(rows(&deleted).iter().all(|r| rev_gen(r["rev"].as_str().unwrap()) == 3), "{deleted}");
    for i in 1..=5 {
        assert_error(s.get(&format!("/db/m{i}")), 404, "not_found", "deleted");
    }
    let info = s.db_info("db");
    assert_eq!((info["doc_count"].clone(), info["doc_del_count"].clone()), (json!(0), json!(5)));
}

#[test]
fn bulk_docs_reports_conflicts_per_document_without_rev() {
    let s = setup();
    let (_, created) = bulk(&s, json!({"docs": messages(3)}));
    let created = rows(&created).clone();
    // Move m1 on so that the batch below carries a stale rev for it.
    s.put_doc("db", "m1", &json!({"_rev": created[0]["rev"], "subject": "moved on"}));
    let deletes: Vec<Value> = created
        .iter()
        .map(|r| json!({"_id": r["id"], "_rev": r["rev"], "_deleted": true}))
        .collect();
    let (status, result) = bulk(&s, json!({"docs": deletes}));
    assert_eq!(status, 201);
    let result = rows(&result);
    assert_eq!(
        result[0],
        json!({"id": "m1", "error": "conflict", "reason": "Document update conflict."})
    );
    assert_eq!(result[1]["ok"], true);
    assert_eq!(result[2]["ok"], true);
    assert_eq!(s.get_doc("db", "m1")["subject"], "moved on");
}

#[test]
fn bulk_docs_second_write_of_same_id_in_one_request_conflicts() {
    // bulk_docs_test.exs "emits conflict error for duplicate doc `_id`s".
    let s = setup();
    let docs = json!([{"_id": "0", "a": 0}, {"_id": "1", "a": 1}, {"_id": "1", "a": 2},
                      {"_id": "3", "a": 3}]);
    let (status, result) = bulk(&s, json!({"docs": docs}));
    assert_eq!(status, 201);
    let result = rows(&result);
    assert_eq!(result.len(), 4);
    assert_eq!(result[1]["id"], "1");
    assert_eq!(result[1]["ok"], true);
    assert_eq!(
        result[2],
        json!({"id": "1", "error": "conflict", "reason": "Document update conflict."})
    );
    assert_eq!(s.get_doc("db", "1")["a"], 1);
}

#[test]
fn bulk_docs_generates_ids_for_docs_without_one() {
    let s = setup();
    let (status, result) = bulk(&s, json!({"docs": [{"name": "Thomas Andersen"}, {}]}));
    assert_eq!(status, 201);
    let result = rows(&result);
    let a = result[0]["id"].as_str().unwrap();
    let b = result[1]["id"].as_str().unwrap();
    assert_ne!(a, b);
    assert_eq!(a.len(), 32);
    assert_eq!(s.get_doc("db", a)["name"], "Thomas Andersen");
}

#[test]
fn bulk_docs_rejects_malformed_requests() {
    let s = setup();
    assert_error(
        bulk(&s, json!({"doc": []})),
        400,
        "bad_request",
        "POST body must include `docs` parameter.",
    );
    assert_error(
        bulk(&s, json!({"docs": "foo"})),
        400,
        "bad_request",
        "`docs` parameter must be an array.",
    );
    assert_error(
        bulk(&s, json!({"docs": [], "new_edits": 0})),
        400,
        "bad_request",
        "`new_edits` parameter must be a boolean.",
    );
    assert_error(bulk(&s, json!([])), 400, "bad_request", "Request body must be a JSON object");
    assert_eq!(s.db_info("db")["doc_count"], 0);
}

#[test]
fn bulk_docs_new_edits_false_returns_empty_list_and_stores_given_revs() {
    let s = setup();
    let docs = json!([
        {"_id": "a", "_rev": "1-11111111111111111111111111111111", "v": 1},
        {"_id": "b", "_rev": "4-44444444444444444444444444444444", "v": 4}
    ]);
    let (status, result) = bulk(&s, json!({"docs": docs, "new_edits": false}));
    assert_eq!((status, result), (201, json!([])));
    assert_eq!(s.get_doc("db", "a")["_rev"], "1-11111111111111111111111111111111");
    assert_eq!(s.get_doc("db", "b")["_rev"], "4-44444444444444444444444444444444");

    // Replaying the same revisions changes nothing (no new leaves, no new seq).
    let seq = s.db_info("db")["update_seq"].clone();
    let (status, result) = bulk(&s, json!({"docs": docs, "new_edits": false}));
    assert_eq!((status, result), (201, json!([])));
    assert_eq!(s.get("/db/a?conflicts=true").1.get("_conflicts"), None);
    assert_eq!(s.db_info("db")["update_seq"], seq);
}

/// Writes the given (rev, deleted) leaves of document `id`, each directly on top of nothing.
fn leaves(s: &Server, id: &str, revs: &[(&str, bool)]) {
    let docs: Vec<Value> = revs
        .iter()
        .map(|(rev, deleted)| {
            let mut d = json!({"_id": id, "_rev": rev, "leaf": rev});
            if *deleted {
                d["_deleted"] = json!(true);
            }
            d
        })
        .collect();
    let (status, result) = bulk(s, json!({"docs": docs, "new_edits": false}));
    assert_eq!((status, result), (201, json!([])));
}

#[test]
fn winner_is_the_higher_generation_then_the_higher_rev_string() {
    let s = setup();
    let older = "2-ffffffffffffffffffffffffffffffff";
    let newer = "3-00000000000000000000000000000000";
    let same_gen = "3-0000000000000000000000000000000a";
    leaves(&s, "gen", &[(older, false), (newer, false)]);
    assert_eq!(s.get_doc("db", "gen")["_rev"], newer, "generation beats rev string");
    assert_eq!(s.get("/db/gen?conflicts=true").1["_conflicts"], json!([older]));

    leaves(&s, "gen", &[(same_gen, false)]);
    let doc = s.get("/db/gen?conflicts=true").1;
    assert_eq!(doc["_rev"], same_gen, "same generation: higher rev string wins");
    assert_eq!(doc["leaf"], same_gen);
    // Losers in CouchDB's order: descending by (generation, rev).
    assert_eq!(doc["_conflicts"], json!([newer, older]));
}

#[test]
fn winner_is_a_live_leaf_even_if_a_deleted_one_is_newer() {
    let s = setup();
    let live = "1-11111111111111111111111111111111";
    let dead = "5-55555555555555555555555555555555";
    leaves(&s, "doc", &[(live, false), (dead, true)]);
    let doc = s.get("/db/doc?deleted_conflicts=true").1;
    assert_eq!(doc["_rev"], live);
    assert_eq!(doc["_deleted_conflicts"], json!([dead]));
    let (_, all) = s.get("/db/_all_docs");
    assert_eq!(all["rows"], json!([{"id": "doc", "key": "doc", "value": {"rev": live}}]));
    assert_eq!(s.db_info("db")["doc_count"], 1);

    // When every leaf is deleted the document is deleted; the highest deleted leaf wins.
    let (status, _) = s.delete(&format!("/db/doc?rev={live}"));
    assert_eq!(status, 200);
    assert_error(s.get("/db/doc"), 404, "not_found", "deleted");
    let info = s.db_info("db");
    assert_eq!((info["doc_count"].clone(), info["doc_del_count"].clone()), (json!(0), json!(1)));
}

#[test]
fn revisions_field_grafts_ancestry_and_ancestors_have_no_bodies() {
    let s = setup();
    let (a, b, c) = (
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
        "cccccccccccccccccccccccccccccccc",
    );
    let doc = json!({"_id": "book-1", "_rev": format!("3-{c}"), "name": "Azure Cosmos DB 101",
                     "pub-id": "mspress", "_revisions": {"start": 3, "ids": [c, b, a]}});
    let (status, result) = bulk(&s, json!({"docs": [doc], "new_edits": false}));
    assert_eq!((status, result), (201, json!([])));

    let got = s.get("/db/book-1?revs=true").1;
    assert_eq!(got["_revisions"], json!({"start": 3, "ids": [c, b, a]}));
    let got = s.get("/db/book-1?revs_info=true").1;
    assert_eq!(
        got["_revs_info"],
        json!([
            {"rev": format!("3-{c}"), "status": "available"},
            {"rev": format!("2-{b}"), "status": "missing"},
            {"rev": format!("1-{a}"), "status": "missing"}
        ])
    );
    // The ancestors are known to the tree, so nothing is missing for them.
    let (status, diff) =
        s.post("/db/_revs_diff", &json!({"book-1": [format!("2-{b}"), format!("3-{c}")]}));
    assert_eq!((status, diff), (200, json!({})));

    // An interactive edit continues from the grafted leaf.
    let rev = s.put_doc("db", "book-1", &json!({"_rev": format!("3-{c}"), "name": "2nd ed."}));
    assert_eq!(rev_gen(&rev), 4);
}

#[test]
fn new_edits_false_with_existing_ancestry_adds_a_conflicting_branch() {
    let s = setup();
    let r1 = s.put_doc("db", "person", &json!({"firstName": "Thomas"}));
    let r2 = s.put_doc("db", "person", &json!({"_rev": r1, "firstName": "Tom"}));
    let branch = format!("2-{}", "0".repeat(32));
    let doc = json!({"_id": "person", "_rev": branch, "firstName": "T.",
                     "_revisions": {"start": 2, "ids": ["0".repeat(32), rev_hash(&r1)]}});
    let (status, result) = bulk(&s, json!({"docs": [doc], "new_edits": false}));
    assert_eq!((status, result), (201, json!([])));
    let doc = s.get("/db/person?conflicts=true").1;
    // Both are generation 2; the all-zero hash sorts below any real one.
    assert_eq!(doc["_rev"], r2);
    assert_eq!(doc["firstName"], "Tom");
    assert_eq!(doc["_conflicts"], json!([branch]));
}

#[test]
fn bulk_get_returns_docs_revs_and_errors_in_request_order() {
    let s = setup();
    let r1 = s.put_doc("db", "a1", &json!({"name": "Thomas Andersen"}));
    let r2 =
        s.put_doc("db", "a1", &json!({"_rev": r1, "name": "Thomas Andersen", "books": ["b1"]}));
    s.put_doc("db", "b1", &json!({"name": "Azure Cosmos DB 101", "authors": ["a1"]}));
    let missing_rev = "1-0123456789abcdef0123456789abcdef";
    let (status, body) = s.post(
        "/db/_bulk_get",
        &json!({"docs": [
            {"id": "b1"},
            {"id": "a1", "rev": r1},
            {"id": "nobody"},
            {"id": "a1", "rev": missing_rev}
        ]}),
    );
    assert_eq!(status, 200, "{body}");
    let b1 = s.get_doc("db", "b1");
    assert_eq!(
        body,
        json!({"results": [
            {"id": "b1", "docs": [{"ok": b1}]},
            {"id": "a1", "docs": [{"ok": {"_id": "a1", "_rev": r1, "name": "Thomas Andersen"}}]},
            {"id": "nobody", "docs": [{"error": {"id": "nobody", "rev": "undefined",
                                                  "error": "not_found", "reason": "missing"}}]},
            {"id": "a1", "docs": [{"error": {"id": "a1", "rev": missing_rev,
                                              "error": "not_found", "reason": "missing"}}]}
        ]})
    );
    let _ = r2;
}

#[test]
fn bulk_get_with_revs_true_includes_revisions() {
    let s = setup();
    let r1 = s.put_doc("db", "a1", &json!({"n": 1}));
    let r2 = s.put_doc("db", "a1", &json!({"_rev": r1, "n": 2}));
    let (status, body) = s.post("/db/_bulk_get?revs=true", &json!({"docs": [{"id": "a1"}]}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["results"][0]["docs"][0]["ok"]["_revisions"],
        json!({"start": 2, "ids": [rev_hash(&r2), rev_hash(&r1)]})
    );
}

#[test]
fn bulk_get_without_rev_returns_every_leaf_of_a_conflicted_doc() {
    let s = setup();
    leaves(
        &s,
        "doc",
        &[
            ("1-11111111111111111111111111111111", false),
            ("1-22222222222222222222222222222222", false),
        ],
    );
    let (status, body) = s.post("/db/_bulk_get", &json!({"docs": [{"id": "doc"}]}));
    assert_eq!(status, 200, "{body}");
    let mut revs: Vec<String> = rows(&body["results"][0]["docs"])
        .iter()
        .map(|d| d["ok"]["_rev"].as_str().unwrap_or("?").to_string())
        .collect();
    revs.sort();
    assert_eq!(revs, ["1-11111111111111111111111111111111", "1-22222222222222222222222222222222"]);
}

#[test]
fn bulk_get_without_docs_is_bad_request() {
    let s = setup();
    assert_error(
        s.post("/db/_bulk_get", &json!({"ids": []})),
        400,
        "bad_request",
        "Missing JSON list of 'docs'.",
    );
}

#[test]
fn revs_diff_lists_missing_revs_and_possible_ancestors() {
    let s = setup();
    let r1 = s.put_doc("db", "a", &json!({"v": 1}));
    let r2 = s.put_doc("db", "a", &json!({"_rev": r1, "v": 2}));
    let unknown3 = "3-0123456789abcdef0123456789abcdef";
    let unknown1 = "1-0123456789abcdef0123456789abcdef";
    let (status, body) = s.post(
        "/db/_revs_diff",
        &json!({
            "a": [r1, r2, unknown3],
            "nobody": [unknown1],
        }),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        json!({
            "a": {"missing": [unknown3], "possible_ancestors": [r2]},
            "nobody": {"missing": [unknown1]}
        })
    );
    // Nothing missing: the document is left out entirely.
    assert_eq!(s.post("/db/_revs_diff", &json!({"a": [r2]})), (200, json!({})));
}

#[test]
fn local_docs_are_versioned_0_n_and_invisible_to_all_docs_changes_and_counts() {
    let s = setup();
    s.put_doc("db", "visible", &json!({}));
    let (status, body) = s.put("/db/_local/checkpoint", &json!({"last_seq": "1"}));
    assert_eq!((status, body), (201, json!({"ok": true, "id": "_local/checkpoint", "rev": "0-1"})));
    assert_eq!(
        s.get("/db/_local/checkpoint"),
        (200, json!({"_id": "_local/checkpoint", "_rev": "0-1", "last_seq": "1"}))
    );
    // CouchDB's replicator updates its checkpoint with `_revisions` too
    // (`couch_replicator_api_wrap:update_doc` sends `revs`): accepted, and meaningless.
    let checkpoint = json!({"_rev": "0-1", "_revisions": {"start": 0, "ids": ["1"]},
                            "last_seq": "2"});
    let (status, body) = s.put("/db/_local/checkpoint", &checkpoint);
    assert_eq!((status, body), (201, json!({"ok": true, "id": "_local/checkpoint", "rev": "0-2"})));

    let (_, all) = s.get("/db/_all_docs");
    assert_eq!(crate::harness::ids(&all["rows"]), ["visible"]);
    assert_eq!(all["total_rows"], 1);
    let (_, changes) = s.get("/db/_changes");
    assert_eq!(crate::harness::ids(&changes["results"]), ["visible"]);
    assert_eq!(s.db_info("db")["doc_count"], 1);

    let (status, body) = s.delete("/db/_local/checkpoint?rev=0-2");
    assert_eq!((status, body), (200, json!({"ok": true, "id": "_local/checkpoint", "rev": "0-0"})));
    assert_error(s.get("/db/_local/checkpoint"), 404, "not_found", "missing");
}

#[test]
fn local_docs_in_bulk_docs_are_stored_too() {
    // invalid_docids_test.exs "explicit _bulk_docs policy".
    let s = setup();
    let (status, _) =
        bulk(&s, json!({"docs": [{"_id": "_design/foo"}, {"_id": "_local/bar", "x": 1}]}));
    assert_eq!(status, 201);
    assert_eq!(s.get_doc("db", "_design/foo")["_id"], "_design/foo");
    assert_eq!(s.get_doc("db", "_local/bar")["x"], 1);
}

#[test]
fn revs_limit_defaults_to_1000_and_can_be_set() {
    let s = setup();
    assert_eq!(s.get("/db/_revs_limit"), (200, json!(1000)));
    assert_eq!(s.raw(Method::PUT, "/db/_revs_limit", "5"), (200, json!({"ok": true})));
    assert_eq!(s.get("/db/_revs_limit"), (200, json!(5)));
}

#[test]
fn revs_limit_stems_old_revisions_from_the_history() {
    // rev_stemming_test.exs: with revs_limit 5, `revs=true` shows at most 5 ids.
    let s = setup();
    assert_eq!(s.raw(Method::PUT, "/db/_revs_limit", "5"), (200, json!({"ok": true})));
    let mut rev = s.put_doc("db", "doc", &json!({"n": 0}));
    for n in 1..10 {
        rev = s.put_doc("db", "doc", &json!({"_rev": rev, "n": n}));
    }
    let doc = s.get("/db/doc?revs=true").1;
    assert_eq!(doc["_revisions"]["start"], 10);
    assert_eq!(doc["_revisions"]["ids"].as_array().map(Vec::len), Some(5), "{doc}");
}

/// A `revs_limit` lowered after the edits shows at once: `_revisions` (of `GET` and
/// `open_revs`) lists at most that many ids, as CouchDB's `couch_db:make_doc` reads them,
/// before and after compaction (`rev_stemming_test.exs`).
#[test]
fn a_lowered_revs_limit_shortens_revisions_at_once() {
    let s = setup();
    let mut rev = s.put_doc("db", "bar", &json!({"count": 0}));
    for n in 1..6 {
        rev = s.put_doc("db", "bar", &json!({"_rev": rev, "count": n}));
    }
    let ids = |path: &str| s.get(path).1["_revisions"]["ids"].as_array().map(Vec::len);
    assert_eq!(ids("/db/bar?revs=true"), Some(6));
    assert_eq!(s.raw(Method::PUT, "/db/_revs_limit", "5"), (200, json!({"ok": true})));
    assert_eq!(ids("/db/bar?revs=true"), Some(5));
    let (_, revs) = s.get(&format!("/db/bar?revs=true&open_revs=%5B%22{rev}%22%5D"));
    assert_eq!(revs[0]["ok"]["_revisions"]["ids"].as_array().map(Vec::len), Some(5), "{revs}");
    let compact = s.req(Method::POST, "/db/_compact").header("Content-Type", "application/json");
    assert_eq!(send(compact).0, 202);
    assert_eq!(ids("/db/bar?revs=true"), Some(5));
}

#[test]
fn security_defaults_to_admin_only_and_round_trips() {
    // CouchDB 3: [couchdb] default_security = admin_only (couch_db_updater).
    let s = setup();
    assert_eq!(
        s.get("/db/_security"),
        (200, json!({"members": {"roles": ["_admin"]}, "admins": {"roles": ["_admin"]}}))
    );
    let sec = json!({"admins": {"names": ["jan"], "roles": ["ops"]},
                     "members": {"names": ["alice"], "roles": ["readers"]}});
    assert_eq!(s.put("/db/_security", &sec), (200, json!({"ok": true})));
    assert_eq!(s.get("/db/_security"), (200, sec));
}

#[test]
fn security_must_be_an_object() {
    // security_validation_test.exs "try to set a wrong value for _security".
    let s = setup();
    let (status, body) = s.put("/db/_security", &json!(["foo"]));
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"], "bad_request");
}

#[test]
fn ensure_full_commit_answers_201_ok() {
    let s = setup();
    let (status, body) = send(
        s.req(Method::POST, "/db/_ensure_full_commit").header("Content-Type", "application/json"),
    );
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["ok"], true);
    assert!(body["instance_start_time"].is_string(), "{body}");
}

#[test]
fn compact_is_accepted_and_changes_no_data() {
    let s = setup();
    let r1 = s.put_doc("db", "a", &json!({"v": 1}));
    let r2 = s.put_doc("db", "a", &json!({"_rev": r1, "v": 2}));
    let before = s.db_info("db");
    let (status, body) =
        send(s.req(Method::POST, "/db/_compact").header("Content-Type", "application/json"));
    assert_eq!((status, body), (202, json!({"ok": true})));
    let doc = s.get_doc("db", "a");
    assert_eq!((doc["_rev"].clone(), doc["v"].clone()), (json!(r2), json!(2)));
    let after = s.db_info("db");
    assert_eq!(after["doc_count"], before["doc_count"]);
    assert_eq!(after["update_seq"], before["update_seq"]);
}

/// `sizes.file` counts what the store keeps of a database, replaced data included until
/// `_compact`, so it exceeds `sizes.active` and shrinks at compaction
/// (CouchDB's `compact_test.exs`), and it survives a restart.
#[test]
fn sizes_file_exceeds_active_and_shrinks_at_compaction() {
    let mut s = setup();
    let sizes = |s: &Server| {
        let info = s.db_info("db");
        (info["sizes"]["file"].as_u64().unwrap_or(0), info["sizes"]["active"].as_u64().unwrap_or(0))
    };
    let docs: Vec<Value> =
        (0..40).map(|i| json!({"_id": format!("d{i}"), "text": "x".repeat(200)})).collect();
    let (_, written) = bulk(&s, json!({"docs": docs}));
    let (file, active) = sizes(&s);
    assert!(active > 0 && file > active, "file {file}, active {active}");
    let deletions: Vec<Value> = written
        .as_array()
        .unwrap()
        .iter()
        .map(|row| json!({"_id": row["id"], "_rev": row["rev"], "_deleted": true}))
        .collect();
    assert_eq!(bulk(&s, json!({"docs": deletions})).0, 201);
    let (deleted_file, _) = sizes(&s);
    assert!(deleted_file > file, "deletions are written too: {deleted_file} after {file}");
    let compact = s.req(Method::POST, "/db/_compact").header("Content-Type", "application/json");
    assert_eq!(send(compact).0, 202);
    wait_for_compaction(&s, "db");
    let (compacted, active) = sizes(&s);
    assert!(compacted < deleted_file && compacted > active, "{compacted} {deleted_file} {active}");
    assert!(s.terminate(), "a clean shutdown");
    s.restart();
    assert_eq!(sizes(&s).0, compacted, "kept across a restart");
}

/// A view group's `sizes.file` grows with each update of its rows and shrinks at
/// `POST /{db}/_compact/{ddoc}`, staying above `sizes.active`, its rows' bytes
/// (CouchDB's `view_compaction_test.exs`).
#[test]
fn view_compaction_shrinks_the_groups_file_size() {
    let s = setup();
    let ddoc = json!({"views": {"n": {"map": "function(doc) { emit(doc._id, doc.n); }"}}});
    assert_eq!(s.put("/db/_design/v", &ddoc).0, 201);
    let mut docs: Vec<Value> = (0..200).map(|i| json!({"_id": format!("d{i}"), "n": i})).collect();
    let info = |s: &Server| s.get("/db/_design/v/_info").1["view_index"].clone();
    let mut files = Vec::new();
    for round in 0..3 {
        let (_, written) = bulk(&s, json!({"docs": docs}));
        for (doc, row) in docs.iter_mut().zip(written.as_array().unwrap()) {
            doc["_rev"] = row["rev"].clone();
            doc["n"] = json!(round * 1000 + doc["n"].as_i64().unwrap_or(0));
        }
        assert_eq!(s.get("/db/_design/v/_view/n?limit=1").0, 200);
        let index = info(&s);
        let (file, active) = (index["sizes"]["file"].as_u64(), index["sizes"]["active"].as_u64());
        assert!(file > active && active > Some(0), "{index}");
        files.push(file.unwrap_or(0));
    }
    assert!(files[0] < files[1] && files[1] < files[2], "{files:?}");
    let compact = s.req(Method::POST, "/db/_compact/v").header("Content-Type", "application/json");
    assert_eq!(send(compact), (202, json!({"ok": true})));
    wait_for_compaction(&s, "db");
    let index = info(&s);
    let (file, active) = (index["sizes"]["file"].as_u64(), index["sizes"]["active"].as_u64());
    assert!(file < Some(files[2]) && active < file, "{index}");
    assert_eq!(index["compact_running"], false);
    let (_, rows) = s.get("/db/_design/v/_view/n");
    assert_eq!(rows["total_rows"], 200, "no row lost");
    let missing =
        s.req(Method::POST, "/db/_compact/none").header("Content-Type", "application/json");
    assert_error(send(missing), 404, "not_found", "missing");
}

/// Waits until `GET /{db}` says `compact_running: false` (at most a minute).
fn wait_for_compaction(s: &Server, db: &str) {
    for _ in 0..600 {
        if s.db_info(db)["compact_running"] == json!(false) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("compaction of {db} still running after a minute");
}

/// What the documents of `db` hold: id → (rev, body), from `_all_docs?include_docs=true`.
fn contents(s: &Server, db: &str) -> Value {
    let (status, body) = s.get(&format!("/{db}/_all_docs?include_docs=true"));
    assert_eq!(status, 200, "{body}");
    body
}

/// Issue 20, point 5: `_compact` removes old revision bodies and then frees their space in
/// the store (a major compaction of the store every database shares, and journals
/// already in tables): every current document of every database is kept, also after a
/// `kill -9` and restart, and only the old revisions are gone.
#[test]
fn compact_frees_old_revisions_and_keeps_every_document_across_a_crash() {
    let mut s = setup();
    s.create_db("other");
    let mut old = Vec::new();
    for round in 0..3 {
        let docs: Vec<Value> = (0..200)
            .map(|i| {
                let id = format!("m{i:03}");
                let mut doc =
                    json!({"_id": id, "round": round, "text": format!("{i}-{round}-").repeat(60)});
                if let Some(prev) = s.get(&format!("/db/{id}")).1.get("_rev") {
                    old.push((id, prev.clone()));
                    doc["_rev"] = prev.clone();
                }
                if round == 2 && i % 10 == 0 {
                    doc["_deleted"] = json!(true);
                }
                doc
            })
            .collect();
        assert_eq!(bulk(&s, json!({"docs": docs})).0, 201);
    }
    assert_eq!(s.post("/other/_bulk_docs", &json!({"docs": messages(50)})).0, 201);
    let (db_before, other_before) = (contents(&s, "db"), contents(&s, "other"));
    assert_eq!(db_before["total_rows"], 180);
    let (status, body) =
        send(s.req(Method::POST, "/db/_compact").header("Content-Type", "application/json"));
    assert_eq!((status, body), (202, json!({"ok": true})));
    wait_for_compaction(&s, "db");
    for restarted in [false, true] {
        assert_eq!(contents(&s, "db"), db_before, "restarted: {restarted}");
        assert_eq!(contents(&s, "other"), other_before, "restarted: {restarted}");
        for (id, rev) in old.iter().step_by(37) {
            let rev = rev.as_str().unwrap_or_default();
            assert_error(s.get(&format!("/db/{id}?rev={rev}")), 404, "not_found", "missing");
        }
        let (status, deleted) = s.get("/db/m010");
        assert_eq!((status, &deleted["reason"]), (404, &json!("deleted")));
        s.kill9();
        s.restart();
    }
}
