//! MongoDB's numeric types told apart (issue 13): `$type` with `int`, `long`, `double`,
//! `decimal`, their codes 16/18/1/19 and `number`, in `find`, `$match`, `$expr`'s `$type`
//! and `$isNumber`, `$jsonSchema`'s `bsonType` as a filter and in a validator (with
//! `consideredType` in its `errInfo`), and a partial index whose filter names a numeric type
//! (used only by the queries that imply it). Documents written as plain JSON over HTTP
//! have the types MongoDB would read them as (`5` an int, `5.0` a double). Numbers compare
//! by their exact values across types, with and without an index on the field.

use serde_json::json;

use crate::harness::Server;
use crate::mongo::python;

#[test]
fn numeric_types_are_told_apart_in_filters_validators_and_indexes() {
    let server = Server::start();
    server.put_empty("/acme%24nums");
    server.put_doc("acme%24nums", "h_int", &json!({"n": 7}));
    server.put_doc("acme%24nums", "h_double", &json!({"n": 7.0}));
    let script = r#"
db = client().acme
db.nums.insert_many([
    {"_id": "int", "n": 5},
    {"_id": "long", "n": Int64(5)},
    {"_id": "big", "n": Int64(3_000_000_000)},
    {"_id": "double", "n": 5.0},
    {"_id": "nan", "n": float("nan")},
    {"_id": "decimal", "n": Decimal128("5")},
    {"_id": "mixed", "n": [1, "x"]},
    {"_id": "string", "n": "5"},
])
def ids(flt):
    return sorted(str(d["_id"]) for d in db.nums.find(flt))
out = {}
for t in ["int", 16, "long", 18, "double", 1, "decimal", 19, "number", ["long", "decimal"]]:
    out[json.dumps(t)] = ids({"n": {"$type": t}})
out["types"] = {d["_id"]: type(d["n"]).__name__ for d in db.nums.find({"n": {"$type": "number"}})}
out["eq"] = ids({"n": Int64(5)})
out["long_ge"] = ids({"n": {"$type": "long", "$gte": 5.0}})
out["match"] = sorted(d["_id"] for d in db.nums.aggregate([{"$match": {"n": {"$type": "double"}}}]))
out["expr"] = ids({"$expr": {"$eq": [{"$type": "$n"}, "long"]}})
out["is_number"] = ids({"$expr": {"$isNumber": "$n"}})
out["schema"] = ids({"$jsonSchema": {"properties": {"n": {"bsonType": "decimal"}}}})
try:
    list(db.nums.find({"n": {"$type": 99}}))
except OperationFailure as e:
    out["bad"] = [e.code, e.details.get("errmsg")]
db.nums.create_index("n", name="n_1")
def ixscan(flt):
    plan = db.nums.find(flt).explain()["queryPlanner"]["winningPlan"]
    while plan.get("stage") not in ("IXSCAN", "COLLSCAN"):
        plan = plan["inputStage"]
    return [plan["stage"], plan.get("indexBounds"), ids(flt)]
out["indexed_long"] = ixscan({"n": {"$type": "long"}})
out["indexed_types"] = ixscan({"n": {"$type": ["decimal", "string"]}})
db.create_collection("counts", validator={"$jsonSchema": {"properties": {"c": {"bsonType": "long"}}}})
db.counts.insert_one({"_id": 1, "c": Int64(1)})
try:
    db.counts.insert_one({"_id": 2, "c": 1})
except WriteError as e:
    rule = e.details["errInfo"]["details"]["schemaRulesNotSatisfied"][0]
    out["refused"] = [e.code, rule["propertiesNotSatisfied"][0]["details"][0]]
db.counts.create_index("c", name="long_c", partialFilterExpression={"c": {"$type": "long"}})
db.counts.insert_one({"_id": 3, "c": Int64(7)})
def stage(flt):
    plan = db.counts.find(flt).explain()["queryPlanner"]["winningPlan"]
    while plan.get("stage") not in ("IXSCAN", "COLLSCAN"):
        plan = plan["inputStage"]
    return [plan["stage"], plan.get("indexName"), [d["_id"] for d in db.counts.find(flt).sort("_id", 1)]]
out["partial_typed"] = stage({"c": {"$type": "long", "$gte": 1}})
out["partial_untyped"] = stage({"c": {"$gte": 1}})
print(json.dumps(out, default=str))
"#;
    let script = format!("from pymongo.errors import WriteError\n{script}");
    let Some(out) = python(&server, &script) else { return };
    let (int, long, double) = (
        json!(["h_int", "int", "mixed"]),
        json!(["big", "long"]),
        json!(["double", "h_double", "nan"]),
    );
    assert_eq!(out["\"int\""], int);
    assert_eq!(out["16"], int);
    assert_eq!(out["\"long\""], long);
    assert_eq!(out["18"], long);
    assert_eq!(out["\"double\""], double);
    assert_eq!(out["1"], double);
    assert_eq!(out["\"decimal\""], json!(["decimal"]));
    assert_eq!(out["19"], json!(["decimal"]));
    assert_eq!(
        out["\"number\""],
        json!(["big", "decimal", "double", "h_double", "h_int", "int", "long", "mixed", "nan"])
    );
    assert_eq!(out["[\"long\", \"decimal\"]"], json!(["big", "decimal", "long"]));
    // The documents come back with the types they were matched as.
    assert_eq!(
        out["types"],
        json!({"int": "int", "long": "Int64", "big": "Int64", "double": "float", "nan": "float",
               "decimal": "Decimal128", "mixed": "list", "h_int": "int", "h_double": "float"})
    );
    // Values still compare across the numeric types.
    assert_eq!(out["eq"], json!(["decimal", "double", "int", "long"]));
    assert_eq!(out["long_ge"], long);
    assert_eq!(out["match"], double);
    assert_eq!(out["expr"], long);
    assert_eq!(
        out["is_number"],
        json!(["big", "decimal", "double", "h_double", "h_int", "int", "long", "nan"])
    );
    assert_eq!(out["schema"], json!(["decimal"]));
    assert_eq!(out["bad"], json!([2, "Invalid numerical type code: 99"]));
    assert_eq!(
        out["refused"],
        json!([121, {"operatorName": "bsonType", "specifiedAs": {"bsonType": "long"},
                     "reason": "type did not match", "consideredValue": 1, "consideredType": "int"}])
    );
    // An index on the field serves `$type` with its type class's range.
    assert_eq!(out["indexed_long"], json!(["IXSCAN", {"n": ["[-inf.0, inf.0]"]}, long]));
    assert_eq!(
        out["indexed_types"],
        json!(["IXSCAN", {"n": ["[-inf.0, inf.0]", "[\"\", {})"]}, ["decimal", "mixed", "string"]])
    );
    assert_eq!(out["partial_typed"], json!(["IXSCAN", "long_c", [1, 3]]));
    assert_eq!(out["partial_untyped"], json!(["COLLSCAN", null, [1, 3]]));
}

