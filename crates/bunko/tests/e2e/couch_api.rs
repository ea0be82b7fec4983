//! The rest of the CouchDB API clients call (issue 16, point 4), each as CouchDB 3.4
//! answers it: `_local_docs`, `_dbs_info`, `_db_updates`, `_uuids` algorithms, `batch=ok`,
//! update functions.

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
    // `limit` (the query's over the body's), `skip` and `descending` apply to `keys`, as
    // CouchDB 3.4.3 answers them.
    let body = json!({"keys": ["_local/c", "_local/a"], "limit": 5});
    let (_, limited) = send(s.req(Method::POST, "/db/_local_docs?limit=1").json(&body));
    assert_eq!(crate::harness::ids(&limited["rows"]), ["_local/c"]);
    let body = json!({"keys": ["_local/c", "_local/a", "_local/b"], "skip": 1, "descending": true});
    let (_, skipped) = send(s.req(Method::POST, "/db/_local_docs").json(&body));
    assert_eq!(crate::harness::ids(&skipped["rows"]), ["_local/a", "_local/c"]);
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

/// The rows of a `_db_updates` answer as (type, db_name).
fn events(feed: &Value) -> Vec<(String, String)> {
    let rows = feed["results"].as_array().cloned().unwrap_or_default();
    rows.iter()
        .map(|r| {
            (r["type"].as_str().unwrap_or("").into(), r["db_name"].as_str().unwrap_or("").into())
        })
        .collect()
}

#[test]
fn db_updates_reports_created_updated_and_deleted_databases() {
    let s = Server::start();
    let (_, start) = s.get("/_db_updates?since=now");
    let since = start["last_seq"].as_str().expect("last_seq").to_string();
    s.create_db("mailbox");
    s.put_doc("mailbox", "m1", &json!({"subject": "こんにちは"}));
    s.put_doc("mailbox", "m2", &json!({"subject": "again"}));
    s.create_db("trash");
    assert_eq!(s.delete("/trash").0, 200);
    let (status, feed) = s.get(&format!("/_db_updates?since={since}"));
    assert_eq!(status, 200, "{feed}");
    let expected: Vec<(String, String)> = [
        ("created", "mailbox"),
        ("updated", "mailbox"),
        ("created", "trash"),
        ("deleted", "trash"),
    ]
    .iter()
    .map(|(t, d)| (t.to_string(), d.to_string()))
    .collect();
    assert_eq!(events(&feed), expected, "one row per event and database, at its latest seq");
    let last = feed["last_seq"].as_str().expect("last_seq").to_string();
    assert_eq!(feed["results"][3]["seq"], last.as_str());

    // A longpoll feed answers at the next event.
    let waiting = std::thread::spawn({
        let url = s.url(&format!("/_db_updates?feed=longpoll&since={last}"));
        move || {
            let resp = crate::harness::client()
                .get(url)
                .basic_auth(crate::harness::ADMIN, Some(crate::harness::ADMIN_PASSWORD))
                .send()
                .expect("longpoll");
            crate::harness::body_json(resp)
        }
    });
    std::thread::sleep(std::time::Duration::from_millis(200));
    s.put_doc("mailbox", "m3", &json!({}));
    let feed = waiting.join().expect("longpoll thread");
    assert_eq!(events(&feed), [("updated".to_string(), "mailbox".to_string())]);

    let user = json!({"_id": "org.couchdb.user:bob", "name": "bob", "type": "user", "roles": [], "password": "pw"});
    assert_eq!(s.put("/_users/org.couchdb.user:bob", &user).0, 201);
    assert_eq!(send(s.user_req(Method::GET, "/_db_updates", "bob", "pw")).0, 401);
    assert_error(
        s.get("/_db_updates?feed=sideways"),
        400,
        "bad_request",
        "Supported `feed` types: normal, continuous, longpoll, eventsource",
    );
}

