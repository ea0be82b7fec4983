//! MongoDB query operators the Mongo dialect gained in issue 13's later sessions, through
//! pymongo: the bitwise operators (`$bitsAllSet`, `$bitsAnySet`, `$bitsAllClear`,
//! `$bitsAnyClear`) on MongoDB's documented examples (numbers, BinData, position lists),
//! in `find`, `$match`, `$not`, and a collection validator with its `errInfo`.

use serde_json::json;

use crate::harness::Server;
use crate::mongo::python;

/// MongoDB's documented examples of the four bitwise operators, answered as the manual
/// shows, plus sign extension, fractions, arrays and the errors for bad bitmasks.
#[test]
fn bitwise_operators_answer_mongodbs_documented_examples() {
    let server = Server::start();
    let script = r#"
db = client().acme
db.collection.insert_many([
    {"_id": 1, "a": 54, "binaryValueofA": "00110110"},
    {"_id": 2, "a": 20, "binaryValueofA": "00010100"},
    {"_id": 3, "a": 20.0, "binaryValueofA": "00010100"},
    {"_id": 4, "a": Binary(base64.b64decode("Zg==")), "binaryValueofA": "01100110"},
])
db.more.insert_many([{"_id": "neg", "a": Int64(-5)}, {"_id": "pos", "a": 5}, {"_id": "frac", "a": 5.5},
                     {"_id": "arr", "a": [1, 6]}, {"_id": "str", "a": "54"}, {"_id": "none"}])
def ids(coll, flt):
    return [d["_id"] for d in coll.find(flt).sort("_id", 1)]
b = lambda s: Binary(base64.b64decode(s))
out = {}
for op, masks in {
    "$bitsAllSet": [[1, 5], 50, b("MC==")],
    "$bitsAnySet": [[1, 5], 35, b("MC==")],
    "$bitsAllClear": [[1, 5], 35, b("IA==")],
    "$bitsAnyClear": [[1, 5], 35, b("MC==")],
}.items():
    out[op] = [ids(db.collection, {"a": {op: m}}) for m in masks]
out["sign"] = [ids(db.more, {"a": {"$bitsAllSet": [200]}}), ids(db.more, {"a": {"$bitsAllClear": [200]}})]
out["array"] = ids(db.more, {"a": {"$bitsAllSet": [1, 2]}})
out["not"] = ids(db.more, {"a": {"$not": {"$bitsAnySet": 1}}})
out["match"] = [d["_id"] for d in db.collection.aggregate([{"$match": {"a": {"$bitsAllSet": 4}}}, {"$sort": {"_id": 1}}])]
def err(flt):
    try:
        list(db.collection.find(flt))
        return None
    except OperationFailure as e:
        return [e.code, e.details.get("errmsg")]
out["errors"] = [err({"a": {"$bitsAllClear": "123"}}), err({"a": {"$bitsAllClear": 1.2}}),
                 err({"a": {"$bitsAllClear": -1}}), err({"a": {"$bitsAllSet": [0, -1]}})]
db.create_collection("flags", validator={"f": {"$bitsAllSet": [0, 2]}})
db.flags.insert_one({"_id": 1, "f": 5})
try:
    db.flags.insert_one({"_id": 2, "f": 4})
    out["refused"] = None
except WriteError as e:
    out["refused"] = [e.code, e.details.get("errInfo")]
out["flags"] = ids(db.flags, {})
print(json.dumps(out, default=str))
"#;
    let script = format!("import base64\nfrom pymongo.errors import WriteError\n{script}");
    let Some(out) = python(&server, &script) else { return };
    // The manual's answers (54 = 0b00110110, 20 = 0b00010100, "Zg==" = 0b01100110).
    assert_eq!(out["$bitsAllSet"], json!([[1, 4], [1], [1]]));
    assert_eq!(out["$bitsAnySet"], json!([[1, 4], [1, 4], [1, 2, 3, 4]]));
    assert_eq!(out["$bitsAllClear"], json!([[2, 3], [2, 3], [2, 3]]));
    assert_eq!(out["$bitsAnyClear"], json!([[2, 3], [1, 2, 3, 4], [2, 3, 4]]));
    assert_eq!(out["sign"], json!([["neg"], ["arr", "pos"]]), "numbers are sign-extended");
    assert_eq!(out["array"], json!(["arr"]), "an array element matches (6 = 0b110)");
    // `$not` matches what the condition does not: no odd number (in the array: 1), and
    // values no bit test matches (a fraction, a string, a missing field).
    assert_eq!(out["not"], json!(["frac", "none", "str"]));
    assert_eq!(out["match"], json!([1, 2, 3, 4]));
    assert_eq!(
        out["errors"],
        json!([
            [2, "a takes an Array, a number, or a BinData but received: $bitsAllClear: \"123\""],
            [9, "Expected an integer: $bitsAllClear: 1.2"],
            [9, "Expected a non-negative number in: $bitsAllClear: -1"],
            [2, "Failed to parse bit position. Expected a non-negative number in: 1: -1"],
        ])
    );
    assert_eq!(out["refused"][0], 121);
    let details = &out["refused"][1]["details"];
    assert_eq!(details["operatorName"], "$bitsAllSet", "{details}");
    assert_eq!(details["reason"], "bitwise operator failed to match", "{details}");
    assert_eq!(details["consideredValue"], 4, "{details}");
    assert_eq!(out["flags"], json!([1]));
}

