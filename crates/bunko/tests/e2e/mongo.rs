//! The MongoDB wire protocol through the official Python driver (PyPI `pymongo`, pinned),
//! against the real server: handshake, SCRAM-SHA-256 with the HTTP API's users, the seeds'
//! embedded-documents models (shared seeds 001 and 004) with every BSON type round-tripping
//! exactly, bad input answered with MongoDB's codes on a connection that stays usable, and
//! the same documents read back over the HTTP API.
//!
//! pymongo is installed by the test itself into the repository's ignored `.deps/` folder
//! (once; a stamp file marks a finished install). Without PyPI the tests say so on one line
//! and pass without running.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use serde_json::{Value, json};

use crate::harness::{ADMIN, ADMIN_PASSWORD, Server};

const PYMONGO: &str = "pymongo==4.20.1";
/// zstd for pymongo's wire compression on Python < 3.14.
const ZSTD: &str = "backports.zstd==1.8.0";

/// The folder holding pymongo, or `None` when it cannot be installed (no PyPI).
pub(crate) fn pymongo() -> Option<PathBuf> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        let deps = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.deps");
        let dir = deps.join("pymongo-4.20.1");
        let stamp = dir.join(".installed");
        if stamp.exists() {
            return Some(dir);
        }
        let staging = deps.join(format!("pymongo-staging-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&staging);
        let installed = Command::new("python3")
            .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--target"])
            .arg(&staging)
            .args([PYMONGO, ZSTD])
            .status()
            .is_ok_and(|s| s.success());
        if !installed {
            eprintln!("SKIP mongo e2e: could not install {PYMONGO} from PyPI");
            return None;
        }
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::rename(&staging, &dir).ok()?;
        std::fs::write(&stamp, PYMONGO).ok()?;
        Some(dir)
    })
    .clone()
}

/// Runs a Python script with pymongo against `server`; returns its last stdout line as JSON.
pub(crate) fn python(server: &Server, script: &str) -> Option<Value> {
    let deps = pymongo()?;
    let out = Command::new("python3")
        .arg("-c")
        .arg(format!("{PRELUDE}\n{script}"))
        .env("PYTHONPATH", deps)
        .env("MONGO_ADDR", server.mongo_addr())
        .env("BUNKO_URL", server.base())
        .env("MONGO_ADMIN", format!("{ADMIN}:{ADMIN_PASSWORD}"))
        .output()
        .expect("run python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "python failed:\n{stdout}\n{}\n---- server log ----\n{}",
        String::from_utf8_lossy(&out.stderr),
        server.log()
    );
    let last = stdout.lines().last().unwrap_or_default();
    Some(serde_json::from_str(last).unwrap_or_else(|_| panic!("not JSON: {last}")))
}

/// Shared by every script: a client factory and an assertion helper.
pub(crate) const PRELUDE: &str = r#"
import json, os, socket, struct, uuid, datetime, math
import bson
from bson import ObjectId, Int64, Decimal128, Binary, Regex, Timestamp, MinKey, MaxKey, SON
from bson.raw_bson import RawBSONDocument
from pymongo import MongoClient
from pymongo.errors import OperationFailure

ADDR = os.environ["MONGO_ADDR"]
USER, PASSWORD = os.environ["MONGO_ADMIN"].split(":", 1)

def client(user=USER, password=PASSWORD, **kw):
    auth = f"{user}:{password}@" if user else ""
    return MongoClient(f"mongodb://{auth}{ADDR}/?authSource=admin", serverSelectionTimeoutMS=20000, **kw)

from pymongo import monitoring

class CommandNames(monitoring.CommandListener):
    """A command listener keeping the names of the commands a client sent."""
    def __init__(self): self.names = []
    def started(self, e): self.names.append(e.command_name)
    def succeeded(self, e): pass
    def failed(self, e): pass

def code_of(fn):
    try:
        fn()
    except OperationFailure as e:
        return e.code
    return None

def stages(plan):
    """The stage names of an explained plan, from the top down its input stages."""
    names = []
    while plan:
        names.append(plan["stage"])
        plan = plan.get("inputStage")
    return names
"#;

#[test]
fn handshake_admin_commands_and_scram() {
    let server = Server::start_with(&[], &[("BUNKO_LOG", "bunko_mongo=debug,info")]);
    let script = r#"
c = client(compressors="zstd", maxPoolSize=1)
hello = c.admin.command("hello")
assert hello["isWritablePrimary"] is True and hello["setName"] == "bunko", hello
assert hello["hosts"] == [ADDR] and hello["primary"] == ADDR and hello["me"] == ADDR, hello
assert hello["maxWireVersion"] >= 21 and hello["logicalSessionTimeoutMinutes"] == 30, hello
assert hello["maxBsonObjectSize"] == 16 * 1024 * 1024 and hello["maxMessageSizeBytes"] == 48000000
assert c.admin.command("ismaster")["ismaster"] is True
assert c.admin.command("buildinfo")["versionArray"][0] == 8
assert c.admin.command("getParameter", 1, featureCompatibilityVersion=1)["featureCompatibilityVersion"] == {"version": "8.0"}
assert c.admin.command("getCmdLineOpts")["parsed"]["net"]["port"] == int(ADDR.split(":")[1])
assert c.admin.command("hostInfo")["system"]["numCores"] >= 1
assert c.admin.command("serverStatus")["connections"]["current"] >= 1
status = c.admin.command("connectionStatus")["authInfo"]["authenticatedUsers"]
assert status == [{"user": USER, "db": "admin"}], status
assert c.admin.command("getLog", "*")["names"] == ["global", "startupWarnings"]
me = c.admin.command("whatsmyuri")["you"]
# Unknown commands and bad passwords are errors with MongoDB's codes ...
assert code_of(lambda: c.admin.command("frobnicate")) == 59
assert code_of(lambda: c.shop.command("find", "x", filter={"a": {"$foo": 1}})) == 2
assert code_of(lambda: c.shop.command("createIndexes", "x", indexes=[{"key": {"a": "2dsphere"}, "name": "a_2dsphere"}])) == 238
assert code_of(lambda: c.shop.command("find", "x", frob=1)) == 40415
# ... and the connection is the same one afterwards.
assert c.admin.command("whatsmyuri")["you"] == me
assert code_of(lambda: client(password="wrong").admin.command("ping")) == 18
anon = client(user=None)
assert anon.admin.command("ping")["ok"] == 1.0
assert code_of(lambda: anon.admin.command("listDatabases")) == 13
assert code_of(lambda: anon.shop.people.find_one()) == 13
print(json.dumps({"commands": "ok"}))
"#;
    let Some(result) = python(&server, script) else { return };
    assert_eq!(result, json!({"commands": "ok"}));
    // The driver negotiated zstd and sent its commands as OP_COMPRESSED.
    assert!(server.log().contains("Some(Zstd)"), "no compressed message in the log");
}

