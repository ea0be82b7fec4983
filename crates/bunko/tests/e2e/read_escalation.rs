//! Reading what one may not see (issue 16): the credentials of another user's `_replicator`
//! document. CouchDB 3 strips them (`couch_replicator_docs:after_doc_read`) for every reader
//! who is neither the document's `owner` nor a database admin; Bunko does it in the engine's
//! read gate (`bunko_engine::read_gate`), which every read path passes. These tests read
//! kana's replication document as mallory, another member of `_replicator`, through every
//! path that hands out documents, and look for the secrets in the raw answers.

use reqwest::Method;
use serde_json::{Value, json};

use crate::harness::{Server, assert_error, send};

const PASSWORD: &str = "pw";
/// What must never reach mallory: a URL password, a header and an `auth` password.
const SECRETS: [&str; 3] = ["hunter2", "c2VjcmV0LWhlYWRlcg", "s3cret-auth"];

fn start() -> Server {
    let s = Server::start_with(&["--pbkdf2-iterations", "10"], &[]);
    for name in ["kana", "mallory"] {
        let doc = json!({"name": name, "type": "user", "roles": [], "password": PASSWORD});
        assert_eq!(s.put(&format!("/_users/org.couchdb.user:{name}"), &doc).0, 201);
    }
    let security = json!({"members": {"names": ["kana", "mallory"]}});
    assert_eq!(s.put("/_replicator/_security", &security).0, 200);
    // An admin's design document: a view and a show over the replication documents.
    let ddoc = json!({
        "views": {"all": {"map": "function(doc) { emit(doc._id, null); }"}},
        "shows": {"raw": "function(doc, req) { return JSON.stringify(doc); }"},
    });
    assert_eq!(s.put("/_replicator/_design/look", &ddoc).0, 201);
    // kana's replication, to a server that is not there (it only has to be stored).
    let doc = json!({
        "source": "http://kana:hunter2@127.0.0.1:9/tegami",
        "target": {"url": "http://127.0.0.1:9/tegami-copy",
                   "headers": {"Authorization": "Basic c2VjcmV0LWhlYWRlcg=="},
                   "auth": {"basic": {"username": "kana", "password": "s3cret-auth"}}},
        "note": "手紙の複製",
    });
    let (status, body) = send(as_user(&s, Method::PUT, "/_replicator/tegami", "kana").json(&doc));
    assert_eq!(status, 201, "{body}");
    s
}

fn as_user(
    s: &Server,
    method: Method,
    path: &str,
    user: &str,
) -> reqwest::blocking::RequestBuilder {
    s.user_req(method, path, user, PASSWORD)
}

/// Sends and returns the status and the raw answer.
fn text(req: reqwest::blocking::RequestBuilder) -> (u16, String) {
    let resp = req.send().expect("request");
    (resp.status().as_u16(), resp.text().expect("body"))
}

/// Reads `path` as `user` and checks that the answer shows the document without secrets.
fn read_clean(s: &Server, method: Method, path: &str, body: Option<Value>) -> String {
    let mut req = as_user(s, method, path, "mallory");
    if let Some(body) = body {
        req = req.json(&body);
    }
    let (status, answer) = text(req);
    assert_eq!(status, 200, "{path}: {answer}");
    for secret in SECRETS {
        assert!(!answer.contains(secret), "{path} shows {secret}: {answer}");
    }
    answer
}

fn assert_shown(path: &str, answer: &str) {
    assert!(answer.contains("127.0.0.1:9/tegami"), "{path}: the document is there: {answer}");
    assert!(answer.contains("手紙の複製"), "{path}: {answer}");
}

