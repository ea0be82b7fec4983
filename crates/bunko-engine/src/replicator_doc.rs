//! `_replicator` documents' `owner` (CouchDB's `couch_replicator_docs:before_doc_update`):
//! an interactive write of a replication document by anyone but the replicator itself
//! (role `_replicator`) is stamped with the writer's name when it names no owner; a
//! document owned by someone else may be written only by a database admin (who keeps that
//! owner, or takes a `null` one), anyone else gets `403 forbidden`. Design and `_local`
//! documents and replicated writes are left alone. Then a document that cannot be parsed
//! as a replication is refused (`replicator_check.rs`). Part of the write gate: `prepare`
//! in `write.rs` calls it before the revision is computed, so the stamp is part of the body.

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

/// Refuses (`403 forbidden`, CouchDB's reason) a replication document that cannot be
/// parsed, as CouchDB's `before_doc_update`: deletions, the replicator's own writes and
/// documents already `failed` are let through.
pub(crate) fn check(ctx: &UserCtx, doc: &ParsedDoc) -> Result<()> {
    let failed = doc.body.get("_replication_state").is_some_and(|s| s == "failed");
    if doc.deleted || failed || ctx.roles.iter().any(|r| r == REPLICATOR_ROLE) {
        return Ok(());
    }
    match crate::replicator_check::refusal(&doc.body) {
        Some(reason) => Err(Error::Forbidden(reason)),
        None => Ok(()),
    }
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

    #[test]
    fn documents_that_cannot_be_parsed_are_refused_with_couchdbs_reason() {
        let (src, tgt) = ("http://127.0.0.1:9/a", "http://127.0.0.1:9/b");
        let refused = |body: Value| match check(&user("kana"), &doc(body)) {
            Err(Error::Forbidden(reason)) => reason,
            other => panic!("{other:?}"),
        };
        assert_eq!(refused(json!({"target": tgt})), "Missing replicator database");
        assert_eq!(refused(json!({"source": src})), "Missing replicator database");
        assert_eq!(
            refused(json!({"source": "http://", "target": tgt})),
            "endpoint has an invalid url"
        );
        assert_eq!(
            refused(json!({"source": {"url": "ftp://h/a"}, "target": tgt})),
            "endpoint has an invalid url"
        );
        assert_eq!(refused(json!({"source": 1, "target": tgt})), "{error,function_clause}");
        let with = |key: &str, value: Value| {
            let mut body = json!({"source": src, "target": tgt});
            body[key] = value;
            refused(body)
        };
        let boolean = "{throw,{bad_request,<<\"parameter `continuous` must be a boolean\">>}}";
        assert_eq!(with("continuous", json!("true")), boolean);
        assert!(with("create_target", json!(1)).contains("`create_target` must be a boolean"));
        assert!(with("doc_ids", json!("a")).contains("`doc_ids` must be an array"));
        assert_eq!(with("doc_ids", json!([1])), "{error,function_clause}");
        assert!(with("selector", json!([])).contains("`selector` must be a JSON object"));
        assert_eq!(with("filter", json!(1)), "{error,badarg}");
        assert_eq!(
            with("filter", json!("nope")),
            "Invalid filter. Must match `ddocname/filtername`."
        );
        assert_eq!(with("worker_batch_size", json!("many")), "{error,badarg}");
        let mut both = json!({"source": src, "target": tgt, "doc_ids": ["a"], "filter": "d/f"});
        assert!(refused(both.clone()).contains("are mutually exclusive"));

        let fine = |body: Value| check(&user("kana"), &doc(body)).is_ok();
        assert!(fine(json!({"source": "local", "target": {"url": tgt, "headers": {}},
            "continuous": true, "doc_ids": null, "since_seq": 3, "worker_batch_size": "100",
            "filter": "_view", "query_params": {"view": "d/v"}})));
        assert!(fine(json!({"cancel": true, "replication_id": "abc"})), "a cancel by id");
        both["_replication_state"] = json!("failed");
        assert!(fine(both.clone()), "a failed document is left alone");
        let replicator = UserCtx { name: None, roles: vec![REPLICATOR_ROLE.into()] };
        assert!(check(&replicator, &doc(json!({}))).is_ok());
        let mut deleted = doc(json!({}));
        deleted.deleted = true;
        assert!(check(&user("kana"), &deleted).is_ok());
    }
}
