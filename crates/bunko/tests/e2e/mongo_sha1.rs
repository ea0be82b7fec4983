//! SCRAM-SHA-1 for old drivers (issue 13, point 3): the server admin and `_users` users log
//! in with pymongo's `authMechanism=SCRAM-SHA-1` once their password was set by Bunko; a
//! user document without the SHA-1 credential gets `AuthenticationFailed` (18) for it and
//! still logs in with SCRAM-SHA-256. The credential is the server's to derive: a user who
//! writes their own document without a password cannot plant one.

use serde_json::json;

use crate::harness::Server;
use crate::mongo::python;

/// pymongo clients by mechanism, HTTP requests as a given user, and SCRAM-SHA-1 keys made
/// the way a forger would (MongoDB's digest of a password the forger chose).
const HELPERS: &str = r#"
import base64, hashlib, hmac, urllib.request, urllib.error, urllib.parse

def connect(user, password, mech):
    return MongoClient(f"mongodb://{ADDR}/", username=user, password=password, authSource="admin",
                       authMechanism=mech, serverSelectionTimeoutMS=5000)

def login(user, password, mech):
    c = connect(user, password, mech)
    try:
        c.admin.command("ping")
        return "ok"
    except OperationFailure as e:
        return e.code
    finally:
        c.close()

def http(method, path, body=None, auth=(USER, PASSWORD)):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(os.environ["BUNKO_URL"] + path, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    if auth:
        req.add_header("Authorization", "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode())
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())

def forged_sha1(user, password):
    salt = b"0123456789abcdef"
    digest = hashlib.md5(f"{user}:mongo:{password}".encode()).hexdigest()
    salted = hashlib.pbkdf2_hmac("sha1", digest.encode(), salt, 10000)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha1).digest()
    b64 = lambda b: base64.b64encode(b).decode()
    return {"salt": b64(salt), "iterations": 10000, "stored_key": b64(hashlib.sha1(client_key).digest()),
            "server_key": b64(hmac.new(salted, b"Server Key", hashlib.sha1).digest())}

def mechs(name):
    c = client()
    try:
        return c.admin.command("hello", saslSupportedMechs=f"admin.{name}").get("saslSupportedMechs")
    finally:
        c.close()
"#;

#[test]
fn admins_and_users_log_in_with_scram_sha_1_and_cannot_plant_it() {
    let s = Server::start_with(&["--pbkdf2-iterations", "10"], &[]);
    let script = r#"
out = {}
admin = client()
out["admin"] = [login(USER, PASSWORD, "SCRAM-SHA-1"), login(USER, "wrong", "SCRAM-SHA-1"), mechs(USER)]
admin.shop.command("createUser", "bob", pwd="b0b pass", roles=[{"role": "readWrite", "db": "shop"}])
bob = connect("bob", "b0b pass", "SCRAM-SHA-1")
bob.shop.orders.insert_one({"_id": 1})
out["bob"] = [login("bob", "b0b pass", "SCRAM-SHA-1"), login("bob", "b0b pass", "SCRAM-SHA-256"),
              login("bob", "nope", "SCRAM-SHA-1"), mechs("bob"), bob.shop.orders.find_one(),
              admin.shop.command("usersInfo", "bob")["users"][0]["mechanisms"]]
bob.close()
# A user made over HTTP, and the default mechanism negotiation of pymongo.
http("PUT", "/_users/org.couchdb.user:carol", {"name": "carol", "type": "user", "roles": [], "password": "c4rol"})
out["carol"] = [login("carol", "c4rol", "SCRAM-SHA-1"), mechs("carol")]
# A record from before SCRAM-SHA-1 (an admin drops the field): SHA-1 fails, SHA-256 works.
status, doc = http("GET", "/_users/org.couchdb.user:carol")
del doc["scram_sha_1"]
http("PUT", "/_users/org.couchdb.user:carol", doc)
out["old_record"] = [login("carol", "c4rol", "SCRAM-SHA-1"), login("carol", "c4rol", "SCRAM-SHA-256"), mechs("carol")]
# Bob writes his own document without a password, planting SHA-1 keys of a password he
# chose (as for a user whose record has none): ignored, his keys stay the server's.
status, mine = http("GET", "/_users/org.couchdb.user:bob", auth=("bob", "b0b pass"))
out["visible_to_bob"] = [status, sorted(k for k in mine if k.startswith("scram") or k == "derived_key")]
before = mine["scram_sha_1"]
mine["scram_sha_1"] = forged_sha1("bob", "evil")
mine["scram_sha_256"] = {"salt": "AAAA", "iterations": 1, "stored_key": "AAAA", "server_key": "AAAA"}
status, _ = http("PUT", "/_users/org.couchdb.user:bob", mine, auth=("bob", "b0b pass"))
_, after = http("GET", "/_users/org.couchdb.user:bob")
out["planted"] = [status, after["scram_sha_1"] == before, login("bob", "evil", "SCRAM-SHA-1"),
                  login("bob", "b0b pass", "SCRAM-SHA-1"), login("bob", "b0b pass", "SCRAM-SHA-256")]
# A new PBKDF2 hash he computed himself (no password seen): the SCRAM credentials go.
after["salt"], after["derived_key"] = "00", "11"
after["scram_sha_1"] = forged_sha1("bob", "evil")
status, _ = http("PUT", "/_users/org.couchdb.user:bob", after, auth=("bob", "b0b pass"))
_, rehashed = http("GET", "/_users/org.couchdb.user:bob")
out["rehashed"] = [status, sorted(k for k in rehashed if k.startswith("scram")), login("bob", "evil", "SCRAM-SHA-1")]
# Others' documents stay hidden, keys and all.
out["hidden"] = [http("GET", "/_users/org.couchdb.user:bob", auth=("carol", "c4rol"))[0],
                 http("GET", "/_users/org.couchdb.user:bob", auth=None)[0]]
print(json.dumps(out, default=str))
"#;
    let Some(result) = python(&s, &format!("{HELPERS}\n{script}")) else { return };
    let both = json!(["SCRAM-SHA-256", "SCRAM-SHA-1"]);
    assert_eq!(result["admin"], json!(["ok", 18, both]));
    assert_eq!(result["bob"], json!(["ok", "ok", 18, both, {"_id": 1}, both]));
    assert_eq!(result["carol"], json!(["ok", both]));
    assert_eq!(result["old_record"], json!([18, "ok", ["SCRAM-SHA-256"]]));
    assert_eq!(
        result["visible_to_bob"],
        json!([200, ["derived_key", "scram_sha_1", "scram_sha_256"]])
    );
    assert_eq!(result["planted"], json!([201, true, 18, "ok", "ok"]));
    assert_eq!(result["rehashed"], json!([201, [], 18]));
    assert_eq!(result["hidden"], json!([404, 401]));
}
