//! Covered queries (issue 14, point 3): a `find` or an `aggregate` whose filter, sort and
//! projection (or following `$group`/`$count`) read only fields of the index it scans is
//! answered from the index entries alone: `PROJECTION_COVERED` over `IXSCAN`, no `FETCH`,
//! `totalDocsExamined: 0`, and the very BSON (types, field order, missing fields) a fetch
//! gives. Multikey paths, hashed and collated indexes, `_id` not in the index and `null`
//! filters still fetch.

use serde_json::json;

use crate::harness::Server;
use crate::mongo::python;

#[test]
fn covered_answers_equal_fetched_answers_and_examine_no_document() {
    let server = Server::start();
    let script = r#"
import datetime
from bson import Int64, Decimal128, ObjectId, encode
c = client()
co = c.cov.items
when = datetime.datetime(2024, 5, 1, 12, 30, 0, 123000)
co.insert_many([
    {"_id": 1, "k": 1, "v": Int64(5), "s": "a", "n": {"y": "nested", "x": 1.5}, "other": "x" * 500},
    {"_id": 2, "k": 2, "v": 5, "s": "b", "n": {"x": Decimal128("1.50")}},
    {"_id": 3, "k": 3, "v": 5.0, "n": {}},
    {"_id": 4, "k": 4, "v": when, "s": None, "n": "scalar"},
    {"_id": 5, "s": "e", "k": 5, "v": ObjectId("5f1d7a0b2c3d4e5f60718293"), "n": {"x": True}},
    {"_id": 6, "k": 6, "v": Decimal128("2.000"), "s": "f", "n": {"x": Int64(2 ** 40)}},
])
co.create_index([("k", 1), ("v", 1), ("s", 1), ("n.x", 1)])
proj = {"_id": 0, "k": 1, "v": 1, "s": 1, "n.x": 1}
natural = [("$natural", 1)]
def same(a, b):
    assert [encode(d) for d in a] == [encode(d) for d in b], (a, b)
covered = list(co.find({"k": {"$gte": 1}}, proj))
same(covered, list(co.find({"k": {"$gte": 1}}, proj).hint(natural)))
assert len(covered) == 6 and type(covered[0]["v"]) is Int64 and "s" not in covered[2], covered
assert covered[2]["n"] == {} and "n" not in covered[3], covered
plan = co.find({"k": {"$gte": 1}}, proj).explain()
w = plan["queryPlanner"]["winningPlan"]
assert w["stage"] == "PROJECTION_COVERED" and w["transformBy"] == proj, w
assert w["inputStage"]["stage"] == "IXSCAN", w
stats = plan["executionStats"]
assert stats["totalDocsExamined"] == 0 and stats["totalKeysExamined"] == 6 and stats["nReturned"] == 6, stats
# Sorted, skipped and limited on index fields; an $or and $in of the index fields.
q = co.find({"k": {"$gt": 1}, "s": {"$in": ["b", "e", "f"]}}, {"_id": 0, "s": 1, "k": 1}).sort("v", -1).skip(1).limit(1)
same(list(q.clone()), list(q.clone().hint(natural)))
w = q.explain()["queryPlanner"]["winningPlan"]
assert [w["stage"], w["inputStage"]["stage"]] == ["LIMIT", "PROJECTION_COVERED"], w
assert q.explain()["executionStats"]["totalDocsExamined"] == 0
ors = {"$or": [{"k": 2}, {"k": 5, "s": "e"}]}
same(list(co.find(ors, proj).hint("k_1_v_1_s_1_n.x_1")), list(co.find(ors, proj).hint(natural)))
# Not covered: _id kept, a null or $exists filter, a field outside the index.
for filt, p in [({"k": 1}, {"k": 1}), ({"k": {"$gte": 1}, "s": None}, proj),
                ({"k": 1, "s": {"$exists": True}}, proj), ({"k": 1}, {"_id": 0, "k": 1, "other": 1})]:
    e = co.find(filt, p).explain()
    assert e["queryPlanner"]["winningPlan"]["inputStage"]["stage"] == "FETCH", (filt, p, e["queryPlanner"])
    assert e["executionStats"]["totalDocsExamined"] > 0
    same(list(co.find(filt, p)), list(co.find(filt, p).hint(natural)))
# Aggregation: $match/$sort/$limit pushed down, then $project, $group or $count.
pipelines = [
    [{"$match": {"k": {"$gte": 2}}}, {"$sort": {"k": -1}}, {"$limit": 3}, {"$project": {"_id": 0, "k": 1, "v": 1, "n.x": 1}}],
    [{"$match": {"k": {"$gte": 1}}}, {"$group": {"_id": "$s", "total": {"$sum": "$k"}, "vs": {"$push": "$v"}}}, {"$sort": {"total": 1}}],
    [{"$match": {"k": {"$gt": 2}}}, {"$count": "n"}],
]
for pipe in pipelines:
    got = list(co.aggregate(pipe))
    same(got, list(co.aggregate(pipe, hint={"$natural": 1})))
    ex = c.cov.command("aggregate", "items", pipeline=pipe, explain=True)
    w = ex["stages"][0]["$cursor"]["queryPlanner"]["winningPlan"]
    while w["stage"] in ("LIMIT", "SKIP"):
        w = w["inputStage"]
    assert w["stage"] == "PROJECTION_COVERED", (pipe, ex)
    assert "IXSCAN" in str(w) and "FETCH" not in str(w), (pipe, ex)
    hinted = c.cov.command("aggregate", "items", pipeline=pipe, explain=True, hint={"$natural": 1})
    h = hinted["stages"][0]["$cursor"]["queryPlanner"]["winningPlan"]
    assert "COLLSCAN" in str(h) and "PROJECTION_COVERED" not in str(h), hinted
assert list(co.aggregate(pipelines[2])) == [{"n": 4}]
print(json.dumps({"ok": True}))
"#;
    let Some(result) = python(&server, script) else { return };
    assert_eq!(result, json!({"ok": true}));
}

