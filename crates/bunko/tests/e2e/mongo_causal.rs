//! The cluster time and what drivers build on it, through pymongo (issue 13): every reply
//! carries `operationTime` and `$clusterTime`, which advance with writes; a causally
//! consistent session's next transaction reads `afterClusterTime`; snapshot sessions read
//! at `atClusterTime` outside transactions; and the transaction commands MongoDB allows that
//! the drivers' spec tests use (`bulkWrite`, `aggregate` with `batchSize`, a read-only
//! transaction beside a concurrent writer).

use serde_json::{Value, json};

use crate::harness::Server;
use crate::mongo::python;

/// Python helpers: a command listener keeping what was sent, and an error's code and labels.
const HELPERS: &str = r#"
from bson import Timestamp
from pymongo import monitoring, InsertOne, UpdateOne

class Sent(monitoring.CommandListener):
    def __init__(self): self.commands = []
    def started(self, e): self.commands.append((e.command_name, e.command))
    def succeeded(self, e): pass
    def failed(self, e): pass

def failure(fn):
    try:
        fn()
    except OperationFailure as e:
        return [e.code, e.has_error_label("TransientTransactionError")]
    return None

def t(ts):
    return [ts.time, ts.inc]
"#;

fn run(server: &Server, script: &str) -> Option<Value> {
    python(server, &format!("{HELPERS}\n{script}"))
}

/// `operationTime` and `$clusterTime` come with every reply, errors too; a write advances
/// them, a read does not; the next transaction of a session reads `afterClusterTime` the
/// time of what the session saw, and writes carrying it are accepted.
#[test]
fn replies_carry_a_cluster_time_that_writes_advance() {
    let server = Server::start();
    let script = r#"
sent = Sent()
c = client(event_listeners=[sent])
db = c.shop
ping = db.command("ping")
db.books.insert_one({"_id": "b1", "title": "Dune"})
after_insert = db.command("ping")
db.command("find", "books", filter={})
after_find = db.command("ping")
err = None
try:
    db.command("find", "books", filter={"$foo": 1})
except OperationFailure as e:
    err = e.details
with c.start_session() as s:
    with s.start_transaction():
        db.books.insert_one({"_id": "b2"}, session=s)
    with s.start_transaction():
        db.books.find_one({"_id": "b2"}, session=s)
    db.books.insert_one({"_id": "b3"}, session=s)
firsts = [cmd for name, cmd in sent.commands if name in ("insert", "find") and "lsid" in cmd]
majority = failure(lambda: db.command("insert", "books", documents=[{"_id": "b4"}],
                                      readConcern={"level": "majority"}))
print(json.dumps({
    "ping": sorted(k for k in ping if k != "ok"),
    "signature": ping["$clusterTime"]["signature"]["keyId"],
    "same": ping["operationTime"] == ping["$clusterTime"]["clusterTime"],
    "insert_advances": t(after_insert["operationTime"]) > t(ping["operationTime"]),
    "find_keeps": t(after_find["operationTime"]) == t(after_insert["operationTime"]),
    "error_has_time": "operationTime" in err and "$clusterTime" in err,
    "after_cluster_time": ["afterClusterTime" in cmd.get("readConcern", {}) for cmd in firsts[-3:]],
    "majority_on_insert": majority,
    "books": sorted(d["_id"] for d in db.books.find()),
}))
"#;
    let Some(result) = run(&server, script) else { return };
    assert_eq!(
        result,
        json!({"ping": ["$clusterTime", "operationTime"], "signature": 0, "same": true,
               "insert_advances": true, "find_keeps": true, "error_has_time": true,
               // The session's first command has seen nothing yet; the later ones read after it.
               "after_cluster_time": [false, true, true], "majority_on_insert": [72, false],
               "books": ["b1", "b2", "b3"]})
    );
}

