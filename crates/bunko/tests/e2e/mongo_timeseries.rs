//! Time-series collections through pymongo (issue 13): `create` with `timeseries` checked
//! as MongoDB 8 checks it and listed with its defaults filled in; measurements must carry
//! a BSON date in the time field; `_id`s may repeat; queries, aggregation, counts,
//! `distinct`, deletes and updates work over the measurements; `expireAfterSeconds`
//! expires them; what is not built is refused with MongoDB's codes; it all survives a
//! restart and a `drop`.

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
# Not built: refused, never ignored.
out["refused"] = [
    code_of(lambda: m.create_index("sensor.id")),
    code_of(lambda: m.find_one_and_update({"_id": 2}, {"$set": {"x": 1}})),
    code_of(lambda: m.update_one({"_id": 9}, {"$set": {"x": 1}}, upsert=True)),
    code_of(lambda: db.command("collMod", "m", expireAfterSeconds=5)),
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
    assert_eq!(out["refused"], json!([238, 238, 238, 238]));
    assert_eq!(out["indexes"], json!([]));
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
deadline = time.time() + 60
while time.time() < deadline and db.log.count_documents({"_id": "old"}) > 0:
    time.sleep(0.2)
print(json.dumps(sorted(d["_id"] for d in db.log.find({}))))
"#;
    let Some(result) = python(&server, script) else { return };
    assert_eq!(result, json!(["fresh"]));
}
