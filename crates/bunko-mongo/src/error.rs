//! The one error table of the MongoDB front end: every error a command can meet becomes
//! MongoDB's `{ok: 0, errmsg, code, codeName}` here, with MongoDB's codes and names
//! (`src/mongo/base/error_codes.yml` of the MongoDB server), and engine and query errors are
//! mapped in exactly one `match` each.

use bson::{Document, doc};

/// The label of an error after which the whole transaction may be retried.
pub const TRANSIENT: &str = "TransientTransactionError";
/// The label of a commit whose outcome is not known: retry the commit itself.
pub const UNKNOWN_COMMIT: &str = "UnknownTransactionCommitResult";

/// A command failure as MongoDB reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct MongoError {
    pub code: i32,
    pub code_name: &'static str,
    pub errmsg: String,
    /// `errorLabels` (`TransientTransactionError`, `UnknownTransactionCommitResult`), which
    /// the drivers' transaction retry loops read.
    pub labels: Vec<&'static str>,
    /// More fields of the reply or write error (`keyPattern`/`keyValue` of E11000).
    pub extra: Option<Box<Document>>,
}

impl MongoError {
    pub fn new(code: i32, code_name: &'static str, errmsg: impl Into<String>) -> Self {
        Self { code, code_name, errmsg: errmsg.into(), labels: Vec::new(), extra: None }
    }

    /// The same error carrying `label` too.
    pub fn with_label(mut self, label: &'static str) -> Self {
        if !self.labels.contains(&label) {
            self.labels.push(label);
        }
        self
    }

    /// A write that lost to another committed write: retry the whole transaction.
    pub fn write_conflict(msg: impl Into<String>) -> Self {
        Self::new(112, "WriteConflict", msg).with_label(TRANSIENT)
    }

    /// A write outside a transaction that kept losing to other writes after its retries.
    pub fn write_conflict_retries_exhausted() -> Self {
        Self::new(
            112,
            "WriteConflict",
            "Write conflict during plan execution and yielding is disabled.",
        )
    }

    /// The transaction is unknown, aborted or over (MongoDB's `NoSuchTransaction`).
    pub fn no_such_transaction(msg: impl Into<String>) -> Self {
        Self::new(251, "NoSuchTransaction", msg).with_label(TRANSIENT)
    }

    pub fn internal(msg: impl Into<String>) -> Self {
        Self::new(1, "InternalError", msg)
    }

    pub fn bad_value(msg: impl Into<String>) -> Self {
        Self::new(2, "BadValue", msg)
    }

    pub fn failed_to_parse(msg: impl Into<String>) -> Self {
        Self::new(9, "FailedToParse", msg)
    }

    pub fn unauthorized(msg: impl Into<String>) -> Self {
        Self::new(13, "Unauthorized", msg)
    }

    pub fn type_mismatch(msg: impl Into<String>) -> Self {
        Self::new(14, "TypeMismatch", msg)
    }

    pub fn auth_failed() -> Self {
        Self::new(18, "AuthenticationFailed", "Authentication failed.")
    }

    pub fn invalid_bson(msg: impl Into<String>) -> Self {
        Self::new(22, "InvalidBSON", msg)
    }

    pub fn namespace_not_found(msg: impl Into<String>) -> Self {
        Self::new(26, "NamespaceNotFound", msg)
    }

    pub fn cursor_not_found(id: i64) -> Self {
        Self::new(43, "CursorNotFound", format!("cursor id {id} not found"))
    }

    pub fn namespace_exists(msg: impl Into<String>) -> Self {
        Self::new(48, "NamespaceExists", msg)
    }

    /// MongoDB's text for an unknown command.
    /// MongoDB's unknown-field error; `path` is `command.field`.
    pub fn unknown_field(path: &str) -> Self {
        Self::new(40415, "Location40415", format!("BSON field '{path}' is an unknown field."))
    }

    pub fn command_not_found(name: &str) -> Self {
        Self::new(59, "CommandNotFound", format!("no such command: '{name}'"))
    }

    pub fn invalid_namespace(msg: impl Into<String>) -> Self {
        Self::new(73, "InvalidNamespace", msg)
    }

    pub fn not_implemented(msg: impl Into<String>) -> Self {
        Self::new(238, "NotImplemented", msg)
    }

