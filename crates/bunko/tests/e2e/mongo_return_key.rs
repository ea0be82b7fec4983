//! `find`'s `returnKey` and `showRecordId` and the `{$meta: "indexKey"}` and
//! `{$meta: "recordId"}` projections (issue 13, session 31; pymongo's `command_monitoring`
//! suite sends them): the key of the index the plan scans (the `_id` index for a sort on
//! `_id`, nothing for a collection scan), kept through `getMore`, with the projection ignored
//! but for its sort keys; record ids stable over updates; refused on a view as MongoDB
//! refuses them, as is a tailable `find` on a view. Through pymongo.

use serde_json::json;

use crate::harness::Server;
use crate::mongo::python;

/// Five documents in `shop.t`, with a compound index `x_name` and a multikey one on `tags`.
const SETUP: &str = r#"
db = client().shop
db.t.insert_many([{"_id": i, "x": i * 11, "tags": [i, i + 10], "name": "n%d" % i} for i in range(1, 6)])
db.t.create_index([("x", -1), ("name", 1)], name="x_name")
db.t.create_index("tags")
"#;

#[test]
fn return_key_gives_the_key_of_the_index_the_plan_scans() {
    let s = Server::start();
    let script = r#"
def batch(**kw):
    return db.command("find", "t", **kw)["cursor"]["firstBatch"]
out = {}
out["by_id"] = batch(filter={}, sort={"_id": 1}, returnKey=True, showRecordId=True)
out["by_x"] = sorted(batch(filter={"x": {"$gte": 33}}, returnKey=True), key=lambda d: -d["x"])
out["collscan"] = batch(filter={"name": "n2"}, returnKey=True)
out["multikey"] = batch(filter={"tags": {"$gte": 12, "$lte": 13}}, returnKey=True, sort={"_id": 1})
out["projection_ignored"] = batch(filter={"x": 22}, returnKey=True, projection={"name": 1, "k": {"$meta": "sortKey"}}, sort={"x": -1})
out["meta"] = batch(filter={"x": 22}, projection={"name": 1, "_id": 0, "ik": {"$meta": "indexKey"}})
out["meta_collscan"] = batch(filter={"name": "n2"}, projection={"name": 1, "ik": {"$meta": "indexKey"}})
out["hinted"] = batch(filter={"name": "n3"}, hint="x_name", returnKey=True)
cur = db.t.find({"x": {"$gt": 0}}, return_key=True, batch_size=2)
out["cursor"] = sorted([d for d in cur], key=lambda d: -d["x"])
print(json.dumps(out))
"#;
    let Some(out) = python(&s, &format!("{SETUP}{script}")) else { return };
    assert_eq!(out["by_id"], json!([{"_id": 1}, {"_id": 2}, {"_id": 3}, {"_id": 4}, {"_id": 5}]));
    assert_eq!(
        out["by_x"],
        json!([{"x": 55, "name": "n5"}, {"x": 44, "name": "n4"}, {"x": 33, "name": "n3"}])
    );
    assert_eq!(out["collscan"], json!([{}]));
    // Each document at the key the scan met it at: a multikey index is bounded by `$gte`
    // alone (`[12, inf]`), so 4 (`[4, 14]`, which the filter matches) is met at 14, not 4.
    let keys = json!([{"tags": 12}, {"tags": 13}, {"tags": 14}, {"tags": 15}]);
    assert_eq!(out["multikey"], keys);
    assert_eq!(out["projection_ignored"], json!([{"x": 22, "name": "n2", "k": [22]}]));
    assert_eq!(out["meta"], json!([{"name": "n2", "ik": {"x": 22, "name": "n2"}}]));
    assert_eq!(out["meta_collscan"], json!([{"_id": 2, "name": "n2"}]));
    assert_eq!(out["hinted"], json!([{"x": 33, "name": "n3"}]));
    let cursor: Vec<i64> =
        out["cursor"].as_array().into_iter().flatten().filter_map(|d| d["x"].as_i64()).collect();
    assert_eq!(cursor, vec![55, 44, 33, 22, 11], "keys through getMore");
}

#[test]
fn show_record_id_adds_a_stable_record_id() {
    let s = Server::start();
    let script = r#"
db = client().shop
db.t.insert_many([{"_id": i, "x": i} for i in range(1, 4)])
def rids(**kw):
    docs = db.command("find", "t", showRecordId=True, sort={"_id": 1}, **kw)["cursor"]["firstBatch"]
    return docs
out = {}
before = rids()
out["fields"] = [list(d.keys()) for d in before]
out["types"] = [type(d["$recordId"]).__name__ for d in before]
out["distinct"] = len({d["$recordId"] for d in before})
db.t.update_one({"_id": 2}, {"$set": {"x": 20, "y": 1}})
after = rids()
out["stable"] = [d["$recordId"] for d in before] == [d["$recordId"] for d in after]
out["projected"] = [list(d.keys()) for d in rids(projection={"x": 1, "_id": 0})]
out["own"] = rids(projection={"_id": 1, "$recordId": {"$meta": "recordId"}})[0]["$recordId"] == before[0]["$recordId"]
out["meta"] = db.command("find", "t", filter={"_id": 3}, projection={"r": {"$meta": "recordId"}})["cursor"]["firstBatch"][0]["r"] == before[2]["$recordId"]
db.command("create", "v", viewOn="t", pipeline=[])
out["view"] = [code_of(lambda: db.command("find", "v", **{o: True})) for o in ("returnKey", "showRecordId")]
try:
    db.command("find", "v", tailable=True)
except OperationFailure as e:
    out["view_tailable"] = [e.code, e.details["codeName"], e.details["errmsg"]]
print(json.dumps(out))
"#;
    let Some(out) = python(&s, script) else { return };
    let fields = json!(["_id", "x", "$recordId"]);
    assert_eq!(out["fields"], json!([fields, fields, fields]));
    assert_eq!(out["types"], json!(["Int64", "Int64", "Int64"]));
    assert_eq!(out["distinct"], json!(3));
    assert_eq!(out["stable"], json!(true), "an update keeps the record id");
    let projected = json!(["x", "$recordId"]);
    assert_eq!(out["projected"], json!([projected, projected, projected]));
    assert_eq!(out["own"], json!(true));
    assert_eq!(out["meta"], json!(true));
    assert_eq!(out["view"], json!([168, 168]));
    let tailable = json!([
        168,
        "InvalidPipelineOperator",
        "Tailable cursors are not supported in aggregation."
    ]);
    assert_eq!(out["view_tailable"], tailable);
}

