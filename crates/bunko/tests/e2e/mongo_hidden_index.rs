//! Hidden indexes and `collMod`'s `index` option through pymongo (issue 13): `createIndexes`
//! with `hidden: true`, `collMod: c, index: {name | keyPattern, hidden}` (what mongosh's
//! `hideIndex`/`unhideIndex` send), `expireAfterSeconds`, and the unique conversions
//! (`prepareUnique`, then `unique` or `CannotConvertIndexToUnique`; `forceNonUnique`). A hidden index is kept on
//! every write and still enforces `unique`, but no plan uses it (filters, sorts,
//! `SORT_MERGE`, `count`, `distinct`: it is in neither `winningPlan` nor `rejectedPlans`)
//! and a `hint` naming it fails; the flag survives a restart; a hidden TTL index still
//! expires documents; the refusals carry MongoDB's codes.

use serde_json::json;

use crate::harness::Server;
use crate::mongo::python;

/// Helpers: whether an explained command names index `name` anywhere in its plans.
const PLANS: &str = r#"
def names(db, cmd, name):
    plan = db.command("explain", cmd, verbosity="queryPlanner")["queryPlanner"]
    return name in json.dumps([plan["winningPlan"], plan.get("rejectedPlans", [])], default=str)
def mod(db, index):
    """collMod's reply without the cluster time fields."""
    reply = db.command("collMod", "c", index=index)
    return {k: v for k, v in reply.items() if not k.startswith("$") and k != "operationTime"}
def find_uses(db, name, filter, sort=None):
    cmd = {"find": "c", "filter": filter}
    if sort:
        cmd["sort"] = sort
    return names(db, cmd, name)
def uses_all(db, name):
    return {
        "filter": find_uses(db, name, {"a": 3}),
        "sort": find_uses(db, name, {}, {"a": 1}),
        "merge": find_uses(db, name, {"a": {"$in": [1, 2]}}, {"c": 1}),
        "count": names(db, {"count": "c", "query": {"a": 3}}, name),
        "distinct": names(db, {"distinct": "c", "key": "a"}, name),
    }
"#;