/// zlib, the compressor every driver has without extra packages (Python's own `zlib`):
/// negotiated in `hello`, and documents go both ways as OP_COMPRESSED.
#[test]
fn zlib_compressed_messages_round_trip() {
    let server = Server::start_with(&[], &[("BUNKO_LOG", "bunko_mongo=debug,info")]);
    let script = r#"
names = CommandNames()
c = client(compressors="zlib", event_listeners=[names])
coll = c.shop.zipped
docs = [{"_id": i, "text": "word " * 200, "n": Int64(i), "nested": {"a": [i, str(i)]}} for i in range(60)]
assert coll.insert_many(docs).inserted_ids == list(range(60))
assert list(coll.find({}, sort=[("_id", 1)], batch_size=7)) == docs
assert coll.find_one({"_id": 7})["text"] == "word " * 200
assert coll.count_documents({"n": {"$gte": 50}}) == 10
assert "insert" in names.names and "getMore" in names.names
print(json.dumps({"zlib": "ok"}))
"#;
    let Some(result) = python(&server, script) else { return };
    assert_eq!(result, json!({"zlib": "ok"}));
    // The driver negotiated zlib and its commands came as OP_COMPRESSED.
    assert!(server.log().contains("Some(Zlib)"), "no zlib-compressed message in the log");
}

/// A `find` by `_id` writes the document as BSON straight from its stored text; the general
/// `find` path parses and converts it. Both must give the same bytes, for documents written
/// over MongoDB (every type) and over HTTP (numbers at the edges, wrapper look-alikes,
/// `$`-fields, NUL bytes, key order).
#[test]
fn point_reads_give_the_bytes_of_the_general_find() {
    let server = Server::start();
    server.create_db("mixed$docs");
    let text = r#"{"a": 2147483648, "b": -2147483649, "z": -0, "e": 1E5, "d": 0.1,
        "big": 123456789012345678901234567890, "oid": {"$oid": "65a1b2c3d4e5f60718293a4b"},
        "look": {"$numberLong": "x"}, "two": {"$oid": "65a1b2c3d4e5f60718293a4b", "x": 1},
        "s": "nul\u0000byte \u00e9", "arr": [[1, [2.5]], {}, [], null], "$dollar": {"$a": 1, "b": 2},
        "k.dot": true, "date": {"$date": {"$numberLong": "-1"}}, "first": 1}"#;
    let body: Value = serde_json::from_str(text).expect("JSON");
    server.put_doc("mixed$docs", "h1", &body);
    let script = r#"
raw = client().mixed.get_collection("docs", codec_options=bson.CodecOptions(document_class=RawBSONDocument))
every = SON([("_id", ObjectId("65a1b2c3d4e5f60718293a4b")), ("i32", 5), ("i64", Int64(5)),
    ("big", Int64(2**63 - 1)), ("neg0", -0.0), ("nan", float("nan")), ("inf", float("-inf")),
    ("dec", Decimal128("1.50")), ("s", "nul\x00byte"), ("date", datetime.datetime(1969, 12, 31, 23, 59, 59, 999000)),
    ("uuid", Binary(uuid.UUID("12345678-1234-5678-1234-567812345678").bytes, 4)),
    ("re", Regex("^a.c$", "im")), ("ts", Timestamp(1, 2)), ("min", MinKey()), ("max", MaxKey()),
    ("nested", [[1, [Int64(2)]], SON([("z", 1), ("a", {"$oid": "x"})])]),
    ("fake", {"$oid": "65a1b2c3d4e5f60718293a4b"}), ("esc", {"$bunkoDoc": {}}), ("dotted.$field", 1)])
raw.insert_one(every)
raw.insert_one(SON([("_id", "s1"), ("z", 1), ("a", {"$code": "f()", "$scope": {"x": 1}})]))
for id in ("h1", every["_id"], "s1"):
    point = raw.find_one({"_id": id})
    general = list(raw.find({"_id": {"$in": [id]}}))[0]
    assert point.raw == general.raw, (id, point, general)
