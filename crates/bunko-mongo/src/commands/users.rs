//! User management: `createUser`, `updateUser`, `dropUser`, `usersInfo`,
//! `grantRolesToUser`, `revokeRolesFromUser`, `rolesInfo`, over the same `_users` database
//! the HTTP API uses (one user, one password, both protocols).
//!
//! A MongoDB user `name@db` is the `_users` document `org.couchdb.user:name`, written with
//! the connection's user through the engine, so the write gate and the users-database rules
//! decide (only server admins create users or change roles; a user may change their own
//! password, as over HTTP). The password is hashed on write as any `_users` password is,
//! with the SCRAM-SHA-256 and SCRAM-SHA-1 credentials beside CouchDB's PBKDF2 fields, so the new user logs
//! in over both protocols at once. MongoDB's own fields live under `mongodb`: the database
//! the user was created on (users created over HTTP belong to `admin`), `userId` and
//! `customData`. Names are server-wide, so a name exists on one database only. Roles are
//! CouchDB roles (see [`super::roles`] for the mapping); CouchDB roles that are no
//! MongoDB role are kept by every command here and shown as `couchdbRoles`.

use bson::{Binary, Bson, Document, doc};
use bunko_doc::body::ParsedDoc;
use bunko_doc::ejson;
use bunko_engine::all_docs::AllDocsQuery;
use bunko_engine::users::{USER_PREFIX, roles_of};
use bunko_engine::{Database, Error, WriteOptions};
use serde_json::{Map, Value, json};

use super::admin::user;
use super::roles::{self, Role};
use super::{Ctx, bool_of};
use crate::error::MongoError;

/// The field of a user document holding MongoDB's own data.
const FIELD: &str = "mongodb";

/// A user document's body.
pub(super) type Body = Map<String, Value>;
/// Users asked for: names, each on a database (`None`: any).
pub(super) type Wanted = Vec<(String, Option<String>)>;

pub(super) fn create_user(ctx: &mut Ctx, command: &Document) -> Result<Document, MongoError> {
    let name = name_of(command, "createUser")?;
    let password = password_of(command)?
        .ok_or_else(|| MongoError::bad_value("Must provide a 'pwd' field for all user documents, except those with '$external' as the user's source db"))?;
    let Some(roles) = command.get("roles") else {
        return Err(MongoError::new(
            40414,
            "Location40414",
            "BSON field 'createUser.roles' is missing but a required field",
        ));
    };
    let roles = roles::parse(Some(roles), "createUser.roles", &ctx.db)?;
    check_options(command)?;
    let mut mongodb = json!({"db": &ctx.db, "userId": bson::Uuid::new().to_string()});
    if let Some(custom) = custom_data(command)? {
        mongodb["customData"] = custom;
    }
    let body = json!({
        "name": name, "type": "user", "password": password, FIELD: mongodb,
        "roles": roles.iter().map(Role::couch).collect::<Vec<_>>(),
    });
    let body = body.as_object().cloned().unwrap_or_default();
    match write(ctx, name, None, body) {
        // Who may not create users does not learn who exists.
        Err(Error::Conflict) if !user(ctx).is_server_admin() => {
            return Err(not_authorized(ctx, "createUser"));
        }
        Err(Error::Conflict) => {
            return Err(MongoError::new(
                51003,
                "Location51003",
                format!("User \"{name}@{}\" already exists", ctx.db),
            ));
        }
        other => refused(ctx, "createUser", other)?,
    }
    grant_collections(ctx, &roles)?;
    Ok(Document::new())
}

pub(super) fn update_user(ctx: &mut Ctx, command: &Document) -> Result<Document, MongoError> {
    let name = name_of(command, "updateUser")?;
    check_options(command)?;
    let password = password_of(command)?;
    let custom = custom_data(command)?;
    let roles = match command.get("roles") {
        Some(r) => Some(roles::parse(Some(r), "updateUser.roles", &ctx.db)?),
        None => None,
    };
    if password.is_none() && custom.is_none() && roles.is_none() {
        return Err(MongoError::bad_value(
            "Must specify at least one field to update in updateUser",
        ));
    }
    let (rev, mut body) = fetch(ctx, name)?;
    if let Some(password) = password {
        body.insert("password".into(), json!(password));
    }
    if let Some(custom) = custom {
        set_custom_data(&mut body, custom);
    }
    if let Some(roles) = &roles {
        set_roles(&mut body, roles);
    }
    refused(ctx, "updateUser", write(ctx, name, Some(rev), body))?;
    grant_collections(ctx, roles.as_deref().unwrap_or_default())?;
    Ok(Document::new())
}

