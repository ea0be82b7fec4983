//! Replication (issue 16, point 3) between two real Bunko servers, as CouchDB 3.4's
//! replicator behaves (`replication_test.exs`, `replicator_db_*`, `couch_replicator_*`):
//! push and pull, conflicts both ways, deletions, attachments, resume from the checkpoint
//! after a restart, continuous jobs, filters, the `_replicator` database with
//! `_scheduler/docs`, and a user who cannot write the target.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};

use crate::harness::{ADMIN, ADMIN_PASSWORD, Server, assert_error, send};

/// `http://admin:secret@127.0.0.1:PORT/{db}` of a server.
fn url(s: &Server, db: &str) -> String {
    s.base().replacen("http://", &format!("http://{ADMIN}:{ADMIN_PASSWORD}@"), 1) + "/" + db
}

/// The people of the Cosmos DB modeling guide (seed 000), one document each.
fn people() -> Vec<Value> {
    vec![
        json!({"_id": "1", "firstName": "Thomas", "lastName": "Andersen",
            "addresses": [{"line1": "100 Some Street", "city": "Seattle", "state": "WA"}]}),
        json!({"_id": "2", "firstName": "Jane", "lastName": "Doe", "countOfBooks": 3}),
        json!({"_id": "3", "firstName": "John", "lastName": "Smith", "countOfBooks": 10}),
    ]
}

fn load(s: &Server, db: &str, docs: &[Value]) {
    let (status, rows) = s.post(&format!("/{db}/_bulk_docs"), &json!({"docs": docs}));
    assert_eq!(status, 201, "{rows}");
}

fn replicate(s: &Server, body: Value) -> (u16, Value) {
    s.post("/_replicate", &body)
}

/// Polls `check` until it holds (a replication running in the background).
fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !check() {
        assert!(Instant::now() < deadline, "gave up waiting for: {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `_all_docs` with `include_docs`, revs and `_conflicts`, minus volatile nothing: equal
/// output on both servers means equal documents.
fn contents(s: &Server, db: &str) -> Value {
    let (status, body) = s.get(&format!("/{db}/_all_docs?include_docs=true&conflicts=true"));
    assert_eq!(status, 200, "{body}");
    body["rows"].clone()
}

#[test]
fn push_to_a_remote_and_pull_back_copy_every_document_and_revision() {
    let (a, b) = (Server::start(), Server::start());
    a.create_db("people");
    load(&a, "people", &people());
    let (status, answer) = replicate(
        &a,
        json!({"source": "people", "target": url(&b, "people"), "create_target": true}),
    );
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["ok"], true);
    assert_eq!(answer["replication_id_version"], 4);
    let last = &answer["history"][0];
    assert_eq!((last["docs_read"].clone(), last["docs_written"].clone()), (json!(3), json!(3)));
    assert_eq!(last["missing_checked"], 3);
    assert_eq!(answer["source_last_seq"], last["recorded_seq"]);
    assert_eq!(contents(&a, "people"), contents(&b, "people"));

    // Pull into a new database of A from B.
    let (status, answer) = replicate(
        &a,
        json!({"source": url(&b, "people"), "target": "copy", "create_target": true}),
    );
    assert_eq!(status, 200, "{answer}");
    assert_eq!(contents(&a, "copy"), contents(&a, "people"));
    // Nothing new: the second run finds the checkpoint and reads nothing.
    let (status, again) = replicate(&a, json!({"source": url(&b, "people"), "target": "copy"}));
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["no_changes"], true, "{again}");
}

#[test]
fn a_missing_source_is_db_not_found_and_bad_requests_are_refused() {
    let a = Server::start();
    let (status, answer) = replicate(&a, json!({"source": "nope", "target": "other"}));
    assert_eq!((status, answer["error"].clone()), (404, json!("db_not_found")), "{answer}");
    a.create_db("src");
    let (status, answer) = replicate(&a, json!({"source": "src", "target": "absent"}));
    assert_eq!((status, answer["error"].clone()), (404, json!("db_not_found")), "{answer}");
    assert_eq!(a.get("/absent").0, 404, "no target created without create_target");
    let (status, answer) = replicate(
        &a,
        json!({"source": "src", "target": "t", "doc_ids": ["a"], "selector": {"a": 1}}),
    );
    assert_eq!((status, answer["error"].clone()), (400, json!("bad_request")), "{answer}");
    let (status, _) = replicate(&a, json!({"target": "t"}));
    assert_eq!(status, 400);
    let (status, answer) = replicate(&a, json!({"source": "src", "target": "t", "cancel": true}));
    assert_eq!((status, answer["error"].clone()), (404, json!("not_found")), "{answer}");
}