assert raw.find_one({"_id": every["_id"]}).raw == bson.encode(every)
h1 = bson.decode(raw.find_one({"_id": "h1"}).raw)
types = [type(h1[k]).__name__ for k in ("a", "b", "z", "e", "big", "oid", "look", "date")]
assert types == ["Int64", "Int64", "int", "float", "float", "ObjectId", "dict", "datetime"], types
assert list(h1)[:3] == ["_id", "a", "b"] and list(h1)[-1] == "first", list(h1)
assert h1["s"] == "nul\x00byte \u00e9" and h1["$dollar"] == {"$a": 1, "b": 2}, h1
assert raw.find_one({"_id": "h1"}, {"a": 1}).raw == bson.encode({"_id": "h1", "a": 2147483648})
assert raw.find_one({"_id": "missing"}) is None
print(json.dumps({"ok": True}))
"#;
    let Some(result) = python(&server, script) else { return };
    assert_eq!(result, json!({"ok": true}));
}

#[test]
fn seeds_round_trip_every_bson_type_and_show_over_http() {
    let server = Server::start();
    let script = r#"
c = client(compressors="zstd")
people = c.library.patrons
joe = {"_id": "joe", "name": "Joe Bookreader", "addresses": [
    {"street": "123 Fake Street", "city": "Faketon", "state": "MA", "zip": "12345"},
    {"street": "1 Some Other Street", "city": "Boston", "state": "MA", "zip": "12345"}]}
sammy = SON([("_id", ObjectId("612d1e835ebee16872a109a4")), ("first_name", "Sammy"),
    ("last_name", "Shark"),
    ("emails", [{"email": "sammy@example.com", "type": "work"}, {"email": "s@example.org", "type": "home"}]),
    ("id_card", {"number": "123-1234-123", "issued_on": datetime.datetime(2020, 3, 17, tzinfo=datetime.timezone.utc)})])
every = SON([("_id", 7), ("oid", ObjectId("65a1b2c3d4e5f60718293a4b")), ("i32", 5), ("i64", Int64(5)),
    ("big", Int64(2**63 - 1)), ("d", 5.0), ("neg0", -0.0), ("nan", float("nan")), ("inf", float("inf")),
    ("ninf", float("-inf")), ("dec", Decimal128("1.50")), ("s", "nul\x00byte"), ("t", True), ("n", None),
    ("date", datetime.datetime(1969, 12, 31, 23, 59, 59, 999000)),
    ("uuid", Binary(uuid.UUID("12345678-1234-5678-1234-567812345678").bytes, 4)),
    ("bin", Binary(b"\x01\x02", 0x80)), ("re", Regex("^a.c$", "im")), ("ts", Timestamp(1, 2)),
    ("min", MinKey()), ("max", MaxKey()), ("nested", [[1, [Int64(2)]], SON([("z", 1), ("a", {"$oid": "x"})])]),
    ("fake", {"$oid": "65a1b2c3d4e5f60718293a4b"}), ("dotted.$field", 1)])
r = people.insert_many([joe, sammy, every])
assert r.inserted_ids == ["joe", sammy["_id"], 7]
nid = people.insert_one({"name": "no id"}).inserted_id
assert isinstance(nid, ObjectId)
raw = c.library.get_collection("patrons", codec_options=bson.CodecOptions(document_class=RawBSONDocument))
for doc in (joe, sammy, every):
    got = raw.find_one({"_id": doc["_id"]})
    assert got.raw == bson.encode(doc), (got, doc)
assert [d["_id"] for d in people.find({"addresses.city": "Boston"})] == ["joe"]
assert [d["_id"] for d in people.find({"i64": {"$gte": 5.0}, "d": 5})] == [7]
assert people.find_one({"_id": "joe"}, {"addresses.city": 1, "_id": 0}) == {"addresses": [{"city": "Faketon"}, {"city": "Boston"}]}
assert [d["name"] for d in people.find({"name": {"$exists": True}}).sort("name", -1)] == ["no id", "Joe Bookreader"]
batches = list(people.find({}, batch_size=1))
assert len(batches) == 4 and people.estimated_document_count() == 4
assert people.delete_one({"_id": nid}).deleted_count == 1
try:
    people.insert_many([{"_id": "new1"}, {"_id": "joe"}, {"_id": "new2"}])
    raise AssertionError("duplicate accepted")
except Exception as e:
    err = e.details["writeErrors"][0]
    assert (err["index"], err["code"], err["keyValue"]) == (1, 11000, {"_id": "joe"}), e.details
    assert e.details["nInserted"] == 1
assert people.find_one({"_id": "new2"}) is None
deep = {}
for _ in range(120):
    deep = {"a": deep}
assert code_of(lambda: people.insert_one(deep)) == 15
deep_and = {"name": "x"}
for _ in range(95):
    deep_and = {"$and": [deep_and]}
assert list(people.find(deep_and)) == []
assert c.list_database_names() == ["library"] and c.library.list_collection_names() == ["patrons"]
assert sorted(people.distinct("addresses.city")) == ["Boston", "Faketon"]
assert people.distinct("i64", {"_id": 7}) == [5]
assert [i["name"] for i in people.list_indexes()] == ["_id_"]
stats = c.library.command("dbStats")
assert (stats["db"], stats["collections"], stats["objects"]) == ("library", 1, 4), stats
assert code_of(lambda: list(c.library.nothing.list_indexes())) in (None, 26)
print(json.dumps({"ok": True}))
"#;
    let Some(result) = python(&server, script) else { return };
    assert_eq!(result, json!({"ok": true}));
    // The same documents over the HTTP API: an ordinary database with revisions and changes.
    let joe = server.get_doc("library%24patrons", "joe");
    assert_eq!(joe["name"], "Joe Bookreader");
    assert_eq!(joe["addresses"][1]["city"], "Boston");
    assert!(joe["_rev"].as_str().is_some_and(|r| r.starts_with("1-")), "{joe}");
    let sammy =
        server.get_doc("library%24patrons", "%7B%22%24oid%22%3A%22612d1e835ebee16872a109a4%22%7D");
    assert_eq!(sammy["id_card"]["issued_on"], json!({"$date": {"$numberLong": "1584403200000"}}));
    let every = server.get_doc("library%24patrons", "%7B%22%24numberInt%22%3A%227%22%7D");
    assert_eq!((&every["i32"], &every["i64"]), (&json!(5), &json!({"$numberLong": "5"})));
    assert_eq!(every["nan"], json!({"$numberDouble": "NaN"}));
    let (_, changes) = server.get("/library%24patrons/_changes");
    assert_eq!(changes["results"].as_array().map(Vec::len), Some(5), "{changes}");
}

