//! Time-series collections through pymongo (issue 13): `create` with `timeseries` checked
//! as MongoDB 8 checks it and listed with its defaults filled in; measurements must carry
//! a BSON date in the time field; `_id`s may repeat; queries, aggregation, counts,
//! `distinct`, deletes and updates work over the measurements; `expireAfterSeconds`
//! expires them; what is not built is refused with MongoDB's codes; it all survives a
//! restart and a `drop`. Indexes: the default `{meta: 1, time: 1}` index, secondary
//! indexes created, listed (as the user gave them), used (the same answers as a plain
//! collection and a collection scan give, `explain` showing the index scan), hinted,
//! dropped and refused as MongoDB 8 refuses them.

use serde_json::json;

use crate::harness::Server;
use crate::mongo::python;

#[test]
fn a_time_series_collection_is_created_checked_and_listed_as_mongodb_lists_it() {
    let server = Server::start();
    let script = r#"
c = client()
db = c.ts
db.create_collection("weather", timeseries={"timeField": "ts", "metaField": "sensor", "granularity": "minutes"}, expireAfterSeconds=604800)
db.create_collection("spans", timeseries={"timeField": "t", "bucketMaxSpanSeconds": 3600, "bucketRoundingSeconds": 3600})
db.create_collection("plain_ts", timeseries={"timeField": "t"})
out = {"list": sorted(([x["name"], x["type"], x["options"], x["info"], "idIndex" in x] for x in db.list_collections()), key=lambda e: e[0])}
out["filtered"] = [x["name"] for x in db.list_collections(filter={"type": "timeseries"})]
# The same definition again is fine; another one is NamespaceExists.
db.create_collection("plain_ts", timeseries={"timeField": "t"}, check_exists=False)
out["again"] = code_of(lambda: db.create_collection("plain_ts", timeseries={"timeField": "x"}, check_exists=False))
def create(**kw):
    return code_of(lambda: db.command("create", "bad", **kw))
out["errors"] = [
    create(timeseries={}),
    create(timeseries={"timeField": 1}),
    create(timeseries={"timeField": "a.b"}),
    create(timeseries={"timeField": "t", "metaField": "_id"}),
    create(timeseries={"timeField": "t", "metaField": "t"}),
    create(timeseries={"timeField": "t", "granularity": "days"}),
    create(timeseries={"timeField": "t", "bucketMaxSpanSeconds": 100}),
    create(timeseries={"timeField": "t", "bucketMaxSpanSeconds": 100, "bucketRoundingSeconds": 50}),
    create(timeseries={"timeField": "t", "granularity": "hours", "bucketMaxSpanSeconds": 100}),
    create(timeseries={"timeField": "t", "bucketMaxSpanSeconds": 0, "bucketRoundingSeconds": 0}),
    create(timeseries={"timeField": "t", "frob": 1}),
    create(timeseries={"timeField": "t"}, capped=True, size=1000),
    create(timeseries={"timeField": "t"}, expireAfterSeconds=-1),
    create(timeseries="t"),
    create(expireAfterSeconds=10),
]
out["names"] = sorted(db.list_collection_names())
print(json.dumps(out))
"#;
    let Some(out) = python(&server, script) else { return };
    let info = json!({"readOnly": false});
    assert_eq!(
        out["list"],
        json!([
            ["plain_ts", "timeseries",
             {"timeseries": {"timeField": "t", "granularity": "seconds", "bucketMaxSpanSeconds": 3600}},
             info, false],
            ["spans", "timeseries",
             {"timeseries": {"timeField": "t", "bucketRoundingSeconds": 3600, "bucketMaxSpanSeconds": 3600}},
             info, false],
            ["weather", "timeseries",
             {"timeseries": {"timeField": "ts", "metaField": "sensor", "granularity": "minutes",
                             "bucketMaxSpanSeconds": 86400},
              "expireAfterSeconds": 604800},
             info, false],
        ])
    );
    assert_eq!(out["filtered"].as_array().map(Vec::len), Some(3));
    assert_eq!(out["again"], json!(48));
    assert_eq!(
        out["errors"],
        json!([40414, 14, 72, 72, 72, 2, 72, 72, 72, 51024, 40415, 72, 72, 14, 72])
    );
    assert_eq!(out["names"], json!(["plain_ts", "spans", "weather"]));
}

