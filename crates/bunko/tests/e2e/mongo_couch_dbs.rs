//! CouchDB databases without `$` seen through the MongoDB wire protocol (issue 14, point 5,
//! "and the other way round"): the database `people` created over HTTP is the collection
//! `_couchdb.people`. These tests write over one API and read over the other with pymongo:
//! `find`, `aggregate` (`$group`, `$lookup`, `$unionWith`, `$out`, `$merge`), writes that
//! make new revisions, a change stream that sees an HTTP write, the listings, a member-only
//! database that refuses a non-member exactly as HTTP does, partitioned databases, and the
//! authentication database when it is one of them.

use serde_json::{Value, json};

use crate::harness::{Server, enc};
use crate::mongo::python;

const PASSWORD: &str = "pw";

fn add_user(s: &Server, name: &str, roles: Value) {
    let user = json!({"name": name, "password": PASSWORD, "roles": roles, "type": "user"});
    s.put_doc("_users", &format!("org.couchdb.user:{name}"), &user);
}

/// `people` (three documents) and `cities`, written over HTTP; `shop.books` over MongoDB.
fn set_up_people(s: &Server) {
    s.create_db("people");
    s.create_db("cities");
    for (id, name, city, age) in
        [("ann", "Ann", "kyoto", 31), ("bob", "Bob", "osaka", 40), ("cy", "Cy", "kyoto", 25)]
    {
        s.put_doc("people", id, &json!({"name": name, "city": city, "age": age}));
    }
    s.put_doc("cities", "kyoto", &json!({"pref": "Kyoto"}));
    s.put_doc("cities", "osaka", &json!({"pref": "Osaka"}));
}

#[test]
fn a_couchdb_database_is_a_collection_of_couchdb_over_mongodb() {
    let server = Server::start();
    set_up_people(&server);
    let script = r#"
c = client()
c.shop.books.insert_one({"_id": "b1"})
db = c["_couchdb"]
people = db.people
out = {}
out["find"] = [d["name"] for d in people.find({"city": "kyoto"}).sort("age", 1)]
out["one"] = people.find_one({"_id": "bob"})
out["count"] = people.count_documents({"age": {"$gt": 30}})
out["distinct"] = sorted(people.distinct("city"))
out["group"] = list(people.aggregate([
    {"$group": {"_id": "$city", "n": {"$sum": 1}, "avg": {"$avg": "$age"}}}, {"$sort": {"_id": 1}}]))
out["lookup"] = list(people.aggregate([
    {"$match": {"_id": "ann"}},
    {"$lookup": {"from": "cities", "localField": "city", "foreignField": "_id", "as": "c"}},
    {"$project": {"_id": 0, "pref": {"$first": "$c.pref"}}}]))
out["union"] = sorted(d["_id"] for d in people.aggregate([
    {"$project": {"_id": 1}}, {"$unionWith": "cities"}]))
people.aggregate([{"$match": {"city": "kyoto"}}, {"$project": {"name": 1}}, {"$out": "kyoto_people"}])
out["out"] = sorted(d["_id"] for d in db.kyoto_people.find())
out["insert"] = people.insert_one({"_id": "dee", "name": "Dee", "city": "nara", "age": 28}).inserted_id
out["update"] = people.update_one({"_id": "ann"}, {"$inc": {"age": 1}}).modified_count
out["delete"] = people.delete_one({"_id": "cy"}).deleted_count
people.aggregate([{"$project": {"city": 1}}, {"$merge": {"into": "merged"}}])
out["merge"] = sorted((d["_id"], d["city"]) for d in db.merged.find())
out["index"] = people.create_index("age")
out["indexed"] = people.find({"age": {"$gte": 30}}).explain()["queryPlanner"]["winningPlan"]
out["colls"] = sorted(db.list_collection_names())
out["dbs"] = sorted(c.list_database_names())
out["stats"] = db.command("collStats", "people")["count"]
print(json.dumps(out, default=str))
"#;
    let Some(out) = python(&server, script) else { return };
    assert_eq!(out["find"], json!(["Cy", "Ann"]));
    assert_eq!(out["one"], json!({"_id": "bob", "name": "Bob", "city": "osaka", "age": 40}));
    assert_eq!(out["count"], 2);
    assert_eq!(out["distinct"], json!(["kyoto", "osaka"]));
    assert_eq!(
        out["group"],
        json!([{"_id": "kyoto", "n": 2, "avg": 28.0}, {"_id": "osaka", "n": 1, "avg": 40.0}])
    );
    assert_eq!(out["lookup"], json!([{"pref": "Kyoto"}]));
    assert_eq!(out["union"], json!(["ann", "bob", "cy", "kyoto", "osaka"]));
    assert_eq!(out["out"], json!(["ann", "cy"]));
    assert_eq!(
        (&out["insert"], &out["update"], &out["delete"]),
        (&json!("dee"), &json!(1), &json!(1))
    );
    assert_eq!(out["index"], "age_1");
    assert!(out["indexed"].to_string().contains("age_1"), "index not used: {}", out["indexed"]);
    assert_eq!(out["merge"], json!([["ann", "kyoto"], ["bob", "osaka"], ["dee", "nara"]]));
    assert_eq!(out["colls"], json!(["cities", "kyoto_people", "merged", "people"]));
    assert_eq!(out["dbs"], json!(["_couchdb", "shop"]));
    assert_eq!(out["stats"], 3);

    // The MongoDB writes are ordinary CouchDB writes: new documents and revisions over HTTP.
    let dee = server.get_doc("people", "dee");
    assert_eq!(dee["name"], "Dee");
    assert!(dee["_rev"].as_str().is_some_and(|r| r.starts_with("1-")), "{dee}");
    let ann = server.get_doc("people", "ann");
    assert_eq!(ann["age"], 32);
    assert!(ann["_rev"].as_str().is_some_and(|r| r.starts_with("2-")), "{ann}");
    assert_eq!(server.get("/people/cy").0, 404);
    let (_, rows) = server.get("/kyoto_people/_all_docs");
    assert_eq!(rows["total_rows"], 2, "$out wrote the CouchDB database kyoto_people: {rows}");
    assert_eq!(server.get_doc("merged", "dee")["city"], "nara", "$merge wrote the database merged");
    // The collection `shop.books` is still `shop$books`, not a CouchDB database of its own.
    assert_eq!(server.get(&format!("/{}", enc("shop$books"))).0, 200);
    assert_eq!(server.get("/books").0, 404);
}