#[test]
fn multikey_hashed_and_collated_paths_are_fetched() {
    let server = Server::start();
    let script = r#"
from bson import encode
c = client()
natural = [("$natural", 1)]
def same(a, b):
    assert [encode(d) for d in a] == [encode(d) for d in b], (a, b)
def stage(cursor):
    w = cursor.explain()["queryPlanner"]["winningPlan"]
    shown = w["stage"] in ("PROJECTION_SIMPLE", "PROJECTION_DEFAULT")
    return w["inputStage"]["stage"] if shown else w["stage"]
m = c.cov.multi
m.insert_many([{"_id": 1, "a": 1, "b": [1, 2, 3]}, {"_id": 2, "a": 2, "b": 5}, {"_id": 3, "a": 3}])
m.create_index([("a", 1), ("b", 1)])
# b is multikey: projecting it fetches; a alone is still covered, each document once.
assert stage(m.find({"a": {"$gte": 1}}, {"_id": 0, "a": 1, "b": 1})) == "FETCH", "multikey b"
assert stage(m.find({"a": {"$gte": 1}, "b": 2}, {"_id": 0, "a": 1})) == "FETCH", "multikey filter"
only_a = m.find({"a": {"$gte": 1}}, {"_id": 0, "a": 1})
assert stage(only_a.clone()) == "PROJECTION_COVERED", only_a.clone().explain()
same(list(only_a), [{"a": 1}, {"a": 2}, {"a": 3}])
same(list(m.find({"a": {"$gte": 1}}, {"_id": 0, "a": 1, "b": 1})),
     list(m.find({"a": {"$gte": 1}}, {"_id": 0, "a": 1, "b": 1}).hint(natural)))
h = c.cov.hashed
h.insert_many([{"_id": i, "h": i} for i in range(5)])
h.create_index([("h", "hashed")])
assert stage(h.find({"h": 3}, {"_id": 0, "h": 1})) == "FETCH", "hashed"
assert list(h.find({"h": 3}, {"_id": 0, "h": 1})) == [{"h": 3}]
col = c.cov.collated
col.insert_many([{"_id": 1, "name": "Abc"}, {"_id": 2, "name": "abc"}, {"_id": 3, "name": "xyz"}])
ci = {"locale": "en", "strength": 2}
col.create_index([("name", 1)], collation=ci)
q = col.find({"name": "abc"}, {"_id": 0, "name": 1}).collation(ci)
assert stage(q.clone()) == "FETCH", "collated"
assert sorted(d["name"] for d in q) == ["Abc", "abc"]
# An _id in the index is covered with it.
i = c.cov.ids
i.insert_many([{"_id": n, "x": n % 3} for n in range(6)])
i.create_index([("x", 1), ("_id", 1)])
q = i.find({"x": 1}, {"x": 1, "_id": 1})
assert stage(q.clone()) == "PROJECTION_COVERED", q.clone().explain()
same(list(q), [{"_id": 1, "x": 1}, {"_id": 4, "x": 1}])
# A hinted sparse index covers too: it yields the documents it holds, as a fetch through it does.
i.insert_many([{"_id": 10, "y": Int64(7)}, {"_id": 11}, {"_id": 12, "y": None}])
i.create_index([("y", 1)], sparse=True)
q = i.find({}, {"y": 1, "_id": 0}).hint("y_1")
assert stage(q.clone()) == "PROJECTION_COVERED", q.clone().explain()
same(list(q), [{"y": None}, {"y": Int64(7)}])
# Every candidate plan of allPlansExecution is run covered where it covers.
i.create_index([("x", 1)])
plans = i.find({"x": 1}, {"x": 1, "_id": 0}).explain()["executionStats"]["allPlansExecution"]
assert len(plans) == 2 and all(p["totalDocsExamined"] == 0 for p in plans), plans
assert all(p["executionStages"]["stage"] == "PROJECTION_COVERED" for p in plans), plans
print(json.dumps({"ok": True}))
"#;
    let Some(result) = python(&server, script) else { return };
    assert_eq!(result, json!({"ok": true}));
}
