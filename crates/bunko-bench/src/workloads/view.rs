//! `view`: a JavaScript map view. [`crate::cli::Sizes::view`] readings are preloaded
//! (200k at full scale), then:
//!
//! 1. First build: `PUT /{db}/_design/bench` with
//!    `function(doc){ emit(doc.deviceID, doc.infrastructureID) }` and the first
//!    `GET .../_view/by_device?limit=1`, which waits for the view to cover every document.
//!    Throughput is documents per second over both requests; latency is the query's.
//! 2. 16 connections look up a random device (`?key="device-N"&limit=25`) for the run's
//!    duration.

use std::time::Instant;

use reqwest::Method;

use super::{Ctx, Feature, usage};
use crate::cli::Workload;
use crate::data::Readings;
use crate::error::Result;
use crate::measure::Sample;
use crate::report::Row;

const CONNECTIONS: usize = 16;

const DESIGN: &str = r#"{"views":{"by_device":{"map":"function(doc){ emit(doc.deviceID, doc.infrastructureID) }"}}}"#;

pub async fn run(ctx: &Ctx, rows: &mut Vec<Row>) -> Result {
    ctx.require(Feature::View).await?;
    let db = ctx.create_db(Workload::View, false).await?;
    let readings = Readings::new(ctx.sizes.view);
    let preloaded = ctx.preload(&db, readings).await?;
    let client = ctx.client()?;
    let view = format!("/{db}/_design/bench/_view/by_device");

    let probe = ctx.probe();
    let began = Instant::now();
    ctx.send(&client, Method::PUT, &format!("/{db}/_design/bench"), Some(DESIGN.into())).await?;
    let query_began = Instant::now();
    ctx.send(&client, Method::GET, &format!("{view}?limit=1"), None).await?;
    let mut sample = Sample::single(readings.docs as u64, query_began.elapsed());
    sample.elapsed = began.elapsed();
    let case = format!("first build over {} docs", readings.docs);
    rows.push(Row::measured("view", &case, "rows/s", &sample, usage(probe)).note(&preloaded));

    let probe = ctx.probe();
    let sample = ctx
        .timed_requests(CONNECTIONS, ctx.duration(), move |r| {
            let device = r as usize % readings.devices;
            (Method::GET, format!("{view}?key=%22device-{device}%22&limit=25"), None)
        })
        .await?;
    let case = "key lookup, limit 25, 16 connections";
    rows.push(Row::measured("view", case, "req/s", &sample, usage(probe)));
    Ok(())
}
