//! MongoDB 8.0's `bulkWrite` command (issue 13) through pymongo's `MongoClient.bulk_write`,
//! which sends it to servers announcing `maxWireVersion` 25: inserts, updates, replacements,
//! upserts and deletes across collections in one command, per-operation results, ordered
//! and unordered error handling, and the write gate deciding for every operation.

use serde_json::json;

use crate::harness::Server;
use crate::mongo::python;

#[test]
fn client_bulk_write_spans_collections_and_reports_each_operation() {
    let s = Server::start_with(&["--pbkdf2-iterations", "10"], &[]);
    let hana = json!({"name": "hana", "password": "pw", "roles": [], "type": "user"});
    s.put_doc("_users", "org.couchdb.user:hana", &hana);
    let script = r#"
from pymongo import InsertOne, UpdateOne, UpdateMany, ReplaceOne, DeleteOne, DeleteMany
from pymongo.errors import ClientBulkWriteException
c = client()
c.shop.products.insert_one({"_id": "p1", "stock": 5})
r = c.bulk_write([
    InsertOne(namespace="shop.products", document={"_id": "p2", "stock": 1}),
    InsertOne(namespace="shop.products", document={"_id": "p3", "stock": 0}),
    InsertOne(namespace="shop.reviews", document={"_id": "r1", "product": "p1", "stars": 5}),
    UpdateOne(namespace="shop.products", filter={"_id": "p1"}, update={"$inc": {"stock": -1}}),
    UpdateMany(namespace="shop.products", filter={"stock": {"$lt": 2}}, update={"$set": {"low": True}}),
    UpdateOne(namespace="shop.products", filter={"_id": "p9"}, update={"$set": {"stock": 9}}, upsert=True),
    ReplaceOne(namespace="shop.reviews", filter={"_id": "r1"}, replacement={"product": "p1", "stars": 4}),
    DeleteOne(namespace="shop.products", filter={"_id": "p3"}),
    DeleteMany(namespace="shop.reviews", filter={"stars": {"$lt": 3}}),
], verbose_results=True)
counts = [r.inserted_count, r.matched_count, r.modified_count, r.upserted_count, r.deleted_count]
assert counts == [3, 4, 4, 1, 1], counts
assert r.insert_results[2].inserted_id == "r1"
assert (r.update_results[4].matched_count, r.update_results[4].modified_count) == (2, 2)
# An upsert's entry counts the upserted document in `n` (MongoDB 8.0's reply); the totals do not.
assert r.update_results[5].upserted_id == "p9" and r.update_results[5].matched_count == 1
assert r.delete_results[7].deleted_count == 1 and r.delete_results[8].deleted_count == 0
products = list(c.shop.products.find({}, sort=[("_id", 1)]))
assert products == [{"_id": "p1", "stock": 4}, {"_id": "p2", "stock": 1, "low": True}, {"_id": "p9", "stock": 9}], products
assert list(c.shop.reviews.find()) == [{"_id": "r1", "product": "p1", "stars": 4}]

# The command's own reply, as MongoDB 8.0 shapes it.
raw = c.admin.command("bulkWrite", 1, ops=[{"insert": 0, "document": {"_id": "p4"}}, {"delete": 0, "filter": {"_id": "zz"}}],
                      nsInfo=[{"ns": "shop.products"}], errorsOnly=False)
assert raw["cursor"] == {"id": 0, "firstBatch": [{"ok": 1.0, "idx": 0, "n": 1}, {"ok": 1.0, "idx": 1, "n": 0}],
                         "ns": "admin.$cmd.bulkWrite"}, raw
assert [raw[k] for k in ["nErrors", "nInserted", "nDeleted", "nMatched", "nModified", "nUpserted"]] == [0, 1, 0, 0, 0, 0], raw

# Ordered: stops at the first error; unordered: goes on.
def failure(ops, **kw):
    try:
        c.bulk_write(ops, **kw)
    except ClientBulkWriteException as e:
        return e
    raise AssertionError("no error")
e = failure([InsertOne({"_id": "n1"}, namespace="shop.products"), InsertOne({"_id": "p1"}, namespace="shop.products"),
             InsertOne({"_id": "n2"}, namespace="shop.products")])
assert [(w["idx"], w["code"]) for w in e.write_errors] == [(1, 11000)], e.write_errors
assert e.write_errors[0]["errmsg"].startswith("E11000 duplicate key error collection: shop.products index: _id_"), e.write_errors
assert e.partial_result.inserted_count == 1
e = failure([InsertOne({"_id": "n3"}, namespace="shop.products"), UpdateOne({"_id": "p1"}, {"$foo": {"a": 1}}, namespace="shop.products"),
             InsertOne({"_id": "o1"}, namespace="shop.other")], ordered=False)
assert [(w["idx"], w["code"]) for w in e.write_errors] == [(1, 9)], e.write_errors
assert e.partial_result.inserted_count == 2
ids = sorted(d["_id"] for d in c.shop.products.find({}, {"_id": 1}))
assert ids == ["n1", "n3", "p1", "p2", "p4", "p9"], ids
assert c.shop.other.count_documents({}) == 1

# Bad commands are refused whole, with MongoDB's codes.
assert code_of(lambda: c.shop.command("bulkWrite", 1, ops=[], nsInfo=[])) == 13
assert code_of(lambda: c.admin.command("bulkWrite", 1, ops=[{"insert": 3, "document": {}}], nsInfo=[{"ns": "shop.products"}])) == 2
assert code_of(lambda: c.admin.command("bulkWrite", 1, ops=[{"frob": 0}], nsInfo=[{"ns": "shop.products"}])) == 9

# A user who is no member: every operation is refused by the write gate, nothing changes.
hana = client(user="hana", password="pw")
e = None
try:
    hana.bulk_write([InsertOne({"_id": "h1"}, namespace="shop.products"), UpdateOne({"_id": "p1"}, {"$set": {"stock": 0}}, namespace="shop.products"),
                     DeleteOne({"_id": "p2"}, namespace="shop.products")], ordered=False)
except ClientBulkWriteException as err:
    e = err
assert e is not None and [(w["idx"], w["code"]) for w in e.write_errors] == [(0, 13), (1, 13), (2, 13)], e and e.write_errors
assert sorted(d["_id"] for d in c.shop.products.find({}, {"_id": 1})) == ids
assert c.shop.products.find_one({"_id": "p1"}) == {"_id": "p1", "stock": 4}
print(json.dumps({"ok": True}))
"#;
    let Some(result) = python(&s, script) else { return };
    assert_eq!(result, json!({"ok": true}));
    // The same documents over HTTP.
    assert_eq!(s.get_doc("shop%24products", "p9")["stock"], json!(9));
}

