//! `POST /{db}/_purge`, `_purged_infos` and `_purged_infos_limit` (issue 16), with CouchDB
//! 3.4's answers (`chttpd_db.erl`, `couch_db_updater:purge_docs`): the two cases of its
//! Elixir `purge_test.exs`, then what a purge must take away everywhere (`_all_docs`,
//! `_changes`, counters, views, Mango and search indexes), partial purges of conflicts,
//! the `[purge]` limits from `_config`, who may purge, the indexes' `_local` purge
//! checkpoints, and a restart after purging the newest document.

use reqwest::Method;
use serde_json::{Value, json};

use crate::harness::{Server, assert_error, ids, send};

fn purge(s: &Server, db: &str, body: Value) -> (u16, Value) {
    s.post(&format!("/{db}/_purge"), &body)
}

/// The rows of view `view` of `_design/test`.
fn view(s: &Server, db: &str, view: &str) -> Value {
    let (status, body) = s.get(&format!("/{db}/_design/test/_view/{view}"));
    assert_eq!(status, 200, "{body}");
    body
}

/// `test_all_docs_twice` of `purge_test.exs`: every remaining integer twice, in order, from
/// `offset + 1` to 11, and `single_doc` holding `single` rows.
fn assert_all_docs_twice(s: &Server, db: &str, single: u64, offset: u64) {
    let rows = view(s, db, "all_docs_twice")["rows"].clone();
    let keys: Vec<u64> =
        rows.as_array().into_iter().flatten().filter_map(|r| r["key"].as_u64()).collect();
    let want: Vec<u64> = (offset + 1..=11).flat_map(|n| [n, n]).collect();
    assert_eq!(keys, want);
    assert_eq!(view(s, db, "single_doc")["total_rows"], json!(single));
}

fn bulk(s: &Server, db: &str, docs: Vec<Value>) {
    let (status, body) = s.post(&format!("/{db}/_bulk_docs"), &json!({"docs": docs}));
    assert_eq!(status, 201, "{body}");
}

#[test]
fn purge_documents_as_couchdbs_purge_test() {
    let s = Server::start();
    s.create_db("p");
    let ddoc = json!({"language": "javascript", "views": {
        "all_docs_twice": {"map": "function(doc) { emit(doc.integer, null); emit(doc.integer, null) }"},
        "single_doc": {"map": "function(doc) { if (doc._id == \"1\") { emit(1, null) }}"}}});
    s.put_doc("p", "_design/test", &ddoc);
    let docs =
        (1..=11).map(|i| json!({"_id": i.to_string(), "integer": i, "string": i.to_string()}));
    bulk(&s, "p", docs.collect());
    assert_all_docs_twice(&s, "p", 1, 0);
    let before = s.db_info("p");

    let (rev1, rev2) = (s.get_doc("p", "1")["_rev"].clone(), s.get_doc("p", "2")["_rev"].clone());
    let (status, answer) = purge(&s, "p", json!({"1": [rev1], "2": [rev2]}));
    assert_eq!(status, 201, "{answer}");
    assert_eq!(answer, json!({"purge_seq": null, "purged": {"1": [rev1], "2": [rev2]}}));
    assert_eq!(s.get("/p/1").0, 404);
    assert_eq!(s.get("/p/2").0, 404);
    let purged = s.db_info("p");
    assert_ne!(purged["purge_seq"], before["purge_seq"]);
    assert_all_docs_twice(&s, "p", 0, 2);

    // Purge sequences are preserved after compaction (COUCHDB-1021).
    assert_eq!(s.post("/p/_compact", &json!({})).0, 202);
    assert_eq!(s.db_info("p")["purge_seq"], purged["purge_seq"]);

    // Two purges in a row without reading the views in between.
    for id in ["3", "4"] {
        let rev = s.get_doc("p", id)["_rev"].clone();
        assert_eq!(purge(&s, "p", json!({id: [rev]})).0, 201);
    }
    assert_all_docs_twice(&s, "p", 0, 4);
}

