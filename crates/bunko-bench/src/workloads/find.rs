//! `find`: Mango queries with an index. [`crate::cli::Sizes::find`] readings are preloaded
//! (200k at full scale), then:
//!
//! 1. `POST /{db}/_index` on `deviceID, ts` over the existing documents, then `_find`
//!    until it is answered from the index: documents per second from the `POST` to that
//!    answer; the latency is the first `_find`'s. CouchDB builds the index during the first
//!    query; Bunko builds it in the background and scans meanwhile ([`wait_for_index`]).
//! 2. 16 connections run `_find` with `deviceID` equal to a random device and `ts` in a
//!    random window of half its readings, limit 25, for the run's duration.
//!
//! [`index_then_query`] is shared with `elemmatch`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::{Client, Method};
use serde_json::Value;

use super::{Ctx, Feature, usage};
use crate::cli::Workload;
use crate::data::{INTERVAL, Readings, T0};
use crate::error::Result;
use crate::measure::Sample;
use crate::proc::cpu_secs;
use crate::report::Row;

pub const CONNECTIONS: usize = 16;

pub async fn run(ctx: &Ctx, rows: &mut Vec<Row>) -> Result {
    ctx.require(Feature::Find).await?;
    let db = ctx.create_db(Workload::Find, false).await?;
    let readings = Readings::new(ctx.sizes.find);
    let preloaded = ctx.preload(&db, readings).await?;
    let index = r#"{"index":{"fields":["deviceID","ts"]},"name":"by-device-ts","type":"json"}"#;
    let plan = Plan {
        workload: "find",
        db: &db,
        docs: readings.docs,
        index,
        case: "deviceID + ts range, limit 25, 16 connections",
        preloaded,
    };
    index_then_query(ctx, rows, plan, move |r| selector(&readings, r)).await
}

/// A `_find` body: `deviceID` of a random device and a `ts` range over half its readings,
/// limit 25.
pub fn selector(readings: &Readings, r: u64) -> String {
    let device = r as usize % readings.devices;
    let per_device = readings.per_device() as u64;
    let first = (r >> 24) % per_device;
    let from = T0 + first * INTERVAL;
    let to = from + (per_device / 2).max(1) * INTERVAL;
    format!(
        r#"{{"selector":{{"deviceID":"device-{device}","ts":{{"$gte":{from},"$lt":{to}}}}},"limit":25}}"#
    )
}

/// What [`index_then_query`] runs.
pub struct Plan<'a> {
    pub workload: &'static str,
    pub db: &'a str,
    /// Documents in the database.
    pub docs: usize,
    /// The body of `POST /{db}/_index`.
    pub index: &'a str,
    /// The name of the timed case.
    pub case: &'a str,
    /// The preload note, added to the first row.
    pub preloaded: String,
}

/// Creates the index over existing documents and times it until a `_find` is answered
/// from it (one row; the latency is the first `_find`'s), then runs `query(random)` from
/// [`CONNECTIONS`] clients for the duration (another row).
pub async fn index_then_query<Q>(ctx: &Ctx, rows: &mut Vec<Row>, plan: Plan<'_>, query: Q) -> Result
where
    Q: Fn(u64) -> String + Send + Sync + 'static,
{
    let client = ctx.client()?;
    let find = format!("/{}/_find", plan.db);
    let probe = ctx.probe();
    let began = Instant::now();
    let index_path = format!("/{}/_index", plan.db);
    ctx.send(&client, Method::POST, &index_path, Some(plan.index.to_string())).await?;
    let indexed = began.elapsed();
    let first_began = Instant::now();
    let answer = ctx.send(&client, Method::POST, &find, Some(query(0))).await?;
    let first = first_began.elapsed();
    let ready = if no_index_warning(&answer) {
        wait_for_index(ctx, &client, &find, &query(0)).await?.map(|_| began.elapsed())
    } else {
        Some(began.elapsed())
    };
    let mut sample = Sample::single(plan.docs as u64, first);
    sample.elapsed = ready.unwrap_or(began.elapsed());
    let case = format!("index over {} docs: POST _index until _find uses it", plan.docs);
    let mut note = format!(
        "POST _index took {:.0} ms; the first _find took {:.0} ms and {}",
        indexed.as_secs_f64() * 1000.0,
        first.as_secs_f64() * 1000.0,
        describe_answer(&answer),
    );
    if ready.is_none() {
        note.push_str("; no _find was answered from the index: time is to the first answer");
    }
    let row = Row::measured(plan.workload, &case, "docs/s", &sample, usage(probe));
    rows.push(row.note(&note).note(&plan.preloaded));

    let query = Arc::new(query);
    let probe = ctx.probe();
    let sample = ctx
        .timed_requests(CONNECTIONS, ctx.duration(), move |r| {
            (Method::POST, find.clone(), Some(query(r)))
        })
        .await?;
    rows.push(Row::measured(plan.workload, plan.case, "req/s", &sample, usage(probe)));
    Ok(())
}

/// How long [`wait_for_index`] waits at most.
const INDEX_WAIT_MAX: Duration = Duration::from_secs(600);

/// Whether a `_find` answer says that no index served it.
pub fn no_index_warning(answer: &Value) -> bool {
    answer.get("warning").and_then(Value::as_str).is_some_and(|w| w.contains("No matching index"))
}

/// After a `_find` answered without an index: servers that build indexes in the
/// background (Bunko) scan until the build completes, while CouchDB builds during the
/// first query, so its answer will not change. With `--pid`, this repeats the query
/// while the server keeps working between queries, until an answer comes from the
/// index; it gives up once the server is idle between two queries (nothing is being
/// built) or after [`INDEX_WAIT_MAX`]. Returns how long it waited if the index was used.
pub async fn wait_for_index(
    ctx: &Ctx,
    client: &Client,
    path: &str,
    body: &str,
) -> Result<Option<Duration>> {
    let Some(pid) = ctx.opts.pid else { return Ok(None) };
    let began = Instant::now();
    while began.elapsed() < INDEX_WAIT_MAX {
        let before = cpu_secs(pid);
        tokio::time::sleep(Duration::from_millis(250)).await;
        let busy = match (before, cpu_secs(pid)) {
            (Some(before), Some(after)) => after - before >= 0.02,
            _ => false,
        };
        let answer = ctx.send(client, Method::POST, path, Some(body.to_string())).await?;
        if !no_index_warning(&answer) {
            return Ok(Some(began.elapsed()));
        }
        if !busy {
            return Ok(None);
        }
    }
    Ok(None)
}

/// "returned N docs", plus the server's warning (e.g. that no index was used).
pub fn describe_answer(answer: &Value) -> String {
    let docs = answer.get("docs").and_then(Value::as_array).map_or(0, Vec::len);
    match answer.get("warning").and_then(Value::as_str) {
        Some(warning) => format!("returned {docs} docs, warning: {warning}"),
        None => format!("returned {docs} docs"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_cover_half_a_device_history() {
        let readings = Readings::new(200_000);
        let body: Value = serde_json::from_str(&selector(&readings, 5)).unwrap();
        assert_eq!(body["selector"]["deviceID"], "device-5");
        let from = body["selector"]["ts"]["$gte"].as_u64().unwrap();
        let to = body["selector"]["ts"]["$lt"].as_u64().unwrap();
        assert_eq!((to - from) / INTERVAL, readings.per_device() as u64 / 2);
        assert_eq!(body["limit"], 25);
    }
}
