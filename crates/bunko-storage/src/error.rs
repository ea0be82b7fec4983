//! Storage errors.

/// Errors from a [`crate::Store`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An earlier sync (or log write) failed; the store refuses writes until it is reopened.
    /// Returned by the commit whose sync failed, by every commit waiting on that sync, and
    /// by every later commit.
    #[error("storage is poisoned after a failed sync; restart the server")]
    Poisoned,
    /// An I/O or engine failure.
    #[error("storage I/O error: {0}")]
    Io(String),
    /// The store was closed ([`crate::Store::close`]); nothing was written.
    #[error("storage is closed; the server is shutting down")]
    Closed,
    /// A key or value the store cannot hold (see [`crate::MAX_KEY_LEN`] and
    /// [`crate::MAX_VALUE_LEN`]); nothing was written. A caller bug or oversized input,
    /// never a storage fault.
    #[error("invalid write: {0}")]
    Invalid(String),
    /// Stored data could not be decoded.
    #[error("corrupt data: {0}")]
    Corrupt(String),
}

pub type Result<T> = std::result::Result<T, Error>;