#[test]
fn oversized_messages_are_refused_on_a_connection_that_stays_usable() {
    let server = Server::start();
    let script = r#"
def op_msg_raw(raw, request_id):
    body = struct.pack("<I", 0) + b"\x00" + raw
    return struct.pack("<iiii", 16 + len(body), request_id, 0, 2013) + body

def op_msg(doc, request_id):
    return op_msg_raw(bson.encode(doc), request_id)

def reply(sock):
    head = b""
    while len(head) < 16:
        head += sock.recv(16 - len(head))
    length = struct.unpack("<i", head[:4])[0]
    body = b""
    while len(body) < length - 16:
        body += sock.recv(length - 16 - len(body))
    return bson.decode(body[5:])

s = socket.create_connection(tuple([ADDR.split(":")[0], int(ADDR.split(":")[1])]))
s.sendall(op_msg({"hello": 1, "$db": "admin"}, 1))
assert reply(s)["isWritablePrimary"] is True
# A 17 MB document inside a command: BSONObjectTooLarge, connection kept.
big = {"insert": "c", "documents": [{"x": "y" * (17 * 1024 * 1024)}], "$db": "t"}
s.sendall(op_msg(big, 2))
r = reply(s)
assert (r["ok"], r["code"], r["codeName"]) == (0.0, 10334, "BSONObjectTooLarge"), r
# A message over 48 MB: read past, refused, connection kept.
huge = struct.pack("<iiii", 49_000_016, 3, 0, 2013) + b"\x00" * 49_000_000
s.sendall(huge)
r = reply(s)
assert (r["ok"], r["code"]) == (0.0, 10334), r
# Garbage BSON: InvalidBSON.
bad = struct.pack("<iiii", 16 + 5 + 5, 4, 0, 2013) + struct.pack("<I", 0) + b"\x00" + b"\x05\x00\x00\x00\x01"
s.sendall(bad)
r = reply(s)
assert (r["ok"], r["code"]) == (0.0, 22), r
# Nesting past 200 levels: refused before decoding (decoding recurses).
inner = b"\x05\x00\x00\x00\x00"
for _ in range(5000):
    element = b"\x03a\x00" + inner
    inner = struct.pack("<i", 4 + len(element) + 1) + element + b"\x00"
cmd = bson.encode({"ping": 1, "$db": "admin"})
body = cmd[4:-1] + b"\x03x\x00" + inner
s.sendall(op_msg_raw(struct.pack("<i", 4 + len(body) + 1) + body + b"\x00", 8))
r = reply(s)
assert (r["ok"], r["code"], r["codeName"]) == (0.0, 15, "Overflow"), r
# An unknown command, then a working one on the same socket.
s.sendall(op_msg({"frobnicate": 1, "$db": "admin"}, 5))
r = reply(s)
assert (r["code"], r["errmsg"]) == (59, "no such command: 'frobnicate'"), r
s.sendall(op_msg({"ping": 1, "$db": "admin"}, 6))
r = reply(s)
assert (r["ok"], sorted(r)) == (1.0, ["$clusterTime", "ok", "operationTime"]), r
# Unauthenticated data access on this raw connection: Unauthorized.
s.sendall(op_msg({"find": "c", "$db": "t"}, 7))
r = reply(s)
assert (r["code"], r["codeName"]) == (13, "Unauthorized"), r
print(json.dumps({"ok": True}))
"#;
    let Some(result) = python(&server, script) else { return };
    assert_eq!(result, json!({"ok": true}));
}

