//! MongoDB user management (issue 13): `createUser`, `updateUser`, `dropUser`, `usersInfo`,
//! `grantRolesToUser`, `revokeRolesFromUser` and `rolesInfo` through pymongo, over the same
//! `_users` database as the HTTP API. A user created over MongoDB logs in with SCRAM-SHA-256
//! and over HTTP with the same password; its roles are the collections' `_security`
//! members (`readWrite`) and admins (`dbOwner`); only server admins manage users.

use serde_json::json;

use crate::harness::Server;
use crate::mongo::python;

#[test]
fn an_admin_creates_a_user_who_logs_in_with_scram_and_gets_its_roles() {
    let s = Server::start_with(&["--pbkdf2-iterations", "10"], &[]);
    let script = r#"
admin = client()
admin.shop.orders.insert_one({"_id": "o1", "total": 5})
admin.other.things.insert_one({"_id": "t1"})
admin.shop.command("createUser", "bob", pwd="b0b pass", roles=[{"role": "readWrite", "db": "shop"}], customData={"team": "books", "since": 2024})
# A collection created after the grant names the role too.
admin.shop.later.insert_one({"_id": "l1"})
info = admin.shop.command("usersInfo", "bob")["users"]
assert len(info) == 1, info
bob_info = info[0]
assert bob_info["userId"].subtype == 4, bob_info
del bob_info["userId"]
assert bob_info == {"_id": "shop.bob", "user": "bob", "db": "shop", "customData": {"team": "books", "since": 2024},
                    "roles": [{"role": "readWrite", "db": "shop"}], "mechanisms": ["SCRAM-SHA-256", "SCRAM-SHA-1"]}, bob_info
assert admin.shop.command("usersInfo", {"user": "bob", "db": "shop"}, showCustomData=False)["users"][0].get("customData") is None
assert [u["user"] for u in admin.shop.command("usersInfo", 1)["users"]] == ["bob"]
assert admin.other.command("usersInfo", 1)["users"] == []
everyone = admin.admin.command("usersInfo", {"forAllDBs": True})["users"]
# The configured server admin is listed too, as a root user of admin.
assert [u["_id"] for u in everyone] == ["shop.bob", f"admin.{USER}"], everyone
assert everyone[1]["roles"] == [{"role": "root", "db": "admin"}], everyone
assert [u["user"] for u in admin.admin.command("usersInfo", 1)["users"]] == [USER]
# filter and showPrivileges, as MongoDB's usersInfo takes them.
found = admin.admin.command("usersInfo", {"forAllDBs": True}, filter={"roles.role": "readWrite"})["users"]
assert [u["_id"] for u in found] == ["shop.bob"], found
found = admin.shop.command("usersInfo", "bob", showPrivileges=True)["users"][0]
assert found["inheritedRoles"] == [{"role": "readWrite", "db": "shop"}], found
privileges = found["inheritedPrivileges"]
assert [p["resource"] for p in privileges] == [{"db": "shop", "collection": ""}], privileges
assert {"find", "insert", "update", "remove", "createCollection"} <= set(privileges[0]["actions"])
assert "createIndex" not in privileges[0]["actions"] and found["inheritedAuthenticationRestrictions"] == []
root = admin.admin.command("usersInfo", USER, showPrivileges=True)["users"][0]
assert root["inheritedPrivileges"] == [{"resource": {"anyResource": True}, "actions": ["anyAction"]}], root
assert code_of(lambda: admin.shop.command("usersInfo", "bob", showCredentials=True)) == 238

bob = client(user="bob", password="b0b pass", authMechanism="SCRAM-SHA-256")
assert bob.admin.command("connectionStatus")["authInfo"]["authenticatedUsers"] == [{"user": "bob", "db": "admin"}]
bob.shop.orders.insert_one({"_id": "o2", "total": 7})
bob.shop.later.insert_one({"_id": "l2"})
assert sorted(d["_id"] for d in bob.shop.orders.find()) == ["o1", "o2"]
# readWrite creates collections of its database, as in MongoDB: by a first insert or by
# create; they start with the database's roles. Not elsewhere, and dropping stays the admins'.
bob.shop.fresh.insert_one({"_id": "f1"})
bob.shop.command("create", "made")
assert set(bob.shop.list_collection_names()) >= {"fresh", "made"}
assert bob.shop.fresh.find_one() == {"_id": "f1"}
assert code_of(lambda: bob.other.new_one.insert_one({"_id": 1})) == 13
assert code_of(lambda: bob.other.command("create", "new_two")) == 13
assert code_of(lambda: bob.shop.command("drop", "fresh")) == 13
assert admin.other.list_collection_names() == ["things"]
# readWrite is no more than member: no other database, no indexes, no users.
assert code_of(lambda: bob.other.things.find_one()) == 13
assert code_of(lambda: bob.shop.orders.create_index("total")) == 13
assert code_of(lambda: bob.shop.command("createUser", "eve", pwd="x", roles=[])) == 13
assert code_of(lambda: bob.shop.command("grantRolesToUser", "bob", roles=["dbOwner"])) == 13
assert code_of(lambda: bob.shop.command("updateUser", "bob", roles=["dbOwner"])) == 13
assert code_of(lambda: bob.shop.command("usersInfo", 1)) == 13
assert bob.shop.command("usersInfo", "bob")["users"][0]["user"] == "bob"

# dbOwner makes bob an admin of the collections: indexes, on the open connection at once.
cursor = bob.shop.orders.find({}, batch_size=1)
assert next(cursor)["_id"] == "o1"
admin.shop.command("grantRolesToUser", "bob", roles=["dbOwner"])
# A cursor stays bob's while his roles change.
assert [d["_id"] for d in cursor] == ["o2"]
roles = admin.shop.command("usersInfo", "bob")["users"][0]["roles"]
assert roles == [{"role": "readWrite", "db": "shop"}, {"role": "dbOwner", "db": "shop"}], roles
assert bob.shop.orders.create_index("total") == "total_1"
admin.shop.command("revokeRolesFromUser", "bob", roles=[{"role": "dbOwner", "db": "shop"}])
assert code_of(lambda: bob.shop.orders.drop_index("total_1")) == 13

# A user changes their own password (as over HTTP); roles stay the admins' to give.
bob.shop.command("updateUser", "bob", pwd="new pass")
bob2 = client(user="bob", password="new pass")
assert bob2.shop.orders.count_documents({}) == 2
assert code_of(lambda: client(user="bob", password="b0b pass").admin.command("ping")) == 18

# MongoDB's errors.
def err(fn):
    try:
        fn()
    except OperationFailure as e:
        return [e.code, e.details.get("codeName"), e.details.get("errmsg")]
errors = [
    err(lambda: admin.shop.command("createUser", "bob", pwd="x", roles=[])),
    err(lambda: admin.shop.command("createUser", "carl", pwd="x")),
    err(lambda: admin.shop.command("createUser", "carl", roles=[])),
    err(lambda: admin.shop.command("createUser", "carl", pwd="x", roles=["nope"])),
    err(lambda: admin.shop.command("createUser", "carl", pwd="x", roles=["read"])),
    err(lambda: admin.shop.command("createUser", "carl", pwd="x", roles=["root"])),
    err(lambda: admin.shop.command("dropUser", "carl")),
    err(lambda: admin.other.command("dropUser", "bob")),
    err(lambda: admin.shop.command("updateUser", "bob")),
]
assert errors[0] == [51003, "Location51003", 'User "bob@shop" already exists'], errors[0]
assert errors[1] == [40414, "Location40414", "BSON field 'createUser.roles' is missing but a required field"], errors[1]
assert errors[2][:2] == [2, "BadValue"], errors[2]
assert errors[3] == [31, "RoleNotFound", "Could not find role: nope@shop"], errors[3]
assert errors[4][:2] == [238, "NotImplemented"] and errors[5][:2] == [238, "NotImplemented"], errors
assert errors[6] == [11, "UserNotFound", 'Could not find user "carl" for db "shop"'], errors[6]
assert errors[7] == [11, "UserNotFound", 'Could not find user "bob" for db "other"'], errors[7]
assert errors[8][:2] == [2, "BadValue"], errors[8]
assert admin.shop.command("usersInfo", "carl")["users"] == []

rolesinfo = admin.shop.command("rolesInfo", "readWrite")["roles"]
assert [(r["role"], r["db"], r["isBuiltin"]) for r in rolesinfo] == [("readWrite", "shop", True)], rolesinfo
assert admin.shop.command("rolesInfo", 1)["roles"] == []
builtin = admin.shop.command("rolesInfo", 1, showBuiltinRoles=True)["roles"]
assert sorted(r["role"] for r in builtin) == ["dbOwner", "readWrite"], builtin
assert admin.shop.command("rolesInfo", "nope")["roles"] == []

# Dropping the user logs it out of open connections and removes it for HTTP too.
admin.shop.command("dropUser", "bob")
assert code_of(lambda: bob.shop.orders.find_one()) == 13
assert admin.shop.command("usersInfo", "bob")["users"] == []
print(json.dumps({"ok": True}))
"#;
    let Some(result) = python(&s, script) else { return };
    assert_eq!(result, json!({"ok": true}));
    assert_eq!(s.get("/_users/org.couchdb.user:bob").0, 404);
    let security = s.get("/shop%24later/_security").1;
    assert_eq!(security["members"]["roles"], json!(["_admin", "shop.readWrite"]), "{security}");
    assert_eq!(security["admins"]["roles"], json!(["_admin", "shop.dbOwner"]), "{security}");
    let other = s.get("/other%24things/_security").1;
    assert_eq!(other["members"]["roles"], json!(["_admin", "other.readWrite"]), "{other}");
    // What bob created has the same `_security` as what an admin creates.
    assert_eq!(s.get("/shop%24fresh/_security").1, security);
    assert_eq!(s.get("/shop%24made/_security").1, security);
}

