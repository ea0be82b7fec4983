//! `validate_doc_update` functions run on every document write, whatever the path (issue 15,
//! point 4), ported from CouchDB 3.4's `security_validation_test.exs`: `throw({forbidden})`
//! is `403`, `throw({unauthorized})` is `401`, the function sees `newDoc`, `oldDoc`,
//! `userCtx` and `secObj`, and replication writes (`new_edits=false`) are checked too.

use reqwest::Method;
use serde_json::{Value, json};

use crate::harness::{Server, assert_error, send};

const DDOC: &str = "(function (newDoc, oldDoc, userCtx, secObj) {
  if (secObj.admin_override) {
    if (userCtx.roles.indexOf('_admin') != -1) { return true; }
  }
  if (!newDoc._deleted && !newDoc.author) {
    throw {forbidden: \"Documents must have an author field\"};
  }
  if (oldDoc && oldDoc.author != userCtx.name) {
    throw {unauthorized: \"You are '\" + userCtx.name + \"', not the author '\" + oldDoc.author + \"' of this document. You jerk.\"};
  }
})";

fn start() -> Server {
    let s = Server::start_with(&["--pbkdf2-iterations", "10"], &[]);
    for name in ["tom", "jerry"] {
        let doc = json!({"_id": format!("org.couchdb.user:{name}"), "name": name,
                         "type": "user", "roles": [], "password": name});
        assert_eq!(s.post("/_users", &doc).0, 201);
    }
    s.create_db("db");
    let security = json!({"admin_override": false, "admins": {"names": ["jerry"]},
                          "members": {"names": ["tom", "jerry"]}});
    assert_eq!(s.put("/db/_security", &security).0, 200);
    s.put_doc("db", "_design/test", &json!({"validate_doc_update": DDOC}));
    s
}

fn as_user(s: &Server, user: &str, method: Method, path: &str, body: &Value) -> (u16, Value) {
    send(s.user_req(method, path, user, user).json(body))
}

#[test]
fn author_presence_and_user_security() {
    let s = start();
    let put = |user: &str, body: &Value| as_user(&s, user, Method::PUT, "/db/test_doc", body);
    let missing = "Documents must have an author field";
    assert_error(put("jerry", &json!({"foo": 1})), 403, "forbidden", missing);
    let (status, created) = put("jerry", &json!({"foo": 1, "author": "jerry"}));
    assert_eq!(status, 201, "{created}");
    let mut doc = s.get_doc("db", "test_doc");
    assert_error(
        as_user(&s, "tom", Method::POST, "/db", &json!({"foo": 1})),
        403,
        "forbidden",
        missing,
    );
    doc["foo"] = json!(3);
    let jerk = "You are 'admin', not the author 'jerry' of this document. You jerk.";
    assert_error(s.put("/db/test_doc", &doc), 401, "unauthorized", jerk);
    let security = json!({"admin_override": true, "admins": {"names": ["jerry"]},
                          "members": {"names": ["tom", "jerry"]}});
    assert_eq!(s.put("/db/_security", &security).0, 200);
    doc["author"] = json!("tom");
    doc["_rev"] = s.put("/db/test_doc", &doc).1["rev"].clone();
    doc["foo"] = json!("asdf");
    let (status, body) = put("tom", &doc);
    assert_eq!(status, 201, "{body}");
    let path = format!("/db/test_doc?rev={}", body["rev"].as_str().unwrap_or_default());
    let (status, refused) = send(s.user_req(Method::DELETE, &path, "jerry", "jerry"));
    assert_eq!((status, refused["error"].as_str()), (401, Some("unauthorized")), "{refused}");
    assert_eq!(s.get_doc("db", "test_doc")["author"], "tom");
}

#[test]
fn bulk_writes_are_validated_per_document() {
    let s = start();
    let docs = json!({"docs": [{"_id": "bahbah", "author": "jerry", "foo": "bar"},
                               {"_id": "fahfah", "foo": "baz"}]});
    let (status, rows) = as_user(&s, "jerry", Method::POST, "/db/_bulk_docs", &docs);
    assert_eq!(status, 201);
    assert!(rows[0]["rev"].is_string(), "{rows}");
    assert_eq!(rows[1]["error"], "forbidden", "{rows}");
    assert_eq!(s.get("/db/bahbah").0, 200);
    assert_eq!(s.get("/db/fahfah").0, 404);
}

