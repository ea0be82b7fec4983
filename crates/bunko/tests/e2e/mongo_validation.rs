//! MongoDB collection validators (issue 14, point 6), enforced by the engine's write gate on
//! every write path of both APIs: pymongo's insert, update, findAndModify and transactions
//! get `DocumentValidationFailure` (121); HTTP `PUT`, `_bulk_docs` (also `all_or_nothing`)
//! get CouchDB's `403 forbidden`; a refused write changes nothing. `validationLevel`
//! (`strict`, `moderate`, `off`) and `validationAction` (`error`, `warn`) as in MongoDB.

use serde_json::json;

use crate::harness::Server;
use crate::mongo::python;

#[test]
fn a_validator_refuses_bad_writes_from_both_apis_and_changes_nothing() {
    let server = Server::start();
    let script = r#"
c = client()
db = c.shop
db.create_collection("inv", validator={"qty": {"$gte": 0}, "name": {"$type": "string"}})
info = [x for x in db.list_collections() if x["name"] == "inv"][0]
assert info["options"] == {"validator": {"qty": {"$gte": 0}, "name": {"$type": "string"}}}, info
inv = db.inv
inv.insert_one({"_id": "ok", "name": "鉛筆", "qty": 3})
from pymongo.errors import WriteError, BulkWriteError
def refused(fn):
    try:
        fn()
    except (WriteError, BulkWriteError, OperationFailure) as e:
        code = e.code if not isinstance(e, BulkWriteError) else e.details["writeErrors"][0]["code"]
        return code
    return None
assert refused(lambda: inv.insert_one({"_id": "bad", "name": "消しゴム", "qty": -1})) == 121
assert refused(lambda: inv.insert_many([{"_id": "a", "name": "a", "qty": 1}, {"_id": "b", "qty": 1}])) == 121
assert refused(lambda: inv.update_one({"_id": "ok"}, {"$set": {"qty": -5}})) == 121
assert refused(lambda: inv.replace_one({"_id": "ok"}, {"qty": 1})) == 121
assert refused(lambda: inv.find_one_and_update({"_id": "ok"}, {"$set": {"name": 7}})) == 121
def txn(s):
    inv.insert_one({"_id": "t1", "name": "t", "qty": 1}, session=s)
    inv.insert_one({"_id": "t2", "name": "t", "qty": -1}, session=s)
with c.start_session() as s:
    assert refused(lambda: s.with_transaction(txn)) == 121
docs = sorted(d["_id"] for d in inv.find())
assert docs == ["a", "ok"], docs
assert inv.find_one({"_id": "ok"}) == {"_id": "ok", "name": "鉛筆", "qty": 3}
assert inv.delete_one({"_id": "a"}).deleted_count == 1
print(json.dumps({"ok": True}))
"#;
    let Some(_) = python(&server, script) else { return };
    // Over HTTP: the same rule, CouchDB's 403.
    let (status, body) = server.put("/shop%24inv/bad", &json!({"name": "x", "qty": -1}));
    assert_eq!(
        (status, &body["error"], &body["reason"]),
        (403, &json!("forbidden"), &json!("Document failed validation"))
    );
    let (status, body) = server.post(
        "/shop%24inv/_bulk_docs",
        &json!({"docs": [{"_id": "h1", "name": "h", "qty": 1}, {"_id": "h2", "name": 2, "qty": 1}]}),
    );
    assert_eq!(status, 201);
    assert_eq!(body[0]["ok"], json!(true), "{body}");
    assert_eq!(body[1]["error"], json!("forbidden"), "{body}");
    let (status, _) = server.post(
        "/shop%24inv/_bulk_docs",
        &json!({"all_or_nothing": true, "docs": [{"_id": "h3", "name": "h", "qty": 1}, {"_id": "h4", "qty": -1}]}),
    );
    assert!(status >= 400, "{status}");
    let (_, all) = server.get("/shop%24inv/_all_docs");
    let ids: Vec<&str> =
        all["rows"].as_array().into_iter().flatten().filter_map(|r| r["id"].as_str()).collect();
    assert_eq!(ids, ["_design/mongodb", "h1", "ok"]);
    let ok = server.get_doc("shop%24inv", "ok");
    let (status, _) =
        server.put("/shop%24inv/ok", &json!({"_rev": ok["_rev"], "name": "鉛筆", "qty": -2}));
    assert_eq!(status, 403);
    assert_eq!(server.get_doc("shop%24inv", "ok")["qty"], json!(3));
    // Levels and actions.
    let script = r#"
db = client().shop
inv = db.inv
db.command("collMod", "inv", validationLevel="off")
inv.insert_one({"_id": "legacy", "qty": -1})
db.command("collMod", "inv", validationLevel="moderate")
inv.update_one({"_id": "legacy"}, {"$set": {"qty": -2}})
from pymongo.errors import WriteError
try:
    inv.update_one({"_id": "ok"}, {"$set": {"qty": -2}})
    raise AssertionError("moderate let a valid document become invalid")
except WriteError as e:
    assert e.code == 121, e
db.command("collMod", "inv", validationAction="warn")
inv.insert_one({"_id": "warned", "qty": -1})
opts = [x for x in db.list_collections() if x["name"] == "inv"][0]["options"]
assert opts["validationLevel"] == "moderate" and opts["validationAction"] == "warn", opts
assert sorted(d["_id"] for d in inv.find()) == ["h1", "legacy", "ok", "warned"]
assert code_of(lambda: db.command("collMod", "inv", validationLevel="sometimes")) == 2
assert code_of(lambda: db.command("collMod", "nope", validationLevel="off")) == 26
print(json.dumps({"ok": True}))
"#;
    assert_eq!(python(&server, script), Some(json!({"ok": true})));
    // `$jsonSchema`, with exact BSON types, over both APIs.
    let script = r#"
db = client().shop
schema = {"bsonType": "object", "required": ["title", "pages"], "properties": {
    "title": {"bsonType": "string", "minLength": 1},
    "pages": {"bsonType": "int", "minimum": 1},
    "tags": {"bsonType": "array", "items": {"bsonType": "string"}, "uniqueItems": True}}}
db.create_collection("books", validator={"$jsonSchema": schema}, validationAction="error")
books = db.books
books.insert_one({"_id": "b1", "title": "吾輩は猫である", "pages": 300, "tags": ["小説"]})
from pymongo.errors import WriteError
for bad in [{"title": "x"}, {"title": "x", "pages": 1.5}, {"title": "x", "pages": Int64(3)},
            {"title": "", "pages": 3}, {"title": "x", "pages": 3, "tags": ["a", "a"]}]:
    try:
        books.insert_one(bad)
        raise AssertionError(f"accepted {bad}")
    except WriteError as e:
        assert e.code == 121, e
assert code_of(lambda: db.command("collMod", "books", validator={"$jsonSchema": {"format": "x"}})) == 9
assert [d["_id"] for d in books.find()] == ["b1"]
print(json.dumps({"ok": True}))
"#;
    assert_eq!(python(&server, script), Some(json!({"ok": true})));
    let (status, body) = server.put("/shop%24books/h1", &json!({"title": "こころ", "pages": 1.5}));
    assert_eq!((status, &body["error"]), (403, &json!("forbidden")));
    let (status, _) = server.put("/shop%24books/h1", &json!({"title": "こころ", "pages": 376}));
    assert_eq!(status, 201);
}