/// Numbers whose nearest doubles are equal (int64s past 2^53, a Decimal128 a hair above
/// 2) are told apart by `find`, `count_documents` and `$expr`, without and with an index
/// on the field (whose keys hold doubles: the documents read are matched exactly again).
#[test]
fn numbers_compare_by_exact_value_with_and_without_an_index() {
    let server = Server::start();
    let script = r#"
db = client().acme
big = 2**53
db.n.insert_many([{"_id": 1, "a": Int64(big)}, {"_id": 2, "a": Int64(big + 1)}, {"_id": 3, "a": 2},
    {"_id": 4, "a": Decimal128("2.0000000000000000000000001")}, {"_id": 5, "a": float(big)},
    {"_id": 6, "a": Decimal128("2")}, {"_id": 7, "a": Decimal128("1.9999999999999999999999999")}])
queries = {
    "eq_long": {"a": Int64(big + 1)},
    "eq_long_low": {"a": Int64(big)},
    "eq_dec": {"a": Decimal128("2.0000000000000000000000001")},
    "eq_2": {"a": 2},
    "gt_2": {"a": {"$gt": 2, "$lt": 3}},
    "lt_2": {"a": {"$lt": 2, "$gt": 1}},
    "gt_long": {"a": {"$gt": Int64(big)}},
    "lt_long": {"a": {"$lt": Int64(big + 1), "$gt": 3}},
    "in": {"a": {"$in": [Int64(big), Int64(big + 1)]}},
    "gte_dec": {"a": {"$gte": Decimal128("2.0000000000000000000000001"), "$lt": 3}},
    "expr": {"$expr": {"$gt": ["$a", Int64(big)]}},
}
run = lambda: {k: [sorted(d["_id"] for d in db.n.find(q)), db.n.count_documents(q)] for k, q in queries.items()}
out = {"scan": run(), "sorted": [d["_id"] for d in db.n.find().sort("a", 1)]}
db.n.create_index("a")
out["indexed"] = run()
plan = db.n.find(queries["gt_long"]).explain()["queryPlanner"]["winningPlan"]
out["ixscan"] = "IXSCAN" in json.dumps(plan)
print(json.dumps(out))
"#;
    let Some(out) = python(&server, script) else { return };
    let expected = json!({
        "eq_long": [[2], 1], "eq_long_low": [[1, 5], 2], "eq_dec": [[4], 1], "eq_2": [[3, 6], 2],
        "gt_2": [[4], 1], "lt_2": [[7], 1], "gt_long": [[2], 1], "lt_long": [[1, 5], 2],
        "in": [[1, 2, 5], 3], "gte_dec": [[4], 1], "expr": [[2], 1],
    });
    assert_eq!(out["scan"], expected);
    assert_eq!(out["indexed"], expected);
    assert_eq!(out["sorted"], json!([7, 3, 6, 4, 1, 5, 2]));
    assert_eq!(out["ixscan"], json!(true));
}

