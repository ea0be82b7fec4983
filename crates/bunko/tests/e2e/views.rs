//! Design-document views: the IoT walkthrough of the Cloudant guide (global `by-device`
//! view), linked documents, reducers with rereduce, group levels, updates and deletes,
//! `update=false`, a throwing map function, partitioned views and restart. Expected
//! answers follow CouchDB 3.4 (`test/elixir/test/view_*.exs`, `reduce*.exs`,
//! `partition_view*_test.exs`).

use reqwest::Method;
use serde_json::{Value, json};

use crate::harness::{Server, assert_error, enc, send};

/// `path` with `?name=<JSON>` parameters, percent-encoded.
fn q(path: &str, params: &[(&str, Value)]) -> String {
    let query: Vec<String> = params
        .iter()
        .map(|(name, v)| {
            let text = match v {
                Value::Bool(b) => b.to_string(),
                Value::Number(n) => n.to_string(),
                other => other.to_string(),
            };
            format!("{name}={}", enc(&text))
        })
        .collect();
    format!("{path}?{}", query.join("&"))
}

fn keys(rows: &Value) -> Vec<Value> {
    rows["rows"]
        .as_array()
        .map(|r| r.iter().map(|r| r["key"].clone()).collect())
        .unwrap_or_default()
}

fn bulk(s: &Server, db: &str, docs: Vec<Value>) {
    let (status, body) = s.post(&format!("/{db}/_bulk_docs"), &json!({"docs": docs}));
    assert_eq!(status, 201, "{body}");
}

#[test]
fn iot_by_device_view_with_keys_and_limit() {
    let s = Server::start();
    assert_eq!(s.put_empty("/readings").0, 201);
    let mut docs = Vec::new();
    for d in 0..3 {
        for t in 0..3 {
            docs.push(json!({"_id": format!("r-{d}-{t}"), "deviceID": format!("device-12345{d}"),
                             "infrastructureID": format!("bridge-{d}"), "ts": t}));
        }
    }
    bulk(&s, "readings", docs);
    let ddoc = json!({"views": {"by-device": {
        "map": "function(doc) { emit(doc.deviceID, doc.infrastructureID) }"}}});
    assert_eq!(s.put("/readings/_design/devices", &ddoc).0, 201);
    let (status, body) = s.get(&q(
        "/readings/_design/devices/_view/by-device",
        &[("keys", json!(["device-123451"])), ("limit", json!(1))],
    ));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["total_rows"], 9);
    assert_eq!(body["rows"], json!([{"id": "r-1-0", "key": "device-123451", "value": "bridge-1"}]));
    // `keys` with a range or `key` is refused, as CouchDB 3.4.3 refuses it
    // (`view_multi_key_design_test.exs`).
    let incompatible = "`keys` is incompatible with `key`, `start_key` and `end_key`";
    for range in ["startkey", "endkey", "key"] {
        let path = "/readings/_design/devices/_view/by-device";
        let req = s.req(Method::POST, &q(path, &[(range, json!(0))]));
        let refused = send(req.json(&json!({"keys": ["device-123451"]})));
        assert_error(refused, 400, "query_parse_error", incompatible);
    }
    let (_, all) = s.get("/readings/_design/devices/_view/by-device");
    assert_eq!(all["rows"].as_array().map(Vec::len), Some(9));
    assert_eq!(all["offset"], 0);
    let (_, range) = s.get(&q(
        "/readings/_design/devices/_view/by-device",
        &[("startkey", json!("device-123451")), ("descending", json!(true)), ("skip", json!(1))],
    ));
    assert_eq!(range["rows"].as_array().map(Vec::len), Some(5), "{range}");
    assert_eq!(range["rows"][0]["id"], "r-1-1");
    assert_eq!(range["offset"], 4, "rows after the start key, plus the skipped row");
    let (_, posted) = s.post(
        "/readings/_design/devices/_view/by-device",
        &json!({"keys": ["device-123452", "device-123450"], "limit": 4}),
    );
    assert_eq!(
        keys(&posted),
        vec![json!("device-123452"); 3]
            .into_iter()
            .chain([json!("device-123450")])
            .collect::<Vec<_>>()
    );
    let (status, multi) = s.post(
        "/readings/_design/devices/_view/by-device/queries",
        &json!({"queries": [{"limit": 1}, {"key": "device-123452", "skip": 2}]}),
    );
    assert_eq!(status, 200, "{multi}");
    assert_eq!(multi["results"][0]["rows"].as_array().map(Vec::len), Some(1));
    assert_eq!(multi["results"][1]["offset"], 8);
    assert_eq!(multi["results"][1]["rows"][0]["id"], "r-2-2");
    let (status, missing) = s.get("/readings/_design/devices/_view/nope");
    assert_eq!((status, missing["reason"].clone()), (404, json!("missing_named_view")));
}

#[test]
fn linked_documents_and_include_docs() {
    let s = Server::start();
    assert_eq!(s.put_empty("/shop").0, 201);
    bulk(
        &s,
        "shop",
        vec![
            json!({"_id": "pub-1", "type": "publisher", "name": "O'Reilly"}),
            json!({"_id": "book-1", "type": "book", "title": "Rust", "pub_id": "pub-1"}),
            json!({"_id": "book-2", "type": "book", "title": "Go", "pub_id": "pub-missing"}),
        ],
    );
    let ddoc = json!({"views": {"with_pub": {"map":
        "function(doc) { if (doc.type == 'book') { emit([doc._id, 0], null); emit([doc._id, 1], {_id: doc.pub_id}); } }"}}});
    assert_eq!(s.put("/shop/_design/links", &ddoc).0, 201);
    let (status, body) = s.get("/shop/_design/links/_view/with_pub?include_docs=true");
    assert_eq!(status, 200, "{body}");
    let rows = body["rows"].as_array().cloned().unwrap_or_default();
    assert_eq!(rows.len(), 4);
    assert_eq!(rows[0]["doc"]["title"], "Rust");
    assert_eq!(rows[1]["id"], "book-1", "the row keeps the emitting document's id");
    assert_eq!(rows[1]["doc"]["name"], "O'Reilly", "the linked document replaces it");
    assert_eq!(rows[2]["doc"]["title"], "Go");
    assert_eq!(rows[3]["doc"], Value::Null, "a missing linked document is null");
}

/// An emitted `{"_rev": …}` without `_id` loads that revision of the emitting document,
/// as CouchDB's `couch_mrview_util:docid_rev` (`view_include_docs_test.exs`).
#[test]
fn an_emitted_rev_alone_loads_that_revision_of_the_emitting_document() {
    let s = Server::start();
    assert_eq!(s.put_empty("/shoko").0, 201);
    let first = s.put_doc("shoko", "0", &json!({"title": "吾輩は猫である", "integer": 0}));
    let edit = json!({"_rev": first, "title": "吾輩は猫である", "integer": 100, "prev": first});
    let second = s.put_doc("shoko", "0", &edit);
    let map = "function(doc) { if (doc.prev) emit(doc._id, {'_rev': doc.prev}); \
               else emit(doc._id, {'_rev': doc._rev}); }";
    assert_eq!(s.put("/shoko/_design/test", &json!({"views": {"with_prev": {"map": map}}})).0, 201);
    let (_, body) = s.get("/shoko/_design/test/_view/with_prev?include_docs=true");
    let doc = &body["rows"][0]["doc"];
    assert_eq!(doc["_rev"], json!(first), "{body}");
    assert_eq!((doc["integer"].clone(), doc.get("prev")), (json!(0), None));
    assert_ne!(first, second);
}