#[test]
fn measurements_with_repeated_ids_are_queried_updated_deleted_and_survive_a_restart() {
    let mut server = Server::start();
    let script = r#"
from pymongo.errors import BulkWriteError
c = client()
db = c.ts
db.create_collection("m", timeseries={"timeField": "ts", "metaField": "sensor"})
m = db.m
t0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
def at(minutes):
    return t0 + datetime.timedelta(minutes=minutes)
m.insert_many([
    {"_id": 1, "ts": at(0), "sensor": {"id": "a"}, "temp": 20},
    {"_id": 1, "ts": at(1), "sensor": {"id": "a"}, "temp": 21},
    {"_id": 2, "ts": at(2), "sensor": {"id": "b"}, "temp": 15},
    {"ts": at(3), "sensor": {"id": "b"}, "temp": 16},
])
out = {}
def strip(docs):
    return [{k: (v.isoformat() if isinstance(v, datetime.datetime) else v) for k, v in d.items() if not isinstance(v, ObjectId)} for d in docs]
out["find"] = strip(m.find({"_id": 1}, sort=[("ts", -1)]))
out["generated_id"] = isinstance(m.find_one({"temp": 16})["_id"], ObjectId)
out["range"] = [d["temp"] for d in m.find({"ts": {"$gte": at(1), "$lt": at(3)}}, sort=[("ts", 1)])]
out["agg"] = list(m.aggregate([{"$group": {"_id": "$sensor.id", "avg": {"$avg": "$temp"}, "n": {"$sum": 1}}}, {"$sort": {"_id": 1}}]))
out["count"] = [m.count_documents({}), m.estimated_document_count(), m.count_documents({"_id": 1})]
out["distinct"] = sorted(m.distinct("sensor.id"))
db.sensors.insert_one({"_id": "a", "room": "kitchen"})
out["lookup"] = list(db.sensors.aggregate([{"$lookup": {"from": "m", "localField": "_id", "foreignField": "sensor.id", "as": "ms"}}, {"$project": {"n": {"$size": "$ms"}}}]))
out["union"] = next(db.sensors.aggregate([{"$unionWith": "m"}, {"$count": "n"}]))["n"]
out["out_into"] = code_of(lambda: list(db.sensors.aggregate([{"$out": "m"}])))
# A time field that is no date: BadValue, ordered inserts stop at it, unordered go on.
try:
    m.insert_many([{"ts": at(9), "temp": 1}, {"ts": "soon", "temp": 2}, {"temp": 3}, {"ts": at(9), "temp": 4}])
except BulkWriteError as e:
    out["ordered"] = [e.details["nInserted"], [(w["index"], w["code"], w["errmsg"]) for w in e.details["writeErrors"]]]
try:
    m.insert_many([{"ts": 5, "temp": 5}, {"ts": at(9), "temp": 6}], ordered=False)
except BulkWriteError as e:
    out["unordered"] = [e.details["nInserted"], [w["index"] for w in e.details["writeErrors"]]]
out["count_after_errors"] = m.count_documents({"ts": at(9)})
# Updates and deletes with any filter, as MongoDB 8 allows them.
r = m.update_many({"_id": 1}, {"$inc": {"temp": 100}})
out["update_many"] = [r.matched_count, r.modified_count]
r = m.update_one({"sensor.id": "b"}, {"$set": {"checked": True}})
out["update_one"] = [r.matched_count, r.modified_count, m.count_documents({"checked": True})]
out["bad_update"] = code_of(lambda: m.update_one({"_id": 2}, {"$set": {"ts": "later"}}))
out["temps"] = sorted(d["temp"] for d in m.find({"_id": 1}))
out["delete_one"] = m.delete_one({"_id": 1}).deleted_count
out["delete_many"] = m.delete_many({"ts": at(9)}).deleted_count
out["left"] = sorted(d["temp"] for d in m.find({}))
from pymongo import InsertOne
r = c.bulk_write([InsertOne({"_id": 1, "ts": at(7)}, namespace="ts.m"), InsertOne({"_id": 1, "ts": at(8)}, namespace="ts.m")])
out["bulk"] = [r.inserted_count, m.count_documents({"_id": 1})]
# `arrayFilters` apply as on any collection: a missing array is MongoDB's BadValue.
out["array_filters"] = [
    code_of(lambda: m.update_one({"_id": 2}, {"$set": {"a.$[x]": 1}}, array_filters=[{"x": 1}])),
]
out["indexes"] = list(m.list_indexes())
s = c.start_session()
s.start_transaction()
out["txn"] = code_of(lambda: m.insert_one({"ts": at(5)}, session=s))
s.abort_transaction()
s.end_session()
print(json.dumps(out))
"#;
    let Some(out) = python(&server, script) else { return };
    assert_eq!(
        out["find"],
        json!([
            {"_id": 1, "ts": "2026-01-01T00:01:00", "sensor": {"id": "a"}, "temp": 21},
            {"_id": 1, "ts": "2026-01-01T00:00:00", "sensor": {"id": "a"}, "temp": 20},
        ])
    );
    assert_eq!(out["generated_id"], json!(true));
    assert_eq!(out["range"], json!([21, 15]));
    assert_eq!(
        out["agg"],
        json!([{"_id": "a", "avg": 20.5, "n": 2}, {"_id": "b", "avg": 15.5, "n": 2}])
    );
    assert_eq!(out["count"], json!([4, 4, 2]));
    assert_eq!(out["distinct"], json!(["a", "b"]));
    assert_eq!(out["lookup"], json!([{"_id": "a", "n": 2}]));
    assert_eq!(out["union"], json!(5));
    assert_eq!(out["out_into"], json!(166));
    let message = "'ts' must be present and contain a valid BSON UTC datetime value";
    assert_eq!(out["ordered"], json!([1, [[1, 2, message]]]));
    assert_eq!(out["unordered"], json!([1, [0]]));
    assert_eq!(out["count_after_errors"], json!(2));
    assert_eq!(out["update_many"], json!([2, 2]));
    assert_eq!(out["update_one"], json!([1, 1, 1]));
    assert_eq!(out["bad_update"], json!(2));
    assert_eq!(out["temps"], json!([120, 121]));
    assert_eq!(out["delete_one"], json!(1));
    assert_eq!(out["delete_many"], json!(2));
    assert_eq!(out["left"].as_array().map(Vec::len), Some(3));
    assert_eq!(out["bulk"], json!([2, 3]));
    assert_eq!(out["array_filters"], json!([2]));
    assert_eq!(
        out["indexes"],
        json!([{"v": 2, "key": {"sensor": 1, "ts": 1}, "name": "sensor_1_ts_1"}])
    );
    assert_eq!(out["txn"], json!(263));
    assert!(server.terminate());
    server.restart();
    let script = r#"
c = client()
db = c.ts
out = {"type": [x["type"] for x in db.list_collections(filter={"name": "m"})],
       "ids": sorted(str(type(d["_id"]).__name__) for d in db.m.find({}))}
db.drop_collection("m")
out["after_drop"] = sorted(db.list_collection_names())
db.m.insert_one({"x": 1})
out["plain_again"] = [x["type"] for x in db.list_collections()]
print(json.dumps(out))
"#;
    let out = python(&server, script).expect("pymongo ran before the restart");
    assert_eq!(out["type"], json!(["timeseries"]));
    assert_eq!(out["ids"].as_array().map(Vec::len), Some(5));
    assert_eq!(out["after_drop"], json!(["sensors"]));
    assert_eq!(out["plain_again"], json!(["collection", "collection"]));
}