#[test]
fn uuids_follow_the_configured_algorithm() {
    let s = Server::start();
    let uuids = |count: u32| -> Vec<String> {
        let (status, body) = s.get(&format!("/_uuids?count={count}"));
        assert_eq!(status, 200, "{body}");
        body["uuids"]
            .as_array()
            .expect("uuids")
            .iter()
            .map(|u| u.as_str().unwrap_or("").to_string())
            .collect()
    };
    let set = |key: &str, value: &str| {
        let (status, _) = s.put(&format!("/_node/_local/_config/uuids/{key}"), &json!(value));
        assert_eq!(status, 200, "{key}={value}");
    };
    let seq = uuids(3);
    assert!(seq.windows(2).all(|w| w[0][..26] == w[1][..26] && w[0] < w[1]), "{seq:?}");
    set("algorithm", "utc_id");
    set("utc_id_suffix", "-bunko");
    let ids = uuids(10);
    assert!(ids.iter().all(|id| id.len() == 20 && id.ends_with("-bunko")), "{ids:?}");
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "utc_id ids strictly increase: {ids:?}");
    // Documents created without an id get one of the same kind.
    s.create_db("db");
    let (status, created) = s.post("/db", &json!({"a": 1}));
    assert_eq!(status, 201, "{created}");
    assert!(created["id"].as_str().is_some_and(|id| id.ends_with("-bunko")), "{created}");
    set("algorithm", "utc_random");
    let ids = uuids(2);
    assert!(ids.iter().all(|id| id.len() == 32 && id[..14] >= ids[0][..14]), "{ids:?}");
    set("algorithm", "random");
    let ids = uuids(2);
    assert!(ids[0].len() == 32 && ids[0][..26] != ids[1][..26], "{ids:?}");
    let (status, bad) = s.put("/_node/_local/_config/uuids/algorithm", &json!("dice"));
    assert_eq!((status, bad["error"].clone()), (400, json!("bad_request")), "{bad}");
    set("max_count", "5");
    assert_error(s.get("/_uuids?count=6"), 400, "bad_request", "count parameter too large");
    // CouchDB's cache-busting headers and an ETag.
    let resp = s.req(Method::GET, "/_uuids").send().expect("GET");
    let header = |name: &str| resp.headers().get(name).and_then(|v| v.to_str().ok());
    assert_eq!((header("cache-control"), header("pragma")), (Some("no-cache"), Some("no-cache")));
    assert_eq!(header("expires"), Some("Mon, 01 Jan 1990 00:00:00 GMT"));
    assert!(header("etag").is_some_and(|e| e.len() > 2 && e.starts_with('"')));
}

/// `COPY` as CouchDB 3.4.3 answers it (`copy_doc_test.exs`), attachments included; a
/// `POST` to a document is an HTML form upload, which Bunko refuses as CouchDB refuses
/// other content types.
#[test]
fn copy_writes_the_document_under_the_destination() {
    let s = Server::start();
    s.create_db("db");
    let att = json!({"cover.txt": {"content_type": "text/plain", "data": "5pu45bqr"}});
    s.put_doc("db", "b1", &json!({"title": "吾輩は猫である", "_attachments": att}));
    let copy = |from: &str, destination: Option<&str>| {
        let req = s.req(Method::from_bytes(b"COPY").expect("COPY"), &format!("/db/{from}"));
        let req = match destination {
            Some(d) => req.header("Destination", d),
            None => req,
        };
        req.send().expect("COPY")
    };
    let resp = copy("b1", Some("copy%20one"));
    assert_eq!(resp.status().as_u16(), 201);
    let location = resp.headers().get("location").and_then(|v| v.to_str().ok()).map(str::to_string);
    assert_eq!(location, Some(format!("{}/db/copy%20one", s.base())));
    let body: Value = resp.json().expect("json");
    assert_eq!((&body["ok"], &body["id"]), (&json!(true), &json!("copy one")));
    let copied = s.get_doc("db", "copy%20one");
    assert_eq!(copied["title"], "吾輩は猫である");
    let (_, text) = (0, s.req(Method::GET, "/db/copy%20one/cover.txt").send().expect("att"));
    assert_eq!(text.text().expect("body"), "書庫");
    let rev = s.put_doc("db", "b2", &json!({"v": 2}));
    assert_eq!(copy("b1", Some("b2")).status().as_u16(), 409);
    let resp = copy("b1", Some(&format!("b2?rev={rev}")));
    assert_eq!(resp.status().as_u16(), 201);
    assert_eq!(s.get_doc("db", "b2")["title"], "吾輩は猫である");
    let missing = copy("b1", None).json::<Value>().expect("json");
    assert_eq!(missing["reason"], "Destination header is mandatory for COPY.");
    let absolute = copy("b1", Some("http://localhost:5984/db/x")).json::<Value>().expect("json");
    assert_eq!(absolute["reason"], "Destination URL must be relative.");
    let underscore = copy("b1", Some("_invalid")).json::<Value>().expect("json");
    assert_eq!(underscore["reason"], "Only reserved document ids may start with underscore.");
    let form = s
        .req(Method::POST, "/db/baz")
        .header("Content-Type", "application/x-www-form-urlencoded")
        .header("Referer", format!("{}/db", s.base()));
    let refused = send(form.body("a=1"));
    assert_error(refused, 415, "bad_content_type", "Content-Type must be multipart/form-data");
    let patch = send(s.req(Method::PATCH, "/db/b1"));
    assert_error(patch, 405, "method_not_allowed", "Only DELETE,GET,HEAD,POST,PUT,COPY allowed");
}

