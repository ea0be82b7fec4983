//! Sessions, transactions and retryable writes: what `lsid`, `txnNumber`,
//! `startTransaction` and `autocommit` do to a command ([`crate::sessions`] keeps the state).
//!
//! - `autocommit: false` runs the command inside the session's transaction numbered
//!   `txnNumber` ([`in_txn`]); `startTransaction: true` opens it (`Engine::begin_shared` with
//!   the connection's user). Any error inside aborts it, as in MongoDB.
//! - `commitTransaction` commits it in one storage commit; a retried commit of a committed
//!   transaction answers ok again. `abortTransaction` drops it.
//! - `txnNumber` on a write outside a transaction makes it a retryable write: the reply is
//!   kept, and the same `(lsid, txnNumber)` again answers it without writing again.

use bson::{Bson, Document, doc};
use bunko_engine::Error;

use super::{Ctx, bool_of, in_txn, int_of};
use crate::error::{MongoError, UNKNOWN_COMMIT};
use crate::sessions::{Key, OpenTxn, ServerSession, Txn};

/// The session fields of a command.
pub(super) struct Fields {
    /// `lsid.id`'s bytes.
    pub lsid: Option<Vec<u8>>,
    pub txn_number: Option<i64>,
    pub start: bool,
    /// `autocommit: false` was given.
    pub in_txn: bool,
}

/// Fields that belong to the session machinery, not to the command.
pub(super) const SESSION_FIELDS: &[&str] =
    &["txnNumber", "startTransaction", "autocommit", "stmtId", "stmtIds", "readConcern"];

fn invalid(msg: impl Into<String>) -> MongoError {
    MongoError::new(72, "InvalidOptions", msg)
}

impl Fields {
    pub fn parse(command: &Document) -> Result<Fields, MongoError> {
        let lsid = match command.get("lsid") {
            None => None,
            Some(Bson::Document(lsid)) => match lsid.get("id") {
                Some(Bson::Binary(id)) => Some(id.bytes.clone()),
                _ => return Err(MongoError::type_mismatch("lsid.id must be a UUID")),
            },
            Some(_) => return Err(MongoError::type_mismatch("lsid must be an object")),
        };
        let txn_number = int_of(command, "txnNumber")?;
        let start = bool_of(command, "startTransaction", false)?;
        let in_txn = match command.get("autocommit") {
            None => false,
            Some(_) if bool_of(command, "autocommit", true)? => {
                return Err(invalid("Specifying autocommit=true is not allowed."));
            }
            Some(_) => true,
        };
        if txn_number.is_some() && lsid.is_none() {
            return Err(invalid("Transaction number requires a session ID to also be specified"));
        }
        if in_txn && txn_number.is_none() {
            return Err(invalid(
                "'autocommit' field requires a transaction number to also be specified",
            ));
        }
        if start && !in_txn {
            return Err(invalid(
                "'startTransaction' field requires 'autocommit' field to also be specified",
            ));
        }
        if txn_number.is_some_and(|n| n < 0) {
            return Err(MongoError::bad_value("txnNumber must be non-negative"));
        }
        Ok(Fields { lsid, txn_number, start, in_txn })
    }
}

fn key(ctx: &Ctx, lsid: &[u8]) -> Key {
    key_of(ctx.session, lsid)
}

fn key_of(session: &crate::Session, lsid: &[u8]) -> Key {
    let user = session.user.as_ref().map(|u| u.name.clone().unwrap_or_default());
    (lsid.to_vec(), user.unwrap_or_default())
}

/// Whether the retryable write `fields` names is done already: its retry answers the first
/// reply without writing, so the fail points on writes do not fire for it.
pub(super) fn done_before(
    server: &crate::Server,
    session: &crate::Session,
    fields: &Fields,
) -> bool {
    let (Some(lsid), Some(n)) = (&fields.lsid, fields.txn_number) else { return false };
    let key = key_of(session, lsid);
    let found = server.sessions.get(key.clone());
    let found = found.lock();
    if found.number < 0 {
        return crate::retried::load(&server.engine, &key).is_some_and(|(number, _)| number == n);
    }
    found.number == n && found.retried.is_some()
}

fn too_old(n: i64, current: i64) -> MongoError {
    MongoError::new(
        225,
        "TransactionTooOld",
        format!(
            "Cannot start transaction {n} on session because a newer transaction {current} has already started"
        ),
    )
}