#[test]
fn a_hidden_index_is_maintained_but_never_planned_and_stays_hidden_after_a_restart() {
    let mut server = Server::start();
    let script = format!(
        "{PLANS}{}",
        r#"
c = client()
db = c.app
db.c.insert_many([{"_id": i, "a": i % 5, "b": i, "c": -i} for i in range(50)])
db.c.create_index([("a", 1), ("c", 1)])
db.c.create_index("b", unique=True)
out = {"visible": uses_all(db, "a_1_c_1")}
out["merge_stage"] = "SORT_MERGE" in json.dumps(db.c.find({"a": {"$in": [1, 2]}}).sort("c", 1).explain(), default=str)
out["hide"] = mod(db, {"name": "a_1_c_1", "hidden": True})
out["again"] = mod(db, {"keyPattern": {"a": 1, "c": 1}, "hidden": True})
out["listed"] = [i.get("hidden") for i in db.c.list_indexes()]
out["hidden"] = uses_all(db, "a_1_c_1")
out["hint_name"] = code_of(lambda: list(db.c.find({"a": 3}).hint("a_1_c_1")))
out["hint_key"] = code_of(lambda: list(db.c.find({"a": 3}).hint([("a", 1), ("c", 1)])))
out["count_hint"] = code_of(lambda: db.c.count_documents({"a": 3}, hint="a_1_c_1"))
out["found"] = sorted(d["_id"] for d in db.c.find({"a": 3}))
# Written while hidden: the index holds the new documents once shown again.
db.c.insert_many([{"_id": 100 + i, "a": 3, "b": 100 + i, "c": 1} for i in range(3)])
db.c.delete_one({"_id": 3})
db.command("collMod", "c", index={"name": "b_1", "hidden": True})
out["dup_while_hidden"] = code_of(lambda: db.c.insert_one({"_id": 999, "b": 7}))
out["b_hidden"] = find_uses(db, "b_1", {"b": 7})
print(json.dumps(out))
"#
    );
    let Some(r) = python(&server, &script) else { return };
    let all = |v: bool| json!({"filter": v, "sort": v, "merge": v, "count": v, "distinct": v});
    assert_eq!(r["visible"], all(true), "every kind of plan uses the visible index");
    assert_eq!(r["merge_stage"], json!(true));
    assert_eq!(r["hide"], json!({"hidden_old": false, "hidden_new": true, "ok": 1.0}));
    assert_eq!(r["again"], json!({"ok": 1.0}), "hiding a hidden index names no change");
    assert_eq!(r["listed"], json!([null, true, null]));
    assert_eq!(r["hidden"], all(false), "no plan, winning or rejected, names a hidden index");
    assert_eq!(r["hint_name"], json!(2));
    assert_eq!(r["hint_key"], json!(2));
    assert_eq!(r["count_hint"], json!(2));
    assert_eq!(r["found"], json!([3, 8, 13, 18, 23, 28, 33, 38, 43, 48]));
    assert_eq!(r["dup_while_hidden"], json!(11000), "a hidden unique index still refuses");
    assert_eq!(r["b_hidden"], json!(false));

    server.kill9();
    server.restart();
    let script = format!(
        "{PLANS}{}",
        r#"
c = client()
db = c.app
out = {"listed": [i.get("hidden") for i in db.c.list_indexes()]}
out["hidden"] = uses_all(db, "a_1_c_1")
out["unhide"] = mod(db, {"name": "a_1_c_1", "hidden": False})
out["shown"] = uses_all(db, "a_1_c_1")
out["listed_after"] = [i.get("hidden") for i in db.c.list_indexes()]
out["hinted"] = sorted(d["_id"] for d in db.c.find({"a": 3}).hint("a_1_c_1"))
out["b_dup"] = code_of(lambda: db.c.insert_one({"_id": 998, "b": 9}))
print(json.dumps(out))
"#
    );
    let Some(r) = python(&server, &script) else { return };
    assert_eq!(r["listed"], json!([null, true, true]), "the flags are stored");
    assert_eq!(r["hidden"], all(false));
    assert_eq!(r["unhide"], json!({"hidden_old": true, "hidden_new": false, "ok": 1.0}));
    assert_eq!(r["shown"], all(true), "unhidden, every kind of plan uses it again");
    assert_eq!(r["listed_after"], json!([null, null, true]));
    assert_eq!(
        r["hinted"],
        json!([8, 13, 18, 23, 28, 33, 38, 43, 48, 100, 101, 102]),
        "the index kept the writes made while it was hidden"
    );
    assert_eq!(r["b_dup"], json!(11000));
}

