//! `$out` as MongoDB runs it (issue 13): into a collection that exists, the documents are
//! replaced while the collection's indexes, options (its validator), `_security` and
//! design documents stay; a `unique` index and the validator judge the new documents, and
//! an `$out` that fails (a duplicate key, a document the validator refuses, two documents
//! with one `_id`, a view as target) leaves the target exactly as it was. Into a new
//! collection it creates the collection with its documents, or nothing at all. The bug
//! this guards against: `$out` deleted and re-created an existing target, losing its
//! indexes and options, and a failing `$out` left it empty.

use serde_json::json;

use crate::harness::{Server, enc};
use crate::mongo::python;

/// What the scripts below print about the collection `t`: its documents, its indexes and
/// its options.
const STATE: &str = r#"
def state(db, name="t"):
    coll = db[name]
    info = db.command("listCollections", filter={"name": name})["cursor"]["firstBatch"]
    return {
        "docs": list(coll.find(sort=[("_id", 1)])),
        "indexes": sorted([i["name"], i["key"], i.get("unique", False), i.get("sparse", False)]
                          for i in coll.list_indexes()),
        "options": info[0]["options"] if info else None,
    }

def failure(fn):
    try:
        fn()
        return "accepted"
    except OperationFailure as e:
        return {k: e.details.get(k) for k in ("code", "codeName", "errmsg", "keyPattern", "keyValue")}
"#;

/// The target keeps its unique and sparse indexes, its validator and what HTTP put there;
/// the new documents may take keys the old ones held (also swapping them between two
/// documents that stay); the indexes answer for the new documents afterwards.
#[test]
fn out_into_an_existing_collection_keeps_its_indexes_and_options() {
    let server = Server::start();
    let setup = format!(
        "{STATE}{}",
        r#"
db = client().shop
db.create_collection("t", validator={"a": {"$gt": 0}})
db.t.create_index("a", unique=True)
db.t.create_index("b", sparse=True, name="b_sparse")
db.t.insert_many([{"_id": 1, "a": 2, "b": "old"}, {"_id": 9, "a": 9}])
print(json.dumps(state(db), default=str))
"#
    );
    let Some(before) = python(&server, &setup) else { return };
    // Over HTTP: a member list and a design document, which `$out` must leave alone.
    let security = json!({"members": {"roles": ["readers"]}, "admins": {"roles": ["shop_admins"]}});
    assert_eq!(server.put(&format!("/{}/_security", enc("shop$t")), &security).0, 200);
    let (_, stored) = server.get(&format!("/{}/_security", enc("shop$t")));
    let ddoc = json!({"views": {"by_a": {"map": "function (d) { emit(d.a, null); }"}}});
    assert_eq!(server.put(&format!("/{}/_design/http", enc("shop$t")), &ddoc).0, 201);
    let script = format!(
        "{STATE}{}",
        r#"
db = client().shop
db.src.insert_many([{"_id": 1, "a": 1, "b": "x"}, {"_id": 2, "a": 2}, {"_id": 3, "a": 3, "b": "y"}])
out = {}
out["result"] = list(db.src.aggregate([{"$out": "t"}]))
out["after"] = state(db)
# The same collection as source and target, swapping two documents' unique keys.
db.t.aggregate([{"$set": {"a": {"$cond": [{"$eq": ["$a", 3]}, 3, {"$subtract": [3, "$a"]}]}}}, {"$out": "t"}])
out["swapped"] = [[d["_id"], d["a"]] for d in db.t.find(sort=[("_id", 1)])]
out["dup"] = failure(lambda: db.t.insert_one({"_id": 4, "a": 3}))
out["invalid"] = failure(lambda: db.t.insert_one({"_id": 5, "a": -1}))
out["plan"] = db.t.find({"a": 2}).explain()["queryPlanner"]["winningPlan"]["inputStage"]["indexName"]
out["sparse"] = [d["_id"] for d in db.t.find({"b": {"$exists": True}}).hint("b_sparse")]
print(json.dumps(out, default=str))
"#
    );
    let Some(out) = python(&server, &script) else { return };
    assert_eq!(out["result"], json!([]));
    assert_eq!(
        out["after"]["docs"],
        json!([{"_id": 1, "a": 1, "b": "x"}, {"_id": 2, "a": 2}, {"_id": 3, "a": 3, "b": "y"}])
    );
    assert_eq!(out["after"]["indexes"], before["indexes"], "the indexes survive $out");
    assert_eq!(
        out["after"]["indexes"],
        json!([
            ["_id_", {"_id": 1}, false, false],
            ["a_1", {"a": 1}, true, false],
            ["b_sparse", {"b": 1}, false, true]
        ])
    );
    assert_eq!(out["after"]["options"], json!({"validator": {"a": {"$gt": 0}}}));
    assert_eq!(out["after"]["options"], before["options"]);
    assert_eq!(out["swapped"], json!([[1, 2], [2, 1], [3, 3]]));
    assert_eq!(out["dup"]["code"], 11000, "{}", out["dup"]);
    assert_eq!(out["dup"]["keyValue"], json!({"a": 3}));
    assert_eq!(out["invalid"]["code"], 121, "{}", out["invalid"]);
    assert_eq!(out["plan"], "a_1");
    assert_eq!(out["sparse"], json!([1, 3]));
    assert_eq!(server.get(&format!("/{}/_security", enc("shop$t"))).1, stored);
    let (status, view) = server.get(&format!("/{}/_design/http/_view/by_a", enc("shop$t")));
    assert_eq!(status, 200, "{view}");
    let keys: Vec<_> = view["rows"].as_array().into_iter().flatten().map(|r| &r["key"]).collect();
    assert_eq!(keys, [&json!(1), &json!(2), &json!(3)]);
}

