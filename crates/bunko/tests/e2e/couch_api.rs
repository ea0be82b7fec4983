//! The rest of the CouchDB API clients call (issue 16, point 4), each as CouchDB 3.4
//! answers it: `_local_docs`, `_dbs_info`.

use reqwest::Method;
use serde_json::{Value, json};

use crate::harness::{Server, assert_error, send};

#[test]
fn local_docs_lists_local_documents_like_all_docs() {
    let s = Server::start();
    s.create_db("db");
    for id in ["b", "a", "c"] {
        assert_eq!(s.put(&format!("/db/_local/{id}"), &json!({"checkpoint": id})).0, 201);
    }
    s.put_doc("db", "plain", &json!({}));
    let (status, all) = s.get("/db/_local_docs");
    assert_eq!(status, 200, "{all}");
    assert_eq!(all["total_rows"], Value::Null);
    assert_eq!(all["offset"], Value::Null);
    assert_eq!(
        all["rows"][0],
        json!({"id": "_local/a", "key": "_local/a", "value": {"rev": "0-1"}})
    );
    assert_eq!(crate::harness::ids(&all["rows"]), ["_local/a", "_local/b", "_local/c"]);
    let (_, some) = s.get("/db/_local_docs?descending=true&limit=2&include_docs=true");
    assert_eq!(crate::harness::ids(&some["rows"]), ["_local/c", "_local/b"]);
    assert_eq!(
        some["rows"][0]["doc"],
        json!({"_id": "_local/c", "_rev": "0-1", "checkpoint": "c"})
    );
    let (_, range) =
        s.get("/db/_local_docs?startkey=%22_local/b%22&inclusive_end=false&endkey=%22_local/c%22");
    assert_eq!(crate::harness::ids(&range["rows"]), ["_local/b"]);
    let body = json!({"keys": ["_local/c", "_local/nope"]});
    let (status, keyed) = send(s.req(Method::POST, "/db/_local_docs").json(&body));
    assert_eq!(status, 200, "{keyed}");
    assert_eq!(keyed["rows"][1], json!({"key": "_local/nope", "error": "not_found"}));
}

#[test]
fn dbs_info_answers_each_database_or_not_found() {
    let s = Server::start();
    s.create_db("alpha");
    s.create_db("beta");
    s.put_doc("alpha", "x", &json!({}));
    let (status, rows) = s.post("/_dbs_info", &json!({"keys": ["alpha", "missing"]}));
    assert_eq!(status, 200, "{rows}");
    assert_eq!(rows[0]["key"], "alpha");
    assert_eq!(rows[0]["info"]["db_name"], "alpha");
    assert_eq!(rows[0]["info"]["doc_count"], 1);
    assert_eq!(rows[1], json!({"key": "missing", "error": "not_found"}));
    assert_error(s.post("/_dbs_info", &json!({})), 400, "bad_request", "`keys` member must exist.");
    let many: Vec<String> = (0..101).map(|i| format!("db{i}")).collect();
    assert_error(s.post("/_dbs_info", &json!({"keys": many})), 400, "bad_request", "too_many_keys");
    let (status, listed) = s.get("/_dbs_info?startkey=%22alpha%22&endkey=%22beta%22");
    assert_eq!(status, 200, "{listed}");
    let keys: Vec<&str> = listed
        .as_array()
        .map(|r| r.iter().filter_map(|r| r["key"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(keys, ["alpha", "beta"]);
    assert_eq!(listed[1]["info"]["db_name"], "beta");
    // A user sees only the databases he may read.
    let user = json!({"_id": "org.couchdb.user:bob", "name": "bob", "type": "user", "roles": [], "password": "pw"});
    assert_eq!(s.put("/_users/org.couchdb.user:bob", &user).0, 201);
    let body = json!({"keys": ["alpha"]});
    let (status, rows) = send(s.user_req(Method::POST, "/_dbs_info", "bob", "pw").json(&body));
    assert_eq!((status, rows), (200, json!([{"key": "alpha", "error": "not_found"}])));
    assert_eq!(send(s.user_req(Method::GET, "/_dbs_info", "bob", "pw")).0, 401);
}
