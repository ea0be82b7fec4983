//! `baseline`: what axum itself allows on this machine. A bare axum handler in this
//! process, on 127.0.0.1:0 in its own 2-thread runtime, answers `GET /{db}/{id}` with the
//! bytes of a document GET (a ~1 KB reading with `_id` and `_rev`); the `read` workload's
//! requests ([`super::read::point_gets`]) are sent to it. `read` can then be quoted as a
//! fraction of this. CPU is the bare server's threads' (named [`SERVER_THREADS`]), client
//! CPU the rest of this process's; peak RSS is this process's (client and server).

use std::sync::Arc;

use axum::Router;
use axum::http::header::CONTENT_TYPE;
use axum::routing::get;
use bytes::Bytes;

use super::{Ctx, read, usage};
use crate::cli::{AuthMode, Options};
use crate::client::Server;
use crate::data::Readings;
use crate::error::{Error, Result};
use crate::proc::{Probe, SERVER_THREADS};
use crate::report::Row;

pub async fn run(ctx: &Ctx, rows: &mut Vec<Row>) -> Result {
    let readings = Readings::new(ctx.sizes.read);
    let body = format!(
        "{{\"_id\":\"{}\",\"_rev\":\"1-{:032x}\",{}",
        readings.id(0),
        0x5eed_u128,
        readings.body(0).trim_start_matches('{')
    );
    let body = Bytes::from(body);
    let app = Router::new().route(
        "/{db}/{id}",
        get(move || {
            let body = body.clone();
            async move { ([(CONTENT_TYPE, "application/json")], body) }
        }),
    );
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let thread =
        std::thread::Builder::new().name(SERVER_THREADS.into()).spawn(move || -> Result {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name(SERVER_THREADS)
                .enable_all()
                .build()?;
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener)?;
                axum::serve(listener, app)
                    .with_graceful_shutdown(async move {
                        let _ = stopped.await;
                    })
                    .await?;
                Ok(())
            })
        })?;

    // The bare server checks nothing: Basic credentials cost nothing and need no session.
    let opts = Options { url: format!("http://{addr}"), auth: AuthMode::Basic, ..ctx.opts.clone() };
    let server: Arc<Server> = Server::new(&opts)?;
    let probe = Probe::start(std::process::id());
    let sample = read::point_gets(&server, "db", readings, ctx.duration()).await;
    let usage = usage(probe);
    let _ = stop.send(());
    let joined = tokio::task::spawn_blocking(move || thread.join()).await;
    let sample = sample?;
    match joined {
        Ok(Ok(served)) => served?,
        _ => return Err(Error::Invalid("the baseline server thread panicked".into())),
    }
    let row = Row::measured("baseline", read::CASE, "req/s", &sample, usage)
        .note("in-process axum; CPU is its threads', RSS bunko-bench's (client and server)");
    rows.push(row);
    Ok(())
}
