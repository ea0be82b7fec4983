//! `distinct` by a `DISTINCT_SCAN` (issue 13): an index whose field is the key answers
//! from about one entry per value, from the entries themselves (`PROJECTION_COVERED`, no
//! document read) or, for a collated index, from one document per value (`FETCH`); the
//! values are those a collection scan gives (BSON types included): a missing field is none
//! (though indexed as `null`), numbers equal across types count once, a multikey field is
//! answered by the documents (array elements are values, a nested array one value), a
//! collated index serves only its own collation.

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
assert plan(e) == ["FETCH", "DISTINCT_SCAN"], e["queryPlanner"]
assert e["executionStats"]["totalDocsExamined"] == 2, e["executionStats"]
assert sorted(col.distinct("name")) == ["ABC", "Abc", "abc", "x"]
e = db.command("explain", {"distinct": "collated", "key": "name"}, verbosity="executionStats")
assert "DISTINCT_SCAN" not in str(e["queryPlanner"]), e["queryPlanner"]
print(json.dumps({"ok": True}))
"#;
    let Some(result) = python(&server, script) else { return };
    assert_eq!(result, json!({"ok": true}));
}
