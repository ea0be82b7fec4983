//! Behaviours found by the drivers' specification suites beyond CRUD (issue 13, session 30:
//! `scripts/mongo-spec.sh` with `index_management`, `run_command`, `command_monitoring`,
//! `collection_management`): the search index commands and stages refused as a MongoDB 8
//! without Atlas Search refuses them, `maxTimeMS` on `find`, `maxTimeMS` on a `getMore` of a
//! cursor that does not await data, and the top-level labels of a `failCommand` write
//! concern error; `min`/`max` bounding and (session 31) narrowing the hinted index scan.
//! Through pymongo.

use serde_json::json;

use crate::harness::Server;

#[test]
fn search_indexes_are_refused_as_by_a_mongodb_without_atlas_search() {
    let s = Server::start();
    let script = r#"
from pymongo.operations import SearchIndexModel
c = client().shop.books
c.insert_one({"_id": 1, "t": "dune"})
def refusal(fn):
    try:
        fn()
    except OperationFailure as e:
        return e.code, e.details["codeName"], e.details["errmsg"]
    raise AssertionError("not refused")
out = {}
out["create"] = refusal(lambda: c.create_search_index({"definition": {"mappings": {"dynamic": True}}}))
out["update"] = refusal(lambda: c.update_search_index("idx", {"mappings": {"dynamic": True}}))
out["drop"] = refusal(lambda: c.drop_search_index("idx"))
out["list"] = refusal(lambda: list(c.list_search_indexes()))
out["search"] = refusal(lambda: list(c.aggregate([{"$search": {"text": {"query": "dune", "path": "t"}}}])))
out["vector"] = refusal(lambda: list(c.aggregate([{"$vectorSearch": {}}])))
# The connection stays usable and nothing was created.
out["after"] = [d["_id"] for d in c.find()]
out["indexes"] = [i["name"] for i in c.list_indexes()]
print(json.dumps(out))
"#;
    let Some(out) = crate::mongo::python(&s, script) else { return };
    let indexes = "Using Atlas Search Database Commands and the $listSearchIndexes aggregation \
        stage requires additional configuration. Please connect to Atlas or an AtlasCLI local \
        deployment to enable. For more information on how to connect, see \
        https://dochub.mongodb.org/core/atlas-cli-deploy-local-reqs.";
    let stages = "Using $search and $vectorSearch aggregation stages requires additional \
        configuration. Please connect to Atlas or an AtlasCLI local deployment to enable.For \
        more information on how to connect, see \
        https://dochub.mongodb.org/core/atlas-cli-deploy-local-reqs.";
    for op in ["create", "update", "drop", "list"] {
        assert_eq!(out[op], json!([31082, "SearchNotEnabled", indexes]), "{op}");
    }
    for op in ["search", "vector"] {
        assert_eq!(out[op], json!([31082, "SearchNotEnabled", stages]), "{op}");
    }
    assert_eq!(out["after"], json!([1]));
    assert_eq!(out["indexes"], json!(["_id_"]));
}

