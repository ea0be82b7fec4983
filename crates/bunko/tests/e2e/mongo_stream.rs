//! Change streams through pymongo's `watch()` (issue 14, point 4): the events of inserts,
//! updates (with `updateDescription`), replacements and deletes in MongoDB's shape, writes
//! over the HTTP API in the same stream, `fullDocument: "updateLookup"`, pre-images,
//! `drop` + `invalidate`, database and deployment streams, and a resume token that survives
//! a restart of the server.

use serde_json::json;

use crate::harness::Server;
use crate::mongo::python;

#[test]
fn a_collection_stream_reports_every_kind_of_write_from_both_apis() {
    let server = Server::start();
    let script = r#"
import faulthandler; faulthandler.dump_traceback_later(60, exit=True)
c = client()
coll = c.shop.books
coll.insert_one({"_id": "seed", "x": 0})
out = {}
with coll.watch(full_document="updateLookup", max_await_time_ms=2000) as s:
    coll.insert_one({"_id": "b1", "title": "吾輩は猫である", "tags": ["小説"], "meta": {"pages": 10, "old": 1}})
    e = s.next()
    assert e["operationType"] == "insert", e
    assert e["ns"] == {"db": "shop", "coll": "books"} and e["documentKey"] == {"_id": "b1"}, e
    assert e["fullDocument"] == {"_id": "b1", "title": "吾輩は猫である", "tags": ["小説"], "meta": {"pages": 10, "old": 1}}, e
    assert set(e["_id"].keys()) == {"_data"} and isinstance(e["clusterTime"], Timestamp), e
    coll.update_one({"_id": "b1"}, {"$set": {"meta.pages": 11, "tags": ["小説", "名作"]}, "$unset": {"meta.old": ""}})
    e = s.next()
    assert e["operationType"] == "update", e
    assert e["updateDescription"]["updatedFields"] == {"meta.pages": 11, "tags.1": "名作"}, e
    assert e["updateDescription"]["removedFields"] == ["meta.old"], e
    assert e["updateDescription"]["truncatedArrays"] == [], e
    assert e["fullDocument"]["tags"] == ["小説", "名作"], e
    coll.replace_one({"_id": "b1"}, {"name": "別物"})
    e = s.next()
    assert e["operationType"] == "replace" and e["fullDocument"] == {"_id": "b1", "name": "別物"}, e
    # A replacement that keeps a field's value is still a replacement.
    coll.replace_one({"_id": "b1"}, {"name": "別物", "n": 2})
    e = s.next()
    assert e["operationType"] == "replace" and e["fullDocument"] == {"_id": "b1", "name": "別物", "n": 2}, e
    coll.delete_one({"_id": "b1"})
    e = s.next()
    assert e["operationType"] == "delete" and e["documentKey"] == {"_id": "b1"} and "fullDocument" not in e, e
    out["resume"] = s.resume_token
print(json.dumps(out, default=str))
"#;
    let Some(_) = python(&server, script) else { return };
    // A write over HTTP shows up in the stream and in `find`.
    let script = r#"
import faulthandler; faulthandler.dump_traceback_later(60, exit=True)
import threading, urllib.request, base64
c = client()
coll = c.shop.books
def put():
    req = urllib.request.Request(os.environ["BUNKO_URL"] + "/shop$books/http1", data=json.dumps({"title": "こころ"}).encode(), method="PUT")
    req.add_header("Content-Type", "application/json")
    req.add_header("Authorization", "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode())
    urllib.request.urlopen(req).read()
with coll.watch(max_await_time_ms=5000) as s:
    threading.Timer(0.3, put).start()
    e = s.next()
assert e["operationType"] == "insert" and e["fullDocument"] == {"_id": "http1", "title": "こころ"}, e
assert coll.find_one({"_id": "http1"}) == {"_id": "http1", "title": "こころ"}
print(json.dumps({"ok": True}))
"#;
    assert_eq!(python(&server, script), Some(json!({"ok": true})));
}

#[test]
fn pre_images_drop_invalidate_and_wider_scopes() {
    let server = Server::start();
    let script = r#"
import faulthandler; faulthandler.dump_traceback_later(60, exit=True)
c = client()
db = c.shop
db.create_collection("orders", changeStreamPreAndPostImages={"enabled": True})
info = [x for x in db.list_collections() if x["name"] == "orders"][0]
assert info["options"] == {"changeStreamPreAndPostImages": {"enabled": True}}, info
orders = db.orders
orders.insert_one({"_id": 1, "qty": 1})
with orders.watch(full_document_before_change="required", full_document="whenAvailable") as s:
    orders.update_one({"_id": 1}, {"$inc": {"qty": 1}})
    e = s.next()
    assert e["fullDocumentBeforeChange"] == {"_id": 1, "qty": 1}, e
    assert e["fullDocument"] == {"_id": 1, "qty": 2}, e
    orders.delete_one({"_id": 1})
    e = s.next()
    assert e["operationType"] == "delete" and e["fullDocumentBeforeChange"] == {"_id": 1, "qty": 2}, e
# Without pre-images, "whenAvailable" gives null and "required" fails.
db.plain.insert_one({"_id": "p", "v": 1})
with db.plain.watch(full_document_before_change="whenAvailable") as s:
    db.plain.update_one({"_id": "p"}, {"$set": {"v": 2}})
    e = s.next()
    assert e["fullDocumentBeforeChange"] is None, e
with db.plain.watch(full_document_before_change="required") as s:
    db.plain.update_one({"_id": "p"}, {"$set": {"v": 3}})
    try:
        s.next()
        raise AssertionError("required pre-image did not fail")
    except OperationFailure as err:
        assert err.code == 47, err
# A database stream sees every collection; $match and $project apply to events.
with db.watch([{"$match": {"operationType": "insert"}}, {"$project": {"documentKey": 1, "ns": 1}}]) as s:
    db.a.insert_one({"_id": "a1"})
    db.a.delete_one({"_id": "a1"})
    db.b.insert_one({"_id": "b1"})
    got = [s.next(), s.next()]
    assert [(e["ns"]["coll"], e["documentKey"]["_id"]) for e in got] == [("a", "a1"), ("b", "b1")], got
    assert all(set(e.keys()) == {"_id", "ns", "documentKey"} for e in got), got
# The deployment stream, from the admin database.
with c.watch() as s:
    c.other.things.insert_one({"_id": "t"})
    e = s.next()
    assert e["ns"] == {"db": "other", "coll": "things"} and e["operationType"] == "insert", e
# Dropping the collection ends its stream: drop, then invalidate.
with orders.watch() as s:
    orders.drop()
    e = s.next()
    assert e["operationType"] == "drop" and e["ns"] == {"db": "shop", "coll": "orders"}, e
    e = s.next()
    assert e["operationType"] == "invalidate", e
    assert not s.alive
# Bad stages and options are refused, with MongoDB's codes.
assert code_of(lambda: orders.watch([{"$group": {"_id": 1}}]).next()) == 20
assert code_of(lambda: orders.watch([{"$unsupported": "foo"}]).next()) == 40324
assert code_of(lambda: db.plain.watch(resume_after={"_data": "zz"})) == 2
print(json.dumps({"ok": True}))
"#;
    let Some(got) = python(&server, script) else { return };
    assert_eq!(got, json!({"ok": true}));
}

#[test]
fn a_resume_token_survives_a_restart_of_the_server() {
    let mut server = Server::start();
    let script = r#"
import faulthandler; faulthandler.dump_traceback_later(60, exit=True)
c = client()
coll = c.shop.log
coll.insert_one({"_id": "before"})
with coll.watch() as s:
    coll.insert_one({"_id": "seen"})
    e = s.next()
    assert e["documentKey"] == {"_id": "seen"}, e
    token = e["_id"]
    at = e["clusterTime"]
coll.insert_one({"_id": "missed1"})
coll.update_one({"_id": "before"}, {"$set": {"n": 1}})
print(json.dumps({"token": token, "at": [at.time, at.inc]}))
"#;
    let Some(got) = python(&server, script) else { return };
    let (token, at) = (&got["token"], &got["at"]);
    assert!(server.terminate());
    server.restart();
    let script = format!(
        r#"
import faulthandler; faulthandler.dump_traceback_later(60, exit=True)
c = client()
coll = c.shop.log
coll.insert_one({{"_id": "after"}})
with coll.watch(resume_after={token}) as s:
    got = [(e["operationType"], e["documentKey"]["_id"]) for e in (s.next(), s.next(), s.next())]
assert got == [("insert", "missed1"), ("update", "before"), ("insert", "after")], got
with coll.watch(start_after={token}) as s:
    assert s.next()["documentKey"] == {{"_id": "missed1"}}
# From a time: every write from that second on (the stream's own events included).
with coll.watch(start_at_operation_time=Timestamp(*{at})) as s:
    ids = []
    while not ids or ids[-1] != "after":
        ids.append(s.next()["documentKey"]["_id"])
assert ids[-4:] == ["seen", "missed1", "before", "after"], ids
print(json.dumps({{"ok": True}}))
"#
    );
    assert_eq!(python(&server, &script), Some(json!({"ok": true})));
}

/// `renameCollection` gives MongoDB's `rename` event (`ns` the old name, `to` the new): on
/// the source collection's stream, then `invalidate`; on a database stream and the
/// deployment stream, which go on and report later writes under the new name.
#[test]
fn rename_events_and_the_source_stream_invalidates() {
    let server = Server::start();
    let script = r#"
import faulthandler; faulthandler.dump_traceback_later(60, exit=True)
c = client()
db = c.shop
db.drafts.insert_one({"_id": "d1"})
db.temp.insert_one({"_id": "t1"})
out = {}
def strip(e):
    return {k: e[k] for k in ("operationType", "ns", "to") if k in e}
with db.drafts.watch() as coll_stream, db.watch() as db_stream, c.watch() as all_stream:
    # One step at a time: events of different collections are not merged by time.
    out["db"], out["all"] = [], []
    for step in [lambda: c.admin.command("renameCollection", "shop.drafts", to="shop.published"),
                 lambda: db.published.insert_one({"_id": "d2"}),
                 lambda: c.admin.command("renameCollection", "shop.temp", to="archive.temp")]:
        step()
        out["db"].append(strip(db_stream.next()))
        out["all"].append(strip(all_stream.next()))
    out["coll"] = [strip(coll_stream.next()), strip(coll_stream.next())]
    out["coll_alive"] = coll_stream.alive
    out["db_alive"] = db_stream.alive
print(json.dumps(out))
"#;
    let Some(out) = python(&server, script) else { return };
    let rename = json!({"operationType": "rename", "ns": {"db": "shop", "coll": "drafts"}, "to": {"db": "shop", "coll": "published"}});
    let moved = json!({"operationType": "rename", "ns": {"db": "shop", "coll": "temp"}, "to": {"db": "archive", "coll": "temp"}});
    let insert = json!({"operationType": "insert", "ns": {"db": "shop", "coll": "published"}});
    assert_eq!(out["coll"], json!([rename, {"operationType": "invalidate"}]));
    assert_eq!(out["coll_alive"], false);
    assert_eq!(out["db"], json!([rename, insert, moved]));
    assert_eq!(out["db_alive"], true);
    assert_eq!(out["all"], json!([rename, insert, moved]));
}

/// Issue 16: a `_purge` over HTTP that removes a whole document is journaled, so a change
/// stream shows it as a `delete` (CouchDB's purge has no MongoDB counterpart).
#[test]
fn a_purged_document_shows_as_a_delete_event() {
    let server = Server::start();
    let script = r#"
import faulthandler; faulthandler.dump_traceback_later(60, exit=True)
import threading, urllib.request, base64
c = client()
coll = c.shop.books
coll.insert_one({"_id": "p1", "title": "坊っちゃん"})
def call(method, path, body=None):
    req = urllib.request.Request(os.environ["BUNKO_URL"] + path, method=method,
                                 data=None if body is None else json.dumps(body).encode())
    req.add_header("Content-Type", "application/json")
    req.add_header("Authorization", "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode())
    return json.loads(urllib.request.urlopen(req).read())
rev = call("GET", "/shop$books/p1")["_rev"]
with coll.watch(max_await_time_ms=5000) as s:
    threading.Timer(0.3, lambda: call("POST", "/shop$books/_purge", {"p1": [rev]})).start()
    e = s.next()
assert e["operationType"] == "delete" and e["documentKey"] == {"_id": "p1"}, e
assert "fullDocument" not in e, e
assert coll.find_one({"_id": "p1"}) is None
print(json.dumps({"ok": True}))
"#;
    let Some(out) = python(&server, script) else { return };
    assert_eq!(out, json!({"ok": true}));
}

/// `showExpandedEvents: true` (MongoDB 6+): `create`, `createIndexes`, `dropIndexes`,
/// `modify` and `rename` with `operationDescription` and `collectionUUID`, in order with the
/// document events, also after a resume; `disambiguatedPaths`; stages with expressions after
/// `$changeStream`, and the fatal error of one that removes the resume token.
#[test]
fn expanded_events_expression_stages_and_disambiguated_paths() {
    let server = Server::start();
    let script = r#"
import faulthandler; faulthandler.dump_traceback_later(60, exit=True)
c = client()
db = c.library
def strip(e):
    return {k: e[k] for k in ("operationType", "ns", "operationDescription", "to") if k in e}
def take(s, n):
    return [s.next() for _ in range(n)]
with db.watch(show_expanded_events=True) as s:
    db.create_collection("books", validator={"title": {"$type": "string"}})
    books = db.books
    books.insert_one({"_id": 1, "title": "吾輩は猫である", "a": {"1": 1}, "b": [{"1": 1}]})
    books.create_index([("title", 1)], name="title_1")
    books.update_one({"_id": 1}, {"$set": {"a.1": 2, "b.0.1": 2}})
    db.command("collMod", "books", validationLevel="moderate")
    books.drop_index("title_1")
    got = take(s, 6)
    db.temp.insert_one({"_id": "t"})
    got += take(s, 2)
    c.admin.command("renameCollection", "library.books", to="library.temp", dropTarget=True)
    got += take(s, 2)
out = {"events": [strip(e) for e in got]}
out["uuids"] = len({e["collectionUUID"] for e in got[:6]})
out["update"] = got[3]["updateDescription"]
out["rename_target"] = "dropTarget" in got[-1]["operationDescription"]
# Resumed after the `create`, once the collection has its new name: the writes made before
# the rename keep the old name, and the rename follows them.
with db.watch(show_expanded_events=True, resume_after=got[0]["_id"]) as s:
    again = take(s, 6)
out["again"] = [[e["operationType"], e["ns"]["coll"]] for e in again]
# Without showExpandedEvents: no DDL events, no collectionUUID, no disambiguatedPaths.
with db.plain.watch() as s:
    db.plain.insert_one({"_id": 1, "a": {"1": 1}})
    db.plain.create_index([("a", 1)])
    db.plain.update_one({"_id": 1}, {"$set": {"a.1": 2}})
    e1, e2 = s.next(), s.next()
out["plain"] = [e1["operationType"], e2["operationType"], "collectionUUID" in e1, e2["updateDescription"]]
# Expressions in $project, $addFields and $replaceWith after $changeStream.
pipeline = [{"$project": {"optype": "$operationType", "ns": 1, "newField": "value"}},
            {"$addFields": {"title": {"$toUpper": "$ns.coll"}}}]
with db.plain.watch(pipeline) as s:
    db.plain.insert_one({"_id": 2})
    e = s.next()
out["projected"] = {k: v for k, v in e.items() if k != "_id"}
with db.plain.watch([{"$replaceWith": {"_id": "$_id", "kind": "$operationType"}}]) as s:
    db.plain.delete_one({"_id": 2})
    e = s.next()
out["replaced"] = e["kind"]
# Removing the resume token is fatal and not resumable (280).
with db.plain.watch([{"$project": {"_id": 0}}]) as s:
    db.plain.insert_one({"_id": 3})
    try:
        s.next()
        out["fatal"] = None
    except OperationFailure as err:
        out["fatal"] = [err.code, err.has_error_label("NonResumableChangeStreamError")]
print(json.dumps(out, default=str))
"#;
    let Some(out) = python(&server, script) else { return };
    let ns = json!({"db": "library", "coll": "books"});
    let title = json!({"v": 2, "key": {"title": 1}, "name": "title_1"});
    let id_index = json!({"v": 2, "key": {"_id": 1}, "name": "_id_"});
    let events = out["events"].as_array().cloned().unwrap_or_default();
    let ops: Vec<_> = events.iter().map(|e| e["operationType"].clone()).collect();
    assert_eq!(
        ops,
        json!([
            "create",
            "insert",
            "createIndexes",
            "update",
            "modify",
            "dropIndexes",
            "create",
            "insert",
            "drop",
            "rename"
        ])
        .as_array()
        .cloned()
        .unwrap_or_default(),
        "{out}"
    );
    assert_eq!(
        events[0],
        json!({"operationType": "create", "ns": ns, "operationDescription": {"validator": {"title": {"$type": "string"}}, "idIndex": id_index}})
    );
    assert_eq!(events[2]["operationDescription"], json!({"indexes": [title]}));
    assert_eq!(events[4]["operationDescription"], json!({"validationLevel": "moderate"}));
    assert_eq!(events[5]["operationDescription"], json!({"indexes": [title]}));
    assert_eq!(events[8]["ns"], json!({"db": "library", "coll": "temp"}));
    assert_eq!(events[9]["to"], json!({"db": "library", "coll": "temp"}));
    assert_eq!(out["rename_target"], true, "{out}");
    assert_eq!(out["uuids"], 1, "one collection, one collectionUUID: {out}");
    assert_eq!(
        out["update"],
        json!({"updatedFields": {"a.1": 2, "b.0.1": 2}, "removedFields": [], "truncatedArrays": [],
               "disambiguatedPaths": {"a.1": ["a", "1"], "b.0.1": ["b", 0, "1"]}})
    );
    assert_eq!(
        out["again"],
        json!([
            ["insert", "books"],
            ["createIndexes", "books"],
            ["update", "books"],
            ["modify", "books"],
            ["dropIndexes", "books"],
            ["rename", "books"]
        ])
    );
    assert_eq!(
        out["plain"],
        json!(["insert", "update", false, {"updatedFields": {"a.1": 2}, "removedFields": [], "truncatedArrays": []}])
    );
    assert_eq!(
        out["projected"],
        json!({"optype": "insert", "ns": {"db": "library", "coll": "plain"}, "newField": "value", "title": "PLAIN"})
    );
    assert_eq!(out["replaced"], "delete");
    assert_eq!(out["fatal"], json!([280, true]));
}

/// Issue 13: what a stream reports must not depend on the server having run since the
/// writes: a rename (old name, position, `dropTarget`) and a replacement that keeps a field
/// are stored with the writes, so streams resumed after a restart still report them; and
/// the cluster time never goes back across the restart.
#[test]
fn renames_and_replacements_are_reported_after_a_restart_and_the_cluster_time_goes_on() {
    let mut server = Server::start();
    let script = r#"
import faulthandler; faulthandler.dump_traceback_later(60, exit=True)
c = client()
db = c.shop
db.drafts.insert_one({"_id": "d1", "title": "坊っちゃん", "n": 1})
db.published.insert_one({"_id": "old"})
with db.drafts.watch() as coll_stream, db.watch() as db_stream:
    db.drafts.insert_one({"_id": "d0"})
    coll_stream.next(); db_stream.next()
    out = {"coll": coll_stream.resume_token, "db": db_stream.resume_token}
db.drafts.replace_one({"_id": "d1"}, {"title": "坊っちゃん", "n": 2})
db.drafts.insert_one({"_id": "d2"})
c.admin.command("renameCollection", "shop.drafts", to="shop.published", dropTarget=True)
last = db.published.insert_one({"_id": "d3"})
out["time"] = [c.admin.command("ping")["operationTime"].time, c.admin.command("ping")["operationTime"].inc]
print(json.dumps(out, default=str))
"#;
    let Some(got) = python(&server, script) else { return };
    assert!(server.terminate());
    server.restart();
    let script = format!(
        r#"
import faulthandler; faulthandler.dump_traceback_later(60, exit=True)
c = client()
db = c.shop
def strip(e):
    out = {{k: e[k] for k in ("operationType", "ns", "to") if k in e}}
    if "documentKey" in e: out["id"] = e["documentKey"]["_id"]
    if "operationDescription" in e: out["dropTarget"] = "dropTarget" in e["operationDescription"]
    return out
out = {{}}
with db.watch(resume_after={db}, show_expanded_events=True) as s:
    out["db"] = [strip(s.next()) for _ in range(4)]
with c.shop.drafts.watch(resume_after={coll}) as s:
    out["coll"] = [strip(s.next()) for _ in range(4)]
    out["coll_alive"] = s.alive
t = c.admin.command("ping")["operationTime"]
out["time"] = [t.time, t.inc]
print(json.dumps(out))
"#,
        db = got["db"],
        coll = got["coll"],
    );
    let Some(out) = python(&server, &script) else { return };
    let drafts = json!({"db": "shop", "coll": "drafts"});
    let published = json!({"db": "shop", "coll": "published"});
    let replace = json!({"operationType": "replace", "ns": drafts, "id": "d1"});
    let insert = json!({"operationType": "insert", "ns": drafts, "id": "d2"});
    let rename = json!({"operationType": "rename", "ns": drafts, "to": published});
    let mut expanded = rename.clone();
    expanded["dropTarget"] = json!(true);
    let after = json!({"operationType": "insert", "ns": published, "id": "d3"});
    assert_eq!(out["db"], json!([replace, insert, expanded, after]), "{out}");
    assert_eq!(out["coll"], json!([replace, insert, rename, {"operationType": "invalidate"}]));
    assert_eq!(out["coll_alive"], false);
    let time = |v: &serde_json::Value| (v[0].as_u64(), v[1].as_u64());
    assert!(time(&out["time"]) > time(&got["time"]), "{out} {got}");
}