#[test]
fn couchdb_1065_purging_conflicting_revisions_one_by_one() {
    let s = Server::start();
    s.create_db("a");
    s.create_db("b");
    let rev_a = s.put_doc("a", "test", &json!({"a": 1}));
    let rev_b = s.put_doc("b", "test", &json!({"a": 2}));
    let (status, answer) = s.post("/_replicate", &json!({"source": "a", "target": "b"}));
    assert_eq!(status, 200, "{answer}");
    let open = |rev: &str| s.get(&format!("/b/test?rev={rev}")).0;
    assert_eq!((open(&rev_a), open(&rev_b)), (200, 200));

    let (status, answer) = purge(&s, "b", json!({"test": [rev_a]}));
    assert_eq!((status, &answer["purged"]), (201, &json!({"test": [rev_a]})));
    assert_eq!((open(&rev_a), open(&rev_b)), (404, 200));
    assert_eq!(s.get_doc("b", "test")["a"], json!(2), "the other branch wins now");

    let (status, answer) = purge(&s, "b", json!({"test": [rev_b]}));
    assert_eq!((status, &answer["purged"]), (201, &json!({"test": [rev_b]})));
    assert_eq!(open(&rev_b), 404);
    assert_eq!(s.get("/b/test").0, 404);

    // Nothing left to purge: still 201, with nothing purged.
    let (status, answer) = purge(&s, "b", json!({"test": [rev_a, rev_b]}));
    assert_eq!((status, answer), (201, json!({"purge_seq": null, "purged": {"test": []}})));
    assert_eq!(s.delete("/b").0, 200);
}

/// The articles of the document-modeling seeds, with a Mango index and a search index.
fn library(s: &Server) {
    s.create_db("lib");
    let at = |lon: f64| json!({"type": "Point", "coordinates": [lon, 35.68]});
    let docs = vec![
        json!({"_id": "a1", "type": "article", "title": "データモデリング入門", "tag": "schema",
            "geometry": at(139.70)}),
        json!({"_id": "a2", "type": "article", "title": "埋め込みと参照", "tag": "schema",
            "geometry": at(139.76)}),
        json!({"_id": "a3", "type": "article", "title": "サブセットパターン", "tag": "pattern"}),
    ];
    bulk(s, "lib", docs);
    let index = json!({"index": {"fields": ["tag"]}, "ddoc": "by-tag", "name": "tag"});
    assert_eq!(s.post("/lib/_index", &index).0, 200);
    let search = json!({"indexes": {"titles": {"index": "function(doc) { if (doc.title) { index('default', doc.tag); } }"}}});
    s.put_doc("lib", "_design/search", &search);
    let geo = "function(doc) { if (doc.geometry) { st_index(doc.geometry); } }";
    s.put_doc("lib", "_design/geo", &json!({"st_indexes": {"where": {"index": geo}}}));
}

fn geo_ids(s: &Server) -> Vec<String> {
    let (status, body) = s.get("/lib/_design/geo/_geo/where?bbox=139,35,140,36");
    assert_eq!(status, 200, "{body}");
    let mut found = ids(&body["rows"]);
    found.sort();
    found
}