/// A collection's validator and its indexes share its `_design/mongodb`: creating indexes
/// after a validator keeps both working, and dropping the last index keeps the validator.
#[test]
fn validators_and_indexes_share_the_collection_design_document() {
    let server = Server::start();
    let script = r#"
c = client()
db = c.shop
db.create_collection("inv", validator={"qty": {"$gte": 0}})
inv = db.inv
inv.create_index("sku", unique=True)
inv.insert_one({"_id": 1, "sku": "a", "qty": 1})
from pymongo.errors import WriteError, DuplicateKeyError
try:
    inv.insert_one({"_id": 2, "sku": "a", "qty": 1})
    raise AssertionError("duplicate sku accepted")
except DuplicateKeyError:
    pass
plan = inv.find({"sku": "a"}).explain()["queryPlanner"]["winningPlan"]
assert "IXSCAN" in str(plan), plan
inv.drop_index("sku_1")
try:
    inv.insert_one({"_id": 3, "sku": "b", "qty": -1})
    raise AssertionError("validator lost with the index")
except WriteError as e:
    assert e.code == 121, e
info = [x for x in db.list_collections() if x["name"] == "inv"][0]
assert info["options"] == {"validator": {"qty": {"$gte": 0}}}, info
assert [i["name"] for i in inv.list_indexes()] == ["_id_"]
print(json.dumps({"ok": True}))
"#;
    let Some(got) = python(&server, script) else { return };
    assert_eq!(got, json!({"ok": true}));
}

