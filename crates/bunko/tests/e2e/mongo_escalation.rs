//! Privilege escalation through the MongoDB write commands (issue 13; the HTTP routes are
//! `escalation.rs`). Every MongoDB write reaches the engine's write gate with the
//! connection's user, so these tests try, through pymongo, what a database member (not its
//! admin), a user who is no member and an anonymous client must not do: write where they are
//! no member, create or drop collections and databases, rename them, create or drop indexes,
//! set validators (all writes of the collection's design document `_design/mongodb`),
//! `$out`/`$merge` elsewhere, the same inside transactions, and manage users. Each attempt
//! must be MongoDB's `Unauthorized` (13), and afterwards reads show nothing changed.

use serde_json::{Value, json};

use crate::harness::Server;
use crate::mongo::python;

const PASSWORD: &str = "pw";

/// `shop.orders` (mallory is a member through the role `reader`, with an index and a
/// document) and `shop.secret` (admin-only).
fn set_up(s: &Server) {
    for (name, roles) in [("mallory", json!(["reader"])), ("outsider", json!([]))] {
        let user = json!({"name": name, "password": PASSWORD, "roles": roles, "type": "user"});
        s.put_doc("_users", &format!("org.couchdb.user:{name}"), &user);
    }
    let script = r#"
c = client()
c.shop.orders.insert_one({"_id": "keep", "n": 1})
c.shop.orders.create_index("n")
c.shop.secret.insert_one({"_id": "s", "n": 1})
print(json.dumps({"ok": True}))
"#;
    let Some(done) = python(s, script) else { return };
    assert_eq!(done, json!({"ok": true}));
    let security = json!({"members": {"roles": ["reader"]}});
    assert_eq!(s.put("/shop%24orders/_security", &security).0, 200);
}

/// Every attempt, run as `USER_NAME` (none: anonymous); prints the ones not refused with
/// `Unauthorized`, then what an admin reads afterwards.
const ATTACK: &str = r#"
from pymongo.errors import BulkWriteError
name = os.environ["USER_NAME"] or None
c = client(user=name, password=os.environ["USER_PASSWORD"])
orders, secret = c.shop.orders, c.shop.secret

def txn(fn):
    with c.start_session() as s:
        with s.start_transaction():
            fn(s)

