//! The crate's one error type. Variants follow what the caller must do: reject a design
//! document (`Compilation`), fail the view build or query (`Timeout`, `OutOfMemory`,
//! `Fatal`, `InvalidValue`), store or render an overflowed reduction (`ReduceOverflow`), or
//! report a bug (`Internal`). [`Error::name`] gives CouchDB's error name for the wire; the
//! HTTP status is chosen in `bunko-http`.

/// What went wrong running or compiling view functions.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// JavaScript source does not compile or does not evaluate to a function. The text is
    /// CouchDB's `reason` (`400 compilation_error`).
    #[error("{0}")]
    Compilation(String),
    /// A call ran longer than [`Limits::time_per_call`](crate::Limits::time_per_call).
    /// CouchDB kills the query server after `os_process_timeout` and answers `500`.
    #[error("JavaScript function call exceeded the time limit of {limit_ms} ms")]
    Timeout {
        /// The limit in force, in milliseconds.
        limit_ms: u128,
    },
    /// The runtime reached [`Limits::memory_bytes`](crate::Limits::memory_bytes)
    /// (QuickJS `InternalError: out of memory`).
    #[error("JavaScript runtime out of memory (limit {limit_bytes} bytes)")]
    OutOfMemory {
        /// The limit in force, in bytes.
        limit_bytes: usize,
    },
    /// User code asked to stop the whole call (CouchDB: throwing `"fatal_error"` or
    /// `["fatal", error, reason]`), or QuickJS raised an `InternalError` such as a stack
    /// overflow. The view build fails with `error`/`reason`.
    #[error("{error}: {reason}")]
    Fatal {
        /// CouchDB's error name, e.g. `map_runtime_error`.
        error: String,
        /// Human-readable reason.
        reason: String,
    },
    /// A built-in reducer got a value it cannot combine (CouchDB throws `invalid_value`,
    /// e.g. `_stats` over strings).
    #[error("{0}")]
    InvalidValue(String),
    /// A JavaScript reduce result did not shrink enough (`reduce_limit`). CouchDB keeps it
    /// as the reduction and renders the row as `{"error":"reduce_overflow_error",...}`.
    #[error("{0}")]
    ReduceOverflow(String),
    /// The runtime misbehaved in a way that is a bug here, not bad user code.
    #[error("internal JavaScript runtime error: {0}")]
    Internal(String),
}

impl Error {
    /// CouchDB's `error` name for this failure.
    pub fn name(&self) -> &str {
        match self {
            Error::Compilation(_) => "compilation_error",
            Error::Timeout { .. } => "timeout",
            Error::OutOfMemory { .. } => "InternalError",
            Error::Fatal { error, .. } => error,
            Error::InvalidValue(_) => "invalid_value",
            Error::ReduceOverflow(_) => "reduce_overflow_error",
            Error::Internal(_) => "internal_error",
        }
    }

    /// CouchDB's `reason` text for this failure.
    pub fn reason(&self) -> String {
        match self {
            Error::Fatal { reason, .. } => reason.clone(),
            other => other.to_string(),
        }
    }
}

/// Shorthand used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

pub(crate) fn internal(error: impl std::fmt::Display) -> Error {
    Error::Internal(error.to_string())
}
