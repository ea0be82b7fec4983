//! MongoDB's `failCommand` and `onPrimaryTransactionalWrite` fail points, the test command the drivers' specification tests
//! (retryable reads and writes, transactions, sessions) use to make the server fail a
//! command: with an error code and labels, a write concern error, a dropped connection, or
//! after a delay.
//!
//! Like MongoDB's, it exists only on a server started for tests (`bunko serve
//! --mongo-test-commands`, MongoDB's `enableTestCommands`); elsewhere `configureFailPoint`
//! is an unknown command. Only server admins may set it. It is one server-wide setting:
//! `mode` `alwaysOn`, `{times: n}`, `{skip: n}` or `off`; `data` names the commands
//! (`failCommands`), an `appName` the failing connections must have sent in `hello`, and
//! what happens (`errorCode`, `errorLabels`, `writeConcernError`, `closeConnection`,
//! `blockConnection` with `blockTimeMS`). `onPrimaryTransactionalWrite` fails retryable
//! writes: the connection is closed before the answer (`closeConnection`, by default), after
//! the write is done, or, with `failBeforeCommitExceptionCode`, without doing it (an open
//! connection gets that error), counted per statement as in MongoDB.
//! `failGetMoreAfterCursorCheckout` is `failCommand` on `getMore` (sharing its one slot).
//! `maxTimeAlwaysTimeOut` makes every read with a `maxTimeMS` (`find`, `aggregate`,
//! `count`, `distinct`) time out at once (`MaxTimeMSExpired`, 50), as MongoDB's does.

use std::time::Duration;

use bson::{Bson, Document, doc};
use parking_lot::Mutex;

use crate::error::MongoError;

/// Error codes after which MongoDB labels a retryable write's error `RetryableWriteError`
/// (the retryable-writes specification's list).
const RETRYABLE_CODES: &[i32] =
    &[6, 7, 89, 91, 134, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436];

/// Error codes of a `getMore` that MongoDB labels `ResumableChangeStreamError`: network,
/// not-primary and shutdown errors, `RetryChangeStream`, `FailedToSatisfyReadPreference`,
/// stale routing.
const RESUMABLE_CODES: &[i32] =
    &[6, 7, 63, 89, 91, 133, 150, 189, 234, 262, 9001, 10107, 11600, 11602, 13388, 13435, 13436];

/// The labels a fail point may attach (MongoDB's names; others are refused).
const LABELS: &[&str] = &[
    "RetryableWriteError",
    "TransientTransactionError",
    "UnknownTransactionCommitResult",
    "NoWritesPerformed",
    "ResumableChangeStreamError",
    "RetryableError",
    "SystemOverloadedError",
];

/// Where the failing command runs, for the labels MongoDB adds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Context {
    pub retryable_write: bool,
    /// Inside a transaction (not its commit or abort).
    pub in_txn: bool,
    /// `commitTransaction`.
    pub commit: bool,
    /// `getMore` (a change stream resumes after errors MongoDB labels resumable).
    pub get_more: bool,
}

/// What a failing command does instead of (or besides) running.
#[derive(Debug, Clone, Default)]
pub(crate) struct Failure {
    pub error: Option<MongoError>,
    pub close_connection: bool,
    pub block: Option<Duration>,
    /// Added to the reply of a command that ran.
    pub write_concern_error: Option<Document>,
    /// `errorLabels` given: MongoDB then adds none of its own.
    pub explicit_labels: bool,
    /// The given `errorLabels` that a reply with the write concern error carries at its
    /// top level (its `writeConcernError` stays as given).
    pub write_concern_labels: Vec<String>,
    /// From `failGetMoreAfterCursorCheckout`: the error arises inside the change stream's
    /// `getMore` (after its cursor is checked out), which MongoDB labels
    /// `ResumableChangeStreamError` when resumable; `failCommand` fails the command before
    /// that, unlabelled.
    pub checked_out: bool,
}

#[derive(Debug, Clone)]
struct FailCommand {
    /// `None`: always on.
    times: Option<u64>,
    skip: u64,
    commands: Vec<String>,
    app_name: Option<String>,
    failure: Failure,
}

/// `onPrimaryTransactionalWrite`: `None` times is always on; the error code, or `None` to
/// close the connection after the write.
#[derive(Debug, Clone)]
struct PrimaryWrite {
    times: Option<u64>,
    skip: u64,
    close: bool,
    code: Option<i32>,
}