#[test]
fn max_time_ms_is_taken_by_find_and_refused_on_a_get_more_that_cannot_wait() {
    let s = Server::start();
    let script = r#"
cl = client()
db = cl.shop
db.books.insert_many([{"_id": i} for i in range(5)])
out = {}
out["find"] = [d["_id"] for d in db.books.find({"_id": {"$gte": 1}}).sort("_id", -1).max_time_ms(60000)]
out["by_id"] = [d["_id"] for d in db.books.find({"_id": 3}).max_time_ms(60000)]
out["negative"] = code_of(lambda: db.command("find", "books", maxTimeMS=-1))
out["string"] = code_of(lambda: db.command("find", "books", maxTimeMS="x"))
out["distinct"] = sorted(db.books.distinct("_id", {"_id": {"$gt": 2}}, maxTimeMS=60000))
out["distinct_negative"] = code_of(lambda: db.command("distinct", "books", key="_id", maxTimeMS=-1))
first = db.command("find", "books", batchSize=2, maxTimeMS=60000)["cursor"]
out["first"] = [d["_id"] for d in first["firstBatch"]]
try:
    db.command("getMore", first["id"], collection="books", maxTimeMS=300)
except OperationFailure as e:
    out["get_more"] = [e.code, e.details["errmsg"]]
# The refused getMore leaves the cursor where it was.
nxt = db.command("getMore", first["id"], collection="books")["cursor"]
out["rest"] = [d["_id"] for d in nxt["nextBatch"]]
# In a transaction too; min/max are not taken there yet.
with cl.start_session() as s:
    with s.start_transaction():
        out["txn"] = [d["_id"] for d in db.books.find({"_id": {"$lt": 2}}, session=s).max_time_ms(60000)]
        out["txn_count"] = db.books.count_documents({}, session=s, maxTimeMS=60000)
        out["txn_distinct"] = sorted(db.books.distinct("_id", session=s, maxTimeMS=60000))
    s.start_transaction()
    out["txn_min"] = code_of(lambda: list(db.books.find({}, session=s).hint([("_id", 1)]).min([("_id", 1)])))
    s.abort_transaction()
print(json.dumps(out))
"#;
    let Some(out) = crate::mongo::python(&s, script) else { return };
    assert_eq!(out["find"], json!([4, 3, 2, 1]));
    assert_eq!(out["by_id"], json!([3]));
    assert_eq!(out["negative"], json!(51024));
    assert_eq!(out["string"], json!(14));
    assert_eq!(out["distinct"], json!([3, 4]));
    assert_eq!(out["distinct_negative"], json!(51024));
    assert_eq!(out["first"], json!([0, 1]));
    assert_eq!(
        out["get_more"],
        json!([2, "cannot set maxTimeMS on getMore command for a non-awaitData cursor"])
    );
    assert_eq!(out["rest"], json!([2, 3, 4]));
    assert_eq!(out["txn"], json!([0, 1]));
    assert_eq!(out["txn_count"], json!(5));
    assert_eq!(out["txn_distinct"], json!([0, 1, 2, 3, 4]));
    assert_eq!(out["txn_min"], json!(238));
}

#[test]
fn a_fail_point_write_concern_error_keeps_its_labels_at_the_top_level() {
    let s = Server::start_with(&["--mongo-test-commands"], &[]);
    let script = r#"
class Replies(monitoring.CommandListener):
    def __init__(self): self.replies = []
    def started(self, e): pass
    def succeeded(self, e):
        if e.command_name == "insert": self.replies.append(e.reply)
    def failed(self, e): pass
seen = Replies()
c = client(event_listeners=[seen])
fp = lambda **kw: c.admin.command("configureFailPoint", **kw)
fp(configureFailPoint="failCommand", mode={"times": 1}, data={"failCommands": ["insert"], "errorLabels": ["RetryableWriteError"], "writeConcernError": {"code": 91}})
c.shop.books.insert_one({"_id": 1})
fp(configureFailPoint="failCommand", mode={"times": 1}, data={"failCommands": ["insert"], "writeConcernError": {"code": 91, "errmsg": "shutting down"}})
c.shop.books.insert_one({"_id": 2})
out = [{k: r.get(k) for k in ("n", "errorLabels", "writeConcernError")} for r in seen.replies]
out.append(c.shop.books.count_documents({}))
print(json.dumps(out))
"#;
    let Some(out) = crate::mongo::python(&s, script) else { return };
    // Each write ran once, was answered with the error, and was retried (answered `n: 1`
    // again: the retry finds it done).
    let labelled =
        |wce| json!({"n": 1, "errorLabels": ["RetryableWriteError"], "writeConcernError": wce});
    let plain = json!({"n": 1, "errorLabels": null, "writeConcernError": null});
    assert_eq!(
        out,
        json!([
            labelled(json!({"code": 91})),
            plain,
            labelled(json!({"code": 91, "errmsg": "shutting down"})),
            plain,
            2
        ])
    );
}