/// Runs `name` inside the session's transaction (`autocommit: false`).
pub(super) fn in_transaction(
    ctx: &mut Ctx,
    name: &str,
    fields: &Fields,
    command: &Document,
) -> Result<Document, MongoError> {
    let (Some(lsid), Some(n)) = (&fields.lsid, fields.txn_number) else {
        return Err(invalid("a transaction needs lsid and txnNumber"));
    };
    if ctx.bypass_document_validation {
        return Err(MongoError::not_implemented(
            "bypassDocumentValidation inside a transaction is not supported yet",
        ));
    }
    let session = ctx.server.sessions.get(key(ctx, lsid));
    let mut session = session.lock();
    session.touch();
    if name == "commitTransaction" || name == "abortTransaction" {
        return finish(ctx, &mut session, name, n);
    }
    if command.contains_key("writeConcern") {
        return Err(invalid("Cannot set write concern after starting a transaction."));
    }
    if fields.start {
        open(ctx, &mut session, n, command)?;
    } else {
        check_active(&session, n)?;
        if command.contains_key("readConcern") {
            return Err(invalid(
                "Only the first command in a transaction may specify a readConcern",
            ));
        }
    }
    let Txn::Open(txn) = &mut session.txn else {
        return Err(MongoError::no_such_transaction(format!(
            "Transaction with {{ txnNumber: {n} }} has been aborted."
        )));
    };
    let result = in_txn::run(ctx, txn, name, command);
    if result.is_err() {
        session.txn = Txn::Aborted;
    }
    result
}

/// A read at a snapshot outside a transaction (`readConcern: {level: "snapshot"}`, with
/// or without `atClusterTime`): it runs as a read-only transaction on the snapshot kept
/// for that cluster time ([`crate::snapshots`]), and its reply names the time
/// (`cursor.atClusterTime`, or `atClusterTime` for `distinct`).
pub(super) fn snapshot_read(
    ctx: &mut Ctx,
    name: &str,
    command: &Document,
) -> Result<Document, MongoError> {
    let concern = command.get_document("readConcern").ok();
    let at = match concern.and_then(|c| c.get("atClusterTime")) {
        None => None,
        Some(Bson::Timestamp(t)) => Some(*t),
        Some(_) => {
            return Err(MongoError::type_mismatch(
                "BSON field 'readConcern.atClusterTime' is the wrong type, expected type 'timestamp'",
            ));
        }
    };
    if concern.is_some_and(|c| c.contains_key("afterClusterTime")) && at.is_some() {
        return Err(invalid(
            "Specifying a timestamp for readConcern snapshot in a causally consistent session is not allowed",
        ));
    }
    let server = ctx.server;
    let (time, snapshot) = server.snapshots.at(&server.clock, &server.engine, at)?;
    let user = super::admin::user(ctx);
    let txn = server.engine.begin_at(&user, snapshot);
    let mut open = OpenTxn::new(txn, &server.sessions.locks);
    let mut reply = in_txn::run(ctx, &mut open, name, command)?;
    match reply.get_mut("cursor") {
        Some(Bson::Document(cursor)) => {
            cursor.insert("atClusterTime", time);
        }
        _ => {
            reply.insert("atClusterTime", time);
        }
    }
    Ok(reply)
}

/// Starts transaction `n`; an older one still open is aborted, as MongoDB does.
fn open(
    ctx: &Ctx,
    session: &mut ServerSession,
    n: i64,
    command: &Document,
) -> Result<(), MongoError> {
    if n < session.number {
        return Err(too_old(n, session.number));
    }
    if n == session.number {
        return Err(MongoError::new(
            117,
            "ConflictingOperationInProgress",
            format!(
                "Cannot start a transaction at given transaction number {n} a transaction with the same number is in state {}",
                state(session)
            ),
        ));
    }
    if let Ok(concern) = command.get_document("readConcern")
        && let Ok(level) = concern.get_str("level")
        && !matches!(level, "local" | "majority" | "snapshot")
    {
        return Err(invalid(format!(
            "The readConcern level must be either 'local' (default), 'majority' or 'snapshot' in order to run in a transaction: {level}"
        )));
    }
    let user = super::admin::user(ctx);
    session.number = n;
    session.retried = None;
    let txn = ctx.server.engine.begin_shared(&user);
    session.txn = Txn::Open(Box::new(OpenTxn::new(txn, &ctx.server.sessions.locks)));
    Ok(())
}

fn state(session: &ServerSession) -> &'static str {
    match session.txn {
        Txn::None => "TxnNone",
        Txn::Open(_) => "TxnInProgress",
        Txn::Committed => "TxnCommitted",
        Txn::Aborted => "TxnAborted",
    }
}

/// Checks that command `n` continues the session's open transaction.
fn check_active(session: &ServerSession, n: i64) -> Result<(), MongoError> {
    if n < session.number {
        return Err(too_old(n, session.number));
    }
    if n > session.number {
        return Err(MongoError::no_such_transaction(format!(
            "Given transaction number {n} does not match any in-progress transactions. The active transaction number is {}",
            session.number
        )));
    }
    match session.txn {
        Txn::Open(_) => Ok(()),
        Txn::Committed => Err(MongoError::new(
            256,
            "TransactionCommitted",
            format!("Transaction {n} has been committed."),
        )),
        Txn::None | Txn::Aborted => Err(MongoError::no_such_transaction(format!(
            "Transaction with {{ txnNumber: {n} }} has been aborted."
        ))),
    }
}