#[test]
fn a_change_stream_on_a_couchdb_database_sees_http_writes() {
    let server = Server::start();
    set_up_people(&server);
    let script = r#"
import faulthandler; faulthandler.dump_traceback_later(60, exit=True)
import threading, urllib.request, base64
c = client()
def put():
    req = urllib.request.Request(os.environ["BUNKO_URL"] + "/people/eve", data=json.dumps({"name": "Eve"}).encode(), method="PUT")
    req.add_header("Content-Type", "application/json")
    req.add_header("Authorization", "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode())
    urllib.request.urlopen(req).read()
out = {}
with c["_couchdb"].people.watch(max_await_time_ms=5000) as s:
    threading.Timer(0.3, put).start()
    e = s.next()
    out["http"] = {k: e[k] for k in ("operationType", "ns", "documentKey", "fullDocument")}
with c["_couchdb"].watch(max_await_time_ms=5000) as s:
    c["_couchdb"].cities.insert_one({"_id": "nara"})
    e = s.next()
    out["db"] = {k: e[k] for k in ("operationType", "ns", "documentKey")}
print(json.dumps(out))
"#;
    let Some(out) = python(&server, script) else { return };
    assert_eq!(
        out["http"],
        json!({"operationType": "insert", "ns": {"db": "_couchdb", "coll": "people"},
               "documentKey": {"_id": "eve"}, "fullDocument": {"_id": "eve", "name": "Eve"}})
    );
    assert_eq!(
        out["db"],
        json!({"operationType": "insert", "ns": {"db": "_couchdb", "coll": "cities"},
               "documentKey": {"_id": "nara"}})
    );
}

/// A member-only CouchDB database gives a MongoDB user exactly the rights the same user has
/// over HTTP: members read and write documents; others are refused; only server admins
/// create and drop databases, and no MongoDB role reaches them.
#[test]
fn a_member_only_couchdb_database_refuses_outsiders_over_mongodb_as_over_http() {
    let server = Server::start();
    add_user(&server, "member", json!(["staff"]));
    add_user(&server, "outsider", json!([]));
    server.create_db("vault");
    server.put_doc("vault", "gold", &json!({"n": 1}));
    let security = json!({"members": {"roles": ["staff"]}, "admins": {"roles": ["boss"]}});
    assert_eq!(server.put("/vault/_security", &security).0, 200);
    let as_user = |user: &str, method, path: &str| {
        crate::harness::send(server.user_req(method, path, user, PASSWORD)).0
    };
    // Over HTTP: the outsider is refused, the member reads and writes, neither creates.
    assert_eq!(as_user("outsider", reqwest::Method::GET, "/vault/gold"), 403);
    assert_eq!(as_user("outsider", reqwest::Method::GET, "/vault/_changes"), 403);
    let put = server.user_req(reqwest::Method::PUT, "/vault/x", "outsider", PASSWORD);
    assert_eq!(crate::harness::send(put.json(&json!({"n": 2}))).0, 403);
    let index = server.user_req(reqwest::Method::POST, "/vault/_index", "member", PASSWORD);
    let index = index.json(&json!({"index": {"fields": ["n"]}}));
    assert_eq!(crate::harness::send(index).0, 403);
    assert_eq!(as_user("member", reqwest::Method::GET, "/vault/gold"), 200);
    assert_eq!(as_user("member", reqwest::Method::PUT, "/fresh"), 401);

    let script = r#"
from pymongo.errors import WriteError
def code(fn):
    try:
        fn()
    except OperationFailure as e:
        return e.code
    return None
out = {}
for name in ("outsider", "member"):
    c = client(user=name, password="pw")
    vault = c["_couchdb"].vault
    out[name] = {
        "find": code(lambda: vault.find_one({"_id": "gold"})),
        "aggregate": code(lambda: list(vault.aggregate([{"$group": {"_id": None, "n": {"$sum": "$n"}}}]))),
        "watch": code(lambda: vault.watch().close()),
        "insert": code(lambda: vault.insert_one({"_id": name})),
        "update": code(lambda: vault.update_one({"_id": "gold"}, {"$set": {"by": name}})),
        "createIndexes": code(lambda: vault.create_index("n")),
        "create": code(lambda: c["_couchdb"].create_collection("fresh")),
        "insert new": code(lambda: c["_couchdb"].fresh.insert_one({"_id": 1})),
        "drop": code(lambda: vault.drop()),
        "colls": sorted(c["_couchdb"].list_collection_names()),
        "dbs": sorted(c.list_database_names()),
    }
admin = client()
out["grant"] = code(lambda: admin.admin.command("createUser", "eve", pwd="pw", roles=[{"role": "readWrite", "db": "_couchdb"}]))
out["dropDatabase"] = code(lambda: admin["_couchdb"].command("dropDatabase"))
print(json.dumps(out))
"#;
    let Some(out) = python(&server, script) else { return };
    let refused = json!({
        "find": 13, "aggregate": 13, "watch": 13, "insert": 13, "update": 13,
        "createIndexes": 13, "create": 13, "insert new": 13, "drop": 13, "colls": [], "dbs": [],
    });
    assert_eq!(out["outsider"], refused);
    let member = json!({
        "find": null, "aggregate": null, "watch": null, "insert": null, "update": null,
        "createIndexes": 13, "create": 13, "insert new": 13, "drop": 13,
        "colls": ["vault"], "dbs": ["_couchdb"],
    });
    assert_eq!(out["member"], member);
    assert_eq!(out["grant"], 238, "a role on _couchdb would widen CouchDB databases' rights");
    assert_eq!(out["dropDatabase"], 20);

    // What the admin reads afterwards: the member's writes, nothing else.
    let gold = server.get_doc("vault", "gold");
    assert_eq!((gold["n"].clone(), gold["by"].clone()), (json!(1), json!("member")));
    assert_eq!(server.get("/vault/member").0, 200);
    assert_eq!(server.get("/vault/outsider").0, 404);
    assert_eq!(server.get("/fresh").0, 404);
    assert_eq!(server.get("/vault/_security").1, security);
    assert_eq!(server.get("/vault/_index").1["total_rows"], 1, "only _all_docs");
}

#[test]
fn admins_create_and_drop_couchdb_databases_over_mongodb() {
    let server = Server::start();
    let script = r#"
c = client()
db = c["_couchdb"]
out = {}
db.create_collection("fresh")
db.made.insert_one({"_id": "x", "v": 1})
out["colls"] = sorted(db.list_collection_names())
out["bad"] = code_of(lambda: db["Caps"].insert_one({"_id": 1}))
out["system"] = code_of(lambda: db["_users"].find_one())
print(json.dumps(out))
"#;
    let Some(out) = python(&server, script) else { return };
    assert_eq!(out["colls"], json!(["fresh", "made"]));
    assert_eq!((&out["bad"], &out["system"]), (&json!(73), &json!(73)));
    // A plain CouchDB database with CouchDB's default `_security`, no MongoDB roles.
    assert_eq!(server.get_doc("made", "x")["v"], 1);
    let (_, security) = server.get("/fresh/_security");
    assert!(!security.to_string().contains("readWrite"), "{security}");
    let script = r#"
c = client()
c["_couchdb"].fresh.drop()
print(json.dumps(sorted(c["_couchdb"].list_collection_names())))
"#;
    assert_eq!(python(&server, script), Some(json!(["made"])));
    assert_eq!(server.get("/fresh").0, 404);
}

/// Documents of a partitioned database have string ids `partition:docid`, which are plain
/// MongoDB string `_id`s; an `_id` without a partition is refused with `BadValue`.
#[test]
fn a_partitioned_couchdb_database_over_mongodb() {
    let server = Server::start();
    assert_eq!(server.put_empty("/sensors?partitioned=true").0, 201);
    server.put_doc("sensors", "dev1:r1", &json!({"t": 20}));
    server.put_doc("sensors", "dev2:r1", &json!({"t": 30}));
    let script = r#"
c = client()
s = c["_couchdb"].sensors
out = {}
out["insert"] = s.insert_one({"_id": "dev1:r2", "t": 22}).inserted_id
out["find"] = [d["_id"] for d in s.find({"_id": {"$regex": "^dev1:"}}).sort("_id", 1)]
out["avg"] = list(s.aggregate([{"$group": {"_id": {"$first": {"$split": ["$_id", ":"]}}, "t": {"$avg": "$t"}}}, {"$sort": {"_id": 1}}]))
from pymongo.errors import WriteError
for name, doc in (("no partition", {"_id": "nopart", "t": 1}), ("no id", {"t": 1})):
    try:
        s.insert_one(doc)
        out[name] = None
    except WriteError as e:
        out[name] = [e.code, e.details["errmsg"]]
out["count"] = s.count_documents({})
print(json.dumps(out))
"#;
    let Some(out) = python(&server, script) else { return };
    assert_eq!(out["insert"], "dev1:r2");
    assert_eq!(out["find"], json!(["dev1:r1", "dev1:r2"]));
    assert_eq!(out["avg"], json!([{"_id": "dev1", "t": 21.0}, {"_id": "dev2", "t": 30.0}]));
    assert_eq!(out["no partition"], json!([2, "Doc id must be of form partition:id"]));
    let no_id = "Doc id must be of form partition:id (a partitioned database takes string _ids)";
    assert_eq!(out["no id"], json!([2, no_id]));
    assert_eq!(out["count"], 3);
    let (_, part) = server.get("/sensors/_partition/dev1/_all_docs");
    assert_eq!(part["rows"].as_array().map(Vec::len), Some(2), "{part}");
}

/// The authentication database may be a CouchDB database without `$` (`[chttpd_auth]
/// authentication_db = kaiin`), so it is the collection `_couchdb.kaiin`: even its members
/// read only their own document, as over HTTP, and no change stream hands out the others
/// (the change journal's bodies would bypass the read gate's per-document rule).
#[test]
fn a_users_database_without_dollar_shows_a_user_only_their_own_document() {
    let server = Server::start_with(&["--pbkdf2-iterations", "10"], &[]);
    let config = "/_node/_local/_config";
    assert_eq!(
        server.put(&format!("{config}/chttpd_auth/authentication_db"), &json!("kaiin")).0,
        200
    );
    let editable = format!("{config}/couchdb/users_db_security_editable");
    assert_eq!(server.put(&editable, &json!("true")).0, 200);
    // bob is a member of both: the per-document rule is what still hides vic's document.
    let security = json!({"members": {"names": ["bob"]}});
    for db in ["kaiin", "notes"] {
        server.create_db(db);
        assert_eq!(server.put(&format!("/{db}/_security"), &security).0, 200);
    }
    for name in ["bob", "vic"] {
        let user = json!({"name": name, "password": PASSWORD, "roles": [], "type": "user"});
        server.put_doc("kaiin", &format!("org.couchdb.user:{name}"), &user);
    }
    let script = r#"
import faulthandler; faulthandler.dump_traceback_later(60, exit=True)
import threading
c = client(user="bob", password="pw")
admin = client()
out = {"find": [d["_id"] for d in c["_couchdb"].kaiin.find()]}
out["watch"] = code_of(lambda: c["_couchdb"].kaiin.watch().close())
def writes():
    admin["_couchdb"].kaiin.update_one({"_id": "org.couchdb.user:vic"}, {"$set": {"note": "x"}})
    admin["_couchdb"].notes.insert_one({"_id": "n1"})
with c["_couchdb"].watch(max_await_time_ms=5000) as s:
    threading.Timer(0.3, writes).start()
    e = s.next()
    out["first event"] = [e["ns"]["coll"], e["documentKey"]["_id"]]
print(json.dumps(out))
"#;
    let Some(out) = python(&server, script) else { return };
    assert_eq!(out["find"], json!(["org.couchdb.user:bob"]));
    assert_eq!(out["watch"], 13);
    assert_eq!(out["first event"], json!(["notes", "n1"]));
    let (_, vic) = server.get("/kaiin/org.couchdb.user:vic");
    assert_eq!(vic["note"], "x", "the admin's write happened: {vic}");
}
