//! Privilege escalation through every write path (issue 11). `POST /_users` once let a user
//! write `"roles": ["_admin"]` into his own document and so become server admin, because the
//! `_users` rules were checked per route and that route forgot them. The rules now live in the
//! engine's write gate; these tests try the escalation as an attacker would: every path the
//! router serves (`bunko_http::routes::PATHS`, which a unit test keeps equal to the router),
//! every write method, every payload, with and without `new_edits=false` and `batch=ok`, as a
//! plain user and as a database admin. Afterwards nothing may have changed.

use reqwest::Method;
use serde_json::{Value, json};

use crate::harness::{Server, assert_error, send};

const PASSWORD: &str = "pw";
/// Low PBKDF2 cost: these tests are about who may write, not about hashing.
const FAST_HASH: [&str; 2] = ["--pbkdf2-iterations", "10"];

/// One attacker: name, roles the admin gave them, the databases they aim at, and whether
/// they administer `_users` (then design documents and `_security` there are theirs to
/// write, and only the user-document payloads are escalations).
struct Attacker {
    name: &'static str,
    roles: &'static [&'static str],
    targets: &'static [&'static str],
    users_admin: bool,
}

fn start(extra: &[&str]) -> Server {
    let args: Vec<&str> = FAST_HASH.iter().chain(extra).copied().collect();
    Server::start_with(&args, &[])
}

fn create_user(s: &Server, name: &str, roles: &[&str]) {
    let doc = json!({"_id": user_id(name), "name": name, "type": "user",
                     "roles": roles, "password": PASSWORD});
    let (status, body) = s.put(&format!("/_users/{}", user_id(name)), &doc);
    assert_eq!(status, 201, "create user {name}: {body}");
}

fn user_id(name: &str) -> String {
    format!("org.couchdb.user:{name}")
}

/// `victim`: mallory is a member (role `reader`), dave its admin. `other`: admin-only.
fn set_up(s: &Server) {
    create_user(s, "mallory", &["reader"]);
    create_user(s, "dave", &[]);
    create_user(s, "vic", &[]);
    for db in ["victim", "other"] {
        s.create_db(db);
        s.put_doc(db, "d1", &json!({"a": 1}));
    }
    let security = json!({"admins": {"names": ["dave"]}, "members": {"roles": ["reader"]}});
    assert_eq!(s.put("/victim/_security", &security).0, 200);
}

/// The path templates filled in for database `db`; `{id}` becomes each id in `ids`.
fn paths(db: &str, ids: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for template in bunko_http::routes::PATHS {
        let rest =
            if template.contains("_partition") { "p/_all_docs" } else { "_design/evil/json/i" };
        let filled = template
            .replace("{db}", db)
            .replace("{ddoc}", "evil")
            .replace("{view}", "v")
            .replace("{index}", "i")
            .replace("{name}", "p")
            .replace("{node}", "_local")
            .replace("{section}", "admins")
            .replace("{key}", "eve")
            .replace("{*attachment}", "att.txt")
            .replace("{other}", "evil")
            .replace("{*docid}", "d1")
            .replace("{*path}", "x")
            .replace("{*rest}", rest);
        if filled.contains("{id}") {
            out.extend(ids.iter().map(|id| filled.replace("{id}", &encode(id))));
        } else {
            out.push(filled);
        }
    }
    out
}

fn encode(segment: &str) -> String {
    segment.replace('/', "%2F").replace(':', "%3A")
}