#[test]
fn a_clustered_collection_names_its_id_index_as_mongodb_lists_it() {
    let s = Server::start();
    let script = r#"
db = client().shop
db.create_collection("events", clusteredIndex={"key": {"_id": 1}, "unique": True, "name": "by id"})
db.events.insert_many([{"_id": 2, "a": "x"}, {"_id": 1, "a": "y"}])
out = {}
out["listed"] = [{k: v for k, v in c.items() if k != "info"} for c in db.list_collections(filter={"name": "events"})]
out["indexes"] = list(db.events.list_indexes())
out["hint"] = [d["_id"] for d in db.events.find({"a": {"$exists": True}}, hint="by id").sort("_id", 1)]
out["hint_id_"] = code_of(lambda: list(db.events.find({}, hint="_id_")))
out["drop"] = code_of(lambda: db.events.drop_index("by id"))
out["duplicate"] = code_of(lambda: db.events.insert_one({"_id": 1}))
# Without a name the index is `_id_`; the spec is checked as MongoDB checks it.
db.create_collection("plain", clusteredIndex={"key": {"_id": 1}, "unique": True})
out["default"] = [i["name"] for i in db.plain.list_indexes()]
bad = lambda **spec: code_of(lambda: db.create_collection("bad", clusteredIndex=spec))
out["bad"] = [
    bad(key={"_id": 1}, unique=False),
    bad(key={"a": 1}, unique=True),
    bad(key={"_id": 1}),
    bad(key={"_id": 1}, unique=True, sparse=True),
    code_of(lambda: db.command("create", "bad", clusteredIndex="yes")),
]
out["bad_created"] = "bad" in db.list_collection_names()
print(json.dumps(out))
"#;
    let Some(out) = crate::mongo::python(&s, script) else { return };
    assert_eq!(
        out["listed"],
        json!([{"name": "events", "type": "collection", "options": {
            "clusteredIndex": {"v": 2, "key": {"_id": 1}, "name": "by id", "unique": true}
        }}])
    );
    assert_eq!(
        out["indexes"],
        json!([{"v": 2, "key": {"_id": 1}, "name": "by id", "unique": true, "clustered": true}])
    );
    assert_eq!(out["hint"], json!([1, 2]));
    assert_eq!(out["hint_id_"], json!(2));
    assert_eq!(out["drop"], json!(72));
    assert_eq!(out["duplicate"], json!(11000));
    assert_eq!(out["default"], json!(["_id_"]));
    assert_eq!(out["bad"], json!([5979700, 197, 40414, 40415, 14]));
    assert_eq!(out["bad_created"], json!(false));
}

#[test]
fn min_and_max_bound_the_keys_of_the_hinted_index() {
    let s = Server::start();
    let script = r#"
db = client().shop
db.t.insert_many([{"_id": i, "a": i % 3, "b": i} for i in range(10)] + [{"_id": "m", "a": [0, 2], "b": 50}])
db.t.create_index([("a", 1), ("b", -1)], name="a_b")
def ids(**kw):
    kw.setdefault("hint", {"a": 1, "b": -1})
    return [d["_id"] for d in db.command("find", "t", **kw)["cursor"]["firstBatch"]]
out = {}
# Index order is a ascending, b descending; min inclusive, max exclusive.
out["range"] = ids(min={"a": 1, "b": 7}, max={"a": 2, "b": 100})
out["max_only"] = ids(max={"a": 1, "b": 4})
out["min_only"] = ids(min={"a": 2, "b": 5}, hint="a_b")
# A multikey document is in once, where its first key within the bounds is.
out["multikey"] = ids(min={"a": 2, "b": 60}, max={"a": 2, "b": 0})
out["sorted"] = ids(min={"a": 1, "b": 7}, max={"a": 2, "b": 100}, sort={"_id": 1})
out["filtered"] = ids(filter={"b": {"$gt": 2}}, min={"a": 1, "b": 7}, max={"a": 2, "b": 100}, skip=1)
out["projected"] = db.command("find", "t", hint="a_b", min={"a": 2, "b": 5}, projection={"_id": 0, "b": 1})["cursor"]["firstBatch"]
out["by_id"] = ids(hint={"_id": 1}, min={"_id": 3}, max={"_id": 6})
out["cursor"] = [d["_id"] for d in db.t.find({}).hint([("_id", 1)]).min([("_id", 7)]).batch_size(1)]
def err(coll="t", **kw):
    try:
        db.command("find", coll, **kw)
    except OperationFailure as e:
        return [e.code, e.details["errmsg"]]
out["no_hint"] = err(min={"a": 1, "b": 1})
out["natural"] = err(min={"a": 1, "b": 1}, hint={"$natural": 1})
out["fields"] = err(min={"b": 1}, hint="a_b")
out["order"] = err(min={"b": 1, "a": 1}, hint="a_b")
out["empty"] = err(min={"a": 2, "b": 0}, max={"a": 1, "b": 0}, hint="a_b")
out["collated"] = err(min={"_id": "a"}, hint={"_id": 1}, collation={"locale": "fr"})
out["id_fields"] = [err(min={"a": 1}, hint={"_id": 1}), err(max={"_id": 1, "a": 1}, hint="_id_"), err(min={"_id": 6}, max={"_id": 3}, hint={"_id": 1})[0]]
db.command("create", "v", viewOn="t", pipeline=[])
out["view"] = err("v", min={"a": 1, "b": 1}, hint="a_b")
print(json.dumps(out))
"#;
    let Some(out) = crate::mongo::python(&s, script) else { return };
    assert_eq!(out["range"], json!([7, 4, 1]));
    assert_eq!(out["max_only"], json!(["m", 9, 6, 3, 0, 7]));
    assert_eq!(out["min_only"], json!([5, 2]));
    assert_eq!(out["multikey"], json!(["m", 8, 5, 2]));
    assert_eq!(out["sorted"], json!([1, 4, 7]));
    assert_eq!(out["filtered"], json!([4]));
    assert_eq!(out["projected"], json!([{"b": 5}, {"b": 2}]));
    assert_eq!(out["by_id"], json!([3, 4, 5]));
    assert_eq!(out["cursor"], json!([7, 8, 9, "m"]));
    let no_hint =
        json!([51173, "When using min()/max() a hint of which index to use must be provided"]);
    assert_eq!(out["no_hint"], no_hint);
    assert_eq!(out["natural"], no_hint);
    let incompatible = json!([51174, "The index chosen is not compatible with min/max"]);
    assert_eq!(out["fields"], incompatible);
    assert_eq!(out["order"], incompatible);
    assert_eq!(out["collated"], incompatible);
    // On the `_id` index too: a bound on another field, or on more fields, and an empty range.
    assert_eq!(out["id_fields"], json!([incompatible, incompatible, 51175]));
    assert_eq!(out["view"], json!([168, "Option min not supported in aggregation."]));
    assert_eq!(
        out["empty"],
        json!([
            51175,
            "The value provided for min() does not come before the value provided for max() in the hinted index"
        ])
    );
}