#[test]
fn measurements_expire_after_the_collections_expire_after_seconds() {
    let server = Server::start_with(&["--mongo-ttl-monitor-secs", "1"], &[]);
    let script = r#"
import time
c = client()
db = c.ts
db.create_collection("log", timeseries={"timeField": "at"}, expireAfterSeconds=3600)
now = datetime.datetime.now(datetime.timezone.utc)
db.log.insert_many([
    {"_id": "old", "at": now - datetime.timedelta(hours=2)},
    {"_id": "old", "at": now - datetime.timedelta(hours=5)},
    {"_id": "fresh", "at": now},
])
# A TTL index on the time field with a partial filter on the meta field: only those expire.
db.create_collection("jobs", timeseries={"timeField": "at", "metaField": "kind"})
db.jobs.create_index("at", expireAfterSeconds=3600, partialFilterExpression={"kind": "tmp"})
db.jobs.insert_many([
    {"_id": "old_tmp", "at": now - datetime.timedelta(hours=2), "kind": "tmp"},
    {"_id": "old_kept", "at": now - datetime.timedelta(hours=2), "kind": "keep"},
    {"_id": "new_tmp", "at": now, "kind": "tmp"},
])
deadline = time.time() + 60
while time.time() < deadline and db.log.count_documents({"_id": "old"}) + db.jobs.count_documents({"_id": "old_tmp"}) > 0:
    time.sleep(0.2)
print(json.dumps([sorted(d["_id"] for d in db.log.find({})), sorted(d["_id"] for d in db.jobs.find({}))]))
"#;
    let Some(result) = python(&server, script) else { return };
    assert_eq!(result, json!([["fresh"], ["new_tmp", "old_kept"]]));
}

