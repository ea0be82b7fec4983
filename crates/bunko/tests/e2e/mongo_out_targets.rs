//! Targets `$merge` and `$out` refuse as MongoDB does (issue 13): a view (also the view the
//! pipeline reads, and one in another database) with `CommandNotSupportedOnView` (166) in
//! every `$merge` mode, a `system.*` collection (31319 / 17385) and an internal database
//! (31320 / 31321), each with MongoDB's message. Nothing is written first: the view stays a
//! view over the same documents and no collection appears. The bug this guards against:
//! `$merge` into a view wrote the documents into the view's storage.

use serde_json::json;

use crate::harness::Server;
use crate::mongo::python;

/// Every refusal with its code, name and message; then everything is as it was.
#[test]
fn merge_and_out_refuse_views_system_collections_and_internal_databases() {
    let server = Server::start();
    let script = r#"
c = client()
db = c.shop
db.src.insert_many([{"_id": 1, "a": 7}, {"_id": 2, "a": 8}])
db.t.insert_one({"_id": 1, "a": 0})
db.create_collection("v", viewOn="src", pipeline=[{"$match": {"a": 7}}])
db.create_collection("on_t", viewOn="t", pipeline=[])
c.other.create_collection("view", viewOn="coll", pipeline=[])

def failure(coll, pipeline):
    try:
        list(coll.aggregate(pipeline))
        return "accepted"
    except OperationFailure as e:
        return [e.code, e.details.get("codeName"), e.details.get("errmsg")]

def state():
    names = {n: sorted(c[n].list_collection_names()) for n in ("shop", "other", "admin", "config")}
    types = {i["name"]: i["type"] for i in db.list_collections()}
    return {"names": names, "types": types,
            "v": list(db.v.find(sort=[("_id", 1)])), "on_t": list(db.on_t.find()),
            "src": list(db.src.find(sort=[("_id", 1)])), "t": list(db.t.find())}

before = state()
modes = [(m, n) for m in ["replace", "keepExisting", "merge", "fail", [{"$set": {"x": 1}}]]
         for n in ["insert", "discard", "fail"]
         if not (m in ("keepExisting", "fail") and n != "insert")]
out = {"modes": [], "before": before}
for m, n in modes:
    spec = {"into": "v", "whenMatched": m, "whenNotMatched": n}
    out["modes"].append(failure(db.src, [{"$merge": spec}]))
out["view_on_target"] = failure(db.src, [{"$merge": "on_t"}])
out["merge_self"] = failure(db.v, [{"$merge": "v"}])
out["out_self"] = failure(db.v, [{"$out": "v"}])
out["other_db"] = failure(db.src, [{"$merge": {"into": {"db": "other", "coll": "view"}}}])
out["merge_system"] = failure(db.src, [{"$merge": "system.foo"}])
out["out_system"] = failure(db.src, [{"$out": "system.foo"}])
out["merge_system_js"] = failure(db.src, [{"$merge": {"into": {"db": "other", "coll": "system.js"}}}])
out["merge_admin"] = failure(db.src, [{"$merge": {"into": {"db": "admin", "coll": "x"}}}])
out["out_config"] = failure(db.src, [{"$out": {"db": "config", "coll": "x"}}])
out["after"] = state()
print(json.dumps(out, default=str))
"#;
    let Some(out) = python(&server, script) else { return };
    let view = |ns: &str| {
        json!([
            166,
            "CommandNotSupportedOnView",
            format!("Namespace {ns} is a view, not a collection")
        ])
    };
    let modes = out["modes"].as_array().expect("modes");
    assert_eq!(modes.len(), 11);
    for refused in modes {
        assert_eq!(refused, &view("shop.v"));
    }
    assert_eq!(out["view_on_target"], view("shop.on_t"));
    assert_eq!(out["merge_self"], view("shop.v"));
    assert_eq!(out["out_self"], view("shop.v"));
    assert_eq!(out["other_db"], view("other.view"));
    assert_eq!(
        out["merge_system"],
        json!([31319, "Location31319", "Cannot $merge to special collection: system.foo"])
    );
    assert_eq!(
        out["out_system"],
        json!([17385, "Location17385", "Can't $out to special collection: system.foo"])
    );
    assert_eq!(
        out["merge_system_js"],
        json!([31319, "Location31319", "Cannot $merge to special collection: system.js"])
    );
    assert_eq!(
        out["merge_admin"],
        json!([31320, "Location31320", "Cannot $merge to internal database: admin"])
    );
    assert_eq!(
        out["out_config"],
        json!([31321, "Location31321", "Can't $out to internal database: config"])
    );
    assert_eq!(out["after"], out["before"]);
    assert_eq!(out["before"]["v"], json!([{"_id": 1, "a": 7}]));
    assert_eq!(out["before"]["types"]["v"], "view");
    assert_eq!(out["before"]["names"]["shop"], json!(["on_t", "src", "t", "v"]));
}

/// `whenMatched: keepExisting | fail` go only with `whenNotMatched: insert`: the other four
/// combinations get MongoDB's 51181 (its `all_modes.js`), before the target is looked at
/// (a view target too), and the target keeps its documents.
#[test]
fn merge_refuses_unsupported_mode_combinations() {
    let server = Server::start();
    let script = r#"
c = client()
db = c.shop
db.src.insert_many([{"_id": 1, "a": 1}, {"_id": 2, "a": 2}])
db.t.insert_one({"_id": 1, "a": 10})
db.create_collection("v", viewOn="src", pipeline=[])
out = {}
for m in ("keepExisting", "fail"):
    for n in ("fail", "discard"):
        for target in ("t", "v"):
            try:
                list(db.src.aggregate([{"$merge": {"into": target, "whenMatched": m, "whenNotMatched": n}}]))
                out[f"{m} {n} {target}"] = "accepted"
            except OperationFailure as e:
                out[f"{m} {n} {target}"] = [e.code, e.details.get("codeName"), e.details.get("errmsg")]
list(db.src.aggregate([{"$merge": {"into": "t", "whenMatched": "keepExisting", "whenNotMatched": "insert"}}]))
out["t"] = list(db.t.find(sort=[("_id", 1)]))
print(json.dumps(out, default=str))
"#;
    let Some(out) = python(&server, script) else { return };
    for m in ["keepExisting", "fail"] {
        for n in ["fail", "discard"] {
            let message = format!(
                "Combination of $merge modes 'whenMatched: {m}' and 'whenNotMatched: {n}' is not supported"
            );
            for target in ["t", "v"] {
                assert_eq!(
                    out[format!("{m} {n} {target}")],
                    json!([51181, "Location51181", message])
                );
            }
        }
    }
    // Only the supported keepExisting/insert run wrote: _id 2 added, _id 1 kept as it was.
    assert_eq!(out["t"], json!([{"_id": 1, "a": 10}, {"_id": 2, "a": 2}]));
}