#[test]
fn users_of_the_http_api_authenticate_and_meet_the_same_rules() {
    let server = Server::start_with(&["--pbkdf2-iterations", "4096"], &[]);
    let user = json!({"name": "hana", "password": "pass word", "roles": [], "type": "user"});
    server.put_doc("_users", "org.couchdb.user:hana", &user);
    server.create_db("shop$orders");
    let script = r#"
hana = client(user="hana", password="pass word")
assert hana.admin.command("connectionStatus")["authInfo"]["authenticatedUsers"] == [{"user": "hana", "db": "admin"}]
# Not a member of shop$orders (admin-only security): reads and writes are refused.
assert code_of(lambda: hana.shop.orders.find_one()) == 13
try:
    hana.shop.orders.insert_one({"_id": "o1"})
    raise AssertionError("insert accepted")
except OperationFailure as e:
    assert e.code == 13, e.details
# Creating collections is for server admins, as creating databases is.
try:
    hana.shop.newcoll.insert_one({"_id": "x"})
    raise AssertionError("create accepted")
except OperationFailure as e:
    assert e.code == 13, e.details
admin = client()
admin.shop.command("create", "orders")
admin.shop.orders.insert_one({"_id": "keep", "total": 1})
# Every other write path is refused for a non-member too, and changes nothing.
attempts = [
    lambda: hana.shop.orders.update_one({"_id": "keep"}, {"$set": {"total": 2}}),
    lambda: hana.shop.orders.update_one({"_id": "new"}, {"$set": {"total": 2}}, upsert=True),
    lambda: hana.shop.orders.replace_one({"_id": "keep"}, {"total": 3}),
    lambda: hana.shop.orders.delete_one({"_id": "keep"}),
    lambda: hana.shop.orders.find_one_and_delete({"_id": "keep"}),
    lambda: hana.shop.orders.find_one_and_update({"_id": "keep"}, {"$inc": {"total": 1}}),
    lambda: hana.shop.orders.drop(),
    lambda: hana.drop_database("shop"),
    lambda: hana.shop.command("create", "other"),
    lambda: hana.shop.orders.distinct("total"),
    lambda: hana.shop.command("count", "orders"),
    lambda: hana.shop.command("dbStats"),
]
codes = [code_of(attempt) for attempt in attempts]
# dbStats answers, over the collections the user may read: none.
assert codes == [13] * 11 + [None], codes
assert hana.shop.command("dbStats")["collections"] == 0
assert admin.shop.orders.find_one({"_id": "keep"}) == {"_id": "keep", "total": 1}
assert admin.shop.list_collection_names() == ["orders"]
assert admin.shop.orders.estimated_document_count() == 1
# What a non-member may list: nothing of shop.
assert hana.list_database_names() == [] and hana.shop.list_collection_names() == []
print(json.dumps({"ok": True}))
"#;
    let Some(result) = python(&server, script) else { return };
    assert_eq!(result, json!({"ok": true}));
    let (status, _) =
        server.put("/shop%24orders/_security", &json!({"members": {"names": ["hana"]}}));
    assert_eq!(status, 200);
    let script = r#"
hana = client(user="hana", password="pass word")
hana.shop.orders.insert_one({"_id": "o1", "total": Int64(1200)})
assert hana.shop.orders.find_one({"total": 1200}) == {"_id": "o1", "total": 1200}
print(json.dumps({"ok": True}))
"#;
    let Some(result) = python(&server, script) else { return };
    assert_eq!(result, json!({"ok": true}));
    let order = server.get_doc("shop%24orders", "o1");
    assert_eq!(order["total"], json!({"$numberLong": "1200"}));
}

#[test]
fn updates_and_find_and_modify_write_new_revisions() {
    let server = Server::start();
    let script = r#"
from pymongo import ReturnDocument
from pymongo.errors import WriteError
c = client()
books = c.library.books
books.insert_many([{"_id": "b1", "title": "Dune", "stock": 3, "tags": ["sf"]},
                   {"_id": "b2", "title": "Emma", "stock": 1},
                   {"_id": "b3", "title": "Kim", "stock": 0}])
r = books.update_one({"_id": "b1"}, {"$set": {"publisher.name": "Chilton"}, "$inc": {"stock": -1}, "$unset": {"tags": ""}})
assert (r.matched_count, r.modified_count) == (1, 1)
assert books.find_one({"_id": "b1"}) == {"_id": "b1", "title": "Dune", "stock": 2, "publisher": {"name": "Chilton"}}
r = books.update_one({"_id": "b1"}, {"$set": {"stock": 2}})
assert (r.matched_count, r.modified_count) == (1, 0)
r = books.update_many({"stock": {"$lt": 2}}, {"$inc": {"stock": Int64(10)}})
assert (r.matched_count, r.modified_count) == (2, 2)
assert books.find_one({"_id": "b3"})["stock"] == 10 and isinstance(books.find_one({"_id": "b3"})["stock"], Int64)
r = books.replace_one({"_id": "b2"}, {"title": "Emma", "author": "Austen"})
assert books.find_one({"_id": "b2"}) == {"_id": "b2", "title": "Emma", "author": "Austen"}
r = books.update_one({"title": "Ulysses"}, {"$set": {"stock": 1}, "$setOnInsert": {"new": True}}, upsert=True)
assert r.upserted_id is not None and r.matched_count == 0
assert books.find_one({"title": "Ulysses"}, {"_id": 0}) == {"title": "Ulysses", "new": True, "stock": 1}
got = books.find_one_and_update({"_id": "b3"}, {"$inc": {"stock": 1}}, return_document=ReturnDocument.AFTER, projection={"stock": 1})
assert got == {"_id": "b3", "stock": 11}, got
got = books.find_one_and_update({"_id": "zz"}, {"$set": {"a": 1}}, upsert=True, return_document=ReturnDocument.AFTER)
assert got == {"_id": "zz", "a": 1}, got
gone = books.find_one_and_delete({"title": "Kim"})
assert gone["_id"] == "b3" and books.find_one({"_id": "b3"}) is None
assert books.find_one_and_update({"_id": "none"}, {"$set": {"a": 1}}) is None
def write_code(fn):
    try:
        fn()
    except WriteError as e:
        return e.code
    except OperationFailure as e:
        return e.code
codes = [
    write_code(lambda: books.update_one({"_id": "b1"}, {"$set": {"a": 1}, "$inc": {"a": 1}})),
    write_code(lambda: books.update_one({"_id": "b1"}, {"$inc": {"title": 1}})),
    write_code(lambda: books.update_one({"_id": "b1"}, {"$set": {"_id": "other"}})),
    write_code(lambda: books.update_one({"_id": "b1"}, {"$push": {"title": "x"}})),
    write_code(lambda: books.update_one({"_id": "b1"}, {"$frob": {"tags": "x"}})),
]
assert codes == [40, 14, 66, 2, 9], codes
print(json.dumps({"ok": True}))
"#;
    let Some(result) = python(&server, script) else { return };
    assert_eq!(result, json!({"ok": true}));
    let dune = server.get_doc("library%24books", "b1");
    assert!(dune["_rev"].as_str().is_some_and(|r| r.starts_with("2-")), "{dune}");
    assert_eq!(dune["publisher"], json!({"name": "Chilton"}));
    let (status, _) = server.get("/library%24books/b3");
    assert_eq!(status, 404);
}

