//! `_replicator` documents' `owner` (CouchDB's `couch_replicator_docs:before_doc_update`):
//! an interactive write of a replication document by anyone but the replicator itself
//! (role `_replicator`) is stamped with the writer's name when it names no owner; a
//! document owned by someone else may be written only by a database admin (who keeps that
//! owner, or takes a `null` one), anyone else gets `403 forbidden`. Design and `_local`
//! documents and replicated writes are left alone. Part of the write gate: `prepare` in
//! `write.rs` calls it before the revision is computed, so the stamp is part of the body.

use bunko_doc::body::ParsedDoc;
use serde_json::Value;

use crate::security::{Security, UserCtx};
use crate::{Error, Result};

/// The replicator database.
pub const REPLICATOR_DB: &str = "_replicator";

/// The role the replicator's own writes carry (its state updates).
pub const REPLICATOR_ROLE: &str = "_replicator";

/// Sets or checks `owner` on a normal document of `_replicator` written by `ctx`.
pub(crate) fn stamp_owner(security: &Security, ctx: &UserCtx, doc: &mut ParsedDoc) -> Result<()> {
    if ctx.roles.iter().any(|r| r == REPLICATOR_ROLE) {
        return Ok(());
    }
    let name = ctx.name.clone().map_or(Value::Null, Value::String);
    match doc.body.get("owner") {
        None => {
            doc.body.insert("owner".into(), name);
        }
        Some(owner) if *owner == name => {}
        Some(owner) if security.is_admin(ctx) => {
            if owner.is_null() {
                doc.body.insert("owner".into(), name);
            }
        }
        Some(_) => {
            return Err(Error::Forbidden(
                "Can't update replication documents from other users.".into(),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn doc(body: Value) -> ParsedDoc {
        let Value::Object(body) = body else { panic!("an object") };
        ParsedDoc { id: Some("r".into()), body, ..Default::default() }
    }

    fn user(name: &str) -> UserCtx {
        UserCtx { name: Some(name.into()), roles: vec![] }
    }

    #[test]
    fn the_writer_becomes_the_owner_and_others_are_refused() -> Result<()> {
        let security = Security::parse(r#"{"admins": {"names": ["dba"]}}"#)?;
        let mut new = doc(json!({"source": "s"}));
        stamp_owner(&security, &user("kana"), &mut new)?;
        assert_eq!(new.body["owner"], json!("kana"));
        stamp_owner(&security, &user("kana"), &mut new)?;
        let refused = stamp_owner(&security, &user("taro"), &mut new.clone());
        assert!(matches!(refused, Err(Error::Forbidden(_))), "{refused:?}");
        stamp_owner(&security, &user("dba"), &mut new)?;
        assert_eq!(new.body["owner"], json!("kana"), "an admin keeps the owner");
        let mut unowned = doc(json!({"owner": null}));
        stamp_owner(&security, &user("dba"), &mut unowned)?;
        assert_eq!(unowned.body["owner"], json!("dba"));
        let replicator = UserCtx { name: None, roles: vec![REPLICATOR_ROLE.into()] };
        let mut state = doc(json!({"owner": "kana", "_replication_state": "completed"}));
        stamp_owner(&security, &replicator, &mut state)?;
        assert_eq!(state.body["owner"], json!("kana"));
        Ok(())
    }
}