/// `planned(coll, filter)`: the sorted `_id`s the filter finds (checked equal to the
/// collection scan's, `hint: {$natural: 1}`) and the winning plan's scan stage.
const PLANNED: &str = r#"
def planned(coll, flt):
    got = sorted(d["_id"] for d in coll.find(flt))
    scan = sorted(d["_id"] for d in coll.find(flt).hint([("$natural", 1)]))
    assert got == scan, (flt, got, scan)
    plan = coll.find(flt).explain()["queryPlanner"]["winningPlan"]
    return got, plan.get("inputStage", plan)
"#;

/// An anchored regex (`/^abc/`, no `i` flag) is an index range over the strings with that
/// prefix, and `$in` with regexes matches as MongoDB's (a value or a regex) and scans the
/// union of its points and prefix ranges; `explain` shows the bounds. Every answer equals
/// the collection scan's (`hint: {$natural: 1}`).
#[test]
fn anchored_regexes_and_in_with_regexes_use_index_ranges() {
    let server = Server::start();
    let script = r#"
db = client().acme
names = ["東京タワー", "東京駅", "東北", "Tokyo", "Tokio", "tokyo", "Toky", "Osaka", "Ōsaka", "京都"]
db.places.insert_many([{"_id": i, "name": n, "tags": [n[:1], "x"]} for i, n in enumerate(names)])
db.places.insert_one({"_id": 99, "name": 7})
db.places.create_index("name")
def run(flt):
    got, ix = planned(db.places, flt)
    return [got, ix["stage"], ix.get("indexBounds", {}).get("name")]
out = {
    "prefix": run({"name": {"$regex": "^東京"}}),
    "literal": run({"name": Regex("^Tok")}),
    "quantified": run({"name": {"$regex": "^Toky?"}}),
    "case": run({"name": {"$regex": "^tok", "$options": "i"}}),
    "unanchored": run({"name": {"$regex": "kyo"}}),
    "in": run({"name": {"$in": [Regex("^Os"), "京都", Regex("^東北$")]}}),
    "in_unanchored": run({"name": {"$in": [Regex("sak"), "京都"]}}),
    "in_array": run({"tags": {"$in": [Regex("^東"), "O"]}}),
    "nin": code_of(lambda: list(db.places.find({"name": {"$nin": [Regex("^T")]}}))),
}
print(json.dumps(out))
"#;
    let Some(out) = python(&server, &format!("{PLANNED}{script}")) else { return };
    assert_eq!(out["prefix"], json!([[0, 1], "IXSCAN", ["[\"東京\", \"東亭\")"]]));
    assert_eq!(out["literal"], json!([[3, 4, 6], "IXSCAN", ["[\"Tok\", \"Tol\")"]]));
    assert_eq!(out["quantified"], json!([[3, 4, 6], "IXSCAN", ["[\"Tok\", \"Tol\")"]]));
    assert_eq!(out["case"][0], json!([3, 4, 5, 6]));
    assert_eq!(out["case"][1], "COLLSCAN", "a case-insensitive regex has no prefix range");
    assert_eq!(
        (&out["unanchored"][0], &out["unanchored"][1]),
        (&json!([3, 5]), &json!("COLLSCAN"))
    );
    assert_eq!(
        out["in"],
        json!([
            [2, 7, 9],
            "IXSCAN",
            ["[\"Os\", \"Ot\")", "[\"京都\", \"京都\"]", "[\"東北\", \"東匘\")"]
        ])
    );
    let unanchored = (&out["in_unanchored"][0], &out["in_unanchored"][1]);
    assert_eq!(unanchored, (&json!([7, 8, 9]), &json!("COLLSCAN")));
    assert_eq!(out["in_array"][0], json!([0, 1, 2, 7]), "an array element matches");
    assert_eq!(out["nin"], 238, "$nin with regexes is refused, not ignored");
}

