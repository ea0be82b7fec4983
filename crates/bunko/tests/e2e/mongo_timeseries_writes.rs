//! The writes MongoDB 8 allows on a time-series collection beyond inserts, updates and
//! deletes, through pymongo (issue 13): `findAndModify` (update, replace and remove forms,
//! `sort`, `new`, `fields`, `upsert`), upserts of `update`, updates that change `_id` or
//! break the time field, and `collMod` (granularity and bucketing transitions,
//! `expireAfterSeconds` set, changed and `"off"`) with MongoDB's refusals. Each write is
//! run on a plain collection holding the same documents too, and the answers compared.

use serde_json::json;

use crate::harness::Server;
use crate::mongo::python;

#[test]
fn find_and_modify_and_upserts_on_a_time_series_collection_answer_as_on_a_plain_one() {
    let server = Server::start();
    let script = r#"
from pymongo import ReturnDocument, UpdateOne
c = client()
db = c.ts
db.create_collection("m", timeseries={"timeField": "ts", "metaField": "sensor"})
m, p = db.m, db.p
t0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
def at(minutes):
    return t0 + datetime.timedelta(minutes=minutes)
docs = [{"_id": i, "ts": at(i), "sensor": {"id": "ab"[i % 2]}, "temp": 10 + i} for i in range(10)]
m.insert_many(docs)
p.insert_many(docs)
AFTER, BEFORE = ReturnDocument.AFTER, ReturnDocument.BEFORE
def both(op):
    """The answer of `op` on the time-series and the plain collection, and whether equal."""
    a, b = op(m), op(p)
    return [a == b, a]
out = {}
out["newest_a_after"] = both(lambda c: c.find_one_and_update({"sensor.id": "a"}, {"$inc": {"temp": 100}}, sort=[("ts", -1)], projection={"_id": 0, "temp": 1}, return_document=AFTER))
out["oldest_b_before"] = both(lambda c: c.find_one_and_update({"sensor.id": "b"}, {"$set": {"seen": True}}, sort=[("ts", 1)], projection={"temp": 1}, return_document=BEFORE))
out["replaced"] = both(lambda c: c.find_one_and_replace({"temp": 13}, {"ts": at(3), "sensor": {"id": "b"}, "temp": 33}, projection={"_id": 0}, return_document=AFTER))
out["removed"] = both(lambda c: c.find_one_and_delete({"temp": {"$lt": 15}}, sort=[("temp", -1)], projection={"_id": 1, "temp": 1}))
out["nothing"] = both(lambda c: c.find_one_and_update({"temp": 999}, {"$set": {"x": 1}}))
out["upserted"] = both(lambda c: c.find_one_and_update({"sensor": {"id": "c"}, "_id": 50}, {"$set": {"ts": at(50), "temp": 1}}, upsert=True, return_document=AFTER))
out["upserted_before"] = both(lambda c: c.find_one_and_update({"_id": 51}, {"$set": {"ts": at(51)}}, upsert=True))
r = m.update_one({"_id": 60, "sensor": {"id": "d"}}, {"$set": {"ts": at(60)}, "$setOnInsert": {"new": True}}, upsert=True)
out["update_upsert"] = [r.matched_count, r.modified_count, r.upserted_id, m.find_one({"_id": 60}, {"_id": 0, "ts": 0})]
r = m.update_many({"sensor.id": "a"}, {"$inc": {"n": 1}}, upsert=True)
out["update_upsert_matched"] = [r.matched_count, r.modified_count, r.upserted_id]
r = m.bulk_write([UpdateOne({"_id": 70}, {"$set": {"ts": at(70)}}, upsert=True), UpdateOne({"_id": 0}, {"$set": {"k": 1}}, upsert=True), UpdateOne({"_id": 71}, {"$set": {"ts": at(71)}}, upsert=True)])
out["bulk"] = [r.matched_count, r.modified_count, r.upserted_ids]
# A measurement's `_id` is no key: an update may change it, as MongoDB 8 lets it.
r = m.replace_one({"_id": 2}, {"_id": 20, "ts": at(2), "temp": 2})
out["new_id"] = [r.modified_count, m.count_documents({"_id": 20}), m.count_documents({"_id": 2})]
r = m.update_one({"_id": 5}, {"$set": {"_id": 45}})
out["set_id"] = [r.modified_count, m.count_documents({"_id": 45})]
r = m.replace_one({"_id": 6}, {"ts": at(6), "temp": 66})
out["kept_id"] = list(m.find({"temp": 66}, {"ts": 0}))
# The time field must stay a date: the write is refused and nothing changes.
out["bad_time"] = [
    code_of(lambda: m.find_one_and_update({"_id": 8}, {"$unset": {"ts": ""}})),
    code_of(lambda: m.find_one_and_update({"_id": 8}, {"$set": {"ts": "soon"}})),
    code_of(lambda: m.find_one_and_replace({"_id": 8}, {"temp": 1})),
    code_of(lambda: m.find_one_and_update({"_id": 90}, {"$set": {"temp": 1}}, upsert=True)),
    code_of(lambda: m.update_one({"_id": 91}, {"$set": {"temp": 1}}, upsert=True)),
    code_of(lambda: m.update_one({"_id": 8}, [{"$unset": "ts"}])),
]
out["unchanged"] = [m.find_one({"_id": 8}, {"_id": 0, "temp": 1}), m.count_documents({"_id": {"$in": [90, 91]}})]
out["refused"] = [
    code_of(lambda: m.find_one_and_update({"_id": 8}, {"$set": {"a.$[x]": 1}}, array_filters=[{"x": 1}])),
    code_of(lambda: m.find_one_and_update({"_id": 8}, {"$set": {"x": 1}}, sort={"score": {"$meta": "textScore"}})),
]
out["count"] = m.count_documents({})
print(json.dumps(out, default=str))
"#;
    let Some(out) = python(&server, script) else { return };
    // The same answers as the plain collection's.
    assert_eq!(out["newest_a_after"], json!([true, {"temp": 118}]));
    assert_eq!(out["oldest_b_before"], json!([true, {"_id": 1, "temp": 11}]));
    assert_eq!(
        out["replaced"],
        json!([true, {"ts": "2026-01-01 00:03:00", "sensor": {"id": "b"}, "temp": 33}])
    );
    assert_eq!(out["removed"], json!([true, {"_id": 4, "temp": 14}]));
    assert_eq!(out["nothing"], json!([true, null]));
    assert_eq!(
        out["upserted"],
        json!([true, {"_id": 50, "sensor": {"id": "c"}, "ts": "2026-01-01 00:50:00", "temp": 1}])
    );
    assert_eq!(out["upserted_before"], json!([true, null]));
    assert_eq!(out["update_upsert"], json!([0, 0, 60, {"sensor": {"id": "d"}, "new": true}]));
    assert_eq!(out["update_upsert_matched"], json!([4, 4, null]));
    assert_eq!(out["bulk"], json!([1, 1, {"0": 70, "2": 71}]));
    assert_eq!(out["new_id"], json!([1, 1, 0]));
    assert_eq!(out["set_id"], json!([1, 1]));
    assert_eq!(out["kept_id"], json!([{"_id": 6, "temp": 66}]));
    assert_eq!(out["bad_time"], json!([2, 2, 2, 2, 2, 2]));
    assert_eq!(out["unchanged"], json!([{"temp": 118}, 0]));
    assert_eq!(out["refused"], json!([238, 238]));
    // 10 measurements, one removed, 5 upserted.
    assert_eq!(out["count"], json!(14));
}