#[test]
fn create_indexes_hidden_and_the_ttl_of_a_hidden_index() {
    let server = Server::start_with(&["--mongo-ttl-monitor-secs", "1"], &[]);
    let script = format!(
        "{PLANS}{}",
        r#"
import time
c = client()
db = c.app
now = datetime.datetime.now(datetime.timezone.utc)
db.c.insert_many([
    {"_id": "old", "a": 1, "at": now - datetime.timedelta(hours=2)},
    {"_id": "fresh", "a": 2, "at": now},
])
db.c.create_index("at", expireAfterSeconds=36000, hidden=True)
db.c.create_index("a", hidden=False)
out = {"listed": [{k: i.get(k) for k in ("name", "hidden", "expireAfterSeconds")} for i in db.c.list_indexes()]}
out["at_used"] = find_uses(db, "at_1", {"at": {"$lt": now}})
out["same_again"] = db.c.create_index("at", expireAfterSeconds=36000)
out["ttl"] = mod(db, {"name": "at_1", "expireAfterSeconds": 3600})
out["ttl_same"] = mod(db, {"keyPattern": {"at": 1}, "expireAfterSeconds": 3600, "hidden": True})
deadline = time.time() + 60
while time.time() < deadline and db.c.find_one({"_id": "old"}) is not None:
    time.sleep(0.2)
out["left"] = sorted(d["_id"] for d in db.c.find({}))
out["to_ttl"] = mod(db, {"name": "a_1", "expireAfterSeconds": 60, "hidden": True})
out["listed_after"] = [{k: i.get(k) for k in ("name", "hidden", "expireAfterSeconds")} for i in db.c.list_indexes()]
print(json.dumps(out))
"#
    );
    let Some(r) = python(&server, &script) else { return };
    assert_eq!(
        r["listed"],
        json!([
            {"name": "_id_", "hidden": null, "expireAfterSeconds": null},
            {"name": "a_1", "hidden": null, "expireAfterSeconds": null},
            {"name": "at_1", "hidden": true, "expireAfterSeconds": 36000},
        ]),
        "created hidden; `hidden: false` is not shown"
    );
    assert_eq!(r["at_used"], json!(false));
    assert_eq!(r["same_again"], json!("at_1"));
    assert_eq!(
        r["ttl"],
        json!({"expireAfterSeconds_old": 36000, "expireAfterSeconds_new": 3600, "ok": 1.0})
    );
    assert_eq!(r["ttl_same"], json!({"ok": 1.0}), "nothing changed, nothing named");
    assert_eq!(r["left"], json!(["fresh"]), "the hidden TTL index expired the old document");
    assert_eq!(
        r["to_ttl"],
        json!({"expireAfterSeconds_new": 60, "hidden_old": false, "hidden_new": true, "ok": 1.0}),
        "a single-field index becomes a TTL index"
    );
    assert_eq!(
        r["listed_after"],
        json!([
            {"name": "_id_", "hidden": null, "expireAfterSeconds": null},
            {"name": "a_1", "hidden": true, "expireAfterSeconds": 60},
            {"name": "at_1", "hidden": true, "expireAfterSeconds": 3600},
        ])
    );
}