#[test]
fn conflicts_and_deletions_replicate_both_ways() {
    let (a, b) = (Server::start(), Server::start());
    a.create_db("db");
    b.create_db("db");
    let rev = a.put_doc("db", "doc", &json!({"v": "original"}));
    let del = a.put_doc("db", "gone", &json!({"v": "to delete"}));
    assert_eq!(replicate(&a, json!({"source": "db", "target": url(&b, "db")})).0, 200);
    // Both sides edit the same revision; A deletes a document.
    a.put_doc("db", "doc", &json!({"_rev": rev, "v": "edited on a"}));
    b.put_doc("db", "doc", &json!({"_rev": rev, "v": "edited on b"}));
    assert_eq!(a.delete(&format!("/db/gone?rev={del}")).0, 200);
    assert_eq!(replicate(&a, json!({"source": "db", "target": url(&b, "db")})).0, 200);
    assert_eq!(replicate(&a, json!({"source": url(&b, "db"), "target": "db"})).0, 200);
    let on_a = a.get_doc("db", "doc?conflicts=true");
    assert_eq!(on_a["_conflicts"].as_array().map(Vec::len), Some(1), "{on_a}");
    assert_eq!(on_a, b.get_doc("db", "doc?conflicts=true"), "same winner, same conflict");
    assert_eq!(b.get("/db/gone").0, 404, "the deletion reached B");
    assert_eq!(contents(&a, "db"), contents(&b, "db"));
}

#[test]
fn attachments_are_copied_with_their_data() {
    let (a, b) = (Server::start(), Server::start());
    a.create_db("files");
    let body = json!({"title": "スキーマ設計", "_attachments": {
        "guide.txt": {"content_type": "text/plain", "data": "44OJ44Kt44Ol44Oh44Oz44OI"}}});
    a.put_doc("files", "guide", &body);
    let (status, answer) = replicate(
        &a,
        json!({"source": "files", "target": url(&b, "files"), "create_target": true}),
    );
    assert_eq!(status, 200, "{answer}");
    let resp = b.req(Method::GET, "/files/guide/guide.txt").send().expect("GET attachment");
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.text().expect("text"), "ドキュメント");
    let on_b = b.get_doc("files", "guide");
    assert_eq!(on_b["_attachments"], a.get_doc("files", "guide")["_attachments"]);
}

/// An attachment the source stores gzipped arrives gzipped, with the source's digest, even
/// on a target whose own settings would store it plain (`replication_test.exs`,
/// "compressed attachment replication": `compression_level` 0 on the target).
#[test]
fn gzipped_attachments_travel_gzipped_whatever_the_targets_settings() {
    let (a, b) = (Server::start(), Server::start());
    a.create_db("files");
    let text = "Partition keys spread writes; ".repeat(4000);
    let put = a.req(Method::PUT, "/files/guide/notes.txt").header("Content-Type", "text/plain");
    assert_eq!(put.body(text.clone()).send().expect("PUT attachment").status(), 201);
    let (status, _) = b.put("/_node/_local/_config/attachments/compression_level", &json!("0"));
    assert_eq!(status, 200);
    b.create_db("files");
    let (status, answer) = replicate(&a, json!({"source": "files", "target": url(&b, "files")}));
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["history"][0]["docs_written"], 1, "{answer}");
    let (_, source) = a.get("/files/guide?att_encoding_info=true");
    let (_, target) = b.get("/files/guide?att_encoding_info=true");
    let att = &target["_attachments"]["notes.txt"];
    assert_eq!(att["encoding"], "gzip", "{target}");
    assert!(att["encoded_length"].as_u64() < att["length"].as_u64(), "{att}");
    assert_eq!(target, source, "same revision, digest and encoding");
    let resp = b.req(Method::GET, "/files/guide/notes.txt").send().expect("GET attachment");
    assert_eq!(resp.text().expect("text"), text, "served inflated to a client without gzip");
}