/// What an attacker sends. To `_users`: their own user document with `_admin` (at its
/// current `_rev`, and as a replicated revision), a new admin user, both in bulk. Where they
/// are no database admin: a design document (also in bulk and replicated), a security
/// object naming themselves, an index, a `revs_limit`.
fn payloads(s: &Server, attacker: &Attacker, db: &str) -> Vec<Value> {
    let name = attacker.name;
    let hash = "0123456789abcdef0123456789abcdef";
    // A `_config` value: a password for `admins/eve`.
    let mut all = vec![json!(PASSWORD)];
    if db == "_users" {
        let mut own = s.get_doc("_users", &encode(&user_id(name)));
        own["roles"] = json!(["_admin"]);
        let mut replicated = own.clone();
        replicated["_rev"] = json!(format!("9-{hash}"));
        replicated["_revisions"] = json!({"start": 9, "ids": [hash]});
        let eve = json!({"_id": user_id("eve"), "name": "eve", "type": "user",
                         "roles": ["_admin"], "password": PASSWORD});
        all.extend([
            json!({"docs": [{"db": db, "doc": own}, {"db": db, "doc": eve}]}),
            json!({"docs": [own, eve]}),
            json!({"docs": [replicated], "new_edits": false}),
            own,
            eve,
            replicated,
        ]);
    }
    if db != "_users" || !attacker.users_admin {
        let design = json!({"_id": "_design/evil",
                            "views": {"v": {"map": "function(doc){emit(doc._id,null)}"}},
                            "admins": {"names": [name]}});
        let mut replicated = design.clone();
        replicated["_rev"] = json!(format!("1-{hash}"));
        all.extend([
            json!({"docs": [{"db": db, "doc": design}]}),
            json!({"docs": [design]}),
            json!({"docs": [replicated], "new_edits": false}),
            design,
            replicated,
            json!({"admins": {"names": [name]}, "members": {"names": [name]}}),
            json!({"index": {"fields": ["a"]}, "ddoc": "evil", "name": "i"}),
            json!(1),
        ]);
        // A purge of the database's document (`_purge` is for server admins only).
        if db != "_users" {
            let rev = s.get_doc(db, "d1")["_rev"].clone();
            all.push(json!({"d1": [rev]}));
        }
    }
    all
}

/// Whether a response says something was written that the attacker may not write: any
/// document where they are no member, a design document anywhere, an index, a changed
/// setting. Members of `victim` may write its plain and local documents.
fn wrote(path: &str, status: u16, body: &Value, member: bool) -> bool {
    if !(200..300).contains(&status) {
        return false;
    }
    let forbidden_doc = |v: &Value| {
        let id = v.get("id").and_then(Value::as_str).unwrap_or_default();
        v.get("rev").is_some_and(Value::is_string) && (!member || id.starts_with("_design/"))
    };
    let rows = body.as_array().is_some_and(|rows| rows.iter().any(forbidden_doc))
        || body["results"].as_array().is_some_and(|rows| rows.iter().any(forbidden_doc));
    let setting =
        ["_security", "_revs_limit", "_purged_infos_limit"].iter().any(|p| path.ends_with(p))
            && body["ok"] == json!(true);
    let purged = body["purged"]
        .as_object()
        .is_some_and(|p| p.values().any(|revs| revs.as_array().is_some_and(|r| !r.is_empty())));
    forbidden_doc(body)
        || rows
        || setting
        || purged
        || body["result"].is_string()
        || path.starts_with("/_node")
}

/// Every write method on every path with every payload; panics on the first write that
/// went through.
fn attack(s: &Server, attacker: &Attacker) -> usize {
    let mut tried = 0;
    let methods = ["PUT", "POST", "DELETE", "COPY"];
    for &db in attacker.targets {
        let member = db == "victim" && attacker.roles.contains(&"reader");
        let ids: Vec<String> = if db == "_users" {
            vec![user_id(attacker.name), user_id("vic"), user_id("eve"), "_design/evil".into()]
        } else {
            vec!["_design/evil".into(), "_local/x".into()]
        };
        let bodies = payloads(s, attacker, db);
        for path in paths(db, &ids) {
            let own_ground = attacker.users_admin
                && ["_design", "_local", "_security"].iter().any(|p| path.contains(p));
            if own_ground {
                continue; // these of `_users` are its admins' to write
            }
            for query in ["", "?new_edits=false", "?batch=ok"] {
                for method in methods {
                    let own_delete = method == "DELETE" && path.contains(attacker.name);
                    if own_delete {
                        continue; // deleting your own user document is allowed
                    }
                    if method == "COPY" && attacker.users_admin {
                        continue; // it writes `_design/evil`, theirs to write in `_users`
                    }
                    for body in &bodies {
                        let url = format!("{path}{query}");
                        let method = Method::from_bytes(method.as_bytes()).expect("method");
                        let req = s.user_req(method.clone(), &url, attacker.name, PASSWORD);
                        let req = req.header("Destination", "_design/evil").json(body);
                        let (status, answer) = send(req);
                        assert!(
                            !wrote(&path, status, &answer, member),
                            "{} wrote through {method} {url} with {body}: {status} {answer}",
                            attacker.name
                        );
                        tried += 1;
                    }
                }
            }
        }
    }
    tried
}

