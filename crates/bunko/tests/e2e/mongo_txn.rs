//! MongoDB sessions, multi-document transactions and retryable writes through pymongo's
//! `with_transaction` and `start_session` with default settings (issue 15, point 2), on the
//! seeds' consistency cases: the subset pattern (shared seed 001: a review and its
//! product's embedded newest reviews), `countOfBooks` beside the book it counts (seed 000)
//! across two MongoDB databases, concurrent transactions on one document, aborts, retried
//! writes, and `validate_doc_update` refusing a write inside a transaction.

use serde_json::{Value, json};

use crate::harness::Server;
use crate::mongo::python;

/// Python helpers: HTTP reads as the admin, and an error's code and labels.
const HELPERS: &str = r#"
import base64, threading, urllib.request, urllib.error, urllib.parse
from bson import Int64
from pymongo.read_concern import ReadConcern
from pymongo.write_concern import WriteConcern

def http_get(path):
    req = urllib.request.Request(os.environ["BUNKO_URL"] + urllib.parse.quote(path))
    token = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    req.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())

def failure(fn):
    try:
        fn()
    except OperationFailure as e:
        labels = sorted(l for l in ("TransientTransactionError", "UnknownTransactionCommitResult") if e.has_error_label(l))
        return [e.code, labels]
    return None
"#;

fn run(server: &Server, script: &str) -> Option<Value> {
    python(server, &format!("{HELPERS}\n{script}"))
}

/// (a) + (f): the review document and the product's embedded newest reviews are written in
/// one transaction; inside it the transaction sees its own writes, while another session
/// and HTTP see neither until the commit, and both after.
#[test]
fn subset_pattern_review_and_product_commit_together() {
    let server = Server::start();
    let script = r#"
c, other = client(), client()
shop = c.shop
shop.products.insert_one({"_id": "p1", "name": "Super Widget", "reviews": [
    {"review_id": 785, "review_author": "Trina", "review_text": "Nice product. Slow shipping."}]})
shop.reviews.insert_one({"_id": "r785", "review_id": 785, "product_id": "p1", "review_author": "Trina"})
review = {"_id": "r786", "review_id": 786, "product_id": "p1", "review_author": "Kristina",
          "review_text": "This is indeed an amazing widget."}
seen = {}
def add_review(s):
    shop.reviews.insert_one(review, session=s)
    product = shop.products.find_one({"_id": "p1"}, session=s)
    embedded = {k: review[k] for k in ("review_id", "review_author", "review_text")}
    newest = ([embedded] + product["reviews"])[:10]
    shop.products.update_one({"_id": "p1"}, {"$set": {"reviews": newest}}, session=s)
    seen["own_reviews"] = sorted(r["_id"] for r in shop.reviews.find({"product_id": "p1"}, session=s))
    seen["own_embedded"] = len(shop.products.find_one({"_id": "p1"}, session=s)["reviews"])
    seen["other_review"] = other.shop.reviews.find_one({"_id": "r786"})
    seen["other_embedded"] = len(other.shop.products.find_one({"_id": "p1"})["reviews"])
    seen["http_review"] = http_get("/shop$reviews/r786")[0]
    seen["http_embedded"] = len(http_get("/shop$products/p1")[1]["reviews"])
with c.start_session() as s:
    s.with_transaction(add_review)
seen["after_review"] = other.shop.reviews.find_one({"_id": "r786"})["review_author"]
seen["after_embedded"] = [r["review_id"] for r in other.shop.products.find_one({"_id": "p1"})["reviews"]]
print(json.dumps(seen))
"#;
    let Some(seen) = run(&server, script) else { return };
    assert_eq!(
        seen,
        json!({"own_reviews": ["r785", "r786"], "own_embedded": 2,
               "other_review": null, "other_embedded": 1,
               "http_review": 404, "http_embedded": 1,
               "after_review": "Kristina", "after_embedded": [786, 785]})
    );
    let product = server.get_doc("shop$products", "p1");
    assert_eq!(product["reviews"][0]["review_author"], "Kristina", "{product}");
    assert!(product["_rev"].as_str().is_some_and(|r| r.starts_with("2-")), "{product}");
    assert_eq!(server.get_doc("shop$reviews", "r786")["product_id"], "p1");
}