/// `{$meta: "indexKey"}` and `{$meta: "recordId"}` in an aggregation (MongoDB's
/// `projection_meta_index_key.js`: the key where the pipeline's pushed-down query scans an
/// index, left out after a collection scan): the values `find` gives for the same filter,
/// missing after a `$group`, refused (238) after a stage that changes the documents.
#[test]
fn aggregation_reads_the_index_key_and_record_id_find_gives() {
    let s = Server::start();
    let script = r#"
meta = {"ik": {"$meta": "indexKey"}, "rid": {"$meta": "recordId"}}
def find(**kw):
    docs = db.command("find", "t", projection={"_id": 1, **meta}, **kw)["cursor"]["firstBatch"]
    return sorted(docs, key=lambda d: d["_id"])
def agg(stages, **kw):
    docs = list(db.t.aggregate(stages + [{"$project": {"_id": 1, **meta}}], **kw))
    return sorted(docs, key=lambda d: d["_id"])
def same(f, stages, found={}, **kw):
    a = agg(stages, **kw)
    return [a == find(filter=f, **found, **kw), [d.get("ik") for d in a]]
out = {}
out["ixscan"] = same({"x": {"$gte": 33}}, [{"$match": {"x": {"$gte": 33}}}])
out["sorted"] = same({"x": {"$gte": 33}}, [{"$match": {"x": {"$gte": 33}}}, {"$sort": {"name": 1}}, {"$limit": 2}], found={"sort": {"name": 1}, "limit": 2})
out["collscan"] = same({"name": "n2"}, [{"$match": {"name": "n2"}}])
out["multikey"] = same({"tags": {"$gte": 12, "$lte": 13}}, [{"$match": {"tags": {"$gte": 12, "$lte": 13}}}])
out["hinted"] = same({"name": "n3"}, [{"$match": {"name": "n3"}}], hint="x_name")
out["by_id"] = same({"_id": {"$in": [2, 3]}}, [{"$match": {"_id": {"$in": [2, 3]}}}])
rid2 = find(filter={"_id": 2})[0]["rid"]
out["add_fields"] = list(db.t.aggregate([{"$match": {"x": 22}}, {"$addFields": meta}]))
out["rid_type"] = type(out["add_fields"][0]["rid"]).__name__
out["add_fields"][0]["rid"] = out["add_fields"][0]["rid"] == rid2
out["expr"] = [d["_id"] for d in db.t.aggregate([{"$match": {"$expr": {"$eq": [{"$meta": "recordId"}, rid2]}}}])]
out["group"] = list(db.t.aggregate([{"$match": {"_id": 2}}, {"$group": {"_id": "$name", "r": {"$first": {"$meta": "recordId"}}}}]))
out["group"][0]["r"] = out["group"][0]["r"] == rid2
out["after_group"] = list(db.t.aggregate([{"$group": {"_id": None, "n": {"$sum": 1}}}, {"$addFields": meta}]))
out["refused"] = [
    code_of(lambda: list(db.t.aggregate([{"$set": {"y": 1}}, {"$project": meta}]))),
    code_of(lambda: list(db.t.aggregate([{"$lookup": {"from": "t", "pipeline": [{"$project": meta}], "as": "j"}}]))),
]
print(json.dumps(out))
"#;
    let Some(out) = python(&s, &format!("{SETUP}{script}")) else { return };
    let k = |x: i64, n: &str| json!({"x": x, "name": n});
    assert_eq!(out["ixscan"], json!([true, [k(33, "n3"), k(44, "n4"), k(55, "n5")]]));
    assert_eq!(out["sorted"], json!([true, [k(33, "n3"), k(44, "n4")]]));
    assert_eq!(out["collscan"], json!([true, [null]]));
    // As `find`'s: each document at the key the multikey scan met it at.
    let tags = json!([{"tags": 12}, {"tags": 13}, {"tags": 14}, {"tags": 15}]);
    assert_eq!(out["multikey"], json!([true, tags]));
    assert_eq!(out["hinted"], json!([true, [k(33, "n3")]]));
    assert_eq!(out["by_id"], json!([true, [{"_id": 2}, {"_id": 3}]]));
    let whole =
        json!({"_id": 2, "x": 22, "tags": [2, 12], "name": "n2", "ik": k(22, "n2"), "rid": true});
    assert_eq!(out["add_fields"], json!([whole]));
    assert_eq!(out["rid_type"], json!("Int64"));
    assert_eq!(out["expr"], json!([2]));
    assert_eq!(out["group"], json!([{"_id": "n2", "r": true}]));
    assert_eq!(out["after_group"], json!([{"_id": null, "n": 5}]), "no metadata after $group");
    assert_eq!(out["refused"], json!([238, 238]));
}