pub(super) fn drop_user(ctx: &mut Ctx, command: &Document) -> Result<Document, MongoError> {
    let name = name_of(command, "dropUser")?;
    let (rev, _) = fetch(ctx, name)?;
    let result = users(ctx)?.delete(&user(ctx), &format!("{USER_PREFIX}{name}"), Some(rev));
    refused(ctx, "dropUser", result.map(|_| ()))?;
    Ok(Document::new())
}

pub(super) fn grant_roles(ctx: &mut Ctx, command: &Document) -> Result<Document, MongoError> {
    change_roles(ctx, command, "grantRolesToUser", true)
}

pub(super) fn revoke_roles(ctx: &mut Ctx, command: &Document) -> Result<Document, MongoError> {
    change_roles(ctx, command, "revokeRolesFromUser", false)
}

fn change_roles(
    ctx: &mut Ctx,
    command: &Document,
    cmd: &str,
    grant: bool,
) -> Result<Document, MongoError> {
    let name = name_of(command, cmd)?;
    let changes = roles::parse(command.get("roles"), &format!("{cmd}.roles"), &ctx.db)?;
    let (rev, mut body) = fetch(ctx, name)?;
    let mut held = mongo_roles(&body);
    held.retain(|r| !changes.contains(r));
    if grant {
        held.extend(changes.iter().cloned());
    }
    set_roles(&mut body, &held);
    refused(ctx, cmd, write(ctx, name, Some(rev), body))?;
    if grant {
        grant_collections(ctx, &changes)?;
    }
    Ok(Document::new())
}

pub(super) fn roles_info(ctx: &mut Ctx, command: &Document) -> Result<Document, MongoError> {
    if bool_of(command, "showPrivileges", false)? {
        return Err(MongoError::not_implemented("showPrivileges is not supported yet"));
    }
    let builtin = bool_of(command, "showBuiltinRoles", false)?;
    let asked: Vec<(String, String)> = match command.get("rolesInfo") {
        Some(v) if is_one(v) => {
            if !builtin {
                return Ok(doc! {"roles": []});
            }
            roles::mapped().map(|r| (r.to_string(), ctx.db.clone())).collect()
        }
        Some(Bson::Array(items)) => {
            items.iter().map(|i| role_name(i, &ctx.db)).collect::<Result<_, _>>()?
        }
        Some(v) => vec![role_name(v, &ctx.db)?],
        None => Vec::new(),
    };
    let found: Vec<Document> = asked.iter().filter_map(|(r, db)| roles::info(r, db)).collect();
    Ok(doc! {"roles": found})
}

fn role_name(value: &Bson, db: &str) -> Result<(String, String), MongoError> {
    match value {
        Bson::String(role) => Ok((role.clone(), db.to_string())),
        Bson::Document(d) => match (d.get_str("role"), d.get_str("db")) {
            (Ok(role), Ok(db)) => Ok((role.to_string(), db.to_string())),
            _ => Err(MongoError::bad_value("rolesInfo entries need 'role' and 'db'")),
        },
        _ => Err(MongoError::bad_value("rolesInfo must be 1, a role name or a list of them")),
    }
}

/// `usersInfo`'s argument: `None` for every user (`1` of the current database, or
/// `{forAllDBs: true}`), else the (name, database) pairs asked for.
pub(super) fn wanted_users(value: Option<&Bson>, db: &str) -> Result<Option<Wanted>, MongoError> {
    let one = |v: &Bson| -> Result<(String, Option<String>), MongoError> {
        match v {
            Bson::String(name) => Ok((name.clone(), Some(db.to_string()))),
            Bson::Document(d) => match (d.get_str("user"), d.get_str("db")) {
                (Ok(name), Ok(db)) => Ok((name.to_string(), Some(db.to_string()))),
                _ => Err(MongoError::bad_value(
                    "User name must contain a field named 'user' and a field named 'db'",
                )),
            },
            _ => Err(MongoError::bad_value("User names must be strings or documents")),
        }
    };
    match value {
        Some(v) if is_one(v) => Ok(None),
        Some(Bson::Document(d)) if matches!(d.get("forAllDBs"), Some(Bson::Boolean(true))) => {
            Ok(None)
        }
        Some(Bson::Array(items)) => items.iter().map(one).collect::<Result<_, _>>().map(Some),
        Some(v) => Ok(Some(vec![one(v)?])),
        None => Err(MongoError::bad_value("usersInfo requires an argument")),
    }
}

pub(super) fn is_one(value: &Bson) -> bool {
    matches!(value, Bson::Int32(1) | Bson::Int64(1)) || *value == Bson::Double(1.0)
}