fn find_tag(s: &Server, tag: &str) -> Vec<String> {
    let query = json!({"selector": {"tag": tag}, "use_index": "by-tag", "fields": ["_id"]});
    let (status, body) = s.post("/lib/_find", &query);
    assert_eq!(status, 200, "{body}");
    assert!(body.get("warning").is_none(), "the index was used: {body}");
    body["docs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| d["_id"].as_str().map(String::from))
        .collect()
}

fn search_tag(s: &Server, tag: &str) -> Vec<String> {
    let (status, body) = s.get(&format!("/lib/_design/search/_search/titles?q={tag}"));
    assert_eq!(status, 200, "{body}");
    let mut found = ids(&body["rows"]);
    found.sort();
    found
}

#[test]
fn a_purged_document_leaves_all_docs_changes_counters_and_every_index() {
    let s = Server::start();
    library(&s);
    assert_eq!(find_tag(&s, "schema"), ["a1", "a2"]);
    assert_eq!(search_tag(&s, "schema"), ["a1", "a2"]);
    assert_eq!(geo_ids(&s), ["a1", "a2"]);
    let before = s.db_info("lib");
    let rev = s.get_doc("lib", "a2")["_rev"].clone();
    assert_eq!(purge(&s, "lib", json!({"a2": [rev]})).0, 201);

    let (_, all) = s.get("/lib/_all_docs");
    assert_eq!(ids(&all["rows"]), ["_design/by-tag", "_design/geo", "_design/search", "a1", "a3"]);
    let (_, changes) = s.get("/lib/_changes");
    let changed: Vec<&str> = changes["results"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["id"].as_str())
        .collect();
    assert!(!changed.contains(&"a2"), "{changes}");
    let info = s.db_info("lib");
    assert_eq!(info["doc_count"], json!(before["doc_count"].as_u64().unwrap_or(0) - 1));
    assert_eq!(info["doc_del_count"], before["doc_del_count"]);
    let seq =
        |v: &Value| v.as_str().and_then(|s| s.split('-').next()?.parse::<u64>().ok()).unwrap_or(0);
    assert!(seq(&info["update_seq"]) > seq(&before["update_seq"]), "a purge moves update_seq");
    assert_eq!(find_tag(&s, "schema"), ["a1"]);
    assert_eq!(search_tag(&s, "schema"), ["a1"]);
    assert_eq!(geo_ids(&s), ["a1"]);

    // The id can be used again from scratch.
    let (status, body) = s.put("/lib/a2", &json!({"type": "article", "tag": "schema"}));
    assert_eq!(status, 201, "{body}");
    assert!(body["rev"].as_str().is_some_and(|r| r.starts_with("1-")), "{body}");
    assert_eq!(find_tag(&s, "schema"), ["a1", "a2"]);
}

/// Past 1,024 documents `_all_docs` places `offset` and `skip` with the order statistics of
/// ids, and `_changes`' `pending` comes from counts by seq: a purge removes keys both must
/// forget, so later answers count the purged document no more.
#[test]
fn a_purge_leaves_all_docs_offsets_and_pending_exact_in_a_large_database() {
    let s = Server::start();
    s.create_db("big");
    let docs: Vec<Value> = (0..3000).map(|i| json!({"_id": format!("d{i:05}")})).collect();
    let (_, written) = s.post("/big/_bulk_docs", &json!({"docs": docs}));
    let rev_of = |n: usize| written[n]["rev"].as_str().unwrap().to_string();
    let all_docs = |query: &str| {
        let (status, body) = s.get(&format!("/big/_all_docs?{query}"));
        assert_eq!(status, 200, "{body}");
        (body["offset"].clone(), ids(&body["rows"]), body["total_rows"].clone())
    };
    let pending =
        |since: u64| s.get(&format!("/big/_changes?limit=1&since={since}")).1["pending"].clone();
    // Both structures are built by these queries.
    assert_eq!(
        all_docs("skip=2500&limit=1"),
        (json!(2500), vec!["d02500".to_string()], json!(3000))
    );
    assert_eq!(pending(100), json!(2899));
    let (status, body) = purge(&s, "big", json!({"d00005": [rev_of(5)], "d02990": [rev_of(2990)]}));
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        all_docs("startkey=%22d02000%22&limit=1"),
        (json!(1999), vec!["d02000".to_string()], json!(2998))
    );
    assert_eq!(all_docs("skip=1999&limit=1").1, ["d02000"]);
    assert_eq!(all_docs("skip=2997&limit=1").1, ["d02999"]);
    assert_eq!(all_docs("skip=2998&limit=1").1, Vec::<String>::new());
    assert_eq!(pending(100), json!(2898));
    assert_eq!(pending(2990), json!(8));
}

#[test]
fn purging_one_branch_of_a_conflict_keeps_the_document_at_a_new_seq() {
    let s = Server::start();
    s.create_db("c");
    let ddoc = json!({"views": {"v": {"map": "function(doc) { emit(doc.v, null); }"}}});
    s.put_doc("c", "_design/test", &ddoc);
    let base = s.put_doc("c", "doc", &json!({"v": "原本"}));
    let main = s.put_doc("c", "doc", &json!({"_rev": base, "v": "本線"}));
    let hash = "0123456789abcdef0123456789abcdef";
    let branch = json!({"_id": "doc", "_rev": format!("2-{hash}"), "v": "枝",
        "_revisions": {"start": 2, "ids": [hash, base.split('-').nth(1).unwrap_or_default()]}});
    let (status, body) = s.post("/c/_bulk_docs", &json!({"docs": [branch], "new_edits": false}));
    assert_eq!(status, 201, "{body}");
    let doc = s.get_doc("c", "doc?conflicts=true");
    assert_eq!(doc["_conflicts"], json!([format!("2-{hash}")]), "{doc}");
    let keys = |s: &Server| -> Vec<Value> {
        view(s, "c", "v")["rows"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| r["key"].clone())
            .collect()
    };
    let winner = doc["v"].clone();
    assert_eq!(keys(&s), vec![winner.clone()]);
    let (_, changes) = s.get("/c/_changes");
    let old_seq = changes["results"][1]["seq"].clone();

    // Purge the winner: the other branch wins and the view shows it.
    let winning_rev = doc["_rev"].as_str().unwrap_or_default().to_string();
    let loser = if winning_rev == main { format!("2-{hash}") } else { main.clone() };
    let (status, answer) = purge(&s, "c", json!({"doc": [winning_rev, base]}));
    assert_eq!(status, 201, "{answer}");
    assert_eq!(answer["purged"]["doc"], json!([winning_rev]), "1-… is not a leaf: ignored");
    let doc = s.get_doc("c", "doc?conflicts=true&revs=true");
    assert_eq!(doc["_rev"], json!(loser));
    assert!(doc.get("_conflicts").is_none(), "{doc}");
    assert_eq!(doc["_revisions"]["ids"].as_array().map(Vec::len), Some(2), "the shared root stays");
    assert_eq!(keys(&s), vec![doc["v"].clone()]);
    let (_, changes) = s.get("/c/_changes");
    let row = &changes["results"][1];
    assert_eq!((row["id"].clone(), row["changes"][0]["rev"].clone()), (json!("doc"), json!(loser)));
    assert_ne!(row["seq"], old_seq, "the document moved to a new seq");
}