/// The server's fail points.
#[derive(Default)]
pub(crate) struct FailPoints {
    fail_command: Mutex<Option<FailCommand>>,
    primary_write: Mutex<Option<PrimaryWrite>>,
    /// `maxTimeAlwaysTimeOut`: its `times` (`None`: always) and `skip`.
    max_time: Mutex<Option<(Option<u64>, u64)>>,
}

/// What `onPrimaryTransactionalWrite` does to a retryable write.
pub(crate) enum PrimaryWriteFailure {
    /// Do the write, then drop the connection unanswered.
    CloseAfter,
    /// Drop the connection without doing the write.
    CloseBefore,
    Fail(MongoError),
}

impl FailPoints {
    /// `configureFailPoint`: sets or clears `failCommand`.
    pub fn configure(&self, command: &Document) -> Result<Document, MongoError> {
        let mut primary_write = false;
        let mut get_more = false;
        let mut max_time = false;
        match command.get("configureFailPoint") {
            Some(Bson::String(name)) if name == "failCommand" => {}
            Some(Bson::String(name)) if name == "maxTimeAlwaysTimeOut" => max_time = true,
            // MongoDB's getMore-only fail point: `failCommand` on `getMore`.
            Some(Bson::String(name)) if name == "failGetMoreAfterCursorCheckout" => get_more = true,
            Some(Bson::String(name)) if name == "onPrimaryTransactionalWrite" => {
                primary_write = true
            }
            Some(Bson::String(name)) => {
                return Err(MongoError::not_implemented(format!(
                    "fail point {name} is not supported (only failCommand, failGetMoreAfterCursorCheckout, onPrimaryTransactionalWrite and maxTimeAlwaysTimeOut)"
                )));
            }
            _ => return Err(MongoError::type_mismatch("configureFailPoint must be a string")),
        }
        let (times, skip) = match command.get("mode") {
            Some(Bson::String(m)) if m == "off" => {
                if max_time {
                    *self.max_time.lock() = None;
                } else if primary_write {
                    *self.primary_write.lock() = None;
                } else {
                    *self.fail_command.lock() = None;
                }
                return Ok(doc! {"count": 0});
            }
            Some(Bson::String(m)) if m == "alwaysOn" => (None, 0),
            Some(Bson::Document(m)) if m.contains_key("times") => (Some(count(m, "times")?), 0),
            Some(Bson::Document(m)) if m.contains_key("skip") => (None, count(m, "skip")?),
            _ => {
                return Err(MongoError::bad_value("mode must be off, alwaysOn, {times} or {skip}"));
            }
        };
        if max_time {
            *self.max_time.lock() = Some((times, skip));
            return Ok(doc! {"count": 0});
        }
        if primary_write {
            let data = doc_of(command.get("data"));
            let code = match data.get("failBeforeCommitExceptionCode") {
                Some(_) => Some(
                    i32::try_from(count(&data, "failBeforeCommitExceptionCode")?)
                        .unwrap_or(i32::MAX),
                ),
                None => None,
            };
            let close = data.get("closeConnection").and_then(Bson::as_bool) != Some(false);
            *self.primary_write.lock() = Some(PrimaryWrite { times, skip, close, code });
            return Ok(doc! {"count": 0});
        }
        let data = match command.get("data") {
            Some(Bson::Document(d)) => d,
            _ => return Err(MongoError::bad_value("failCommand needs a data document")),
        };
        let mut point = parse_data(data, times, skip)?;
        if get_more {
            point.commands = vec!["getMore".to_string()];
            point.failure.checked_out = true;
        }
        *self.fail_command.lock() = Some(point);
        Ok(doc! {"count": 0})
    }

    /// Whether any fail point is set.
    pub fn armed(&self) -> bool {
        self.fail_command.lock().is_some()
            || self.primary_write.lock().is_some()
            || self.max_time.lock().is_some()
    }

    /// Whether `maxTimeAlwaysTimeOut` times out the read about to run (counting it).
    pub fn max_time_always(&self) -> bool {
        let mut slot = self.max_time.lock();
        let Some((times, skip)) = slot.as_mut() else { return false };
        if *skip > 0 {
            *skip -= 1;
            return false;
        }
        match times {
            Some(1) => *slot = None,
            Some(n) => *n -= 1,
            None => {}
        }
        true
    }