/// (b): a book in one database and its author's `countOfBooks` in another change together.
#[test]
fn count_of_books_and_the_book_commit_together_across_databases() {
    let server = Server::start();
    let script = r#"
c = client()
authors, books = c.people.authors, c.library.books
authors.insert_one({"_id": "a1", "firstName": "Thomas", "lastName": "Andersen", "countOfBooks": 0, "books": []})
def publish(book):
    def callback(s):
        books.insert_one(book, session=s)
        author = authors.find_one({"_id": "a1"}, session=s)
        authors.update_one({"_id": "a1"}, {"$inc": {"countOfBooks": 1},
                                           "$set": {"books": author["books"] + [book["_id"]]}}, session=s)
    with c.start_session() as s:
        s.with_transaction(callback, read_concern=ReadConcern("snapshot"),
                           write_concern=WriteConcern("majority"))
for i in (1, 2, 3):
    publish({"_id": f"b{i}", "name": f"Azure Cosmos DB 10{i}", "authors": [{"id": "a1"}]})
a1 = authors.find_one({"_id": "a1"})
print(json.dumps({"count": a1["countOfBooks"], "books": a1["books"], "stored": len(list(books.find()))}))
"#;
    let Some(result) = run(&server, script) else { return };
    assert_eq!(result, json!({"count": 3, "books": ["b1", "b2", "b3"], "stored": 3}));
    assert_eq!(server.get_doc("people$authors", "a1")["countOfBooks"], 3);
    assert_eq!(server.get_doc("library$books", "b3")["name"], "Azure Cosmos DB 103");
}

/// (c): a transaction whose document another session changed and committed meanwhile fails
/// with WriteConflict (112) labelled TransientTransactionError, at the write or at commit,
/// as does one whose query a concurrent insert would have answered differently (a phantom),
/// and a write to a document another open transaction has written fails at the write;
/// `with_transaction` retries it, so both effects land. Many threads incrementing one
/// counter through `with_transaction` lose no increment.
///
/// In the first case the other session's writes fail while the first transaction is open,
/// until that transaction passes its lifetime and is aborted (as in MongoDB, where this
/// takes `transactionLifetimeLimitSeconds`, 60 s by default); the server here has a
/// 5-second lifetime so that the test does not wait a minute.
#[test]
fn conflicting_transactions_are_retried_by_with_transaction() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("bunko.toml");
    std::fs::write(&path, "[limits]\ntransaction_lifetime = 5\n").expect("config");
    let server = Server::start_with(&["--config", path.to_str().expect("utf-8 path")], &[]);
    let script = r#"
c = client()
accounts = c.bank.accounts
accounts.insert_many([{"_id": "alice", "balance": 100}, {"_id": "bob", "balance": 0}])
attempts = []
def withdraw(s):
    attempts.append(1)
    alice = accounts.find_one({"_id": "alice"}, session=s)
    accounts.update_one({"_id": "alice"}, {"$set": {"balance": alice["balance"] - 10}}, session=s)
    if len(attempts) == 1:
        # Another session changes the same document and commits first.
        with c.start_session() as s2:
            s2.with_transaction(lambda s2: accounts.update_one({"_id": "alice"}, {"$inc": {"balance": -5}}, session=s2))
with c.start_session() as s:
    s.with_transaction(withdraw)
# A write after a concurrent commit fails at once.
with c.start_session() as s:
    s.start_transaction()
    accounts.find_one({"_id": "bob"}, session=s)
    accounts.update_one({"_id": "bob"}, {"$inc": {"balance": 1}})
    at_write = failure(lambda: accounts.update_one({"_id": "bob"}, {"$inc": {"balance": 1}}, session=s))
    s.abort_transaction()
# Two open transactions on one document: the second write fails at once (as in MongoDB),
# which aborts its transaction.
s1, s2 = c.start_session(), c.start_session()
s1.start_transaction(); s2.start_transaction()
accounts.update_one({"_id": "bob"}, {"$inc": {"balance": 10}}, session=s1)
open_write = failure(lambda: accounts.update_one({"_id": "bob"}, {"$inc": {"balance": 20}}, session=s2))
s1.commit_transaction()
at_commit = failure(s2.commit_transaction)
# A phantom: a query saw no rich account, another client then inserted one.
with c.start_session() as s:
    s.start_transaction()
    rich = list(accounts.find({"balance": {"$gt": 1000}}, session=s))
    accounts.insert_one({"_id": "carol", "balance": 5000})
    accounts.update_one({"_id": "bob"}, {"$set": {"audited": len(rich)}}, session=s)
    phantom = failure(s.commit_transaction)