/// Issue 13: a filter's `$expr` reading a variable nobody defined is MongoDB's
/// `Use of undefined variable` (17276) for that operation, whether or not a document is
/// there to evaluate it on; with the variable in `let` it runs.
#[test]
fn an_undefined_variable_in_expr_fails_its_operation() {
    let server = Server::start();
    let script = r#"
from pymongo import DeleteOne
from pymongo.errors import ClientBulkWriteException
c = client()
coll = c.shop.items
coll.insert_many([{"_id": 1}, {"_id": 2}, {"_id": 3}])
expr = {"$expr": {"$eq": ["$_id", "$$id2"]}}
out = {}
try:
    c.bulk_write([DeleteOne({"_id": 1}, namespace="shop.items"), DeleteOne(expr, namespace="shop.items"),
                  DeleteOne({"_id": 3}, namespace="shop.items")], ordered=False)
except ClientBulkWriteException as e:
    out["bulk"] = [(w["idx"], w["code"]) for w in e.write_errors]
    out["deleted"] = e.partial_result.deleted_count
try:
    coll.find_one(expr)
except OperationFailure as e:
    out["find"] = [e.code, str(e).split(",")[0]]
try:
    c.shop.empty.find_one(expr)
except OperationFailure as e:
    out["empty"] = e.code
out["let"] = [d["_id"] for d in coll.find(expr, let={"id2": 2})]
print(json.dumps(out))
"#;
    let Some(out) = python(&server, script) else { return };
    assert_eq!(
        out,
        json!({"bulk": [[1, 17276]], "deleted": 2, "find": [17276, "Use of undefined variable: id2"],
               "empty": 17276, "let": [2]})
    );
}
