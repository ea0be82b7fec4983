//! `distinct` by a `DISTINCT_SCAN` (issue 13): an index whose field is the key answers
//! from about one entry per value, from the entries themselves (`PROJECTION_COVERED`, no
//! document read) or, for a collated index, from one document per value (`FETCH`); the
//! values are those a collection scan gives (BSON types included): a missing field is none
//! (though indexed as `null`), numbers equal across types count once, a multikey field that
//! held a nested array is answered by the documents (array elements are values, a nested
//! array one value), a collated index serves only its own collation. Over multikey indexes
//! the plans are those of MongoDB's `distinct_multikey.js` (an unfiltered distinct of a
//! multikey field is a covered `DISTINCT_SCAN` until a document holds a nested array
//! there), and a document whose nested array flattens into a key within the bounds is not
//! taken for a match.

use serde_json::json;

use crate::harness::Server;
use crate::mongo::python;

#[test]
fn distinct_scans_give_the_values_of_a_collection_scan() {
    let server = Server::start();
    let script = r#"
c = client()
db = c.dis
co = db.items
docs = [{"_id": i, "s": f"k{i % 10}", "n": [1, 1.0, Int64(1), 2.5, Decimal128("7")][i % 5],
         "tags": [i % 3, [i % 4, "x"], {"y": 1}] if i % 2 else i % 6}
        for i in range(400)]
docs += [{"_id": 500}, {"_id": 501, "tags": []}, {"_id": 502, "s": None, "tags": [None]}]
co.insert_many(docs)
co.create_index("s")
co.create_index([("n", 1), ("s", 1)])
co.create_index("tags")

def distinct(key, query=None, **kw):
    cmd = SON([("distinct", "items"), ("key", key), ("query", query or {})] + list(kw.items()))
    return db.command(cmd)["values"]

def canon(values):
    return sorted(bson.encode({"v": v}) for v in values)

def explain(key, query=None, **kw):
    cmd = SON([("distinct", "items"), ("key", key), ("query", query or {})] + list(kw.items()))
    return db.command("explain", cmd, verbosity="executionStats")

def plan(e):
    w = e["queryPlanner"]["winningPlan"]
    return [w["stage"], w.get("inputStage", {}).get("stage")]

for key, query, shape in [
    ("s", {}, ["PROJECTION_COVERED", "DISTINCT_SCAN"]),
    ("s", {"s": {"$gte": "k5"}}, ["PROJECTION_COVERED", "DISTINCT_SCAN"]),
    ("n", {}, ["PROJECTION_COVERED", "DISTINCT_SCAN"]),
    ("n", {"n": {"$gt": 1}}, ["PROJECTION_COVERED", "DISTINCT_SCAN"]),
    ("s", {"n": 2.5}, ["PROJECTION_COVERED", "DISTINCT_SCAN"]),
]:
    got = distinct(key, query)
    want = distinct(key, query, hint={"$natural": 1})
    assert canon(got) == canon(want), (key, query, got, want)
    e = explain(key, query)
    assert plan(e) == shape, (key, query, e["queryPlanner"])
    stats = e["executionStats"]
    assert stats["nReturned"] == len(got), (key, stats)
    # An open numeric bound reads the entries of its own key (240 documents hold n == 1 here):
    # numbers sharing that double key (a Decimal128 a hair above 1) must be matched exactly.
    most = 250 if query == {"n": {"$gt": 1}} else 120
    assert stats["totalKeysExamined"] < most, (key, query, stats)
    if shape[0] == "PROJECTION_COVERED":
        assert stats["totalDocsExamined"] == 0, (key, stats)
        assert e["queryPlanner"]["winningPlan"]["transformBy"] == {"_id": 0, key: 1}
    else:
        assert 0 < stats["totalDocsExamined"] < 60, (key, stats)

# Numbers equal across types count once; the first met (in _id order) is kept.
assert canon(distinct("n")) == canon([1, 2.5, Decimal128("7")]), distinct("n")
# Array elements are values, a nested array is one value, [] and a missing field give none.
assert canon(distinct("tags")) == canon([0, 1, 2, 4, [1, "x"], [3, "x"], {"y": 1}, None]), (distinct("tags"), explain("tags")["queryPlanner"])
# A missing field indexed as null gives no value until a real null exists.
m = db.missing
m.insert_many([{"_id": i, "a": i % 3} if i % 2 else {"_id": i} for i in range(50)])
m.create_index("a")
assert sorted(m.distinct("a")) == [0, 1, 2]
m.insert_one({"_id": 99, "a": None})
assert sorted(m.distinct("a"), key=lambda v: (v is not None, v)) == [None, 0, 1, 2]
scan = db.command("explain", {"distinct": "missing", "key": "a", "query": {}}, verbosity="executionStats")
assert plan(scan) == ["PROJECTION_COVERED", "DISTINCT_SCAN"], scan["queryPlanner"]
# Not a distinct scan: a filter the bounds do not say whole, a field of no index.
# A multikey field (its index expands nested arrays, which distinct returns whole).
for key, query in [("s", {"x": 1}), ("s", {"s": None}), ("other", {}), ("tags", {})]:
    e = explain(key, query)
    assert "DISTINCT_SCAN" not in str(e["queryPlanner"]), (key, query, e["queryPlanner"])
    assert canon(distinct(key, query)) == canon(distinct(key, query, hint={"$natural": 1}))
# A collated index answers under its own collation only, reading one document per value.
ci = {"locale": "en", "strength": 2}
col = db.collated
col.insert_many([{"_id": 1, "name": "Abc"}, {"_id": 2, "name": "abc"}, {"_id": 3, "name": "ABC"},
                 {"_id": 4, "name": "x"}])
col.create_index("name", collation=ci)
same = db.command({"distinct": "collated", "key": "name", "collation": ci})["values"]
assert same == ["Abc", "x"], same
e = db.command("explain", {"distinct": "collated", "key": "name", "collation": ci}, verbosity="executionStats")
assert plan(e) == ["PROJECTION_DEFAULT", "DISTINCT_SCAN"], e["queryPlanner"]
assert e["queryPlanner"]["winningPlan"]["inputStage"]["isFetching"] is True
assert e["executionStats"]["totalDocsExamined"] == 2, e["executionStats"]
assert sorted(col.distinct("name")) == ["ABC", "Abc", "abc", "x"]
e = db.command("explain", {"distinct": "collated", "key": "name"}, verbosity="executionStats")
assert "DISTINCT_SCAN" not in str(e["queryPlanner"]), e["queryPlanner"]
print(json.dumps({"ok": True}))
"#;
    let Some(result) = python(&server, script) else { return };
    assert_eq!(result, json!({"ok": true}));
}