/// `keys` queries take `startkey_docid`/`endkey_docid` for every key, as CouchDB's
/// `couch_mrview_util:key_opts` (`view_multi_key_design_test.exs`).
#[test]
fn keys_are_bounded_by_startkey_docid_and_endkey_docid() {
    let s = Server::start();
    assert_eq!(s.put_empty("/shoko").0, 201);
    let docs = (0..30).map(|i| json!({"_id": i.to_string(), "integer": i})).collect();
    bulk(&s, "shoko", docs);
    let map = "function(doc) { emit(0, doc.integer); emit(1, doc.integer); emit(2, doc.integer); }";
    assert_eq!(
        s.put("/shoko/_design/test", &json!({"views": {"multi_emit": {"map": map}}})).0,
        201
    );
    let view = "/shoko/_design/test/_view/multi_emit";
    let rows = |body: &Value| -> Vec<(Value, Value)> {
        let rows = body["rows"].as_array().cloned().unwrap_or_default();
        rows.iter().map(|r| (r["key"].clone(), r["value"].clone())).collect()
    };
    let want: Vec<(Value, Value)> = [(0, 21), (0, 22), (0, 23), (2, 21), (2, 22), (2, 23)]
        .map(|(k, v)| (json!(k), json!(v)))
        .into();
    let bounds = "startkey_docid=21&endkey_docid=23";
    let (_, posted) = s.post(&format!("{view}?{bounds}"), &json!({"keys": [0, 2]}));
    assert_eq!(rows(&posted), want, "{posted}");
    let (_, got) = s.get(&format!("{view}?{bounds}&keys=%5B0,2%5D"));
    assert_eq!(rows(&got), want, "{got}");
    let (_, got) = s.get(&format!("{view}?skip=2&limit=3&startkey_docid=13&keys=%5B0%5D"));
    assert_eq!(rows(&got), [15, 16, 17].map(|v| (json!(0), json!(v))).to_vec(), "{got}");
    let (_, got) =
        s.get(&format!("{view}?descending=true&startkey_docid=27&endkey_docid=25&keys=%5B1%5D"));
    assert_eq!(rows(&got), [27, 26, 25].map(|v| (json!(1), json!(v))).to_vec(), "{got}");
}

/// Raw collation is a view's own option (`"options": {"collation": "raw"}` in the view,
/// CouchDB's `couch_mrview_util:maybe_define_less_fun`): that view sorts in Erlang term
/// order while its neighbour keeps CouchDB's collation (`view_collation_raw_test.exs`).
#[test]
fn raw_collation_is_a_views_own_option() {
    let s = Server::start();
    assert_eq!(s.put_empty("/shoko").0, 201);
    let keys = [json!("b"), json!("B"), json!(1), json!(null), json!({"a": 1}), json!(["a"])];
    let docs =
        keys.iter().enumerate().map(|(i, k)| json!({"_id": i.to_string(), "k": k})).collect();
    bulk(&s, "shoko", docs);
    let map = "function(doc) { emit(doc.k, null); }";
    let ddoc = json!({"views": {
        "raw": {"map": map, "options": {"collation": "raw"}},
        "plain": {"map": map}
    }});
    assert_eq!(s.put("/shoko/_design/c", &ddoc).0, 201);
    let order = |path: &str| -> Vec<Value> {
        let (_, body) = s.get(path);
        body["rows"].as_array().into_iter().flatten().map(|r| r["key"].clone()).collect()
    };
    let raw = [json!(1), json!(null), json!({"a": 1}), json!(["a"]), json!("B"), json!("b")];
    assert_eq!(order("/shoko/_design/c/_view/raw"), raw);
    let plain = [json!(null), json!(1), json!("b"), json!("B"), json!(["a"]), json!({"a": 1})];
    assert_eq!(order("/shoko/_design/c/_view/plain"), plain);
    // Ranges and `inclusive_end` follow the view's own order.
    let range = "/shoko/_design/c/_view/raw?startkey=%22B%22&endkey=%22b%22&inclusive_end=false";
    assert_eq!(order(range), [json!("B")]);
}

#[test]
fn reducers_rereduce_and_group_levels() {
    let s = Server::start();
    assert_eq!(s.put_empty("/sales").0, 201);
    let docs: Vec<Value> = (0..1200)
        .map(|i| json!({"_id": format!("s{i:04}"), "date": [2020 + i % 3, 1 + i % 12, 1 + i % 28], "amount": i % 10}))
        .collect();
    bulk(&s, "sales", docs);
    let ddoc = json!({"views": {
        "count": {"map": "function(doc) { emit(doc.date, doc.amount); }", "reduce": "_count"},
        "sum": {"map": "function(doc) { emit(doc.date, doc.amount); }", "reduce": "_sum"},
        "stats": {"map": "function(doc) { emit(doc.date, doc.amount); }", "reduce": "_stats"},
        "js": {"map": "function(doc) { emit(doc.date, doc.amount); }",
               "reduce": "function(keys, values, rereduce) { return sum(values); }"},
        "jscount": {"map": "function(doc) { emit(doc.date, doc.amount); }",
               "reduce": "function(keys, values, rereduce) { return rereduce ? sum(values) : values.length; }"}
    }});
    assert_eq!(s.put("/sales/_design/r", &ddoc).0, 201);
    let total: i64 = (0..1200).map(|i| i % 10).sum();
    let value = |view: &str, extra: &str| s.get(&format!("/sales/_design/r/_view/{view}{extra}")).1;
    assert_eq!(value("count", "")["rows"], json!([{"key": null, "value": 1200}]));
    assert_eq!(value("sum", "")["rows"][0]["value"], total);
    assert_eq!(value("js", "")["rows"][0]["value"], total);
    assert_eq!(
        value("jscount", "")["rows"][0]["value"],
        1200,
        "rereduce must combine partial counts"
    );
    let stats = value("stats", "");
    assert_eq!(stats["rows"][0]["value"]["count"], 1200);
    assert_eq!(stats["rows"][0]["value"]["max"], 9);
    let level1 = value("count", "?group_level=1");
    assert_eq!(
        level1["rows"],
        json!([{"key": [2020], "value": 400}, {"key": [2021], "value": 400}, {"key": [2022], "value": 400}])
    );
    let level2 = value("count", "?group_level=2&limit=2");
    assert_eq!(keys(&level2), vec![json!([2020, 1]), json!([2020, 4])]);
    let exact = value("count", "?group=true");
    assert!(exact["rows"].as_array().is_some_and(|r| r.len() > 12));
    let map_only = value("count", "?reduce=false&limit=1");
    assert_eq!(map_only["total_rows"], 1200);
    assert_error(
        s.get("/sales/_design/r/_view/count?include_docs=true"),
        400,
        "query_parse_error",
        "`include_docs` is invalid for reduce",
    );
    // Several keys need `group=true` (CouchDB 3.4.3 refuses them otherwise); one key is a
    // `key` query and reduces to one row.
    let two_keys = ("keys", json!([[2020, 1, 1], [2021, 2, 2]]));
    assert_error(
        s.get(&q("/sales/_design/r/_view/count", std::slice::from_ref(&two_keys))),
        400,
        "query_parse_error",
        "Multi-key fetches for reduce views must use `group=true`",
    );
    let (_, grouped) =
        s.get(&q("/sales/_design/r/_view/count", &[two_keys, ("group", json!(true))]));
    let grouped_keys: Vec<&Value> =
        grouped["rows"].as_array().into_iter().flatten().map(|r| &r["key"]).collect();
    assert_eq!(grouped_keys, [&json!([2020, 1, 1]), &json!([2021, 2, 2])], "{grouped}");
    let one_key = ("keys", json!([[2020, 1, 1]]));
    let (_, one) = s.get(&q("/sales/_design/r/_view/count", &[one_key]));
    assert_eq!(one["rows"][0]["key"], Value::Null, "{one}");
    assert_error(
        s.get("/sales/_design/r/_view/count?group=false&group_level=1"),
        400,
        "query_parse_error",
        "Can't specify group=false and group_level>0 at the same time",
    );
}

