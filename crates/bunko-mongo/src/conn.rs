//! One client connection: read a message, run its command on a blocking thread, await the
//! syncs of its writes ([`crate::acks`]), write the reply, until the client closes. A message over the size limit is read past (not
//! buffered) and answered with an error, so the connection stays usable; only a header that
//! cannot be a message (length below 16) ends it, since nothing after it can be framed.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bson::{Document, RawArrayBuf};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use crate::error::MongoError;
use crate::wire::{self, Header, Kind, Reply, Request};
use crate::{Server, Session, commands};

pub(crate) async fn run(server: Arc<Server>, stream: TcpStream, peer: SocketAddr) {
    let _ = stream.set_nodelay(true);
    let local = stream.local_addr().unwrap_or(peer);
    let id = server.next_conn.fetch_add(1, Ordering::Relaxed);
    server.open.fetch_add(1, Ordering::Relaxed);
    let session = Session::new(id, peer, local);
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
                Ok(mut request) => {
                    tracing::debug!(compressor = ?request.compressor, "mongo message");
                    // Shared with the blocking thread, not copied (an insert carries its
                    // documents); the request keeps it for what follows the reply.
                    let command = Arc::new(std::mem::take(&mut request.command));
                    session.sized = request.sized;
                    session.documents = request.documents.take();
                    let Some((back, result)) = run_waiting(server, session, &command).await else {
                        return Err(std::io::Error::other("command panicked"));
                    };
                    session = back;
                    if session.close {
                        return Ok(());
                    }
                    request.command = Arc::unwrap_or_clone(command);
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
        let (mut reply, plain, ok) = match result {
            Ok((reply, plain)) => (reply, plain, true),
            Err(err) => {
                let command = request.command.keys().next().map(String::as_str);
                tracing::debug!(?command, code = err.code, errmsg = %err.errmsg, "mongo command failed");
                (err.to_doc(), false, false)
            }
        };
        server.clock.stamp(&mut reply);
        next_id = next_id.wrapping_add(1);
        let mut head = Reply {
            request_id: next_id,
            response_to: request.request_id,
            more_to_come: streams(&request, &reply),
        };
        // A point read's document comes as BSON beside a successful reply.
        let batch = session.raw_batch.take().filter(|_| ok);
        write.write_all(&encoded(head, &request, &reply, batch.as_ref(), plain)).await?;
        // An exhaust cursor: further batches follow unasked, each answering the one before,
        // until the cursor is exhausted or fails.
        while head.more_to_come {
            let command = Arc::new(request.command.clone());
            let Some((back, result)) = run_waiting(server, session, &command).await else {
                return Err(std::io::Error::other("command panicked"));
            };
            session = back;
            let mut reply = result.map_or_else(|err| err.to_doc(), |(reply, _)| reply);
            server.clock.stamp(&mut reply);
            next_id = next_id.wrapping_add(1);
            head = Reply {
                request_id: next_id,
                response_to: head.request_id,
                more_to_come: streams(&request, &reply),
            };
            session.raw_batch.take();
            write.write_all(&encoded(head, &request, &reply, None, false)).await?;
        }
    }
}

/// Whether the reply to `request` starts or continues an exhaust stream: a `getMore` whose
/// client allows it (`exhaustAllowed`) succeeded and its cursor is still open.
fn streams(request: &Request, reply: &Document) -> bool {
    let open = reply.get_document("cursor").is_ok_and(|c| c.get_i64("id").is_ok_and(|id| id != 0));
    request.exhaust_allowed
        && request.command.keys().next().is_some_and(|name| name == "getMore")
        && reply.get_f64("ok").is_ok_and(|ok| ok == 1.0)
        && open
}

