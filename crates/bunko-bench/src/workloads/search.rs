//! `search`: Cloudant Search and Geo over [`crate::cli::Sizes::view`] readings (200k at full
//! scale), preloaded into a partitioned database, so a run with `view` compares the two
//! builds over the same number of documents.
//!
//! 1. First build: `PUT /{db}/_design/bench` with a global search index (the reading's
//!    device and bridge as text, the value as a number, the bridge as a facet) and the
//!    first `GET .../_search/text?q=*:*&limit=1`, which waits for the index to cover every
//!    document. Throughput is documents per second over both requests.
//! 2. 16 connections search two terms with a facet:
//!    `q=device:"device-N" AND reading:[10 TO 60]&counts=["bridge"]`.
//! 3. 16 connections search one partition of a partitioned index:
//!    `/_partition/{p}/_design/part/_search/text?q=reading:[10 TO 60]`.
//! 4. Geo: a first build of an `st_indexes` index over one point per reading (placed from its
//!    value and time), then 16 connections asking for the points within 1 km of a random
//!    point.

use std::time::Instant;

use reqwest::Method;

use super::{Ctx, Feature, usage};
use crate::cli::Workload;
use crate::data::Readings;
use crate::error::Result;
use crate::measure::Sample;
use crate::report::Row;

const CONNECTIONS: usize = 16;

const GLOBAL: &str = r#"{"options":{"partitioned":false},"indexes":{"text":{"index":"function(doc){ index('device', doc.deviceID); index('bridge', doc.infrastructureID, {facet: true}); index('reading', doc.reading); }"}}}"#;

const PARTITIONED: &str = r#"{"options":{"partitioned":true},"indexes":{"text":{"index":"function(doc){ index('device', doc.deviceID); index('reading', doc.reading); }"}}}"#;

/// One point per reading: longitude from its value, latitude from its time.
const GEO: &str = r#"{"st_indexes":{"points":{"index":"function(doc){ st_index({type: 'Point', coordinates: [doc.reading * 3.6 - 180, (doc.ts / 60) % 170 - 85]}); }"}}}"#;

pub async fn run(ctx: &Ctx, rows: &mut Vec<Row>) -> Result {
    ctx.require(Feature::Search).await?;
    let db = ctx.create_db(Workload::Search, true).await?;
    let readings = Readings::new(ctx.sizes.view);
    let preloaded = ctx.preload(&db, readings).await?;
    let client = ctx.client()?;
    let docs = readings.docs as u64;

    let build = |ddoc: &'static str, body: &'static str, first: String, what: &'static str| {
        let (client, db) = (&client, &db);
        async move {
            let probe = ctx.probe();
            let began = Instant::now();
            ctx.send(client, Method::PUT, &format!("/{db}/_design/{ddoc}"), Some(body.into()))
                .await?;
            let query_began = Instant::now();
            ctx.send(client, Method::GET, &first, None).await?;
            let mut sample = Sample::single(docs, query_began.elapsed());
            sample.elapsed = began.elapsed();
            let case = format!("{what} first build over {docs} docs");
            Ok::<_, crate::error::Error>(Row::measured(
                "search",
                &case,
                "docs/s",
                &sample,
                usage(probe),
            ))
        }
    };
    let search = format!("/{db}/_design/bench/_search/text");
    rows.push(
        build("bench", GLOBAL, format!("{search}?q=*:*&limit=1"), "search").await?.note(&preloaded),
    );

    let probe = ctx.probe();
    let (devices, path) = (readings.devices, search.clone());
    let sample = ctx
        .timed_requests(CONNECTIONS, ctx.duration(), move |r| {
            let q = format!(
                "q=device:%22device-{}%22%20AND%20reading:%5B10%20TO%2060%5D&counts=%5B%22bridge%22%5D",
                r as usize % devices
            );
            (Method::GET, format!("{path}?{q}"), None)
        })
        .await?;
    let case = "two terms + counts facet, 16 connections";
    rows.push(Row::measured("search", case, "req/s", &sample, usage(probe)));

    let first_part = format!(
        "/{db}/_partition/{}/_design/part/_search/text?q=*:*&limit=1",
        Readings::partition(0)
    );
    rows.push(build("part", PARTITIONED, first_part, "partitioned search").await?);
    let (partitions, db2) = (readings.partitions, db.clone());
    let probe = ctx.probe();
    let sample = ctx
        .timed_requests(CONNECTIONS, ctx.duration(), move |r| {
            let p = Readings::partition(r as usize % partitions);
            let path = format!("/{db2}/_partition/{p}/_design/part/_search/text");
            (Method::GET, format!("{path}?q=reading:%5B10%20TO%2060%5D&limit=25"), None)
        })
        .await?;
    rows.push(Row::measured(
        "search",
        "partition search, 16 connections",
        "req/s",
        &sample,
        usage(probe),
    ));

    let geo = format!("/{db}/_design/geo/_geo/points");
    rows.push(build("geo", GEO, format!("{geo}?bbox=0,0,1,1&limit=1"), "geo").await?);
    let probe = ctx.probe();
    let sample = ctx
        .timed_requests(CONNECTIONS, ctx.duration(), move |r| {
            let (lon, lat) = ((r % 360) as f64 - 180.0, (r / 360 % 170) as f64 - 85.0);
            (Method::GET, format!("{geo}?lat={lat}&lon={lon}&radius=1000&limit=25"), None)
        })
        .await?;
    rows.push(Row::measured(
        "search",
        "geo 1 km radius, 16 connections",
        "req/s",
        &sample,
        usage(probe),
    ));
    Ok(())
}
