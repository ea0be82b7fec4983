//! Capped collections and tailable cursors (issue 13, point 2): `create` with `capped`,
//! `size` and `max` (MongoDB's checks and rounding), insertion order as natural order, the
//! oldest documents removed in the inserting commit (plain deletions over HTTP), deletes
//! and updates allowed, `collStats`/`listCollections`, `collMod`'s `cappedSize` and
//! `cappedMax`, and `find` with `tailable` and
//! `awaitData`: a `getMore` woken by an insert, `CappedPositionLost` (136) when the
//! cursor's position was removed, and MongoDB's errors for tailable cursors elsewhere.

use serde_json::json;

use crate::harness::Server;
use crate::mongo::python;

#[test]
fn capped_collections_keep_the_newest_documents_in_insertion_order() {
    let server = Server::start();
    let script = r#"
import base64, urllib.request
c = client()
db = c.shop
out = {}
out["errors"] = [code_of(lambda: db.create_collection("x", capped=True)),
                 code_of(lambda: db.create_collection("x", capped=True, max=3)),
                 code_of(lambda: db.create_collection("x", size=5000)),
                 code_of(lambda: db.create_collection("x", capped=True, size=0)),
                 code_of(lambda: db.command("create", "x", capped=True, size="big")),
                 "x" in db.list_collection_names()]
db.create_collection("log", capped=True, size=1000, max=3)
db.create_collection("big", capped=True, size=5000)
infos = {i["name"]: i["options"] for i in db.list_collections()}
out["options"] = [infos["log"], infos["big"]]
# Ids out of id order: natural order is insertion order.
for i, key in enumerate(["m", "c", "x", "a", "q"]):
    db.log.insert_one({"_id": key, "n": i})
out["natural"] = [d["_id"] for d in db.log.find()]
out["reverse"] = [d["_id"] for d in db.log.find().sort("$natural", -1)]
out["filtered"] = [d["_id"] for d in db.log.find({"n": {"$gte": 3}})]
stats = db.command("collStats", "log")
out["stats"] = [stats["capped"], stats["max"], stats["maxSize"], stats["count"]]
# The removals are plain deletions over HTTP.
req = urllib.request.Request(os.environ["BUNKO_URL"] + "/shop%24log/_changes")
req.add_header("Authorization", "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode())
changes = json.loads(urllib.request.urlopen(req).read())["results"]
out["changes"] = sorted(r["id"] for r in changes if r.get("deleted"))
# A size cap: 10 documents of ~1000 bytes do not fit in 5120.
for i in range(10):
    db.big.insert_one({"_id": i, "pad": "x" * 1000})
kept = [d["_id"] for d in db.big.find()]
out["by_size"] = [kept == list(range(10 - len(kept), 10)), 0 < len(kept) < 10, db.command("collStats", "big")["size"] <= 5120]
# Deletes are allowed, and updates (MongoDB 6.0+), which keep the order.
db.log.delete_one({"_id": "x"})
out["after_delete"] = [d["_id"] for d in db.log.find()]
out["update"] = [code_of(lambda: db.log.update_one({"_id": "a"}, {"$set": {"n": 9}})),
                 code_of(lambda: db.log.find_one_and_update({"_id": "a"}, {"$set": {"n": 9}}))]
dup = code_of(lambda: db.log.insert_one({"_id": "q"}))
out["duplicate"] = [dup, [d["_id"] for d in db.log.find()]]
with c.start_session() as s:
    s.start_transaction()
    out["txn"] = code_of(lambda: db.log.insert_one({"_id": "t"}, session=s))
print(json.dumps(out))
"#;
    let Some(result) = python(&server, script) else { return };
    assert_eq!(result["errors"], json!([72, 72, 72, 51024, 14, false]));
    assert_eq!(
        result["options"],
        json!([{"capped": true, "size": 4096, "max": 3}, {"capped": true, "size": 5120}])
    );
    assert_eq!(result["natural"], json!(["x", "a", "q"]));
    assert_eq!(result["reverse"], json!(["q", "a", "x"]));
    assert_eq!(result["filtered"], json!(["a", "q"]));
    assert_eq!(result["stats"], json!([true, 3, 4096, 3]));
    assert_eq!(result["changes"], json!(["c", "m"]));
    assert_eq!(result["by_size"], json!([true, true, true]));
    assert_eq!(result["after_delete"], json!(["a", "q"]));
    assert_eq!(result["update"], json!([null, null]));
    assert_eq!(result["duplicate"], json!([11000, ["a", "q"]]));
    assert_eq!(result["txn"], json!(263));
}

#[test]
fn tailable_cursors_follow_inserts_and_die_when_their_position_is_removed() {
    let server = Server::start();
    let script = r#"
import threading, time
from pymongo import CursorType

def try_next(cur):
    try:
        return cur.next()
    except StopIteration:
        return None
c = client()
db = c.shop
db.create_collection("events", capped=True, size=100000, max=5)
db.plain.insert_one({"_id": 1})
out = {}
out["errors"] = [code_of(lambda: list(db.plain.find(cursor_type=CursorType.TAILABLE))),
                 code_of(lambda: db.command("find", "events", awaitData=True)),
                 code_of(lambda: db.command("find", "events", tailable=True, sort={"n": 1}))]
db.events.insert_many([{"_id": i, "n": i} for i in range(3)])
cur = db.events.find(cursor_type=CursorType.TAILABLE)
out["first"] = [d["_id"] for d in cur]
out["alive"] = cur.alive
db.events.insert_one({"_id": 3, "n": 3})
out["next"] = [d["_id"] for d in cur]
# awaitData: a getMore waits until an insert wakes it.
cur = db.events.find({"n": {"$gte": 4}}, cursor_type=CursorType.TAILABLE_AWAIT).max_await_time_ms(20000)
out["await_first"] = try_next(cur)
timer = threading.Timer(0.5, lambda: db.events.insert_one({"_id": 4, "n": 4}))
timer.start()
started = time.monotonic()
got = try_next(cur)
out["await_woken"] = [got, time.monotonic() - started < 15]
timer.join()
# Without inserts an awaitData getMore answers an empty batch after maxTimeMS.
quiet = db.events.find({"n": {"$gte": 100}}, cursor_type=CursorType.TAILABLE_AWAIT).max_await_time_ms(300)
out["timeout"] = [try_next(quiet), try_next(quiet), quiet.alive]
# The cursor's last document is removed (capped away): CappedPositionLost.
lost = db.events.find(cursor_type=CursorType.TAILABLE)
out["lost_first"] = [d["_id"] for d in lost]
raw = db.command("find", "events", tailable=True)["cursor"]
db.events.insert_many([{"_id": i, "n": i} for i in range(10, 16)])
# pymongo ends a tailable cursor quietly on CappedPositionLost; the raw getMore shows it.
out["lost"] = [try_next(lost), lost.alive,
               code_of(lambda: db.command("getMore", raw["id"], collection="events")),
               code_of(lambda: db.command("getMore", raw["id"], collection="events"))]
print(json.dumps(out))
"#;
    let Some(result) = python(&server, script) else { return };
    assert_eq!(result["errors"], json!([2, 9, 2]));
    assert_eq!(result["first"], json!([0, 1, 2]));
    assert_eq!(result["alive"], json!(true));
    assert_eq!(result["next"], json!([3]));
    assert_eq!(result["await_first"], json!(null));
    assert_eq!(result["await_woken"], json!([{"_id": 4, "n": 4}, true]));
    assert_eq!(result["timeout"], json!([null, null, true]));
    assert_eq!(result["lost_first"], json!([0, 1, 2, 3, 4]));
    assert_eq!(result["lost"], json!([null, false, 136, 43]));
}

/// `cloneCollectionAsCapped` copies a collection in natural order into a new capped
/// collection (the newest documents that fit stay; the source's validator is kept, indexes
/// are not); `convertToCapped` turns a collection into a capped one in place (its indexes
/// dropped, its documents capped); both with MongoDB's errors.
#[test]
fn collections_are_cloned_and_converted_to_capped_ones() {
    let server = Server::start();
    let script = r#"
c = client()
db = c.shop
def err(f):
    try:
        f()
        return None
    except OperationFailure as e:
        return [e.code, e.details.get("errmsg")]
db.create_collection("orders", validator={"n": {"$gte": 0}})
# Written in id-descending order: natural order is not id order.
db.orders.insert_many([{"_id": 10 - i, "n": i, "pad": "x" * 500} for i in range(10)])
db.orders.create_index("n")
out = {}
out["clone"] = db.command("cloneCollectionAsCapped", "orders", toCollection="recent", size=3000)["ok"]
info = {i["name"]: i["options"] for i in db.list_collections()}
out["recent_options"] = info["recent"]
recent = [d["_id"] for d in db.recent.find()]
natural = list(range(10, 0, -1))
out["recent"] = [0 < len(recent) < 10, recent == natural[-len(recent):]]
out["recent_indexes"] = sorted(i["name"] for i in db.recent.list_indexes())
out["recent_refuses"] = err(lambda: db.recent.insert_one({"_id": 99, "n": -1}))
db.recent.insert_one({"_id": 0, "n": 50, "pad": "y" * 500})
capped = [d["_id"] for d in db.recent.find()]
out["recent_capped"] = [capped[-1], capped[:-1] == recent[len(recent) - len(capped) + 1:]]
out["orders_left"] = db.orders.count_documents({})
out["errors"] = [
    err(lambda: db.command("cloneCollectionAsCapped", "nope", toCollection="z", size=4096)),
    err(lambda: db.command("cloneCollectionAsCapped", "orders", toCollection="recent", size=4096)),
    err(lambda: db.command("cloneCollectionAsCapped", "orders", size=4096)),
    err(lambda: db.command("cloneCollectionAsCapped", "orders", toCollection="z")),
    err(lambda: db.command("cloneCollectionAsCapped", "orders", toCollection="z", size="big")),
    err(lambda: db.command("convertToCapped", "nope", size=4096)),
    err(lambda: db.command("convertToCapped", "orders")),
]
db.create_collection("view", viewOn="orders", pipeline=[])
out["view"] = err(lambda: db.command("convertToCapped", "view", size=4096))
out["convert"] = db.command("convertToCapped", "orders", size=2000)["ok"]
info = {i["name"]: i["options"] for i in db.list_collections()}
out["orders_options"] = info["orders"]
orders = [d["_id"] for d in db.orders.find()]
out["orders"] = [orders == recent, len(orders)]
out["orders_indexes"] = sorted(i["name"] for i in db.orders.list_indexes())
out["temporary"] = [n for n in db.list_collection_names() if "convertToCapped" in n]
print(json.dumps(out))
"#;
    let Some(out) = python(&server, script) else { return };
    assert_eq!(out["clone"], json!(1.0));
    assert_eq!(
        out["recent_options"],
        json!({"capped": true, "size": 4096, "validator": {"n": {"$gte": 0}}})
    );
    // About 550 bytes a document: the newest that fit in 4096, in the source's natural order.
    assert_eq!(out["recent"], json!([true, true]));
    assert_eq!(out["recent_indexes"], json!(["_id_"]));
    assert_eq!(out["recent_refuses"][0], json!(121), "the validator came along");
    assert_eq!(out["recent_capped"], json!([0, true]), "an insert removes the oldest");
    assert_eq!(out["orders_left"], json!(10), "the source is unchanged");
    assert_eq!(
        out["errors"],
        json!([
            [26, "source collection shop.nope does not exist"],
            [
                48,
                "cloneCollectionAsCapped failed - destination collection shop.recent already exists. source collection: shop.orders"
            ],
            [
                40414,
                "BSON field 'cloneCollectionAsCapped.toCollection' is missing but a required field"
            ],
            [40414, "BSON field 'cloneCollectionAsCapped.size' is missing but a required field"],
            [
                14,
                "BSON field 'cloneCollectionAsCapped.size' is the wrong type 'string', expected types '[long, int, decimal, double]'"
            ],
            [26, "source collection shop.nope does not exist"],
            [40414, "BSON field 'convertToCapped.size' is missing but a required field"],
        ])
    );
    assert_eq!(
        out["view"],
        json!([166, "cloneCollectionAsCapped not supported for views: shop.view"])
    );
    assert_eq!(out["convert"], json!(1.0));
    assert_eq!(
        out["orders_options"],
        json!({"capped": true, "size": 4096, "validator": {"n": {"$gte": 0}}})
    );
    assert_eq!(out["orders"][0], json!(true), "the same documents as the clone");
    assert_eq!(out["orders_indexes"], json!(["_id_"]));
    assert_eq!(out["temporary"], json!([]));
}

/// `collMod` `cappedSize` and `cappedMax` (MongoDB 6.0+) change a capped collection's
/// limits; the next insert removes what the new limits leave over (the manual's
/// "Change the Size of a Capped Collection" and "Change Maximum Documents").
#[test]
fn coll_mod_changes_the_limits_and_the_next_insert_applies_them() {
    let server = Server::start();
    let script = r#"
c = client()
db = c.shop
db.create_collection("log", capped=True, size=2621440, max=20)
db.log.insert_many([{"_id": i} for i in range(20)])
out = {}
db.command("collMod", "log", cappedMax=5)
out["after_mod"] = db.log.count_documents({})
db.log.insert_one({"_id": 20})
out["after_insert"] = [d["_id"] for d in db.log.find()]
db.command("collMod", "log", cappedSize=5242880, cappedMax=8)
stats = db.command("collStats", "log")
out["limits"] = [stats["maxSize"], stats["max"]]
db.log.insert_many([{"_id": i} for i in range(21, 26)])
out["grown"] = [d["_id"] for d in db.log.find()]
opts = db.command("listCollections", filter={"name": "log"})["cursor"]["firstBatch"][0]["options"]
out["options"] = [opts["size"], opts["max"]]
db.create_collection("plain")
out["uncapped"] = code_of(lambda: db.command("collMod", "plain", cappedSize=4096))
out["zero"] = code_of(lambda: db.command("collMod", "log", cappedSize=0))
out["huge"] = code_of(lambda: db.command("collMod", "log", cappedSize=2**50 + 1))
out["type"] = code_of(lambda: db.command("collMod", "log", cappedMax="x"))
out["kept"] = [db.command("collStats", "log")["maxSize"], db.log.count_documents({})]
print(json.dumps(out))
"#;
    let Some(out) = python(&server, script) else { return };
    assert_eq!(
        out,
        json!({"after_mod": 20, "after_insert": [16, 17, 18, 19, 20],
               "limits": [5242880, 8], "grown": [18, 19, 20, 21, 22, 23, 24, 25],
               "options": [5242880, 8], "uncapped": 72, "zero": 72, "huge": 72, "type": 14,
               "kept": [5242880, 8]})
    );
}
