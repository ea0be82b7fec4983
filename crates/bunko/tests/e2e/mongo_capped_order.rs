//! Capped collections' insertion order kept by the engine (issue 13): updates of capped
//! documents (update, replacement, findAndModify, bulkWrite and MongoDB 8's client
//! `bulkWrite`, HTTP `PUT`) keep their place
//! in natural order and tailable cursors keep following; upserts insert and cap; writes
//! over the HTTP API into the collection's CouchDB database are capped as MongoDB inserts
//! are; and the order survives a restart.

use serde_json::json;

use crate::harness::Server;
use crate::mongo::python;

/// `http(method, path, body)`: a request to the HTTP API as the admin, its JSON answer
/// (with `status` for an error).
const HTTP: &str = r#"
import base64, urllib.request
def http(method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(os.environ["BUNKO_URL"] + path, data=data, method=method)
    req.add_header("Authorization", "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode())
    req.add_header("Content-Type", "application/json")
    try:
        return json.loads(urllib.request.urlopen(req).read())
    except urllib.error.HTTPError as e:
        return {"status": e.code, **json.loads(e.read())}
"#;

/// Updates of every kind leave documents at their place; a tailable cursor sees only the
/// inserts after them; `_id` stays immutable; an upsert inserts and removes the oldest.
#[test]
fn updates_keep_natural_order_and_tailable_cursors_follow() {
    let server = Server::start();
    let script = r#"
from pymongo import CursorType, UpdateOne, ReplaceOne
c = client()
db = c.shop
db.create_collection("log", capped=True, size=100000, max=4)
db.log.insert_many([{"_id": k, "n": i} for i, k in enumerate(["m", "c", "x", "a"])])
natural = lambda: [d["_id"] for d in db.log.find()]
out = {}
tail = db.log.find(cursor_type=CursorType.TAILABLE)
out["tail_first"] = [d["_id"] for d in tail]
# A growing update, a replacement, findAndModify, bulkWrite, a multi update, HTTP PUT.
r = db.log.update_one({"_id": "m"}, {"$set": {"n": 10, "pad": "z" * 500}})
out["counts"] = [r.matched_count, r.modified_count]
db.log.replace_one({"_id": "c"}, {"n": 11})
out["fam"] = db.log.find_one_and_update({"_id": "x"}, {"$inc": {"n": 100}}, return_document=True)
db.log.bulk_write([UpdateOne({"_id": "a"}, {"$set": {"b": 1}}), ReplaceOne({"_id": "m"}, {"n": 12})])
db.log.update_many({}, {"$set": {"all": True}})
doc = http("GET", "/shop%24log/c")
out["put"] = http("PUT", "/shop%24log/c", {"_rev": doc["_rev"], "n": 13}).get("ok")
out["natural"] = natural()
out["reverse"] = [d["_id"] for d in db.log.find().sort("$natural", -1)]
out["hint_reverse"] = [d["_id"] for d in db.log.find().hint([("$natural", -1)])]
out["values"] = [d.get("n") for d in db.log.find()]
out["tail_after_updates"] = [d["_id"] for d in tail]
db.log.insert_one({"_id": "z", "n": 0})
out["tail_next"] = [d["_id"] for d in tail]
out["after_insert"] = natural()
out["id_change"] = code_of(lambda: db.log.update_one({"_id": "c"}, {"$set": {"_id": "cc"}}))
out["id_replace"] = code_of(lambda: db.log.replace_one({"_id": "c"}, {"_id": "cc", "n": 1}))
r = db.log.update_one({"_id": "u"}, {"$set": {"n": 1}}, upsert=True)
out["upsert"] = [r.upserted_id, natural()]
db.log.find_one_and_update({"_id": "v"}, {"$set": {"n": 2}}, upsert=True)
out["fam_upsert"] = natural()
out["tail_upserts"] = [d["_id"] for d in tail]
# MongoDB 8's client bulkWrite: the update keeps "a" at its place, the insert removes it.
from pymongo.operations import InsertOne
ops = [UpdateOne({"_id": "a"}, {"$set": {"bw": 1}}, namespace="shop.log"), InsertOne({"_id": "w"}, namespace="shop.log")]
r = c.bulk_write(ops)
out["client_bulk"] = [r.modified_count, r.inserted_count, natural(), [d["_id"] for d in tail]]
out["stats"] = db.command("collStats", "log")["count"]
print(json.dumps(out))
"#;
    let Some(out) = python(&server, &format!("{HTTP}{script}")) else { return };
    assert_eq!(out["tail_first"], json!(["m", "c", "x", "a"]));
    assert_eq!(out["counts"], json!([1, 1]));
    assert_eq!(out["fam"], json!({"_id": "x", "n": 102}));
    assert_eq!(out["put"], json!(true));
    assert_eq!(out["natural"], json!(["m", "c", "x", "a"]));
    assert_eq!(out["reverse"], json!(["a", "x", "c", "m"]));
    assert_eq!(out["hint_reverse"], json!(["a", "x", "c", "m"]));
    assert_eq!(out["values"], json!([12, 13, 102, 3]));
    assert_eq!(out["tail_after_updates"], json!([]));
    assert_eq!(out["tail_next"], json!(["z"]));
    assert_eq!(out["after_insert"], json!(["c", "x", "a", "z"]));
    assert_eq!(out["id_change"], json!(66));
    assert_eq!(out["id_replace"], json!(66));
    assert_eq!(out["upsert"], json!(["u", ["x", "a", "z", "u"]]));
    assert_eq!(out["fam_upsert"], json!(["a", "z", "u", "v"]));
    assert_eq!(out["tail_upserts"], json!(["u", "v"]));
    assert_eq!(out["client_bulk"], json!([1, 1, ["z", "u", "v", "w"], ["w"]]));
    assert_eq!(out["stats"], json!(4));
}

/// `_bulk_docs`, `PUT` and `POST` into the collection's CouchDB database (`shop$log`) are
/// capped as MongoDB inserts are: the oldest documents go in the same commit, as
/// deletions; a document larger than the cap is refused with `413`.
#[test]
fn http_writes_into_a_capped_collection_are_capped() {
    let server = Server::start();
    let script = r#"
c = client()
db = c.shop
db.create_collection("log", capped=True, size=4096, max=3)
natural = lambda: [d["_id"] for d in db.log.find()]
db.log.insert_one({"_id": "first"})
out = {}
bulk = http("POST", "/shop%24log/_bulk_docs", {"docs": [{"_id": f"h{i}", "n": i} for i in range(1, 6)]})
out["bulk"] = [r.get("ok") for r in bulk]
out["after_bulk"] = natural()
http("PUT", "/shop%24log/p1", {"n": 6})
out["after_put"] = natural()
http("POST", "/shop%24log", {"_id": "p2", "n": 7})
out["after_post"] = natural()
db.log.insert_one({"_id": "m1"})
out["after_mongo"] = natural()
changes = http("GET", "/shop%24log/_changes")["results"]
out["deleted"] = sorted(r["id"] for r in changes if r.get("deleted"))
out["all_docs"] = [r["id"] for r in http("GET", "/shop%24log/_all_docs")["rows"] if not r["id"].startswith("_design/")]
big = http("PUT", "/shop%24log/big", {"pad": "x" * 5000})
out["big"] = [big.get("status"), big.get("error"), natural()]
out["big_mongo"] = code_of(lambda: db.log.insert_one({"_id": "big", "pad": "x" * 5000}))
# A size cap over HTTP: bodies of ~1000 bytes, 4096 bytes at most.
db.create_collection("sized", capped=True, size=4096)
http("POST", "/shop%24sized/_bulk_docs", {"docs": [{"_id": f"s{i}", "pad": "y" * 1000} for i in range(8)]})
kept = [d["_id"] for d in db.sized.find()]
out["sized"] = [kept == [f"s{i}" for i in range(8 - len(kept), 8)], 0 < len(kept) < 8, db.command("collStats", "sized")["size"] <= 4096]
# Deletes over HTTP keep working and free their place.
rev = http("GET", "/shop%24log/p2")["_rev"]
out["delete"] = http("DELETE", f"/shop%24log/p2?rev={rev}").get("ok")
db.log.insert_one({"_id": "m2"})
out["after_delete"] = natural()
print(json.dumps(out))
"#;
    let Some(out) = python(&server, &format!("{HTTP}{script}")) else { return };
    assert_eq!(out["bulk"], json!([true, true, true, true, true]));
    assert_eq!(out["after_bulk"], json!(["h3", "h4", "h5"]));
    assert_eq!(out["after_put"], json!(["h4", "h5", "p1"]));
    assert_eq!(out["after_post"], json!(["h5", "p1", "p2"]));
    assert_eq!(out["after_mongo"], json!(["p1", "p2", "m1"]));
    assert_eq!(out["deleted"], json!(["first", "h1", "h2", "h3", "h4", "h5"]));
    assert_eq!(out["all_docs"], json!(["m1", "p1", "p2"]));
    assert_eq!(out["big"], json!([413, "document_too_large", ["p1", "p2", "m1"]]));
    assert_eq!(out["big_mongo"], json!(2));
    assert_eq!(out["sized"], json!([true, true, true]));
    assert_eq!(out["delete"], json!(true));
    assert_eq!(out["after_delete"], json!(["p1", "m1", "m2"]));
}

/// The insertion order is stored: after a restart natural order, a tailable cursor's
/// start and the capping's "oldest first" still follow insertion, not the last write.
#[test]
fn natural_order_survives_a_restart() {
    let mut server = Server::start();
    let before = r#"
c = client()
db = c.shop
db.create_collection("log", capped=True, size=100000, max=4)
for k in ["q", "b", "y", "d"]:
    db.log.insert_one({"_id": k})
db.log.update_one({"_id": "q"}, {"$set": {"touched": True}})
db.log.update_one({"_id": "b"}, {"$set": {"touched": True}})
print(json.dumps([d["_id"] for d in db.log.find()]))
"#;
    let Some(out) = python(&server, before) else { return };
    assert_eq!(out, json!(["q", "b", "y", "d"]));
    assert!(server.terminate());
    server.restart();
    let after = r#"
from pymongo import CursorType
c = client()
db = c.shop
out = {"natural": [d["_id"] for d in db.log.find()]}
db.log.insert_one({"_id": "e"})
out["capped"] = [d["_id"] for d in db.log.find().sort("$natural", -1)]
tail = db.log.find({"_id": {"$ne": "x"}}, cursor_type=CursorType.TAILABLE)
out["tail"] = [d["_id"] for d in tail]
print(json.dumps(out))
"#;
    let Some(out) = python(&server, after) else { return };
    assert_eq!(
        out,
        json!({"natural": ["q", "b", "y", "d"], "capped": ["e", "d", "y", "b"],
               "tail": ["b", "y", "d", "e"]})
    );
}
