//! One client connection: read a message, run its command on a blocking thread, write the
//! reply, until the client closes. A message over the size limit is read past (not
//! buffered) and answered with an error, so the connection stays usable; only a header that
//! cannot be a message (length below 16) ends it, since nothing after it can be framed.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bson::Document;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use crate::error::MongoError;
use crate::wire::{self, Header, Kind, Request};
use crate::{Server, Session, commands};

pub(crate) async fn run(server: Arc<Server>, stream: TcpStream, peer: SocketAddr) {
    let _ = stream.set_nodelay(true);
    let local = stream.local_addr().unwrap_or(peer);
    let id = server.next_conn.fetch_add(1, Ordering::Relaxed);
    server.open.fetch_add(1, Ordering::Relaxed);
    let session = Session {
        id,
        peer,
        local,
        user: None,
        user_seq: None,
        scram: None,
        compressors: Vec::new(),
        wait: None,
        await_until: None,
        app_name: None,
        close: false,
    };
    if let Err(err) = serve(&server, stream, session).await {
        tracing::debug!(%err, %peer, "mongo connection closed");
    }
    server.open.fetch_sub(1, Ordering::Relaxed);
}

async fn serve(
    server: &Arc<Server>,
    stream: TcpStream,
    mut session: Session,
) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::new(read);
    let mut next_id: i32 = 1;
    loop {
        let mut head = [0u8; Header::SIZE];
        match read.read_exact(&mut head).await {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e),
        }
        let header = Header::parse(&head);
        if header.length < Header::SIZE {
            return Err(std::io::Error::other("invalid message length"));
        }
        let body_len = header.length - Header::SIZE;
        let (request, result) = if header.length > wire::MAX_MESSAGE_SIZE {
            let skipped =
                tokio::io::copy(&mut (&mut read).take(body_len as u64), &mut tokio::io::sink())
                    .await?;
            if skipped < body_len as u64 {
                return Ok(());
            }
            (fallback(&header), Err(MongoError::too_large(header.length, wire::MAX_MESSAGE_SIZE)))
        } else {
            let mut body = vec![0u8; body_len];
            read.read_exact(&mut body).await?;
            match wire::decode(&header, &body) {
                Ok(request) => {
                    tracing::debug!(compressor = ?request.compressor, "mongo message");
                    let Some((back, result)) = run_waiting(server, session, &request.command).await
                    else {
                        return Err(std::io::Error::other("command panicked"));
                    };
                    session = back;
                    if session.close {
                        return Ok(());
                    }
                    (request, result)
                }
                Err(err) => (fallback(&header), Err(err)),
            }
        };
        if matches!(request.kind, Kind::Msg { more_to_come: true }) {
            continue;
        }
        if let Some(wait) = awaited_hello(server, &request.command) {
            // The topology never changes, so an awaitable `hello` waits its full time.
            tokio::time::sleep(wait).await;
        }
        let (mut reply, plain) = match result {
            Ok((reply, plain)) => (reply, plain),
            Err(err) => {
                let command = request.command.keys().next().map(String::as_str);
                tracing::debug!(?command, code = err.code, errmsg = %err.errmsg, "mongo command failed");
                (err.to_doc(), false)
            }
        };
        server.clock.stamp(&mut reply);
        next_id = next_id.wrapping_add(1);
        let bytes = match wire::encode_reply(next_id, &request, &reply, plain) {
            Ok(bytes) => bytes,
            Err(err) => {
                wire::encode_reply(next_id, &request, &err.to_doc(), true).unwrap_or_default()
            }
        };
        write.write_all(&bytes).await?;
    }
}

/// How long to hold the answer to a driver's awaitable `hello` (the streaming monitoring
/// protocol): one that names this process's `topologyVersion` asks to be answered only when
/// the topology changes or after `maxAwaitTimeMS`. Answering at once would make the driver's
/// monitor spin.
fn awaited_hello(server: &Server, command: &Document) -> Option<Duration> {
    let name = command.keys().next()?;
    if name != "hello" && !name.eq_ignore_ascii_case("ismaster") {
        return None;
    }
    let version = command.get_document("topologyVersion").ok()?;
    if version.get_object_id("processId").ok()? != server.process_id {
        return None;
    }
    let ms = match command.get("maxAwaitTimeMS")? {
        bson::Bson::Int32(ms) => i64::from(*ms),
        bson::Bson::Int64(ms) => *ms,
        _ => return None,
    };
    Some(Duration::from_millis(ms.clamp(0, 60_000) as u64))
}

/// The request an unreadable message is answered as.
fn fallback(header: &Header) -> Request {
    let kind = if header.op_code == wire::OP_QUERY {
        Kind::Query
    } else {
        Kind::Msg { more_to_come: false }
    };
    Request { request_id: header.request_id, kind, command: Document::new(), compressor: None }
}

type Outcome = Result<(Document, bool), MongoError>;

/// Runs a command; while it asks to wait (a change stream's `getMore` with nothing new),
/// awaits the change notification off the blocking threads and runs it again.
async fn run_waiting(
    server: &Arc<Server>,
    session: Session,
    command: &Document,
) -> Option<(Session, Outcome)> {
    let (mut session, mut result) = execute(server, session, command.clone()).await?;
    while let Some(wait) = session.wait.take() {
        wait.wait().await;
        (session, result) = execute(server, session, command.clone()).await?;
    }
    session.await_until = None;
    Some((session, result))
}

/// Runs one command off the async workers; gives the session back. `None` if the command
/// panicked (a bug): the session went with it, so the connection ends.
async fn execute(
    server: &Arc<Server>,
    mut session: Session,
    command: Document,
) -> Option<(Session, Outcome)> {
    let server = server.clone();
    let task = tokio::task::spawn_blocking(move || {
        let result = commands::run(&server, &mut session, &command);
        (session, result)
    });
    match task.await {
        Ok(done) => Some(done),
        Err(err) => {
            tracing::error!(%err, "mongo command panicked");
            None
        }
    }
}