#[test]
fn a_restarted_target_resumes_from_the_checkpoint_without_resending() {
    let (a, mut b) = (Server::start(), Server::start());
    a.create_db("people");
    load(&a, "people", &people());
    let pull = json!({"source": url(&a, "people"), "target": "people", "create_target": true});
    let (status, first) = replicate(&b, pull.clone());
    assert_eq!(status, 200, "{first}");
    let rep_log = format!("/people/_local/{}", first["history"][0]["session_id"]);
    assert_eq!(b.get(&rep_log).0, 404, "checkpoints are named by replication id, not session");
    b.kill9();
    b.restart();
    a.put_doc("people", "4", &json!({"firstName": "Ana", "lastName": "Lopez"}));
    let (status, second) = replicate(&b, pull);
    assert_eq!(status, 200, "{second}");
    // The counters go on from the checkpoint (as CouchDB's do): one more change read.
    let (last, before) = (&second["history"][0], &second["history"][1]);
    assert_eq!(last["start_last_seq"], before["recorded_seq"], "{second}");
    assert_eq!(last["missing_checked"], 4, "only the new change was read: {second}");
    assert_eq!(last["docs_written"], 4);
    assert_eq!(last["bulk_get_docs"], 1, "{second}");
    assert_eq!(second["history"].as_array().map(Vec::len), Some(2), "{second}");
    assert_eq!(contents(&a, "people"), contents(&b, "people"));
}

#[test]
fn continuous_replication_carries_later_edits_until_cancelled() {
    let (a, b) = (Server::start(), Server::start());
    a.create_db("live");
    let job = json!({"source": "live", "target": url(&b, "live"), "create_target": true,
        "continuous": true});
    let (status, answer) = replicate(&a, job.clone());
    assert_eq!(status, 202, "{answer}");
    let id = answer["_local_id"].as_str().expect("_local_id").to_string();
    assert!(id.ends_with("+continuous+create_target"), "{id}");
    a.put_doc("live", "reading-1", &json!({"deviceId": "sensor-1", "temperature": 21.5}));
    eventually("the first document on B", || b.get("/live/reading-1").0 == 200);
    let (_, tasks) = a.get("/_active_tasks");
    let task = tasks.as_array().and_then(|t| t.iter().find(|t| t["type"] == "replication"));
    let task = task.expect("a replication task").clone();
    assert_eq!(
        (task["replication_id"].as_str(), task["continuous"].clone()),
        (Some(&*id), json!(true))
    );
    let (_, jobs) = a.get("/_scheduler/jobs");
    assert_eq!(jobs["jobs"][0]["id"], id.as_str(), "{jobs}");
    a.put_doc("live", "reading-2", &json!({"deviceId": "sensor-2", "temperature": 19.0}));
    eventually("a later edit on B", || b.get("/live/reading-2").0 == 200);

    let mut cancel = job.clone();
    cancel["cancel"] = json!(true);
    assert_eq!(replicate(&a, cancel), (200, json!({"ok": true, "_local_id": id})));
    assert_eq!(a.get("/_scheduler/jobs").1["total_rows"], 0);
    a.put_doc("live", "reading-3", &json!({"deviceId": "sensor-3"}));
    // A one-shot run afterwards proves the job stopped: it still had this one to copy.
    let (_, once) = replicate(&a, json!({"source": "live", "target": url(&b, "live")}));
    assert_eq!(once["history"][0]["docs_written"], 1, "{once}");

    // CouchDB also cancels by the id alone (`replication_id`, `_local_id` or `id`), with no
    // source or target (`couch_replicator_parse:parse_rep_doc_without_id`).
    for key in ["replication_id", "_local_id", "id"] {
        assert_eq!(replicate(&a, job.clone()).0, 202);
        let by_id = json!({key: id, "cancel": true});
        assert_eq!(replicate(&a, by_id.clone()), (200, json!({"ok": true, "_local_id": id})));
        assert_eq!(a.get("/_scheduler/jobs").1["total_rows"], 0, "cancelled by {key}");
        let (status, gone) = replicate(&a, by_id);
        assert_eq!((status, gone["error"].clone()), (404, json!("not_found")), "{gone}");
    }
}