/// A user made over MongoDB logs in over HTTP with the same password, and one made over
/// HTTP is managed over MongoDB (it belongs to `admin`) with its CouchDB roles kept.
#[test]
fn users_are_shared_with_the_http_api() {
    let s = Server::start_with(&["--pbkdf2-iterations", "10"], &[]);
    let hana = json!({"name": "hana", "password": "pw", "roles": ["reader"], "type": "user"});
    s.put_doc("_users", "org.couchdb.user:hana", &hana);
    let script = r#"
admin = client()
admin.shop.command("createUser", "kai", pwd="kai pw", roles=["readWrite"])
assert admin.shop.command("usersInfo", "hana")["users"] == []
hana = admin.admin.command("usersInfo", "hana")["users"][0]
assert hana["roles"] == [] and hana["couchdbRoles"] == ["reader"], hana
admin.admin.command("grantRolesToUser", "hana", roles=[{"role": "readWrite", "db": "shop"}])
hana = admin.admin.command("usersInfo", "hana")["users"][0]
assert hana["roles"] == [{"role": "readWrite", "db": "shop"}] and hana["couchdbRoles"] == ["reader"], hana
print(json.dumps({"ok": True}))
"#;
    let Some(result) = python(&s, script) else { return };
    assert_eq!(result, json!({"ok": true}));
    let (status, session) =
        crate::harness::send(s.user_req(reqwest::Method::GET, "/_session", "kai", "kai pw"));
    assert_eq!(status, 200);
    assert_eq!(session["userCtx"], json!({"name": "kai", "roles": ["shop.readWrite"]}));
    let hana = s.get_doc("_users", "org.couchdb.user:hana");
    assert_eq!(hana["roles"], json!(["reader", "shop.readWrite"]));
}