#[test]
fn min_and_max_narrow_the_hinted_index_scan() {
    let s = Server::start();
    let script = r#"
db = client().shop
db.t.insert_many([{"_id": i, "a": i, "b": i % 7} for i in range(300)])
db.t.create_index("a", name="a_up")
db.t.create_index([("a", -1)], name="a_down")
db.t.create_index([("b", 1), ("a", -1)], name="b_a")
def run(**kw):
    docs = db.command("find", "t", **kw)["cursor"]["firstBatch"]
    stats = db.command("explain", {"find": "t", **kw}, verbosity="executionStats")["executionStats"]
    return [[d["_id"] for d in docs], stats["nReturned"], stats["totalKeysExamined"], stats["totalDocsExamined"]]
out = {}
out["up"] = run(hint="a_up", min={"a": 50}, max={"a": 60})
out["down"] = run(hint="a_down", min={"a": 60}, max={"a": 50})
out["filtered"] = run(hint="a_up", min={"a": 50}, max={"a": 60}, filter={"b": 3}, limit=1)
out["compound"] = run(hint="b_a", min={"b": 3, "a": 200}, max={"b": 3, "a": 150})
print(json.dumps(out))
"#;
    let Some(out) = crate::mongo::python(&s, script) else { return };
    // The scan reads the keys from `min` to `max` (the key at `max` too), not all 300.
    assert_eq!(out["up"], json!([(50..60).collect::<Vec<_>>(), 10, 11, 11]));
    assert_eq!(out["down"], json!([(51..=60).rev().collect::<Vec<_>>(), 10, 11, 11]));
    assert_eq!(out["filtered"], json!([[52], 1, 11, 11]));
    // `b` ascending then `a` descending: the range bounds `b` alone (the 43 keys of b = 3),
    // and the documents are kept within the bounds on both fields.
    let compound: Vec<i64> = (151..=200).rev().filter(|a| a % 7 == 3).collect();
    assert_eq!(out["compound"][0], json!(compound));
    assert_eq!(out["compound"][2], json!(43));
}