#[test]
fn doc_ids_and_selector_replicate_only_matching_documents() {
    let (a, b) = (Server::start(), Server::start());
    a.create_db("people");
    load(&a, "people", &people());
    let (status, answer) = replicate(
        &a,
        json!({"source": "people", "target": url(&b, "by_id"), "create_target": true,
            "doc_ids": ["1", "3"]}),
    );
    assert_eq!(status, 200, "{answer}");
    let (_, all) = b.get("/by_id/_all_docs");
    assert_eq!(crate::harness::ids(&all["rows"]), ["1", "3"]);
    let (status, answer) = replicate(
        &a,
        json!({"source": "people", "target": url(&b, "readers"), "create_target": true,
            "selector": {"countOfBooks": {"$gt": 5}}}),
    );
    assert_eq!(status, 200, "{answer}");
    let (_, all) = b.get("/readers/_all_docs");
    assert_eq!(crate::harness::ids(&all["rows"]), ["3"]);

    // A design-document filter of the source, with query_params.
    let ddoc = json!({"filters": {"named": "function(doc, req) { return doc.lastName === req.query.name; }"}});
    a.put_doc("people", "_design/people", &ddoc);
    let (status, answer) = replicate(
        &a,
        json!({"source": "people", "target": url(&b, "smiths"), "create_target": true,
            "filter": "people/named", "query_params": {"name": "Smith"}}),
    );
    assert_eq!(status, 200, "{answer}");
    let (_, all) = b.get("/smiths/_all_docs");
    assert_eq!(crate::harness::ids(&all["rows"]), ["3"]);
}

#[test]
fn replicator_documents_start_jobs_shown_in_scheduler_docs() {
    let (a, b) = (Server::start(), Server::start());
    a.create_db("people");
    load(&a, "people", &people());
    let doc = json!({"source": url(&a, "people"), "target": url(&b, "people"),
        "create_target": true});
    b.put_doc("_replicator", "copy-people", &doc);
    let state = |s: &Server, id: &str| s.get(&format!("/_scheduler/docs/_replicator/{id}")).1;
    eventually("completed", || state(&b, "copy-people")["state"] == "completed");
    let row = state(&b, "copy-people");
    assert_eq!(row["info"]["docs_written"], 3, "{row}");
    assert_eq!(row["source"], format!("{}/people/", a.base()), "no credentials shown");
    // The end is written back into the document, which names its writer as owner.
    eventually("state written back", || {
        b.get_doc("_replicator", "copy-people")["_replication_state"] == "completed"
    });
    let stored = b.get_doc("_replicator", "copy-people");
    assert_eq!(stored["owner"], "admin", "{stored}");
    assert_eq!(stored["_replication_stats"]["docs_written"], 3, "{stored}");
    assert_eq!(stored["_replication_stats"]["missing_revisions_found"], 3, "{stored}");
    let time = stored["_replication_state_time"].as_str().unwrap_or_default();
    assert!(time.len() == 20 && time.ends_with('Z'), "ISO 8601: {time}");
    assert_eq!(state(&b, "copy-people")["state"], "completed", "the write-back restarted nothing");
    assert_eq!(contents(&a, "people"), contents(&b, "people"));

    // A continuous one runs until its document is deleted.
    let live = json!({"source": url(&a, "people"), "target": url(&b, "live"),
        "create_target": true, "continuous": true});
    let rev = b.put_doc("_replicator", "live", &live);
    eventually("running", || state(&b, "live")["state"] == "running");
    a.put_doc("people", "5", &json!({"firstName": "Kenji"}));
    eventually("the new person on B", || b.get("/live/5").0 == 200);
    assert_eq!(b.get("/_scheduler/jobs").1["jobs"][0]["doc_id"], "live");
    assert_eq!(b.delete(&format!("/_replicator/live?rev={rev}")).0, 200);
    eventually("the job stopped", || b.get("/_scheduler/jobs").1["total_rows"] == 0);
    assert_eq!(b.get("/_scheduler/docs/_replicator/live").0, 404);
}

