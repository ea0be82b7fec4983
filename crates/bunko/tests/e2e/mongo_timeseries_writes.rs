//! The writes MongoDB 8 allows on a time-series collection beyond inserts, updates and
//! deletes, through pymongo (issue 13): `findAndModify` (update, replace and remove forms,
//! `sort`, `new`, `fields`, `upsert`), upserts of `update`, updates that change `_id` or
//! break the time field, and `collMod` (granularity and bucketing transitions,
//! `expireAfterSeconds` set, changed and `"off"`) with MongoDB's refusals; the update
//! statements' `arrayFilters`, `sort`, `c` and `upsertSupplied` (also through `bulkWrite`)
//! and `findAndModify`'s `arrayFilters`. Each write is run on a plain collection holding the
//! same documents too, and the answers compared.

use serde_json::json;

use crate::harness::Server;
use crate::mongo::python;

/// A time-series collection `m` and a plain one `p` (database `ts`), `setup(docs)` inserting
/// the same documents into both, and `both(op)`: `op`'s answer on `m` and whether `p`'s is
/// the same.
const SETUP: &str = r#"
from pymongo import ReturnDocument
c = client()
db = c.ts
db.create_collection("m", timeseries={"timeField": "ts", "metaField": "sensor"})
m, p = db.m, db.p
t0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
def at(minutes):
    return t0 + datetime.timedelta(minutes=minutes)
def setup(docs):
    m.insert_many(docs)
    p.insert_many(docs)
def both(op):
    a, b = op(m), op(p)
    return [a == b, a]
"#;

#[test]
fn find_and_modify_and_upserts_on_a_time_series_collection_answer_as_on_a_plain_one() {
    let server = Server::start();
    let script = r#"
from pymongo import UpdateOne
setup([{"_id": i, "ts": at(i), "sensor": {"id": "ab"[i % 2]}, "temp": 10 + i} for i in range(10)])
AFTER, BEFORE = ReturnDocument.AFTER, ReturnDocument.BEFORE
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
    both(lambda c: code_of(lambda: c.find_one_and_update({"_id": 8}, {"$set": {"a.$[x]": 1}}, array_filters=[{"x": 1}]))),
    code_of(lambda: m.find_one_and_update({"_id": 8}, {"$set": {"x": 1}}, sort={"score": {"$meta": "textScore"}})),
]
out["count"] = m.count_documents({})
print(json.dumps(out, default=str))
"#;
    let Some(out) = python(&server, &format!("{SETUP}{script}")) else { return };
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
    // `a` is missing: MongoDB's BadValue on either collection.
    assert_eq!(out["refused"], json!([[true, 2], 238]));
    // 10 measurements, one removed, 5 upserted.
    assert_eq!(out["count"], json!(14));
}

