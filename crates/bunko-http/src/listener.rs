//! The server's listener for `axum::serve`: accepts TCP connections, sets `TCP_NODELAY`
//! (streamed answers go out in pieces; without it each waits on the client's delayed ACK,
//! ~40 ms), and wraps each stream in [`Connection`], which passes the bytes hyper reads
//! through a [`Framer`] so that raw curl-style request targets parse
//! ([`crate::request_head`]). Writes go to the socket unchanged.
//!
//! Closing lingers: when hyper closes a connection whose request body it did not read (a
//! `413` for an oversized or inflating body, a malformed head), the unread bytes would make
//! the kernel reset the connection, and the client could lose the answer already sent. So
//! when the close comes in the middle of a request, [`Connection::poll_shutdown`] sends FIN,
//! then reads and drops what the client still sends, until it closes, `LINGER_BYTES` have
//! been dropped, or `LINGER_TIME` passed.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

use crate::request_head::Framer;

/// How much one read takes from the socket.
const READ_SIZE: usize = 64 * 1024;
/// The most a closing connection drops before it closes anyway.
const LINGER_BYTES: usize = 8 << 20;
/// The longest a closing connection waits for its client to finish sending.
const LINGER_TIME: Duration = Duration::from_secs(2);

/// A TCP listener whose connections normalise request lines.
pub struct Listener(pub TcpListener);

impl axum::serve::Listener for Listener {
    type Io = Connection<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        let (tcp, addr) = axum::serve::Listener::accept(&mut self.0).await;
        if let Err(err) = tcp.set_nodelay(true) {
            tracing::warn!(%err, "TCP_NODELAY could not be set");
        }
        (Connection::new(tcp), addr)
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.0.local_addr()
    }
}

/// The client's address, as connection info of [`Listener`]'s connections (serve the router
/// with `into_make_service_with_connect_info::<Peer>()`); the login lockout counts by it.
#[derive(Debug, Clone, Copy)]
pub struct Peer(pub SocketAddr);

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, Listener>> for Peer {
    fn connect_info(stream: axum::serve::IncomingStream<'_, Listener>) -> Self {
        Peer(*stream.remote_addr())
    }
}

/// A client connection whose incoming bytes pass through a [`Framer`].
pub struct Connection<T> {
    inner: T,
    framer: Framer,
    /// Framed bytes not yet read by hyper, from `out_at` on.
    out: Vec<u8>,
    out_at: usize,
    scratch: Box<[u8]>,
    eof: bool,
    /// While closing: the deadline and the bytes dropped so far.
    linger: Option<(Pin<Box<tokio::time::Sleep>>, usize)>,
}

impl<T> Connection<T> {
    pub fn new(inner: T) -> Self {
        Connection {
            inner,
            framer: Framer::new(),
            out: Vec::new(),
            out_at: 0,
            scratch: vec![0; READ_SIZE].into_boxed_slice(),
            eof: false,
            linger: None,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Connection<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.out_at < this.out.len() {
                let n = buf.remaining().min(this.out.len() - this.out_at);
                buf.put_slice(&this.out[this.out_at..this.out_at + n]);
                this.out_at += n;
                if this.out_at == this.out.len() {
                    this.out.clear();
                    this.out_at = 0;
                }
                return Poll::Ready(Ok(()));
            }
            if this.eof {
                return Poll::Ready(Ok(()));
            }
            let mut read = ReadBuf::new(&mut this.scratch);
            ready!(Pin::new(&mut this.inner).poll_read(cx, &mut read))?;
            let filled = read.filled();
            if filled.is_empty() {
                this.eof = true;
                this.framer.finish(&mut this.out);
            } else {
                // After a malformed head the framer drops what follows (drained, not left
                // unread: closing a socket with unread data resets the connection).
                this.framer.feed(filled, &mut this.out);
            }
        }
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Connection<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.linger.is_none() {
            ready!(Pin::new(&mut this.inner).poll_shutdown(cx))?;
            // Between requests nothing is unread: close at once (idle keep-alive connections
            // at server shutdown, for one).
            if this.eof || !this.framer.mid_request() {
                return Poll::Ready(Ok(()));
            }
            this.linger = Some((Box::pin(tokio::time::sleep(LINGER_TIME)), 0));
        }
        let Some((deadline, dropped)) = this.linger.as_mut() else {
            return Poll::Ready(Ok(()));
        };
        while *dropped < LINGER_BYTES {
            let mut read = ReadBuf::new(&mut this.scratch);
            match Pin::new(&mut this.inner).poll_read(cx, &mut read) {
                Poll::Ready(Ok(())) if !read.filled().is_empty() => *dropped += read.filled().len(),
                Poll::Ready(_) => return Poll::Ready(Ok(())),
                Poll::Pending => {
                    ready!(deadline.as_mut().poll(cx));
                    return Poll::Ready(Ok(()));
                }
            }
        }
        Poll::Ready(Ok(()))
    }
}