/// A snapshot session reads every collection as of its first read (`atClusterTime`), with
/// `find`, `aggregate`, `distinct` and `count_documents`, while writes go on; a session
/// started later sees them. `linearizable` reads are answered.
#[test]
fn snapshot_sessions_read_at_their_cluster_time() {
    let server = Server::start();
    let script = r#"
sent = Sent()
c = client(event_listeners=[sent])
stock = c.shop.stock
stock.insert_many([{"_id": 1, "n": 11}, {"_id": 2, "n": 21}])
out = {}
with c.start_session(snapshot=True) as s:
    out["first"] = stock.find_one({"_id": 1}, session=s)["n"]
    stock.update_one({"_id": 1}, {"$inc": {"n": 1}})
    stock.insert_one({"_id": 3, "n": 31})
    out["find"] = [d["n"] for d in stock.find({}, session=s).sort("_id", 1)]
    out["aggregate"] = [d["n"] for d in stock.aggregate([{"$sort": {"_id": 1}}], session=s)]
    out["distinct"] = sorted(stock.distinct("n", session=s))
    out["count"] = stock.count_documents({}, session=s)
    with c.start_session(snapshot=True) as later:
        out["later"] = sorted(stock.distinct("n", session=later))
reads = [cmd.get("readConcern") for name, cmd in sent.commands if name in ("find", "aggregate", "distinct")]
out["sent"] = [sorted(rc) if rc else None for rc in reads]
out["plain"] = [d["n"] for d in stock.find().sort("_id", 1)]
out["linearizable"] = c.shop.command("find", "stock", filter={"_id": 1},
                                     readConcern={"level": "linearizable"})["cursor"]["firstBatch"]
out["too_old"] = failure(lambda: c.shop.command("find", "stock",
    readConcern={"level": "snapshot", "atClusterTime": Timestamp(1, 1)}))
print(json.dumps(out))
"#;
    let Some(result) = run(&server, script) else { return };
    let at = json!(["atClusterTime", "level"]);
    assert_eq!(
        result,
        json!({"first": 11, "find": [11, 21], "aggregate": [11, 21], "distinct": [11, 21],
               "count": 2, "later": [12, 21, 31],
               "sent": [["level"], at, at, at, at, ["level"]],
               "plain": [12, 21, 31], "linearizable": [{"_id": 1, "n": 12}],
               "too_old": [239, false]})
    );
}

/// Inside a transaction: `bulkWrite` across collections commits with it or not at all,
/// `aggregate` answers in `batchSize` batches, and a transaction that only read commits
/// although another client wrote what it read.
#[test]
fn bulk_write_aggregate_and_read_only_transactions() {
    let server = Server::start();
    let script = r#"
c = client()
shop = c.shop
shop.items.insert_many([{"_id": i} for i in range(5)])
with c.start_session() as s:
    with s.start_transaction():
        r = c.bulk_write([InsertOne(namespace="shop.orders", document={"_id": "o1"}),
                          UpdateOne(namespace="shop.items", filter={"_id": 1}, update={"$set": {"sold": True}})],
                         session=s)
        inside = shop.orders.find_one({"_id": "o1"}, session=s) is not None
        outside = shop.orders.find_one({"_id": "o1"}) is None
with c.start_session() as s:
    s.start_transaction()
    c.bulk_write([InsertOne(namespace="shop.orders", document={"_id": "o2"})], session=s)
    s.abort_transaction()
with c.start_session() as s:
    with s.start_transaction():
        cursor = shop.items.aggregate([{"$sort": {"_id": 1}}], batchSize=2, session=s)
        batched = [d["_id"] for d in cursor]
        shop.items.find_one({"_id": 0}, session=s)
        shop.items.update_one({"_id": 0}, {"$set": {"other": 1}})
print(json.dumps({"inserted": r.inserted_count, "modified": r.modified_count,
                  "inside": inside, "outside": outside, "batched": batched,
                  "orders": sorted(d["_id"] for d in shop.orders.find()),
                  "sold": shop.items.find_one({"_id": 1}).get("sold")}))
"#;
    let Some(result) = run(&server, script) else { return };
    assert_eq!(
        result,
        json!({"inserted": 1, "modified": 1, "inside": true, "outside": true,
               "batched": [0, 1, 2, 3, 4], "orders": ["o1"], "sold": true})
    );
}

/// Issue 13: a write over HTTP advances the cluster time too, so a snapshot read after it
/// gets a new time and sees it (not the snapshot kept for the time before it).
#[test]
fn writes_over_http_advance_the_cluster_time() {
    let server = Server::start();
    let script = r#"
c = client()
c.shop.books.insert_one({"_id": "m1"})
with c.start_session(snapshot=True) as s:
    n = len(list(c.shop.books.find({}, session=s)))
t = c.admin.command("ping")["operationTime"]
print(json.dumps({"n": n, "t": [t.time, t.inc]}))
"#;
    let Some(before) = python(&server, script) else { return };
    server.put_doc("shop$books", "h1", &json!({"title": "こころ"}));
    let script = r#"
c = client()
t = c.admin.command("ping")["operationTime"]
with c.start_session(snapshot=True) as s:
    n = len(list(c.shop.books.find({}, session=s)))
print(json.dumps({"n": n, "t": [t.time, t.inc]}))
"#;
    let after = python(&server, script).expect("pymongo ran before");
    assert_eq!((before["n"].as_u64(), after["n"].as_u64()), (Some(1), Some(2)));
    let time = |v: &serde_json::Value| (v["t"][0].as_u64(), v["t"][1].as_u64());
    assert!(time(&after) > time(&before), "{before} {after}");
}