/// A `$jsonSchema` refusal carries MongoDB 5+'s `errInfo` (`failingDocumentId` and
/// `details` naming each rule not satisfied), on insert and update alike.
#[test]
fn a_schema_refusal_reports_err_info_details() {
    let server = Server::start();
    let script = r#"
from pymongo.errors import WriteError
db = client().school
db.create_collection("students", validator={"$jsonSchema": {
    "bsonType": "object", "title": "Student Object Validation", "required": ["name", "year"],
    "properties": {
        "name": {"bsonType": "string", "description": "'name' must be a string"},
        "year": {"bsonType": "int", "minimum": 2017, "maximum": 3017},
        "gpa": {"bsonType": ["double"], "description": "'gpa' must be a double if the field exists"}}}})
def err_info(fn):
    try:
        fn()
    except WriteError as e:
        return [e.code, e.details["errmsg"], e.details["errInfo"]]
insert = err_info(lambda: db.students.insert_one({"_id": "s1", "name": "Alice", "year": 2019, "gpa": 3}))
db.students.insert_one({"_id": "s2", "name": "Bob", "year": 2020})
update = err_info(lambda: db.students.update_one({"_id": "s2"}, {"$unset": {"name": ""}}))
print(json.dumps({"insert": insert, "update": update}))
"#;
    let Some(out) = python(&server, script) else { return };
    assert_eq!(
        out["insert"],
        json!([121, "Document failed validation", {
            "failingDocumentId": "s1",
            "details": {"operatorName": "$jsonSchema", "title": "Student Object Validation",
                "schemaRulesNotSatisfied": [{"operatorName": "properties", "propertiesNotSatisfied": [
                    {"propertyName": "gpa", "description": "'gpa' must be a double if the field exists",
                     "details": [{"operatorName": "bsonType", "specifiedAs": {"bsonType": ["double"]},
                        "reason": "type did not match", "consideredValue": 3, "consideredType": "int"}]}]}]}
        }])
    );
    assert_eq!(
        out["update"][2]["details"]["schemaRulesNotSatisfied"],
        json!([{"operatorName": "required", "specifiedAs": {"required": ["name", "year"]}, "missingProperties": ["name"]}])
    );
}

