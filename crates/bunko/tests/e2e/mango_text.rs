//! Mango `text` indexes (issue 17): `POST /{db}/_index` with `"type": "text"`, `$text`
//! and ordinary operators answered by the index, sort, bookmarks, `_explain`, partitions,
//! edits and deletes, and the write gate on index creation. Shapes and errors follow
//! CouchDB 3.4 (`src/mango/src/mango_idx_text.erl`, `mango_cursor_text.erl`,
//! `mango_selector_text.erl`, `mango_error.erl` and `src/mango/test/06-…`, `09-…`).
//! Data: the books and authors of the Cosmos DB modeling guide and the IoT readings of
//! the Cloudant partitioning guide (the seeds).

use reqwest::Method;
use serde_json::{Value, json};

use crate::harness::{Server, assert_error, send};

fn find(s: &Server, path: &str, body: Value) -> Value {
    let (status, out) = s.post(path, &body);
    assert_eq!(status, 200, "{path} {body} -> {out}");
    out
}

fn ids(out: &Value) -> Vec<String> {
    let mut ids: Vec<String> = out["docs"]
        .as_array()
        .map(|d| d.iter().filter_map(|d| d["_id"].as_str().map(String::from)).collect())
        .unwrap_or_default();
    ids.sort();
    ids
}

fn bulk(s: &Server, db: &str, docs: Vec<Value>) {
    let (status, body) = s.post(&format!("/{db}/_bulk_docs"), &json!({"docs": docs}));
    assert_eq!(status, 201, "{body}");
}

/// The books and authors of the modeling guide (references both ways), with the year
/// each book came out.
fn library(s: &Server) {
    s.create_db("library");
    let books = [
        ("b1", "Azure Cosmos DB 101", ["a1", "a2"].as_slice(), 2016),
        ("b2", "Azure Cosmos DB for RDBMS Users", &["a1"], 2017),
        ("b3", "Learn about Azure Cosmos DB", &["a1"], 2018),
        ("b4", "Deep Dive in to Azure Cosmos DB", &["a2"], 2019),
        ("b5", "Taking over the world one JSON doc at a time", &["a2"], 2015),
    ];
    let mut docs: Vec<Value> = books
        .iter()
        .map(|(id, name, authors, year)| {
            json!({"_id": id, "type": "book", "name": name, "authors": authors, "year": year,
                "pub-id": "mspress"})
        })
        .collect();
    docs.push(json!({"_id": "a1", "type": "author", "name": "Thomas Andersen",
        "books": ["b1", "b2", "b3"]}));
    docs.push(json!({"_id": "a2", "type": "author", "name": "William Wakefield",
        "books": ["b1", "b4"]}));
    bulk(s, "library", docs);
}

