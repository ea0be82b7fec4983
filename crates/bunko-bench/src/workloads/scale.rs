//! `scale`: how cost grows with the data. One partitioned database of IoT readings
//! ([`Readings::blocked`]: partitions of 100 documents, two devices each) grows in steps
//! ([`crate::cli::Sizes::scale`]: 200k, 1M and 10M documents at full scale, or
//! `--scale-steps`). At each step:
//!
//! | case | what |
//! |---|---|
//! | `load` | the next documents with `_bulk_docs` (1000 per request, 4 clients), docs/s |
//! | `point GET` | `GET /{db}/{id}` of random documents, 32 connections |
//! | `_find` | a global index on `deviceID` + `ts`, one random device, `limit` 25, 16 connections |
//! | `partition _find` | the same through the partitioned index of the device's partition |
//! | `disk` | the data directory (`--data-dir`), or `sizes.file`; the note gives the RSS |
//!
//! Both indexes exist before the first document, so every load maintains them, as a
//! growing production database does. Timed cases run half the run's duration each. Read
//! the rows of one case across the steps: a flat p99 and a flat load rate are the goal.

use std::time::Instant;

use bytes::Bytes;
use reqwest::Method;

use super::partition::device_selector;
use super::{Ctx, Feature, usage};
use crate::cli::Workload;
use crate::data::Readings;
use crate::error::{Error, Result};
use crate::measure::Sample;
use crate::report::Row;

/// Connections of the point-GET case (as `read`).
const GET_CONNECTIONS: usize = 32;
/// Connections of the `_find` cases (as `find`).
const FIND_CONNECTIONS: usize = 16;

pub async fn run(ctx: &Ctx, rows: &mut Vec<Row>) -> Result {
    ctx.require(Feature::Find).await?;
    let partition_find = ctx.require(Feature::PartitionFind).await;
    let steps = ctx.sizes.scale.clone();
    let readings = Readings::blocked(steps.iter().copied().max().unwrap_or(0));
    let db = ctx.create_db(Workload::Scale, true).await?;
    create_indexes(ctx, &db, partition_find.is_ok()).await?;
    let disk = super::disk::Disk::start(ctx).await?;
    let mut loaded = 0;
    for step in steps.into_iter().filter(|&step| step > 0) {
        let began = Instant::now();
        let probe = ctx.probe();
        let sample = load(ctx, &db, readings, loaded, step).await;
        if let Some(error) = &sample.first_error {
            return Err(Error::Invalid(format!("loading to {step} docs failed: {error}")));
        }
        let case = |what: &str| format!("{step} docs: {what}");
        let note =
            format!("{} docs added in {:.1} s", step - loaded, began.elapsed().as_secs_f64());
        rows.push(
            Row::measured("scale", &case("load, 4 clients"), "docs/s", &sample, usage(probe))
                .note(&note),
        );
        loaded = step;
        ctx.settle().await;
        // The documents loaded so far (the same ids: blocked readings do not depend on
        // the total), so every device asked for has its 50 readings.
        let all = Readings::blocked(step);
        let get = move |r: u64| {
            (Method::GET, format!("/{}/{}", "{db}", encode(&all.id(r as usize % all.docs))), None)
        };
        timed(ctx, rows, &db, &case("point GET, 32 connections"), GET_CONNECTIONS, get).await?;
        let find = move |r: u64| {
            let (_, body) = device_selector(&all, r);
            (Method::POST, "/{db}/_find".to_string(), Some(body))
        };
        timed(ctx, rows, &db, &case("_find deviceID + ts, 16 connections"), FIND_CONNECTIONS, find)
            .await?;
        let name = case("partition _find deviceID + ts, 16 connections");
        match &partition_find {
            Ok(()) => {
                let part = move |r: u64| {
                    let (p, body) = device_selector(&all, r);
                    (Method::POST, format!("/{{db}}/_partition/{p}/_find"), Some(body))
                };
                timed(ctx, rows, &db, &name, FIND_CONNECTIONS, part).await?;
            }
            Err(err) => rows.push(Row::skipped("scale", &name, &err.to_string())),
        }
        rows.push(disk.size_row(ctx, &db, "scale", &case("disk"), step as u64).await);
    }
    Ok(())
}

/// Loads documents `from..to` of `readings`.
async fn load(ctx: &Ctx, db: &str, readings: Readings, from: usize, to: usize) -> Sample {
    ctx.bulk_load(db, to - from, 4, move |_, range| {
        Bytes::from(readings.bulk(range.start + from..range.end + from))
    })
    .await
}

/// The global and (if the server has them) partitioned `deviceID` + `ts` indexes.
async fn create_indexes(ctx: &Ctx, db: &str, partitioned: bool) -> Result {
    let client = ctx.client()?;
    let index = |name: &str, partitioned: bool| {
        format!(
            r#"{{"index":{{"fields":["deviceID","ts"]}},"name":"{name}","type":"json",
                "partitioned":{partitioned}}}"#
        )
    };
    let path = format!("/{db}/_index");
    ctx.send(&client, Method::POST, &path, Some(index("global", false))).await?;
    if partitioned {
        ctx.send(&client, Method::POST, &path, Some(index("by-partition", true))).await?;
    }
    Ok(())
}

/// One timed case of `connections` clients sending `request` (its path names the
/// database as `{db}`).
async fn timed<F>(
    ctx: &Ctx,
    rows: &mut Vec<Row>,
    db: &str,
    case: &str,
    connections: usize,
    request: F,
) -> Result
where
    F: Fn(u64) -> (Method, String, Option<String>) + Send + Sync + 'static,
{
    let db = db.to_string();
    let probe = ctx.probe();
    let sample = ctx
        .timed_requests(connections, ctx.duration() / 2, move |r| {
            let (method, path, body) = request(r);
            (method, path.replacen("{db}", &db, 1), body)
        })
        .await?;
    rows.push(Row::measured("scale", case, "req/s", &sample, usage(probe)));
    Ok(())
}

/// Percent-encodes a document id for a path (`:` stays).
pub(super) fn encode(id: &str) -> String {
    id.bytes()
        .map(|b| match b {
            b if b.is_ascii_alphanumeric() || b"-_.~:".contains(&b) => (b as char).to_string(),
            b => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_grow_by_whole_partitions_of_the_same_documents() {
        let big = Readings::blocked(1_000_000);
        let small = Readings::blocked(200_000);
        assert_eq!(big.id(199_999), small.id(199_999));
        assert_eq!(small.devices, 4000);
        assert_eq!(big.id(0), "bridge-0:device-0-1700000000");
        assert_eq!(big.id(100), "bridge-1:device-2-1700000000");
        let (p, body) = device_selector(&small, 3);
        assert_eq!(p, "bridge-1");
        assert!(body.contains(r#""deviceID":"device-3""#), "{body}");
    }
}