# Eight threads, five increments each.
accounts.insert_one({"_id": "counter", "n": 0})
def worker():
    client_ = client()
    for _ in range(5):
        with client_.start_session() as s:
            s.with_transaction(lambda s: client_.bank.accounts.update_one({"_id": "counter"}, {"$inc": {"n": 1}}, session=s))
threads = [threading.Thread(target=worker) for _ in range(8)]
[t.start() for t in threads]; [t.join() for t in threads]
print(json.dumps({"attempts": len(attempts), "alice": accounts.find_one({"_id": "alice"})["balance"],
                  "at_write": at_write, "open_write": open_write, "at_commit": at_commit,
                  "phantom": phantom,
                  "bob": accounts.find_one({"_id": "bob"})["balance"],
                  "counter": accounts.find_one({"_id": "counter"})["n"]}))
"#;
    let Some(result) = run(&server, script) else { return };
    let transient = json!([112, ["TransientTransactionError"]]);
    assert_eq!(
        result,
        json!({"attempts": 2, "alice": 85, "at_write": transient, "open_write": transient,
               "at_commit": [251, ["TransientTransactionError"]],
               "phantom": transient,
               "bob": 11, "counter": 40})
    );
}

/// (d): an aborted transaction leaves nothing; the transaction state machine answers
/// MongoDB's codes (a retried commit is ok again).
#[test]
fn aborted_transactions_leave_nothing_and_errors_match_mongodb() {
    let server = Server::start();
    let script = r#"
c = client()
items = c.shop.items
items.insert_one({"_id": "base", "v": 1})
with c.start_session() as s:
    s.start_transaction()
    items.insert_one({"_id": "x1"}, session=s)
    items.update_one({"_id": "base"}, {"$set": {"v": 2}}, session=s)
    items.delete_one({"_id": "base"}, session=s)
    s.abort_transaction()
out = {"x1": items.find_one({"_id": "x1"}), "base": items.find_one({"_id": "base"})["v"]}
# Explicit numbers above any the driver used on a pooled session id.
with c.start_session() as s:
    def cmd(name, *args, **kw):
        return c.shop.command(name, *args, session=s, **kw)
    def end(name, n):
        return c.admin.command(name, txnNumber=Int64(n), autocommit=False, session=s)
    cmd("insert", "items", documents=[{"_id": "t1"}], txnNumber=Int64(101), startTransaction=True,
        autocommit=False, readConcern={"level": "snapshot"})
    out["in_txn"] = cmd("find", "items", filter={"_id": "t1"}, txnNumber=Int64(101), autocommit=False)["cursor"]["firstBatch"]
    end("commitTransaction", 101)
    out["commit_again"] = end("commitTransaction", 101)["ok"]
    out["abort_committed"] = failure(lambda: end("abortTransaction", 101))
    out["unknown"] = failure(lambda: cmd("find", "items", txnNumber=Int64(102), autocommit=False))
    cmd("insert", "items", documents=[{"_id": "t3"}], txnNumber=Int64(103), startTransaction=True, autocommit=False)
    end("abortTransaction", 103)
    out["commit_aborted"] = failure(lambda: end("commitTransaction", 103))
    out["too_old"] = failure(lambda: cmd("insert", "items", documents=[{"_id": "t2"}], txnNumber=Int64(102),
                                         startTransaction=True, autocommit=False))
    out["autocommit_true"] = failure(lambda: cmd("find", "items", txnNumber=Int64(104), autocommit=True))
    cmd("insert", "items", documents=[{"_id": "t5"}], txnNumber=Int64(105), startTransaction=True, autocommit=False)
    out["late_read_concern"] = failure(lambda: cmd("find", "items", txnNumber=Int64(105), autocommit=False,
                                                   readConcern={"level": "snapshot"}))
    out["write_concern_inside"] = failure(lambda: cmd("insert", "items", documents=[{"_id": "t6"}], txnNumber=Int64(105),
                                                      autocommit=False, writeConcern={"w": "majority"}))
    out["not_in_txn"] = failure(lambda: cmd("listIndexes", "items", txnNumber=Int64(105), autocommit=False))
    out["after_error"] = failure(lambda: end("commitTransaction", 105))
out["t"] = sorted(d["_id"] for d in items.find({"_id": {"$in": ["t1", "t2", "t3", "t5"]}}))
print(json.dumps(out))
"#;
    let Some(result) = run(&server, script) else { return };
    let no_such = json!([251, ["TransientTransactionError"]]);
    assert_eq!(
        result,
        json!({"x1": null, "base": 1, "in_txn": [{"_id": "t1"}], "commit_again": 1.0,
               "abort_committed": [256, []], "unknown": no_such, "commit_aborted": no_such,
               "too_old": [225, []], "autocommit_true": [72, []], "late_read_concern": [72, []],
               "write_concern_inside": [72, []], "not_in_txn": [263, []],
               "after_error": no_such, "t": ["t1"]})
    );
    assert_eq!(server.get_doc("shop$items", "base")["v"], 1);
}