/// The start of the index tests: the time-series collection `ts.m` (meta field `sensor`)
/// and its measurements (`_id`s unique, times unique; some without `v`, some with arrays).
const MEASUREMENTS: &str = r#"
c = client()
db = c.ts
db.create_collection("m", timeseries={"timeField": "ts", "metaField": "sensor"})
t0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
def at(minutes):
    return t0 + datetime.timedelta(minutes=minutes)
def measurement(i):
    d = {"_id": i, "ts": at(i), "sensor": {"id": i % 6, "site": "xy"[i % 2]}}
    if i % 7:
        d["v"] = i % 50
    if i % 5 == 0:
        d["tags"] = [i % 3, "t%d" % (i % 4)]
    return d
"#;

#[test]
fn time_series_reads_answer_as_a_plain_collection_and_a_collection_scan_with_indexes() {
    let server = Server::start();
    let script = format!(
        "{MEASUREMENTS}{}",
        r#"
m, p = db.m, db.p
docs = [measurement(i) for i in range(600)]
m.insert_many(docs)
p.insert_many(docs)
m.create_index("v")
m.create_index([("sensor.id", 1), ("ts", -1)])
m.create_index("tags")
filters = [
    {},
    {"sensor": {"id": 3, "site": "y"}},
    {"sensor": {"id": 3, "site": "y"}, "ts": {"$gte": at(100), "$lt": at(300)}},
    {"sensor.id": {"$in": [1, 3]}, "ts": {"$gt": at(500)}},
    {"v": {"$gte": 10, "$lt": 13}},
    {"v": None},
    {"v": {"$exists": False}},
    {"tags": 2},
    {"tags": {"$elemMatch": {"$gte": 1, "$lt": 3}}},
    {"$or": [{"v": 3}, {"sensor.id": 5, "ts": {"$lt": at(60)}}]},
    {"$nor": [{"v": {"$lt": 45}}, {"sensor.site": "x"}]},
    {"$and": [{"v": {"$gt": 40}}, {"$expr": {"$lt": ["$v", 44]}}]},
    {"sensor.id": 4, "$expr": {"$eq": [{"$mod": ["$v", 2]}, 0]}},
    {"$or": [{"v": 1}, {"$expr": {"$eq": ["$v", 2]}}]},
    {"v": {"$not": {"$gt": 5}}, "sensor.site": {"$regex": "^x"}},
    {"_id": {"$in": [5, 77, 599, 1000]}},
]
def ids(cursor):
    return sorted(d["_id"] for d in cursor)
out = {"mismatches": [], "sizes": []}
for f in filters:
    ts, plain, scan = ids(m.find(f)), ids(p.find(f)), ids(m.find(f).hint([("$natural", 1)]))
    out["sizes"].append(len(ts))
    if not (ts == plain == scan and m.count_documents(f) == len(plain)):
        out["mismatches"].append([repr(f), len(ts), len(plain), len(scan)])
    if sorted(m.distinct("v", f), key=repr) != sorted(p.distinct("v", f), key=repr):
        out["mismatches"].append(["distinct", repr(f)])
    pipe = [{"$match": f}, {"$group": {"_id": "$sensor.id", "n": {"$sum": 1}}}, {"$sort": {"_id": 1}}]
    if list(m.aggregate(pipe)) != list(p.aggregate(pipe)):
        out["mismatches"].append(["aggregate", repr(f)])
    page = lambda coll: [d["_id"] for d in coll.find(f).sort("ts", -1).skip(3).limit(7)]
    if page(m) != page(p):
        out["mismatches"].append(["page", repr(f), page(m), page(p)])
plan = m.find({"sensor.id": 2, "ts": {"$gte": at(100), "$lt": at(300)}}).explain()
ix = plan["queryPlanner"]["winningPlan"]["inputStage"]
out["plan"] = [plan["queryPlanner"]["winningPlan"]["stage"], ix["stage"], ix["indexName"], ix["keyPattern"], sorted(ix["indexBounds"]), plan["queryPlanner"]["parsedQuery"]["sensor.id"]]
out["stats"] = [plan["executionStats"][k] for k in ["nReturned", "totalKeysExamined", "totalDocsExamined"]]
agg = db.command("aggregate", "m", pipeline=[{"$match": {"v": 3}}, {"$count": "n"}], explain=True)
agg_plan = agg["stages"][0]["$cursor"]["queryPlanner"]["winningPlan"]["inputStage"]
out["agg_plan"] = [agg_plan["stage"], agg_plan["indexName"], agg_plan["keyPattern"], agg["stages"][0]["$cursor"]["queryPlanner"]["parsedQuery"], [list(s)[0] for s in agg["stages"]]]
# A sort and limit the index serves, and a filter that stays after the read of the measurements.
agg = db.command("aggregate", "m", pipeline=[{"$match": {"sensor.id": 2, "$expr": {"$gt": ["$v", 3]}}}, {"$sort": {"ts": -1}}, {"$limit": 2}], explain=True)
cursor = agg["stages"][0]["$cursor"]
out["agg_sorted"] = [cursor["queryPlanner"]["parsedQuery"], stages(cursor["queryPlanner"]["winningPlan"]), [s for s in agg["stages"][1:]]]
# `count` and `distinct` run as aggregations: their explained plan is that scan's, not a
# COUNT_SCAN or DISTINCT_SCAN of index entries.
counted = db.command("explain", {"count": "m", "query": {"v": 3}}, verbosity="queryPlanner")
listed = db.command("explain", {"distinct": "m", "key": "v", "query": {"v": {"$lt": 2}}}, verbosity="queryPlanner")
out["count_plans"] = [stages(counted["queryPlanner"]["winningPlan"]), stages(listed["queryPlanner"]["winningPlan"])]
out["hinted"] = [
    ids(m.find({"v": {"$lt": 2}, "ts": {"$lt": at(120)}}).hint("v_1")),
    ids(m.find({"v": {"$lt": 2}, "ts": {"$lt": at(120)}}).hint([("v", 1)])),
    m.find({"v": {"$lt": 2}}).hint([("v", 1)]).explain()["queryPlanner"]["winningPlan"]["inputStage"]["indexName"],
    m.count_documents({"v": 3}, hint="v_1"),
]
# Writes read through the indexes too; the same documents change as in the plain collection.
for coll in (m, p):
    coll.update_many({"sensor.id": 3, "ts": {"$lt": at(200)}, "$expr": {"$gt": ["$v", 20]}}, {"$inc": {"v": 100}})
    coll.delete_many({"v": {"$gte": 45, "$lt": 100}}, hint="v_1" if coll is m else None)
out["after_writes"] = [sorted((d["_id"], d.get("v")) for d in m.find()) == sorted((d["_id"], d.get("v")) for d in p.find()), m.count_documents({})]
print(json.dumps(out))
"#
    );
    let Some(out) = python(&server, &script) else { return };
    assert_eq!(out["mismatches"], json!([]));
    let sizes = json!([600, 100, 33, 33, 30, 86, 86, 40, 80, 19, 30, 31, 86, 22, 31, 3]);
    assert_eq!(out["sizes"], sizes);
    // Explained with the measurements' field names, as the index is listed.
    assert_eq!(
        out["plan"],
        json!(["FETCH", "IXSCAN", "sensor.id_1_ts_-1", {"sensor.id": 1, "ts": -1}, ["sensor.id", "ts"], 2])
    );
    // Only the 33 measurements of sensor 2 in the range are read, not the 600.
    assert_eq!(out["stats"], json!([33, 33, 33]));
    // An aggregation's explain names the measurements' fields too, with no stored-form stage.
    assert_eq!(
        out["agg_plan"],
        json!(["IXSCAN", "v_1", {"v": 1}, {"v": 3}, ["$cursor", "$count"]])
    );
    // Only the part of the `$match` on fields moves onto the stored form (the index scan);
    // the whole `$match`, and the sort and limit after it, run over the measurements.
    let after = json!([
        {"$match": {"sensor.id": 2, "$expr": {"$gt": ["$v", 3]}}},
        {"$sort": {"ts": -1}},
        {"$limit": 2},
    ]);
    assert_eq!(out["agg_sorted"], json!([{"sensor.id": 2}, ["FETCH", "IXSCAN"], after]));
    assert_eq!(out["count_plans"], json!([["FETCH", "IXSCAN"], ["FETCH", "IXSCAN"]]));
    assert_eq!(out["hinted"], json!([[1, 50, 51, 100, 101], [1, 50, 51, 100, 101], "v_1", 10]));
    assert_eq!(out["after_writes"][0], json!(true));
}