/// Nothing the attackers aimed at changed, and nobody became an admin.
fn assert_unchanged(s: &Server, attacker: &Attacker, security: &[(String, Value)]) {
    let (status, session) = send(s.user_req(Method::GET, "/_session", attacker.name, PASSWORD));
    assert_eq!(status, 200);
    assert_eq!(session["userCtx"]["roles"], json!(attacker.roles), "{session}");
    let denied = send(s.user_req(Method::PUT, "/newdb", attacker.name, PASSWORD));
    assert_error(denied, 401, "unauthorized", "You are not a server admin.");
    let own = s.get_doc("_users", &encode(&user_id(attacker.name)));
    assert_eq!(own["roles"], json!(attacker.roles), "{own}");
    assert_eq!(s.get(&format!("/_users/{}", encode(&user_id("eve")))).0, 404);
    for (db, before) in security {
        assert_eq!(&s.get(&format!("/{db}/_security")).1, before, "{db}/_security changed");
        let (_, ddocs) = s.get(&format!("/{db}/_design_docs"));
        // The server's own `_design/_auth` of `_users`, as it wrote it (generation 1).
        let own_auth = |row: &&Value| {
            db == "_users"
                && row["id"] == "_design/_auth"
                && row["value"]["rev"].as_str().is_some_and(|rev| rev.starts_with("1-"))
        };
        let rows = ddocs["rows"].as_array().cloned().unwrap_or_default();
        let added: Vec<&Value> = rows.iter().filter(|row| !own_auth(row)).collect();
        assert!(added.is_empty(), "design docs appeared in {db}: {added:?}");
        assert_eq!(s.get(&format!("/{db}/_revs_limit")).1, json!(1000));
        assert_eq!(s.get(&format!("/{db}/_purged_infos_limit")).1, json!(1000));
        if db != "_users" {
            assert_eq!(s.get(&format!("/{db}/d1")).0, 200, "{db}/d1 was purged");
            assert_eq!(s.get(&format!("/{db}/_purged_infos")).1, json!({"purged_infos": []}));
        }
    }
    assert_eq!(s.get("/_users/org.couchdb.user:vic").1["roles"], json!([]));
    let (_, admins) = s.get("/_node/_local/_config/admins");
    assert!(admins.get("eve").is_none(), "a server admin was added: {admins}");
}

fn securities(s: &Server) -> Vec<(String, Value)> {
    ["_users", "victim", "other"]
        .iter()
        .map(|db| (db.to_string(), s.get(&format!("/{db}/_security")).1))
        .collect()
}

#[test]
fn a_plain_user_and_a_db_admin_cannot_escalate_through_any_write_path() {
    let s = start(&[]);
    set_up(&s);
    let before = securities(&s);
    let attackers = [
        Attacker {
            name: "mallory",
            roles: &["reader"],
            targets: &["_users", "victim", "other"],
            users_admin: false,
        },
        Attacker { name: "dave", roles: &[], targets: &["_users", "other"], users_admin: false },
    ];
    for attacker in &attackers {
        let tried = attack(&s, attacker);
        assert!(tried > 1000, "only {tried} attempts: the path table is too small");
        assert_unchanged(&s, attacker, &before);
    }
}

#[test]
fn an_admin_of_the_users_db_cannot_create_server_admins() {
    let s = start(&["--users-db-security-editable"]);
    set_up(&s);
    create_user(&s, "dba", &[]);
    let security = json!({"admins": {"names": ["dba"]}, "members": {"roles": ["_admin"]}});
    assert_eq!(s.put("/_users/_security", &security).0, 200);
    let before: Vec<(String, Value)> =
        securities(&s).into_iter().filter(|(db, _)| db != "_users").collect();
    let dba = Attacker { name: "dba", roles: &[], targets: &["_users"], users_admin: true };
    attack(&s, &dba);
    assert_unchanged(&s, &dba, &before);
}