    /// A document or message over the size limit.
    pub fn too_large(size: usize, limit: usize) -> Self {
        Self::new(
            10334,
            "BSONObjectTooLarge",
            format!(
                "BSONObj size: {size} (0x{size:X}) is invalid. Size must be between 0 and {limit}({}MB)",
                limit / (1024 * 1024)
            ),
        )
    }

    pub fn duplicate_key(ns: &str, id: &str) -> Self {
        Self::new(
            11000,
            "DuplicateKey",
            format!(
                "E11000 duplicate key error collection: {ns} index: _id_ dup key: {{ _id: {id} }}"
            ),
        )
    }

    /// E11000 for a key of a `unique` index of the engine database `db`.
    pub fn duplicate_in(db: &str, index: &str, key: &[(String, serde_json::Value)]) -> Self {
        let ns = crate::names::Namespace::from_engine(db).map_or(db.to_string(), |n| n.full());
        let mut pattern = Document::new();
        let mut value = Document::new();
        for (field, v) in key {
            pattern.insert(field.clone(), 1);
            value.insert(field.clone(), bunko_doc::ejson::value_from_json(v));
        }
        let shown: Vec<String> = value.iter().map(|(k, v)| format!("{k}: {}", shown(v))).collect();
        let mut err = Self::new(
            11000,
            "DuplicateKey",
            format!(
                "E11000 duplicate key error collection: {ns} index: {index} dup key: {{ {} }}",
                shown.join(", ")
            ),
        );
        err.extra = Some(Box::new(doc! {"keyPattern": pattern, "keyValue": value}));
        err
    }

    /// The reply document.
    pub fn to_doc(&self) -> Document {
        let mut doc = doc! { "ok": 0.0, "errmsg": &self.errmsg, "code": self.code, "codeName": self.code_name };
        if !self.labels.is_empty() {
            doc.insert("errorLabels", self.labels.clone());
        }
        if let Some(extra) = &self.extra {
            doc.extend(extra.as_ref().clone());
        }
        doc
    }
}

/// A key value as MongoDB's E11000 message prints it.
fn shown(v: &bson::Bson) -> String {
    match v {
        bson::Bson::String(s) => format!("{s:?}"),
        bson::Bson::ObjectId(id) => format!("ObjectId('{id}')"),
        other => other.to_string(),
    }
}

impl From<bunko_engine::Error> for MongoError {
    fn from(err: bunko_engine::Error) -> Self {
        use bunko_engine::Error as E;
        let text = err.to_string();
        match err {
            E::NotFound(_) => Self::namespace_not_found(text),
            E::Conflict => Self::new(112, "WriteConflict", text),
            E::TxnConflict(_) => Self::write_conflict(text),
            E::FileExists => Self::namespace_exists(text),
            E::BadRequest(_) | E::QueryParse(_) | E::Invalid { .. } | E::InvalidDesignDoc(_) => {
                Self::bad_value(text)
            }
            E::Forbidden(_) | E::Unauthorized(_) => Self::unauthorized(text),
            E::PartitionOverflow(_) | E::CappedTooLarge(_) => Self::bad_value(text),
            E::DuplicateKey { db, index, key } => Self::duplicate_in(&db, &index, &key),
            E::ParallelArrays(_) => Self::new(171, "CannotIndexParallelArrays", text),
            E::HashedArray(_) => Self::new(16766, "Location16766", text),
            E::Doc(bunko_doc::Error::TooLarge(_)) => Self::new(10334, "BSONObjectTooLarge", text),
            E::Doc(_) => Self::bad_value(text),
            E::Js(_) | E::Unknown(_) | E::Rejected(_) => {
                Self::new(121, "DocumentValidationFailure", text)
            }
            E::DocumentValidation { info } => {
                let mut err = Self::new(121, "DocumentValidationFailure", text);
                err.extra = Some(Box::new(doc! {"errInfo": *info}));
                err
            }
            E::TxnAborted(_) => Self::no_such_transaction(text),
            E::InTxn { error, .. } if matches!(*error, E::Conflict) => Self::write_conflict(text),
            E::InTxn { error, .. } => Self::from(*error),
            E::TimeLimit => Self::new(50, "MaxTimeMSExpired", text),
            E::Storage(_) | E::Corrupt(_) => Self::internal(text),
            _ => Self::internal(text),
        }
    }
}

