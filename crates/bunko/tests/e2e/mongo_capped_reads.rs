//! Capped collections read without a sort (issue 13): a single `update`, `delete`,
//! `findAndModify`, `bulkWrite` statement and an `aggregate` whose first stage reads the
//! collection take the documents in natural (insertion) order, as MongoDB's collection
//! scan does, not in `_id` order; `$out` to a capped collection is refused (17152),
//! `$merge` into one is capped as any insert; `renameCollection` keeps the options.

use serde_json::json;

use crate::harness::Server;
use crate::mongo::python;

/// `_id`s inserted out of order: each single write without a sort touches the oldest
/// matching document; an index the filter uses still decides the order.
#[test]
fn single_writes_and_aggregate_follow_natural_order() {
    let server = Server::start();
    let script = r#"
from pymongo import UpdateOne, DeleteOne, ReplaceOne
c = client()
db = c.shop
db.create_collection("q", capped=True, size=100000)
db.q.insert_many([{"_id": k, "v": 1} for k in ["m", "c", "x", "a", "k", "b"]])
natural = lambda: [d["_id"] for d in db.q.find()]
out = {}
db.q.update_one({}, {"$set": {"touched": 1}})
out["update_one"] = [d["_id"] for d in db.q.find({"touched": 1})]
out["fam"] = db.q.find_one_and_update({"v": 1}, {"$inc": {"v": 1}})["_id"]
out["fam_next"] = db.q.find_one_and_update({"v": 1}, {"$inc": {"v": 1}})["_id"]
db.q.replace_one({"v": 1}, {"v": 5})
out["replaced"] = [d["_id"] for d in db.q.find({"v": 5})]
out["fam_delete"] = db.q.find_one_and_delete({})["_id"]
db.q.delete_one({})
out["after_deletes"] = natural()
db.q.bulk_write([UpdateOne({"v": 1}, {"$set": {"bulk": 1}}), DeleteOne({"v": {"$gte": 1}})])
out["bulk"] = [[d["_id"] for d in db.q.find({"bulk": 1})], natural()]
out["agg_match"] = [d["_id"] for d in db.q.aggregate([{"$match": {}}])]
out["agg_limit"] = [d["_id"] for d in db.q.aggregate([{"$limit": 2}])]
out["agg_project"] = [d["_id"] for d in db.q.aggregate([{"$match": {"v": {"$gte": 1}}}, {"$project": {"v": 1}}])]
out["find_one"] = db.q.find_one()["_id"]
out["fam_newest"] = db.q.find_one_and_update({}, {"$set": {"newest": 1}}, sort=[("$natural", -1)])["_id"]
out["fam_oldest"] = db.q.find_one_and_update({}, {"$set": {"oldest": 1}}, sort=[("$natural", 1)])["_id"]
out["count"] = [db.q.count_documents({}), sorted(db.q.distinct("_id"))]
# A {$natural: -1} hint reads newest first too.
db.q.update_one({}, {"$set": {"hinted": 1}}, hint=[("$natural", -1)])
out["hint_update"] = [d["_id"] for d in db.q.find({"hinted": 1})]
out["hint_fam"] = db.q.find_one_and_update({}, {"$set": {"h2": 1}}, hint=[("$natural", -1)])["_id"]
db.q.insert_one({"_id": "0"})
db.q.delete_one({}, hint=[("$natural", -1)])
out["hint_delete"] = [d["_id"] for d in db.q.find()]
# An index the filter uses gives its own order (MongoDB's IXSCAN), as before.
db.q.create_index("w")
db.q.update_many({}, {"$set": {"w": 0}})
db.q.update_one({"_id": "k"}, {"$set": {"w": -1}})
out["indexed"] = db.q.find_one_and_update({"w": {"$lte": 0}}, {"$set": {"i": 1}})["_id"]
print(json.dumps(out))
"#;
    let Some(out) = python(&server, script) else { return };
    assert_eq!(out["update_one"], json!(["m"]));
    assert_eq!(out["fam"], json!("m"));
    assert_eq!(out["fam_next"], json!("c"));
    assert_eq!(out["replaced"], json!(["x"]));
    assert_eq!(out["fam_delete"], json!("m"));
    assert_eq!(out["after_deletes"], json!(["x", "a", "k", "b"]));
    assert_eq!(out["bulk"], json!([["a"], ["a", "k", "b"]]));
    assert_eq!(out["agg_match"], json!(["a", "k", "b"]));
    assert_eq!(out["agg_limit"], json!(["a", "k"]));
    assert_eq!(out["agg_project"], json!(["a", "k", "b"]));
    assert_eq!(out["find_one"], json!("a"));
    assert_eq!(out["fam_newest"], json!("b"));
    assert_eq!(out["fam_oldest"], json!("a"));
    assert_eq!(out["count"], json!([3, ["a", "b", "k"]]));
    assert_eq!(out["hint_update"], json!(["b"]));
    assert_eq!(out["hint_fam"], json!("b"));
    assert_eq!(out["hint_delete"], json!(["a", "k", "b"]));
    assert_eq!(out["indexed"], json!("k"));
}

/// `$out` to a capped collection is refused with MongoDB's 17152 and leaves it as it was;
/// `$merge` into one inserts (and removes the oldest past `max`); a renamed capped
/// collection stays capped.
#[test]
fn out_merge_and_rename_with_capped_targets() {
    let server = Server::start();
    let script = r#"
c = client()
db = c.shop
db.src.insert_many([{"_id": i, "n": i} for i in range(5)])
db.create_collection("log", capped=True, size=100000, max=3)
db.log.insert_one({"_id": "old"})
out = {}
try:
    list(db.src.aggregate([{"$out": "log"}]))
    out["out"] = "accepted"
except OperationFailure as e:
    out["out"] = [e.code, e.details.get("codeName"), e.details.get("errmsg")]
out["untouched"] = [d["_id"] for d in db.log.find()]
list(db.src.aggregate([{"$sort": {"_id": 1}}, {"$merge": {"into": "log"}}]))
out["merged"] = [d["_id"] for d in db.log.find()]
db.log.rename("log2")
info = db.command("listCollections", filter={"name": "log2"})["cursor"]["firstBatch"][0]
out["renamed"] = [info["options"].get("capped"), info["options"].get("max")]
db.log2.insert_one({"_id": "new"})
out["renamed_capped"] = [d["_id"] for d in db.log2.find()]
print(json.dumps(out))
"#;
    let Some(out) = python(&server, script) else { return };
    assert_eq!(
        out["out"],
        json!([
            17152,
            "Location17152",
            "namespace 'shop.log' is capped so it can't be used for $out"
        ])
    );
    assert_eq!(out["untouched"], json!(["old"]));
    assert_eq!(out["merged"], json!([2, 3, 4]));
    assert_eq!(out["renamed"], json!([true, 3]));
    assert_eq!(out["renamed_capped"], json!([3, 4, "new"]));
}
