//! `find`'s `returnKey` and `showRecordId` and the `{$meta: "indexKey"}` and
//! `{$meta: "recordId"}` projections (issue 13, session 31; pymongo's `command_monitoring`
//! suite sends them): the key of the index the plan scans (the `_id` index for a sort on
//! `_id`, nothing for a collection scan), kept through `getMore`, with the projection ignored
//! but for its sort keys; record ids stable over updates; refused on a view as MongoDB
//! refuses them, as is a tailable `find` on a view. Through pymongo.

use serde_json::json;

use crate::harness::Server;
use crate::mongo::python;

#[test]
fn return_key_gives_the_key_of_the_index_the_plan_scans() {
    let s = Server::start();
    let script = r#"
db = client().shop
db.t.insert_many([{"_id": i, "x": i * 11, "tags": [i, i + 10], "name": "n%d" % i} for i in range(1, 6)])
db.t.create_index([("x", -1), ("name", 1)], name="x_name")
db.t.create_index("tags")
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
    let Some(out) = python(&s, script) else { return };
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