#[test]
fn updates_and_deletes_are_reflected_and_update_false_reads_stale() {
    let s = Server::start();
    assert_eq!(s.put_empty("/db").0, 201);
    let ddoc =
        json!({"views": {"by_v": {"map": "function(doc) { if (doc.v) emit(doc.v, null); }"}}});
    assert_eq!(s.put("/db/_design/d", &ddoc).0, 201);
    let rev = s.put_doc("db", "a", &json!({"v": 1}));
    s.put_doc("db", "b", &json!({"v": 2}));
    let (_, body) = s.get("/db/_design/d/_view/by_v");
    assert_eq!(keys(&body), vec![json!(1), json!(2)]);
    let rev = s.put_doc("db", "a", &json!({"_rev": rev, "v": 3}));
    let (_, body) = s.get("/db/_design/d/_view/by_v");
    assert_eq!(keys(&body), vec![json!(2), json!(3)]);
    assert_eq!(s.delete(&format!("/db/a?rev={rev}")).0, 200);
    let (_, body) = s.get("/db/_design/d/_view/by_v?update_seq=true");
    assert_eq!(keys(&body), vec![json!(2)]);
    assert_eq!(body["total_rows"], 1);
    assert!(body["update_seq"].is_string());
    // A new view over existing documents is empty with update=false until it is built.
    let ddoc2 = json!({"views": {"x": {"map": "function(doc) { if (doc.v) emit(doc._id, 1); }"}}, "options": {"local_seq": true}});
    assert_eq!(s.put("/db/_design/e", &ddoc2).0, 201);
    let (status, _) = s.get("/db/_design/e/_view/x?update=false");
    assert_eq!(status, 200);
    let (_, fresh) = s.get("/db/_design/e/_view/x");
    assert_eq!(keys(&fresh), vec![json!("b")]);
    let (status, info) = s.get("/db/_design/e/_info");
    assert_eq!(status, 200);
    assert_eq!(info["name"], "e");
    assert!(info["view_index"]["signature"].as_str().is_some_and(|s| s.len() == 32));
}

#[test]
fn throwing_map_function_skips_the_document_and_bad_js_is_refused() {
    let s = Server::start();
    assert_eq!(s.put_empty("/db").0, 201);
    bulk(&s, "db", vec![json!({"_id": "ok", "n": 1}), json!({"_id": "bad"})]);
    let ddoc = json!({"views": {"v": {"map": "function(doc) { if (!doc.n) throw new Error('no n'); emit(doc.n, null); }"}}});
    assert_eq!(s.put("/db/_design/t", &ddoc).0, 201);
    let (status, body) = s.get("/db/_design/t/_view/v");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["rows"], json!([{"id": "ok", "key": 1, "value": null}]));
    let (status, body) = s.put(
        "/db/_design/broken",
        &json!({"views": {"v": {"map": "function(doc) { emit(doc._id"}}}),
    );
    assert_eq!((status, body["error"].clone()), (400, json!("compilation_error")), "{body}");
}

#[test]
fn partitioned_views_are_queried_per_partition() {
    let s = Server::start();
    assert_eq!(s.put_empty("/iot?partitioned=true").0, 201);
    let mut docs = Vec::new();
    for p in ["bridge-1", "bridge-2"] {
        for d in 0..3 {
            docs.push(json!({"_id": format!("{p}:device-{d}"), "deviceID": format!("device-{d}"), "t": d}));
        }
    }
    bulk(&s, "iot", docs);
    let part = json!({"views": {"by_t": {"map": "function(doc) { emit(doc.t, doc.deviceID); }", "reduce": "_count"}}});
    assert_eq!(s.put("/iot/_design/p", &part).0, 201);
    let global = json!({"options": {"partitioned": false},
                        "views": {"by_device": {"map": "function(doc) { emit(doc.deviceID, null); }"}}});
    assert_eq!(s.put("/iot/_design/g", &global).0, 201);
    let (status, body) = s.get("/iot/_partition/bridge-2/_design/p/_view/by_t?reduce=false");
    assert_eq!(status, 200, "{body}");
    let ids: Vec<Value> = body["rows"]
        .as_array()
        .map(|r| r.iter().map(|r| r["id"].clone()).collect())
        .unwrap_or_default();
    assert_eq!(
        ids,
        vec![json!("bridge-2:device-0"), json!("bridge-2:device-1"), json!("bridge-2:device-2")]
    );
    assert_eq!(body["total_rows"], 3);
    let (_, count) = s.get("/iot/_partition/bridge-1/_design/p/_view/by_t");
    assert_eq!(count["rows"], json!([{"key": null, "value": 3}]));
    assert_error(
        s.get("/iot/_design/p/_view/by_t"),
        400,
        "query_parse_error",
        "`partition` parameter is mandatory for queries to this view.",
    );
    assert_error(
        s.get("/iot/_partition/bridge-1/_design/g/_view/by_device"),
        400,
        "query_parse_error",
        "`partition` parameter is not supported in this design doc",
    );
    assert_error(
        s.get("/iot/_partition/bridge-1/_design/p/_view/by_t?limit=268435457"),
        400,
        "query_parse_error",
        "Limit is too large, must not exceed 268435456",
    );
    let (_, global_rows) = s.get("/iot/_design/g/_view/by_device");
    assert_eq!(global_rows["total_rows"], 6);
}

#[test]
fn views_survive_a_restart_and_catch_up() {
    let mut s = Server::start();
    assert_eq!(s.put_empty("/db").0, 201);
    let ddoc =
        json!({"views": {"v": {"map": "function(doc) { emit(doc.n, null); }", "reduce": "_sum"}}});
    assert_eq!(s.put("/db/_design/d", &ddoc).0, 201);
    bulk(&s, "db", (0..50).map(|i| json!({"_id": format!("d{i}"), "n": i})).collect());
    let (_, before) = s.get("/db/_design/d/_view/v?reduce=false&limit=0");
    assert_eq!(before["total_rows"], 50);
    assert!(s.terminate());
    s.restart();
    s.put_doc("db", "late", &json!({"n": 100}));
    let (_, after) = s.get("/db/_design/d/_view/v?reduce=false&limit=1&descending=true");
    assert_eq!(after["total_rows"], 51);
    assert_eq!(after["rows"][0]["id"], "late");
    let (status, _) = send(s.req(Method::POST, "/db/_view_cleanup").json(&json!({})));
    assert_eq!(status, 202);
}

