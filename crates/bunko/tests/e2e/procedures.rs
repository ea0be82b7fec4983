//! Procedures and triggers (issue 15, point 5), with the modeling guides' cases: a trigger
//! keeps a publisher's `countOfBooks` exact under concurrent inserts and deletes and refuses
//! a book whose `pub-id` names no publisher (the Cosmos DB guide, seed 000); a procedure
//! does the subset pattern (seed 001), all or nothing; a procedure that throws or runs away
//! leaves nothing.

use std::thread;

use reqwest::Method;
use serde_json::{Value, json};

use crate::harness::{ADMIN, ADMIN_PASSWORD, Server, assert_error, assert_error_kind, send};

/// Refuses a book whose `pub-id` names no publisher.
pub(crate) const REFERENCES: &str = "function (newDoc, oldDoc, db, userCtx) {
  if (newDoc._deleted || newDoc.type !== 'book') return;
  var publisher = db.get(newDoc['pub-id']);
  if (!publisher || publisher.type !== 'publisher') {
    throw({forbidden: 'no publisher ' + newDoc['pub-id']});
  }
}";

/// Keeps each publisher's `countOfBooks` equal to the number of its books.
pub(crate) const COUNT: &str = "function (newDoc, oldDoc, db, userCtx) {
  function publisherOf(doc) {
    return doc && !doc._deleted && doc.type === 'book' ? doc['pub-id'] : null;
  }
  var before = publisherOf(oldDoc), after = publisherOf(newDoc);
  if (before === after) return;
  [[before, -1], [after, 1]].forEach(function (change) {
    if (change[0] === null) return;
    var publisher = db.get(change[0]);
    publisher.countOfBooks += change[1];
    db.put(publisher);
  });
}";

fn library() -> Server {
    let s = Server::start();
    s.create_db("library");
    let ddoc = json!({"triggers": {"references": REFERENCES, "countOfBooks": COUNT}});
    s.put_doc("library", "_design/library", &ddoc);
    s.put_doc("library", "mspress", &json!({"type": "publisher", "countOfBooks": 0}));
    s
}

fn count_of_books(s: &Server) -> u64 {
    s.get_doc("library", "mspress")["countOfBooks"].as_u64().unwrap_or(u64::MAX)
}

fn book(id: &str) -> Value {
    json!({"_id": id, "type": "book", "name": "Azure Cosmos DB 101", "pub-id": "mspress"})
}

#[test]
fn a_trigger_keeps_count_of_books_exact_under_concurrent_inserts_and_deletes() {
    let s = library();
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let base = s.base().to_string();
            thread::spawn(move || {
                let client = crate::harness::client();
                let mut kept = 0;
                for i in 0..12 {
                    let id = format!("b{t}-{i}");
                    let url = format!("{base}/library/{id}");
                    let req =
                        client.put(&url).basic_auth(ADMIN, Some(ADMIN_PASSWORD)).json(&book(&id));
                    let (status, put) = send(req);
                    assert_eq!(status, 201, "{put}");
                    if i % 3 == 0 {
                        let url = format!("{url}?rev={}", put["rev"].as_str().unwrap_or_default());
                        let req = client.delete(&url).basic_auth(ADMIN, Some(ADMIN_PASSWORD));
                        assert_eq!(send(req).0, 200);
                    } else {
                        kept += 1;
                    }
                }
                kept
            })
        })
        .collect();
    let kept: u64 = threads.into_iter().map(|t| t.join().expect("writer thread")).sum();
    let (_, books) =
        s.post("/library/_find", &json!({"selector": {"type": "book"}, "limit": 1000}));
    assert_eq!(books["docs"].as_array().map(Vec::len), Some(kept as usize));
    assert_eq!(count_of_books(&s), kept);
    // Every increment is an ordinary edit of the publisher: one revision per change.
    let rev = s.get_doc("library", "mspress")["_rev"].as_str().unwrap_or_default().to_string();
    assert_eq!(crate::harness::rev_gen(&rev), 1 + 8 * 12 + 8 * 4);
}

#[test]
fn a_trigger_refuses_a_dangling_reference_and_nothing_is_written() {
    let s = library();
    let mut dangling = book("b1");
    dangling["pub-id"] = json!("oreilly");
    assert_error(s.put("/library/b1", &dangling), 403, "forbidden", "no publisher oreilly");
    assert_eq!(s.get("/library/b1").0, 404);
    let bulk = json!({"docs": [book("b2"), dangling.clone()]});
    let (status, rows) = s.post("/library/_bulk_docs", &bulk);
    assert_eq!(status, 201);
    assert_eq!(
        (rows[0]["ok"].clone(), rows[1]["error"].clone()),
        (json!(true), json!("forbidden"))
    );
    assert_eq!(count_of_books(&s), 1);
    let atomic = json!({"all_or_nothing": true, "docs": [book("b3"), dangling]});
    let (status, rows) = s.post("/library/_bulk_docs", &atomic);
    assert_eq!(status, 417, "{rows}");
    assert_eq!(s.get("/library/b3").0, 404);
    assert_eq!(count_of_books(&s), 1);
}