/// (e): a write retried with the same `(lsid, txnNumber)` is applied once and answers the
/// first reply; an older number is refused.
#[test]
fn retried_writes_are_applied_once() {
    let server = Server::start();
    let script = r#"
c = client()
out = {}
with c.start_session() as s:
    def insert(n, doc_id):
        return c.shop.command("insert", "log", documents=[{"_id": doc_id, "n": 1}], txnNumber=Int64(n), session=s)
    def inc(n):
        return c.shop.command("update", "log", updates=[{"q": {"_id": "a"}, "u": {"$inc": {"n": 1}}}],
                              txnNumber=Int64(n), session=s)
    out["first"] = insert(7, "a")["n"]
    out["retry"] = insert(7, "a")["n"]
    inc(8); inc(8); inc(8)
    out["older"] = failure(lambda: insert(6, "b"))
# The driver's own retryable writes (on by default) go through the same path.
client().shop.log.insert_one({"_id": "c"})
out["docs"] = [(d["_id"], d.get("n")) for d in c.shop.log.find()]
print(json.dumps(out))
"#;
    let Some(result) = run(&server, script) else { return };
    assert_eq!(
        result,
        json!({"first": 1, "retry": 1, "older": [225, []], "docs": [["a", 2], ["c", null]]})
    );
    // One insert and one update: the document's second revision.
    let a = server.get_doc("shop$log", "a");
    assert!(a["_rev"].as_str().is_some_and(|r| r.starts_with("2-")), "{a}");
}

/// (g): `validate_doc_update` of a design document written over HTTP applies to writes
/// inside a MongoDB transaction: the commit fails with DocumentValidationFailure (121) and
/// nothing of the transaction lands.
#[test]
fn validate_doc_update_refuses_a_transaction_whole() {
    let server = Server::start();
    server.create_db("shop$orders");
    let ddoc = "function(newDoc, oldDoc, userCtx) { if (newDoc.qty !== undefined && newDoc.qty < 0) { throw({forbidden: 'qty must not be negative'}); } }";
    server.put_doc("shop$orders", "_design/rules", &json!({"validate_doc_update": ddoc}));
    let script = r#"
c = client()
orders, stock = c.shop.orders, c.shop.stock
stock.insert_one({"_id": "widget", "left": 10})
def order(s):
    orders.insert_one({"_id": "o1", "qty": 2}, session=s)
    stock.update_one({"_id": "widget"}, {"$inc": {"left": -2}}, session=s)
    orders.insert_one({"_id": "o2", "qty": -1}, session=s)
with c.start_session() as s:
    refused = failure(lambda: s.with_transaction(order))
    ok = s.with_transaction(lambda s: orders.insert_one({"_id": "o3", "qty": 1}, session=s))
# Outside a transaction the same refusal is DocumentValidationFailure too.
alone = code_of(lambda: orders.insert_one({"_id": "o4", "qty": -5}))
print(json.dumps({"refused": refused, "orders": sorted(d["_id"] for d in orders.find()),
                  "left": stock.find_one({"_id": "widget"})["left"], "alone": alone}))
"#;
    let Some(result) = run(&server, script) else { return };
    let expected = json!({"refused": [121, []], "orders": ["o3"], "left": 10, "alone": 121});
    assert_eq!(result, expected);
    assert_eq!(server.get("/shop$orders/o1").0, 404);
}