#[test]
fn conflicts_distinct_counts_and_stale_reads() {
    let s = Server::start();
    assert_eq!(s.put_empty("/db").0, 201);
    let (status, body) = s.post(
        "/db/_bulk_docs",
        &json!({"new_edits": false, "docs": [
            {"_id": "c", "_rev": "1-aaaa", "tag": "x"},
            {"_id": "c", "_rev": "1-bbbb", "tag": "y"},
            {"_id": "d", "_rev": "1-cccc", "tag": "x"}
        ]}),
    );
    assert_eq!(status, 201, "{body}");
    let ddoc = json!({"views": {
        "tags": {"map": "function(doc) { emit(doc.tag, doc._conflicts || null); }", "reduce": "_approx_count_distinct"}
    }});
    assert_eq!(s.put("/db/_design/d", &ddoc).0, 201);
    let (_, distinct) = s.get("/db/_design/d/_view/tags");
    assert_eq!(distinct["rows"], json!([{"key": null, "value": 2}]));
    let (_, rows) = s.get("/db/_design/d/_view/tags?reduce=false&include_docs=true&conflicts=true");
    assert_eq!(rows["rows"][1]["id"], "c", "1-bbbb wins, so c emits \"y\"");
    assert_eq!(rows["rows"][1]["value"], json!(["1-aaaa"]), "map functions see _conflicts");
    assert_eq!(rows["rows"][1]["doc"]["_conflicts"], json!(["1-aaaa"]));
    s.put_doc("db", "e", &json!({"tag": "z"}));
    let (status, _) = s.get("/db/_design/d/_view/tags?stale=ok&reduce=false");
    assert_eq!(status, 200);
    let (_, fresh) = s.get("/db/_design/d/_view/tags?reduce=false&update=true");
    assert_eq!(fresh["total_rows"], 3);
    assert_error(
        s.get("/db/_design/d/_view/tags?update=maybe"),
        400,
        "query_parse_error",
        "Invalid value for `update`.",
    );
}

#[test]
fn views_lib_modules_collation_raw_and_include_design() {
    let s = Server::start();
    assert_eq!(s.put_empty("/db").0, 201);
    bulk(
        &s,
        "db",
        vec![
            json!({"_id": "a", "w": "b"}),
            json!({"_id": "b", "w": "B"}),
            json!({"_id": "c", "w": "a"}),
        ],
    );
    let ddoc = json!({
        "options": {"collation": "raw", "include_design": true},
        "views": {
            "lib": {"util": "exports.up = function(s) { return s ? s + '!' : 'design'; };"},
            "w": {"map": "function(doc) { emit(require('views/lib/util').up(doc.w), null); }"}
        }
    });
    assert_eq!(s.put("/db/_design/d", &ddoc).0, 201);
    let (status, body) = s.get("/db/_design/d/_view/w");
    assert_eq!(status, 200, "{body}");
    // Raw collation: bytewise, so "B!" < "a!" < "b!" < "design".
    assert_eq!(keys(&body), vec![json!("B!"), json!("a!"), json!("b!"), json!("design")]);
}

/// Parameter edge cases checked against CouchDB 3.4.3 (a `q=1` database): descending
/// multi-key order and offset, typed POST bodies.
#[test]
fn multi_key_descending_order_and_typed_post_bodies() {
    let s = Server::start();
    assert_eq!(s.put_empty("/edge").0, 201);
    let docs: Vec<Value> =
        ["a", "b", "c", "d"].iter().map(|k| json!({"_id": format!("id-{k}"), "k": k})).collect();
    bulk(&s, "edge", docs);
    let ddoc = json!({"views": {"k": {"map": "function(doc) { emit(doc.k, null); }"}}});
    assert_eq!(s.put("/edge/_design/d", &ddoc).0, 201);
    // CouchDB answers the keys in reverse order when descending; the offset is the first
    // returned row's position in the descending scan.
    let path = "/edge/_design/d/_view/k";
    let params = [("keys", json!(["b", "d"])), ("descending", json!(true))];
    let (status, desc) = s.get(&q(path, &params));
    assert_eq!(status, 200, "{desc}");
    assert_eq!(keys(&desc), vec![json!("d"), json!("b")]);
    assert_eq!((desc["total_rows"].clone(), desc["offset"].clone()), (json!(4), json!(0)));
    let (_, asc) = s.get(&q(path, &[("keys", json!(["c", "a"]))]));
    assert_eq!(keys(&asc), vec![json!("c"), json!("a")]);
    assert_eq!(asc["offset"], 2);
    assert_error(
        s.post(path, &json!({"keys": "b"})),
        400,
        "bad_request",
        "`keys` member must be an array.",
    );
    assert_error(
        s.post(path, &json!({"limit": "2"})),
        400,
        "query_parse_error",
        r#"Invalid value for integer: <<"2">>"#,
    );
    let (status, limited) = s.post(path, &json!({"limit": 2, "descending": "true"}));
    assert_eq!(status, 200, "{limited}");
    assert_eq!(keys(&limited), vec![json!("d"), json!("c")]);
}

/// The mixed-type key sets of CouchDB's `view_collation_test.exs` and
/// `view_collation_raw_test.exs` (the golden file `bunko-doc` checks its codec with), read
/// back through views: whole-view order both ways, one-key lookups and exclusive ends.
#[test]
fn view_keys_collate_as_the_golden_sequences() {
    let golden: Value =
        serde_json::from_str(include_str!("../../../bunko-doc/tests/collation_order.json"))
            .expect("golden file is JSON");
    let s = Server::start();
    for (db, list, options) in
        [("coll", "view", json!({})), ("collraw", "raw", json!({"collation": "raw"}))]
    {
        // Keys come back as JavaScript numbers: 3.0 is 3.
        let expected: Vec<Value> =
            golden[list].as_array().into_iter().flatten().map(as_js_number).collect();
        assert!(expected.len() > 20, "{list} sequence");
        assert_eq!(s.put_empty(&format!("/{db}")).0, 201);
        // Stored in reverse order, so the view must sort them.
        let docs: Vec<Value> = expected
            .iter()
            .enumerate()
            .rev()
            .map(|(i, k)| json!({"_id": format!("{i:02}"), "foo": k}))
            .collect();
        bulk(&s, db, docs);
        let ddoc = json!({"options": options,
            "views": {"foo": {"map": "function(doc) { emit(doc.foo, null); }"}}});
        assert_eq!(s.put(&format!("/{db}/_design/c"), &ddoc).0, 201);
        let path = format!("/{db}/_design/c/_view/foo");
        assert_eq!(keys(&s.get(&path).1), expected, "{list} ascending");
        let mut reversed = expected.clone();
        reversed.reverse();
        assert_eq!(keys(&s.get(&format!("{path}?descending=true")).1), reversed, "{list}");
        for (i, key) in expected.iter().enumerate() {
            let (_, one) = s.get(&q(&path, &[("key", key.clone())]));
            assert_eq!(keys(&one), vec![key.clone()], "{list}: key={key}");
            assert_eq!(one["offset"], i, "{list}: offset of {key}");
            let before = q(&path, &[("endkey", key.clone()), ("inclusive_end", json!(false))]);
            assert_eq!(keys(&s.get(&before).1), expected[..i].to_vec(), "{list}: before {key}");
        }
    }
}

/// `v` with integral floats written as integers, as a key comes back from JavaScript.
fn as_js_number(v: &Value) -> Value {
    match v {
        Value::Number(n) if n.is_f64() => match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 1e15 => json!(f as i64),
            _ => v.clone(),
        },
        Value::Array(items) => Value::Array(items.iter().map(as_js_number).collect()),
        Value::Object(m) => {
            Value::Object(m.iter().map(|(k, v)| (k.clone(), as_js_number(v))).collect())
        }
        other => other.clone(),
    }
}

