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

/// Reads `stream` to its end into `upload`; a stream error becomes `bad(error)`.
pub async fn receive<S, E>(
    mut upload: Upload,
    mut stream: S,
    bad: impl Fn(E) -> ApiError,
) -> Result<Uploaded, ApiError>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
{
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
    let upload = hand_over(upload, gathered).await?;
    blocking(move || Ok(upload.finish()?)).await
}

async fn hand_over(mut upload: Upload, gathered: Vec<Bytes>) -> Result<Upload, ApiError> {
    if gathered.is_empty() {
        return Ok(upload);
    }
    blocking(move || {
        for bytes in gathered {
            upload.write(&bytes)?;
        }
        Ok(upload)
    })
    .await
}