/// A malformed `_replicator` document is refused at write time (CouchDB 3.4's
/// `before_doc_update` runs `parse_rep_doc_without_id`): `403 forbidden` with CouchDB's
/// reason, through PUT, POST and `_bulk_docs`, and nothing is stored; a valid one still
/// starts a job, and a deletion is let through.
#[test]
fn malformed_replicator_documents_are_refused_when_written() {
    let (a, b) = (Server::start(), Server::start());
    a.create_db("people");
    load(&a, "people", &people());
    let (src, tgt) = (url(&a, "people"), url(&b, "copy"));
    let boolean = "{throw,{bad_request,<<\"parameter `continuous` must be a boolean\">>}}";
    let bad = [
        (json!({"_id": "no-target", "source": src}), "Missing replicator database"),
        (
            json!({"_id": "bad-url", "source": "http://", "target": tgt}),
            "endpoint has an invalid url",
        ),
        (json!({"_id": "continuous", "source": src, "target": tgt, "continuous": "yes"}), boolean),
        (
            json!({"_id": "filter", "source": src, "target": tgt, "filter": "nope"}),
            "Invalid filter. Must match `ddocname/filtername`.",
        ),
        (
            json!({"_id": "proxies", "source": src, "target": tgt,
                   "proxy": "http://proxy:3128", "source_proxy": "http://other:3128"}),
            "{throw,{bad_request,\"`proxy` is mutually exclusive with `source_proxy`\"}}",
        ),
        (
            json!({"_id": "ftp-proxy", "source": src, "target": tgt, "target_proxy": "ftp://p:21"}),
            "proxy has an invalid url",
        ),
        (
            json!({"_id": "num-proxy", "source": src, "target": tgt, "proxy": 5}),
            "Invalid proxy url",
        ),
        (
            json!({"_id": "auth", "source": {"url": src, "auth": "secret"}, "target": tgt}),
            "{error,{badmatch,<<\"secret\">>}}",
        ),
        (
            json!({"_id": "headers", "source": src,
                   "target": {"url": tgt, "headers": {"X-Token": 5}}}),
            "{error,badarg}",
        ),
    ];
    for (doc, reason) in &bad {
        let id = doc["_id"].as_str().unwrap_or_default();
        assert_error(b.put(&format!("/_replicator/{id}"), doc), 403, "forbidden", reason);
        assert_error(b.post("/_replicator", doc), 403, "forbidden", reason);
    }
    let docs: Vec<Value> = bad.iter().map(|(doc, _)| doc.clone()).collect();
    let (status, rows) = b.post("/_replicator/_bulk_docs", &json!({ "docs": docs }));
    assert_eq!(status, 201, "{rows}");
    for (row, (doc, reason)) in rows.as_array().into_iter().flatten().zip(&bad) {
        assert_eq!(row["id"], doc["_id"], "{rows}");
        assert_eq!(row["error"], "forbidden", "{rows}");
        assert_eq!(row["reason"], *reason, "{rows}");
    }
    let (_, all) = b.get("/_replicator/_all_docs");
    let stored: Vec<&Value> = all["rows"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| !r["id"].as_str().unwrap_or_default().starts_with("_design/"))
        .collect();
    assert!(stored.is_empty(), "nothing stored: {all}");

    // One that parses but cannot run (its filter is missing on the source) is stored,
    // then `failed` with the reason written back by the replicator.
    let doc = json!({"source": src, "target": tgt, "filter": "people/missing"});
    b.put_doc("_replicator", "no-filter", &doc);
    eventually("failure written back", || {
        b.get_doc("_replicator", "no-filter")["_replication_state"] == "failed"
    });
    let failed = b.get_doc("_replicator", "no-filter");
    assert!(failed["_replication_state_reason"].is_string(), "{failed}");

    // A valid document still runs, its write-back (by the replicator) is accepted, and
    // it may be deleted.
    let doc = json!({"source": src, "target": tgt, "create_target": true});
    let rev = b.put_doc("_replicator", "good", &doc);
    eventually("state written back", || {
        b.get_doc("_replicator", "good")["_replication_state"] == "completed"
    });
    assert_eq!(contents(&a, "people"), contents(&b, "copy"));
    let rev = b.get_doc("_replicator", "good")["_rev"].as_str().unwrap_or(&rev).to_string();
    assert_eq!(b.delete(&format!("/_replicator/good?rev={rev}")).0, 200);
}