/// `commitTransaction` and `abortTransaction`.
fn finish(
    ctx: &mut Ctx,
    session: &mut ServerSession,
    name: &str,
    n: i64,
) -> Result<Document, MongoError> {
    if n != session.number {
        return check_active(session, n).map(|_| Document::new());
    }
    let commit = name == "commitTransaction";
    match (std::mem::replace(&mut session.txn, Txn::Aborted), commit) {
        (Txn::Open(open), true) => {
            let OpenTxn { txn, held, ddl } = *open;
            // Collections the transaction created appear with its commit, their indexes
            // right after it.
            let committed = txn.commit();
            drop(held);
            committed.map_err(commit_error)?;
            session.txn = Txn::Committed;
            in_txn::run_ddl(ctx, &ddl)?;
            Ok(Document::new())
        }
        (Txn::Open(_), false) => Ok(Document::new()),
        (Txn::Committed, true) => {
            session.txn = Txn::Committed;
            Ok(Document::new())
        }
        (Txn::Committed, false) => {
            session.txn = Txn::Committed;
            Err(MongoError::new(
                256,
                "TransactionCommitted",
                format!("Transaction {n} has been committed."),
            ))
        }
        (Txn::None | Txn::Aborted, _) => Err(MongoError::no_such_transaction(format!(
            "Transaction with {{ txnNumber: {n} }} has been aborted."
        ))),
    }
}

/// A failed commit. A conflict or a refused document left nothing written; a storage
/// failure may have happened after the batch reached the log, so its outcome is unknown.
fn commit_error(err: Error) -> MongoError {
    let unknown = matches!(err, Error::Storage(_));
    let err = MongoError::from(err);
    if unknown { err.with_label(UNKNOWN_COMMIT) } else { err }
}

/// Runs a write that carries `txnNumber` outside a transaction, at most once per number.
pub(super) fn retryable(
    ctx: &mut Ctx,
    fields: &Fields,
    run: impl FnOnce(&mut Ctx) -> Result<Document, MongoError>,
) -> Result<Document, MongoError> {
    let (Some(lsid), Some(n)) = (&fields.lsid, fields.txn_number) else { return run(ctx) };
    let key = key(ctx, lsid);
    let session = ctx.server.sessions.get(key.clone());
    let mut session = session.lock();
    session.touch();
    if session.number < 0
        && let Some((number, reply)) = crate::retried::load(&ctx.server.engine, &key)
    {
        // The session's last retryable write before a restart of the server.
        session.number = number;
        session.retried = Some(reply);
    }
    if n < session.number {
        return Err(MongoError::new(
            225,
            "TransactionTooOld",
            format!(
                "Retryable write with txnNumber {n} is prohibited on session because a newer retryable write with txnNumber {} has already started on this session.",
                session.number
            ),
        ));
    }
    if n == session.number {
        if let Some(reply) = &session.retried {
            // The first attempt's writes may still wait for their sync on its connection:
            // its reply is an acknowledgement, so it is given only once they are durable.
            ctx.server.engine.sync_applied()?;
            return Ok(reply.clone());
        }
        if !matches!(session.txn, Txn::None) {
            return Err(MongoError::new(
                217,
                "IncompleteTransactionHistory",
                format!(
                    "Cannot retry a retryable write with txnNumber {n} that was used by a transaction"
                ),
            ));
        }
    }
    session.number = n;
    session.txn = Txn::None;
    session.retried = None;
    let mut reply = run(ctx)?;
    reply.insert("ok", 1.0);
    crate::retried::store(&ctx.server.engine, &key, n, &reply);
    session.retried = Some(reply.clone());
    reply.remove("ok");
    Ok(reply)
}

/// `endSessions` / `killSessions`: `[{id: UUID}, ...]`.
pub(super) fn end_sessions(ctx: &mut Ctx, command: &Document) -> Result<Document, MongoError> {
    let Some((_, Bson::Array(ids))) = command.iter().next() else {
        return Err(MongoError::type_mismatch("expected an array of session ids"));
    };
    let mut keys = Vec::new();
    for id in ids {
        match id {
            Bson::Document(lsid) => match lsid.get("id") {
                Some(Bson::Binary(b)) => keys.push(key(ctx, &b.bytes)),
                _ => return Err(MongoError::type_mismatch("lsid.id must be a UUID")),
            },
            _ => return Err(MongoError::type_mismatch("session ids must be objects")),
        }
    }
    ctx.server.sessions.end(&keys);
    crate::retried::forget(&ctx.server.engine, &keys);
    Ok(Document::new())
}

/// `killAllSessions`: an admin's ends everybody's sessions, anyone else's their own.
pub(super) fn kill_all_sessions(ctx: &mut Ctx, _: &Document) -> Result<Document, MongoError> {
    let user = super::admin::user(ctx);
    let name = user.name.clone().unwrap_or_default();
    let admin = user.roles.iter().any(|r| r == "_admin");
    ctx.server.sessions.end_all((!admin).then_some(name.as_str()));
    Ok(doc! {})
}

/// `commitTransaction`/`abortTransaction` reach [`in_transaction`] first; this answers
/// only if the table is used without it.
pub(super) fn outside(_: &mut Ctx, _: &Document) -> Result<Document, MongoError> {
    Err(invalid("a transaction needs lsid and txnNumber"))
}
