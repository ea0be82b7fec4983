//! Engine errors, chosen by what the caller must do. `bunko-http/src/error.rs` maps each to
//! CouchDB's status code and error name.

/// Errors from engine operations.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Something does not exist; the text is CouchDB's `reason` (`missing`, `deleted`,
    /// `Database does not exist.`).
    #[error("{0}")]
    NotFound(String),
    /// An edit does not name a current leaf revision (`409 conflict`).
    #[error("Document update conflict.")]
    Conflict,
    /// The database already exists (`412 file_exists`).
    #[error("The database could not be created, the file already exists.")]
    FileExists,
    /// Invalid request content (`400 bad_request`).
    #[error("{0}")]
    BadRequest(String),
    /// A query parameter is invalid (`400 query_parse_error`).
    #[error("{0}")]
    QueryParse(String),
    /// The user may not do this (`403 forbidden`).
    #[error("{0}")]
    Forbidden(String),
    /// A design function (`validate_doc_update`, a trigger) refused the document with
    /// `throw({forbidden: …})` (`403 forbidden` over HTTP, MongoDB's
    /// `DocumentValidationFailure`): unlike [`Error::Forbidden`], about the document, not
    /// about who may write.
    #[error("{0}")]
    Rejected(String),
    /// A MongoDB collection validator refused the document (`403 forbidden` over HTTP,
    /// MongoDB's `DocumentValidationFailure` with `info` as its `errInfo`:
    /// `failingDocumentId` and, for a `$jsonSchema`, `details`).
    #[error("Document failed validation")]
    DocumentValidation { info: Box<bson::Document> },
    /// Authentication is required or failed (`401 unauthorized`).
    #[error("{0}")]
    Unauthorized(String),
    /// A partition would exceed its size limit (`403 partition_overflow`).
    #[error("Partition limit exceeded due to update on '{0}'")]
    PartitionOverflow(String),
    /// A request is invalid in a way CouchDB names specially (`400` with `error`, e.g.
    /// Mango's `invalid_partitioned_option`).
    #[error("{reason}")]
    Invalid { error: &'static str, reason: String },
    /// A design document breaks CouchDB's rules (`400 invalid_design_doc`).
    #[error("{0}")]
    InvalidDesignDoc(String),
    /// The document or its id is invalid.
    #[error(transparent)]
    Doc(#[from] bunko_doc::Error),
    /// Storage failed; the request may be retried after the server restarts.
    #[error(transparent)]
    Storage(#[from] bunko_storage::Error),
    /// A view's JavaScript failed: compilation, a time or memory limit, a fatal error, or
    /// a reduction that does not shrink.
    #[error(transparent)]
    Js(#[from] bunko_js::Error),
    /// A `validate_doc_update` function threw something other than `{forbidden}` or
    /// `{unauthorized}` (CouchDB's `500 unknown_error`).
    #[error("{0}")]
    Unknown(String),
    /// A show or list function failed with CouchDB's error name (`render_error`,
    /// `not_acceptable`, or one it threw itself).
    #[error("{reason}")]
    Render { error: String, reason: String },
    /// A transaction saw something another commit has changed since: retry it
    /// (`409 conflict`; MongoDB's `WriteConflict`, a `TransientTransactionError`).
    #[error("transaction conflict: {0}")]
    TxnConflict(String),
    /// A transaction went past its lifetime or size limit and was discarded.
    #[error("{0}")]
    TxnAborted(String),
    /// A write would give a `unique` MongoDB index a second document with the same key
    /// (MongoDB's E11000): the database, the index's name and the key, field by field.
    #[error("duplicate key in index {index} of {db}")]
    DuplicateKey { db: String, index: String, key: Vec<(String, serde_json::Value)> },
    /// A document crosses two arrays of one compound MongoDB index (MongoDB's code 171).
    #[error("{0}")]
    ParallelArrays(String),
    /// A document holds an array on a path of a hashed MongoDB index (MongoDB's code
    /// 16766); holds the path up to the array.
    #[error(
        "Error: hashed indexes do not currently support array values. Found array at path: {0}"
    )]
    HashedArray(String),
    /// One document of a transaction failed, so none was written.
    #[error("{db}/{id}: {error}")]
    InTxn { db: String, id: String, error: Box<Error> },
    /// An attachment is over `max_attachment_size` (`413 attachment_too_large`); holds
    /// its name.
    #[error("{0}")]
    AttachmentTooLarge(String),
    /// A document larger than its capped database's `size` (`413 document_too_large`,
    /// MongoDB's `BadValue`).
    #[error("{0}")]
    CappedTooLarge(String),
    /// An attachment stub names no stored attachment (`412 missing_stub`).
    #[error("{0}")]
    MissingStub(String),
    /// A standalone attachment write names a revision the document does not have
    /// (CouchDB's `409 {"error": "not_found", "reason": "missing_rev"}`).
    #[error("missing_rev")]
    MissingRev,
    /// A query needs a service this server does not run (`503`, CouchDB's `required index
    /// service unavailable`); holds the index type (`text`).
    #[error("{0}")]
    ServiceUnavailable(String),
    /// Stored data could not be decoded (a bug or corruption).
    #[error("corrupt data: {0}")]
    Corrupt(String),
    /// A read ran past the time limit it was given (`crate::deadline`, MongoDB's
    /// `maxTimeMS`).
    #[error("operation exceeded time limit")]
    TimeLimit,
}

pub type Result<T> = std::result::Result<T, Error>;

/// Shorthand for a `NotFound` error with CouchDB's `missing` reason.
pub fn missing() -> Error {
    Error::NotFound("missing".to_string())
}