/// A completed document is not run again after a restart, and shows its written state.
#[test]
fn a_completed_replicator_document_stays_completed_after_a_restart() {
    let a = Server::start();
    let mut b = Server::start();
    a.create_db("people");
    load(&a, "people", &people());
    let doc = json!({"source": url(&a, "people"), "target": url(&b, "people"),
        "create_target": true});
    b.put_doc("_replicator", "once", &doc);
    eventually("state written back", || {
        b.get_doc("_replicator", "once")["_replication_state"] == "completed"
    });
    let before = b.get_doc("_replicator", "once");
    assert!(b.terminate(), "a clean stop");
    b.restart();
    let state = |s: &Server| s.get("/_scheduler/docs/_replicator/once").1;
    eventually("seen again", || state(&b)["state"] == "completed");
    assert_eq!(state(&b)["info"]["docs_written"], 3);
    assert_eq!(b.get_doc("_replicator", "once")["_rev"], before["_rev"], "not run again");
}

/// The `owner` of a `_replicator` document (CouchDB's `before_doc_update`): the writer's
/// name, and nobody else but a database admin may change the document.
#[test]
fn replicator_documents_belong_to_their_writer() {
    let s = Server::start();
    for name in ["kana", "taro"] {
        let user = json!({"_id": format!("org.couchdb.user:{name}"), "name": name,
            "type": "user", "roles": [], "password": "pw"});
        assert_eq!(s.put(&format!("/_users/org.couchdb.user:{name}"), &user).0, 201);
    }
    let members = json!({"members": {"names": ["kana", "taro"]}, "admins": {"names": []}});
    assert_eq!(s.put("/_replicator/_security", &members).0, 200);
    let as_user = |name: &str, method: Method, path: &str, body: &Value| {
        send(s.user_req(method, path, name, "pw").json(body))
    };
    // A source that does not exist: the job fails, which does not matter here.
    let doc = json!({"source": "http://127.0.0.1:9/nowhere", "target": "http://127.0.0.1:9/t"});
    let (status, created) = as_user("kana", Method::PUT, "/_replicator/mine", &doc);
    assert_eq!(status, 201, "{created}");
    assert_eq!(s.get_doc("_replicator", "mine")["owner"], "kana");
    let mut theirs = s.get_doc("_replicator", "mine");
    theirs["continuous"] = json!(true);
    let refused = as_user("taro", Method::PUT, "/_replicator/mine", &theirs);
    assert_eq!(refused.0, 403, "{}", refused.1);
    assert_eq!(refused.1["reason"], "Can't update replication documents from other users.");
    let forged = json!({"source": "http://127.0.0.1:9/a", "target": "http://127.0.0.1:9/b",
        "owner": "kana"});
    assert_eq!(as_user("taro", Method::PUT, "/_replicator/forged", &forged).0, 403);
    // A server admin may, and keeps the owner.
    let (status, _) = s.put("/_replicator/mine", &theirs);
    assert_eq!(status, 201);
    assert_eq!(s.get_doc("_replicator", "mine")["owner"], "kana");
}

#[test]
fn a_user_cannot_replicate_into_a_database_he_cannot_write() {
    let a = Server::start();
    let user = json!({"_id": "org.couchdb.user:bob", "name": "bob", "type": "user",
        "roles": [], "password": "pw"});
    assert_eq!(a.put("/_users/org.couchdb.user:bob", &user).0, 201);
    a.create_db("people");
    load(&a, "people", &people());
    // Databases are admin-only until given a security object (CouchDB 3's default).
    let readers = json!({"members": {"names": ["bob"], "roles": []}});
    assert_eq!(a.put("/people/_security", &readers).0, 200);
    a.create_db("locked");
    let security = json!({"admins": {"names": [], "roles": []},
        "members": {"names": ["admin"], "roles": []}});
    assert_eq!(a.put("/locked/_security", &security).0, 200);
    let body = json!({"source": "people", "target": "locked"});
    let (status, answer) = send(a.user_req(Method::POST, "/_replicate", "bob", "pw").json(&body));
    assert!(matches!(status, 401 | 403), "{status} {answer}");
    assert_eq!(a.db_info("locked")["doc_count"], 0, "nothing was written");
    // Bob may replicate into a database he can write.
    let body = json!({"source": "people", "target": "mine"});
    assert_eq!(a.put_empty("/mine").0, 201);
    assert_eq!(a.put("/mine/_security", &readers).0, 200);
    let (status, answer) = send(a.user_req(Method::POST, "/_replicate", "bob", "pw").json(&body));
    assert_eq!(status, 200, "{answer}");
    assert_eq!(a.db_info("mine")["doc_count"], 3);
}