#[test]
fn cursors_page_through_answers_with_get_more() {
    let server = Server::start();
    let script = r#"
c = client()
events = c.iot.events
events.insert_many([{"_id": f"e{i:04}", "n": i, "even": i % 2 == 0} for i in range(450)])
ids = [d["_id"] for d in events.find({}, batch_size=100)]
assert ids == [f"e{i:04}" for i in range(450)], len(ids)
evens = [d["n"] for d in events.find({"even": True}, batch_size=7).skip(5).limit(40)]
assert evens == list(range(10, 90, 2)), evens
top = [d["n"] for d in events.find({"n": {"$gte": 400}}, batch_size=3).sort("n", -1)]
assert top == list(range(449, 399, -1)), top
cur = events.find({}, batch_size=2)
first = next(cur)
cur.close()
cid = c.iot.command("find", "events", batchSize=2)["cursor"]["id"]
assert cid != 0
killed = c.iot.command("killCursors", "events", cursors=[cid, Int64(12345)])
assert killed["cursorsKilled"] == [cid] and killed["cursorsNotFound"] == [12345], killed
assert code_of(lambda: c.iot.command("getMore", Int64(cid), collection="events")) == 43
mixed = c.iot.mixed
values = ["b", 2, ObjectId("65a1b2c3d4e5f60718293a4b"), None, True, 1.5, {"x": 1}, [0],
          datetime.datetime(2020, 1, 1), MaxKey(), MinKey(), "A", Int64(3)]
mixed.insert_many([{"_id": i, "v": v} for i, v in enumerate(values)])
order = [d["_id"] for d in mixed.find().sort("v", 1)]
# An array sorts as its smallest element ascending, its largest descending.
assert order == [10, 3, 7, 5, 1, 12, 11, 0, 6, 2, 4, 8, 9], order
assert [d["_id"] for d in mixed.find({"_id": {"$in": [7, 5, 1]}}).sort("v", -1)] == [1, 5, 7]
assert [d["_id"] for d in mixed.find({"v": {"$type": "objectId"}})] == [2]
assert [d["_id"] for d in mixed.find({"v": {"$gte": 2}})] == [1, 12]
single = c.iot.command("find", "events", batchSize=5, singleBatch=True)["cursor"]
assert single["id"] == 0 and len(single["firstBatch"]) == 5
print(json.dumps({"ok": True}))
"#;
    let Some(result) = python(&server, script) else { return };
    assert_eq!(result, json!({"ok": true}));
}

#[test]
fn documents_written_over_http_read_over_mongodb() {
    let server = Server::start();
    server.create_db("shop$items");
    let doc = json!({"n": 1, "x": 1.5, "big": 3_000_000_000_i64, "s": "str",
                     "oid": {"$oid": "65a1b2c3d4e5f60718293a4b"}, "tags": ["a", "b"]});
    server.put_doc("shop$items", "i1", &doc);
    let script = r#"
c = client()
got = c.shop.items.find_one({"_id": "i1"})
assert got == {"_id": "i1", "n": 1, "x": 1.5, "big": 3000000000, "s": "str",
               "oid": ObjectId("65a1b2c3d4e5f60718293a4b"), "tags": ["a", "b"]}, got
assert type(got["n"]) is int and type(got["x"]) is float and isinstance(got["big"], int)
raw = c.shop.get_collection("items", codec_options=bson.CodecOptions(document_class=RawBSONDocument)).find_one()
# int32, double, int64 on the wire.
assert [bson.decode(raw.raw)[k].__class__.__name__ for k in ("n", "x")] == ["int", "float"]
assert c.shop.items.find_one({"tags": "b", "n": 1.0})["_id"] == "i1"
# A database written over HTTP answers aggregate as any collection does.
got = list(c.shop.items.aggregate([{"$match": {"tags": "a"}}, {"$unwind": "$tags"},
    {"$group": {"_id": "$_id", "tags": {"$push": "$tags"}, "big": {"$max": "$big"}}}]))
assert got == [{"_id": "i1", "tags": ["a", "b"], "big": 3000000000}], got
r = c.shop.items.update_one({"_id": "i1"}, {"$inc": {"n": 1}})
assert r.modified_count == 1
assert c.admin.command("listDatabases", filter={"name": {"$regex": "^sh"}}, nameOnly=True)["databases"] == [{"name": "shop"}]
assert c.shop.list_collection_names(filter={"name": "items"}) == ["items"]
assert c.shop.list_collection_names(filter={"name": "nothing"}) == []
print(json.dumps({"ok": True}))
"#;
    let Some(result) = python(&server, script) else { return };
    assert_eq!(result, json!({"ok": true}));
    let item = server.get_doc("shop$items", "i1");
    assert_eq!(
        (&item["n"], &item["x"], &item["big"]),
        (&json!(2), &json!(1.5), &json!(3_000_000_000_i64))
    );
    assert!(item["_rev"].as_str().is_some_and(|r| r.starts_with("2-")), "{item}");
}

