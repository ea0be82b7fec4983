//! Errors for invalid documents, ids and names. Each variant maps to one CouchDB error
//! name; the HTTP layer turns them into status codes.

/// Errors in user-supplied documents, ids and names. The message is CouchDB's `reason`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The body is not valid JSON or not the expected shape (`400 bad_request`).
    #[error("{0}")]
    BadRequest(String),
    /// A document id breaks the id rules (`400 illegal_docid`).
    #[error("{0}")]
    IllegalDocId(String),
    /// A partition name breaks the partition rules (`400 illegal_partition`).
    #[error("{0}")]
    IllegalPartition(String),
    /// A database name breaks the name rules (`400 illegal_database_name`).
    #[error("{0}")]
    IllegalDatabaseName(String),
    /// A document has a bad special member or shape (`400 doc_validation`).
    #[error("{0}")]
    DocValidation(String),
    /// A revision string is malformed (`400 bad_request`).
    #[error("{0}")]
    BadRev(String),
    /// The document exceeds the maximum size (`413 document_too_large`); holds the id.
    #[error("{0}")]
    TooLarge(String),
}

pub type Result<T> = std::result::Result<T, Error>;
