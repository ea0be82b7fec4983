//! `{$meta: …}` metadata through the driver (issue 13): `sortKey` after an aggregation
//! `$sort` (pushed down to the index scan or not, kept through `$match`/`$skip`/`$limit`
//! and stages that leave the sort's fields alone, read by `$project`, `$addFields` and
//! `$group`'s accumulators), missing where the documents carry none (no `$sort`, after a
//! `$group`), as MongoDB's; refused (`NotImplemented`) where a stage since the sort may
//! have changed its fields; and inside a computed field of a sorted `find`'s projection.

use serde_json::json;

use crate::harness::Server;
use crate::mongo::python;

#[test]
fn sort_key_meta_after_an_aggregation_sort() {
    let server = Server::start();
    let script = r#"
db = client().shop
db.c.insert_many([{"_id": 1, "a": 2, "b": [1, 5]}, {"_id": 2, "a": 1}, {"_id": 3, "a": [3, 0], "b": 1}])
db.c.create_index("a")
def agg(pipeline):
    try:
        return list(db.c.aggregate(pipeline))
    except OperationFailure as e:
        return [e.code, e.details.get("codeName")]
key = {"$meta": "sortKey"}
out = {}
out["project"] = agg([{"$sort": {"a": 1, "b": -1}}, {"$project": {"k": key}}])
out["pushed"] = agg([{"$sort": {"a": -1}}, {"$limit": 2}, {"$addFields": {"k": key}}, {"$project": {"b": 0}}])
out["kept"] = agg([{"$match": {"a": {"$gte": 1}}}, {"$sort": {"a": 1}}, {"$skip": 1},
                   {"$set": {"z": 1}}, {"$unset": "b"}, {"$project": {"k": key, "z": 1}}])
out["group"] = agg([{"$sort": {"a": 1}}, {"$group": {"_id": None, "keys": {"$push": key}}}])
out["after_group"] = agg([{"$group": {"_id": "$a"}}, {"$sort": {"_id": -1}}, {"$project": {"k": key}}])
out["missing_after_group"] = agg([{"$sort": {"a": 1}}, {"$group": {"_id": "$a"}}, {"$project": {"k": key}}, {"$sort": {"_id": 1}}])
out["no_sort"] = agg([{"$match": {"_id": 2}}, {"$project": {"k": key}}])
out["by_count"] = agg([{"$unwind": "$b"}, {"$sortByCount": "$b"}, {"$set": {"k": key}}, {"$sort": {"_id": 1}}])
out["changed"] = agg([{"$sort": {"a": 1}}, {"$set": {"a": 0}}, {"$project": {"k": key}}])
out["projected"] = agg([{"$sort": {"a": 1}}, {"$project": {"a": 1}}, {"$project": {"k": key}}])
out["find"] = list(db.c.find({}, {"k": {"$concatArrays": [key, ["end"]]}}).sort([("a", -1)]))
print(json.dumps(out, default=str))
"#;
    let Some(out) = python(&server, script) else { return };
    assert_eq!(
        out["project"],
        json!([{"_id": 3, "k": [0, 1]}, {"_id": 2, "k": [1, null]}, {"_id": 1, "k": [2, 5]}])
    );
    assert_eq!(
        out["pushed"],
        json!([{"_id": 3, "a": [3, 0], "k": [3]}, {"_id": 1, "a": 2, "k": [2]}])
    );
    assert_eq!(out["kept"], json!([{"_id": 2, "z": 1, "k": [1]}, {"_id": 1, "z": 1, "k": [2]}]));
    assert_eq!(out["group"], json!([{"_id": null, "keys": [[0], [1], [2]]}]));
    assert_eq!(
        out["after_group"],
        json!([{"_id": [3, 0], "k": [3]}, {"_id": 2, "k": [2]}, {"_id": 1, "k": [1]}])
    );
    assert_eq!(out["missing_after_group"], json!([{"_id": [3, 0]}, {"_id": 1}, {"_id": 2}]));
    assert_eq!(out["no_sort"], json!([{"_id": 2}]));
    assert_eq!(
        out["by_count"],
        json!([{"_id": 1, "count": 2, "k": [2]}, {"_id": 5, "count": 1, "k": [1]}])
    );
    for refused in ["changed", "projected"] {
        assert_eq!(out[refused], json!([238, "NotImplemented"]), "{refused}");
    }
    assert_eq!(
        out["find"],
        json!([
            {"_id": 3, "k": [3, "end"]},
            {"_id": 1, "k": [2, "end"]},
            {"_id": 2, "k": [1, "end"]}
        ])
    );
}