    /// What the command `name` of a connection named `app_name` meets, if it fails.
    pub fn check(&self, name: &str, app_name: Option<&str>) -> Option<Failure> {
        let mut slot = self.fail_command.lock();
        let point = slot.as_mut()?;
        if !point.commands.iter().any(|c| c == name)
            || point.app_name.as_deref().is_some_and(|a| Some(a) != app_name)
        {
            return None;
        }
        if point.skip > 0 {
            point.skip -= 1;
            return None;
        }
        let failure = point.failure.clone();
        match &mut point.times {
            Some(1) => *slot = None,
            Some(n) => *n -= 1,
            None => {}
        }
        Some(failure)
    }
}

/// `onPrimaryTransactionalWrite` for a retryable write about to run.
impl FailPoints {
    /// Counted per statement, as MongoDB counts it: a command of `statements` statements
    /// uses up as many of the `skip` count, and fails if a statement is left after it
    /// (the whole command: with `closeConnection` after the write, as MongoDB, whose
    /// retry then finds every statement done; before it, also the statements ahead of the
    /// failing one are not written, where MongoDB writes them).
    pub fn check_primary_write(&self, statements: u64) -> Option<PrimaryWriteFailure> {
        let mut slot = self.primary_write.lock();
        let point = slot.as_mut()?;
        let skipped = point.skip.min(statements.max(1));
        point.skip -= skipped;
        if skipped == statements.max(1) {
            return None;
        }
        let failure = match (point.close, point.code) {
            (true, Some(_)) => PrimaryWriteFailure::CloseBefore,
            (true, None) => PrimaryWriteFailure::CloseAfter,
            (false, Some(code)) => PrimaryWriteFailure::Fail(MongoError::new(
                code,
                code_name(code),
                "Failing write via 'onPrimaryTransactionalWrite' failpoint",
            )),
            (false, None) => return None,
        };
        match &mut point.times {
            Some(1) => *slot = None,
            Some(n) => *n -= 1,
            None => {}
        }
        Some(failure)
    }
}

fn doc_of(value: Option<&Bson>) -> Document {
    match value {
        Some(Bson::Document(d)) => d.clone(),
        _ => Document::new(),
    }
}

fn count(mode: &Document, field: &str) -> Result<u64, MongoError> {
    match mode.get(field) {
        Some(Bson::Int32(n)) if *n >= 0 => Ok(*n as u64),
        Some(Bson::Int64(n)) if *n >= 0 => Ok(*n as u64),
        Some(Bson::Double(n)) if *n >= 0.0 => Ok(*n as u64),
        _ => Err(MongoError::bad_value(format!("mode.{field} must be a non-negative number"))),
    }
}

fn parse_data(data: &Document, times: Option<u64>, skip: u64) -> Result<FailCommand, MongoError> {
    let mut point = FailCommand {
        times,
        skip,
        commands: Vec::new(),
        app_name: None,
        failure: Failure::default(),
    };
    for (key, value) in data {
        match (key.as_str(), value) {
            ("failCommands", Bson::Array(names)) => {
                point.commands =
                    names.iter().filter_map(|n| n.as_str().map(String::from)).collect();
            }
            ("appName", Bson::String(name)) => point.app_name = Some(name.clone()),
            ("closeConnection", v) => point.failure.close_connection = v.as_bool() == Some(true),
            ("errorCode", _) => {
                let code = i32::try_from(count(data, "errorCode")?).unwrap_or(i32::MAX);
                let error = MongoError::new(
                    code,
                    code_name(code),
                    "Failing command via 'failCommand' failpoint",
                );
                point.failure.error = Some(error);
            }
            ("errorLabels", Bson::Array(_))
            | ("blockConnection", _)
            | ("failInternalCommands", _) => {}
            ("blockTimeMS", _) => {
                let ms = count(data, "blockTimeMS")?;
                let on = data.get("blockConnection").and_then(Bson::as_bool) == Some(true);
                point.failure.block = on.then(|| Duration::from_millis(ms));
            }
            ("writeConcernError", Bson::Document(wce)) => {
                point.failure.write_concern_error = Some(wce.clone());
            }
            _ => {
                return Err(MongoError::not_implemented(format!(
                    "failCommand data field '{key}' is not supported"
                )));
            }
        }
    }
    if let Some(Bson::Array(labels)) = data.get("errorLabels") {
        let mut error = point.failure.error.take();
        for label in labels.iter().filter_map(Bson::as_str) {
            let Some(label) = LABELS.iter().find(|l| **l == label) else {
                return Err(MongoError::not_implemented(format!(
                    "error label {label} is not supported"
                )));
            };
            error = error.map(|e| e.with_label(label));
            point.failure.write_concern_labels.push(label.to_string());
        }
        point.failure.error = error;
        point.failure.explicit_labels = true;
    }
    Ok(point)
}

