//! How MongoDB's built-in roles map onto CouchDB's users and `_security` objects.
//!
//! A MongoDB user is the `_users` document of the same name; a role `{role, db}` granted to
//! it is the CouchDB role `"<db>.<role>"` in the document's `roles`. Every collection of
//! `db` (the CouchDB database `db$coll`) names those roles in its `_security`:
//!
//! | MongoDB role on `db` | CouchDB role | on each collection of `db` |
//! |---|---|---|
//! | `readWrite` | `db.readWrite` | in `members.roles`: reads and writes documents |
//! | `dbOwner` | `db.dbOwner` | in `admins.roles`: also indexes, validators (the design document), `_security` |
//!
//! The other built-in roles are refused (`NotImplemented`) rather than granted with other
//! rights than MongoDB's: CouchDB's `_security` has no read-only member (`read`), no admin
//! without data access (`dbAdmin`, `userAdmin`), and server admins are configured, not
//! granted (`root`, the `…AnyDatabase` and cluster roles).
//!
//! The roles are written into a collection's `_security` when MongoDB creates the
//! collection, and into every existing collection of `db` when a role on `db` is granted
//! (through [`bunko_engine::Database::set_security`], so the write gate decides). A
//! collection whose `members` are empty is open to every user and stays so.
//!
//! Roles on `_couchdb` (whose collections are the CouchDB databases without `$`) are
//! refused: those databases keep the `_security` their CouchDB admins gave them.

use bson::{Bson, Document, doc};
use bunko_engine::Database;
use bunko_engine::security::UserCtx;
use serde_json::{Value, json};

use super::Ctx;
use crate::error::MongoError;
use crate::names::{COUCH_DB, Namespace};

/// The built-in roles Bunko grants, and whether each makes an admin of the collection.
const MAPPED: &[(&str, bool)] = &[("readWrite", false), ("dbOwner", true)];

/// Built-in roles Bunko does not grant, with the reason.
const REFUSED: &[(&str, &str)] = &[
    ("read", "CouchDB members may also write"),
    ("dbAdmin", "a CouchDB database admin may also read and write documents"),
    ("userAdmin", "only server admins manage users"),
    ("root", "server admins are configured, not granted"),
    ("readAnyDatabase", "server admins are configured, not granted"),
    ("readWriteAnyDatabase", "server admins are configured, not granted"),
    ("dbAdminAnyDatabase", "server admins are configured, not granted"),
    ("userAdminAnyDatabase", "server admins are configured, not granted"),
    ("clusterAdmin", "server admins are configured, not granted"),
    ("clusterManager", "server admins are configured, not granted"),
    ("clusterMonitor", "server admins are configured, not granted"),
    ("hostManager", "server admins are configured, not granted"),
    ("backup", "server admins are configured, not granted"),
    ("restore", "server admins are configured, not granted"),
];

/// A role granted on a database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Role {
    pub role: String,
    pub db: String,
}

impl Role {
    /// The CouchDB role string.
    pub fn couch(&self) -> String {
        format!("{}.{}", self.db, self.role)
    }

    /// The MongoDB role a CouchDB role string stands for, if it is one Bunko maps.
    pub fn from_couch(role: &str) -> Option<Role> {
        let (db, name) = role.split_once('.')?;
        MAPPED
            .iter()
            .any(|(m, _)| *m == name)
            .then(|| Role { role: name.to_string(), db: db.to_string() })
    }

    pub fn to_doc(&self) -> Document {
        doc! {"role": &self.role, "db": &self.db}
    }
}

/// The roles of a command field (`roles`): names (on `default_db`) or `{role, db}`
/// documents, each a role Bunko maps.
pub(crate) fn parse(value: Option<&Bson>, field: &str, db: &str) -> Result<Vec<Role>, MongoError> {
    let Some(Bson::Array(items)) = value else {
        return Err(MongoError::type_mismatch(format!(
            "BSON field '{field}' is the wrong type, expected type 'array'"
        )));
    };
    items.iter().map(|item| parse_one(item, db)).collect()
}

fn parse_one(item: &Bson, default_db: &str) -> Result<Role, MongoError> {
    let role = match item {
        Bson::String(name) => Role { role: name.clone(), db: default_db.to_string() },
        Bson::Document(d) => match (d.get_str("role"), d.get_str("db")) {
            (Ok(role), Ok(db)) => Role { role: role.to_string(), db: db.to_string() },
            _ => {
                return Err(MongoError::bad_value(
                    "Role names must be either strings or objects of the form {role: roleName, db: databaseName}",
                ));
            }
        },
        _ => return Err(MongoError::bad_value("Role names must be either strings or objects")),
    };
    crate::names::check_db(&role.db)?;
    if role.db == COUCH_DB {
        return Err(MongoError::not_implemented(format!(
            "role {}@{COUCH_DB} is not supported: the collections of {COUCH_DB} are CouchDB \
             databases, whose rights are their own _security",
            role.role
        )));
    }
    if MAPPED.iter().any(|(m, _)| *m == role.role) {
        return Ok(role);
    }
    if let Some((_, why)) = REFUSED.iter().find(|(r, _)| *r == role.role) {
        return Err(MongoError::not_implemented(format!(
            "role {}@{} is not supported: {why}",
            role.role, role.db
        )));
    }
    Err(MongoError::new(
        31,
        "RoleNotFound",
        format!("Could not find role: {}@{}", role.role, role.db),
    ))
}