/// A partial index is used without a hint when the query implies its filter, and a sparse
/// index when the query needs a value at its field, as MongoDB plans them; otherwise the
/// query reads the collection. Answers equal the collection scan's.
#[test]
fn partial_and_sparse_indexes_serve_queries_that_imply_their_filter() {
    let server = Server::start();
    let script = r#"
db = client().acme
db.restaurants.insert_many([{"_id": i, "cuisine": ["和食", "中華", "洋食"][i % 3], "rating": i % 10,
                              "nick": ("n%d" % i) if i % 4 == 0 else None} for i in range(60)])
db.restaurants.create_index("cuisine", partialFilterExpression={"rating": {"$gt": 5}})
db.restaurants.create_index("nick", sparse=True)
def run(flt):
    got, ix = planned(db.restaurants, flt)
    return [len(got), ix["stage"], ix.get("indexName"), ix.get("isPartial"), ix.get("isSparse")]
print(json.dumps({
    "implied": run({"cuisine": "和食", "rating": {"$gte": 8}}),
    "equal": run({"cuisine": "中華", "rating": {"$gt": 5}}),
    "in": run({"cuisine": "洋食", "rating": {"$in": [7, 9]}}),
    "not_implied": run({"cuisine": "和食", "rating": {"$gte": 5}}),
    "no_rating": run({"cuisine": "和食"}),
    "sparse": run({"nick": {"$gte": "n2"}}),
    "sparse_null": run({"nick": None}),
}))
"#;
    let Some(out) = python(&server, &format!("{PLANNED}{script}")) else { return };
    let ixscan = |n: u64, name: &str, partial: bool, sparse: bool| {
        json!([n, "IXSCAN", name, partial, sparse])
    };
    // 和食 is i % 3 == 0, with rating i % 10 of 8 or 9: 9, 18, 39, 48.
    assert_eq!(out["implied"], ixscan(4, "cuisine_1", true, false));
    // 中華 (i % 3 == 1) rated 6 to 9: 7, 16, 19, 28, 37, 46, 49, 58.
    assert_eq!(out["equal"], ixscan(8, "cuisine_1", true, false));
    assert_eq!(out["in"][1], "IXSCAN");
    assert_eq!(out["not_implied"][1], "COLLSCAN", "rating 5 is not in the partial index");
    assert_eq!(out["no_rating"][1], "COLLSCAN");
    // Nicknames of every fourth document from "n2" on (by bytes: "n12" sorts before it).
    assert_eq!(out["sparse"], ixscan(12, "nick_1", false, true));
    assert_eq!(out["sparse_null"][1], "COLLSCAN", "null matches documents a sparse index lacks");
}

