//! MongoDB's numeric types told apart (issue 13): `$type` with `int`, `long`, `double`,
//! `decimal`, their codes 16/18/1/19 and `number`, in `find`, `$match`, `$expr`'s `$type`
//! and `$isNumber`, `$jsonSchema`'s `bsonType` as a filter and in a validator (with
//! `consideredType` in its `errInfo`), and a partial index whose filter names a numeric type
//! (used only by the queries that imply it). Documents written as plain JSON over HTTP
//! have the types MongoDB would read them as (`5` an int, `5.0` a double).

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