/// `bypassDocumentValidation` on insert, update, findAndModify, `bulkWrite` and `aggregate` with `$out`
/// and `$merge` lets a database admin write what the validator refuses; a member who is
/// not an admin is refused (13) and nothing is written.
#[test]
fn bypass_document_validation_is_for_database_admins() {
    let server = Server::start_with(&["--pbkdf2-iterations", "10"], &[]);
    let user = json!({"name": "amy", "password": "pw", "roles": [], "type": "user"});
    assert_eq!(server.put("/_users/org.couchdb.user:amy", &user).0, 201);
    let script = r#"
from pymongo.errors import WriteError
db = client().shop
db.create_collection("inv", validator={"qty": {"$gte": 0}})
db.staging.insert_many([{"_id": "s1", "qty": -7}, {"_id": "s2", "qty": -8}])
db.inv.insert_one({"_id": "a", "qty": -1}, bypass_document_validation=True)
db.inv.update_one({"_id": "a"}, {"$set": {"qty": -2}}, bypass_document_validation=True)
db.command("findAndModify", "inv", query={"_id": "a"}, update={"$inc": {"qty": -1}}, bypassDocumentValidation=True)
db.inv.insert_many([{"_id": "b", "qty": -1}], bypass_document_validation=True)
from pymongo import InsertOne
client().bulk_write([InsertOne(namespace="shop.inv", document={"_id": "c", "qty": -4})], bypass_document_validation=True)
db.staging.aggregate([{"$merge": {"into": "inv"}}], bypassDocumentValidation=True)
merge_refused = code_of(lambda: db.staging.aggregate([{"$set": {"_id": "m"}}, {"$merge": {"into": "inv"}}]))
db.staging.aggregate([{"$out": "inv_copy"}], bypassDocumentValidation=True)
import urllib.request, base64
auth = "Basic " + base64.b64encode(os.environ["MONGO_ADMIN"].encode()).decode()
members = json.dumps({"members": {"names": ["amy"]}}).encode()
urllib.request.urlopen(urllib.request.Request(os.environ["BUNKO_URL"] + "/shop%24inv/_security",
    method="PUT", data=members, headers={"Content-Type": "application/json", "Authorization": auth}))
amy = client(user="amy", password="pw").shop
def code(fn):
    try:
        fn()
    except (WriteError, OperationFailure) as e:
        return e.code
amy_bypass = code(lambda: amy.inv.insert_one({"_id": "x", "qty": -1}, bypass_document_validation=True))
amy_plain = code(lambda: amy.inv.insert_one({"_id": "y", "qty": -1}))
amy_ok = amy.inv.insert_one({"_id": "z", "qty": 1}).inserted_id
print(json.dumps({"inv": list(db.inv.find().sort("_id", 1)), "merge_refused": merge_refused,
    "copy": db.inv_copy.count_documents({}), "amy": [amy_bypass, amy_plain, amy_ok]}))
"#;
    let Some(out) = python(&server, script) else { return };
    assert_eq!(
        out["inv"],
        json!([{"_id": "a", "qty": -3}, {"_id": "b", "qty": -1}, {"_id": "c", "qty": -4}, {"_id": "s1", "qty": -7}, {"_id": "s2", "qty": -8}, {"_id": "z", "qty": 1}])
    );
    assert_eq!(out["merge_refused"], 121);
    assert_eq!(out["copy"], 2);
    assert_eq!(out["amy"], json!([13, 121, "z"]));
}