/// Whether MongoDB would add `RetryableWriteError` to this error of a retryable write.
fn retryable_code(code: i32) -> bool {
    RETRYABLE_CODES.contains(&code)
}

/// MongoDB's name of the codes fail points use.
fn code_name(code: i32) -> &'static str {
    match code {
        1 => "InternalError",
        2 => "BadValue",
        6 => "HostUnreachable",
        7 => "HostNotFound",
        8 => "UnknownError",
        11 => "UserNotFound",
        13 => "Unauthorized",
        20 => "IllegalOperation",
        24 => "LockTimeout",
        43 => "CursorNotFound",
        50 => "MaxTimeMSExpired",
        59 => "CommandNotFound",
        64 => "WriteConcernFailed",
        89 => "NetworkTimeout",
        91 => "ShutdownInProgress",
        112 => "WriteConflict",
        134 => "ReadConcernMajorityNotAvailableYet",
        189 => "PrimarySteppedDown",
        239 => "SnapshotTooOld",
        246 => "SnapshotUnavailable",
        251 => "NoSuchTransaction",
        262 => "ExceededTimeLimit",
        267 => "PreparedTransactionInProgress",
        9001 => "SocketException",
        10107 => "NotWritablePrimary",
        11000 => "DuplicateKey",
        11600 => "InterruptedAtShutdown",
        11601 => "Interrupted",
        11602 => "InterruptedDueToReplStateChange",
        13435 => "NotPrimaryNoSecondaryOk",
        13436 => "NotPrimaryOrSecondary",
        _ => "",
    }
}

impl Failure {
    /// The error, with the labels MongoDB adds unless the fail point named them:
    /// `RetryableWriteError` to a retryable write's (or a commit's or abort's) error with a
    /// retryable code, `TransientTransactionError` to a transient error (a conflict, a lock
    /// time-out, a missing transaction; inside a transaction also a retryable code),
    /// `UnknownTransactionCommitResult` to a commit's retryable error or time-out.
    pub fn error(&self, context: Context) -> Option<MongoError> {
        let mut error = self.error.clone()?;
        if self.explicit_labels {
            return Some(error);
        }
        let code = error.code;
        if context.retryable_write && retryable_code(code) {
            error = error.with_label("RetryableWriteError");
        }
        // LockTimeout, WriteConflict, SnapshotUnavailable, NoSuchTransaction,
        // PreparedTransactionInProgress: the whole transaction may be retried.
        let transient = matches!(code, 24 | 112 | 246 | 251 | 267);
        if (context.in_txn && retryable_code(code))
            || ((context.in_txn || context.commit) && transient)
        {
            error = error.with_label(crate::error::TRANSIENT);
        }
        if context.get_more && self.checked_out && RESUMABLE_CODES.contains(&code) {
            error = error.with_label("ResumableChangeStreamError");
        }
        if context.commit && (retryable_code(code) || code == 50) {
            error = error.with_label(crate::error::UNKNOWN_COMMIT);
        }
        Some(error)
    }

    /// Adds the write concern error to a reply, with its labels at the top level: the given
    /// `errorLabels`, else those inside the given `writeConcernError` (the older form), else
    /// `RetryableWriteError` for a retryable write's retryable code, as MongoDB adds it.
    pub fn add_write_concern_error(&self, reply: &mut Document, retryable_write: bool) {
        let Some(wce) = self.write_concern_error.clone() else { return };
        let code = wce.get_i32("code").unwrap_or_default();
        let labels: Vec<Bson> = if self.explicit_labels {
            self.write_concern_labels.iter().map(|l| Bson::String(l.clone())).collect()
        } else if let Ok(inside) = wce.get_array("errorLabels") {
            inside.clone()
        } else if retryable_write && retryable_code(code) {
            vec![Bson::String("RetryableWriteError".into())]
        } else {
            Vec::new()
        };
        if !labels.is_empty() {
            reply.insert("errorLabels", labels);
        }
        reply.insert("writeConcernError", wce);
    }
}