#[test]
fn another_members_replication_credentials_stay_hidden_on_every_read_path() {
    let s = start();
    let get = |path: &str| {
        let answer = read_clean(&s, Method::GET, path, None);
        assert_shown(path, &answer);
        answer
    };
    let doc: Value = serde_json::from_str(&get("/_replicator/tegami")).expect("json");
    assert_eq!(doc["source"], "http://127.0.0.1:9/tegami", "{doc}");
    assert_eq!(doc["target"], json!({"url": "http://127.0.0.1:9/tegami-copy"}), "{doc}");
    assert_eq!(doc["owner"], "kana");
    let stored = s.get_doc("_replicator", "tegami");
    assert_ne!(doc["_rev"], stored["_rev"], "a made-up revision for a changed body");
    get("/_replicator/tegami?revs=true&revs_info=true&conflicts=true");
    get("/_replicator/tegami?open_revs=all");
    get("/_replicator/tegami?open_revs=all&latest=true");
    get("/_replicator/tegami?attachments=true");
    get("/_replicator/_design/look/_view/all?include_docs=true");
    get("/_replicator/_design/look/_show/raw/tegami");

    let (status, mixed) = text(
        as_user(&s, Method::GET, "/_replicator/tegami?open_revs=all", "mallory")
            .header("Accept", "multipart/mixed"),
    );
    assert_eq!(status, 200, "{mixed}");
    assert_shown("open_revs multipart", &mixed);
    assert!(SECRETS.iter().all(|secret| !mixed.contains(secret)), "{mixed}");

    let post = |path: &str, body: Value| {
        let answer = read_clean(&s, Method::POST, path, Some(body));
        assert_shown(path, &answer);
    };
    post("/_replicator/_bulk_get", json!({"docs": [{"id": "tegami"}]}));
    post("/_replicator/_find", json!({"selector": {"owner": "kana"}}));

    // A selector cannot probe the hidden fields either: it sees what mallory sees.
    let probe = json!({"selector": {"source": {"$regex": "hunter2"}}});
    let found: Value =
        serde_json::from_str(&read_clean(&s, Method::POST, "/_replicator/_find", Some(probe)))
            .expect("json");
    assert_eq!(found["docs"], json!([]), "{found}");

    // Listing the whole database is for server admins, as CouchDB's `chttpd_auth_request`.
    for (method, path) in [
        (Method::GET, "/_replicator/_all_docs?include_docs=true"),
        (Method::POST, "/_replicator/_all_docs"),
        (Method::GET, "/_replicator/_changes?include_docs=true&style=all_docs"),
        (Method::POST, "/_replicator/_changes?filter=_doc_ids"),
    ] {
        let req = as_user(&s, method, path, "mallory").json(&json!({"doc_ids": ["tegami"]}));
        assert_error(send(req), 401, "unauthorized", "You are not a server admin.");
    }
}

/// Replicating `_replicator` away: mallory's replication reads it through this server
/// as mallory, so whatever arrives carries no credentials (the feed itself is for server
/// admins, so nothing does).
#[test]
fn a_members_replication_of_the_replicator_database_carries_no_credentials() {
    let s = start();
    s.create_db("loot");
    assert_eq!(s.put("/loot/_security", &json!({"members": {"names": ["mallory"]}})).0, 200);
    let at = |db: &str| {
        s.base().replacen("http://", &format!("http://mallory:{PASSWORD}@"), 1) + "/" + db
    };
    let body = json!({"source": at("_replicator"), "target": at("loot")});
    let (status, answer) = send(as_user(&s, Method::POST, "/_replicate", "mallory").json(&body));
    assert_eq!(status, 401, "the source's feed is refused: {answer}");
    let (_, copied) = text(s.req(Method::GET, "/loot/_all_docs?include_docs=true"));
    assert!(SECRETS.iter().all(|secret| !copied.contains(secret)), "{status} {answer}: {copied}");
}

#[test]
fn the_owner_and_the_admin_see_the_credentials_and_others_cannot_overwrite() {
    let s = start();
    let (status, own) = text(as_user(&s, Method::GET, "/_replicator/tegami", "kana"));
    assert_eq!(status, 200);
    assert!(SECRETS.iter().all(|secret| own.contains(secret)), "the owner's own: {own}");
    let (_, found) = text(
        as_user(&s, Method::POST, "/_replicator/_find", "kana")
            .json(&json!({"selector": {"owner": "kana"}})),
    );
    assert!(found.contains("hunter2"), "{found}");
    let listed = send(s.req(Method::GET, "/_replicator/_changes?include_docs=true")).1;
    let rows = listed["results"].as_array().cloned().unwrap_or_default();
    let row = rows.iter().find(|r| r["id"] == "tegami").unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(row["doc"]["source"], "http://kana:hunter2@127.0.0.1:9/tegami", "the admin's");
    let admin = s.get_doc("_replicator", "tegami");
    assert_eq!(admin["source"], "http://kana:hunter2@127.0.0.1:9/tegami", "{admin}");
    assert_eq!(admin["target"]["auth"]["basic"]["password"], "s3cret-auth");

    // The owner rule covers writes: mallory may neither edit kana's document (even with
    // the revision she was shown) nor write one in kana's name.
    let shown: Value =
        serde_json::from_str(&read_clean(&s, Method::GET, "/_replicator/tegami", None))
            .expect("json");
    for rev in [&shown["_rev"], &admin["_rev"]] {
        let mut edit = shown.clone();
        edit["_rev"] = rev.clone();
        edit["source"] = json!("http://127.0.0.1:9/elsewhere");
        let (status, body) =
            send(as_user(&s, Method::PUT, "/_replicator/tegami", "mallory").json(&edit));
        assert!(status == 403 || status == 409, "{status} {body}");
    }
    let forged = json!({"source": "http://127.0.0.1:9/a", "target": "http://127.0.0.1:9/b",
                        "owner": "kana"});
    let (status, body) =
        send(as_user(&s, Method::PUT, "/_replicator/forged", "mallory").json(&forged));
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["reason"], "Can't update replication documents from other users.");
    assert_eq!(s.get_doc("_replicator", "tegami")["source"], admin["source"], "unchanged");
    assert_eq!(s.get("/_replicator/forged").0, 404);
}