/// Triggers fire on every interactive write path (and on transactions), not on replicated
/// writes: the source already holds what its triggers derived.
#[test]
fn triggers_fire_on_every_write_path_but_replication() {
    let s = library();
    s.put_doc("library", "b1", &book("b1"));
    assert_eq!(s.post("/library", &book("b2")).0, 201);
    let bulk = json!({"all_or_nothing": true, "docs": [book("b3"), book("b4")]});
    assert_eq!(s.post("/library/_bulk_docs", &bulk).0, 201);
    let txn = json!({"docs": [{"db": "library", "doc": book("b5")}]});
    assert_eq!(s.post("/_transaction", &txn).0, 201);
    let rev = s.put_doc("library", "b6", &book("b6"));
    // An edit that keeps the publisher changes no count.
    let mut edited = book("b6");
    edited["_rev"] = json!(rev);
    edited["name"] = json!("Azure Cosmos DB for RDBMS Users");
    assert_eq!(s.put("/library/b6", &edited).0, 201);
    assert_eq!(count_of_books(&s), 6);
    let rev = s.get_doc("library", "b6")["_rev"].as_str().unwrap_or_default().to_string();
    assert_eq!(s.delete(&format!("/library/b6?rev={rev}")).0, 200);
    assert_eq!(count_of_books(&s), 5);
    let mut replicated = book("b7");
    replicated["_rev"] = json!("1-0123456789abcdef0123456789abcdef");
    let body = json!({"new_edits": false, "docs": [replicated]});
    assert_eq!(s.post("/library/_bulk_docs", &body).0, 201);
    assert_eq!(s.get_doc("library", "b7")["pub-id"], "mspress");
    assert_eq!(count_of_books(&s), 5);
}

#[test]
fn functions_that_do_not_compile_are_refused_at_save() {
    let s = Server::start();
    s.create_db("db");
    for field in ["triggers", "procedures"] {
        let ddoc = json!({field: {"broken": "function (newDoc) {"}});
        let (status, body) = s.put("/db/_design/x", &ddoc);
        assert_eq!((status, body["error"].as_str()), (400, Some("compilation_error")), "{body}");
        let reason = body["reason"].as_str().unwrap_or_default();
        assert!(reason.starts_with(&format!("{field}.broken: ")), "{reason}");
        let (status, body) = s.put("/db/_design/x", &json!({field: {"n": 1}}));
        assert_eq!((status, body["error"].as_str()), (400, Some("invalid_design_doc")), "{body}");
    }
    assert_eq!(s.get("/db/_design/x").0, 404);
}

/// The subset pattern: a review is its own document, and the product embeds the newest two.
const ADD_REVIEW: &str = "function (review, db, userCtx) {
  review.type = 'review';
  review.review_author = userCtx.name;
  db.put(review);
  var product = db.get(review.product_id);
  if (!product) throw({forbidden: 'no product ' + review.product_id});
  product.reviews = [review].concat(product.reviews).slice(0, this.newest);
  db.put(product);
  return {reviews: product.reviews.length};
}";

fn shop() -> Server {
    let s = Server::start();
    s.create_db("shop");
    let ddoc = json!({"newest": 2, "procedures": {"addReview": ADD_REVIEW,
        "fails": "function (arg, db) { db.put({_id: 'x'}); throw new Error('broken'); }",
        "runaway": "function (arg, db) { db.put({_id: 'x'}); for (;;) {} }",
        "hog": "function (arg, db) { db.put({_id: 'x'}); var a = []; for (;;) a.push([a.length]); }"}});
    s.put_doc("shop", "_design/shop", &ddoc);
    s.put_doc("shop", "widget", &json!({"name": "Super Widget", "reviews": []}));
    s
}

fn review(id: u32, product: &str) -> Value {
    json!({"_id": format!("review{id}"), "product_id": product, "review_text": "Amazing!"})
}