/// One `usersInfo` entry, in MongoDB's shape.
pub(super) fn info(name: &str, body: &Map<String, Value>, custom: bool) -> Document {
    let db = user_db(body);
    let mut out = doc! {"_id": format!("{db}.{name}")};
    let id = body.get(FIELD).and_then(|m| m.get("userId")).and_then(Value::as_str);
    if let Some(uuid) = id.and_then(|id| bson::Uuid::parse_str(id).ok()) {
        out.insert("userId", Bson::Binary(Binary::from_uuid(uuid)));
    }
    out.insert("user", name);
    out.insert("db", db);
    let data = body.get(FIELD).and_then(|m| m.get("customData"));
    if let (true, Some(Value::Object(data))) = (custom, data) {
        out.insert("customData", ejson::from_json(data));
    }
    let roles: Vec<Document> = mongo_roles(body).iter().map(Role::to_doc).collect();
    out.insert("roles", roles);
    let mechanisms: Vec<&str> = bunko_engine::scram::Mechanism::ALL
        .into_iter()
        .filter(|m| body.contains_key(m.field()))
        .map(|m| m.name())
        .collect();
    out.insert("mechanisms", mechanisms);
    let others = couch_roles(body);
    if !others.is_empty() {
        out.insert("couchdbRoles", others);
    }
    out
}

/// The database a user belongs to for MongoDB (users made over HTTP: `admin`).
fn user_db(body: &Map<String, Value>) -> &str {
    body.get(FIELD).and_then(|m| m.get("db")).and_then(Value::as_str).unwrap_or("admin")
}

fn mongo_roles(body: &Map<String, Value>) -> Vec<Role> {
    roles_of(&Value::Object(body.clone())).iter().filter_map(|r| Role::from_couch(r)).collect()
}

fn couch_roles(body: &Map<String, Value>) -> Vec<String> {
    let roles = roles_of(&Value::Object(body.clone()));
    roles.into_iter().filter(|r| Role::from_couch(r).is_none()).collect()
}

/// Replaces the MongoDB roles of a user document, keeping its other CouchDB roles.
fn set_roles(body: &mut Map<String, Value>, roles: &[Role]) {
    let mut all = couch_roles(body);
    all.extend(roles.iter().map(Role::couch));
    all.dedup();
    body.insert("roles".into(), json!(all));
}

/// Sets `customData` under the user document's MongoDB fields.
fn set_custom_data(body: &mut Map<String, Value>, custom: Value) {
    let entry = body.entry(FIELD).or_insert_with(|| json!({"db": "admin"}));
    if !entry.is_object() {
        *entry = json!({"db": "admin"});
    }
    if let Some(fields) = entry.as_object_mut() {
        fields.insert("customData".into(), custom);
    }
}

/// Names the granted roles in the collections of their databases.
fn grant_collections(ctx: &Ctx, roles: &[Role]) -> Result<(), MongoError> {
    let mut dbs: Vec<&str> = roles.iter().map(|r| r.db.as_str()).collect();
    dbs.sort_unstable();
    dbs.dedup();
    dbs.into_iter().try_for_each(|db| roles::grant_all(ctx, &user(ctx), db))
}

/// The user document of `name` on the current database, as the connection's user may
/// read it: a server admin any, anyone else only their own (as `GET /_users/…`).
fn fetch(ctx: &Ctx, name: &str) -> Result<(bunko_doc::RevId, Map<String, Value>), MongoError> {
    let me = user(ctx);
    if !me.is_server_admin() && me.name.as_deref() != Some(name) {
        return Err(not_authorized(ctx, "user management"));
    }
    let not_found = || {
        MongoError::new(
            11,
            "UserNotFound",
            format!("Could not find user \"{name}\" for db \"{}\"", ctx.db),
        )
    };
    let found = match users(ctx)?.get(
        &bunko_engine::security::UserCtx::system(),
        &format!("{USER_PREFIX}{name}"),
        None,
    ) {
        Ok(found) if !found.deleted => found,
        Ok(_) | Err(Error::NotFound(_)) => return Err(not_found()),
        Err(err) => return Err(err.into()),
    };
    let body: Map<String, Value> = serde_json::from_slice(&found.body).unwrap_or_default();
    if user_db(&body) != ctx.db {
        return Err(not_found());
    }
    Ok((found.rev, body))
}