/// (g): triggers fire at the commit of a MongoDB transaction: the trigger keeping
/// `countOfBooks` counts the transaction's books, and the one refusing dangling references
/// fails the whole transaction with DocumentValidationFailure (121).
#[test]
fn triggers_fire_at_commit_of_a_mongo_transaction() {
    use crate::procedures::{COUNT, REFERENCES};
    let server = Server::start();
    server.create_db("library$books");
    let ddoc = json!({"triggers": {"references": REFERENCES, "countOfBooks": COUNT}});
    server.put_doc("library$books", "_design/library", &ddoc);
    server.put_doc("library$books", "mspress", &json!({"type": "publisher", "countOfBooks": 0}));
    let script = r#"
c = client()
books = c.library.books
def book(i, publisher="mspress"):
    return {"_id": f"b{i}", "type": "book", "name": "Azure Cosmos DB 101", "pub-id": publisher}
with c.start_session() as s:
    s.with_transaction(lambda s: books.insert_many([book(1), book(2)], session=s))
    dangling = failure(lambda: s.with_transaction(lambda s: books.insert_many([book(3), book(4, "nobody")], session=s)))
print(json.dumps({"dangling": dangling, "count": books.find_one({"_id": "mspress"})["countOfBooks"],
                  "books": sorted(d["_id"] for d in books.find({"type": "book"}))}))
"#;
    let Some(result) = run(&server, script) else { return };
    assert_eq!(result, json!({"dangling": [121, []], "count": 2, "books": ["b1", "b2"]}));
    assert_eq!(server.get_doc("library$books", "mspress")["countOfBooks"], 2);
}

/// Triggers read the fields of documents inserted outside a transaction too (an insert's
/// body goes to the engine printed, and is parsed for them): `countOfBooks` counts the
/// books of an `insert_many`, and a dangling reference is refused with 121.
#[test]
fn triggers_read_the_fields_of_a_plain_insert() {
    use crate::procedures::{COUNT, REFERENCES};
    let server = Server::start();
    server.create_db("library$books");
    let ddoc = json!({"triggers": {"references": REFERENCES, "countOfBooks": COUNT}});
    server.put_doc("library$books", "_design/library", &ddoc);
    server.put_doc("library$books", "mspress", &json!({"type": "publisher", "countOfBooks": 0}));
    let script = r#"
books = client().library.books
def book(i, publisher="mspress"):
    return {"_id": f"b{i}", "type": "book", "name": "Azure Cosmos DB 101", "pub-id": publisher}
books.insert_many([book(1), book(2)])
dangling = code_of(lambda: books.insert_one(book(3, "nobody")))
print(json.dumps({"dangling": dangling, "count": books.find_one({"_id": "mspress"})["countOfBooks"],
                  "books": sorted(d["_id"] for d in books.find({"type": "book"}))}))
"#;
    let Some(result) = run(&server, script) else { return };
    assert_eq!(result, json!({"dangling": 121, "count": 2, "books": ["b1", "b2"]}));
}

/// A transaction past its lifetime (`[limits] transaction_lifetime`, MongoDB's
/// `transactionLifetimeLimitSeconds`, here 1 s) is aborted: its next command and its commit
/// are NoSuchTransaction with TransientTransactionError, and nothing of it lands.
#[test]
fn a_transaction_past_its_lifetime_is_aborted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("bunko.toml");
    std::fs::write(&path, "[limits]\ntransaction_lifetime = 1\n").expect("config");
    let server = Server::start_with(&["--config", path.to_str().expect("utf-8 path")], &[]);
    let script = r#"
c = client()
items = c.shop.items
limit = c.admin.command("getParameter", 1, transactionLifetimeLimitSeconds=1)["transactionLifetimeLimitSeconds"]
with c.start_session() as s:
    s.start_transaction()
    items.insert_one({"_id": "late"}, session=s)
    time.sleep(1.5)
    next_op = failure(lambda: items.insert_one({"_id": "later"}, session=s))
    commit = failure(s.commit_transaction)
print(json.dumps({"limit": limit, "next": next_op, "commit": commit, "items": list(items.find())}))
"#;
    let Some(result) = run(&server, &format!("import time\n{script}")) else { return };
    let aborted = json!([251, ["TransientTransactionError"]]);
    assert_eq!(result, json!({"limit": 1, "next": aborted, "commit": aborted, "items": []}));
}

