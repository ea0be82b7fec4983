//! Streamed attachment bodies: the bytes of a standalone attachment `PUT` or of one part
//! of a `multipart/related` upload are handed to the engine's [`Upload`] about a MiB at a
//! time, on a blocking thread, as they arrive, so memory does not grow with the body
//! (`bunko_engine::upload` says where they go).

use axum::body::Bytes;
use bunko_engine::upload::{Upload, Uploaded};
use futures::{Stream, StreamExt};

use crate::blocking;
use crate::error::ApiError;

/// Bytes gathered before they are handed to the engine.
const BATCH: usize = 1 << 20;

/// Holds a value whose drop may write to the store (an upload removes its chunks) and drops
/// it on a blocking thread, wherever it goes out of scope (even when a request's future is
/// dropped because the client went away).
pub struct OffRuntime<T: Send + 'static>(Option<T>);

impl<T: Send + 'static> OffRuntime<T> {
    pub fn new(value: T) -> Self {
        OffRuntime(Some(value))
    }
}

impl<T: Send + 'static> std::ops::Deref for OffRuntime<T> {
    type Target = T;

    fn deref(&self) -> &T {
        self.0.as_ref().expect("an OffRuntime holds its value until dropped")
    }
}

impl<T: Send + 'static> Drop for OffRuntime<T> {
    fn drop(&mut self) {
        let Some(value) = self.0.take() else { return };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn_blocking(move || drop(value))),
            Err(_) => drop(value),
        }
    }
}

/// Reads `stream` to its end into `upload`; a stream error becomes `bad(error)`.
pub async fn receive<S, E>(
    upload: Upload,
    mut stream: S,
    bad: impl Fn(E) -> ApiError,
) -> Result<OffRuntime<Uploaded>, ApiError>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
{
    let mut upload = OffRuntime::new(upload);
    let mut gathered: Vec<Bytes> = Vec::new();
    let mut size = 0;
    while let Some(bytes) = stream.next().await {
        let bytes = bytes.map_err(&bad)?;
        size += bytes.len();
        gathered.push(bytes);
        if size >= BATCH {
            upload = hand_over(upload, std::mem::take(&mut gathered)).await?;
            size = 0;
        }
    }
    let mut upload = hand_over(upload, gathered).await?;
    let Some(upload) = upload.0.take() else { return Err(gone()) };
    let uploaded = blocking(move || Ok(OffRuntime::new(upload.finish()?))).await?;
    Ok(uploaded)
}

/// Writes `gathered` on a blocking thread, which owns the upload meanwhile.
async fn hand_over(
    mut upload: OffRuntime<Upload>,
    gathered: Vec<Bytes>,
) -> Result<OffRuntime<Upload>, ApiError> {
    if gathered.is_empty() {
        return Ok(upload);
    }
    let Some(mut upload) = upload.0.take() else { return Err(gone()) };
    blocking(move || {
        for bytes in gathered {
            upload.write(&bytes)?;
        }
        Ok(OffRuntime::new(upload))
    })
    .await
}

fn gone() -> ApiError {
    ApiError::bad_request("the upload was already finished")
}
