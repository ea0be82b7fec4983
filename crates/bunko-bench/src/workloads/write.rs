//! `write`: single-document writes. 64 clients each `PUT /{db}/{id}` a new ~1 KB reading,
//! one after another, for the run's duration. Every write is acknowledged only once durable,
//! so this measures how well the server shares syncs among concurrent writers (group
//! commit). Throughput is documents per second.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use reqwest::Method;
use reqwest::header::CONTENT_TYPE;

use super::{Ctx, clients_case, usage};
use crate::cli::Workload;
use crate::data::Readings;
use crate::error::Result;
use crate::measure::{Until, drive};
use crate::report::Row;

const CLIENTS: usize = 64;

pub async fn run(ctx: &Ctx, rows: &mut Vec<Row>) -> Result {
    let db = Arc::new(ctx.create_db(Workload::Write, false).await?);
    // Only the id scheme is used: index i is a new document for every i.
    let readings = Readings::new(1_000_000);
    let next = Arc::new(AtomicUsize::new(0));
    let server = ctx.server.clone();
    let clients = server.clients(CLIENTS)?;
    let probe = ctx.probe();
    let sample = drive(clients, Until::Deadline(ctx.duration()), move |client, _| {
        let (server, db) = (server.clone(), db.clone());
        let i = next.fetch_add(1, Ordering::Relaxed);
        async move {
            let path = format!("/{db}/{}", readings.id(i));
            let request = server
                .request(&client, Method::PUT, &path)
                .header(CONTENT_TYPE, "application/json")
                .body(readings.doc(i));
            server.send(&client, request, "PUT /{db}/{id}").await?;
            Ok(1)
        }
    })
    .await;
    let case = clients_case(CLIENTS, "client");
    rows.push(Row::measured("write", &case, "docs/s", &sample, usage(probe)));
    Ok(())
}