/// SCRAM proofs cost the server nothing to check, so guessing over MongoDB must meet the
/// same lockout as HTTP logins (issue 11): one count per address and account, shared by both
/// protocols; MongoDB's answer stays the plain AuthenticationFailed.
#[test]
fn failed_scram_proofs_lock_the_account_for_both_protocols() {
    let server = Server::start();
    let script = r#"
for _ in range(5):
    assert code_of(lambda: client(password="wrong").admin.command("ping")) == 18
assert code_of(lambda: client().admin.command("ping")) == 18
print(json.dumps({"locked": True}))
"#;
    let Some(result) = python(&server, script) else { return };
    assert_eq!(result, json!({"locked": true}));
    let reason = "Account is temporarily locked due to multiple authentication failures";
    crate::harness::assert_error(server.get("/_all_dbs"), 403, "forbidden", reason);
}

/// Server admins are the engine's, read at each login: one removed through `_config` can no
/// longer log in over MongoDB either (the front end once kept its own list from start-up).
#[test]
fn an_admin_removed_through_config_cannot_log_in_over_mongodb() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("bunko.toml");
    std::fs::write(&path, "[admins]\nbob = \"bobpw\"\n").expect("config");
    let server = Server::start_with(&["--config", path.to_str().expect("utf-8")], &[]);
    let login_as_bob = r#"
print(json.dumps({"code": code_of(lambda: client(user="bob", password="bobpw").admin.command("listDatabases"))}))
"#;
    let Some(before) = python(&server, login_as_bob) else { return };
    assert_eq!(before, json!({"code": null}), "bob is an admin over MongoDB");
    let (status, _) = server.delete("/_node/_local/_config/admins/bob");
    assert_eq!(status, 200);
    let after = python(&server, login_as_bob).expect("pymongo is installed");
    assert_eq!(after, json!({"code": 18}), "removed admins are refused at once");
}

/// The data-modeling advisor as a MongoDB command (issue 18): the same findings as
/// `GET /{db}/_advise`, for the collection's database admins only.
#[test]
fn the_advisor_answers_db_run_command_advise() {
    let server = Server::start_with(&["--pbkdf2-iterations", "10"], &[]);
    let user = json!({"name": "amy", "password": "pw", "roles": [], "type": "user"});
    assert_eq!(server.put("/_users/org.couchdb.user:amy", &user).0, 201);
    let script = r#"
c = client()
shop = c.shop
shop.products.insert_many([
    {"_id": f"product-{p:02}", "name": "Widget", "reviews": [{"stars": 5} for _ in range(600 + p if p < 3 else 5)]}
    for p in range(20)
])
advice = shop.command("advise", "products", sampleSize=100)
rules = [f["rule"] for f in advice["findings"]]
longest = [f["evidence"]["longest"] for f in advice["findings"] if f["rule"] == "unbounded-array"]
denied = code_of(lambda: client(user="amy", password="pw").shop.command("advise", "products"))
missing = code_of(lambda: shop.command("advise", "nothing"))
bad = code_of(lambda: shop.command("advise", "products", sampleSize=0))
print(json.dumps({"rules": rules, "longest": longest, "codes": [denied, missing, bad]}))
"#;
    let Some(result) = python(&server, script) else { return };
    assert_eq!(result["rules"], json!(["unbounded-array"]), "{result}");
    assert_eq!(result["longest"], json!([{"id": "product-02", "length": 602}]));
    assert_eq!(result["codes"], json!([13, 26, 2]), "not admin, no collection, bad sample size");
}

/// Procedures over the MongoDB protocol (issue 15, point 5): the subset pattern as one
/// `callProcedure`, all or nothing; a refusal is DocumentValidationFailure and writes nothing.
#[test]
fn procedures_run_through_call_procedure() {
    let server = Server::start();
    server.create_db("shop$products");
    let review = "function (arg, db, userCtx) {
        if (arg.stars < 1) { throw({forbidden: 'stars must be at least 1'}); }
        var product = db.get(arg.product);
        var review = {_id: arg.id, product_id: arg.product, stars: arg.stars};
        db.put(review);
        product.reviews = [review].concat(product.reviews || []).slice(0, 2);
        db.put(product);
        return {newest: product.reviews.length, by: userCtx.name};
    }";
    let ddoc = json!({"procedures": {"review": review}});
    server.put_doc("shop$products", "_design/shop", &ddoc);
    let script = r#"
c = client()
products = c.shop.products
products.insert_one({"_id": "p1", "name": "Widget", "reviews": []})
call = lambda arg: c.shop.command("callProcedure", "products", designDoc="shop", procedure="review", arg=arg)
results = [call({"product": "p1", "id": f"r{i}", "stars": 4})["result"] for i in range(3)]
refused = code_of(lambda: call({"product": "p1", "id": "r9", "stars": 0}))
missing = code_of(lambda: c.shop.command("callProcedure", "products", designDoc="shop", procedure="nope"))
product = products.find_one({"_id": "p1"})
print(json.dumps({"results": results, "refused": refused, "missing": missing,
                  "newest": [r["_id"] for r in product["reviews"]],
                  "reviews": sorted(d["_id"] for d in products.find({"product_id": "p1"}))}))
"#;
    let Some(result) = python(&server, script) else { return };
    assert_eq!(result["results"][2], json!({"newest": 2, "by": "admin"}), "{result}");
    assert_eq!(result["refused"], 121);
    assert_eq!(result["missing"], 26);
    assert_eq!(result["newest"], json!(["r2", "r1"]), "the newest two stay embedded");
    assert_eq!(result["reviews"], json!(["r0", "r1", "r2"]), "r9 was never written");
}