/// `create`, `createIndexes` and an insert into a missing collection inside a transaction
/// (MongoDB 4.4+): the collection, its documents and its index appear when the transaction
/// commits, not before, and not at all if it aborts (the transaction itself reads and
/// writes it at once); an existing collection is `NamespaceExists` (48) and takes no new
/// index (263).
#[test]
fn collections_and_indexes_created_in_a_transaction_appear_at_commit() {
    let server = Server::start();
    let script = r#"
c = client()
shop = c.shop
out = {}
with c.start_session() as s:
    s.start_transaction()
    shop.create_collection("orders", session=s)
    shop.orders.create_index("customer", session=s)
    out["before"] = [shop.list_collection_names(), [i["name"] for i in shop.orders.list_indexes()]]
    s.commit_transaction()
out["after"] = [shop.list_collection_names(), sorted(i["name"] for i in shop.orders.list_indexes())]
with c.start_session() as s:
    s.start_transaction()
    shop.create_collection("drafts", session=s)
    s.abort_transaction()
out["aborted"] = "drafts" in shop.list_collection_names()
with c.start_session() as s:
    s.start_transaction()
    out["exists"] = failure(lambda: shop.create_collection("orders", session=s))
with c.start_session() as s:
    s.start_transaction()
    out["existing_index"] = failure(lambda: shop.orders.create_index("day", session=s))
with c.start_session() as s:
    s.start_transaction()
    shop.carts.insert_one({"_id": 1, "n": 1}, session=s)
    shop.carts.update_one({"_id": 1}, {"$inc": {"n": 1}}, session=s)
    shop.carts.insert_one({"_id": 2, "n": 5}, session=s)
    shop.carts.delete_one({"_id": 2}, session=s)
    seen = [list(shop.carts.find({}, session=s)), shop.carts.count_documents({}, session=s)]
    outside = ["carts" in shop.list_collection_names(), shop.carts.count_documents({})]
    out["implicit_before"] = [seen, outside, failure(lambda: shop.create_collection("carts", session=s))]
with c.start_session() as s:
    s.start_transaction()
    shop.carts.insert_one({"_id": 1, "n": 1}, session=s)
    s.commit_transaction()
out["implicit_after"] = ["carts" in shop.list_collection_names(), list(shop.carts.find())]
with c.start_session() as s:
    s.start_transaction()
    shop.wishes.insert_one({"_id": 1}, session=s)
    s.abort_transaction()
out["implicit_aborted"] = "wishes" in shop.list_collection_names()
with c.start_session() as s:
    s.start_transaction()
    shop.raced.insert_one({"_id": 1}, session=s)
    shop.raced.insert_one({"_id": 9})
    out["raced"] = [failure(lambda: s.commit_transaction()), list(shop.raced.find())]
print(json.dumps(out))
"#;
    let Some(result) = run(&server, script) else { return };
    assert_eq!(
        result,
        json!({"before": [[], []], "after": [["orders"], ["_id_", "customer_1"]],
               "aborted": false, "exists": [48, []], "existing_index": [263, []],
               "implicit_before": [[[{"_id": 1, "n": 2}], 1], [false, 0], [48, []]],
               "implicit_after": [true, [{"_id": 1, "n": 1}]],
               "implicit_aborted": false,
               "raced": [[112, ["TransientTransactionError"]], [{"_id": 9}]]})
    );
}

/// Issue 13: a retryable write retried after a restart of the server is answered from its
/// stored reply, not done again (an `$inc` applies once).
#[test]
fn a_retryable_write_retried_after_a_restart_is_not_done_again() {
    let mut server = Server::start();
    let script = r#"
from bson import Int64
c = client()
c.shop.counters.insert_one({"_id": "visits", "n": 0})
s = c.start_session()
inc = {"update": "counters", "updates": [{"q": {"_id": "visits"}, "u": {"$inc": {"n": 1}}}], "txnNumber": Int64(7)}
first = c.shop.command(inc, session=s)
print(json.dumps({"lsid": s.session_id["id"].hex(), "n": first["n"], "nModified": first["nModified"]}))
"#;
    let Some(first) = python(&server, script) else { return };
    assert_eq!((&first["n"], &first["nModified"]), (&json!(1), &json!(1)));
    assert!(server.terminate());
    server.restart();
    let script = format!(
        r#"
from bson import Int64, Binary
c = client()
s = c.start_session()
s.session_id  # materializes the server session, whose id the test then sets
s._server_session.session_id = {{"id": Binary(bytes.fromhex("{lsid}"), 4)}}
inc = {{"update": "counters", "updates": [{{"q": {{"_id": "visits"}}, "u": {{"$inc": {{"n": 1}}}}}}], "txnNumber": Int64(7)}}
again = c.shop.command(inc, session=s)
out = {{"n": again["n"], "nModified": again["nModified"], "value": c.shop.counters.find_one()["n"]}}
try:
    c.shop.command(dict(inc, txnNumber=Int64(6)), session=s)
except OperationFailure as e:
    out["older"] = e.code
c.shop.command(dict(inc, txnNumber=Int64(8)), session=s)
out["next"] = c.shop.counters.find_one()["n"]
print(json.dumps(out))
"#,
        lsid = first["lsid"].as_str().unwrap_or_default()
    );
    let out = python(&server, &script).expect("pymongo ran before the restart");
    assert_eq!(out, json!({"n": 1, "nModified": 1, "value": 1, "older": 225, "next": 2}));
}