impl From<bunko_query::update::UpdateError> for MongoError {
    fn from(err: bunko_query::update::UpdateError) -> Self {
        Self::new(err.code, err.code_name, err.message)
    }
}

impl From<bunko_query::expr::ExprError> for MongoError {
    fn from(err: bunko_query::expr::ExprError) -> Self {
        crate::commands::expr_error(err)
    }
}

impl From<bunko_query::Error> for MongoError {
    fn from(err: bunko_query::Error) -> Self {
        use bunko_query::Error as Q;
        match err {
            Q::InvalidOperator(op) => Self::bad_value(format!("unknown operator: {op}")),
            Q::NotSupported(op) => Self::not_implemented(format!("{op} is not supported yet")),
            Q::BadArg { op, .. } => Self::bad_value(format!("bad argument for {op}")),
            Q::InvalidSelectorJson(_) => Self::type_mismatch("filter must be an object"),
            Q::MissingFieldName => Self::bad_value("unknown top level operator"),
            Q::InvalidFieldName(name) => Self::bad_value(format!("invalid field name: {name}")),
            other => Self::bad_value(other.reason()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_gives_mongodb_codes() {
        let cases: Vec<(MongoError, i32, &str)> = vec![
            (bunko_engine::Error::Conflict.into(), 112, "WriteConflict"),
            (bunko_engine::Error::TimeLimit.into(), 50, "MaxTimeMSExpired"),
            (bunko_engine::Error::Forbidden("no".into()).into(), 13, "Unauthorized"),
            (bunko_engine::Error::NotFound("missing".into()).into(), 26, "NamespaceNotFound"),
            (bunko_engine::Error::FileExists.into(), 48, "NamespaceExists"),
            (bunko_query::Error::InvalidOperator("$foo".into()).into(), 2, "BadValue"),
            (bunko_query::Error::NotSupported("$where".into()).into(), 238, "NotImplemented"),
            (MongoError::command_not_found("frob"), 59, "CommandNotFound"),
            (MongoError::too_large(20_000_000, 16_777_216), 10334, "BSONObjectTooLarge"),
        ];
        for (err, code, name) in cases {
            assert_eq!((err.code, err.code_name), (code, name), "{err:?}");
            let doc = err.to_doc();
            assert_eq!(doc.get_f64("ok").ok(), Some(0.0));
            assert_eq!(doc.get_i32("code").ok(), Some(code));
        }
        let unknown: MongoError = bunko_query::Error::InvalidOperator("$foo".into()).into();
        assert!(unknown.to_doc().get("errorLabels").is_none());
        assert_eq!(unknown.errmsg, "unknown operator: $foo");
        assert_eq!(MongoError::command_not_found("frob").errmsg, "no such command: 'frob'");
    }

    #[test]
    fn transaction_errors_carry_the_drivers_labels() {
        use bunko_engine::Error as E;
        let conflict = MongoError::from(E::TxnConflict("document a changed".into()));
        assert_eq!((conflict.code, conflict.code_name), (112, "WriteConflict"));
        assert_eq!(conflict.to_doc().get_array("errorLabels").ok().map(Vec::len), Some(1));
        let expired = MongoError::from(E::TxnAborted("lifetime".into()));
        assert_eq!((expired.code, expired.labels.clone()), (251, vec![TRANSIENT]));
        let refused = MongoError::from(E::InTxn {
            db: "shop$orders".into(),
            id: "o2".into(),
            error: Box::new(E::Rejected("qty must not be negative".into())),
        });
        assert_eq!((refused.code, refused.code_name), (121, "DocumentValidationFailure"));
        assert!(refused.labels.is_empty());
        // The write gate's refusal stays Unauthorized, in a transaction or not.
        let gate = E::InTxn {
            db: "shop$o".into(),
            id: "o".into(),
            error: Box::new(E::Forbidden("no".into())),
        };
        assert_eq!(MongoError::from(gate).code, 13);
        assert_eq!(MongoError::from(E::Rejected("bad".into())).code, 121);
        let lost = MongoError::from(E::InTxn {
            db: "bank$accounts".into(),
            id: "alice".into(),
            error: Box::new(E::Conflict),
        });
        assert_eq!((lost.code, lost.labels), (112, vec![TRANSIENT]));
    }
}