/// `rolesInfo` entries of the roles Bunko maps on `db` (MongoDB's built-in role shape,
/// plus what each is in CouchDB terms).
pub(crate) fn info(role: &str, db: &str) -> Option<Document> {
    let (_, admin) = MAPPED.iter().find(|(m, _)| *m == role)?;
    Some(doc! {
        "_id": format!("{db}.{role}"), "role": role, "db": db, "isBuiltin": true,
        "roles": [], "inheritedRoles": [],
        "bunkoMapsTo": if *admin { "database admin" } else { "database member" },
    })
}

/// The names of the roles Bunko maps.
pub(crate) fn mapped() -> impl Iterator<Item = &'static str> {
    MAPPED.iter().map(|(m, _)| *m)
}

/// Names the roles of `mongo_db` in the `_security` of every collection of it.
pub(crate) fn grant_all(ctx: &Ctx, user: &UserCtx, mongo_db: &str) -> Result<(), MongoError> {
    for name in super::admin::in_database(&ctx.server.engine, mongo_db) {
        if let Some(db) = ctx.server.engine.get_db(&name) {
            grant(&db, user)?;
        }
    }
    Ok(())
}

/// Names the roles of the collection's MongoDB database in its `_security` (a write of
/// `user`, who must be its admin), unless they are there already. A CouchDB database
/// without `$` keeps its `_security` as it is.
pub(crate) fn grant(db: &Database, user: &UserCtx) -> Result<(), MongoError> {
    let Some(ns) = Namespace::from_engine(&db.name()).filter(|ns| !ns.is_couch()) else {
        return Ok(());
    };
    let mut security: Value = serde_json::from_str(&db.security()).unwrap_or_else(|_| json!({}));
    let mut changed = false;
    for (role, admin) in MAPPED {
        let role = Role { role: role.to_string(), db: ns.db.clone() }.couch();
        let section = if *admin { "admins" } else { "members" };
        changed |= add_role(&mut security, section, &role);
    }
    if changed {
        db.set_security(user, security.to_string())?;
    }
    Ok(())
}

/// Adds `role` to `section.roles`; an empty `members` (open to every user) stays empty.
fn add_role(security: &mut Value, section: &str, role: &str) -> bool {
    let Some(object) = security.as_object_mut() else { return false };
    let part = object.entry(section).or_insert_with(|| json!({}));
    let listed = |key: &str| part.get(key).and_then(Value::as_array).is_some_and(|a| !a.is_empty());
    if section == "members" && !listed("names") && !listed("roles") {
        return false;
    }
    let Some(part) = part.as_object_mut() else { return false };
    let roles = part.entry("roles").or_insert_with(|| json!([]));
    let Some(roles) = roles.as_array_mut() else { return false };
    if roles.iter().any(|r| r == role) {
        return false;
    }
    roles.push(json!(role));
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_map_to_couchdb_roles_and_back() {
        let role = parse_one(&Bson::String("readWrite".into()), "shop").unwrap_or_else(|e| {
            panic!("{e:?}");
        });
        assert_eq!(role.couch(), "shop.readWrite");
        assert_eq!(Role::from_couch("shop.readWrite"), Some(role));
        assert_eq!(Role::from_couch("reader"), None);
        assert_eq!(Role::from_couch("team.lead"), None);
        let refused = parse_one(&Bson::String("read".into()), "shop").err().map(|e| e.code);
        assert_eq!(refused, Some(238));
        let unknown = parse_one(&Bson::String("nope".into()), "shop").err().map(|e| e.code);
        let couch = parse_one(&Bson::String("readWrite".into()), COUCH_DB).err().map(|e| e.code);
        assert_eq!(couch, Some(238));
        assert_eq!(unknown, Some(31));
    }

    #[test]
    fn granting_keeps_an_open_collection_open() {
        let mut open = json!({"members": {"names": [], "roles": []}});
        assert!(!add_role(&mut open, "members", "shop.readWrite"));
        assert!(add_role(&mut open, "admins", "shop.dbOwner"));
        assert_eq!(open["admins"]["roles"], json!(["shop.dbOwner"]));
        let mut closed = json!({"members": {"roles": ["_admin"]}});
        assert!(add_role(&mut closed, "members", "shop.readWrite"));
        assert!(!add_role(&mut closed, "members", "shop.readWrite"));
        assert_eq!(closed["members"]["roles"], json!(["_admin", "shop.readWrite"]));
    }
}