/// `hint` inside a transaction (issue 14): the transaction reads document by document, and
/// the hint shapes its answer as the index would: an unknown index is `BadValue` (2), a
/// sparse index holds only its documents, an unsorted answer follows the index's order, for
/// `find`, `count`, `aggregate`, `update`, `delete` and `findAndModify` alike.
#[test]
fn hint_shapes_reads_inside_a_transaction() {
    let server = Server::start();
    let script = r#"
c = client()
co = c.txh.items
co.insert_many([{"_id": 1, "k": 3}, {"_id": 2, "k": 1}, {"_id": 3}, {"_id": 4, "k": 2}])
co.create_index([("k", 1)], sparse=True, name="k_sparse")
co.create_index([("k", -1)], sparse=True, name="k_desc")
out = {}
with c.start_session() as s:
    with s.start_transaction():
        co.insert_one({"_id": 5, "k": 0}, session=s)
        out["find"] = [d["_id"] for d in co.find({}, session=s).hint("k_sparse")]
        out["desc"] = [d["_id"] for d in co.find({}, session=s).hint("k_desc")]
        out["plain"] = sorted(d["_id"] for d in co.find({}, session=s))
        out["count"] = co.count_documents({}, session=s, hint="k_sparse")
        out["agg"] = [d["_id"] for d in co.aggregate([{"$match": {}}], session=s, hint="k_sparse")]
        out["one"] = co.find_one_and_update({}, {"$set": {"first": True}}, session=s, hint="k_sparse")["_id"]
        out["upd"] = co.update_many({"_id": {"$gte": 3}}, {"$set": {"seen": True}}, session=s, hint="k_sparse").modified_count
        out["del"] = co.delete_one({}, session=s, hint="k_sparse").deleted_count
    try:
        with s.start_transaction():
            list(co.find({}, session=s).hint("nope"))
    except OperationFailure as e:
        out["unknown"] = e.code
out["after"] = sorted(d["_id"] for d in co.find({}))
out["seen"] = sorted(d["_id"] for d in co.find({"seen": True}))
print(json.dumps(out))
"#;
    let Some(result) = python(&server, script) else { return };
    assert_eq!(
        result,
        json!({"find": [5, 2, 4, 1], "desc": [1, 4, 2, 5], "plain": [1, 2, 3, 4, 5], "count": 4, "agg": [5, 2, 4, 1],
            "one": 5, "upd": 2, "del": 1, "unknown": 2, "after": [1, 2, 3, 4], "seen": [4]})
    );
}

/// An update statement's constants (`c`) and `upsertSupplied` in a transaction, as outside
/// one: the pipeline reads `$$name`, an upsert that matches nothing inserts `c.new`.
#[test]
fn update_constants_and_supplied_upserts_commit_with_the_transaction() {
    let server = Server::start();
    let script = r#"
c = client()
db = c.shop
db.k.insert_one({"_id": 1, "n": 0})
def work(s):
    db.command("update", "k", updates=[{"q": {"_id": 1}, "u": [{"$set": {"n": "$$v"}}], "c": {"v": 5}}], session=s)
    db.command("update", "k", updates=[{"q": {"_id": 2}, "u": [{"$set": {"n": 1}}], "c": {"new": {"n": 9}}, "upsert": True, "upsertSupplied": True}], session=s)
with c.start_session() as s:
    s.with_transaction(work)
print(json.dumps(list(db.k.find({}).sort("_id", 1))))
"#;
    let Some(out) = run(&server, script) else { return };
    assert_eq!(out, json!([{"_id": 1, "n": 5}, {"_id": 2, "n": 9}]));
}