/// `?partition=` on the global view path queries that partition (CouchDB 3.4.3); `stable`
/// and the other flags are checked.
#[test]
fn partition_parameter_on_the_global_path() {
    let s = Server::start();
    assert_eq!(s.put_empty("/pv?partitioned=true").0, 201);
    let docs: Vec<Value> =
        (0..6).map(|i| json!({"_id": format!("p{}:d{i}", i % 2), "g": i})).collect();
    bulk(&s, "pv", docs);
    let part = json!({"views": {"g": {"map": "function(doc) { emit(doc.g, null); }"}}});
    assert_eq!(s.put("/pv/_design/p", &part).0, 201);
    let global = json!({"options": {"partitioned": false}, "views": {"g": {"map": "function(doc) { emit(doc.g, null); }"}}});
    assert_eq!(s.put("/pv/_design/g", &global).0, 201);
    let (status, rows) = s.get("/pv/_design/p/_view/g?partition=p1");
    assert_eq!(status, 200, "{rows}");
    assert_eq!(keys(&rows), vec![json!(1), json!(3), json!(5)]);
    assert_eq!(rows["total_rows"], 3);
    assert_error(
        s.get("/pv/_design/p/_view/g?partition=_x"),
        400,
        "illegal_partition",
        "Partition must not start with an underscore",
    );
    assert_error(
        s.get("/pv/_design/g/_view/g?partition=p1"),
        400,
        "query_parse_error",
        "`partition` parameter is not supported in this design doc",
    );
    assert_error(
        s.get("/pv/_design/p/_view/g?partition=p1&stable=x"),
        400,
        "query_parse_error",
        "Invalid value for `stable`.",
    );
    assert_error(
        s.get("/pv/_design/p/_view/g?partition=p1&sorted=x"),
        400,
        "query_parse_error",
        "Invalid boolean parameter: \"x\"",
    );
}

/// `view_errors_test.exs`: grouping a reduce view with `reduce=false`, a map function that
/// never ends, `_temp_view`.
#[test]
fn view_errors_match_couchdb() {
    let s = Server::start();
    assert_eq!(s.put_empty("/ve").0, 201);
    assert_eq!(s.put("/ve/d1", &json!({"integer": 1})).0, 201);
    let ddoc = json!({"views": {
        "with_reduce": {"map": "function (doc) {emit(doc.integer, doc.integer)};",
                        "reduce": "function (keys, values) { return sum(values); };"}}});
    assert_eq!(s.put("/ve/_design/test", &ddoc).0, 201);
    for extra in ["group=true", "group_level=1"] {
        assert_error(
            s.get(&format!("/ve/_design/test/_view/with_reduce?reduce=false&{extra}")),
            400,
            "query_parse_error",
            "Invalid use of grouping on a map view.",
        );
    }
    let (status, rows) = s.get("/ve/_design/test/_view/with_reduce?reduce=false&group_level=0");
    assert_eq!((status, rows["total_rows"].clone()), (200, json!(1)), "{rows}");
    let infinite =
        json!({"views": {"loop": {"map": "function(doc) {while(true){emit(doc,doc);}};"}}});
    assert_eq!(s.put("/ve/_design/infinite", &infinite).0, 201);
    let (status, err) = s.get("/ve/_design/infinite/_view/loop");
    assert_eq!(status, 500, "{err}");
    assert!(
        ["os_process_error", "timeout"].contains(&err["error"].as_str().unwrap_or("")),
        "{err}"
    );
    let (status, rows) = s.get("/ve/_design/test/_view/with_reduce");
    assert_eq!(
        (status, rows["rows"][0]["value"].clone()),
        (200, json!(1)),
        "other groups still work"
    );
    assert_error(
        s.post("/ve/_temp_view", &json!({"map": "function(doc){emit(doc.integer)}"})),
        410,
        "gone",
        "Temporary views are not supported in CouchDB",
    );
}

/// `total_rows` and `offset` of a map answer, and its row ids.
fn head_and_ids(s: &Server, path: &str) -> (Value, Value, Vec<Value>) {
    let (status, body) = s.get(path);
    assert_eq!(status, 200, "{path}: {body}");
    let ids = body["rows"]
        .as_array()
        .map(|r| r.iter().map(|r| r["id"].clone()).collect())
        .unwrap_or_default();
    (body["total_rows"].clone(), body["offset"].clone(), ids)
}

/// Database `db` of 300 documents `d000`…`d299` with `k` = their number modulo 23, and
/// `_design/g` with view `v` of `map`; the view's path, ending in `?`.
fn three_hundred_rows(s: &Server, db: &str, map: &str) -> String {
    assert_eq!(s.put_empty(&format!("/{db}")).0, 201);
    bulk(s, db, (0..300).map(|i| json!({"_id": format!("d{i:03}"), "k": i % 23})).collect());
    let ddoc = json!({"views": {"v": {"map": map}}});
    assert_eq!(s.put(&format!("/{db}/_design/g"), &ddoc).0, 201);
    format!("/{db}/_design/g/_view/v?")
}