#[test]
fn coll_mod_changes_a_time_series_collections_bucketing_and_expiry_as_mongodb_8_allows() {
    let server = Server::start_with(&["--mongo-ttl-monitor-secs", "1"], &[]);
    let script = r#"
import time
c = client()
db = c.ts
db.create_collection("w", timeseries={"timeField": "at", "metaField": "s"})
def options():
    return next(db.list_collections(filter={"name": "w"}))["options"]
def refused(**kw):
    try:
        db.command("collMod", "w", **kw)
    except OperationFailure as e:
        return [e.code, e.details.get("errmsg")]
    return None
out = {"steps": []}
def step(**kw):
    db.command("collMod", "w", **kw)
    out["steps"].append(options()["timeseries"])
step(timeseries={"granularity": "minutes"})
out["coarser_only"] = refused(timeseries={"granularity": "seconds"})
step(timeseries={"granularity": "hours"})
step(timeseries={"granularity": "hours", "bucketMaxSpanSeconds": 2592000})
step(timeseries={})
out["bucketing_refusals"] = [
    refused(timeseries={"bucketMaxSpanSeconds": 2592000}),
    refused(timeseries={"bucketMaxSpanSeconds": 86400, "bucketRoundingSeconds": 86400}),
    refused(timeseries={"bucketMaxSpanSeconds": 2592001, "bucketRoundingSeconds": 2592002}),
    refused(timeseries={"granularity": "hours", "bucketRoundingSeconds": 86400}),
    refused(timeseries={"granularity": "hours", "bucketMaxSpanSeconds": 5}),
    refused(timeseries={"bucketMaxSpanSeconds": 31536001, "bucketRoundingSeconds": 31536001}),
    refused(timeseries={"granularity": "days"}),
    refused(timeseries={"size": 1}),
]
step(timeseries={"bucketMaxSpanSeconds": 2592001, "bucketRoundingSeconds": 2592001})
out["from_custom"] = refused(timeseries={"granularity": "minutes"})
out["other_refusals"] = [
    refused(validator={"a": 1}),
    refused(validationLevel="moderate"),
    refused(timeseries={"granularity": "hours"}, expireAfterSeconds=60),
    refused(expireAfterSeconds="soon"),
    refused(expireAfterSeconds=-1),
]
db.plain.insert_one({})
out["plain"] = [
    code_of(lambda: db.command("collMod", "plain", timeseries={"granularity": "hours"})),
    code_of(lambda: db.command("collMod", "plain", expireAfterSeconds=5)),
]
# expireAfterSeconds: set (nothing is old enough yet), changed (the old one goes), off.
now = datetime.datetime.now(datetime.timezone.utc)
db.command("collMod", "w", expireAfterSeconds=86400)
out["set"] = options().get("expireAfterSeconds")
db.w.insert_many([{"at": now - datetime.timedelta(hours=2), "s": "old"}, {"at": now, "s": "new"}])
time.sleep(3)
out["kept_at_a_day"] = sorted(d["s"] for d in db.w.find())
db.command("collMod", "w", expireAfterSeconds=3600)
deadline = time.time() + 60
while time.time() < deadline and db.w.count_documents({"s": "old"}):
    time.sleep(0.2)
out["expired_at_an_hour"] = sorted(d["s"] for d in db.w.find())
db.command("collMod", "w", expireAfterSeconds="off")
out["off"] = "expireAfterSeconds" in options()
db.w.insert_one({"at": now - datetime.timedelta(hours=2), "s": "old"})
time.sleep(3)
out["kept_when_off"] = sorted(d["s"] for d in db.w.find())
out["indexes"] = [i["name"] for i in db.w.list_indexes()]
print(json.dumps(out))
"#;
    let Some(out) = python(&server, script) else { return };
    let (minutes, hours) = (
        json!({"timeField": "at", "metaField": "s", "granularity": "minutes", "bucketMaxSpanSeconds": 86400}),
        json!({"timeField": "at", "metaField": "s", "granularity": "hours", "bucketMaxSpanSeconds": 2592000}),
    );
    let custom = json!({"timeField": "at", "metaField": "s", "bucketRoundingSeconds": 2592001, "bucketMaxSpanSeconds": 2592001});
    assert_eq!(out["steps"], json!([minutes, hours, hours, hours, custom]));
    let transition = "Invalid transition for timeseries.granularity. Can only transition from 'seconds' to 'minutes' or 'minutes' to 'hours'.";
    assert_eq!(out["coarser_only"], json!([72, transition]));
    let codes: Vec<_> = out["bucketing_refusals"]
        .as_array()
        .expect("refusals")
        .iter()
        .map(|r| r[0].clone())
        .collect();
    assert_eq!(
        codes,
        vec![
            json!(72),
            json!(72),
            json!(72),
            json!(72),
            json!(72),
            json!(51024),
            json!(2),
            json!(40415)
        ]
    );
    assert_eq!(
        out["bucketing_refusals"][1][1],
        json!("Timeseries 'bucketMaxSpanSeconds' needs to be equal or greater to transition")
    );
    assert_eq!(
        out["from_custom"],
        json!([72, "Timeseries 'bucketMaxSpanSeconds' needs to be equal or greater to transition"])
    );
    assert_eq!(
        out["other_refusals"],
        json!([
            [72, "option not supported on a time-series collection: validator"],
            [72, "option not supported on a time-series collection: validationLevel"],
            [72, "time-series options cannot be modified together with other options"],
            [
                72,
                "Invalid string value for the 'clusteredIndex::expireAfterSeconds' option. Got: 'soon'. Accepted value is 'off'"
            ],
            [72, "TTL index 'expireAfterSeconds' option cannot be less than 0"],
        ])
    );
    assert_eq!(out["plain"], json!([72, 72]));
    assert_eq!(out["set"], json!(86400));
    assert_eq!(out["kept_at_a_day"], json!(["new", "old"]));
    assert_eq!(out["expired_at_an_hour"], json!(["new"]));
    assert_eq!(out["off"], json!(false));
    assert_eq!(out["kept_when_off"], json!(["new", "old"]));
    assert_eq!(out["indexes"], json!(["s_1_at_1"]));
}
