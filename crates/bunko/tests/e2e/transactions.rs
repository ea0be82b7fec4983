//! `POST /_transaction` (issue 15, point 3): writes across databases applied all or none,
//! expectations on revisions checked at commit, and durability: after `kill -9` every
//! acknowledged transaction is there whole, and the invariant the transactions keep holds.

use reqwest::Method;
use serde_json::{Value, json};

use crate::harness::{Server, assert_error, send};

fn txn(s: &Server, body: &Value) -> (u16, Value) {
    s.post("/_transaction", body)
}

fn rev(s: &Server, db: &str, id: &str) -> String {
    s.get_doc(db, id)["_rev"].as_str().unwrap_or_default().to_string()
}

/// The modeling guide's case: a book and its publisher's `countOfBooks` change together.
#[test]
fn a_book_and_its_publishers_count_change_together() {
    let s = Server::start();
    s.create_db("publishers");
    s.create_db("books");
    s.put_doc("publishers", "mspress", &json!({"name": "Microsoft Press", "countOfBooks": 0}));
    let body = json!({"docs": [
        {"db": "publishers", "doc": {"_id": "mspress", "_rev": rev(&s, "publishers", "mspress"),
                                     "name": "Microsoft Press", "countOfBooks": 1}},
        {"db": "books", "doc": {"_id": "b1", "title": "Code Complete", "pub_id": "mspress"}}]});
    let (status, answer) = txn(&s, &body);
    assert_eq!(status, 201, "{answer}");
    assert_eq!(answer["ok"], true);
    let results = answer["results"].as_array().cloned().unwrap_or_default();
    assert_eq!(results.len(), 2);
    assert_eq!(
        (results[0]["db"].as_str(), results[0]["id"].as_str()),
        (Some("publishers"), Some("mspress"))
    );
    assert!(results[0]["rev"].as_str().is_some_and(|r| r.starts_with("2-")), "{answer}");
    assert_eq!(s.get_doc("publishers", "mspress")["countOfBooks"], 1);
    assert_eq!(s.get_doc("books", "b1")["pub_id"], "mspress");
    // Both writes are ordinary edits: they show in `_changes`.
    let (_, changes) = s.get("/books/_changes");
    assert_eq!(changes["results"][0]["id"], "b1");
}

#[test]
fn a_stale_revision_or_a_changed_expectation_writes_nothing() {
    let s = Server::start();
    s.create_db("a");
    s.create_db("b");
    let old = s.put_doc("a", "x", &json!({"n": 1}));
    s.put_doc("a", "x", &json!({"_rev": old, "n": 2}));
    let stale = json!({"docs": [{"db": "b", "doc": {"_id": "y"}},
                                {"db": "a", "doc": {"_id": "x", "_rev": old, "n": 3}}]});
    assert_error(txn(&s, &stale), 409, "conflict", "a/x: Document update conflict.");
    assert_eq!(s.get("/b/y").0, 404);
    let expect = json!({"docs": [{"db": "b", "doc": {"_id": "y"}}],
                        "expect": [{"db": "a", "id": "x", "rev": old}]});
    assert_error(
        txn(&s, &expect),
        409,
        "conflict",
        "transaction conflict: document x changed in a",
    );
    let current = rev(&s, "a", "x");
    let expect = json!({"docs": [{"db": "b", "doc": {"_id": "y"}}],
                        "expect": [{"db": "a", "id": "x", "rev": current}, {"db": "a", "id": "none", "rev": null}]});
    assert_eq!(txn(&s, &expect).0, 201);
    assert_eq!(s.get("/b/y").0, 200);
}