/// `find_one({_id: x})` is one point read (issue 13's point-read gap): the same answer as
/// the general path (`hint: {$natural: 1}`) for string, ObjectId and UUID ids, with a
/// projection, for a missing or deleted document, for a document written over HTTP, and
/// under a collation (which the point read leaves to the general path: same types, same
/// field order).
#[test]
fn find_by_id_is_a_point_read_with_the_general_paths_answer() {
    let server = Server::start();
    server.put("/acme$people", &json!({}));
    server.put_doc("acme$people", "http-1", &json!({"name": "佐藤", "n": 1}));
    let script = r#"
import uuid
from bson.binary import Binary, UuidRepresentation
db = client().acme
oid, uid = ObjectId(), Binary.from_uuid(uuid.uuid4())
db.people.insert_many([{"_id": "a", "name": "A", "n": Int64(2), "tags": ["x"]}, {"_id": oid, "name": "O"},
                       {"_id": uid, "name": "U"}, {"_id": "_under", "name": "_"}, {"_id": "gone"}])
db.people.delete_one({"_id": "gone"})
def both(flt, **kw):
    fast = db.people.find_one(flt, **kw)
    slow = next(iter(db.people.find(flt, **kw).hint([("$natural", 1)]).limit(1)), None)
    same = (fast is None and slow is None) or bson.encode(fast) == bson.encode(slow)
    assert same, (flt, fast, slow)  # the same types and field order
    return json.loads(json_util.dumps(fast))
from bson import json_util
print(json.dumps({
    "string": both({"_id": "a"}),
    "oid": both({"_id": oid})["name"],
    "uuid": both({"_id": uid})["name"],
    "under": both({"_id": "_under"}),
    "projected": both({"_id": "a"}, projection={"name": 1, "_id": 0}),
    "missing": both({"_id": "nope"}),
    "deleted": both({"_id": "gone"}),
    "http": both({"_id": "http-1"}),
    "collated": both({"_id": "A"}, collation={"locale": "en", "strength": 2}),
    "count": len(list(db.people.find({"_id": "a"}, batch_size=1))),
}))
"#;
    let Some(out) = python(&server, script) else { return };
    assert_eq!(out["string"], json!({"_id": "a", "name": "A", "n": 2, "tags": ["x"]}));
    assert_eq!((&out["oid"], &out["uuid"]), (&json!("O"), &json!("U")));
    assert_eq!(out["under"], json!({"_id": "_under", "name": "_"}));
    assert_eq!(out["projected"], json!({"name": "A"}));
    assert_eq!((&out["missing"], &out["deleted"]), (&json!(null), &json!(null)));
    assert_eq!(out["http"], json!({"_id": "http-1", "name": "佐藤", "n": 1}));
    assert_eq!(out["count"], 1);
}

/// `$text` and `$near` need an index the MongoDB front end cannot build yet: they get the
/// errors MongoDB gives without one (27 `IndexNotFound`, 291 `NoQueryExecutionPlans`), and
/// `$geoWithin` is refused as `NotImplemented` — never ignored — in `find`, `$match` and
/// `count`, on a connection that stays usable.
#[test]
fn text_and_geo_queries_are_refused_with_mongodbs_errors() {
    let server = Server::start();
    let script = r#"
db = client().acme
db.shops.insert_one({"_id": 1, "name": "本屋", "loc": {"type": "Point", "coordinates": [139.7, 35.6]}})
point = {"$geometry": {"type": "Point", "coordinates": [139.7, 35.6]}}
print(json.dumps({
    "text": code_of(lambda: list(db.shops.find({"$text": {"$search": "本"}}))),
    "match": code_of(lambda: list(db.shops.aggregate([{"$match": {"$text": {"$search": "本"}}}]))),
    "near": code_of(lambda: list(db.shops.find({"loc": {"$near": point}}))),
    "within": code_of(lambda: db.shops.count_documents({"loc": {"$geoWithin": {"$centerSphere": [[139.7, 35.6], 0.1]}}})),
    "after": db.shops.find_one({"_id": 1})["name"],
}))
"#;
    let Some(out) = python(&server, script) else { return };
    assert_eq!(out, json!({"text": 27, "match": 27, "near": 291, "within": 238, "after": "本屋"}));
}