#[test]
fn array_filters_sort_constants_and_supplied_upserts_on_a_time_series_collection_answer_as_on_a_plain_one()
 {
    let server = Server::start();
    let script = r#"
setup([{"_id": i, "ts": at(i), "sensor": {"id": "ab"[i % 2]}, "temp": 10 + i, "r": [i, i + 5, i + 10]} for i in range(8)])
def update(coll, **statement):
    """A raw update command of one statement: its counts, upserts and errors."""
    reply = db.command("update", coll.name, updates=[statement])
    for e in reply.get("writeErrors", []):
        e.pop("index")
    return {k: v for k, v in reply.items() if k in ("n", "nModified", "upserted", "writeErrors")}
def all_of(coll):
    """The measurements but the one upserted with a new ObjectId."""
    return list(coll.find({"temp": {"$ne": 41}}, {"ts": 0}).sort("_id", 1))
out = {}
out["array_filters"] = both(lambda c: c.update_many({"sensor.id": "a"}, {"$set": {"r.$[big]": 0}}, array_filters=[{"big": {"$gte": 10}}]).modified_count)
out["sorted_one"] = both(lambda c: [c.update_one({"sensor.id": "b"}, {"$inc": {"temp": 100}}, sort={"ts": -1}).modified_count, c.find_one({"temp": {"$gt": 100}}, {"_id": 1})])
out["sorted_replace"] = both(lambda c: [c.replace_one({"temp": {"$lt": 14}}, {"ts": at(9), "temp": 9}, sort={"temp": -1}).modified_count, c.find_one({"temp": 9}, {"_id": 1})])
out["sort_multi"] = both(lambda c: update(c, q={}, u={"$set": {"x": 1}}, multi=True, sort={"ts": 1}))
out["constants"] = both(lambda c: [update(c, q={"_id": 4}, u=[{"$set": {"temp": "$$t", "tag": "$$o.name", "up": "$$Up", "lit": {"$literal": "$$t"}}}], c={"t": "$sensor", "o": {"name": "x"}, "Up": 1}), c.find_one({"_id": 4}, {"_id": 0, "temp": 1, "tag": 1, "up": 1, "lit": 1})])
out["constants_refused"] = both(lambda c: [update(c, q={"_id": 4}, u={"$set": {"y": 1}}, c={"t": 1}), update(c, q={}, u=[{"$set": {"y": "$$x"}}], c={"1x": 1, "x": 2}), update(c, q={}, u=[{"$set": {"y": 1}}], c=5)])
out["supplied"] = both(lambda c: [update(c, q={"_id": 40}, u=[{"$set": {"x": 1}}], c={"new": {"_id": 40, "ts": at(40), "temp": 4}}, upsert=True, upsertSupplied=True), c.find_one({"_id": 40}, {"ts": 0})])
out["supplied_no_id"] = both(lambda c: [update(c, q={"temp": 999}, u=[{"$set": {"x": 1}}], c={"new": {"temp": 41, "ts": at(41)}}, upsert=True, upsertSupplied=True)["n"], c.find_one({"temp": 41}, {"_id": 0, "ts": 0})])
out["supplied_matched"] = both(lambda c: [update(c, q={"_id": 0}, u=[{"$set": {"temp": "$$new.temp"}}], c={"new": {"temp": 77, "ts": at(0)}}, upsert=True, upsertSupplied=True), c.find_one({"_id": 0}, {"_id": 0, "temp": 1})])
out["supplied_refused"] = both(lambda c: [update(c, q={"_id": 42}, u=[{"$set": {"x": 1}}], c={"new": {"ts": at(42)}}, upsertSupplied=True), update(c, q={"_id": 42}, u=[{"$set": {"x": 1}}], c={"old": {}}, upsert=True, upsertSupplied=True)])
out["fam_array_filters"] = both(lambda c: c.find_one_and_update({"_id": 2}, {"$inc": {"r.$[e]": 1}}, array_filters=[{"e": {"$lt": 10}}], projection={"_id": 0, "r": 1}, return_document=ReturnDocument.AFTER))
def bulk(coll):
    ops = [
        {"update": 0, "filter": {"_id": 5}, "updateMods": [{"$set": {"temp": "$$v"}}], "constants": {"v": 55}},
        {"update": 0, "filter": {"_id": 43}, "updateMods": [{"$set": {"x": 1}}], "upsert": True, "upsertSupplied": True, "constants": {"new": {"_id": 43, "ts": at(43)}}},
    ]
    reply = c.admin.command("bulkWrite", 1, ops=ops, nsInfo=[{"ns": coll.full_name}])
    return [reply["cursor"]["firstBatch"], coll.find_one({"_id": 5}, {"_id": 0, "temp": 1}), coll.count_documents({"_id": 43})]
out["bulk"] = both(bulk)
out["same_documents"] = all_of(m) == all_of(p)
# The time field must stay a date, whichever option wrote it.
out["bad_time"] = [
    update(m, q={"_id": 6}, u=[{"$set": {"ts": "$$t"}}], c={"t": "soon"})["writeErrors"][0]["code"],
    update(m, q={"_id": 44}, u=[{"$set": {"x": 1}}], c={"new": {"temp": 1}}, upsert=True, upsertSupplied=True)["writeErrors"][0]["code"],
    update(m, q={"_id": 6}, u={"$set": {"ts": "soon"}}, sort={"ts": 1})["writeErrors"][0]["code"],
]
out["count"] = [m.count_documents({}), m.count_documents({"ts": {"$type": "date"}})]
print(json.dumps(out, default=str))
"#;
    let Some(out) = python(&server, &format!("{SETUP}{script}")) else { return };
    assert_eq!(out["array_filters"], json!([true, 4]));
    // The newest `b` measurement (7), and of those under 14 the warmest (3).
    assert_eq!(out["sorted_one"], json!([true, [1, {"_id": 7}]]));
    assert_eq!(out["sorted_replace"], json!([true, [1, {"_id": 3}]]));
    let sort_multi = json!({"n": 0, "nModified": 0, "writeErrors": [
        {"code": 72, "codeName": "InvalidOptions", "errmsg": "Cannot specify sort with multi=true"}]});
    assert_eq!(out["sort_multi"], json!([true, sort_multi]));
    // Constants are values, not expressions; `$$o.name` reads into one.
    assert_eq!(
        out["constants"],
        json!([true, [{"n": 1, "nModified": 1}, {"temp": "$sensor", "tag": "x", "up": 1, "lit": "$$t"}]])
    );
    let refused = |code: i32, name: &str, msg: &str| json!({"n": 0, "nModified": 0, "writeErrors": [{"code": code, "codeName": name, "errmsg": msg}]});
    assert_eq!(
        out["constants_refused"],
        json!([
            true,
            [
                refused(
                    51198,
                    "Location51198",
                    "Constant values may only be specified for pipeline updates"
                ),
                refused(
                    9,
                    "FailedToParse",
                    "'1x' starts with an invalid character for a user variable name"
                ),
                refused(
                    14,
                    "TypeMismatch",
                    "BSON field 'update.updates.c' is the wrong type 'int', expected type 'object'"
                ),
            ]
        ])
    );
    assert_eq!(
        out["supplied"],
        json!([true, [{"n": 1, "nModified": 0, "upserted": [{"index": 0, "_id": 40}]}, {"_id": 40, "temp": 4}]])
    );
    assert_eq!(out["supplied_no_id"], json!([true, [1, {"temp": 41}]]));
    assert_eq!(out["supplied_matched"], json!([true, [{"n": 1, "nModified": 1}, {"temp": 77}]]));
    assert_eq!(
        out["supplied_refused"],
        json!([
            true,
            [
                refused(
                    9,
                    "FailedToParse",
                    "cannot specify 'upsertSupplied: true' for a non-upsert operation"
                ),
                refused(
                    9,
                    "FailedToParse",
                    "the parameter 'upsertSupplied' is set to 'true', but no document was supplied"
                ),
            ]
        ])
    );
    assert_eq!(out["fam_array_filters"], json!([true, {"r": [3, 8, 1]}]));
    assert_eq!(
        out["bulk"],
        json!([true, [
            [{"ok": 1.0, "idx": 0, "n": 1, "nModified": 1}, {"ok": 1.0, "idx": 1, "n": 1, "nModified": 0, "upserted": {"_id": 43}}],
            {"temp": 55},
            1,
        ]])
    );
    assert_eq!(out["same_documents"], json!(true));
    assert_eq!(out["bad_time"], json!([2, 2, 2]));
    // 8 measurements and 3 upserted, every one with its date.
    assert_eq!(out["count"], json!([11, 11]));
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
