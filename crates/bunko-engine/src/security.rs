//! Who may do what: user contexts and a database's `_security` object, with CouchDB 3's
//! rules. A database's admins and members are listed by name and by role; server admins
//! (role `_admin`) are admins of every database. A new database's security object lists
//! only `_admin`, so it is admin-only until its security says otherwise; a security object
//! whose members are empty lets every authenticated user read and write.

use serde::Deserialize;

use crate::{Error, Result};

/// The authenticated user of a request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserCtx {
    pub name: Option<String>,
    pub roles: Vec<String>,
}

impl UserCtx {
    pub fn admin(name: &str) -> Self {
        Self { name: Some(name.to_string()), roles: vec!["_admin".to_string()] }
    }

    /// The server itself, for its own start-up writes (creating `_users`): a server admin.
    pub fn system() -> Self {
        Self::admin("bunko")
    }

    pub fn is_server_admin(&self) -> bool {
        self.roles.iter().any(|r| r == "_admin")
    }
}

#[derive(Debug, Default, Deserialize)]
struct NamesRoles {
    #[serde(default)]
    names: Vec<String>,
    #[serde(default)]
    roles: Vec<String>,
}

impl NamesRoles {
    fn is_empty(&self) -> bool {
        self.names.is_empty() && self.roles.is_empty()
    }

    fn admits(&self, ctx: &UserCtx) -> bool {
        ctx.name.as_ref().is_some_and(|n| self.names.contains(n))
            || ctx.roles.iter().any(|r| self.roles.contains(r))
    }
}

/// A parsed `_security` object.
#[derive(Debug, Default, Deserialize)]
pub struct Security {
    #[serde(default)]
    admins: NamesRoles,
    #[serde(default)]
    members: NamesRoles,
}

impl Security {
    /// Parses and checks a security object as sent to `PUT /{db}/_security`.
    pub fn parse(json: &str) -> Result<Security> {
        serde_json::from_str(json).map_err(|_| {
            Error::BadRequest("Security object names and roles must be arrays of strings".into())
        })
    }

    pub fn is_admin(&self, ctx: &UserCtx) -> bool {
        ctx.is_server_admin() || self.admins.admits(ctx)
    }

    pub fn is_member(&self, ctx: &UserCtx) -> bool {
        self.is_admin(ctx)
            || (self.members.is_empty() && ctx.name.is_some())
            || self.members.admits(ctx)
    }

    /// Fails with 401 for anonymous users and 403 for others who are not members.
    pub fn check_member(&self, ctx: &UserCtx) -> Result<()> {
        if self.is_member(ctx) {
            return Ok(());
        }
        Err(denied(ctx, "You are not allowed to access this db."))
    }

    /// Fails unless the user is an admin of the database.
    pub fn check_admin(&self, ctx: &UserCtx) -> Result<()> {
        if self.is_admin(ctx) {
            return Ok(());
        }
        Err(denied(ctx, "You are not a db or server admin."))
    }
}

fn denied(ctx: &UserCtx, reason: &str) -> Error {
    if ctx.name.is_none() {
        Error::Unauthorized("You are not authorized to access this db.".to_string())
    } else {
        Error::Forbidden(reason.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str, roles: &[&str]) -> UserCtx {
        UserCtx { name: Some(name.into()), roles: roles.iter().map(|r| r.to_string()).collect() }
    }

    #[test]
    fn default_security_is_admin_only() -> Result<()> {
        let sec =
            Security::parse(r#"{"members":{"roles":["_admin"]},"admins":{"roles":["_admin"]}}"#)?;
        assert!(sec.is_member(&UserCtx::admin("root")));
        assert!(!sec.is_member(&user("bob", &[])));
        Ok(())
    }

    #[test]
    fn names_and_roles_admit_members() -> Result<()> {
        let sec = Security::parse(r#"{"members":{"names":["bob"],"roles":["readers"]}}"#)?;
        assert!(sec.is_member(&user("bob", &[])));
        assert!(sec.is_member(&user("eve", &["readers"])));
        assert!(!sec.is_member(&user("eve", &["writers"])));
        assert!(!sec.is_admin(&user("bob", &[])));
        let open = Security::parse("{}")?;
        assert!(open.is_member(&user("anyone", &[])));
        assert!(!open.is_member(&UserCtx::default()));
        Ok(())
    }
}