#[test]
fn batch_ok_writes_are_accepted_at_once_and_land() {
    let s = Server::start();
    s.create_db("db");
    let (status, body) = s.put("/db/later?batch=ok", &json!({"note": "バッチ"}));
    assert_eq!((status, body), (202, json!({"ok": true, "id": "later"})));
    let (status, body) = s.post("/db?batch=ok", &json!({"note": "posted"}));
    assert_eq!(status, 202, "{body}");
    let id = body["id"].as_str().expect("id").to_string();
    assert_eq!(body, json!({"ok": true, "id": id}));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while s.get("/db/later").0 != 200 || s.get(&format!("/db/{id}")).0 != 200 {
        assert!(std::time::Instant::now() < deadline, "batch writes never landed");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(s.get_doc("db", "later")["note"], "バッチ");
    // Bad input is still refused at once, and changes nothing.
    let (status, _) = s.raw(Method::PUT, "/db/bad?batch=ok", "{not json");
    assert_eq!(status, 400);
}

#[test]
fn update_functions_save_what_they_return_and_answer_their_response() {
    let s = Server::start();
    s.create_db("db");
    let ddoc = json!({"updates": {
        "stamp": "function(doc, req) { if (!doc) { return [{_id: req.id || req.uuid, by: req.userCtx.name}, 'created']; } doc.count = (doc.count || 0) + 1; doc.note = req.query.note; return [doc, {json: {count: doc.count}}]; }",
        "echo": "function(doc, req) { return [null, {body: req.body + '/' + req.method, headers: {'Content-Type': 'text/plain', 'X-Test': 'yes'}}]; }",
        "refuse": "function(doc, req) { throw({forbidden: 'not today'}); }"
    }});
    s.put_doc("db", "_design/app", &ddoc);
    let resp = s.req(Method::POST, "/db/_design/app/_update/stamp/counter").send().expect("update");
    assert_eq!(resp.status(), 201);
    let rev = resp.headers()["x-couch-update-newrev"].to_str().expect("rev").to_string();
    assert_eq!(resp.headers()["x-couch-id"], "counter");
    assert!(resp.headers()["content-type"].to_str().is_ok_and(|t| t.starts_with("text/html")));
    assert_eq!(resp.text().expect("body"), "created");
    assert_eq!(s.get_doc("db", "counter"), json!({"_id": "counter", "_rev": rev, "by": "admin"}));
    let (status, body) = send(s.req(Method::PUT, "/db/_design/app/_update/stamp/counter?note=hi"));
    assert_eq!((status, body), (201, json!({"count": 1})));
    let doc = s.get_doc("db", "counter");
    assert_eq!((doc["count"].clone(), doc["note"].clone()), (json!(1), json!("hi")));
    // Without an id, the function gets null and req.uuid.
    let resp = s.req(Method::POST, "/db/_design/app/_update/stamp").send().expect("update");
    assert_eq!(resp.status(), 201);
    let new_id = resp.headers()["x-couch-id"].to_str().expect("id").to_string();
    assert_eq!(new_id.len(), 32);
    // Nothing to save: 200 with the function's body and headers.
    let resp =
        s.req(Method::POST, "/db/_design/app/_update/echo").body("ping").send().expect("echo");
    assert_eq!(
        (resp.status().as_u16(), resp.headers()["x-test"].to_str().ok()),
        (200, Some("yes"))
    );
    assert_eq!(resp.headers()["content-type"], "text/plain");
    assert_eq!(resp.text().expect("body"), "ping/POST");
    assert_error(
        send(s.req(Method::POST, "/db/_design/app/_update/refuse/x")),
        403,
        "forbidden",
        "not today",
    );
    assert_error(
        send(s.req(Method::POST, "/db/_design/app/_update/nope")),
        404,
        "not_found",
        "missing json key: nope",
    );
    assert_eq!(s.get("/db/x").0, 404, "a refusal writes nothing");
}

/// `_update/{name}/` is the function without a document id, `_update/` names no function,
/// and a returned document without `_id` is refused, as CouchDB 3.4.3 answers them
/// (`update_documents_test.exs`).
#[test]
fn update_paths_without_a_name_or_an_id() {
    let s = Server::start();
    s.create_db("db");
    let ddoc = json!({"updates": {
        "get-uuid": "function(doc, req) { return [null, req.uuid]; }",
        "empty": "function(doc, req) { return [{}, 'oops']; }"
    }});
    s.put_doc("db", "_design/app", &ddoc);
    let resp = s.req(Method::PUT, "/db/_design/app/_update/get-uuid/").send().expect("update");
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.text().expect("body").len(), 32);
    for path in ["/db/_design/app/_update/", "/db/_design/app/_update"] {
        let none = send(s.req(Method::POST, path));
        assert_error(none, 404, "update_error", "Invalid path.");
    }
    let empty = send(s.req(Method::PUT, "/db/_design/app/_update/empty/foo"));
    assert_error(empty, 400, "illegal_docid", "Document id must not be empty");
}
