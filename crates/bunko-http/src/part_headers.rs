//! Parts without any header line in a streamed `multipart/related` body.
//!
//! CouchDB accepts a part that opens straight with its blank line (`--b\r\n\r\nbytes`): its
//! parser reads headers up to the first empty line, and there may be none. `multer`, which
//! parses the body as it arrives, needs at least one header line per part. So the body is
//! passed through [`with_part_headers`], which adds one harmless header line after every
//! delimiter line `--{boundary}\r\n`, whether the part has headers of its own or not. It
//! holds back at most the delimiter's length less one byte between chunks (a delimiter
//! split across two chunks), so memory does not grow with the body.

use axum::body::Bytes;
use futures::{Stream, StreamExt, future, stream};

/// The header line added to every part.
const PART_HEADER: &[u8] = b"X-Bunko-Part: 1\r\n";

/// `body` with a header line added to each part delimited by `boundary`.
pub(crate) fn with_part_headers<S, E>(
    body: S,
    boundary: &str,
) -> impl Stream<Item = Result<Bytes, E>> + use<S, E>
where
    S: Stream<Item = Result<Bytes, E>>,
{
    let delimiter = format!("--{boundary}\r\n").into_bytes();
    body.map(Some)
        .chain(stream::once(future::ready(None)))
        .scan(Vec::new(), move |held, item| {
            let out = match item {
                Some(Ok(chunk)) => {
                    held.extend_from_slice(&chunk);
                    Ok(release(held, &delimiter, false))
                }
                Some(Err(err)) => Err(err),
                None => Ok(release(held, &delimiter, true)),
            };
            future::ready(Some(out))
        })
        .flat_map(|out| match out {
            Ok(chunks) => stream::iter(chunks.into_iter().map(Ok)).left_stream(),
            Err(err) => stream::iter([Err(err)]).right_stream(),
        })
}

/// Takes from `held` everything that can no longer be the start of a delimiter (all of it at
/// the `end`), with the header line after each delimiter.
fn release(held: &mut Vec<u8>, delimiter: &[u8], end: bool) -> Vec<Bytes> {
    let mut out = Vec::new();
    let mut start = 0;
    while let Some(at) = memchr::memmem::find(&held[start..], delimiter) {
        let after = start + at + delimiter.len();
        out.push(Bytes::copy_from_slice(&held[start..after]));
        out.push(Bytes::from_static(PART_HEADER));
        start = after;
    }
    let keep = if end { 0 } else { (held.len() - start).min(delimiter.len() - 1) };
    let upto = held.len() - keep;
    if upto > start {
        out.push(Bytes::copy_from_slice(&held[start..upto]));
    }
    held.drain(..upto);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The body passed through in chunks of `size` bytes, joined again.
    fn through(body: &[u8], size: usize) -> Vec<u8> {
        let chunks: Vec<Result<Bytes, ()>> =
            body.chunks(size).map(|c| Ok(Bytes::copy_from_slice(c))).collect();
        let out = futures::executor::block_on(
            with_part_headers(stream::iter(chunks), "abc").collect::<Vec<_>>(),
        );
        out.into_iter().flat_map(|c| c.unwrap_or_default().to_vec()).collect()
    }

    #[test]
    fn every_part_gets_a_header_line_however_the_body_is_cut() {
        let body =
            b"--abc\r\n\r\n{\"a\":1}\r\n--abc\r\nContent-Type: text/plain\r\n\r\nhi\r\n--abc--";
        let want = b"--abc\r\nX-Bunko-Part: 1\r\n\r\n{\"a\":1}\r\n--abc\r\nX-Bunko-Part: 1\r\nContent-Type: text/plain\r\n\r\nhi\r\n--abc--";
        for size in [1, 2, 3, 5, 7, 64] {
            assert_eq!(through(body, size), want.to_vec(), "chunks of {size}");
        }
    }
}