#[test]
fn bad_requests_and_users_without_rights_change_nothing() {
    let s = Server::start_with(&["--pbkdf2-iterations", "10"], &[]);
    s.create_db("a");
    assert_error(
        txn(&s, &json!({"docs": 1})),
        400,
        "bad_request",
        "`docs` must be an array of {db, doc}.",
    );
    assert_error(
        txn(&s, &json!({"docs": [{"db": "a"}]})),
        400,
        "bad_request",
        "Each write needs a `doc` object.",
    );
    assert_error(
        txn(&s, &json!({"docs": [{"db": "a", "doc": {}}]})),
        400,
        "bad_request",
        "Each `doc` needs an `_id`.",
    );
    let (status, _) = txn(&s, &json!({"docs": [{"db": "nope", "doc": {"_id": "x"}}]}));
    assert_eq!(status, 404);
    let plain =
        send(s.req(Method::POST, "/_transaction").header("Content-Type", "text/plain").body("{}"));
    assert_eq!(plain.0, 415);
    let user = json!({"_id": "org.couchdb.user:bob", "name": "bob", "type": "user", "roles": [], "password": "pw"});
    assert_eq!(s.post("/_users", &user).0, 201);
    let design = json!({"docs": [{"db": "a", "doc": {"_id": "_design/x", "views": {}}}]});
    let (status, body) = send(s.user_req(Method::POST, "/_transaction", "bob", "pw").json(&design));
    assert_eq!((status, body["error"].as_str()), (403, Some("forbidden")), "{body}");
    assert_eq!(s.get("/a/_design/x").0, 404);
}

/// Concurrent transfers over HTTP, then `kill -9`: the total is intact and every
/// acknowledged transfer is in the data after the restart.
#[test]
fn acknowledged_transfers_survive_kill_9_with_the_total_intact() {
    let mut s = Server::start();
    s.create_db("bank");
    for i in 0..4 {
        s.put_doc("bank", &format!("acct-{i}"), &json!({"balance": 100}));
    }
    let acked = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for t in 0..4usize {
            let (s, acked) = (&s, &acked);
            scope.spawn(move || {
                for n in 0..15usize {
                    let (from, to) =
                        (format!("acct-{}", (t + n) % 4), format!("acct-{}", (t + n + 1) % 4));
                    if let Some(marker) = transfer(s, &from, &to, t, n) {
                        acked.lock().map(|mut a| a.push(marker)).ok();
                    }
                }
            });
        }
    });
    s.kill9();
    s.restart();
    let total: i64 = (0..4)
        .map(|i| s.get_doc("bank", &format!("acct-{i}"))["balance"].as_i64().unwrap_or(0))
        .sum();
    assert_eq!(total, 400);
    let acked = acked.into_inner().unwrap_or_default();
    assert!(acked.len() >= 10, "only {} transfers committed", acked.len());
    for marker in acked {
        assert_eq!(s.get(&format!("/bank/{marker}")).0, 200, "acknowledged {marker} lost");
    }
}

/// One read-modify-write transfer with a marker document; `Some(marker)` once acknowledged.
fn transfer(s: &Server, from: &str, to: &str, t: usize, n: usize) -> Option<String> {
    for _ in 0..20 {
        let (a, b) = (s.get_doc("bank", from), s.get_doc("bank", to));
        let marker = format!("transfer-{t}-{n}");
        let body = json!({"docs": [
            {"db": "bank", "doc": {"_id": from, "_rev": a["_rev"], "balance": a["balance"].as_i64().unwrap_or(0) - 5}},
            {"db": "bank", "doc": {"_id": to, "_rev": b["_rev"], "balance": b["balance"].as_i64().unwrap_or(0) + 5}},
            {"db": "bank", "doc": {"_id": marker}}]});
        match s.post("/_transaction", &body) {
            (201, _) => return Some(marker),
            (409, _) => continue,
            (status, other) => panic!("transfer failed: {status} {other}"),
        }
    }
    None
}

/// The subset pattern (seed 001): a new review document and the product's embedded newest
/// reviews change together; a product edited meanwhile fails the whole transaction.
#[test]
fn a_review_and_its_products_newest_reviews_change_together() {
    let s = Server::start();
    s.create_db("shop");
    let review = |id: u32, text: &str| {
        json!({"_id": format!("review-{id}"), "product_id": "widget", "review_id": id,
               "review_author": "Kristina", "review_text": text})
    };
    let old = review(785, "Nice product. Slow shipping.");
    let rev = s.put_doc("shop", "widget", &json!({"name": "Super Widget", "reviews": [old]}));
    let new = review(786, "This is indeed an amazing widget.");
    let product = json!({"_id": "widget", "_rev": rev, "name": "Super Widget",
                         "reviews": [new.clone(), review(785, "Nice product. Slow shipping.")]});
    let body = json!({"docs": [{"db": "shop", "doc": new}, {"db": "shop", "doc": product}]});
    assert_eq!(txn(&s, &body).0, 201);
    assert_eq!(s.get_doc("shop", "widget")["reviews"][0]["review_id"], 786);
    assert_eq!(s.get_doc("shop", "review-786")["review_text"], "This is indeed an amazing widget.");
    // The same edit again names a revision that is no longer current: neither is written.
    let mut again = body.clone();
    again["docs"][0]["doc"]["_id"] = json!("review-787");
    assert_error(txn(&s, &again), 409, "conflict", "shop/widget: Document update conflict.");
    assert_eq!(s.get("/shop/review-787").0, 404);
}

