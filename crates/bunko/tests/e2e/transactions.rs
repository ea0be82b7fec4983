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
