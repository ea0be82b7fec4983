//! The rules of `_users` documents: CouchDB's users-database `validate_doc_update`
//! (`couch_js_functions.hrl`), run natively by the write gate ([`crate::gate`]) under the
//! writer lock, for every write to `_users` whatever path it came by.
//!
//! The reasons are CouchDB's, word for word; every failure is `403 forbidden`. The rules
//! that stop privilege escalation: only a database admin may set or change roles, nobody
//! may give a user a system role (`_admin`, or any other starting with `_`, except
//! `_metrics`), and names may not start with `_` or contain `:` (Basic auth could never
//! carry such a name).

use serde_json::{Map, Value};

use crate::security::{Security, UserCtx};
use crate::users::USER_PREFIX;
use crate::{Error, Result};

/// The password schemes a stored user document may name.
const SCHEMES: [&str; 3] = ["simple", "pbkdf2", "simple+pbkdf2"];

/// Checks a write of `new` (after password hashing; `deleted`) over the current document
/// `old`. Without `shaped` (the database holds no `_design/_auth`, whose validation function
/// these rules are in CouchDB) only the rules on roles and names apply.
pub(crate) fn validate(
    ctx: &UserCtx,
    security: &Security,
    id: &str,
    (new, deleted): (&Map<String, Value>, bool),
    old: Option<&Map<String, Value>>,
    shaped: bool,
) -> Result<()> {
    let old_name = old.and_then(|o| o.get("name"));
    if deleted {
        let own = ctx.name.as_deref().is_some_and(|n| old_name.and_then(Value::as_str) == Some(n));
        if ctx.is_server_admin() || own {
            return Ok(());
        }
        return forbidden("Only admins may delete other user docs.");
    }
    let name = if shaped {
        shape(id, new)?
    } else {
        new.get("name").and_then(Value::as_str).unwrap_or_default()
    };
    if old.is_some() && old_name != new.get("name") {
        return forbidden("Usernames can not be changed.");
    }
    if shaped {
        check_password_fields(new)?;
    }
    if !security.is_admin(ctx) {
        check_own_roles(ctx, name, new, old)?;
    }
    check_system_names(name, new)
}

/// Type, name, roles and id: returns the name.
fn shape<'a>(id: &str, new: &'a Map<String, Value>) -> Result<&'a str> {
    if new.get("type").and_then(Value::as_str) != Some("user") {
        return forbidden("doc.type must be user");
    }
    let name = match new.get("name") {
        Some(Value::String(name)) if !name.is_empty() => name.as_str(),
        _ => return forbidden("doc.name is required"),
    };
    match new.get("roles") {
        None | Some(Value::Null) => return forbidden("doc.roles must exist"),
        Some(Value::Array(roles)) if roles.iter().all(Value::is_string) => {}
        Some(Value::Array(_)) => return forbidden("doc.roles can only contain strings"),
        Some(_) => return forbidden("doc.roles must be an array"),
    }
    if id.strip_prefix(USER_PREFIX) != Some(name) {
        return forbidden("Doc ID must be of the form org.couchdb.user:name");
    }
    Ok(name)
}

