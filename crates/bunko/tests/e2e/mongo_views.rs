//! MongoDB views through pymongo (issue 13, point 2): `create` with `viewOn` and
//! `pipeline`; `find`, `count`, `estimatedDocumentCount`, `distinct` and `aggregate` over
//! the view run its pipeline first (also on a view of a view); writes are
//! `CommandNotSupportedOnView` (166); `listCollections` shows `type: "view"`; the view
//! survives a restart, shows over HTTP as its design document, and its creation is a
//! change stream `create` event.

use serde_json::json;

use crate::harness::Server;
use crate::mongo::python;

#[test]
fn a_view_reads_through_its_pipeline_refuses_writes_and_survives_a_restart() {
    let mut server = Server::start();
    let script = r#"
import faulthandler; faulthandler.dump_traceback_later(60, exit=True)
from pymongo import InsertOne
from pymongo.errors import ClientBulkWriteException
c = client()
db = c.library
db.books.insert_many([
    {"_id": 1, "title": "吾輩は猫である", "author": "夏目漱石", "year": 1905, "tags": ["猫", "小説"]},
    {"_id": 2, "title": "坊っちゃん", "author": "夏目漱石", "year": 1906, "tags": ["小説"]},
    {"_id": 3, "title": "羅生門", "author": "芥川龍之介", "year": 1915, "tags": ["短編"]},
    {"_id": 4, "title": "こころ", "author": "夏目漱石", "year": 1914, "tags": ["小説", "名作"]},
])
out = {}
with db.watch(show_expanded_events=True) as s:
    db.create_collection("soseki", viewOn="books", pipeline=[{"$match": {"author": "夏目漱石"}}, {"$project": {"author": 0}}])
    e = s.next()
    out["event"] = {k: e[k] for k in ("operationType", "nsType", "operationDescription")}
db.create_collection("late_soseki", viewOn="soseki", pipeline=[{"$match": {"year": {"$gt": 1905}}}])
v = db.soseki
out["find"] = list(v.find({"year": {"$lt": 1914}}, {"title": 1}, sort=[("year", -1)]))
out["batches"] = [d["_id"] for d in v.find({}, batch_size=1, sort=[("_id", 1)])]
out["count"] = v.count_documents({"tags": "小説"})
out["estimated"] = v.estimated_document_count()
out["distinct"] = sorted(v.distinct("tags"))
out["agg"] = list(v.aggregate([{"$group": {"_id": None, "n": {"$sum": 1}}}]))
# An explained aggregate over a view is a plan over the collection the view reads, not rows.
explained = db.command("aggregate", "soseki", pipeline=[{"$match": {"year": 1906}}], explain=True)
out["explained"] = ["cursor" in explained, explained["stages"][0]["$cursor"]["queryPlanner"]["namespace"]]
out["chain"] = [d["_id"] for d in db.late_soseki.find(sort=[("_id", 1)])]
out["errors"] = []
for write in [lambda: v.insert_one({"x": 1}), lambda: v.update_one({}, {"$set": {"x": 1}}),
              lambda: v.delete_many({}), lambda: v.find_one_and_delete({}),
              lambda: v.create_index("year"),
              lambda: c.bulk_write([InsertOne({"x": 1}, namespace="library.soseki")])]:
    try:
        write()
        out["errors"].append(None)
    except ClientBulkWriteException as err:
        out["errors"].append([err.write_errors[0]["code"], err.write_errors[0]["codeName"]])
    except OperationFailure as err:
        out["errors"].append([err.code, err.details.get("codeName")])
out["list"] = sorted([(x["name"], x["type"], x.get("options", {}).get("viewOn")) for x in db.list_collections()])
out["names"] = sorted(db.list_collection_names())
out["books"] = db.books.count_documents({})
out["estimated_max"] = [db.books.estimated_document_count(maxTimeMS=6000), v.estimated_document_count(maxTimeMS=6000)]
print(json.dumps(out, default=str))
"#;
    let Some(out) = python(&server, script) else { return };
    let pipeline = json!([{"$match": {"author": "夏目漱石"}}, {"$project": {"author": 0}}]);
    assert_eq!(
        out["event"],
        json!({"operationType": "create", "nsType": "view",
               "operationDescription": {"viewOn": "books", "pipeline": pipeline}})
    );
    assert_eq!(
        out["find"],
        json!([{"_id": 2, "title": "坊っちゃん"}, {"_id": 1, "title": "吾輩は猫である"}])
    );
    assert_eq!(out["batches"], json!([1, 2, 4]));
    assert_eq!(out["count"], json!(3));
    assert_eq!(out["estimated"], json!(3));
    assert_eq!(out["distinct"], json!(["名作", "小説", "猫"]));
    assert_eq!(out["agg"], json!([{"_id": null, "n": 3}]));
    assert_eq!(out["explained"], json!([false, "library.books"]));
    assert_eq!(out["chain"], json!([2, 4]));
    let refused = json!([166, "CommandNotSupportedOnView"]);
    assert_eq!(out["errors"], json!([refused, refused, refused, refused, refused, refused]));
    assert_eq!(
        out["list"],
        json!([
            ["books", "collection", null],
            ["late_soseki", "view", "soseki"],
            ["soseki", "view", "books"]
        ])
    );
    assert_eq!(out["names"], json!(["books", "late_soseki", "soseki"]));
    assert_eq!(out["books"], json!(4));
    assert_eq!(out["estimated_max"], json!([4, 3]));
    // Over HTTP the view is a database whose design document holds the definition.
    let ddoc = server.get_doc("library$soseki", "_design/mongodb");
    assert_eq!(ddoc["options"]["viewOn"], json!("books"), "{ddoc}");
    assert!(server.terminate());
    server.restart();
    let script = r#"
c = client()
db = c.library
out = {"ids": [d["_id"] for d in db.late_soseki.find(sort=[("_id", 1)])],
       "types": sorted((x["name"], x["type"]) for x in db.list_collections())}
db.drop_collection("late_soseki")
out["after_drop"] = sorted(db.list_collection_names())
print(json.dumps(out))
"#;
    let out = python(&server, script).expect("pymongo ran before the restart");
    assert_eq!(out["ids"], json!([2, 4]));
    assert_eq!(
        out["types"],
        json!([["books", "collection"], ["late_soseki", "view"], ["soseki", "view"]])
    );
    assert_eq!(out["after_drop"], json!(["books", "soseki"]));
}