/// The defects of issue 11, each with CouchDB 3.4's answer (`couch_js_functions.hrl`,
/// `chttpd_db:validate_security_can_be_edited`).
#[test]
fn users_db_rules_answer_as_couchdb_does() {
    let s = start(&[]);
    create_user(&s, "bob", &[]);
    let mut own = s.get_doc("_users", "org.couchdb.user:bob");
    own["roles"] = json!(["_admin"]);
    let as_bob = |method: Method, path: &str, body: &Value| {
        send(s.user_req(method, path, "bob", PASSWORD).json(body))
    };
    let edit_roles = ("forbidden", "Only _admin may edit roles");
    assert_error(as_bob(Method::POST, "/_users", &own), 403, edit_roles.0, edit_roles.1);
    let put = as_bob(Method::PUT, "/_users/org.couchdb.user:bob", &own);
    assert_error(put, 403, edit_roles.0, edit_roles.1);
    let bulk = as_bob(Method::POST, "/_users/_bulk_docs", &json!({"docs": [own]}));
    assert_eq!(bulk.0, 201);
    assert_eq!(bulk.1[0]["error"], "forbidden", "{}", bulk.1);
    let system = "No system roles (starting with underscore) in users db.";
    for roles in [json!(["_admin"]), json!(["_reader", "x"])] {
        let doc = json!({"_id": "org.couchdb.user:eve", "name": "eve", "type": "user",
                         "roles": roles, "password": PASSWORD});
        assert_error(s.post("/_users", &doc), 403, "forbidden", system);
    }
    let names = [
        ("_eve", "Username may not start with underscore."),
        ("a:b", "Character `:` is not allowed in usernames."),
    ];
    for (name, reason) in names {
        let doc = json!({"_id": user_id(name), "name": name, "type": "user", "roles": []});
        assert_error(
            s.put(&format!("/_users/{}", encode(&user_id(name))), &doc),
            403,
            "forbidden",
            reason,
        );
    }
    let security = json!({"admins": {"names": ["bob"]}});
    let reason = "You can't edit the security object of the user database.";
    assert_error(s.put("/_users/_security", &security), 403, "forbidden", reason);
    let (_, session) = send(s.user_req(Method::GET, "/_session", "bob", PASSWORD));
    assert_eq!(session["userCtx"]["roles"], json!([]));
    assert_eq!(s.get("/_users/org.couchdb.user:eve").0, 404);
    assert_eq!(s.get_doc("_users", "org.couchdb.user:bob")["roles"], json!([]));
}

/// A user may still change their own password, and delete their own document; another
/// user's document stays out of reach (`404`, as CouchDB hides it).
#[test]
fn a_user_edits_and_deletes_only_their_own_document() {
    let s = start(&[]);
    create_user(&s, "bob", &["reader"]);
    create_user(&s, "vic", &[]);
    let mut own = s.get_doc("_users", "org.couchdb.user:bob");
    own["password"] = json!("new");
    own["roles"] = json!(["reader"]);
    let (status, body) = send(s.user_req(Method::POST, "/_users", "bob", PASSWORD).json(&own));
    assert_eq!(status, 201, "{body}");
    let (status, _) = send(s.user_req(Method::GET, "/_session", "bob", "new"));
    assert_eq!(status, 200);
    let vic = s.get_doc("_users", "org.couchdb.user:vic");
    let path =
        format!("/_users/org.couchdb.user:vic?rev={}", vic["_rev"].as_str().unwrap_or_default());
    assert_error(
        send(s.user_req(Method::DELETE, &path, "bob", "new")),
        404,
        "not_found",
        "missing",
    );
    let rev = body["rev"].as_str().unwrap_or_default();
    let path = format!("/_users/org.couchdb.user:bob?rev={rev}");
    assert_eq!(send(s.user_req(Method::DELETE, &path, "bob", "new")).0, 200);
    assert_eq!(s.get("/_users/org.couchdb.user:bob").0, 404);
}

/// Writes a trigger makes on behalf of the document that fired it: `payload` when a document
/// carrying one is written, or when one carrying `on_delete` is deleted.
const ARMED_TRIGGER: &str = "function (newDoc, oldDoc, db, userCtx) {
  var armed = newDoc._deleted ? oldDoc : newDoc;
  if (armed && armed.payload && (newDoc._deleted || !armed.on_delete)) db.put(armed.payload);
}";

