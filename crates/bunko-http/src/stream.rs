//! Streaming responses: a producer on a blocking thread writes JSON into a [`Sink`], which
//! hands chunks to the response body through a small bounded channel. Memory stays bounded
//! however long the answer is, and a client that goes away stops the producer.

use std::convert::Infallible;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use tokio::sync::mpsc;

const CHUNK: usize = 16 * 1024;

/// Where a streaming producer writes.
pub struct Sink {
    tx: mpsc::Sender<Bytes>,
    buf: Vec<u8>,
}

/// The client went away; the producer should stop.
#[derive(Debug)]
pub struct Gone;

impl Sink {
    /// Appends bytes, sending a chunk when enough has gathered.
    pub fn write(&mut self, bytes: &[u8]) -> Result<(), Gone> {
        self.buf.extend_from_slice(bytes);
        if self.buf.len() >= CHUNK { self.flush() } else { Ok(()) }
    }

    /// Sends what has gathered now (e.g. before waiting for more changes).
    pub fn flush(&mut self) -> Result<(), Gone> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::take(&mut self.buf));
        self.tx.blocking_send(chunk).map_err(|_| Gone)
    }

    /// Whether the client is still connected.
    pub fn is_open(&self) -> bool {
        !self.tx.is_closed()
    }
}

/// A streaming response whose body `producer` writes on a blocking thread.
pub fn response(
    status: StatusCode,
    content_type: &'static str,
    producer: impl FnOnce(&mut Sink) -> Result<(), Gone> + Send + 'static,
) -> Response {
    let (tx, rx) = mpsc::channel::<Bytes>(4);
    tokio::task::spawn_blocking(move || {
        let mut sink = Sink { tx, buf: Vec::with_capacity(CHUNK) };
        if producer(&mut sink).is_ok() {
            let _ = sink.flush();
        }
    });
    // Fused: a wrapping body (the response compressor) may poll again after the end.
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|chunk| (Ok::<_, Infallible>(chunk), rx))
    })
    .fuse();
    let mut response = (status, Body::from_stream(stream)).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}
