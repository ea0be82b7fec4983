//! Mango planning as CouchDB 3.4 reports it: `_explain`'s `opts`, `mrargs`, `covering` and
//! `index_candidates`; covering queries that read no documents; `use_index` with and
//! without `allow_fallback`; the special `_all_docs` index for `_id` ranges and sorts.
//! Expected values were taken from CouchDB 3.4.3 for the same requests
//! (`src/mango/test/{05,15,22,23,25}-*.py`).

use serde_json::{Value, json};

use crate::harness::{Server, assert_error};

fn post_ok(s: &Server, path: &str, body: Value) -> Value {
    let (status, out) = s.post(path, &body);
    assert_eq!(status, 200, "{path} {body} -> {out}");
    out
}

/// A database `db` with ten documents `{age: i * 10, name: "n{i}"}` and indexes `age`
/// and `age-name`, built.
fn people(s: &Server) {
    s.create_db("db");
    let docs: Vec<Value> = (0..10)
        .map(|i| json!({"_id": format!("p{i:02}"), "age": i * 10, "name": format!("n{i}")}))
        .collect();
    let (status, out) = s.post("/db/_bulk_docs", &json!({"docs": docs}));
    assert_eq!(status, 201, "{out}");
    for (fields, name) in [(json!(["age"]), "age"), (json!(["age", "name"]), "age-name")] {
        let body = json!({"index": {"fields": fields}, "name": name, "ddoc": name});
        post_ok(s, "/db/_index", body);
    }
    // Indexes are planned with once built (in the background): wait for `age-name`.
    let probe = json!({"selector": {"age": {"$gt": null}, "name": {"$gt": null}},
        "use_index": "age-name", "allow_fallback": false, "limit": 1});
    for _ in 0..200 {
        if s.post("/db/_find", &probe).0 == 200 {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    panic!("age-name was never built");
}

#[test]
fn explain_shows_couchdb_options_view_arguments_and_candidates() {
    let s = Server::start();
    people(&s);
    let out = post_ok(
        &s,
        "/db/_explain",
        json!({"selector": {"age": {"$gt": 10, "$lte": 50}}, "fields": ["_id", "age"]}),
    );
    assert_eq!(out["index"]["name"], "age");
    assert_eq!(
        out["opts"],
        json!({"use_index": [], "bookmark": "nil", "limit": 25, "skip": 0, "sort": {},
            "fields": ["_id", "age"], "partition": "", "r": 1, "conflicts": false,
            "stale": false, "update": true, "stable": false, "execution_stats": false,
            "allow_fallback": true})
    );
    assert_eq!(
        out["mrargs"],
        json!({"include_docs": false, "view_type": "map", "reduce": false, "partition": null,
            "start_key": [10], "end_key": [50, "<MAX>"], "direction": "fwd", "stable": false,
            "update": true, "conflicts": "undefined"})
    );
    assert_eq!(out["covering"], true);
    assert_eq!(
        out["index_candidates"],
        json!([
            {"index": {"ddoc": "_design/age-name", "name": "age-name", "type": "json",
                "partitioned": false, "def": {"fields": [{"age": "asc"}, {"name": "asc"}]}},
             "analysis": {"usable": false, "reasons": [{"name": "field_mismatch"}],
                "ranking": 2, "covering": true}},
            {"index": {"ddoc": null, "name": "_all_docs", "type": "special",
                "def": {"fields": [{"_id": "asc"}]}},
             "analysis": {"usable": true, "reasons": [{"name": "unfavored_type"}],
                "ranking": 1, "covering": null}},
        ])
    );
    // CouchDB's keys run over every leading field with a bound.
    let body = json!({"selector": {"age": {"$gt": 20}, "name": {"$gt": "n"}}});
    let two = post_ok(&s, "/db/_explain", body);
    assert_eq!(
        (&two["mrargs"]["start_key"], &two["mrargs"]["end_key"]),
        (&json!([20, "n"]), &json!(["<MAX>"]))
    );
    assert_eq!(
        out["selector_hints"],
        json!([{"type": "json", "indexable_fields": ["age"], "unindexable_fields": []},
            {"type": "text", "indexable_fields": ["age"], "unindexable_fields": []}])
    );
}

#[test]
fn a_covering_index_answers_without_reading_documents() {
    let s = Server::start();
    people(&s);
    let body = json!({"selector": {"age": {"$lt": 30}}, "fields": ["_id", "age"],
        "execution_stats": true});
    let out = post_ok(&s, "/db/_find", body);
    assert_eq!(
        out["docs"],
        json!([{"_id": "p00", "age": 0}, {"_id": "p01", "age": 10},
        {"_id": "p02", "age": 20}])
    );
    // As in CouchDB, the entry at the `$lt` bound (age 30) is read too.
    assert_eq!(out["execution_stats"]["total_keys_examined"], 4);
    assert_eq!(out["execution_stats"]["total_docs_examined"], 0);
    // `r` > 1: CouchDB reads the documents by quorum instead.
    let body = json!({"selector": {"age": {"$lt": 30}}, "r": 3, "execution_stats": true});
    let out = post_ok(&s, "/db/_find", body);
    assert_eq!(out["execution_stats"]["total_docs_examined"], 0);
    assert_eq!(out["execution_stats"]["total_quorum_docs_examined"], 4);
    assert_error(
        s.post("/db/_find", &json!({"selector": {}, "r": 0})),
        400,
        "invalid_pos_integer",
        "0 is not an integer greater than zero",
    );
}

#[test]
fn use_index_warns_when_ignored_and_fails_without_fallback() {
    let s = Server::start();
    people(&s);
    let body = json!({"selector": {"name": "n1"}, "use_index": "age"});
    let out = post_ok(&s, "/db/_find", body);
    assert_eq!(
        out["warning"],
        "_design/age was not used because it does not contain a valid index for this \
         query.\nNo matching index found, create an index to optimize query time.\nThe \
         number of documents examined is high in proportion to the number of results \
         returned. Consider adding a more specific index to improve this."
    );
    let body = json!({"selector": {"name": "n1"}, "use_index": ["age", "age"],
        "allow_fallback": false});
    assert_error(
        s.post("/db/_find", &body),
        400,
        "invalid_index",
        "_design/age, age specified by `use_index` could not be found or it is not suitable.",
    );
    let body = json!({"selector": {"name": "n1"}, "allow_fallback": false});
    assert_error(
        s.post("/db/_find", &body),
        400,
        "invalid_index",
        "You must specify an index with the `use_index` parameter.",
    );
    let (status, out) = s.post("/db/_find", &json!({"selector": {}, "use_index": "a/b/c"}));
    assert_eq!((status, &out["error"]), (400, &json!("invalid_index_name")));
}

#[test]
fn all_docs_serves_id_ranges_and_id_sorts() {
    let s = Server::start();
    people(&s);
    let body = json!({"selector": {"_id": {"$gt": "p03", "$lt": "p07"}}, "sort": [{"_id": "desc"}],
        "execution_stats": true});
    let out = post_ok(&s, "/db/_find", body.clone());
    let ids: Vec<&str> =
        out["docs"].as_array().into_iter().flatten().filter_map(|d| d["_id"].as_str()).collect();
    assert_eq!(ids, ["p06", "p05", "p04"]);
    // CouchDB reads p07 and p03 too: `_all_docs` bounds include their ids.
    assert_eq!(out["execution_stats"]["total_keys_examined"], 5);
    let out = post_ok(&s, "/db/_explain", body);
    assert_eq!(out["index"]["name"], "_all_docs");
    assert_eq!(out["mrargs"]["start_key"], "p07");
    assert_eq!(out["mrargs"]["end_key"], "p03");
    assert_eq!(out["mrargs"]["direction"], "rev");
    let out = post_ok(&s, "/db/_explain", json!({"selector": {"_id": {"$beginsWith": "p0"}}}));
    assert_eq!(out["mrargs"]["end_key"], "p0\u{FFFF}");
}

#[test]
fn design_info_index_paging_and_text_indexes_answer_as_couchdb() {
    let s = Server::start();
    people(&s);
    let (status, info) = s.get("/db/_design/age/_info");
    assert_eq!(status, 200, "{info}");
    assert_eq!(info["name"], "age");
    assert_eq!(info["view_index"]["language"], "query");
    // `;` separates query parameters, as in CouchDB.
    let (status, out) = s.get("/db/_index?limit=2;skip=1");
    assert_eq!(status, 200, "{out}");
    assert_eq!(out["indexes"].as_array().map(Vec::len), Some(2));
    assert_error(
        s.post("/db/_index", &json!({"index": {"fields": ["a"]}, "type": "nouveau"})),
        503,
        "required index service unavailable",
        "nouveau",
    );
    assert_error(s.get("/db/_design/nope/_info"), 404, "not_found", "missing");
    assert_error(
        s.post("/db/_index", &json!({"index": {"fields": ["a"], "selector": {}}})),
        400,
        "invalid_key",
        "Invalid key selector for this request.",
    );
}