/// Triggers and procedures write as the user whose request runs them (issue 15, point 5):
/// the admin's trigger or procedure cannot write, for a member, what the member may not
/// (a design document, `_security`), through every path that fires them. Replicated writes
/// fire no trigger, so the admin seeds the armed document that way.
#[test]
fn a_member_cannot_escalate_through_a_trigger_or_a_procedure() {
    let s = start(&[]);
    set_up(&s);
    let app = json!({"triggers": {"armed": ARMED_TRIGGER},
                     "procedures": {"put": "function (doc, db) { return db.put(doc); }"}});
    s.put_doc("victim", "_design/app", &app);
    let evil = json!({"_id": "_design/evil", "views": {"v": {"map": "function(doc){}"}}});
    let hash = "0123456789abcdef0123456789abcdef";
    let seeded = json!({"new_edits": false, "docs": [
        {"_id": "armed", "_rev": format!("1-{hash}"), "on_delete": true, "payload": evil}]});
    assert_eq!(s.post("/victim/_bulk_docs", &seeded).0, 201);
    let as_mallory = |method: &str, path: &str, body: &Value| {
        let method = Method::from_bytes(method.as_bytes()).expect("method");
        send(s.user_req(method, path, "mallory", PASSWORD).json(body))
    };
    let security = json!({"_id": "_security", "admins": {"names": ["mallory"]}});
    let refusals = [
        (evil.clone(), "forbidden", "victim/_design/evil: You are not a db or server admin."),
        (
            security,
            "illegal_docid",
            "victim/_security: Only reserved document ids may start with underscore.",
        ),
    ];
    for (payload, error, reason) in refusals {
        let doc = json!({"_id": "x", "payload": payload});
        let attempts = [
            ("PUT", "/victim/x", doc.clone()),
            ("POST", "/victim", doc.clone()),
            ("POST", "/victim/_bulk_docs", json!({"docs": [doc.clone()]})),
            ("POST", "/victim/_bulk_docs", json!({"docs": [doc.clone()], "all_or_nothing": true})),
            ("POST", "/_transaction", json!({"docs": [{"db": "victim", "doc": doc.clone()}]})),
            ("POST", "/victim/_design/app/_procedures/put", payload.clone()),
            ("POST", "/victim/_design/app/_procedures/put", doc.clone()),
        ];
        for (method, path, body) in attempts {
            let (status, answer) = as_mallory(method, path, &body);
            let row = answer.get(0).unwrap_or(&answer);
            let got = (row["error"].as_str(), row["reason"].as_str());
            assert_eq!(got, (Some(error), Some(reason)), "{method} {path}: {status} {answer}");
            assert!([201, 400, 403, 417].contains(&status), "{method} {path}: {status}");
        }
    }
    let rev = format!("1-{hash}");
    let (status, answer) = as_mallory("DELETE", &format!("/victim/armed?rev={rev}"), &Value::Null);
    let reason = "victim/_design/evil: You are not a db or server admin.";
    assert_error((status, answer), 403, "forbidden", reason);
    assert_eq!(s.get_doc("victim", "armed")["_rev"], json!(rev));
    assert_eq!(s.get("/victim/x").0, 404);
    let (_, ddocs) = s.get("/victim/_design_docs");
    assert_eq!(crate::harness::ids(&ddocs["rows"]), ["_design/app"]);
    // The same procedure writes it for the database's admin, whose write it is.
    let (status, answer) = s.post("/victim/_design/app/_procedures/put", &evil);
    assert_eq!((status, &answer["id"]), (200, &json!("_design/evil")), "{answer}");
}

/// The users-database rules follow `[chttpd_auth] authentication_db` (issue 16): in a
/// database named at run time, a user still may not give themselves roles nor touch
/// another user's document, on any write path.
#[test]
fn the_rules_follow_an_authentication_database_switched_at_run_time() {
    let s = start(&[]);
    let path = "/_node/_local/_config/chttpd_auth/authentication_db";
    assert_eq!(s.put(path, &json!("kaiin")).0, 200);
    s.create_db("kaiin");
    for name in ["bob", "vic"] {
        let doc = json!({"_id": user_id(name), "name": name, "type": "user",
                         "roles": [], "password": PASSWORD});
        assert_eq!(s.put(&format!("/kaiin/{}", user_id(name)), &doc).0, 201);
    }
    let mut own = s.get_doc("kaiin", &user_id("bob"));
    own["roles"] = json!(["_admin"]);
    let as_bob = |method: Method, path: &str, body: &Value| {
        send(s.user_req(method, path, "bob", PASSWORD).json(body))
    };
    let edit_roles = "Only _admin may edit roles";
    let put = as_bob(Method::PUT, &format!("/kaiin/{}", user_id("bob")), &own);
    assert_error(put, 403, "forbidden", edit_roles);
    assert_error(as_bob(Method::POST, "/kaiin", &own), 403, "forbidden", edit_roles);
    let bulk = as_bob(Method::POST, "/kaiin/_bulk_docs", &json!({"docs": [own]}));
    assert_eq!(bulk.1[0]["error"], "forbidden", "{}", bulk.1);
    let mut theirs = s.get_doc("kaiin", &user_id("vic"));
    theirs["password"] = json!("taken");
    let other = as_bob(Method::PUT, &format!("/kaiin/{}", user_id("vic")), &theirs);
    assert_eq!(other.0, 404, "{}", other.1);
    let (_, session) = send(s.user_req(Method::GET, "/_session", "bob", PASSWORD));
    assert_eq!(session["userCtx"], json!({"name": "bob", "roles": []}));
    assert_eq!(session_ok(&s, "vic"), 200);
}

fn session_ok(s: &Server, name: &str) -> u16 {
    send(s.user_req(Method::GET, "/_session", name, PASSWORD)).0
}