#[test]
fn a_text_index_is_created_listed_queried_and_deleted() {
    let s = Server::start();
    library(&s);
    let (_, root) = s.get("/");
    assert!(root["features"].as_array().is_some_and(|f| f.contains(&json!("search"))), "{root}");
    let (status, out) = s.post(
        "/library/_index",
        &json!({"index": {}, "type": "text",
        "name": "everything", "ddoc": "text"}),
    );
    assert_eq!((status, &out["result"]), (200, &json!("created")), "{out}");
    assert_eq!(out["id"], "_design/text");
    let (_, again) = s.post(
        "/library/_index",
        &json!({"index": {}, "type": "text", "name": "everything",
            "ddoc": "text"}),
    );
    assert_eq!(again["result"], "exists");
    // Stored as CouchDB stores it: language `query`, `indexes` with the options and the
    // `perfield` analyzer.
    let ddoc = s.get_doc("library", "_design/text");
    assert_eq!(ddoc["language"], "query");
    assert_eq!(ddoc["indexes"]["everything"]["index"]["fields"], "all_fields");
    assert_eq!(
        ddoc["indexes"]["everything"]["analyzer"],
        json!({"name": "perfield", "default": "keyword", "fields": {"$default": "standard"}})
    );
    let (_, list) = s.get("/library/_index");
    assert_eq!(list["total_rows"], 2);
    assert_eq!(
        list["indexes"][1],
        json!({"ddoc": "_design/text", "name": "everything", "type": "text", "partitioned": false,
            "def": {"default_analyzer": "keyword", "default_field": {}, "selector": {},
                "fields": [], "index_array_lengths": true}})
    );
    // `$text` searches every string (standard analyzer: words, any case).
    let out = find(&s, "/library/_find", json!({"selector": {"$text": "cosmos"}}));
    assert_eq!(ids(&out), ["b1", "b2", "b3", "b4"]);
    assert!(out.get("warning").is_none(), "{out}");
    // Ordinary operators are answered by the same index (keyword: exact strings).
    let out = find(&s, "/library/_find", json!({"selector": {"name": "Thomas Andersen"}}));
    assert_eq!(ids(&out), ["a1"]);
    let out =
        find(&s, "/library/_find", json!({"selector": {"$text": "azure", "year": {"$lt": 2018}}}));
    assert_eq!(ids(&out), ["b1", "b2"]);
    let either = json!({"$or": [{"$text": "deep"}, {"authors": {"$elemMatch": {"$eq": "a1"}}}]});
    assert_eq!(
        ids(&find(&s, "/library/_find", json!({"selector": either}))),
        ["b1", "b2", "b3", "b4"]
    );
    let out = find(&s, "/library/_find", json!({"selector": {"books": {"$size": 2}}}));
    assert_eq!(ids(&out), ["a2"]);
    let out = find(&s, "/library/_find", json!({"selector": {"year": {"$exists": false}}}));
    assert_eq!(ids(&out), ["a1", "a2"]);
    let (status, _) = s.delete("/library/_index/_design/text/text/nope");
    assert_eq!(status, 404);
    let (status, out) = s.delete("/library/_index/text/text/everything");
    assert_eq!((status, out), (200, json!({"ok": true})));
    let (_, list) = s.get("/library/_index");
    assert_eq!(list["total_rows"], 1);
    // `_bulk_delete` removes every index of a design document, text ones too.
    let index = json!({"index": {}, "type": "text", "name": "again", "ddoc": "again"});
    assert_eq!(s.post("/library/_index", &index).0, 200);
    let (status, out) = s.post("/library/_index/_bulk_delete", &json!({"docids": ["again"]}));
    assert_eq!(
        (status, out),
        (
            200,
            json!({"success": [{"id": "_design/again", "ok": true}],
        "fail": []})
        )
    );
    let (_, list) = s.get("/library/_index");
    assert_eq!(list["total_rows"], 1);
    // Without a text index CouchDB answers `$text` from all documents (its matcher trusts
    // the index, so every document matches) and warns that no index was used.
    let out = find(&s, "/library/_find", json!({"selector": {"$text": "cosmos"}}));
    assert_eq!(ids(&out).len(), 7);
    assert!(out["warning"].as_str().is_some_and(|w| w.contains("No matching index")), "{out}");
}

#[test]
fn sort_limit_skip_and_bookmarks_page_through_a_text_index() {
    let s = Server::start();
    library(&s);
    let (status, _) = s.post("/library/_index", &json!({"index": {}, "type": "text"}));
    assert_eq!(status, 200);
    let q = |extra: Value| {
        let mut body = json!({"selector": {"type": "book"}});
        if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
            b.extend(e.clone());
        }
        find(&s, "/library/_find", body)
    };
    let names = |out: &Value| -> Vec<i64> {
        out["docs"]
            .as_array()
            .map(|d| d.iter().filter_map(|d| d["year"].as_i64()).collect())
            .unwrap_or_default()
    };
    assert_eq!(names(&q(json!({"sort": ["year:number"]}))), [2015, 2016, 2017, 2018, 2019]);
    assert_eq!(
        names(&q(json!({"sort": [{"year:number": "desc"}]}))),
        [2019, 2018, 2017, 2016, 2015]
    );
    // Without `:number` the selector must tell the type: here it does not.
    let (status, err) =
        s.post("/library/_find", &json!({"selector": {"type": "book"}, "sort": ["year"]}));
    assert_eq!((status, &err["error"]), (400, &json!("text_sort_error")), "{err}");
    let typed = json!({"selector": {"year": {"$gt": 0}}, "sort": ["year"], "limit": 2,
        "fields": ["_id", "year"]});
    let out = find(&s, "/library/_find", typed);
    assert_eq!(out["docs"], json!([{"_id": "b5", "year": 2015}, {"_id": "b1", "year": 2016}]));
    let out = q(json!({"sort": ["name:string"], "skip": 1, "limit": 1, "fields": ["name"]}));
    assert_eq!(out["docs"], json!([{"name": "Azure Cosmos DB for RDBMS Users"}]));
    // Bookmarks continue where the previous page stopped, until an empty page.
    let mut seen = Vec::new();
    let mut bookmark = Value::Null;
    loop {
        let mut body = json!({"selector": {"type": "book"}, "sort": ["year:number"], "limit": 2});
        if !bookmark.is_null() {
            body["bookmark"] = bookmark.clone();
        }
        let out = find(&s, "/library/_find", body);
        let page = names(&out);
        if page.is_empty() {
            break;
        }
        assert_ne!(out["bookmark"], bookmark);
        seen.extend(page);
        bookmark = out["bookmark"].clone();
    }
    assert_eq!(seen, [2015, 2016, 2017, 2018, 2019]);
    let (status, err) = s.post(
        "/library/_find",
        &json!({"selector": {"type": "book"},
        "bookmark": "not-a-bookmark"}),
    );
    assert_eq!((status, &err["error"]), (400, &json!("invalid_bookmark")), "{err}");
}