/// A unique index violated by the new documents (MongoDB's 11000 with `keyPattern` and
/// `keyValue`), a document the target's validator refuses (121), two documents with one
/// `_id` (11000 on `_id_`) and a view as target (166): each fails whole and the target
/// keeps its documents, indexes and options.
#[test]
fn a_failed_out_leaves_the_target_as_it_was() {
    let server = Server::start();
    let script = format!(
        "{STATE}{}",
        r#"
db = client().shop
db.create_collection("t", validator={"a": {"$lt": 100}})
db.t.create_index("a", unique=True)
db.t.insert_many([{"_id": "old1", "a": 1}, {"_id": "old2", "a": 5}])
db.src.insert_many([{"_id": 1, "a": 7}, {"_id": 2, "a": 7}, {"_id": 3, "a": 100}])
db.create_collection("v", viewOn="src", pipeline=[{"$match": {"a": 7}}])
before = state(db)
out = {}
out["unique"] = failure(lambda: list(db.src.aggregate([{"$match": {"a": 7}}, {"$out": "t"}])))
out["after_unique"] = state(db) == before
out["invalid"] = failure(lambda: list(db.src.aggregate([{"$match": {"_id": {"$gt": 1}}}, {"$out": "t"}])))
out["after_invalid"] = state(db) == before
out["same_id"] = failure(lambda: list(db.src.aggregate([{"$set": {"_id": "same", "a": "$_id"}}, {"$out": "t"}])))
out["after_same_id"] = state(db) == before
out["view"] = failure(lambda: list(db.src.aggregate([{"$out": "v"}])))
out["view_kept"] = [[d["_id"], d["a"]] for d in db.v.find(sort=[("_id", 1)])]
out["view_type"] = db.command("listCollections", filter={"name": "v"})["cursor"]["firstBatch"][0]["type"]
out["state"] = state(db)
print(json.dumps(out, default=str))
"#
    );
    let Some(out) = python(&server, &script) else { return };
    assert_eq!(
        out["unique"],
        json!({
            "code": 11000,
            "codeName": "DuplicateKey",
            "errmsg": "E11000 duplicate key error collection: shop.t index: a_1 dup key: { a: 7 }",
            "keyPattern": {"a": 1},
            "keyValue": {"a": 7}
        })
    );
    assert_eq!(out["invalid"]["code"], 121, "{}", out["invalid"]);
    assert_eq!(out["invalid"]["codeName"], "DocumentValidationFailure");
    assert_eq!(
        out["same_id"],
        json!({
            "code": 11000,
            "codeName": "DuplicateKey",
            "errmsg": "E11000 duplicate key error collection: shop.t index: _id_ dup key: { _id: \"same\" }",
            "keyPattern": {"_id": 1},
            "keyValue": {"_id": "same"}
        })
    );
    for kept in ["after_unique", "after_invalid", "after_same_id"] {
        assert_eq!(out[kept], true, "{kept}: {out}");
    }
    assert_eq!(out["view"]["code"], 166, "{}", out["view"]);
    assert_eq!(out["view"]["codeName"], "CommandNotSupportedOnView");
    assert_eq!(out["view_kept"], json!([[1, 7], [2, 7]]));
    assert_eq!(out["view_type"], "view");
    assert_eq!(out["state"]["docs"], json!([{"_id": "old1", "a": 1}, {"_id": "old2", "a": 5}]));
    assert_eq!(
        out["state"]["indexes"],
        json!([["_id_", {"_id": 1}, false, false], ["a_1", {"a": 1}, true, false]])
    );
    assert_eq!(out["state"]["options"], json!({"validator": {"a": {"$lt": 100}}}));
}

/// Into a collection that does not exist (also in another database), `$out` creates it
/// with its documents and only the `_id` index; an `$out` that fails creates nothing.
#[test]
fn out_into_a_new_collection_creates_it_whole_or_not_at_all() {
    let server = Server::start();
    let script = format!(
        "{STATE}{}",
        r#"
c = client()
db = c.shop
db.src.insert_many([{"_id": 1, "a": 1}, {"_id": 2, "a": 2}])
out = {}
db.src.aggregate([{"$match": {"a": 2}}, {"$out": "fresh"}])
out["fresh"] = state(db, "fresh")
db.src.aggregate([{"$out": {"db": "elsewhere", "coll": "copy"}}])
out["elsewhere"] = [d["_id"] for d in c.elsewhere.copy.find(sort=[("_id", 1)])]
out["failed"] = failure(lambda: list(db.src.aggregate([{"$set": {"_id": 0}}, {"$out": "never"}])))
out["names"] = sorted(db.list_collection_names())
print(json.dumps(out, default=str))
"#
    );
    let Some(out) = python(&server, &script) else { return };
    assert_eq!(
        out["fresh"],
        json!({
            "docs": [{"_id": 2, "a": 2}],
            "indexes": [["_id_", {"_id": 1}, false, false]],
            "options": {}
        })
    );
    assert_eq!(out["elsewhere"], json!([1, 2]));
    assert_eq!(out["failed"]["code"], 11000, "{}", out["failed"]);
    assert_eq!(out["failed"]["keyValue"], json!({"_id": 0}));
    assert_eq!(out["names"], json!(["fresh", "src"]));
    assert_eq!(server.get(&format!("/{}", enc("shop$never"))).0, 404);
}