/// The bytes of one reply, with `batch` as its first batch if given (an unencodable one:
/// its error instead).
fn encoded(
    head: Reply,
    request: &Request,
    reply: &Document,
    batch: Option<&RawArrayBuf>,
    plain: bool,
) -> Vec<u8> {
    let bytes = match batch {
        Some(batch) => wire::encode_reply_with_batch(head, request, reply, batch, plain),
        None => wire::encode_message(head, request, reply, plain),
    };
    match bytes {
        Ok(bytes) => bytes,
        Err(err) => {
            let head = Reply { more_to_come: false, ..head };
            wire::encode_message(head, request, &err.to_doc(), true).unwrap_or_default()
        }
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
    Request {
        request_id: header.request_id,
        kind,
        command: Document::new(),
        compressor: None,
        exhaust_allowed: false,
        sized: false,
        documents: None,
    }
}

type Outcome = Result<(Document, bool), MongoError>;

/// Runs a command; while it asks to wait (a change stream's `getMore` with nothing new),
/// awaits the change notification off the blocking threads and runs it again.
async fn run_waiting(
    server: &Arc<Server>,
    session: Session,
    command: &Arc<Document>,
) -> Option<(Session, Outcome)> {
    let (mut session, mut result) = execute(server, session, command.clone()).await?;
    while let Some(wait) = session.wait.take() {
        wait.wait().await;
        (session, result) = execute(server, session, command.clone()).await?;
    }
    session.await_until = None;
    // Acknowledged means durable: the answer waits for its writes' syncs, here on the
    // runtime rather than on a blocking thread.
    if let Err(err) = session.unsynced.settle().await {
        result = Err(MongoError::from(err));
    }
    Some((session, result))
}

/// Runs one command off the async workers (a short point read on this one:
/// [`commands::point_read::is_short`]); gives the session back. `None` if the command
/// panicked (a bug): the session went with it, so the connection ends.
async fn execute(
    server: &Arc<Server>,
    mut session: Session,
    command: Arc<Document>,
) -> Option<(Session, Outcome)> {
    // This connection frames the reply, so a find may hand its batch over as BSON.
    session.raw_batch = commands::point_read::RawBatch::Wanted;
    if commands::point_read::is_short(server, &command) {
        let result = commands::run(server, &mut session, &command);
        return Some((session, result));
    }
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use bson::{Bson, doc};
    use bunko_engine::security::UserCtx;
    use bunko_engine::{Config, Engine};
    use bunko_storage::Memory;

    use super::*;

    fn server() -> (Arc<Memory>, Arc<Server>) {
        let memory = Arc::new(Memory::new());
        let config =
            Config { admins: vec![("admin".into(), "s3cret".into())], ..Config::default() };
        let engine = Engine::open(memory.clone(), config).expect("engine");
        (memory, Server::new(Arc::new(engine), Default::default()))
    }

    fn admin_session() -> Session {
        let addr: SocketAddr = "127.0.0.1:1".parse().expect("address");
        let mut session = Session::new(1, addr, addr);
        session.user = Some(UserCtx::admin("admin"));
        session
    }

    fn insert(id: i32) -> Document {
        doc! {"insert": "items", "documents": [{"_id": id, "n": id}], "$db": "app"}
    }

    async fn run(server: &Arc<Server>, session: Session, command: &Document) -> (Session, Outcome) {
        run_waiting(server, session, &Arc::new(command.clone())).await.expect("no panic")
    }

    #[tokio::test]
    async fn a_write_is_answered_only_after_its_sync_and_a_failed_sync_refuses_the_next() {
        let (memory, server) = server();
        let (session, created) = run(&server, admin_session(), &insert(1)).await;
        assert_eq!(created.expect("insert").0.get_i32("n").ok(), Some(1));
        let syncs = memory.syncs();
        let (session, done) = run(&server, session, &insert(2)).await;
        assert_eq!(done.expect("insert").0.get_i32("n").ok(), Some(1));
        assert!(memory.syncs() > syncs, "answered without a sync");

        memory.fail_syncs(true);
        let (session, failed) = run(&server, session, &insert(3)).await;
        let err = failed.expect_err("a write whose sync failed is not acknowledged");
        assert_eq!(err.code_name, "InternalError");
        let (_, refused) = run(&server, session, &insert(4)).await;
        let refused = match refused {
            Ok((reply, _)) => reply.get_array("writeErrors").map(|e| e.len()).unwrap_or(0),
            Err(_) => 1,
        };
        assert_eq!(refused, 1, "a write after a failed sync is refused");
    }

    /// A document over 16 MiB inside a request whose framing did not vouch for its size is
    /// refused by itself (BSONObjectTooLarge at its index); the rest of the batch is written.
    #[tokio::test]
    async fn an_unsized_request_has_its_documents_measured() {
        let (_, server) = server();
        let big = doc! {"_id": 2, "x": "y".repeat(crate::wire::MAX_BSON_SIZE)};
        let command = doc! {"insert": "items", "documents": [{"_id": 1}, big, {"_id": 3}],
        "ordered": false, "$db": "app"};
        let (_, done) = run(&server, admin_session(), &command).await;
        let reply = done.expect("insert").0;
        assert_eq!(reply.get_i32("n").ok(), Some(2));
        let errors = reply.get_array("writeErrors").cloned().unwrap_or_default();
        let error = errors.first().and_then(Bson::as_document).cloned().unwrap_or_default();
        assert_eq!(
            (error.get_i32("index").ok(), error.get_i32("code").ok()),
            (Some(1), Some(10334))
        );
    }

    /// Writes waiting for their sync hold no blocking thread: with one blocking thread and
    /// a slow disk, sixteen concurrent inserts share a few syncs instead of one each.
    #[test]
    fn concurrent_writes_share_syncs_with_one_blocking_thread() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .max_blocking_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        let (memory, server) = server();
        runtime.block_on(async {
            let (_, created) = run(&server, admin_session(), &insert(0)).await;
            created.expect("insert");
            memory.set_sync_delay(Duration::from_millis(100));
            let syncs = memory.syncs();
            let writes = (1..=16).map(|id| {
                let server = server.clone();
                tokio::spawn(async move { run(&server, admin_session(), &insert(id)).await.1 })
            });
            for write in futures::future::join_all(writes).await {
                assert_eq!(write.expect("task").expect("insert").0.get_i32("n").ok(), Some(1));
            }
            let used = memory.syncs() - syncs;
            assert!(used <= 8, "{used} syncs for 16 writes: each write held the blocking thread");
        });
    }
}
