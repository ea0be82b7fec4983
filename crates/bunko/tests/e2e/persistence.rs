//! Graceful restart (SIGTERM) keeps everything: documents, revisions, tombstones, conflicts,
//! `_local` docs, security, revs_limit, sequences and users.

use reqwest::Method;
use serde_json::{Value, json};

use crate::harness::{Server, assert_error, send};

/// Everything observable about database `db` that must survive a restart.
fn state(s: &Server) -> Value {
    let info = s.db_info("db");
    json!({
        "all_docs": s.get("/db/_all_docs?include_docs=true&conflicts=true").1,
        "changes": s.get("/db/_changes?style=all_docs").1,
        "doc_count": info["doc_count"],
        "doc_del_count": info["doc_del_count"],
        "update_seq": info["update_seq"],
        "security": s.get("/db/_security").1,
        "revs_limit": s.get("/db/_revs_limit").1,
        "local": s.get("/db/_local/checkpoint").1,
        "history": s.get("/db/person?revs=true").1,
        "all_dbs": s.get("/_all_dbs").1,
    })
}

fn populate(s: &Server) {
    s.create_db("db");
    s.create_db("other");
    let r1 = s.put_doc(
        "db",
        "person",
        &json!({"firstName": "Thomas", "addresses": [{"city": "Seattle", "zip": 98012}]}),
    );
    s.put_doc("db", "person", &json!({"_rev": r1, "firstName": "Thomas", "moved": true}));
    let gone = s.put_doc("db", "gone", &json!({"v": 1}));
    s.delete(&format!("/db/gone?rev={gone}"));
    let (status, _) = s.post(
        "/db/_bulk_docs",
        &json!({"new_edits": false, "docs": [
            {"_id": "conflicted", "_rev": "1-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "v": "a"},
            {"_id": "conflicted", "_rev": "1-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "v": "b"}
        ]}),
    );
    assert_eq!(status, 201);
    s.put_doc("db", "_design/people", &json!({"views": {}}));
    s.put_doc("db", "_local/checkpoint", &json!({"last_seq": "42"}));
    s.put_doc("db", "b%2Fslash", &json!({"pub-id": "mspress"}));
    assert_eq!(
        s.put("/db/_security", &json!({"members": {"names": ["alice"]}, "admins": {}})).0,
        200
    );
    assert_eq!(s.raw(Method::PUT, "/db/_revs_limit", "77").0, 200);
}

#[test]
fn graceful_restart_keeps_all_data_and_update_seq() {
    let mut s = Server::start();
    populate(&s);
    let before = state(&s);
    assert!(s.terminate(), "SIGTERM exits with status 0");
    s.restart();
    assert_eq!(state(&s), before);
    // Writes continue after the restart with a new, different seq.
    let seq = before["update_seq"].clone();
    s.put_doc("db", "after", &json!({}));
    assert_ne!(s.db_info("db")["update_seq"], seq);
    let (_, changes) =
        s.get(&format!("/db/_changes?since={}", crate::harness::enc(seq.as_str().unwrap())));
    assert_eq!(crate::harness::ids(&changes["results"]), ["after"]);
}

#[test]
fn deleted_database_stays_deleted_after_restart() {
    let mut s = Server::start();
    populate(&s);
    assert_eq!(s.delete("/other"), (200, json!({"ok": true})));
    assert!(s.terminate());
    s.restart();
    assert_error(s.get("/other"), 404, "not_found", "Database does not exist.");
    assert_eq!(s.db_info("db")["db_name"], "db");
}

#[test]
fn revs_stay_deterministic_across_restart() {
    let mut s = Server::start();
    s.create_db("db");
    let r1 = s.put_doc("db", "a", &json!({"v": 1}));
    assert!(s.terminate());
    s.restart();
    s.create_db("fresh");
    assert_eq!(s.put_doc("fresh", "a", &json!({"v": 1})), r1);
    let r2 = s.put_doc("db", "a", &json!({"_rev": r1, "v": 2}));
    let f2 = s.put_doc("fresh", "a", &json!({"_rev": r1, "v": 2}));
    assert_eq!(r2, f2);
}

#[test]
fn users_and_sessions_survive_restart() {
    let mut s = Server::start();
    let (status, body) = s.put_empty("/_users");
    assert!(status == 201 || status == 412, "{body}");
    let user = json!({"_id": "org.couchdb.user:alice", "name": "alice", "password": "wonderland",
                      "roles": [], "type": "user"});
    assert_eq!(s.put("/_users/org.couchdb.user:alice", &user).0, 201);
    assert!(s.terminate());
    s.restart();
    let (status, body) = send(s.user_req(Method::GET, "/_session", "alice", "wonderland"));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["userCtx"]["name"], "alice");
}

#[test]
fn kill9_after_acknowledged_writes_keeps_them() {
    let mut s = Server::start();
    populate(&s);
    let before = state(&s);
    s.kill9();
    s.restart();
    assert_eq!(state(&s), before);
}