/// `offset` over a view of 300 rows (many buckets of the order structure), before and
/// after deleting rows. Every expected answer is CouchDB 3.4.3's for the same documents
/// (a `q=1` database): descending, `skip`, `keys` (reversed when descending; the offset
/// is where the first key with rows begins, or the last key if none has rows),
/// `startkey_docid` and `inclusive_end`.
#[test]
fn offsets_match_couchdb_across_many_rows_and_deletes() {
    let s = Server::start();
    let view = three_hundred_rows(&s, "o", "function(doc) { emit(doc.k, null); }");
    let cases: &[(&str, u64, &[&str])] = &[
        ("key=7&limit=3", 92, &["d007", "d030", "d053"]),
        ("key=7&skip=3&limit=2", 95, &["d076", "d099"]),
        ("startkey=9&endkey=5&descending=true&skip=4&limit=3", 173, &["d193", "d170", "d147"]),
        ("descending=true&skip=10&limit=2", 10, &["d068", "d045"]),
        ("startkey=7&endkey=7&inclusive_end=false", 92, &[]),
        ("endkey=7&inclusive_end=false&descending=true&limit=2", 0, &["d298", "d275"]),
        ("startkey=22&endkey=30&limit=2", 287, &["d022", "d045"]),
        ("startkey=100", 300, &[]),
        ("startkey=-1&descending=true", 300, &[]),
        ("skip=1000", 300, &[]),
        ("keys=[7,3,5]&limit=1", 92, &["d007"]),
        ("keys=[7,3,5]&descending=true&limit=1", 221, &["d281"]),
        ("keys=[7,3]&skip=14&limit=1", 106, &["d026"]),
        ("keys=[7,3]&skip=14&limit=1&descending=true", 261, &["d260"]),
        ("keys=[99]", 300, &[]),
        ("keys=[99]&descending=true", 0, &[]),
        ("keys=[-1,99]", 300, &[]),
        ("keys=[99,3]&limit=1", 40, &["d003"]),
        ("keys=[3,99]&skip=20", 60, &[]),
        ("startkey=7&startkey_docid=d100&limit=2", 97, &["d122", "d145"]),
        ("startkey=7&startkey_docid=d100&descending=true&limit=2", 203, &["d099", "d076"]),
    ];
    for (params, offset, ids) in cases {
        let (total, got_offset, got_ids) = head_and_ids(&s, &format!("{view}{params}"));
        assert_eq!((total, got_offset), (json!(300), json!(offset)), "{params}");
        assert_eq!(got_ids, ids.iter().map(|id| json!(id)).collect::<Vec<_>>(), "{params}");
    }
    // Delete every third document (in id order) whose key is below 10.
    let (_, all) = s.get("/o/_all_docs");
    let deletes: Vec<Value> = all["rows"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .filter_map(|(n, row)| {
            let id = row["id"].as_str()?;
            let i: u64 = id.strip_prefix('d')?.parse().ok()?;
            (n % 3 == 0 && i % 23 < 10)
                .then(|| json!({"_id": id, "_rev": row["value"]["rev"], "_deleted": true}))
        })
        .collect();
    assert_eq!(deletes.len(), 44);
    bulk(&s, "o", deletes);
    for (params, offset, ids) in [
        ("key=7&limit=2", 61, vec!["d007", "d030"]),
        ("startkey=9&descending=true&limit=1", 169, vec!["d285"]),
        ("key=12&limit=3", 113, vec!["d012", "d035", "d058"]),
    ] {
        let (total, got_offset, got_ids) = head_and_ids(&s, &format!("{view}{params}"));
        assert_eq!((total, got_offset), (json!(256), json!(offset)), "{params}");
        assert_eq!(got_ids, ids.iter().map(|id| json!(id)).collect::<Vec<_>>(), "{params}");
    }
}

/// Answers longer than a scan's first page, which is read as one stream, go on with the
/// pages after it: every row once, in collation order, both directions, with `skip` and
/// `limit` across the page's end (300 rows; a first page is at most 256 plus the rows of
/// one bucket of the order structure).
#[test]
fn long_answers_go_on_past_the_first_page() {
    let s = Server::start();
    let view = three_hundred_rows(&s, "p", "function(doc) { emit(doc.k, doc._id); }");
    // The rows in collation order: by key, then by document id.
    let mut model: Vec<(u64, String)> = (0..300).map(|i| (i % 23, format!("d{i:03}"))).collect();
    model.sort();
    let ids = |rows: &[(u64, String)]| rows.iter().map(|(_, id)| json!(id)).collect::<Vec<_>>();
    let reversed: Vec<_> = model.iter().rev().cloned().collect();
    let d071 = model.iter().position(|(k, id)| (*k, id.as_str()) == (2, "d071")).unwrap_or(0);
    let cases: Vec<(&str, u64, Vec<Value>)> = vec![
        ("", 0, ids(&model)),
        ("descending=true", 0, ids(&reversed)),
        ("skip=5&limit=280", 5, ids(&model[5..285])),
        ("skip=250", 250, ids(&model[250..])),
        ("descending=true&skip=3&limit=270", 3, ids(&reversed[3..273])),
        ("startkey=2&startkey_docid=d071", d071 as u64, ids(&model[d071..])),
    ];
    for (params, offset, expected) in cases {
        let (_, body) = s.get(&format!("{view}{params}"));
        assert_eq!(
            (body["total_rows"].clone(), body["offset"].clone()),
            (json!(300), json!(offset)),
            "{params}"
        );
        let rows = body["rows"].as_array().cloned().unwrap_or_default();
        assert!(rows.iter().all(|r| r["id"] == r["value"]), "{params}");
        assert_eq!(rows.iter().map(|r| r["id"].clone()).collect::<Vec<_>>(), expected, "{params}");
    }
}

/// Partition queries over many rows: `total_rows` counts the partition's rows and
/// `offset` the partition's rows before the first returned one, read from the order
/// structure, and a restart (which rebuilds it from the rows) gives the same answers.
/// (CouchDB 3.4.3 reports shard-wide numbers here instead, which depend on `q`: for a
/// `q=1` database, the whole view's total and ranks.)
#[test]
fn partition_totals_and_offsets_over_many_rows_survive_a_restart() {
    let mut s = Server::start();
    assert_eq!(s.put_empty("/po?partitioned=true").0, 201);
    let docs = (0..300).map(|i| json!({"_id": format!("p{}:d{i:03}", i % 4), "k": i % 23}));
    bulk(&s, "po", docs.collect());
    let ddoc = json!({"views": {"v": {"map": "function(doc) { emit(doc.k, null); }"}}});
    assert_eq!(s.put("/po/_design/p", &ddoc).0, 201);
    let view = "/po/_partition/p1/_design/p/_view/v?";
    let check = |s: &Server| {
        // p1 holds i = 1, 5, 9, …, 297: 75 rows, 23 of them with keys below 7.
        let (total, offset, ids) = head_and_ids(s, &format!("{view}key=7&limit=2"));
        assert_eq!((total, offset), (json!(75), json!(23)));
        assert_eq!(ids, vec![json!("p1:d053"), json!("p1:d145")]);
        let (_, offset, _) = head_and_ids(s, &format!("{view}descending=true&skip=10&limit=1"));
        assert_eq!(offset, json!(10));
        let (_, offset, ids) = head_and_ids(s, &format!("{view}startkey=22&descending=true"));
        assert_eq!((offset, ids.len()), (json!(0), 75));
    };
    check(&s);
    assert!(s.terminate());
    s.restart();
    check(&s);
}

/// `{id: value}` of every row of a map view, read with the given extra parameters.
fn values(s: &Server, path: &str) -> std::collections::BTreeMap<String, Value> {
    let (status, body) = s.get(path);
    assert_eq!(status, 200, "{body}");
    body["rows"]
        .as_array()
        .map(|rows| {
            rows.iter()
                .map(|r| (r["id"].as_str().unwrap_or_default().to_string(), r["value"].clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// A map function whose values are random, so a rebuilt index shows different values.
const RANDOM_MAP: &str = "function(doc) { if (doc.n !== undefined) emit(doc.n, Math.random()); }";

fn docs(n: usize) -> Vec<Value> {
    (0..n).map(|i| json!({"_id": format!("d{i:05}"), "n": i})).collect()
}

#[test]
fn editing_one_view_keeps_the_other_views_index() {
    let s = Server::start();
    assert_eq!(s.put_empty("/db").0, 201);
    bulk(&s, "db", docs(300));
    let ddoc = json!({"views": {
        "kept": {"map": RANDOM_MAP},
        "edited": {"map": "function(doc) { emit(doc._id, 1); }"},
    }});
    let (_, created) = s.put("/db/_design/d", &ddoc);
    let kept = values(&s, "/db/_design/d/_view/kept");
    assert_eq!(kept.len(), 300);
    let edited = json!({"_rev": created["rev"], "views": {
        "kept": {"map": RANDOM_MAP},
        "edited": {"map": "function(doc) { emit(doc._id, 2); }"},
        "added": {"map": "function(doc) { emit(doc.n, 3); }", "reduce": "_count"},
    }});
    assert_eq!(s.put("/db/_design/d", &edited).0, 201);
    // The unchanged map function keeps its index: served at once without an update...
    assert_eq!(values(&s, "/db/_design/d/_view/kept?update=false"), kept);
    // ...and not mapped again when the group catches up (a rebuild would draw new values).
    let (_, fresh) = s.get("/db/_design/d/_view/edited?limit=1");
    assert_eq!(
        (fresh["total_rows"].clone(), fresh["rows"][0]["value"].clone()),
        (json!(300), json!(2))
    );
    let (_, count) = s.get("/db/_design/d/_view/added");
    assert_eq!(count["rows"], json!([{"key": null, "value": 300}]));
    assert_eq!(values(&s, "/db/_design/d/_view/kept"), kept);
    // A second design document with the same map function shares the index.
    let other = json!({"views": {"same": {"map": RANDOM_MAP, "reduce": "_count"}}});
    assert_eq!(s.put("/db/_design/other", &other).0, 201);
    assert_eq!(values(&s, "/db/_design/other/_view/same?reduce=false&update=false"), kept);
}

#[test]
fn editing_a_reduce_function_needs_no_rebuild() {
    let s = Server::start();
    assert_eq!(s.put_empty("/db").0, 201);
    bulk(&s, "db", docs(100));
    let ddoc = json!({"views": {"v": {"map": RANDOM_MAP, "reduce": "_count"}}});
    let (_, created) = s.put("/db/_design/r", &ddoc);
    let (_, count) = s.get("/db/_design/r/_view/v");
    assert_eq!(count["rows"], json!([{"key": null, "value": 100}]));
    let before = values(&s, "/db/_design/r/_view/v?reduce=false");
    let js =
        "function(keys, values, rereduce) { return rereduce ? sum(values) : values.length * 2; }";
    let edited = json!({"_rev": created["rev"], "views": {"v": {"map": RANDOM_MAP, "reduce": js}}});
    assert_eq!(s.put("/db/_design/r", &edited).0, 201);
    let (_, doubled) = s.get("/db/_design/r/_view/v?update=false");
    assert_eq!(doubled["rows"], json!([{"key": null, "value": 200}]));
    assert_eq!(values(&s, "/db/_design/r/_view/v?reduce=false"), before);
}

#[test]
fn view_cleanup_after_edits_removes_only_unused_indexes() {
    let s = Server::start();
    assert_eq!(s.put_empty("/db").0, 201);
    bulk(&s, "db", docs(50));
    let ddoc = json!({"views": {"a": {"map": RANDOM_MAP}}});
    let (_, created) = s.put("/db/_design/c", &ddoc);
    let a = values(&s, "/db/_design/c/_view/a");
    let moved = json!({"_rev": created["rev"], "views": {"b": {"map": RANDOM_MAP}}});
    let (_, moved) = s.put("/db/_design/c", &moved);
    let (status, _) = send(s.req(Method::POST, "/db/_view_cleanup").json(&json!({})));
    assert_eq!(status, 202);
    // Renaming the view kept its map index, and cleanup left it alone.
    assert_eq!(values(&s, "/db/_design/c/_view/b?update=false"), a);
    // Without a design document using it, the index stays until cleanup removes it...
    assert_eq!(
        s.delete(&format!("/db/_design/c?rev={}", moved["rev"].as_str().unwrap_or(""))).0,
        200
    );
    let (_, again) = s.put("/db/_design/c2", &ddoc);
    assert_eq!(values(&s, "/db/_design/c2/_view/a?update=false"), a);
    assert_eq!(
        s.delete(&format!("/db/_design/c2?rev={}", again["rev"].as_str().unwrap_or(""))).0,
        200
    );
    let (status, _) = send(s.req(Method::POST, "/db/_view_cleanup").json(&json!({})));
    assert_eq!(status, 202);
    // ...after which the same map function is indexed from scratch.
    assert_eq!(s.put("/db/_design/c3", &ddoc).0, 201);
    let rebuilt = values(&s, "/db/_design/c3/_view/a");
    assert_eq!(rebuilt.len(), 50);
    assert_ne!(rebuilt, a);
}

#[test]
fn a_build_stopped_midway_resumes_from_its_checkpoint() {
    let mut s = Server::start();
    assert_eq!(s.put_empty("/db").0, 201);
    let all = docs(5000);
    for chunk in all.chunks(1000) {
        bulk(&s, "db", chunk.to_vec());
    }
    assert_eq!(s.put("/db/_design/d", &json!({"views": {"v": {"map": RANDOM_MAP}}})).0, 201);
    // The background indexer builds the view after the write; wait for its first pages.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut partial = values(&s, "/db/_design/d/_view/v?update=false");
    while partial.is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
        partial = values(&s, "/db/_design/d/_view/v?update=false");
    }
    assert!(!partial.is_empty(), "the background build committed nothing");
    assert!(s.terminate());
    s.restart();
    let full = values(&s, "/db/_design/d/_view/v");
    assert_eq!(full.len(), 5000);
    // Rows written before the restart were kept, not mapped again (new random values).
    for (id, value) in &partial {
        assert_eq!(full.get(id), Some(value), "{id} was rebuilt");
    }
}

#[test]
fn a_running_view_build_is_an_indexer_task_until_done() {
    let s = Server::start();
    assert_eq!(s.put_empty("/db").0, 201);
    for chunk in docs(4000).chunks(1000) {
        bulk(&s, "db", chunk.to_vec());
    }
    let slow =
        "function(doc) { var x = 0; for (var i = 0; i < 20000; i++) x += i; emit(doc.n, x); }";
    assert_eq!(s.put("/db/_design/slow", &json!({"views": {"v": {"map": slow}}})).0, 201);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let task = loop {
        let (status, tasks) = s.get("/_active_tasks");
        assert_eq!(status, 200, "{tasks}");
        let found = tasks
            .as_array()
            .and_then(|t| t.iter().find(|t| t["design_document"] == "_design/slow").cloned());
        if let Some(task) = found {
            break task;
        }
        assert!(std::time::Instant::now() < deadline, "no indexer task appeared");
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    assert_eq!((task["type"].clone(), task["database"].clone()), (json!("indexer"), json!("db")));
    assert_eq!(task["total_changes"], 4001, "the documents and the design document: {task}");
    let done = task["changes_done"].as_u64().unwrap_or(u64::MAX);
    assert!(done <= 4001 && task["progress"].as_u64().is_some_and(|p| p <= 100), "{task}");
    for field in ["started_on", "updated_on"] {
        assert!(task[field].as_u64().is_some_and(|t| t > 1_600_000_000), "{field}: {task}");
    }
    assert!(task["pid"].is_string() && task["node"].is_string(), "{task}");
    let (_, rows) = s.get("/db/_design/slow/_view/v?limit=0");
    assert_eq!(rows["total_rows"], 4000);
    let (_, tasks) = s.get("/_active_tasks");
    let left = tasks
        .as_array()
        .map_or(0, |t| t.iter().filter(|t| t["design_document"] == "_design/slow").count());
    assert_eq!(left, 0, "{tasks}");
}

/// `view_update_seq_test.exs`: with `"autoupdate": false` only queries update the view,
/// so `stale=ok` reads it as the last query left it and `stale=update_after` updates it
/// after answering.
#[test]
fn autoupdate_false_leaves_updates_to_queries() {
    let s = Server::start();
    assert_eq!(s.put_empty("/seq").0, 201);
    let ddoc = json!({"autoupdate": false, "views": {
        "all_docs": {"map": "function(doc) { emit(doc.integer, doc.string) }"},
        "summate": {"map": "function (doc) { if (typeof doc.integer === 'number') { emit(doc.integer, doc.integer)}; }",
                    "reduce": "function (keys, values) { return sum(values); };"}}});
    assert_eq!(s.put("/seq/_design/test", &ddoc).0, 201);
    let docs: Vec<Value> = (0..100)
        .map(|i| json!({"_id": i.to_string(), "integer": i, "string": i.to_string()}))
        .collect();
    bulk(&s, "seq", docs);
    let seq_of = |extra: &str| {
        let (status, body) =
            s.get(&format!("/seq/_design/test/_view/all_docs?limit=1&update_seq=true{extra}"));
        assert_eq!(status, 200, "{body}");
        body["update_seq"].as_str().and_then(|s| s.split('-').next()?.parse::<u64>().ok())
    };
    assert_eq!(seq_of(""), Some(101));
    let (_, summed) = s.get("/seq/_design/test/_view/summate?update_seq=true");
    assert_eq!(summed["update_seq"].as_str().and_then(|s| s.split('-').next()), Some("101"));
    assert_eq!(s.put("/seq/A", &json!({"integer": 1})).0, 201);
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(seq_of("&stale=ok"), Some(101), "no background update");
    let (_, info) = s.get("/seq/_design/test/_info");
    let index = &info["view_index"];
    assert_eq!(index["updates_pending"]["total"], 1, "{info}");
    let (active, external) =
        (index["sizes"]["active"].as_u64(), index["sizes"]["external"].as_u64());
    // 200 rows of `[key, id, value]` JSON, each over 10 bytes; keys and back-index on top.
    assert!(external.is_some_and(|e| e > 2000) && active > external, "{info}");
    assert_eq!(s.put("/seq/AA", &json!({"integer": 2})).0, 201);
    assert_eq!(seq_of("&stale=update_after"), Some(101));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while seq_of("&stale=ok") != Some(103) {
        assert!(std::time::Instant::now() < deadline, "update_after never updated the view");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(seq_of(""), Some(103));
}

/// The map function of [`rows_of_every_json_type_are_written_as_javascript_writes_them`]:
/// what JavaScript alone can emit by `special`, else the document's `v` as key and `[v]`
/// as value.
const EVERY_TYPE_MAP: &str = r#"function(doc) {
  switch (doc.special) {
    case "undefined": emit(undefined, undefined); break;
    case "function": emit(function () {}, [function () {}, undefined]); break;
    case "object": emit({a: undefined, b: 1, c: function () {}}, {toJSON: function () { return "j"; }}); break;
    case "date": emit(new Date(0), [new Date(86400000)]); break;
    case "nan": emit(NaN, [Infinity, -Infinity]); break;
    case "negzero": emit(-0, [-0, 0.1 + 0.2]); break;
    case "twice": emit(1, 1); emit(1, 2); break;
    default: emit(doc.v, [doc.v]);
  }
}"#;

/// A first build's rows for keys and values of every JSON type, compared as the bytes of
/// the answer: what CouchDB's JavaScript query server gives (`JSON.stringify` of each
/// emitted row): `-0` as `0`, integers past 2^53 rounded to a double, `1e21` as `1e+21`,
/// unicode kept and only `"`, `\` and control characters escaped, `undefined`, functions,
/// A map function emitting half of a surrogate pair (an emoji cut by `substring`) gets
/// U+FFFD in its row where CouchDB fails the whole index update; the other rows of the
/// same document and every other document are indexed as usual.
#[test]
fn a_lone_surrogate_in_an_emitted_string_becomes_a_replacement_character() {
    let s = Server::start();
    assert_eq!(s.put_empty("/notes").0, 201);
    bulk(
        &s,
        "notes",
        vec![json!({"_id": "a", "text": "\u{1F600} smile"}), json!({"_id": "b", "text": "plain"})],
    );
    let map =
        "function(doc) { emit(doc.text.substring(0, 1), doc.text.length); emit(doc._id, null); }";
    let ddoc = json!({"views": {"first": {"map": map}}});
    assert_eq!(s.put("/notes/_design/cut", &ddoc).0, 201);
    let (status, body) = s.get("/notes/_design/cut/_view/first");
    assert_eq!(status, 200, "{body}");
    let keys: Vec<Value> =
        body["rows"].as_array().unwrap().iter().map(|r| r["key"].clone()).collect();
    assert_eq!(keys, [json!("a"), json!("b"), json!("p"), json!("\u{fffd}")], "{body}");
    assert_eq!(body["rows"][3]["value"], 8, "{body}");
}

/// `NaN` and infinities as `null`, members holding `undefined` or a function dropped,
/// `toJSON` and `Date`s honoured, integer-like member names first. Fails if rows are read
/// from JavaScript or written to storage in any other form.
#[test]
fn rows_of_every_json_type_are_written_as_javascript_writes_them() {
    // (the document's `v` as JSON text, the row's key as JSON text)
    let plain: &[(&str, &str)] = &[
        ("null", "null"),
        ("true", "true"),
        ("false", "false"),
        ("0", "0"),
        ("-0", "0"),
        ("-1", "-1"),
        ("1.5", "1.5"),
        ("1e2", "100"),
        ("1E21", "1e+21"),
        ("0.0000001", "1e-7"),
        ("2.5e-300", "2.5e-300"),
        ("9007199254740993", "9007199254740992"),
        ("-123456789012345678901234567890", "-1.2345678901234568e+29"),
        (r#""""#, r#""""#),
        (r#""\u00e9t\u00e9""#, "\"\u{e9}t\u{e9}\""),
        ("\"\u{65e5}\u{672c}\u{8a9e}\"", "\"\u{65e5}\u{672c}\u{8a9e}\""),
        (r#""\ud83d\ude00""#, "\"\u{1f600}\""),
        (r#""line\nbreak\ttab\r\b\f""#, r#""line\nbreak\ttab\r\b\f""#),
        (r#""quote\"back\\slash\/""#, r#""quote\"back\\slash/""#),
        (r#""\u0001\u001f\u007f\u2028""#, "\"\\u0001\\u001f\u{7f}\u{2028}\""),
        ("[]", "[]"),
        ("[1,[2.0,[3,[]]]]", "[1,[2,[3,[]]]]"),
        (r#"["a",null,{"x":1.0,"y":-0.0}]"#, r#"["a",null,{"x":1,"y":0}]"#),
        ("{}", "{}"),
        (r#"{"b":1,"a":[true],"2":"n","1":"m"}"#, r#"{"1":"m","2":"n","b":1,"a":[true]}"#),
        (
            r#"{"nested":{"deeper":{"k":[{"z":null}]}}}"#,
            r#"{"nested":{"deeper":{"k":[{"z":null}]}}}"#,
        ),
    ];
    // (`special`, the rows as `{"id":…,"key":…,"value":…}` text without the id)
    let special: &[(&str, &[&str])] = &[
        ("undefined", &[r#""key":null,"value":null"#]),
        ("function", &[r#""key":null,"value":[null,null]"#]),
        ("object", &[r#""key":{"b":1},"value":"j""#]),
        ("date", &[r#""key":"1970-01-01T00:00:00.000Z","value":["1970-01-02T00:00:00.000Z"]"#]),
        ("nan", &[r#""key":null,"value":[null,null]"#]),
        ("negzero", &[r#""key":0,"value":[0,0.30000000000000004]"#]),
        ("twice", &[r#""key":1,"value":1"#, r#""key":1,"value":2"#]),
    ];
    let s = Server::start();
    assert_eq!(s.put_empty("/types").0, 201);
    let mut docs: Vec<String> = plain
        .iter()
        .enumerate()
        .map(|(i, (v, _))| format!(r#"{{"_id":"p{i:02}","v":{v}}}"#))
        .collect();
    docs.extend(
        special.iter().map(|(name, _)| format!(r#"{{"_id":"s-{name}","special":"{name}"}}"#)),
    );
    let body = format!(r#"{{"docs":[{}]}}"#, docs.join(","));
    let (status, answer) = s.raw(Method::POST, "/types/_bulk_docs", body);
    assert_eq!(status, 201, "{answer}");
    let ddoc = json!({"views": {"t": {"map": EVERY_TYPE_MAP}}});
    assert_eq!(s.put("/types/_design/t", &ddoc).0, 201);
    let response = s.req(Method::GET, "/types/_design/t/_view/t").send().expect("view");
    assert_eq!(response.status().as_u16(), 200);
    let text = response.text().expect("view text");
    let mut expected: Vec<String> = plain
        .iter()
        .enumerate()
        .map(|(i, (_, key))| format!(r#"{{"id":"p{i:02}","key":{key},"value":[{key}]}}"#))
        .collect();
    for (name, rows) in special {
        expected.extend(rows.iter().map(|row| format!(r#"{{"id":"s-{name}",{row}}}"#)));
    }
    for row in &expected {
        assert!(text.contains(row.as_str()), "no row {row} in {text}");
    }
    let answer: Value = serde_json::from_str(&text).expect("view JSON");
    assert_eq!(answer["total_rows"], expected.len(), "{text}");
    assert_eq!(answer["rows"].as_array().map(Vec::len), Some(expected.len()), "{text}");
}