#[test]
fn time_series_indexes_are_created_listed_dropped_refused_and_survive_a_restart() {
    let mut server = Server::start();
    let script = format!(
        "{MEASUREMENTS}{}",
        r#"
db.create_collection("bare", timeseries={"timeField": "ts"}, expireAfterSeconds=60)
m = db.m
m.insert_many([measurement(i) for i in range(100)])
out = {"default": list(m.list_indexes()), "bare": list(db.bare.list_indexes())}
r = db.command("createIndexes", "m", indexes=[{"key": {"v": -1}, "name": "by_v"}, {"key": {"sensor.site": 1, "ts": 1}}])
out["created"] = [r["numIndexesBefore"], r["numIndexesAfter"]]
out["partial"] = m.create_index("ts", partialFilterExpression={"sensor.id": {"$gt": 3}})
out["hashed"] = m.create_index([("sensor", "hashed")])
out["again"] = db.command("createIndexes", "m", indexes=[{"key": {"v": -1}, "name": "by_v"}]).get("note")
out["listed"] = list(m.list_indexes())
out["bare_created"] = db.bare.create_index("x")
def err(fn):
    try:
        fn()
    except OperationFailure as e:
        return [e.code, e.details.get("errmsg")]
out["refused"] = [
    err(lambda: m.create_index("v", unique=True)),
    err(lambda: m.create_index([("v", "text")])),
    err(lambda: m.create_index([("ts", "hashed")])),
    err(lambda: m.create_index([("v", "hashed")])),
    err(lambda: m.create_index("v", sparse=True)),
    err(lambda: m.create_index("ts", expireAfterSeconds=10)),
    err(lambda: m.create_index("v", expireAfterSeconds=10, partialFilterExpression={"sensor.id": 1})),
    err(lambda: m.create_index([("ts", 1), ("v", 1)], expireAfterSeconds=10, partialFilterExpression={"sensor.id": 1})),
    err(lambda: m.create_index("v", partialFilterExpression={"sensor.id": 1}, collation={"locale": "en"})),
    err(lambda: m.create_index("v", name="by_v")),
]
out["sparse_meta"] = m.create_index("sensor.id", sparse=True)
out["drop_key"] = db.command("dropIndexes", "m", index={"sensor.site": 1, "ts": 1})["nIndexesWas"]
m.drop_index("sensor.id_1")
out["drop_missing"] = [code_of(lambda: m.drop_index("nope")), err(lambda: db.command("dropIndexes", "m", index={"nope": 1}))]
out["drop_hidden"] = code_of(lambda: db.bare.drop_index("$timeseries_ttl"))
db.bare.drop_indexes()
out["bare_after"] = list(db.bare.list_indexes())
out["names"] = [i["name"] for i in m.list_indexes()]
m.find_one({"v": 3})
out["index_stats"] = sorted([s["name"], s["key"], s["accesses"]["ops"]] for s in m.aggregate([{"$indexStats": {}}]))
out["coll_stats"] = next(m.aggregate([{"$collStats": {"count": {}}}]))["count"]
stats = db.command("collStats", "m")
out["index_sizes"] = [stats["nindexes"], sorted(stats["indexSizes"])]
bare = db.command("collStats", "bare")
out["bare_sizes"] = [bare["nindexes"], sorted(bare["indexSizes"])]
print(json.dumps(out))
"#
    );
    let Some(out) = python(&server, &script) else { return };
    let default = json!({"v": 2, "key": {"sensor": 1, "ts": 1}, "name": "sensor_1_ts_1"});
    assert_eq!(out["default"], json!([default]));
    assert_eq!(out["bare"], json!([]));
    assert_eq!(out["created"], json!([1, 3]));
    assert_eq!(out["partial"], json!("ts_1"));
    assert_eq!(out["hashed"], json!("sensor_hashed"));
    assert_eq!(out["again"], json!("all indexes already exist"));
    assert_eq!(
        out["listed"],
        json!([
            {"v": 2, "key": {"v": -1}, "name": "by_v"},
            {"v": 2, "key": {"sensor.site": 1, "ts": 1}, "name": "sensor.site_1_ts_1"},
            default,
            {"v": 2, "key": {"sensor": "hashed"}, "name": "sensor_hashed"},
            {"v": 2, "key": {"ts": 1}, "name": "ts_1", "partialFilterExpression": {"sensor.id": {"$gt": 3}}},
        ])
    );
    assert_eq!(out["bare_created"], json!("x_1"));
    let codes: Vec<_> = out["refused"].as_array().unwrap().iter().map(|e| e[0].clone()).collect();
    assert_eq!(
        codes,
        vec![
            json!(72),
            json!(72),
            json!(67),
            json!(67),
            json!(72),
            json!(72),
            json!(72),
            json!(67),
            json!(85),
            json!(86)
        ]
    );
    assert_eq!(
        out["refused"][0][1],
        json!("Unique indexes are not supported on time-series collections")
    );
    assert_eq!(
        out["refused"][5][1],
        json!(
            "TTL indexes on time-series collections require a partialFilterExpression on the metaField"
        )
    );
    assert_eq!(out["sparse_meta"], json!("sensor.id_1"));
    assert_eq!(out["drop_key"], json!(6));
    assert_eq!(out["drop_missing"], json!([27, [27, "can't find index with key: { nope: 1 }"]]));
    assert_eq!(out["drop_hidden"], json!(27));
    assert_eq!(out["bare_after"], json!([]));
    assert_eq!(out["names"], json!(["by_v", "sensor_1_ts_1", "sensor_hashed", "ts_1"]));
    assert_eq!(
        out["index_stats"],
        json!([
            ["by_v", {"v": -1}, 1],
            ["sensor_1_ts_1", {"sensor": 1, "ts": 1}, 0],
            ["sensor_hashed", {"sensor": "hashed"}, 0],
            ["ts_1", {"ts": 1}, 0],
        ])
    );
    assert_eq!(out["coll_stats"], json!(100));
    assert_eq!(out["index_sizes"], json!([4, ["by_v", "sensor_1_ts_1", "sensor_hashed", "ts_1"]]));
    assert_eq!(out["bare_sizes"], json!([0, []]));
    assert!(server.terminate());
    server.restart();
    let script = r#"
c = client()
m = c.ts.m
plan = m.find({"v": {"$gte": 48}}).explain()
ix = plan["queryPlanner"]["winningPlan"]["inputStage"]
out = {"names": [i["name"] for i in m.list_indexes()], "plan": [ix["stage"], ix["indexName"]],
       "found": sorted(d["_id"] for d in m.find({"v": {"$gte": 48}})),
       "examined": plan["executionStats"]["totalDocsExamined"]}
m.drop_indexes()
out["dropped"] = list(m.list_indexes())
print(json.dumps(out))
"#;
    let out = python(&server, script).expect("pymongo ran before the restart");
    assert_eq!(out["names"], json!(["by_v", "sensor_1_ts_1", "sensor_hashed", "ts_1"]));
    assert_eq!(out["plan"], json!(["IXSCAN", "by_v"]));
    assert_eq!(out["found"], json!([48, 99]));
    assert_eq!(out["examined"], json!(2));
    assert_eq!(out["dropped"], json!([]));
}