#[test]
fn coll_mod_index_refusals_carry_mongodb_codes_and_messages() {
    let server = Server::start();
    let script = r#"
c = client()
db = c.app
db.c.insert_one({"_id": 1, "a": 1, "b": 1})
db.c.create_index([("a", 1), ("b", 1)])
db.c.create_index("b")
def refused(index):
    try:
        db.command("collMod", "c", index=index)
    except OperationFailure as e:
        return [e.code, e.details.get("errmsg")]
    return None
cases = {
    "unknown": {"name": "b_1", "hidden": True, "sparse": True},
    "both": {"name": "b_1", "keyPattern": {"b": 1}, "hidden": True},
    "neither": {"hidden": True},
    "nothing": {"name": "b_1"},
    "no_name": {"name": "nope", "hidden": True},
    "no_key": {"keyPattern": {"z": 1}, "hidden": True},
    "id_hide": {"name": "_id_", "hidden": True},
    "id_key_hide": {"keyPattern": {"_id": 1}, "hidden": True},
    "id_ttl": {"name": "_id_", "expireAfterSeconds": 10},
    "compound_ttl": {"name": "a_1_b_1", "expireAfterSeconds": 10},
    "negative_ttl": {"name": "b_1", "expireAfterSeconds": -1},
    "big_ttl": {"name": "b_1", "expireAfterSeconds": 2**31},
    "hidden_type": {"name": "b_1", "hidden": "yes"},
    "name_type": {"name": 5, "hidden": True},
}
out = {k: refused(v) for k, v in cases.items()}
db.create_collection("cap", capped=True, size=4096)
db.cap.create_index("t")
try:
    db.command("collMod", "cap", index={"name": "t_1", "expireAfterSeconds": 5})
    out["capped_ttl"] = None
except OperationFailure as e:
    out["capped_ttl"] = [e.code, e.details.get("errmsg")]
db.create_collection("cl", clusteredIndex={"key": {"_id": 1}, "unique": True})
try:
    db.command("collMod", "cl", index={"name": "_id_", "hidden": True})
    out["clustered"] = None
except OperationFailure as e:
    out["clustered"] = [e.code, e.details.get("errmsg")]
db.create_collection("ts", timeseries={"timeField": "at"})
out["timeseries"] = code_of(lambda: db.command("collMod", "ts", index={"name": "x", "hidden": True}))
out["not_index"] = code_of(lambda: db.command("collMod", "c", index=5))
out["create_id_hidden"] = code_of(lambda: db.c.create_index("_id", hidden=True))
out["create_hidden_type"] = code_of(lambda: db.c.create_index("z", hidden="yes"))
out["listed"] = [i.get("hidden") for i in db.c.list_indexes()]
print(json.dumps(out))
"#;
    let Some(r) = python(&server, script) else { return };
    let expect = [
        ("unknown", json!([40415, "BSON field 'collMod.index.sparse' is an unknown field."])),
        ("both", json!([72, "Cannot specify both key pattern and name."])),
        ("neither", json!([72, "Must specify either index name or key pattern."])),
        ("nothing", json!([72, "no expireAfterSeconds, hidden, unique, or prepareUnique field"])),
        ("no_name", json!([27, "cannot find index nope for ns app.c"])),
        ("no_key", json!([27, "cannot find index { z: 1 } for ns app.c"])),
        ("id_hide", json!([2, "can't hide _id index"])),
        ("id_key_hide", json!([2, "can't hide _id index"])),
        (
            "big_ttl",
            json!([
                72,
                "TTL index 'expireAfterSeconds' option must be within an acceptable range, try a lower number"
            ]),
        ),
        (
            "clustered",
            json!([6011800, "The 'hidden' option is not supported for a clusteredIndex"]),
        ),
        ("capped_ttl", json!([72, "TTL indexes are not supported for capped collections."])),
        ("id_ttl", json!([72, "the _id field does not support TTL indexes"])),
        (
            "compound_ttl",
            json!([
                72,
                "TTL indexes are single-field indexes, compound indexes do not support TTL"
            ]),
        ),
        (
            "negative_ttl",
            json!([72, "TTL index 'expireAfterSeconds' option cannot be less than 0"]),
        ),
    ];
    for (case, want) in expect {
        assert_eq!(r[case], want, "{case}");
    }
    assert_eq!(r["hidden_type"][0], json!(14));
    assert_eq!(r["name_type"][0], json!(14));
    assert_eq!(r["not_index"], json!(14));
    assert_eq!(r["timeseries"], json!(238), "not built on a time-series collection");
    assert_eq!(r["create_id_hidden"], json!(2));
    assert_eq!(r["create_hidden_type"], json!(14));
    assert_eq!(r["listed"], json!([null, null, null]), "nothing was hidden");
}

