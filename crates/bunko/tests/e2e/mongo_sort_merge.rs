//! A sort served through several index points (issue 13): `find({k: {$in: [a, b, c]}})`
//! sorted by `{t: -1}` with an index `{k: 1, t: -1}` merges one index scan per point in
//! the sort's order (`SORT_MERGE` over an `IXSCAN` per point in `explain`), so a `limit(n)`
//! reads about `n` entries, not every entry of every point; the answers are the in-memory
//! sort's (the same query over a collection scan), for `find` and `aggregate`, on a plain
//! and a time-series collection.

use serde_json::json;

use crate::harness::Server;
use crate::mongo::python;

#[test]
fn a_sort_through_several_index_points_merges_their_scans_and_answers_as_the_in_memory_sort() {
    let server = Server::start();
    let script = r#"
c = client()
db = c.merge
coll = db.readings
N = 3000
coll.insert_many([{"_id": i, "k": i % 10, "t": (i * 7919) % N, "tie": i % 40, "v": i % 7} for i in range(N)])
coll.create_index([("k", 1), ("t", -1)])
coll.create_index([("k", 1), ("tie", 1)])
def ids(cursor):
    return [d["_id"] for d in cursor]
def natural(f, sort, skip=0, limit=0):
    return ids(coll.find(f).sort(sort).skip(skip).limit(limit).hint([("$natural", 1)]))
def served(f, sort, skip=0, limit=0):
    return ids(coll.find(f).sort(sort).skip(skip).limit(limit))
cases = [
    ({"k": {"$in": [1, 3, 5]}}, [("t", -1)], 0, 5),
    ({"k": {"$in": [1, 3, 5]}}, [("t", 1)], 0, 5),
    ({"k": {"$in": [9, 0, 4, 4]}}, [("t", -1)], 7, 11),
    ({"k": {"$in": [2, 6]}, "t": {"$gte": 1000, "$lt": 2000}}, [("t", -1)], 0, 20),
    ({"k": {"$in": [2, 6]}, "v": 3}, [("t", 1)], 0, 9),
    ({"k": {"$in": [1, 3, 5, 7]}}, [("t", -1)], 0, 0),
    ({"k": {"$in": [1, 3, 42]}}, [("t", -1)], 0, 1000),
]
out = {"mismatches": [], "sizes": []}
for f, sort, skip, limit in cases:
    a, b = served(f, sort, skip, limit), natural(f, sort, skip, limit)
    out["sizes"].append(len(a))
    if a != b:
        out["mismatches"].append([repr(f), sort, a[:10], b[:10]])
    pipe = [{"$match": f}, {"$sort": dict(sort)}] + ([{"$skip": skip}] if skip else []) + ([{"$limit": limit}] if limit else [])
    if ids(coll.aggregate(pipe)) != b:
        out["mismatches"].append(["aggregate", repr(f), sort])
# Documents that sort alike: the same sort keys in the same order, the same documents.
f = {"k": {"$in": [1, 2, 3]}}
a = list(coll.find(f).sort("tie", -1))
b = list(coll.find(f).sort("tie", -1).hint([("$natural", 1)]))
out["ties"] = [[d["tie"] for d in a] == [d["tie"] for d in b], sorted(d["_id"] for d in a) == sorted(d["_id"] for d in b), len(a)]
plan = coll.find({"k": {"$in": [1, 3, 5]}}).sort("t", -1).limit(5).explain()
win = plan["queryPlanner"]["winningPlan"]
merge = win["inputStage"]["inputStage"]
out["plan"] = [win["stage"], win["inputStage"]["stage"], merge["stage"], merge["sortPattern"], [s["stage"] for s in merge["inputStages"]], [s["indexBounds"]["k"] for s in merge["inputStages"]], merge["inputStages"][0]["indexBounds"]["t"], merge["inputStages"][0]["direction"]]
stats = plan["executionStats"]
out["stats"] = [stats["nReturned"], stats["totalKeysExamined"], stats["totalDocsExamined"]]
# The direction of {k: 1, t: -1} read for t descending is its own (forward), with one point
# too; an unsorted scan reads forward.
def direction(cursor):
    p = cursor.explain()["queryPlanner"]["winningPlan"]
    while p.get("inputStage"):
        p = p["inputStage"]
    return p["direction"]
out["directions"] = [direction(coll.find({"k": 1}).sort("t", -1).limit(2)), direction(coll.find({"k": 1}).sort("t", 1).limit(2)), direction(coll.find({"k": 1, "t": {"$gt": 5}}))]
scan = coll.find({"k": {"$in": [1, 3, 5]}}).sort("t", -1).limit(5).hint([("$natural", 1)]).explain()["executionStats"]
out["scan_docs"] = scan["totalDocsExamined"]
# A multikey index yields no order (an array sorts by its smallest or largest element).
db.multi.insert_many([{"k": 1, "t": [5, 1]}, {"k": 2, "t": 3}, {"k": 1, "t": 4}])
db.multi.create_index([("k", 1), ("t", 1)])
mplan = db.multi.find({"k": {"$in": [1, 2]}}).sort("t", 1).explain()["queryPlanner"]["winningPlan"]
out["multikey"] = [stages(mplan), [d["t"] for d in db.multi.find({"k": {"$in": [1, 2]}}, {"_id": 0}).sort("t", 1)]]
# The newest readings of several sensors of a time-series collection, through its default index.
db.create_collection("ts", timeseries={"timeField": "at", "metaField": "sensor"})
t0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
rows = [{"_id": i, "at": t0 + datetime.timedelta(seconds=(i * 7919) % N), "sensor": "s%d" % (i % 10), "v": i} for i in range(N)]
db.ts.insert_many(rows)
db.flat.insert_many(rows)
f = {"sensor": {"$in": ["s1", "s4", "s7"]}}
newest = ids(db.ts.find(f).sort("at", -1).limit(6))
out["ts_same"] = newest == ids(db.flat.find(f).sort("at", -1).limit(6))
tplan = db.ts.find(f).sort("at", -1).limit(6).explain()
tmerge = tplan["queryPlanner"]["winningPlan"]["inputStage"]["inputStage"]
out["ts_plan"] = [tmerge["stage"], tmerge["sortPattern"], [s["indexName"] for s in tmerge["inputStages"]], tmerge["inputStages"][1]["indexBounds"]["sensor"], tplan["executionStats"]["totalDocsExamined"]]
print(json.dumps(out))
"#;
    let Some(out) = python(&server, script) else { return };
    assert_eq!(out["mismatches"], json!([]));
    assert_eq!(out["sizes"], json!([5, 5, 11, 20, 9, 1200, 600]));
    assert_eq!(out["ties"], json!([true, true, 900]));
    // One IXSCAN per point under a SORT_MERGE; no SORT stage.
    assert_eq!(
        out["plan"],
        json!([
            "LIMIT",
            "FETCH",
            "SORT_MERGE",
            {"t": -1},
            ["IXSCAN", "IXSCAN", "IXSCAN"],
            [["[1, 1]"], ["[3, 3]"], ["[5, 5]"]],
            ["[MaxKey, MinKey]"],
            "forward"
        ])
    );
    // The limit of 5 reads 5 entries, plus the one each scan holds ready: not the 900.
    assert_eq!(out["stats"], json!([5, 8, 8]));
    assert_eq!(out["directions"], json!(["forward", "backward", "forward"]));
    assert_eq!(out["scan_docs"], json!(3000));
    assert_eq!(out["multikey"], json!([["SORT", "FETCH", "IXSCAN"], [[5, 1], 3, 4]]));
    assert_eq!(out["ts_same"], json!(true));
    assert_eq!(
        out["ts_plan"],
        json!(["SORT_MERGE", {"at": -1}, ["sensor_1_at_1", "sensor_1_at_1", "sensor_1_at_1"], ["[\"s4\", \"s4\"]"], 9])
    );
}