fn check_password_fields(new: &Map<String, Value>) -> Result<()> {
    let truthy = |field: &str| new.get(field).is_some_and(is_truthy);
    if truthy("password_sha") && !truthy("salt") {
        return forbidden(
            "Users with password_sha must have a salt.See /_utils/script/couch.js for example code.",
        );
    }
    match new.get("password_scheme") {
        Some(scheme) if is_truthy(scheme) => {
            let text = scheme.as_str().unwrap_or_default();
            if !SCHEMES.contains(&text) {
                return forbidden(&format!(
                    "Password scheme `{}` not supported.",
                    js_string(scheme)
                ));
            }
            if text == "pbkdf2" {
                if !new.get("iterations").is_some_and(Value::is_number) {
                    return forbidden("iterations must be a number.");
                }
                if !new.get("derived_key").is_some_and(Value::is_string) {
                    return forbidden("derived_key must be a string.");
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// A user who is not a database admin may create their document without roles and keep
/// the roles they have, nothing more.
fn check_own_roles(
    ctx: &UserCtx,
    name: &str,
    new: &Map<String, Value>,
    old: Option<&Map<String, Value>>,
) -> Result<()> {
    let new_roles = sorted_roles(new.get("roles"));
    let Some(old) = old else {
        if new_roles.is_empty() {
            return Ok(());
        }
        return forbidden("Only _admin may set roles");
    };
    if ctx.name.as_deref() != Some(name) {
        return forbidden("You may only update your own user document.");
    }
    if sorted_roles(old.get("roles")) != new_roles {
        return forbidden("Only _admin may edit roles");
    }
    Ok(())
}

fn check_system_names(name: &str, new: &Map<String, Value>) -> Result<()> {
    let system = sorted_roles(new.get("roles"))
        .into_iter()
        .any(|role| role != "_metrics" && role.starts_with('_'));
    if system {
        return forbidden("No system roles (starting with underscore) in users db.");
    }
    if name.starts_with('_') {
        return forbidden("Username may not start with underscore.");
    }
    if name.contains(':') {
        return forbidden("Character `:` is not allowed in usernames.");
    }
    Ok(())
}

fn sorted_roles(roles: Option<&Value>) -> Vec<String> {
    let mut roles: Vec<String> = roles
        .and_then(Value::as_array)
        .map(|r| r.iter().map(js_string).collect())
        .unwrap_or_default();
    roles.sort();
    roles
}

/// JavaScript truthiness, as the original validation function tests fields.
pub(crate) fn is_truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

/// A value as JavaScript's string conversion shows it in a message.
fn js_string(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn forbidden<T>(reason: &str) -> Result<T> {
    Err(Error::Forbidden(reason.to_string()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn user(name: &str, roles: &[&str]) -> UserCtx {
        UserCtx { name: Some(name.into()), roles: roles.iter().map(|r| r.to_string()).collect() }
    }

    fn doc(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }

    fn reason(result: Result<()>) -> String {
        match result {
            Err(Error::Forbidden(reason)) => reason,
            other => format!("{other:?}"),
        }
    }

    fn admin_only() -> Security {
        Security::parse(r#"{"admins":{"roles":["_admin"]},"members":{"roles":["_admin"]}}"#)
            .unwrap_or_default()
    }

    #[test]
    fn each_rule_answers_with_couchdbs_reason() {
        let bob = user("bob", &[]);
        let sec = admin_only();
        let id = "org.couchdb.user:bob";
        let cases = [
            (json!({"name": "bob", "roles": []}), "doc.type must be user"),
            (json!({"type": "user", "roles": []}), "doc.name is required"),
            (json!({"type": "user", "name": "bob"}), "doc.roles must exist"),
            (json!({"type": "user", "name": "bob", "roles": "x"}), "doc.roles must be an array"),
            (
                json!({"type": "user", "name": "bob", "roles": [1]}),
                "doc.roles can only contain strings",
            ),
            (
                json!({"type": "user", "name": "eve", "roles": []}),
                "Doc ID must be of the form org.couchdb.user:name",
            ),
            (json!({"type": "user", "name": "bob", "roles": ["x"]}), "Only _admin may set roles"),
            (
                json!({"type": "user", "name": "bob", "roles": [], "password_scheme": "md5"}),
                "Password scheme `md5` not supported.",
            ),
            (
                json!({"type": "user", "name": "bob", "roles": [], "password_scheme": "pbkdf2", "derived_key": "k"}),
                "iterations must be a number.",
            ),
        ];
        for (body, expected) in cases {
            assert_eq!(
                reason(validate(&bob, &sec, id, (&doc(body.clone()), false), None, true)),
                expected
            );
        }
    }

    #[test]
    fn no_one_may_grant_system_roles_or_system_names() {
        let admin = UserCtx::admin("root");
        let sec = admin_only();
        let body = json!({"type": "user", "name": "eve", "roles": ["_admin"]});
        let got = validate(&admin, &sec, "org.couchdb.user:eve", (&doc(body), false), None, true);
        assert_eq!(reason(got), "No system roles (starting with underscore) in users db.");
        let metrics = json!({"type": "user", "name": "eve", "roles": ["_metrics"]});
        assert!(
            validate(&admin, &sec, "org.couchdb.user:eve", (&doc(metrics), false), None, true)
                .is_ok()
        );
        let under = json!({"type": "user", "name": "_eve", "roles": []});
        let got = validate(&admin, &sec, "org.couchdb.user:_eve", (&doc(under), false), None, true);
        assert_eq!(reason(got), "Username may not start with underscore.");
        let colon = json!({"type": "user", "name": "a:b", "roles": []});
        let got = validate(&admin, &sec, "org.couchdb.user:a:b", (&doc(colon), false), None, true);
        assert_eq!(reason(got), "Character `:` is not allowed in usernames.");
    }

    #[test]
    fn a_user_keeps_their_roles_and_cannot_rename() {
        let bob = user("bob", &["reader"]);
        let sec = admin_only();
        let id = "org.couchdb.user:bob";
        let old = doc(json!({"type": "user", "name": "bob", "roles": ["reader", "a"]}));
        let same = doc(json!({"type": "user", "name": "bob", "roles": ["a", "reader"]}));
        assert!(validate(&bob, &sec, id, (&same, false), Some(&old), true).is_ok());
        let more = doc(json!({"type": "user", "name": "bob", "roles": ["a", "reader", "x"]}));
        assert_eq!(
            reason(validate(&bob, &sec, id, (&more, false), Some(&old), true)),
            "Only _admin may edit roles"
        );
        let renamed = doc(json!({"type": "user", "name": "bobby", "roles": []}));
        let got =
            validate(&bob, &sec, "org.couchdb.user:bobby", (&renamed, false), Some(&old), true);
        assert_eq!(reason(got), "Usernames can not be changed.");
    }

    #[test]
    fn deletes_need_a_server_admin_or_the_user() {
        let sec = Security::parse(r#"{"admins":{"names":["dba"]}}"#).unwrap_or_default();
        let old = doc(json!({"type": "user", "name": "bob", "roles": []}));
        let id = "org.couchdb.user:bob";
        assert!(
            validate(&user("bob", &[]), &sec, id, (&Map::new(), true), Some(&old), true).is_ok()
        );
        let got = validate(&user("dba", &[]), &sec, id, (&Map::new(), true), Some(&old), true);
        assert_eq!(reason(got), "Only admins may delete other user docs.");
        assert!(
            validate(&UserCtx::admin("r"), &sec, id, (&Map::new(), true), Some(&old), true).is_ok()
        );
    }

    /// A database just named the authentication database, still without `_design/_auth`
    /// (CouchDB's `security_validation_test.exs` loads users into one): documents of any
    /// shape, but still no roles from a user and no system roles from anyone.
    #[test]
    fn without_the_auth_design_document_only_the_role_rules_hold() {
        let sec = Security::default();
        let id = "org.couchdb.user:tom";
        let admin = UserCtx::admin("r");
        let untyped = doc(json!({"name": "tom", "roles": [], "password_scheme": "pbkdf2"}));
        assert!(validate(&admin, &sec, id, (&untyped, false), None, false).is_ok());
        assert!(validate(&admin, &sec, id, (&untyped, false), None, true).is_err());
        let system = doc(json!({"name": "tom", "roles": ["_admin"]}));
        let got = validate(&admin, &sec, id, (&system, false), None, false);
        assert_eq!(reason(got), "No system roles (starting with underscore) in users db.");
        let roles = doc(json!({"name": "tom", "roles": ["boss"]}));
        let got = validate(&user("tom", &[]), &sec, id, (&roles, false), None, false);
        assert_eq!(reason(got), "Only _admin may set roles");
    }
}