#[test]
fn explain_shows_the_text_index_and_its_lucene_query() {
    let s = Server::start();
    library(&s);
    let fields = json!([{"name": "name", "type": "string"}, {"name": "year", "type": "number"}]);
    let index =
        json!({"index": {"fields": fields}, "type": "text", "name": "books", "ddoc": "books"});
    assert_eq!(s.post("/library/_index", &index).0, 200);
    let (status, out) = s.post(
        "/library/_explain",
        &json!({"selector": {"$text": "Cosmos",
        "year": {"$gte": 2017}}, "sort": ["year:number"]}),
    );
    assert_eq!(status, 200, "{out}");
    assert_eq!(out["index"]["type"], "text");
    assert_eq!(out["index"]["name"], "books");
    assert_eq!(out["index"]["def"]["fields"], json!([{"name": "string"}, {"year": "number"}]));
    assert_eq!(out["query"], "(($default:\"Cosmos\") AND (year_3anumber:[2017 TO *]))");
    assert_eq!(out["sort"], json!(["year_3anumber<number>"]));
    assert_eq!(out["partition"], Value::Null);
    assert_eq!(out["selector_hints"][1]["type"], "text");
    assert_eq!(out["selector_hints"][1]["indexable_fields"], json!(["$default", "year"]));
    let out = find(
        &s,
        "/library/_find",
        json!({"selector": {"$text": "Cosmos",
        "year": {"$gte": 2017}}, "sort": ["year:number"], "fields": ["_id"]}),
    );
    assert_eq!(out["docs"], json!([{"_id": "b2"}, {"_id": "b3"}, {"_id": "b4"}]));
    // A field the index does not list cannot be searched with it.
    let (_, out) = s.post("/library/_explain", &json!({"selector": {"type": "book"}}));
    assert_eq!(out["index"]["name"], "_all_docs");
    assert_eq!(
        out["index_candidates"][0]["analysis"]["reasons"],
        json!([{"name": "field_mismatch"}])
    );
}

#[test]
fn edits_and_deletes_leave_the_results_of_a_text_index() {
    let s = Server::start();
    library(&s);
    assert_eq!(s.post("/library/_index", &json!({"index": {}, "type": "text"})).0, 200);
    let search =
        |word: &str| ids(&find(&s, "/library/_find", json!({"selector": {"$text": word}})));
    assert_eq!(search("wakefield"), ["a2"]);
    let mut doc = s.get_doc("library", "a2");
    doc["name"] = json!("William Wakefield-Smith");
    assert_eq!(s.put("/library/a2", &doc).0, 201);
    assert_eq!(search("smith"), ["a2"]);
    let rev = s.get_doc("library", "b5")["_rev"].as_str().unwrap_or_default().to_string();
    assert_eq!(s.delete(&format!("/library/b5?rev={rev}")).0, 200);
    assert!(search("json").is_empty());
    // After a crash the index resumes from its checkpoint and takes new documents.
    let mut s = s;
    s.kill9();
    s.restart();
    s.put_doc("library", "a3", &json!({"type": "author", "name": "Ann Smith"}));
    let smiths = ids(&find(&s, "/library/_find", json!({"selector": {"$text": "smith"}})));
    assert_eq!(smiths, ["a2", "a3"]);
}