#[test]
fn purge_limits_come_from_the_config_api() {
    let s = Server::start();
    s.create_db("lim");
    let revs: Vec<String> =
        ["a", "b", "c"].iter().map(|id| s.put_doc("lim", id, &json!({"n": id}))).collect();
    let (_, ids_default) = s.get("/_node/_local/_config/purge/max_document_id_number");
    assert_eq!(ids_default, json!("100"));
    assert_eq!(s.put("/_node/_local/_config/purge/max_document_id_number", &json!("2")).0, 200);
    let three = json!({"a": [revs[0]], "b": [revs[1]], "c": [revs[2]]});
    assert_error(
        purge(&s, "lim", three.clone()),
        400,
        "bad_request",
        "Exceeded maximum number of documents.",
    );
    assert_eq!(
        s.put("/_node/_local/_config/purge/max_document_id_number", &json!("infinity")).0,
        200
    );
    assert_eq!(s.put("/_node/_local/_config/purge/max_revisions_number", &json!("2")).0, 200);
    assert_error(
        purge(&s, "lim", three.clone()),
        400,
        "bad_request",
        "Exceeded maximum number of revisions.",
    );
    assert_eq!(s.db_info("lim")["doc_count"], json!(3), "nothing was purged");
    assert_eq!(s.delete("/_node/_local/_config/purge/max_revisions_number").0, 200);
    assert_eq!(purge(&s, "lim", three).0, 201);
    assert_eq!(s.db_info("lim")["doc_count"], json!(0));

    // Bad bodies change nothing.
    let rev = s.put_doc("lim", "d", &json!({}));
    assert_error(
        purge(&s, "lim", json!({"d": "not a list"})),
        400,
        "bad_request",
        "Invalid rev format",
    );
    assert_error(
        purge(&s, "lim", json!({"d": ["nonsense"]})),
        400,
        "bad_request",
        "Invalid rev format",
    );
    assert_eq!(s.raw(Method::POST, "/lim/_purge", "[1]").0, 400);
    assert_eq!(s.get_doc("lim", "d")["_rev"], json!(rev));
    let (status, answer) = purge(&s, "lim", json!({}));
    assert_eq!((status, answer), (201, json!({"purge_seq": null, "purged": {}})));
}

#[test]
fn only_server_admins_purge_and_set_the_limit() {
    let s = Server::start();
    s.create_db("sec");
    let rev = s.put_doc("sec", "d", &json!({"v": 1}));
    let user = json!({"_id": "org.couchdb.user:kana", "name": "kana", "type": "user",
        "roles": [], "password": "pw"});
    assert_eq!(s.put("/_users/org.couchdb.user:kana", &user).0, 201);
    let security = json!({"admins": {"names": ["kana"]}, "members": {"names": ["kana"]}});
    assert_eq!(s.put("/sec/_security", &security).0, 200);
    let as_kana = |method: Method, path: &str, body: &Value| {
        send(s.user_req(method, path, "kana", "pw").json(body))
    };
    let not_admin = ("unauthorized", "You are not a server admin.");
    let tried = as_kana(Method::POST, "/sec/_purge", &json!({"d": [rev]}));
    assert_error(tried, 401, not_admin.0, not_admin.1);
    assert_error(
        as_kana(Method::PUT, "/sec/_purged_infos_limit", &json!(5)),
        401,
        not_admin.0,
        not_admin.1,
    );
    assert_error(
        as_kana(Method::GET, "/sec/_purged_infos_limit", &json!(null)),
        401,
        not_admin.0,
        not_admin.1,
    );
    assert_eq!(s.get_doc("sec", "d")["_rev"], json!(rev));
    // A member may read what was purged.
    assert_eq!(purge(&s, "sec", json!({"d": [rev]})).0, 201);
    let (status, infos) = as_kana(Method::GET, "/sec/_purged_infos", &json!(null));
    assert_eq!((status, infos), (200, json!({"purged_infos": [{"id": "d", "revs": [rev]}]})));
}