#[test]
fn max_time_ms_stops_reads_and_the_fail_point_times_them_out() {
    let s = Server::start_with(&["--mongo-test-commands"], &[]);
    let script = r#"
from pymongo.errors import ExecutionTimeout
c = client()
db = c.shop
db.big.insert_many([{"_id": i, "a": i % 10, "pad": "x" * 200} for i in range(20000)])
db.big.create_index("a")
db.small.insert_many([{"_id": i} for i in range(3)])
fp = lambda mode: c.admin.command("configureFailPoint", "maxTimeAlwaysTimeOut", mode=mode)
out = {}
# Scans that cannot finish within 1 ms stop with MaxTimeMSExpired.
out["find"] = code_of(lambda: db.command("find", "big", filter={"pad": "none"}, maxTimeMS=1))
out["sorted"] = code_of(lambda: db.command("find", "big", sort={"pad": 1, "_id": -1}, maxTimeMS=1))
out["aggregate"] = code_of(lambda: db.command("aggregate", "big", pipeline=[{"$match": {"a": {"$gte": 0}}}, {"$group": {"_id": "$a"}}], cursor={}, maxTimeMS=1))
out["count"] = code_of(lambda: db.command("count", "big", query={"pad": "none"}, maxTimeMS=1))
# With room to finish, the same reads answer.
out["roomy"] = db.command("count", "big", query={"a": 3}, maxTimeMS=600000)["n"]
fp("alwaysOn")
out["always"] = [code_of(lambda: db.command(name, "small", **kw)) for name, kw in [
    ("find", {"maxTimeMS": 1000}),
    ("find", {"filter": {"_id": 1}, "maxTimeMS": 1000}),
    ("aggregate", {"pipeline": [], "cursor": {}, "maxTimeMS": 1000}),
    ("count", {"maxTimeMS": 1000}),
    ("distinct", {"key": "_id", "maxTimeMS": 1000}),
]]
try:
    db.small.find_one(max_time_ms=1)
except ExecutionTimeout as e:
    out["driver"] = [e.code, e.details["codeName"], e.details["errmsg"]]
out["without"] = len(db.command("find", "small")["cursor"]["firstBatch"])
fp("off")
out["off"] = len(db.command("find", "small", maxTimeMS=1000)["cursor"]["firstBatch"])
fp({"times": 1})
out["times"] = [code_of(lambda: db.command("find", "small", maxTimeMS=1000)) for _ in range(2)]
print(json.dumps(out))
"#;
    let Some(out) = crate::mongo::python(&s, script) else { return };
    for read in ["find", "sorted", "aggregate", "count"] {
        assert_eq!(out[read], json!(50), "{read}");
    }
    assert_eq!(out["roomy"], json!(2000));
    assert_eq!(out["always"], json!([50, 50, 50, 50, 50]));
    assert_eq!(out["driver"], json!([50, "MaxTimeMSExpired", "operation exceeded time limit"]));
    assert_eq!(out["without"], json!(3), "no maxTimeMS: no time limit");
    assert_eq!(out["off"], json!(3));
    assert_eq!(out["times"], json!([50, null]));
}

/// A `find`'s or `aggregate`'s `maxTimeMS` holds for its cursor's `getMore`s too (MongoDB
/// counts the cursor's whole processing time): under the `maxTimeAlwaysTimeOut` fail point
/// the `getMore` of such a cursor is `MaxTimeMSExpired` and the cursor is gone, while a
/// cursor opened without one reads on.
#[test]
fn max_time_ms_of_a_find_holds_for_its_get_mores() {
    let s = Server::start_with(&["--mongo-test-commands"], &[]);
    let script = r#"
c = client()
db = c.shop
db.items.insert_many([{"_id": i} for i in range(10)])
fp = lambda mode: c.admin.command("configureFailPoint", "maxTimeAlwaysTimeOut", mode=mode)
out = {}
for name, first in [
    ("find", lambda **kw: db.command("find", "items", batchSize=2, **kw)),
    ("aggregate", lambda **kw: db.command("aggregate", "items", pipeline=[{"$sort": {"_id": 1}}], cursor={"batchSize": 2}, **kw)),
]:
    timed = first(maxTimeMS=600000)["cursor"]["id"]
    plain = first()["cursor"]["id"]
    more = lambda cid: db.command("getMore", cid, collection="items", batchSize=2)
    fp("alwaysOn")
    out[name] = [code_of(lambda: more(timed)), len(more(plain)["cursor"]["nextBatch"])]
    fp("off")
    out[name].append(code_of(lambda: more(timed)))
    out[name].append(len(more(plain)["cursor"]["nextBatch"]))
# Without the fail point the cursor with room left reads to its end.
cid = db.command("find", "items", batchSize=3, maxTimeMS=600000)["cursor"]["id"]
n = 3
while cid:
    reply = db.command("getMore", cid, collection="items", batchSize=3)["cursor"]
    n += len(reply["nextBatch"])
    cid = reply["id"]
out["roomy"] = n
print(json.dumps(out))
"#;
    let Some(out) = crate::mongo::python(&s, script) else { return };
    // Expired, the plain cursor reads on; then the expired cursor is gone (43).
    assert_eq!(out["find"], json!([50, 2, 43, 2]));
    assert_eq!(out["aggregate"], json!([50, 2, 43, 2]));
    assert_eq!(out["roomy"], json!(10));
}