/// The IoT walkthrough: readings partitioned by bridge, with a partitioned text index.
#[test]
fn a_partitioned_text_index_answers_partition_queries() {
    let s = Server::start();
    assert_eq!(s.put_empty("/readings?partitioned=true").0, 201);
    let mut docs = Vec::new();
    for bridge in ["bridge-9876", "bridge-1234"] {
        for n in 0..4 {
            docs.push(json!({
                "_id": format!("{bridge}:device-12345{n}-20181211T11:13:24.123456Z"),
                "deviceID": format!("device-12345{n}"),
                "infrastructureID": bridge,
                "note": if n % 2 == 0 { "vibration high on the north span" } else { "normal" },
                "reading": {"temperature": {"value": 10 + n, "unit": "c"}}
            }));
        }
    }
    bulk(&s, "readings", docs);
    let (status, out) = s.post(
        "/readings/_index",
        &json!({"index": {}, "type": "text",
        "name": "notes", "ddoc": "notes"}),
    );
    assert_eq!(status, 200, "{out}");
    let (_, list) = s.get("/readings/_index");
    assert_eq!(list["indexes"][1]["partitioned"], true);
    let path = "/readings/_partition/bridge-9876/_find";
    let out = find(
        &s,
        path,
        json!({"selector": {"$text": "vibration",
        "reading.temperature.value": {"$gt": 10}}}),
    );
    assert_eq!(ids(&out), ["bridge-9876:device-123452-20181211T11:13:24.123456Z"]);
    let out = find(
        &s,
        path,
        json!({"selector": {"note": "normal"},
        "sort": [{"reading.temperature.value:number": "desc"}], "fields": ["deviceID"]}),
    );
    assert_eq!(out["docs"], json!([{"deviceID": "device-123453"}, {"deviceID": "device-123451"}]));
    let (_, explain) = s.post(
        "/readings/_partition/bridge-9876/_explain",
        &json!({"selector": {"$text": "normal"}}),
    );
    assert_eq!(
        (&explain["index"]["name"], &explain["partition"]),
        (&json!("notes"), &json!("bridge-9876"))
    );
    // A global query cannot use the partitioned index.
    let (_, explain) = s.post("/readings/_explain", &json!({"selector": {"note": "normal"}}));
    assert_eq!(explain["index"]["name"], "_all_docs");
}

#[test]
fn creating_a_text_index_is_a_design_document_write_for_admins_only() {
    let s = Server::start();
    library(&s);
    let user = json!({"_id": "org.couchdb.user:bob", "name": "bob", "type": "user", "roles": [],
        "password": "pw"});
    assert_eq!(s.put("/_users/org.couchdb.user:bob", &user).0, 201);
    let security = json!({"admins": {"names": []}, "members": {"names": ["bob"]}});
    assert_eq!(s.put("/library/_security", &security).0, 200);
    let body = json!({"index": {}, "type": "text"});
    let (status, out) = send(s.user_req(Method::POST, "/library/_index", "bob", "pw").json(&body));
    assert_eq!((status, &out["error"]), (403, &json!("forbidden")), "{out}");
    let (_, list) = s.get("/library/_index");
    assert_eq!(list["total_rows"], 1, "nothing was created");
    assert_error(
        s.post("/library/_index", &json!({"index": [], "type": "text"})),
        400,
        "invalid_index",
        "Text indexes must be an object, not: []",
    );
    assert_error(
        s.post("/library/_index", &json!({"index": {"analyzer": "standard"}, "type": "text"})),
        400,
        "invalid_key",
        "Invalid key analyzer for this request.",
    );
    let bad = json!({"index": {"fields": [{"name": "", "type": "string"}]}, "type": "text"});
    let (status, out) = s.post("/library/_index", &bad);
    assert_eq!((status, &out["error"]), (400, &json!("invalid_index_fields_definition")));
    // A member may query with the index the admin made.
    assert_eq!(s.post("/library/_index", &body).0, 200);
    let q = json!({"selector": {"$text": "Andersen"}});
    let (status, out) = send(s.user_req(Method::POST, "/library/_find", "bob", "pw").json(&q));
    assert_eq!((status, ids(&out)), (200, vec!["a1".to_string()]));
}
