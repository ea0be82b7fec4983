//! The write gate: the one place that decides who may change what.
//!
//! Every engine method that changes stored data takes the acting [`UserCtx`] and asks this
//! module before it changes anything, so an adapter (the HTTP API today, the MongoDB front
//! end and the replicator later) cannot forget a rule: it has no rules of its own to forget.
//!
//! | write | method | who may |
//! |---|---|---|
//! | documents (`PUT`, `POST`, `DELETE`, `_bulk_docs`, `new_edits=false`, index design docs) | [`Database::update_docs`] | members; design documents: database admins |
//! | `_users` documents | [`Database::update_docs`] | database admins, and a user for their own document; then the users-database rules ([`crate::user_doc`]) under the writer lock |
//! | `_replicator` documents | [`Database::update_docs`] | members; then `owner` is stamped or checked ([`crate::replicator_doc`]) |
//! | `_local` documents | [`Database::put_local`] | members (`_users`: as its documents) |
//! | `_security`, `revs_limit`, compaction, view cleanup | [`Database::set_security`] … | database admins |
//! | `_purge`, `purged_infos_limit` | [`Database::purge`], [`Database::set_purged_infos_limit`] | server admins (CouchDB's `chttpd_auth_request`) |
//! | databases | [`crate::Engine::create_db`], [`crate::Engine::delete_db`] | server admins; a MongoDB collection `P$coll` ([`crate::namespace`]) is also created by a user holding the role `db.readWrite` or `db.dbOwner` of its MongoDB database (`P` = `enc(db)`; not for `_couchdb`, whose collections are the CouchDB databases without `$`), with that database's roles in its `_security` |
//!
//! What a reader sees of a document is its twin, the read gate ([`crate::read_gate`]).
//!
//! Document writes are checked twice: [`Database::admit_doc`] before the writer lock
//! (cheap, and before any password is hashed), and the `_users` rules under the lock,
//! where the document's current revision cannot change underneath the check.

use bunko_doc::id::{DocKind, kind};

use crate::database::Database;
use crate::security::{Security, UserCtx};
use crate::users::USER_PREFIX;
use crate::{Error, Result};

impl Database {
    /// The parsed `_security` object.
    pub fn security_object(&self) -> Result<Security> {
        Security::parse(&self.security())
    }

    /// Whether this is the authentication database (`_users`, or the one
    /// `[chttpd_auth] authentication_db` names), whose documents follow `user_doc`.
    pub fn is_users_db(&self) -> bool {
        self.name() == self.config.get().users_db
    }

    /// May `ctx` write the document `id` at all? Members may; design documents need a
    /// database admin. In `_users` a user who is not a database admin may write only their
    /// own document, and an anonymous client (reaching the engine when `[chttpd]
    /// require_valid_user` is false) any user document, to sign up; any other id is
    /// reported missing, as CouchDB's `couch_users_db:before_doc_update` does.
    pub(crate) fn admit_doc(&self, security: &Security, ctx: &UserCtx, id: &str) -> Result<()> {
        if kind(id) == DocKind::Design {
            return security.check_admin(ctx);
        }
        if !self.is_users_db() || security.is_admin(ctx) {
            return security.check_member(ctx);
        }
        // A client without a name signs up: CouchDB lets it write any user document, and
        // the users-database rules (`user_doc`) then allow only a new one without roles.
        let own = match &ctx.name {
            Some(name) => id == format!("{USER_PREFIX}{name}"),
            None => id.starts_with(USER_PREFIX),
        };
        if own { Ok(()) } else { Err(crate::error::missing()) }
    }

    /// Fails unless `ctx` is an admin of this database.
    pub(crate) fn admit_admin(&self, ctx: &UserCtx) -> Result<()> {
        self.security_object()?.check_admin(ctx)
    }
}

/// May `ctx` create the database `name`? Server admins may create any (with the default
/// `_security`, `None`). A MongoDB collection `P$coll` may also be created by a user who
/// holds `db.readWrite` or `db.dbOwner` for the MongoDB database `db` with `enc(db)` = `P`,
/// as MongoDB's `readWrite` creates collections; it starts with the `_security` a server
/// admin's MongoDB `create` gives it: members `db.readWrite`, admins `db.dbOwner`. Roles on
/// [`crate::namespace::COUCH_DB`] create nothing: its collections are the CouchDB databases
/// without `$`, which only server admins create (that is also why a name without `$` never
/// reaches the role check).
pub(crate) fn admit_create_db(ctx: &UserCtx, name: &str) -> Result<Option<String>> {
    if ctx.is_server_admin() {
        return Ok(None);
    }
    if let Some((prefix, _)) = name.split_once('$') {
        for role in &ctx.roles {
            let Some((db, _)) = role.rsplit_once('.') else { continue };
            if db == crate::namespace::COUCH_DB {
                continue;
            }
            let (read_write, owner) = crate::namespace::collection_roles(db);
            if (*role == read_write || *role == owner) && crate::namespace::db_prefix(db) == prefix
            {
                let security = serde_json::json!({
                    "members": {"roles": ["_admin", read_write]},
                    "admins": {"roles": ["_admin", owner]},
                });
                return Ok(Some(security.to_string()));
            }
        }
    }
    admit_server_admin(ctx).map(|()| None)
}

/// Fails unless `ctx` is a server admin (`401`, CouchDB's "You are not a server admin.").
pub(crate) fn admit_server_admin(ctx: &UserCtx) -> Result<()> {
    if ctx.is_server_admin() {
        return Ok(());
    }
    Err(Error::Unauthorized("You are not a server admin.".to_string()))
}

#[cfg(test)]
mod create_tests {
    use super::*;

    fn user(roles: &[&str]) -> UserCtx {
        UserCtx { name: Some("bob".into()), roles: roles.iter().map(|r| r.to_string()).collect() }
    }

    #[test]
    fn mongodb_roles_create_their_databases_collections_only() {
        assert_eq!(admit_create_db(&UserCtx::admin("root"), "anything").ok(), Some(None));
        let security = admit_create_db(&user(&["shop.readWrite"]), "shop$books").ok().flatten();
        let security: serde_json::Value =
            serde_json::from_str(&security.unwrap_or_default()).unwrap_or_default();
        assert_eq!(security["members"]["roles"], serde_json::json!(["_admin", "shop.readWrite"]));
        assert_eq!(security["admins"]["roles"], serde_json::json!(["_admin", "shop.dbOwner"]));
        assert!(admit_create_db(&user(&["Test.dbOwner"]), "m()(54)est$c").is_ok());
        for (roles, name) in [
            (&["shop.readWrite"][..], "other$books"),
            (&["shop.readWrite"], "shop"),
            (&["shop.readWrite"], "shopping$books"),
            (&["shop.reader"], "shop$books"),
            (&["Test.readWrite"], "test$c"),
            (&["_couchdb.readWrite"], "m()_couchdb$c"),
            (&["_couchdb.dbOwner"], "people"),
            (&[], "shop$books"),
        ] {
            assert!(admit_create_db(&user(roles), name).is_err(), "{roles:?} {name}");
        }
    }
}