/// The replication id hashes a design-document filter's code, as CouchDB's
/// `couch_replicator_ids`: editing the filter names a new checkpoint.
#[test]
fn a_filters_code_is_part_of_the_replication_id() {
    let (a, b) = (Server::start(), Server::start());
    a.create_db("people");
    load(&a, "people", &people());
    let filter = |code: &str| json!({"filters": {"named": code}});
    let rev = a.put_doc("people", "_design/people", &filter("function(doc) { return true; }"));
    let body = json!({"source": "people", "target": url(&b, "copy"), "create_target": true,
        "filter": "people/named", "continuous": true});
    let start = |body: &Value| {
        let (status, answer) = replicate(&a, body.clone());
        assert_eq!(status, 202, "{answer}");
        let mut cancel = body.clone();
        cancel["cancel"] = json!(true);
        assert_eq!(replicate(&a, cancel).0, 200);
        answer["_local_id"].as_str().unwrap_or_default().to_string()
    };
    let first = start(&body);
    assert_eq!(start(&body), first, "the same code, the same id");
    let mut edited = filter("function(doc) { return doc.lastName === 'Smith'; }");
    edited["_rev"] = json!(rev);
    a.put_doc("people", "_design/people", &edited);
    assert_ne!(start(&body), first, "new code, new id");
    let mut missing = body.clone();
    missing["filter"] = json!("people/nope");
    let (status, answer) = replicate(&a, missing);
    assert_eq!(status, 400, "{answer}");
}

/// A resumed replication's history counts on from its checkpoint, and a one-shot run that
/// got no changes at all answers `no_changes` (CouchDB's replication_test.exs).
#[test]
fn history_counters_go_on_and_a_run_without_changes_answers_no_changes() {
    let s = Server::start();
    s.create_db("people");
    load(&s, "people", &people());
    let body = json!({"source": url(&s, "people"), "target": url(&s, "copy"),
        "create_target": true});
    let (status, first) = replicate(&s, body.clone());
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["history"][0]["docs_written"], 3, "{first}");
    load(&s, "people", &[json!({"_id": "4", "firstName": "Yuki"})]);
    let (_, second) = replicate(&s, body.clone());
    let entry = &second["history"][0];
    let counters = ["missing_checked", "missing_found", "docs_read", "docs_written"];
    for counter in counters {
        assert_eq!(entry[counter], 4, "{counter}: {second}");
    }
    assert_eq!(second["history"].as_array().map(Vec::len), Some(2), "{second}");
    let (_, third) = replicate(&s, body);
    assert_eq!(third["no_changes"], true, "{third}");
    let missing_only = json!({"source": url(&s, "people"), "target": url(&s, "copy"),
        "doc_ids": ["no-such-person"]});
    let (status, answer) = replicate(&s, missing_only);
    assert_eq!((status, answer["no_changes"].clone()), (200, json!(true)), "{answer}");
}

/// Every answer names its request, as CouchDB's do (`X-Couch-Request-ID`, 10 hex digits,
/// and `X-CouchDB-Body-Time`); replication_test.exs checks them on `_scheduler`.
#[test]
fn answers_carry_couchdbs_request_headers() {
    let s = Server::start();
    let mut seen = Vec::new();
    for path in ["/_scheduler/jobs", "/_scheduler/docs", "/no_such_db"] {
        let resp = s.req(Method::GET, path).send().expect("request");
        let id = resp.headers()["x-couch-request-id"].to_str().unwrap_or_default().to_string();
        assert!(id.len() == 10 && id.chars().all(|c| c.is_ascii_hexdigit()), "{path}: {id}");
        assert_eq!(resp.headers()["x-couchdb-body-time"], "0");
        seen.push(id);
    }
    seen.dedup();
    assert_eq!(seen.len(), 3, "each request has its own id: {seen:?}");
    let anon = s.anon_req(Method::GET, "/_all_dbs").send().expect("request");
    assert_eq!(anon.status(), 401);
    assert!(anon.headers().contains_key("x-couch-request-id"));
}