/// MongoDB queries served by a MongoDB index count as that index's use in the advisor's
/// query log (issue 18, rule 5), so only the index no query chose is reported unused, with
/// the MongoDB way to drop it.
#[test]
fn the_advisor_counts_mongodb_index_use() {
    let server = Server::start();
    let script = r#"
c = client()
orders = c.shop.orders
orders.insert_many([{"_id": i, "customer": f"c{i % 10}", "status": "paid"} for i in range(200)])
orders.create_index("customer")
orders.create_index("status")
for i in range(120):
    assert len(list(orders.find({"customer": f"c{i % 10}"}))) == 20
advice = c.shop.command("advise", "orders")
unused = [f for f in advice["findings"] if f["rule"] == "unused-index"]
print(json.dumps({"unused": [f["evidence"]["index"]["name"] for f in unused],
                  "how": [f["suggestion"] for f in unused]}))
"#;
    let Some(result) = python(&server, script) else { return };
    assert_eq!(result["unused"], json!(["status_1"]), "{result}");
    let how = result["how"][0].as_str().unwrap_or_default();
    assert!(how.contains("dropIndex(\"status_1\")"), "{how}");
}

/// A MongoDB query that scans the collection gets the MongoDB index to create (issue 18,
/// rule 4): `db.<coll>.createIndex(...)`, not a Mango `_index` body.
#[test]
fn the_advisor_suggests_create_index_for_a_mongodb_collection_scan() {
    let server = Server::start();
    let script = r#"
c = client()
orders = c.shop.orders
orders.insert_many([{"_id": i, "customer": f"c{i % 50}", "total": i} for i in range(500)])
for i in range(5):
    assert len(list(orders.find({"customer": f"c{i}", "total": {"$gte": 0}}))) == 10
advice = c.shop.command("advise", "orders")
print(json.dumps({"findings": advice["findings"]}))
"#;
    let Some(result) = python(&server, script) else { return };
    let findings = result["findings"].as_array().cloned().unwrap_or_default();
    assert_eq!(findings.len(), 1, "{result}");
    let (f, e) = (&findings[0], &findings[0]["evidence"]);
    assert_eq!(f["rule"], "missing-index");
    assert_eq!(e["api"], "mongodb");
    assert_eq!(
        e["selector"],
        json!({"$and": [{"customer": {"$eq": "?"}}, {"total": {"$gte": "?"}}]})
    );
    assert_eq!((e["runs"].clone(), e["docs_examined"].clone()), (json!(5), json!(2500)));
    assert_eq!(e["suggested_index"], json!(["customer", "total"]));
    assert_eq!(e["planner_would_choose_it"], true);
    let how = f["suggestion"].as_str().unwrap_or_default();
    assert!(how.contains("db.orders.createIndex({customer: 1, total: 1})"), "{how}");
    assert!(!how.contains("_index"), "{how}");
}

/// Rule 8 over MongoDB (issue 18): an aggregation that chains `$lookup`s to read an order
/// with its customer and products is reported with the pipeline's shape and the joined
/// collections; the embedded model, read by `find` and a pipeline without `$lookup`,
/// reports nothing.
#[test]
fn the_advisor_reports_lookup_chains_and_passes_embedded_orders() {
    let server = Server::start();
    let script = r#"
c = client()
shop = c.shop
shop.customers.insert_many([{"_id": f"c{i}", "name": f"Customer {i}"} for i in range(5)])
shop.products.insert_many([{"_id": f"p{i}", "name": f"Product {i}"} for i in range(5)])
shop.orders.insert_many([{"_id": i, "customer_id": f"c{i % 5}", "product_ids": [f"p{i % 5}"]} for i in range(20)])
chain = [
    {"$match": {"_id": {"$lt": 5}}},
    {"$lookup": {"from": "customers", "localField": "customer_id", "foreignField": "_id", "as": "customer"}},
    {"$lookup": {"from": "products", "localField": "product_ids", "foreignField": "_id", "as": "products"}},
]
for _ in range(12):
    rows = list(shop.orders.aggregate(chain))
    assert len(rows) == 5 and rows[0]["customer"][0]["name"] == "Customer 0", rows
bad = shop.command("advise", "orders")["findings"]

shop.embedded.insert_many([{"_id": i, "customer": {"id": f"c{i % 5}", "name": f"Customer {i % 5}"},
                            "items": [{"product_id": f"p{i % 5}", "name": f"Product {i % 5}"}]}
                           for i in range(20)])
for _ in range(12):
    rows = list(shop.embedded.aggregate([{"$match": {"_id": {"$lt": 5}}}, {"$project": {"customer.name": 1, "items": 1}}]))
    assert len(rows) == 5 and rows[0]["customer"]["name"] == "Customer 0", rows
    assert shop.embedded.find_one({"_id": 3})["items"][0]["name"] == "Product 3"
good = shop.command("advise", "embedded")["findings"]
print(json.dumps({"bad": bad, "good": good}))
"#;
    let Some(result) = python(&server, script) else { return };
    assert_eq!(result["good"], json!([]), "false alarm on the embedded model: {result}");
    let bad = result["bad"].as_array().cloned().unwrap_or_default();
    let rules: Vec<&Value> = bad.iter().map(|f| &f["rule"]).collect();
    assert_eq!(rules, [&json!("lookup-chain")], "{result}");
    let e = &bad[0]["evidence"];
    assert_eq!(e["lookups_per_run"], 2);
    assert_eq!(e["joined"], json!(["customers", "products"]));
    assert_eq!(e["runs"], 12);
    assert_eq!(e["pipeline"][1]["$lookup"]["localField"], "?");
    let how = bad[0]["suggestion"].as_str().unwrap_or_default();
    assert!(how.contains("embed") && how.contains("$merge"), "{how}");
}