#[test]
fn replicated_writes_are_validated_too() {
    let s = start();
    let rev = "1-0123456789abcdef0123456789abcdef";
    let bad = json!({"_id": "bad1", "_rev": rev, "value": "a"});
    let (status, body) = s.put("/db/bad1?new_edits=false", &bad);
    assert_eq!(
        (status, body["reason"].as_str()),
        (403, Some("Documents must have an author field"))
    );
    let docs =
        json!({"docs": [bad, {"_id": "good", "_rev": rev, "author": "x"}], "new_edits": false});
    let (status, rows) = s.post("/db/_bulk_docs", &docs);
    assert_eq!(status, 201);
    assert_eq!(
        rows,
        json!([{"id": "bad1", "error": "forbidden",
                             "reason": "Documents must have an author field"}])
    );
    assert_eq!(s.get("/db/bad1").0, 404);
    assert_eq!(s.get_doc("db", "good")["author"], "x");
}

/// Bunko refuses a function that does not compile when the design document is saved
/// (CouchDB accepts it and then fails every write); any other thrown value is CouchDB's
/// `500 unknown_error`; editing or deleting the design document takes effect at once.
#[test]
fn functions_are_compiled_on_save_and_replaced_at_once() {
    let s = start();
    let (status, body) =
        s.put("/db/_design/broken", &json!({"validate_doc_update": "function( {"}));
    assert_eq!((status, body["error"].as_str()), (400, Some("compilation_error")), "{body}");
    let odd =
        json!({"validate_doc_update": "function(doc) { if (doc.odd) throw({oops: 'odd'}); }"});
    let rev = s.put_doc("db", "_design/odd", &odd);
    assert_error(s.put("/db/x", &json!({"odd": 1, "author": "a"})), 500, "unknown_error", "odd");
    assert_eq!(s.delete(&format!("/db/_design/odd?rev={rev}")).0, 200);
    assert_eq!(s.put("/db/x", &json!({"odd": 1, "author": "a"})).0, 201);
    let test = s.get_doc("db", "_design/test");
    let path = format!("/db/_design/test?rev={}", test["_rev"].as_str().unwrap_or_default());
    assert_eq!(s.delete(&path).0, 200);
    assert_eq!(s.put("/db/y", &json!({"no": "author"})).0, 201);
}

/// Issue 16: `newDoc._attachments` holds every attachment of the edit as a stub, as
/// CouchDB's `couch_doc:to_json_obj` passes it, new data (with the new `revpos`) and kept
/// stubs alike (`content_type`, `revpos`, `digest`, `length`, `stub`).
#[test]
fn validators_see_attachments_as_stubs() {
    let s = Server::start();
    s.create_db("db");
    let vdu = "function (newDoc) {
      if (newDoc.show) { throw {forbidden: JSON.stringify(newDoc._attachments)}; }
    }";
    s.put_doc("db", "_design/v", &json!({"validate_doc_update": vdu}));
    // "吾輩は猫である" in UTF-8, base64.
    let data = "5ZC+6Lyp44Gv54yr44Gn44GC44KL";
    let doc = json!({"_attachments": {"neko.txt": {"content_type": "text/plain", "data": data}}});
    let rev = s.put_doc("db", "d", &doc);
    // The digest and revision CouchDB 3.4.3 gives the same write (text is digested gzipped).
    assert_eq!(rev, "1-55e19a20ea6b31bcc835b29164839320");
    let neko = json!({"content_type": "text/plain", "revpos": 1,
                      "digest": "md5-V7qDN45iaRj7OHK2FY1olw==", "length": 21, "stub": true});
    assert_eq!(s.get_doc("db", "d")["_attachments"]["neko.txt"], neko);
    let shown = |body: &Value| -> Value {
        let (status, got) = s.put("/db/d", body);
        assert_eq!(status, 403, "{got}");
        serde_json::from_str(got["reason"].as_str().unwrap_or_default()).expect("stubs")
    };
    let edit = json!({"_rev": rev, "show": true, "_attachments": {
        "neko.txt": {"stub": true},
        "inu.txt": {"content_type": "text/plain", "data": "aGVsbG8gd29ybGQ="}}});
    let inu = json!({"content_type": "text/plain", "revpos": 2,
                     "digest": "md5-7mkg+nM0HN26sZkLN8KVSA==", "length": 11, "stub": true});
    assert_eq!(shown(&edit), json!({"neko.txt": neko, "inu.txt": inu}));
}