#[test]
fn purged_infos_limit_and_view_purge_checkpoints() {
    let s = Server::start();
    s.create_db("inf");
    assert_eq!(s.get("/inf/_purged_infos_limit"), (200, json!(1000)));
    assert_error(
        s.put("/inf/_purged_infos_limit", &json!(0)),
        400,
        "bad_request",
        "`purged_infos_limit` must be positive integer",
    );
    assert_error(
        s.put("/inf/_purged_infos_limit", &json!("2")),
        400,
        "bad_request",
        "`purged_infos_limit` must be positive integer",
    );
    assert_eq!(s.put("/inf/_purged_infos_limit", &json!(2)), (200, json!({"ok": true})));
    assert_eq!(s.get("/inf/_purged_infos_limit"), (200, json!(2)));
    s.put_doc(
        "inf",
        "_design/test",
        &json!({"views": {"v": {"map": "function(doc) { emit(doc._id, 1); }"}}}),
    );
    for n in 0..4 {
        let id = format!("d{n}");
        let rev = s.put_doc("inf", &id, &json!({"n": n}));
        assert_eq!(view(&s, "inf", "v")["total_rows"], json!(1));
        assert_eq!(purge(&s, "inf", json!({id: [rev]})).0, 201);
    }
    assert_eq!(view(&s, "inf", "v")["total_rows"], json!(0));
    let (_, info) = s.get("/inf/_design/test/_info");
    assert_eq!(info["view_index"]["purge_seq"], json!(4), "{info}");
    let (_, infos) = s.get("/inf/_purged_infos");
    assert_eq!(infos["purged_infos"].as_array().map(Vec::len), Some(4));

    // The view's checkpoint is a system `_local` document, hidden unless asked for.
    let (_, locals) = s.get("/inf/_local_docs");
    assert_eq!(locals["rows"], json!([]));
    let (_, locals) = s.get("/inf/_local_docs?include_system=true&include_docs=true");
    let row = &locals["rows"][0];
    assert!(
        row["id"].as_str().is_some_and(|id| id.starts_with("_local/purge-mrview-")),
        "{locals}"
    );
    assert_eq!(
        (row["doc"]["type"].clone(), row["doc"]["purge_seq"].clone()),
        (json!("mrview"), json!(4))
    );

    // Compaction keeps the newest `purged_infos_limit` records the view has applied.
    assert_eq!(s.post("/inf/_compact", &json!({})).0, 202);
    let mut kept = 0;
    for _ in 0..200 {
        let (_, infos) = s.get("/inf/_purged_infos");
        kept = infos["purged_infos"].as_array().map_or(0, Vec::len);
        if kept == 2 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(kept, 2);
}

#[test]
fn update_seq_survives_a_restart_after_purging_the_newest_document() {
    let mut s = Server::start();
    s.create_db("r");
    s.put_doc("r", "old", &json!({"v": 1}));
    let rev = s.put_doc("r", "new", &json!({"v": 2}));
    assert_eq!(purge(&s, "r", json!({"new": [rev]})).0, 201);
    let info = s.db_info("r");
    assert!(s.terminate(), "a clean stop");
    s.restart();
    let after = s.db_info("r");
    assert_eq!(
        (after["update_seq"].clone(), after["purge_seq"].clone()),
        (info["update_seq"].clone(), info["purge_seq"].clone())
    );
    s.put_doc("r", "next", &json!({"v": 3}));
    let (_, changes) =
        s.get(&format!("/r/_changes?since={}", info["update_seq"].as_str().unwrap_or("0")));
    assert_eq!(
        ids(&changes["results"]),
        ["next"],
        "a write after the restart is newer than the purge"
    );
}

/// A partitioned database refuses to purge an id without a partition, as CouchDB 3.4.3
/// does (`partition_crud_test.exs`).
#[test]
fn a_partitioned_purge_needs_partitioned_ids() {
    let s = Server::start();
    assert_eq!(s.put_empty("/shelf?partitioned=true").0, 201);
    let refused =
        purge(&s, "shelf", json!({"no_partition": ["1-967a00dff5e02add41819138abb3284d"]}));
    assert_error(refused, 400, "illegal_docid", "Doc id must be of form partition:id");
    let rev = s.put_doc("shelf", "natsume:b1", &json!({"title": "坊っちゃん"}));
    let (status, purged) = purge(&s, "shelf", json!({"natsume:b1": [rev]}));
    assert_eq!((status, &purged["purged"]["natsume:b1"]), (201, &json!([rev])));
}