attempts = {
    "insert secret": lambda: secret.insert_one({"_id": "x"}),
    "insert many secret": lambda: secret.insert_many([{"_id": "x"}, {"_id": "y"}], ordered=False),
    "insert new collection": lambda: c.shop.newcoll.insert_one({"_id": "x"}),
    "insert _users": lambda: c["_users"]["users"].insert_one({"_id": "org.couchdb.user:eve", "roles": ["_admin"]}),
    "insert admin.system.users": lambda: c.admin["system.users"].insert_one({"_id": "admin.eve"}),
    "update secret": lambda: secret.update_one({"_id": "s"}, {"$set": {"n": 2}}),
    "update many secret": lambda: secret.update_many({}, {"$inc": {"n": 1}}),
    "upsert secret": lambda: secret.update_one({"_id": "new"}, {"$set": {"n": 2}}, upsert=True),
    "replace secret": lambda: secret.replace_one({"_id": "s"}, {"n": 3}),
    "delete secret": lambda: secret.delete_one({"_id": "s"}),
    "delete many secret": lambda: secret.delete_many({}),
    "findAndModify update secret": lambda: secret.find_one_and_update({"_id": "s"}, {"$inc": {"n": 1}}),
    "findAndModify upsert secret": lambda: secret.find_one_and_update({"_id": "z"}, {"$set": {"n": 1}}, upsert=True),
    "findAndModify remove secret": lambda: secret.find_one_and_delete({"_id": "s"}),
    "createIndexes": lambda: orders.create_index("evil"),
    "createIndexes existing": lambda: orders.create_index("n"),
    "createIndexes unique": lambda: orders.create_index("n", unique=True, name="u"),
    "createIndexes secret": lambda: secret.create_index("evil"),
    "dropIndexes": lambda: orders.drop_index("n_1"),
    "dropIndexes *": lambda: orders.drop_indexes(),
    "dropIndexes missing": lambda: orders.drop_index("nope"),
    "collMod validator": lambda: c.shop.command("collMod", "orders", validator={"n": {"$gt": 5}}),
    "collMod images": lambda: c.shop.command("collMod", "orders", changeStreamPreAndPostImages={"enabled": True}),
    "create": lambda: c.shop.command("create", "newcoll"),
    "create with validator": lambda: c.shop.command("create", "newcoll", validator={"n": {"$gt": 5}}),
    "create existing with validator": lambda: c.shop.command("create", "orders", validator={"n": {"$gt": 5}}),
    "renameCollection": lambda: c.admin.command("renameCollection", "shop.orders", to="shop.renamed"),
    "renameCollection dropTarget": lambda: c.admin.command("renameCollection", "shop.orders", to="shop.secret", dropTarget=True),
    "renameCollection missing": lambda: c.admin.command("renameCollection", "shop.nope", to="shop.renamed"),
    "drop": lambda: orders.drop(),
    "drop secret": lambda: secret.drop(),
    "drop missing": lambda: c.shop.nope.drop(),
    "dropDatabase": lambda: c.drop_database("shop"),
    "$out secret": lambda: list(orders.aggregate([{"$out": "secret"}])),
    "$out new": lambda: list(orders.aggregate([{"$out": "newcoll"}])),
    "$merge secret": lambda: list(orders.aggregate([{"$merge": "secret"}])),
    "$merge new": lambda: list(orders.aggregate([{"$merge": {"into": "newcoll"}}])),
    "txn insert secret": lambda: txn(lambda s: secret.insert_one({"_id": "t"}, session=s)),
    "txn update secret": lambda: txn(lambda s: secret.update_one({"_id": "s"}, {"$set": {"n": 9}}, session=s)),
    "txn delete secret": lambda: txn(lambda s: secret.delete_one({"_id": "s"}, session=s)),
    "txn findAndModify secret": lambda: txn(lambda s: secret.find_one_and_delete({"_id": "s"}, session=s)),
    "txn insert new collection": lambda: txn(lambda s: c.shop.newcoll.insert_one({"_id": "t"}, session=s)),
    "createUser": lambda: c.shop.command("createUser", "eve", pwd="x", roles=["dbOwner"]),
    "createUser self": lambda: c.admin.command("createUser", name or "anon", pwd="x", roles=[]),
    "createUser admin": lambda: c.admin.command("createUser", "admin", pwd="x", roles=[]),
    "grantRolesToUser self": lambda: c.admin.command("grantRolesToUser", name or "anon", roles=[{"role": "dbOwner", "db": "shop"}]),
    "updateUser self roles": lambda: c.admin.command("updateUser", name or "anon", roles=[{"role": "readWrite", "db": "shop"}]),
    "updateUser other": lambda: c.admin.command("updateUser", "outsider" if name == "mallory" else "mallory", pwd="taken"),
    "revokeRolesFromUser other": lambda: c.admin.command("revokeRolesFromUser", "outsider" if name == "mallory" else "mallory", roles=[{"role": "readWrite", "db": "shop"}]),
    "dropUser other": lambda: c.admin.command("dropUser", "outsider" if name == "mallory" else "mallory"),
    "usersInfo all": lambda: c.admin.command("usersInfo", {"forAllDBs": True}),
}
if not os.environ["MEMBER"]:
    # What a member may do in its own collection is a write for anyone else (`$out` into
    # it too: MongoDB asks for the insert and remove actions there).
    attempts.update({
        "insert orders": lambda: orders.insert_one({"_id": "x"}),
        "update orders": lambda: orders.update_one({"_id": "keep"}, {"$set": {"n": 2}}),
        "delete orders": lambda: orders.delete_one({"_id": "keep"}),
        "findAndModify orders": lambda: orders.find_one_and_update({"_id": "keep"}, {"$inc": {"n": 1}}),
        "$merge itself": lambda: list(orders.aggregate([{"$merge": "orders"}])),
        "$out itself": lambda: list(orders.aggregate([{"$out": "orders"}])),
        "txn insert orders": lambda: txn(lambda s: orders.insert_one({"_id": "t"}, session=s)),
    })
# System namespaces are nobody's to write (once authenticated, that is the answer).
refusals = {"insert admin.system.users": (73, "InvalidNamespace")} if name else {}
escaped = {}
for what, attempt in attempts.items():
    try:
        attempt()
        escaped[what] = "accepted"
    except BulkWriteError as e:
        codes = [w["code"] for w in e.details["writeErrors"]]
        if not codes or codes != [13] * len(codes) or e.details["nInserted"] != 0:
            escaped[what] = e.details
    except OperationFailure as e:
        got = (e.code, e.details.get("codeName"))
        if got != refusals.get(what, (13, "Unauthorized")):
            escaped[what] = [e.code, e.details.get("codeName"), e.details.get("errmsg")]
print(json.dumps({"escaped": escaped, "tried": len(attempts)}))
"#;