#[test]
fn prepare_unique_then_unique_converts_an_index_and_force_non_unique_turns_it_back() {
    let server = Server::start();
    let script = format!(
        "{PLANS}{}",
        r#"
c = client()
db = c.app
def refused(index, coll="c"):
    try:
        db.command("collMod", coll, index=index)
    except OperationFailure as e:
        return [e.code, e.details.get("errmsg")]
    return None
def spec():
    return [{k: i.get(k) for k in ("unique", "prepareUnique")} for i in db.c.list_indexes() if i["name"] == "a_1"][0]
db.c.insert_many([{"_id": 1, "a": 100}, {"_id": 2, "a": 100}, {"_id": 3, "a": 7}, {"_id": "s", "a": 7.0}, {"_id": 5, "a": 1}])
db.c.create_index("a")
key = {"keyPattern": {"a": 1}}
out = {"without_prepare": refused({**key, "unique": True})}
out["prepare"] = mod(db, {**key, "prepareUnique": True})
out["prepare_again"] = mod(db, {**key, "prepareUnique": True})
out["combined"] = refused({"name": "a_1", "prepareUnique": False, "hidden": True})
out["prepared"] = spec()
out["new_dup"] = code_of(lambda: db.c.insert_one({"_id": 6, "a": 1}))
out["new_dup_update"] = code_of(lambda: db.c.update_one({"_id": 5}, {"$set": {"a": 7}}))
db.c.update_one({"_id": 2}, {"$set": {"b": 1}})
out["fresh_key"] = code_of(lambda: db.c.insert_one({"_id": 7, "a": 2}))
try:
    db.command("collMod", "c", index={**key, "unique": True})
    out["convert_dups"] = None
except OperationFailure as e:
    d = e.details
    out["convert_dups"] = [d["code"], d["codeName"], d["errmsg"], [sorted(v["ids"], key=str) for v in d["violations"]]]
out["still"] = spec()
db.c.delete_one({"_id": 2})
db.c.update_one({"_id": "s"}, {"$set": {"a": 8}})
out["convert"] = mod(db, {**key, "unique": True, "hidden": False})
out["converted"] = spec()
out["unique_dup"] = code_of(lambda: db.c.insert_one({"_id": 8, "a": 100}))
out["unique_again"] = mod(db, {**key, "unique": True})
out["non_unique"] = refused({**key, "unique": False})
out["force_false"] = refused({**key, "forceNonUnique": False})
out["both"] = refused({**key, "unique": True, "forceNonUnique": True})
out["type"] = refused({**key, "unique": "100"})
out["force"] = mod(db, {**key, "forceNonUnique": True})
out["forced"] = spec()
out["dup_again"] = code_of(lambda: db.c.insert_one({"_id": 9, "a": 100}))
out["force_again"] = mod(db, {**key, "forceNonUnique": True})
db.c.create_index("z", prepareUnique=True)
out["created_prepared"] = [i.get("prepareUnique") for i in db.c.list_indexes() if i["name"] == "z_1"]
out["created_dup"] = code_of(lambda: db.c.insert_many([{"_id": 20, "z": 1}, {"_id": 21, "z": 1}]))
print(json.dumps(out))
"#
    );
    let Some(r) = python(&server, &script) else { return };
    let need_prepare =
        "Cannot make index unique with 'prepareUnique=false'. Run collMod to set it first.";
    assert_eq!(r["without_prepare"], json!([72, need_prepare]));
    assert_eq!(
        r["prepare"],
        json!({"prepareUnique_old": false, "prepareUnique_new": true, "ok": 1.0})
    );
    assert_eq!(r["prepare_again"], json!({"ok": 1.0}));
    assert_eq!(
        r["combined"],
        json!([72, "prepareUnique cannot be combined with any other modification."])
    );
    assert_eq!(r["prepared"], json!({"unique": null, "prepareUnique": true}));
    assert_eq!(r["new_dup"], json!(11000), "prepareUnique refuses a new duplicate");
    assert_eq!(r["new_dup_update"], json!(11000));
    assert_eq!(r["fresh_key"], json!(null));
    let msg = "Cannot convert the index to unique. Please resolve conflicting documents before running collMod again.";
    assert_eq!(
        r["convert_dups"],
        json!([359, "CannotConvertIndexToUnique", msg, [[3, "s"], [1, 2]]]),
        "the violations, one per shared key in key order (7 and 7.0 are one key)"
    );
    assert_eq!(r["still"], json!({"unique": null, "prepareUnique": true}));
    assert_eq!(r["convert"], json!({"unique_new": true, "ok": 1.0}));
    assert_eq!(r["converted"], json!({"unique": true, "prepareUnique": null}));
    assert_eq!(r["unique_dup"], json!(11000));
    assert_eq!(r["unique_again"], json!({"ok": 1.0}));
    assert_eq!(r["non_unique"], json!([2, "Cannot make index non-unique"]));
    assert_eq!(r["force_false"], json!([2, "'forceNonUnique: false' is not supported"]));
    assert_eq!(
        r["both"],
        json!([
            72,
            "collMod does not support 'unique' and 'forceNonUnique' options at the same time"
        ])
    );
    assert_eq!(r["type"][0], json!(14));
    assert_eq!(r["force"], json!({"forceNonUnique_new": true, "ok": 1.0}));
    assert_eq!(r["forced"], json!({"unique": null, "prepareUnique": null}));
    assert_eq!(r["dup_again"], json!(null), "a regular index again");
    assert_eq!(r["force_again"], json!({"ok": 1.0}));
    assert_eq!(r["created_prepared"], json!([true]), "createIndexes takes prepareUnique");
    assert_eq!(r["created_dup"], json!(65), "a bulk write error holding E11000");
}
