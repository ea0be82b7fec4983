//! `soak`: memory over a long mixed load (issue 20 point 6: "RSS stays flat over a
//! 30-minute mixed load"). [`crate::cli::Sizes::read`] readings are preloaded (100k at full
//! scale) with a Mango index on `deviceID` + `ts` and a view `deviceID → 1` with `_count`,
//! then [`CONNECTIONS`] clients send a mix of requests for the run's duration:
//!
//! | share | request |
//! |---|---|
//! | 40% | `GET /{db}/{id}` of a random reading |
//! | 20% | an update of one of the first [`HOT`] readings (`PUT` with its `_rev`) |
//! | 15% | `_find` of a random device's readings (`ts` at least [`T0`]), `limit` 25: the index |
//! | 10% | the view's rows of a random device, `reduce=false&limit=25` |
//! | 5% | the view's `_count` of a random device |
//! | 5% | `_changes?descending=true&limit=25` |
//! | 5% | `_all_docs?skip=N&limit=25`, a random `N` below 1000 |
//!
//! The run is cut into [`WINDOWS`] windows, one row each: throughput, latency, the peak
//! RSS within the window (the probe resets `VmHWM` at its start) and, in the note, the RSS
//! at its end. Updates keep the number of live documents constant, so a flat RSS means
//! the server's caches, memtables and buffers stay within their budget, not that nothing
//! was written. (A selector on `deviceID` alone would not use the index: as in CouchDB, a
//! JSON index serves only selectors that need every indexed field.) Not in the default
//! set: it is as long as `--duration` (30m for the issue).

use std::sync::Arc;

use reqwest::Method;
use reqwest::header::CONTENT_TYPE;
use serde::Deserialize;
use tokio::sync::Mutex;

use super::scale::encode;
use super::{Ctx, Feature, usage};
use crate::cli::Workload;
use crate::data::{Readings, T0};
use crate::error::{Error, Result};
use crate::measure::{Until, drive};
use crate::report::Row;

/// Connections sending the mix.
const CONNECTIONS: usize = 16;
/// Rows (windows) the run is cut into.
const WINDOWS: u32 = 10;
/// Readings that updates rotate through (the first ones of the preload).
const HOT: usize = 10_000;

const DESIGN: &str =
    r#"{"views":{"by_device":{"map":"function(doc){ emit(doc.deviceID, 1) }","reduce":"_count"}}}"#;
const INDEX: &str = r#"{"index":{"fields":["deviceID","ts"]},"name":"by-device","type":"json"}"#;

pub async fn run(ctx: &Ctx, rows: &mut Vec<Row>) -> Result {
    ctx.require(Feature::Find).await?;
    ctx.require(Feature::View).await?;
    let db = ctx.create_db(Workload::Soak, false).await?;
    let readings = Readings::new(ctx.sizes.read);
    let client = ctx.client()?;
    ctx.send(&client, Method::POST, &format!("/{db}/_index"), Some(INDEX.into())).await?;
    ctx.send(&client, Method::PUT, &format!("/{db}/_design/soak"), Some(DESIGN.into())).await?;
    let preloaded = ctx.preload(&db, readings).await?;
    let mix = Arc::new(Mix {
        db,
        readings,
        revs: (0..HOT.min(readings.docs)).map(|_| Mutex::new(None)).collect(),
    });
    let window = ctx.duration() / WINDOWS;
    let mut first_rss = None;
    for n in 1..=WINDOWS {
        let probe = ctx.probe();
        let (server, mix) = (ctx.server.clone(), mix.clone());
        let clients = server.clients(CONNECTIONS)?;
        let sample = drive(clients, Until::Deadline(window), move |client, r| {
            let (server, mix) = (server.clone(), mix.clone());
            async move { mix.request(&server, &client, r).await }
        })
        .await;
        let rss = ctx.opts.pid.and_then(crate::proc::rss_mb);
        first_rss = first_rss.or(rss);
        let case = format!("window {n} of {WINDOWS}, {CONNECTIONS} connections");
        let mut row = Row::measured("soak", &case, "req/s", &sample, usage(probe));
        if let Some(rss) = rss {
            let growth = first_rss.map_or(1.0, |first| rss / first);
            row = row.note(&format!("RSS at its end {rss:.0} MB ({growth:.2}× window 1's)"));
        }
        if n == 1 {
            row = row.note(&preloaded);
        }
        rows.push(row);
    }
    Ok(())
}

/// What the clients share: the database and the last known `_rev` of each hot reading.
struct Mix {
    db: String,
    readings: Readings,
    revs: Vec<Mutex<Option<String>>>,
}

impl Mix {
    /// One request of the mix chosen by `r`.
    async fn request(
        &self,
        server: &crate::client::Server,
        client: &reqwest::Client,
        r: u64,
    ) -> Result<u64> {
        let pick = (r >> 8) as usize;
        let device = pick % self.readings.devices;
        let db = &self.db;
        let (method, path, body) = match r % 20 {
            0..8 => {
                let id = encode(&self.readings.id(pick % self.readings.docs));
                (Method::GET, format!("/{db}/{id}"), None)
            }
            8..12 => return self.update(server, client, pick % self.revs.len()).await,
            12..15 => {
                let find = format!(
                    r#"{{"selector":{{"deviceID":"device-{device}","ts":{{"$gte":{T0}}}}},"limit":25}}"#
                );
                (Method::POST, format!("/{db}/_find"), Some(find))
            }
            15..17 => {
                let query = format!("key=%22device-{device}%22&reduce=false&limit=25");
                (Method::GET, format!("/{db}/_design/soak/_view/by_device?{query}"), None)
            }
            17 => (
                Method::GET,
                format!("/{db}/_design/soak/_view/by_device?key=%22device-{device}%22"),
                None,
            ),
            18 => (Method::GET, format!("/{db}/_changes?descending=true&limit=25"), None),
            _ => (Method::GET, format!("/{db}/_all_docs?skip={}&limit=25", pick % 1000), None),
        };
        let mut request = server.request(client, method, &path);
        if let Some(body) = body {
            request = request.header(CONTENT_TYPE, "application/json").body(body);
        }
        server.send(client, request, "soak request").await?;
        Ok(1)
    }

    /// Writes a new revision of hot reading `i` (its `_rev` read first when not known).
    async fn update(
        &self,
        server: &crate::client::Server,
        client: &reqwest::Client,
        i: usize,
    ) -> Result<u64> {
        #[derive(Deserialize)]
        struct Rev {
            #[serde(alias = "_rev")]
            rev: String,
        }
        let Some(slot) = self.revs.get(i) else { return Ok(0) };
        let mut rev = slot.lock().await;
        let path = format!("/{}/{}", self.db, encode(&self.readings.id(i)));
        let known = match rev.take() {
            Some(known) => known,
            None => {
                let answer = server
                    .send(client, server.request(client, Method::GET, &path), "GET hot")
                    .await?;
                parse::<Rev>(&answer)?.rev
            }
        };
        let body = self.readings.body(i);
        let body = format!("{{\"_rev\":\"{known}\",{}", body.get(1..).unwrap_or_default());
        let request = server
            .request(client, Method::PUT, &path)
            .header(CONTENT_TYPE, "application/json")
            .body(body);
        let answer = server.send(client, request, "PUT hot").await?;
        *rev = Some(parse::<Rev>(&answer)?.rev);
        Ok(1)
    }
}

fn parse<'a, T: Deserialize<'a>>(answer: &'a [u8]) -> Result<T> {
    serde_json::from_slice(answer).map_err(|e| Error::Invalid(format!("unexpected answer: {e}")))
}
