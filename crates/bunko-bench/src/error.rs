//! The bench tool's one error type. [`Error::Unsupported`] is not a failure: it marks a
//! workload (or one case of it) whose feature the server does not have yet, and the
//! runner reports it as skipped with its reason.

use reqwest::StatusCode;

pub type Result<T = ()> = std::result::Result<T, Error>;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The server lacks a feature the workload needs (HTTP 400/404/405/501 on its probe).
    #[error("{0}")]
    Unsupported(String),
    /// The server answered a request with an unexpected status.
    #[error("{what} answered {status}: {body}")]
    Status { what: String, status: StatusCode, body: String },
    /// The request did not complete (connection refused, timeout, ...).
    #[error("{what}: {source}")]
    Http { what: String, source: reqwest::Error },
    #[error("storage: {0}")]
    Storage(#[from] bunko_storage::Error),
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    /// Bad options or an unexpected answer.
    #[error("{0}")]
    Invalid(String),
}

impl Error {
    /// Whether this is the answer of a server that lacks the requested endpoint or option:
    /// CouchDB-compatible servers say so with 400, 404, 405 or 501.
    pub fn means_unsupported(&self) -> bool {
        matches!(
            self,
            Error::Status { status, .. } if matches!(status.as_u16(), 400 | 404 | 405 | 501)
        )
    }

    /// The same error as [`Error::Unsupported`] if [`Error::means_unsupported`] holds.
    pub fn into_unsupported(self) -> Error {
        if self.means_unsupported() { Error::Unsupported(self.to_string()) } else { self }
    }
}