/// A validator written with query operators explains a refusal in `errInfo.details` as
/// MongoDB does (golden cases from MongoDB's own document-validation error tests and its
/// "Contacts" example): the failing operator, how it was written, why, and the value at
/// its path; `$and`/`$or` list the failing clauses, `$nor` and `$not` the ones that hold.
#[test]
fn a_query_operator_refusal_reports_err_info_details() {
    let server = Server::start();
    let script = REFUSALS.to_string()
        + r#"
from bson import json_util
db = client().qvalid
cases = [
    ({"a": {"$eq": 2}}, {"_id": 10, "a": 1}),
    ({"a": {"$gt": 0, "$lt": 10}}, {"_id": 1, "a": 11}),
    ({"$and": [{"$or": [{"price": {"$gt": 50}}, {"price": {"$lt": 20}}]}, {"qty": {"$gt": 0}}, {"qty": {"$lt": 10}}]},
     {"_id": 1, "price": 30, "qty": 30}),
    ({"$nor": [{"a": {"$gt": 10}}, {"b": {"$lt": 10}}]}, {"_id": 1, "a": 9, "b": 9}),
    ({"a": {"$exists": False}}, {"_id": 1, "a": 1}),
    ({"a": {"$not": {"$lt": 10}}}, {"_id": 1, "a": 9}),
    ({"a": {"$type": "bool"}}, {"_id": 1, "a": ["x", "y", "z"]}),
    ({"a.b": {"$in": [5, 6, 7, [2, 3, 4]]}}, {"_id": 1, "a": [{"b": [1, 2]}, {"b": [3, 4]}]}),
    ({"a": {"$gt": 3}}, {"_id": 1, "b": 1}),
    ({"$or": [{"phone": {"$type": "string"}}, {"email": {"$regex": Regex("@mongodb\\.com$")}},
              {"status": {"$in": ["Unknown", "Incomplete"]}}]}, {"_id": 1, "email": "info@mongodb.co"}),
]
out = refusals(db, cases)
out = out[:1] + [e and e["details"] for e in out[1:]]
print(json_util.dumps(out))
"#;
    let Some(out) = python(&server, &script) else { return };
    let lt10 = |v: i32, reason: &str| json!({"operatorName": "$lt", "specifiedAs": {"a": {"$lt": 10}}, "reason": reason, "consideredValue": v});
    let expected = json!([
        {"failingDocumentId": 10, "details": {"operatorName": "$eq", "specifiedAs": {"a": {"$eq": 2}},
            "reason": "comparison failed", "consideredValue": 1}},
        {"operatorName": "$and", "clausesNotSatisfied": [{"index": 1, "details": lt10(11, "comparison failed")}]},
        {"operatorName": "$and", "clausesNotSatisfied": [
            {"index": 0, "details": {"operatorName": "$or", "clausesNotSatisfied": [
                {"index": 0, "details": {"operatorName": "$gt", "specifiedAs": {"price": {"$gt": 50}},
                    "reason": "comparison failed", "consideredValue": 30}},
                {"index": 1, "details": {"operatorName": "$lt", "specifiedAs": {"price": {"$lt": 20}},
                    "reason": "comparison failed", "consideredValue": 30}}]}},
            {"index": 2, "details": {"operatorName": "$lt", "specifiedAs": {"qty": {"$lt": 10}},
                "reason": "comparison failed", "consideredValue": 30}}]},
        {"operatorName": "$nor", "clausesSatisfied": [{"index": 1, "details": {"operatorName": "$lt",
            "specifiedAs": {"b": {"$lt": 10}}, "reason": "comparison succeeded", "consideredValue": 9}}]},
        {"operatorName": "$exists", "specifiedAs": {"a": {"$exists": false}}, "reason": "path does exist"},
        {"operatorName": "$not", "details": lt10(9, "comparison succeeded")},
        {"operatorName": "$type", "specifiedAs": {"a": {"$type": "bool"}}, "reason": "type did not match",
            "consideredValues": ["x", "y", "z"], "consideredType": "string"},
        {"operatorName": "$in", "specifiedAs": {"a.b": {"$in": [5, 6, 7, [2, 3, 4]]}},
            "reason": "no matching value found in array", "consideredValues": [1, 2, 3, 4]},
        {"operatorName": "$gt", "specifiedAs": {"a": {"$gt": 3}}, "reason": "field was missing"},
        {"operatorName": "$or", "clausesNotSatisfied": [
            {"index": 0, "details": {"operatorName": "$type", "specifiedAs": {"phone": {"$type": "string"}},
                "reason": "field was missing"}},
            {"index": 1, "details": {"operatorName": "$regex",
                "specifiedAs": {"email": {"$regex": {"$regularExpression": {"pattern": "@mongodb\\.com$", "options": ""}}}},
                "reason": "regular expression did not match", "consideredValue": "info@mongodb.co"}},
            {"index": 2, "details": {"operatorName": "$in", "specifiedAs": {"status": {"$in": ["Unknown", "Incomplete"]}},
                "reason": "field was missing"}}]},
    ]);
    let (out, expected) = (
        out.as_array().cloned().unwrap_or_default(),
        expected.as_array().cloned().unwrap_or_default(),
    );
    assert_eq!(out.len(), expected.len(), "{out:?}");
    for (i, (got, want)) in out.iter().zip(&expected).enumerate() {
        assert_eq!(got, want, "case {i}");
    }
}

