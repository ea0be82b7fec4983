//! `usersInfo`: the users of `_users` (see [`super::users`]) and the server admins, in
//! MongoDB's shape.
//!
//! The server admins (`BUNKO_ADMIN`, `[admins]`) are not `_users` documents; they are listed
//! as users of `admin` with the `root` role, which is what they are (MongoDB tools and
//! test runners look for the user they logged in as). `filter` is a MongoDB filter over
//! the entries; `showPrivileges` adds the privileges the roles give *in Bunko* (what the
//! write gate lets them do, not MongoDB's longer lists); `showAuthenticationRestrictions`
//! shows the (always empty) restrictions. `showCredentials` is `NotImplemented`: the
//! stored SCRAM keys are not handed out.

use bson::{Bson, Document, doc};

use super::agg_env::matches;
use super::roles::Role;
use super::users::{Wanted, all_users, info, is_one, not_authorized, wanted_users};
use super::{Ctx, admin::user, bool_of, doc_of};
use crate::error::MongoError;

/// What each role Bunko grants may do on its database's collections.
const READ_WRITE: &[&str] = &[
    "changeStream",
    "collStats",
    "createCollection",
    "dbStats",
    "find",
    "insert",
    "killCursors",
    "listCollections",
    "listIndexes",
    "remove",
    "update",
];
/// `dbOwner`: `readWrite` and the collection's design document (indexes, validators).
const DB_OWNER: &[&str] = &["collMod", "createIndex", "dropIndex"];

pub(super) fn users_info(ctx: &mut Ctx, command: &Document) -> Result<Document, MongoError> {
    if bool_of(command, "showCredentials", false)? {
        return Err(MongoError::not_implemented("showCredentials is not supported"));
    }
    let privileges = bool_of(command, "showPrivileges", false)?;
    let restrictions = bool_of(command, "showAuthenticationRestrictions", false)?;
    let filter = match command.get("filter") {
        Some(_) => Some(crate::query::selector(&doc_of(command, "filter")?)?),
        None => None,
    };
    let custom = bool_of(command, "showCustomData", true)?;
    let asked = command.get("usersInfo");
    let wanted = wanted_users(asked, &ctx.db)?;
    let me = user(ctx);
    let own_only = matches!(&wanted, Some(w) if w.iter().all(|(n, _)| Some(n) == me.name.as_ref()));
    if !me.is_server_admin() && !own_only {
        return Err(not_authorized(ctx, "usersInfo"));
    }
    let only_this_db = asked.is_some_and(is_one);
    let mut entries: Vec<Document> =
        all_users(ctx)?.iter().map(|(name, body)| info(name, body, custom)).collect();
    for (name, _) in ctx.server.engine.logins().admins() {
        if !entries.iter().any(|e| e.get_str("user").is_ok_and(|u| u == name)) {
            entries.push(server_admin(&name));
        }
    }
    let mut out = Vec::new();
    for mut entry in entries {
        let db = entry.get_str("db").unwrap_or_default();
        let name = entry.get_str("user").unwrap_or_default();
        if !is_wanted(&wanted, name, db) || (only_this_db && db != ctx.db) {
            continue;
        }
        if privileges {
            show_privileges(&mut entry);
        }
        if restrictions || privileges {
            entry.insert("inheritedAuthenticationRestrictions", Bson::Array(Vec::new()));
        }
        if restrictions {
            entry.insert("authenticationRestrictions", Bson::Array(Vec::new()));
        }
        if filter.as_ref().is_none_or(|f| matches(f, &entry)) {
            out.push(entry);
        }
    }
    Ok(doc! {"users": out})
}

fn is_wanted(wanted: &Option<Wanted>, name: &str, db: &str) -> bool {
    match wanted {
        None => true,
        Some(w) => w.iter().any(|(n, d)| n == name && d.as_deref().is_none_or(|d| d == db)),
    }
}

/// A configured server admin: a `root` user of `admin`.
fn server_admin(name: &str) -> Document {
    doc! {
        "_id": format!("admin.{name}"),
        "user": name,
        "db": "admin",
        "roles": [{"role": "root", "db": "admin"}],
        "mechanisms": ["SCRAM-SHA-256", "SCRAM-SHA-1"],
    }
}

/// Adds `inheritedRoles` and `inheritedPrivileges` (no role inherits another).
fn show_privileges(entry: &mut Document) {
    let roles = entry.get_array("roles").cloned().unwrap_or_default();
    let mut privileges = Vec::new();
    for role in roles.iter().filter_map(Bson::as_document) {
        let (Ok(name), Ok(db)) = (role.get_str("role"), role.get_str("db")) else { continue };
        privileges.extend(privileges_of(&Role { role: name.into(), db: db.into() }));
    }
    entry.insert("inheritedRoles", roles);
    entry.insert("inheritedPrivileges", privileges);
}

fn privileges_of(role: &Role) -> Option<Document> {
    let actions: Vec<&str> = match role.role.as_str() {
        "root" => return Some(doc! {"resource": {"anyResource": true}, "actions": ["anyAction"]}),
        "readWrite" => READ_WRITE.to_vec(),
        "dbOwner" => {
            let mut all = [READ_WRITE, DB_OWNER].concat();
            all.sort_unstable();
            all
        }
        _ => return None,
    };
    Some(doc! {"resource": {"db": &role.db, "collection": ""}, "actions": actions})
}
