//! Counting from index entries (issue 13): a `count` whose filter an index's bounds answer
//! exactly reads no document (`COUNT` over `COUNT_SCAN`, or over `IXSCAN` for several
//! intervals; `totalDocsExamined: 0`), an empty filter is the collection's document count
//! (`RECORD_STORE_FAST_COUNT`), pymongo's `count_documents` counts the same way, and every
//! count equals the count of a collection scan: numbers sharing an index key (a Decimal128
//! next to a double, int64s past 2^53), `null` and missing fields, multikey paths, skip and
//! limit.

use serde_json::json;

use crate::harness::Server;
use crate::mongo::python;

#[test]
fn counts_from_index_entries_equal_collection_scans() {
    let server = Server::start();
    let script = r#"
c = client()
db = c.cnt
co = db.items
docs = [{"_id": i, "s": f"k{i % 10}", "n": i % 7, "tags": [i % 3, i % 5], "t": i % 4 == 0}
        for i in range(500)]
docs += [{"_id": 1000, "n": Decimal128("2.0000000000000000000000001"), "s": "k1"},
         {"_id": 1001, "n": Int64(2 ** 53 + 1), "s": None},
         {"_id": 1002, "n": Int64(2 ** 53)},
         {"_id": 1003, "n": float("nan"), "s": "zz"}]
co.insert_many(docs)
co.create_index("s")
co.create_index("n")
co.create_index([("t", 1), ("s", -1)])
co.create_index("tags")

def explain(query, **kw):
    cmd = SON([("count", "items"), ("query", query)] + list(kw.items()))
    return db.command("explain", cmd, verbosity="executionStats")

def count(query, **kw):
    return db.command(SON([("count", "items"), ("query", query)] + list(kw.items())))["n"]

def scanned(query, **kw):
    return count(query, hint={"$natural": 1}, **kw)

def under_count(e):
    w = e["queryPlanner"]["winningPlan"]
    assert w["stage"] == "COUNT", w
    return w["inputStage"]

cases = [
    ({"s": "k3"}, "COUNT_SCAN"),
    ({"s": {"$gte": "k2", "$lt": "k5"}}, "COUNT_SCAN"),
    ({"s": {"$gt": "k8"}}, "COUNT_SCAN"),
    ({"n": 2}, "COUNT_SCAN"),
    ({"n": {"$gt": 2}}, "COUNT_SCAN"),
    ({"n": {"$lt": 3}}, "COUNT_SCAN"),
    ({"n": {"$gte": 2 ** 53 + 1}}, "COUNT_SCAN"),
    ({"n": Int64(2 ** 53)}, "COUNT_SCAN"),
    ({"t": True, "s": {"$lte": "k4"}}, "COUNT_SCAN"),
    ({"s": {"$in": ["k1", "k7", "zz"]}}, "IXSCAN"),
]
for query, stage in cases:
    e = explain(query)
    inner = under_count(e)
    assert inner["stage"] == stage, (query, inner)
    stats = e["executionStats"]
    assert stats["totalDocsExamined"] == 0 and stats["nReturned"] == 0, (query, stats)
    n = scanned(query)
    assert count(query) == n and stats["executionStages"]["nCounted"] == n, (query, n, stats)
    # pymongo's count_documents ($match + $group) is counted the same way.
    assert co.count_documents(query) == n, (query, n)
    assert stats["totalKeysExamined"] >= n > 0, (query, stats)

single = under_count(explain({"s": "k3"}))
assert single["indexName"] == "s_1" and single["keyPattern"] == {"s": 1}, single
assert single["indexBounds"] == {"startKey": {"s": "k3"}, "startKeyInclusive": True,
                                 "endKey": {"s": "k3"}, "endKeyInclusive": True}, single
assert "direction" not in single and single["isMultiKey"] is False, single
rng = under_count(explain({"n": {"$gt": 2}}))["indexBounds"]
assert rng["startKey"] == {"n": 2} and rng["startKeyInclusive"] is False, rng
assert rng["endKey"] == {"n": float("inf")} and rng["endKeyInclusive"] is True, rng
# A descending field: its interval runs from the high key to the low one.
desc = under_count(explain({"t": True, "s": {"$lte": "k4"}}))["indexBounds"]
assert desc["startKey"] == {"t": True, "s": "k4"} and desc["endKey"] == {"t": True, "s": ""}, desc
# The numbers that share keys with others are told apart as the matcher tells them.
big = (count({"n": Int64(2 ** 53)}), count({"n": {"$gte": 2 ** 53 + 1}}), scanned({"n": Int64(2 ** 53)}), scanned({"n": {"$gte": 2 ** 53 + 1}}))
assert big[:2] == big[2:], big
# A hinted index with no filter counts its entries.
e = explain({}, hint="s_1")
inner = under_count(e)
assert inner["stage"] == "COUNT_SCAN", inner
assert inner["indexBounds"]["startKey"] == {"s": MinKey()}, inner
assert e["executionStats"]["executionStages"]["nCounted"] == len(docs)
# Empty filter: the collection's document count.
e = explain({})
assert e["queryPlanner"]["winningPlan"] == {"stage": "RECORD_STORE_FAST_COUNT"}, e["queryPlanner"]
assert e["executionStats"]["executionStages"]["nCounted"] == len(docs)
assert co.estimated_document_count() == len(docs) == count({})
# Skip and limit apply to the count.
assert count({"s": "k3"}, skip=10, limit=20) == 20 and count({"s": "k3"}, skip=45) == 5
e = explain({"s": "k3"}, skip=45)["executionStats"]["executionStages"]
assert (e["nCounted"], e["nSkipped"]) == (5, 45), e
# Not exact: null, a multikey field, a condition the bounds do not say, an unindexed field.
for query in [{"s": None}, {"tags": 1}, {"s": "k3", "x": 1}, {"s": {"$ne": "k3"}},
              {"s": {"$regex": "^k1"}}, {"n": {"$gt": 1, "$lt": "z"}}]:
    e = explain(query)
    assert under_count(e)["stage"] != "COUNT_SCAN", (query, e["queryPlanner"])
    assert count(query) == scanned(query) == co.count_documents(query), query
assert co.count_documents({"s": "k3"}, skip=45, limit=3) == 3
assert co.count_documents({"s": "nothing"}) == 0
assert list(co.aggregate([{"$match": {"s": "k3"}}, {"$group": {"_id": "all", "c": {"$sum": 1}}}])) == [{"_id": "all", "c": 50}]
# Not exact but covered: the filter runs on the entries, still without documents.
e = explain({"s": {"$gte": "k1"}, "t": {"$ne": True}}, hint="t_1_s_-1")
assert under_count(e)["stage"] == "IXSCAN", e["queryPlanner"]
assert e["executionStats"]["totalDocsExamined"] == 0
# Writes show at once.
co.delete_many({"s": "k3"})
co.insert_one({"_id": 2000, "s": "k3"})
assert count({"s": "k3"}) == 1 == scanned({"s": "k3"})
print(json.dumps({"ok": True}))
"#;
    let Some(result) = python(&server, script) else { return };
    assert_eq!(result, json!({"ok": true}));
}