/// Python: `refusals(db, cases)` creates a collection per `(validator, document)` case,
/// inserts the document and gives the refusal's `errInfo` (`None`: accepted).
const REFUSALS: &str = r#"
from pymongo.errors import WriteError
def refusals(db, cases):
    out = []
    for i, (validator, doc) in enumerate(cases):
        name = "c%d" % i
        db.create_collection(name, validator=validator)
        try:
            db[name].insert_one(doc)
            out.append(None)
        except WriteError as e:
            out.append(e.details["errInfo"])
    return out
"#;

/// `errInfo.details` of `$all` and `$elemMatch`, as MongoDB's `doc_validation_error.cpp`
/// reports them: the array itself is considered (no traversal), each operator's reason, and
/// a type mismatch (`consideredType`, `expectedType`) for an `$elemMatch` on a non-array,
/// and the bitwise operators' (`expectedTypes` of a number or BinData).
#[test]
fn array_operator_refusals_report_their_reasons() {
    let server = Server::start();
    let script = REFUSALS.to_string()
        + r#"
from bson import json_util
db = client().qvalid2
cases = [
    ({"tags": {"$all": ["猫", "犬", "鳥"]}}, {"_id": 1, "tags": ["猫", "犬"]}),
    ({"items": {"$elemMatch": {"qty": {"$gt": 3}}}}, {"_id": 1, "items": [{"qty": 1}, {"qty": 2}]}),
    ({"items": {"$elemMatch": {"$gt": 3}}}, {"_id": 1, "items": 5}),
    ({"tags": {"$not": {"$all": ["猫"]}}}, {"_id": 1, "tags": ["猫"]}),
    ({"tags": {"$all": ["猫"]}}, {"_id": 1}),
    ({"flags": {"$bitsAllSet": [1, 5]}}, {"_id": 1, "flags": 2}),
    ({"flags": {"$bitsAllSet": [1, 5]}}, {"_id": 1, "flags": "x"}),
]
out = [e and e["details"] for e in refusals(db, cases)]
print(json_util.dumps(out))
"#;
    let Some(out) = python(&server, &script) else { return };
    let expected = json!([
        {"operatorName": "$all", "specifiedAs": {"tags": {"$all": ["猫", "犬", "鳥"]}},
            "reason": "array did not contain all specified values", "consideredValue": ["猫", "犬"]},
        {"operatorName": "$elemMatch", "specifiedAs": {"items": {"$elemMatch": {"qty": {"$gt": 3}}}},
            "reason": "array did not satisfy the child predicate",
            "consideredValue": [{"qty": 1}, {"qty": 2}]},
        {"operatorName": "$elemMatch", "specifiedAs": {"items": {"$elemMatch": {"$gt": 3}}},
            "reason": "type did not match", "consideredType": "int", "expectedType": "array",
            "consideredValue": 5},
        {"operatorName": "$not", "details": {"operatorName": "$all", "specifiedAs": {"tags": {"$all": ["猫"]}},
            "reason": "array did contain all specified values", "consideredValue": ["猫"]}},
        {"operatorName": "$all", "specifiedAs": {"tags": {"$all": ["猫"]}}, "reason": "field was missing"},
        {"operatorName": "$bitsAllSet", "specifiedAs": {"flags": {"$bitsAllSet": [1, 5]}},
            "reason": "bitwise operator failed to match", "consideredValue": 2},
        {"operatorName": "$bitsAllSet", "specifiedAs": {"flags": {"$bitsAllSet": [1, 5]}},
            "reason": "type did not match", "consideredType": "string",
            "expectedTypes": ["binData", "decimal", "double", "int", "long"], "consideredValue": "x"},
    ]);
    assert_eq!(out, expected);
}
