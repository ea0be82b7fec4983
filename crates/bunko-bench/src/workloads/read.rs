//! `read`: point reads. [`crate::cli::Sizes::read`] readings are preloaded (100k at full
//! scale), then 32 connections `GET /{db}/{id}` random existing documents for the run's
//! duration. Throughput is requests per second. [`point_gets`] is shared with `baseline`,
//! which sends the same requests to a bare axum server.

use std::sync::Arc;
use std::time::Duration;

use reqwest::Method;

use super::{Ctx, usage};
use crate::cli::Workload;
use crate::client::Server;
use crate::data::Readings;
use crate::error::Result;
use crate::measure::{Sample, Until, drive};
use crate::report::Row;

pub const CONNECTIONS: usize = 32;

/// The case name, the same for `read` and `baseline` so that they can be compared.
pub const CASE: &str = "point GET, 32 connections";

pub async fn run(ctx: &Ctx, rows: &mut Vec<Row>) -> Result {
    let db = ctx.create_db(Workload::Read, false).await?;
    let readings = Readings::new(ctx.sizes.read);
    let preloaded = ctx.preload(&db, readings).await?;
    let probe = ctx.probe();
    let sample = point_gets(&ctx.server, &db, readings, ctx.duration()).await?;
    rows.push(Row::measured("read", CASE, "req/s", &sample, usage(probe)).note(&preloaded));
    Ok(())
}

/// [`CONNECTIONS`] clients reading random documents of `readings` from `db` for `duration`.
pub async fn point_gets(
    server: &Arc<Server>,
    db: &str,
    readings: Readings,
    duration: Duration,
) -> Result<Sample> {
    let clients = server.clients(CONNECTIONS)?;
    let (server, db) = (server.clone(), Arc::new(db.to_string()));
    Ok(drive(clients, Until::Deadline(duration), move |client, r| {
        let (server, db) = (server.clone(), db.clone());
        async move {
            let path = format!("/{db}/{}", readings.id(r as usize % readings.docs));
            let request = server.request(&client, Method::GET, &path);
            server.send(&client, request, "GET /{db}/{id}").await?;
            Ok(1)
        }
    })
    .await)
}