/// Every user document, by name.
pub(super) fn all_users(ctx: &Ctx) -> Result<Vec<(String, Body)>, MongoError> {
    let query = AllDocsQuery {
        include_docs: true,
        prefix: Some(USER_PREFIX.to_string()),
        ..Default::default()
    };
    let mut out = Vec::new();
    for row in users(ctx)?.all_docs(&bunko_engine::security::UserCtx::system(), &query, None)?.rows
    {
        let row = row?;
        let (Some(name), Some(doc)) = (row.id.strip_prefix(USER_PREFIX), row.doc) else {
            continue;
        };
        let body: Map<String, Value> = serde_json::from_slice(&doc.body).unwrap_or_default();
        out.push((name.to_string(), body));
    }
    Ok(out)
}

fn users(ctx: &Ctx) -> Result<std::sync::Arc<Database>, MongoError> {
    Ok(ctx.server.engine.db(&ctx.server.engine.users_db_name())?)
}

/// Writes the user document of `name` as the connection's user.
fn write(
    ctx: &Ctx,
    name: &str,
    rev: Option<bunko_doc::RevId>,
    body: Map<String, Value>,
) -> Result<(), Error> {
    let doc =
        ParsedDoc { id: Some(format!("{USER_PREFIX}{name}")), rev, body, ..Default::default() };
    ctx.server.engine.db(&ctx.server.engine.users_db_name())?.put(
        &user(ctx),
        doc,
        WriteOptions::default(),
    )?;
    Ok(())
}

/// An engine answer to a `_users` write: the gate's refusals (also the `missing` it
/// answers a user writing another's document, as CouchDB hides them) are `Unauthorized`.
fn refused(ctx: &Ctx, cmd: &str, result: Result<(), Error>) -> Result<(), MongoError> {
    match result {
        Ok(()) => Ok(()),
        Err(Error::NotFound(_) | Error::Forbidden(_) | Error::Unauthorized(_)) => {
            Err(not_authorized(ctx, cmd))
        }
        Err(err) => Err(err.into()),
    }
}

pub(super) fn not_authorized(ctx: &Ctx, cmd: &str) -> MongoError {
    MongoError::unauthorized(format!("not authorized on {} to execute command {{ {cmd} }}", ctx.db))
}

fn name_of<'a>(command: &'a Document, cmd: &str) -> Result<&'a str, MongoError> {
    match command.get(cmd) {
        Some(Bson::String(name)) if !name.is_empty() => Ok(name),
        Some(Bson::String(_)) => {
            Err(MongoError::bad_value("User document needs 'user' field to be non-empty"))
        }
        _ => Err(MongoError::type_mismatch(format!(
            "BSON field '{cmd}' is the wrong type, expected type 'string'"
        ))),
    }
}

fn password_of(command: &Document) -> Result<Option<&str>, MongoError> {
    match command.get("pwd") {
        None => Ok(None),
        Some(Bson::String(p)) if !p.is_empty() => Ok(Some(p)),
        Some(Bson::String(_)) => Err(MongoError::bad_value("Password cannot be empty")),
        Some(_) => Err(MongoError::type_mismatch(
            "BSON field 'pwd' is the wrong type, expected type 'string'",
        )),
    }
}

fn custom_data(command: &Document) -> Result<Option<Value>, MongoError> {
    match command.get("customData") {
        None => Ok(None),
        Some(Bson::Document(d)) => Ok(Some(Value::Object(ejson::to_json(d)))),
        Some(_) => Err(MongoError::type_mismatch(
            "BSON field 'customData' is the wrong type, expected type 'object'",
        )),
    }
}

/// `mechanisms` (both SCRAM mechanisms: a password set through Bunko always gets both
/// credentials), `digestPassword` (only the server's digest) and
/// `authenticationRestrictions` (none).
fn check_options(command: &Document) -> Result<(), MongoError> {
    if let Some(Bson::Array(mechs)) = command.get("mechanisms") {
        let mut listed = Vec::new();
        for mech in mechs {
            match mech.as_str().and_then(bunko_engine::scram::Mechanism::from_name) {
                Some(m) => listed.push(m),
                None => {
                    return Err(MongoError::bad_value(format!("Unknown auth mechanism '{mech}'")));
                }
            }
        }
        if bunko_engine::scram::Mechanism::ALL.iter().any(|m| !listed.contains(m)) {
            return Err(MongoError::not_implemented(
                "mechanisms must list both SCRAM-SHA-256 and SCRAM-SHA-1: a password gets both credentials",
            ));
        }
    }
    if !bool_of(command, "digestPassword", true)? {
        return Err(MongoError::not_implemented("digestPassword: false is not supported"));
    }
    match command.get("authenticationRestrictions") {
        None => Ok(()),
        Some(Bson::Array(r)) if r.is_empty() => Ok(()),
        Some(_) => Err(MongoError::not_implemented("authenticationRestrictions are not supported")),
    }
}