/// The single-collection pattern (seed 002): enrolling a student changes the class's and
/// the student's `links` together, and the compound query finds both sides.
#[test]
fn a_class_roster_and_a_students_links_change_together() {
    let s = Server::start();
    s.create_db("students_classes");
    let class = json!({"doc_type": "class", "class_name": "Introduction to Programming",
                       "links": [{"target": "CS101-001", "doc_type": "class"}]});
    let student = json!({"doc_type": "student", "first_name": "Eric",
                         "links": [{"target": "S12345", "doc_type": "student"}]});
    let class_rev = s.put_doc("students_classes", "CS101-001", &class);
    let student_rev = s.put_doc("students_classes", "S12345", &student);
    let mut class = class;
    class["_id"] = json!("CS101-001");
    class["_rev"] = json!(class_rev);
    class["links"] = json!([{"target": "CS101-001", "doc_type": "class"},
                             {"target": "S12345", "doc_type": "student"}]);
    let mut student = student;
    student["_id"] = json!("S12345");
    student["_rev"] = json!(student_rev);
    student["links"] = json!([{"target": "S12345", "doc_type": "student"},
                               {"target": "CS101-001", "doc_type": "class"}]);
    let body = json!({"docs": [{"db": "students_classes", "doc": class},
                               {"db": "students_classes", "doc": student}]});
    assert_eq!(txn(&s, &body).0, 201);
    let query = json!({"selector": {"links": {"$elemMatch": {"target": "CS101-001"}}}});
    let (status, found) = s.post("/students_classes/_find", &query);
    assert_eq!(status, 200, "{found}");
    let mut ids: Vec<&str> =
        found["docs"].as_array().into_iter().flatten().filter_map(|d| d["_id"].as_str()).collect();
    ids.sort();
    assert_eq!(ids, ["CS101-001", "S12345"]);
}

/// Pairs of transactions that edit the same document at the same revision, sent at once:
/// exactly one of each pair commits, and the loser's other write is not there.
#[test]
fn exactly_one_of_two_conflicting_transactions_commits() {
    let s = Server::start();
    s.create_db("a");
    let pairs = 8;
    let revs: Vec<String> =
        (0..pairs).map(|i| s.put_doc("a", &format!("x{i}"), &json!({}))).collect();
    let barrier = std::sync::Barrier::new(2 * pairs);
    let outcomes = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for (i, rev) in revs.iter().enumerate() {
            for side in ["left", "right"] {
                let (s, barrier, outcomes) = (&s, &barrier, &outcomes);
                scope.spawn(move || {
                    let body = json!({"docs": [
                        {"db": "a", "doc": {"_id": format!("x{i}"), "_rev": rev, "by": side}},
                        {"db": "a", "doc": {"_id": format!("{side}{i}")}}]});
                    barrier.wait();
                    let (status, _) = txn(s, &body);
                    outcomes.lock().map(|mut o| o.push((i, side, status))).ok();
                });
            }
        }
    });
    let outcomes = outcomes.into_inner().unwrap_or_default();
    for i in 0..pairs {
        let mine: Vec<_> = outcomes.iter().filter(|(n, ..)| *n == i).collect();
        let won: Vec<_> = mine.iter().filter(|(.., status)| *status == 201).collect();
        assert_eq!(won.len(), 1, "pair {i}: {mine:?}");
        assert!(mine.iter().all(|(.., status)| [201, 409].contains(status)), "{mine:?}");
        let winner = won[0].1;
        assert_eq!(s.get_doc("a", &format!("x{i}"))["by"], winner);
        let loser = if winner == "left" { "right" } else { "left" };
        assert_eq!(s.get(&format!("/a/{loser}{i}")).0, 404);
    }
}