/// Whether a collection is a view is read once per commit of the collection and kept
/// between its writes (every command asks): a view definition written over HTTP into a
/// collection that was just read is seen by the next command, a point read by `_id`
/// included, and deleting it makes the collection a collection again.
#[test]
fn a_view_definition_written_over_http_is_seen_by_the_next_command() {
    let server = Server::start();
    let before = r#"
db = client().shop
db.src.insert_many([{"_id": 1, "a": 1}, {"_id": 2, "a": 2}])
db.c.insert_one({"_id": 1, "own": True})
print(json.dumps([db.c.find_one({"_id": 1}), db.c.find_one({"_id": 1})]))
"#;
    let Some(out) = python(&server, before) else { return };
    assert_eq!(out, json!([{"_id": 1, "own": true}, {"_id": 1, "own": true}]));
    let view = json!({"options": {"viewOn": "src", "pipeline": [{"$match": {"a": 2}}]}});
    let (status, put) = server.put("/shop%24c/_design/mongodb", &view);
    assert_eq!(status, 201, "{put}");
    let as_view = r#"
db = client().shop
try:
    db.c.insert_one({"_id": 3})
    refused = None
except OperationFailure as e:
    refused = e.code
print(json.dumps({"one": db.c.find_one({"_id": 2}), "own": db.c.find_one({"_id": 1}),
                  "all": list(db.c.find()), "refused": refused}))
"#;
    let Some(out) = python(&server, as_view) else { return };
    assert_eq!(
        out,
        json!({"one": {"_id": 2, "a": 2}, "own": null, "all": [{"_id": 2, "a": 2}], "refused": 166})
    );
    let rev = put["rev"].as_str().unwrap_or_default().to_string();
    assert_eq!(server.delete(&format!("/shop%24c/_design/mongodb?rev={rev}")).0, 200);
    let after = r#"
db = client().shop
print(json.dumps([db.c.find_one({"_id": 1}), list(db.c.find())]))
"#;
    let Some(out) = python(&server, after) else { return };
    assert_eq!(out, json!([{"_id": 1, "own": true}, [{"_id": 1, "own": true}]]));
}
