//! Filtered `_changes` (issue 16, point 4), as CouchDB 3.4's `couch_changes` filters:
//! `_selector`, `_view`, design-document `filters` functions with `req.query`, in the
//! normal and longpoll feeds, and CouchDB's errors for bad filters.

use reqwest::Method;
use serde_json::{Value, json};

use crate::harness::{Server, assert_error, send};

/// Reviews of the subset-pattern guide (seed 001), and a design document with a filter and
/// a view.
fn setup() -> Server {
    let s = Server::start();
    s.create_db("reviews");
    let docs = json!({"docs": [
        {"_id": "r1", "product_id": "p1", "stars": 5, "review": "とても良い"},
        {"_id": "r2", "product_id": "p2", "stars": 2, "review": "いまいち"},
        {"_id": "r3", "product_id": "p1", "stars": 4, "review": "良い"},
        {"_id": "_design/app",
         "filters": {"by_product": "function(doc, req) { return doc.product_id === req.query.product; }",
                     "broken": "function(doc) { throw 'no'; }"},
         "views": {"good": {"map": "function(doc) { if (doc.stars >= 4) emit(doc._id); }"}}}
    ]});
    assert_eq!(s.post("/reviews/_bulk_docs", &docs).0, 201);
    s
}

fn ids(feed: &Value) -> Vec<String> {
    let rows = feed["results"].as_array().cloned().unwrap_or_default();
    rows.iter().filter_map(|r| r["id"].as_str().map(str::to_string)).collect()
}

#[test]
fn a_design_filter_function_sees_the_query() {
    let s = setup();
    let (status, feed) = s.get("/reviews/_changes?filter=app/by_product&product=p1");
    assert_eq!(status, 200, "{feed}");
    assert_eq!(ids(&feed), ["r1", "r3"]);
    let (_, feed) = s.get("/reviews/_changes?filter=app/by_product&product=p2&feed=longpoll");
    assert_eq!(ids(&feed), ["r2"]);
    // A filter that throws keeps nothing.
    let (_, feed) = s.get("/reviews/_changes?filter=app/broken");
    assert_eq!(ids(&feed), Vec::<String>::new());
}

#[test]
fn selector_and_view_filters_keep_matching_documents() {
    let s = setup();
    let body = json!({"selector": {"stars": {"$lt": 3}}});
    let (status, feed) =
        send(s.req(Method::POST, "/reviews/_changes?filter=_selector").json(&body));
    assert_eq!(status, 200, "{feed}");
    assert_eq!(ids(&feed), ["r2"]);
    let (_, feed) = s.get("/reviews/_changes?filter=_view&view=app/good");
    assert_eq!(ids(&feed), ["r1", "r3"]);
    let (_, feed) = s.get("/reviews/_changes?filter=_design");
    assert_eq!(ids(&feed), ["_design/app"]);
}

#[test]
fn bad_filters_answer_couchdbs_errors() {
    let s = setup();
    assert_error(
        s.get("/reviews/_changes?filter=_nope"),
        400,
        "bad_request",
        "unknown builtin filter name",
    );
    assert_error(
        s.get("/reviews/_changes?filter=_selector"),
        400,
        "bad_request",
        "Selector must be specified in POST payload",
    );
    assert_error(
        s.get("/reviews/_changes?filter=_view"),
        400,
        "bad_request",
        "`view` filter parameter is not provided.",
    );
    assert_error(
        s.get("/reviews/_changes?filter=nofilter"),
        400,
        "bad_request",
        "`filter` must be of the form `designname/filtername`",
    );
    assert_error(
        s.get("/reviews/_changes?filter=app/missing"),
        404,
        "not_found",
        "missing json key: missing",
    );
    assert_error(s.get("/reviews/_changes?filter=other/x"), 404, "not_found", "missing");
}
