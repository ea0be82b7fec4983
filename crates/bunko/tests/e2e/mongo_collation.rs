//! MongoDB collations through pymongo (issue 13, point 4): `collation` with a locale and a
//! strength on `find` (also across `getMore`), `count`, `distinct`, `update`, `delete`,
//! `findAndModify` and `bulkWrite`; a collated query does not use an index built with the
//! simple collation; bad collations get MongoDB's errors.

use serde_json::json;

use crate::harness::Server;
use crate::mongo::python;

#[test]
fn collations_compare_strings_by_locale_and_strength() {
    let server = Server::start();
    let script = r#"
from pymongo import UpdateOne, DeleteMany
from pymongo.collation import Collation
c = client()
words = c.shop.words
words.insert_many([{"_id": 1, "x": "ping"}, {"_id": 2, "x": "PING"}, {"_id": 3, "x": "Pïng"},
                   {"_id": 4, "x": "pong"}, {"_id": 5, "x": "b"}, {"_id": 6, "x": "Z"}])
words.create_index("x")
ci = Collation(locale="en_US", strength=2)
base = Collation(locale="en_US", strength=1)
out = {}
out["simple"] = [d["_id"] for d in words.find({"x": "PING"})]
out["strength2"] = sorted(d["_id"] for d in words.find({"x": "PING"}, collation=ci))
out["strength1"] = sorted(d["_id"] for d in words.find({"x": "PING"}, collation=base))
out["sorted"] = [d["x"] for d in words.find({"_id": {"$in": [4, 5, 6]}}, collation=ci).sort("x", 1)]
out["sorted_simple"] = [d["x"] for d in words.find({"_id": {"$in": [4, 5, 6]}}).sort("x", 1)]
out["batches"] = sorted(d["_id"] for d in words.find({"x": {"$in": ["PING", "PONG"]}}, collation=ci, batch_size=1))
out["count"] = words.count_documents({"x": "ping"}) , c.shop.command("count", "words", query={"x": "ping"}, collation={"locale": "en_US", "strength": 2})["n"]
out["distinct"] = sorted(c.shop.command("distinct", "words", key="x", query={"_id": {"$lte": 2}}, collation={"locale": "en", "strength": 2})["values"])
out["plan"] = words.find({"x": "PING"}, collation=ci).explain()["queryPlanner"]["winningPlan"]["stage"]
out["plan_simple"] = words.find({"x": "PING"}).explain()["queryPlanner"]["winningPlan"]["stage"]
out["update"] = words.update_many({"x": "PONG"}, {"$set": {"hit": True}}, collation=ci).modified_count
out["fam"] = words.find_one_and_update({"x": "B"}, {"$set": {"hit": True}}, collation=ci)["_id"]
r = words.bulk_write([UpdateOne({"x": "z"}, {"$set": {"hit": True}}, collation=ci),
                      DeleteMany({"x": "PING"}, collation=ci)])
out["bulk"] = [r.modified_count, r.deleted_count]
out["left"] = sorted(d["_id"] for d in words.find())
out["hits"] = sorted(d["_id"] for d in words.find({"hit": True}))
def code(fn):
    try:
        fn()
    except OperationFailure as e:
        return e.code
out["bad_strength"] = code(lambda: c.shop.command("find", "words", collation={"locale": "en", "strength": 9}))
out["no_locale"] = code(lambda: c.shop.command("find", "words", collation={"strength": 2}))
out["case_first"] = code(lambda: c.shop.command("find", "words", collation={"locale": "en", "caseFirst": "upper"}))
print(json.dumps(out))
"#;
    let Some(result) = python(&server, script) else { return };
    assert_eq!(
        result,
        json!({"simple": [2], "strength2": [1, 2], "strength1": [1, 2, 3],
               "sorted": ["b", "pong", "Z"], "sorted_simple": ["Z", "b", "pong"],
               "batches": [1, 2, 4], "count": [1, 2], "distinct": ["ping"],
               "plan": "COLLSCAN", "plan_simple": "FETCH",
               "update": 1, "fam": 5, "bulk": [1, 2], "left": [3, 4, 5, 6],
               "hits": [4, 5, 6], "bad_strength": 2, "no_locale": 2, "case_first": 238})
    );
}

/// Issue 13: `aggregate` (and so `countDocuments`) takes a collation too: the pushed-down
/// `$match`, a `$match` after other stages and the batches `getMore` computes later all
/// compare strings under it.
#[test]
fn aggregate_and_count_documents_compare_under_the_collation() {
    let server = Server::start();
    let script = r#"
c = client()
coll = c.shop.words
coll.insert_many([{"_id": i, "w": w} for i, w in enumerate(["すし", "Sushi", "sushi", "SUSHI", "ramen"] * 10)])
col = {"locale": "en", "strength": 2}
out = {
    "pushed": len(list(coll.aggregate([{"$match": {"w": "sushi"}}], collation=col, batchSize=2))),
    "later": len(list(coll.aggregate([{"$sort": {"_id": -1}}, {"$match": {"w": "SuShI"}}], collation=col, batchSize=2))),
    "count": coll.count_documents({"w": "SUSHI"}, collation=col),
    "simple": coll.count_documents({"w": "SUSHI"}),
}
print(json.dumps(out))
"#;
    let Some(out) = python(&server, script) else { return };
    assert_eq!(out, json!({"pushed": 30, "later": 30, "count": 30, "simple": 10}));
}
