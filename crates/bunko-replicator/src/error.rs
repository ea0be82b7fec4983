//! The replicator's errors: a bad replication request (`400`), an endpoint that answered
//! with an error, or one that could not be reached.

/// Why a replication could not be set up or stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A replication request that is not valid (`400 bad_request`).
    #[error("{0}")]
    Param(&'static str),
    /// An invalid request with a built reason (`400 bad_request`).
    #[error("{0}")]
    Invalid(String),
    /// An endpoint answered with this status and CouchDB error body.
    #[error("{status} {body}")]
    Http { status: u16, body: serde_json::Value, url: String },
    /// An endpoint could not be reached or its answer could not be read.
    #[error("{0}")]
    Transport(String),
    /// No such replication (`cancel` of an unknown one).
    #[error("{0}")]
    NotFound(String),
    /// The job was cancelled.
    #[error("replication cancelled")]
    Cancelled,
}

impl Error {
    /// Whether retrying the same request later can succeed.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Transport(_) => true,
            Error::Http { status, .. } => *status >= 500 || *status == 429 || *status == 408,
            _ => false,
        }
    }
}

impl From<reqwest::Error> for Error {
    fn from(err: reqwest::Error) -> Self {
        Error::Transport(err.to_string())
    }
}

pub type Result<T> = std::result::Result<T, Error>;