/// A `unique` index tells apart numbers that share a double key (snowflake-style int64 ids
/// past 2^53, a Decimal128 a hair above 2), on insert, in one batch and when it is built
/// over existing documents; equal numbers of different types still collide.
#[test]
fn unique_indexes_tell_apart_numbers_sharing_a_double() {
    let server = Server::start();
    let script = r#"
from pymongo.errors import DuplicateKeyError, BulkWriteError
db = client().acme
big = 2**60
db.ids.create_index("tid", unique=True)
db.ids.insert_one({"_id": 1, "tid": Int64(big)})
db.ids.insert_one({"_id": 2, "tid": Int64(big + 1)})
db.ids.insert_many([{"_id": 3, "tid": Int64(big + 2)}, {"_id": 4, "tid": Int64(big + 3)}])
db.ids.insert_one({"_id": 5, "tid": 2})
db.ids.insert_one({"_id": 6, "tid": Decimal128("2.0000000000000000000000001")})
out = {"count": db.ids.count_documents({})}
def dup(f):
    try:
        f()
        return None
    except (DuplicateKeyError, BulkWriteError) as e:
        return 11000 if "E11000" in str(e) or getattr(e, "code", None) == 11000 else str(e)
out["same_long"] = dup(lambda: db.ids.insert_one({"_id": 7, "tid": Int64(big + 1)}))
out["same_as_double"] = dup(lambda: db.ids.insert_one({"_id": 8, "tid": Decimal128("2.0")}))
out["batch"] = dup(lambda: db.ids.insert_many([{"_id": 9, "tid": Int64(big + 9)}, {"_id": 10, "tid": Int64(big + 9)}]))
out["update"] = dup(lambda: db.ids.update_one({"_id": 2}, {"$set": {"tid": Int64(big + 3)}}))
db.ids.update_one({"_id": 2}, {"$set": {"tid": Int64(big + 5)}})
out["found"] = [d["_id"] for d in db.ids.find({"tid": Int64(big + 5)})]
db.built.insert_many([{"_id": i, "tid": Int64(big + i)} for i in range(4)])
db.built.create_index("tid", unique=True)
out["built"] = len(db.built.index_information())
db.clash.insert_many([{"_id": 1, "tid": Int64(big)}, {"_id": 2, "tid": float(big)}])
try:
    db.clash.create_index("tid", unique=True)
    out["clash"] = None
except OperationFailure as e:
    out["clash"] = e.code
print(json.dumps(out))
"#;
    let Some(out) = python(&server, script) else { return };
    assert_eq!(
        out,
        json!({"count": 6, "same_long": 11000, "same_as_double": 11000, "batch": 11000,
               "update": 11000, "found": [2], "built": 2, "clash": 11000})
    );
}