#[test]
fn a_procedure_writes_a_review_and_its_product_together() {
    let s = shop();
    let path = "/shop/_design/shop/_procedures/addReview";
    for id in [1, 2, 3] {
        assert_eq!(s.post(path, &review(id, "widget")), (200, json!({"reviews": id.min(2)})));
    }
    let product = s.get_doc("shop", "widget");
    let newest: Vec<&str> = product["reviews"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["_id"].as_str())
        .collect();
    assert_eq!(newest, ["review3", "review2"]);
    assert_eq!(product["reviews"][0]["review_author"], "admin");
    assert_eq!(s.get_doc("shop", "review1")["type"], "review");
    assert_eq!(crate::harness::rev_gen(product["_rev"].as_str().unwrap_or_default()), 4);
    // The review is buffered before the product is found missing: nothing is written.
    assert_error(s.post(path, &review(4, "gadget")), 403, "forbidden", "no product gadget");
    assert_eq!(s.get("/shop/review4").0, 404);
}

/// Running past the time or the memory limit stops a procedure like an exception does.
#[test]
fn a_procedure_that_throws_or_runs_away_leaves_nothing() {
    let s = shop();
    let (status, body) = s.post("/shop/_design/shop/_procedures/fails", &json!(null));
    assert_eq!((status, body["error"].as_str()), (500, Some("unknown_error")), "{body}");
    assert_eq!(body["reason"], "Error: broken");
    let (status, body) = s.post("/shop/_design/shop/_procedures/runaway", &json!({}));
    assert_eq!((status, body["error"].as_str()), (500, Some("timeout")), "{body}");
    assert!(body["reason"].as_str().unwrap_or_default().contains("time limit"), "{body}");
    let (status, body) = s.post("/shop/_design/shop/_procedures/hog", &json!({}));
    assert_eq!((status, body["error"].as_str()), (500, Some("os_process_error")), "{body}");
    assert!(body["reason"].as_str().unwrap_or_default().contains("out of memory"), "{body}");
    assert_eq!(s.get("/shop/x").0, 404);
    assert_error(
        s.post("/shop/_design/shop/_procedures/nope", &json!({})),
        404,
        "not_found",
        "missing procedure nope on design doc _design/shop",
    );
    assert_error_kind(s.post("/shop/_design/none/_procedures/nope", &json!({})), 404, "not_found");
    // Members may call procedures; others may not.
    assert_eq!(s.put("/shop/_security", &json!({"members": {"names": ["someone"]}})).0, 200);
    let anon = send(s.anon_req(Method::POST, "/shop/_design/shop/_procedures/addReview"));
    assert_eq!(anon.0, 401, "{}", anon.1);
}

/// Counts the books with `db.find` (a scan), then spins for `arg.spin_ms`.
const COUNT_BOOKS: &str = "function (arg, db) {
  var books = db.find({type: 'book'}).length;
  var until = Date.now() + arg.spin_ms;
  while (Date.now() < until) {}
  var count = db.get('count') || {_id: 'count'};
  count.books = books;
  db.put(count);
  return books;
}";

/// A book inserted while a procedure that scanned the books runs is a phantom for its
/// snapshot: its commit fails and it runs again. The count it stores is right however the
/// two interleave (without phantom protection it would miss the book whenever the insert
/// lands during the spin).
#[test]
fn a_phantom_makes_a_procedure_run_again() {
    let s = library();
    s.put_doc("library", "b1", &book("b1"));
    s.put_doc("library", "_design/count", &json!({"procedures": {"books": COUNT_BOOKS}}));
    thread::scope(|scope| {
        let counting = scope
            .spawn(|| s.post("/library/_design/count/_procedures/books", &json!({"spin_ms": 400})));
        thread::sleep(std::time::Duration::from_millis(100));
        s.put_doc("library", "b2", &book("b2"));
        assert_eq!(counting.join().expect("procedure call").0, 200);
    });
    assert_eq!(s.get_doc("library", "count")["books"], 2);
    assert_eq!(count_of_books(&s), 2);
}

/// A procedure that buffers more than the transaction size limit (16 MiB) is aborted.
#[test]
fn a_procedure_past_the_size_limit_is_aborted_and_leaves_nothing() {
    let s = shop();
    let big = "function (arg, db) {
      var text = new Array(512 * 1024 + 1).join('x');
      for (var i = 0; i < 40; i++) db.put({_id: 'big' + i, text: text});
    }";
    s.put_doc("shop", "_design/big", &json!({"procedures": {"big": big}}));
    let (status, body) = s.post("/shop/_design/big/_procedures/big", &json!(null));
    assert_eq!((status, body["error"].as_str()), (409, Some("transaction_aborted")), "{body}");
    assert_eq!(s.get("/shop/big0").0, 404);
}