/// MongoDB's `jstests/core/query/distinct/distinct_multikey.js`, case by case: values and
/// plan. Where Bunko's plan differs from MongoDB's it says why in the case's comment.
#[test]
fn distinct_over_multikey_indexes_plans_as_mongodb() {
    let server = Server::start();
    let script = r#"
db = client().dis
coll = db.mk

def case(key, query):
    e = db.command("explain", {"distinct": "mk", "key": key, "query": query}, verbosity="executionStats")
    values = db.command({"distinct": "mk", "key": key, "query": query})["values"]
    scanned = db.command({"distinct": "mk", "key": key, "query": query, "hint": {"$natural": 1}})["values"]
    assert sorted(map(str, values)) == sorted(map(str, scanned)), (values, scanned)
    return [sorted(values, key=str), stages(e["queryPlanner"]["winningPlan"]), e["executionStats"]["nReturned"]]

def reset(index, docs):
    coll.drop()
    coll.create_index(index)
    coll.insert_many(docs)

out = {}
reset("a", [{"a": [1, 2, 3]}, {"a": [2, 3, 4]}, {"a": [5, 6, 7]}])
out["unfiltered"] = case("a", {})
out["filtered"] = case("a", {"a": 3})
# Empty arrays, nulls in arrays, missing fields and arrays of objects on the way.
coll.insert_many([{"a": []}, {"a": [None, 1]}, {"b": 1}, {"a": [{"b": 1}, {"b": [2, 3]}]}])
out["unfiltered_mixed"] = case("a", {})
reset("a.b", [{"a": [{"b": 1}, {"b": [2, 3]}]}, {"a": {"b": [3, 4]}}])
out["unfiltered_dotted"] = case("a.b", {})
# Once a document held a nested array there, the keys cannot give the values (Bunko's keys
# flatten it, distinct returns it whole): the documents are read, as ever after.
reset("a", [{"a": [1, 2]}, {"a": [[2], 3]}])
out["nested"] = case("a", {})
coll.delete_many({"a": [[2], 3]})
out["nested_gone"] = case("a", {})
reset("a.b", [{"a": {"b": [1, 2, 3]}}, {"a": {"b": [2, 3, 4]}}])
out["dotted"] = case("a.b", {"a.b": 3})
reset("a", [{"a": 1}, {"a": 2}, {"a": 3}])
out["plain"] = case("a", {"a": {"$gte": 2}})
reset([("a", 1), ("b", 1)], [{"a": 1, "b": [2, 3]}, {"a": 8, "b": [3, 4]}, {"a": 7, "b": [4, 5]}])
out["leading"] = case("a", {"a": {"$gte": 2}})
out["trailing_multikey"] = case("b", {"a": {"$gte": 2}})
# MongoDB: PROJECTION_COVERED; Bunko reads each document, as a nested array's elements are
# keys too ({a: [[3]]} has an entry a == 3 but does not match {a: 3}).
reset([("a", 1), ("b", 1)], [{"a": [2, 3], "b": 1}, {"a": [3, 4], "b": 8}, {"a": [3, 5], "b": 7},
                             {"a": [[3], 9], "b": 99}, {"a": [3, 3], "b": 1.0}])
out["trailing"] = case("b", {"a": 3})
out["trailing_in"] = case("b", {"a": {"$in": [3, 9]}})
reset([("a", 1), ("b.c", 1)], [{"a": [2, 3], "b": {"c": 1}}, {"a": [3, 4], "b": {"c": 8}}, {"a": [3, 5], "b": {"c": 7}}])
out["trailing_dotted"] = case("b.c", {"a": 3})
# A range on the multikey field: two conditions may hold for different elements.
out["range"] = case("b.c", {"a": {"$gt": 2, "$lt": 4}})
print(json.dumps(out, default=str))
"#;
    let Some(out) = python(&server, script) else { return };
    let covered = json!(["PROJECTION_COVERED", "DISTINCT_SCAN"]);
    let fetching = json!(["PROJECTION_DEFAULT", "DISTINCT_SCAN"]);
    let ixscan = json!(["FETCH", "IXSCAN"]);
    // MongoDB 8: a DISTINCT_SCAN of the multikey index, one value per key (covered there;
    // here each value is read from one document, as entries keep no arrays).
    assert_eq!(out["unfiltered"], json!([[1, 2, 3, 4, 5, 6, 7], fetching, 7]));
    let mixed = json!([[1, 2, 3, 4, 5, 6, 7, null, {"b": 1}, {"b": [2, 3]}], fetching, 10]);
    assert_eq!(out["unfiltered_mixed"], mixed);
    assert_eq!(out["unfiltered_dotted"], json!([[1, 2, 3, 4], fetching, 4]));
    assert_eq!(out["nested"], json!([[1, 2, 3, [2]], ["COLLSCAN"], 2]));
    assert_eq!(out["nested_gone"], json!([[1, 2], ["COLLSCAN"], 1]));
    assert_eq!(out["filtered"], json!([[1, 2, 3, 4], ixscan, 2]));
    assert_eq!(out["dotted"], json!([[1, 2, 3, 4], ixscan, 2]));
    assert_eq!(out["plain"], json!([[2, 3], covered, 2]));
    assert_eq!(out["leading"], json!([[7, 8], covered, 2]));
    assert_eq!(out["trailing_multikey"], json!([[3, 4, 5], ixscan, 2]));
    assert_eq!(out["trailing"], json!([[1, 7, 8], fetching, 3]));
    assert_eq!(out["trailing_in"], json!([[1, 7, 8, 99], fetching, 4]));
    assert_eq!(out["trailing_dotted"], json!([[1, 7, 8], fetching, 3]));
    assert_eq!(out["range"][0], json!([1, 7, 8]));
    assert_ne!(out["range"][1], fetching);
}