/// What an admin reads after the attacks.
const STATE: &str = r#"
c = client()
def docs(coll):
    return sorted(c.shop[coll].find({}), key=lambda d: str(d["_id"]))
print(json.dumps({
    "databases": c.list_database_names(),
    "collections": sorted(c.shop.list_collection_names()),
    "orders": docs("orders"),
    "secret": docs("secret"),
    "indexes": sorted(i["name"] for i in c.shop.orders.list_indexes()),
    "options": [x["options"] for x in c.shop.list_collections(filter={"name": "orders"})],
}))
"#;

fn attack(s: &Server, user: &str, member: bool) -> Option<Value> {
    let script = format!(
        "os.environ.update(USER_NAME={user:?}, USER_PASSWORD={PASSWORD:?}, MEMBER={:?})\n{ATTACK}",
        if member { "1" } else { "" }
    );
    python(s, &script)
}

fn before_and_after(s: &Server) -> Value {
    json!({
        "state": python(s, STATE),
        "ddoc": s.get_doc("shop%24orders", "_design/mongodb")["_rev"],
        "security": [s.get("/shop%24orders/_security").1, s.get("/shop%24secret/_security").1],
        "users": s.get("/_users/_all_docs").1["rows"],
    })
}

#[test]
fn members_outsiders_and_anonymous_clients_cannot_escalate_through_mongodb_writes() {
    let s = Server::start_with(&["--pbkdf2-iterations", "10"], &[]);
    set_up(&s);
    let before = before_and_after(&s);
    if before["state"].is_null() {
        return; // no pymongo
    }
    for (user, member) in [("mallory", true), ("outsider", false), ("", false)] {
        let Some(result) = attack(&s, user, member) else { return };
        assert_eq!(result["escaped"], json!({}), "{user:?} got through: {result}");
        assert!(result["tried"].as_u64() >= Some(40), "{result}");
        assert_eq!(before_and_after(&s), before, "{user:?} changed something");
    }
    let state = &before["state"];
    assert_eq!(state["collections"], json!(["orders", "secret"]));
    assert_eq!(state["indexes"], json!(["_id_", "n_1"]));
    assert_eq!(state["orders"], json!([{"_id": "keep", "n": 1}]));
}

/// A member writes ordinary documents in its collection, whatever their `_id` looks like:
/// `_design/…`, `_local/…` and `_security` are plain documents there, never the design
/// document, local document or security object of the database.
#[test]
fn a_member_writing_reserved_looking_ids_writes_plain_documents() {
    let s = Server::start_with(&["--pbkdf2-iterations", "10"], &[]);
    set_up(&s);
    let script = format!(
        r#"
c = client(user="mallory", password={PASSWORD:?})
orders = c.shop.orders
evil = {{"views": {{"v": {{"map": "function(doc){{emit(doc._id,null)}}"}}}}, "admins": {{"names": ["mallory"]}}}}
orders.insert_one(dict(_id="_design/evil", **evil))
orders.update_one({{"_id": "_design/mongodb"}}, {{"$set": {{"indexes": {{}}}}}}, upsert=True)
orders.replace_one({{"_id": "_security"}}, {{"admins": {{"names": ["mallory"]}}}}, upsert=True)
orders.find_one_and_update({{"_id": "_local/x"}}, {{"$set": {{"a": 1}}}}, upsert=True)
with c.start_session() as s:
    with s.start_transaction():
        orders.insert_one({{"_id": "_design/txn", "views": {{}}}}, session=s)
ids = sorted(d["_id"] for d in orders.find({{}}, {{"_id": 1}}))
print(json.dumps({{"ids": ids}}))
"#
    );
    let Some(result) = python(&s, &script) else { return };
    let ids = ["_design/evil", "_design/mongodb", "_design/txn", "_local/x", "_security", "keep"];
    assert_eq!(result["ids"], json!(ids));
    // Over HTTP they are documents whose ids are JSON string literals.
    let evil = s.get_doc("shop%24orders", "%22_design%2Fevil%22");
    assert_eq!(evil["admins"], json!({"names": ["mallory"]}));
    assert_eq!(s.get("/shop%24orders/_design/evil").0, 404);
    assert_eq!(s.get("/shop%24orders/_design/txn").0, 404);
    assert_eq!(s.get("/shop%24orders/_local/x").0, 404);
    let security = s.get("/shop%24orders/_security").1;
    assert_eq!(security, json!({"members": {"roles": ["reader"]}}));
    let ddoc = s.get_doc("shop%24orders", "_design/mongodb");
    assert!(ddoc["indexes"]["n_1"].is_object(), "{ddoc}");
}
