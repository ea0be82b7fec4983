//! `agg`: MongoDB aggregation pipelines (issue 14) against the equivalent CouchDB-API
//! operation on the same data, in the same run. The collections are loaded over HTTP into
//! `bench-agg-{run}$readings`, `…$orders` and `…$devices`, which the MongoDB front end sees
//! as collections of the database `bench-agg-{run}`; the pipelines go over the wire through
//! the official driver (`--mongo-url`, the server admin's credentials). A server without
//! the MongoDB protocol (CouchDB) skips the workload.
//!
//! 1. Per-device average over [`crate::cli::Sizes::agg`] readings (200k at full scale):
//!    `[{$match: {type: "reading"}}, {$group: {_id: "$deviceID", avg: {$avg: "$reading"}}}]`
//!    against a reduce view `emit(doc.deviceID, doc.reading)` with `_stats`, `group=true`
//!    (built first: its build is a row of its own).
//! 2. `$lookup` of [`crate::cli::Sizes::lookup`] orders (10k) into `devices` on `code`,
//!    indexed with `createIndexes`, against `_all_docs?include_docs=true` of the orders
//!    plus one `POST` of their codes to a view `emit(doc.code)` with `include_docs=true`.
//! 3. `[{$sort: {ts: -1}}, {$limit: 10}]` over the readings with an index `{ts: -1}`,
//!    against `_find` sorted on a Mango index on `ts` with `limit: 10`.
//!
//! Cases 1 and 2 run a few times one after another (one client); case 3 for the run's
//! duration. Each row counts operations (a whole pipeline, or the HTTP requests it
//! replaces) per second.

use std::sync::Arc;
use std::time::Instant;

use bson::{Document, doc};
use bytes::Bytes;
use futures::TryStreamExt;
use reqwest::Method;
use serde_json::{Value, json};

use super::{Ctx, Feature, usage};
use crate::cli::Workload;
use crate::client::Server;
use crate::data::Readings;
use crate::error::{Error, Result};
use crate::measure::{Sample, Until, drive};
use crate::report::Row;

/// Runs of the one-client cases (after one warm-up).
const REPEAT: usize = 3;

pub async fn run(ctx: &Ctx, rows: &mut Vec<Row>) -> Result {
    ctx.require(Feature::View).await?;
    let mongo = super::mongo::connect(ctx).await?;
    let readings = Readings::new(ctx.sizes.agg);
    let readings_db = ctx.create_collection(Workload::Agg, "readings").await?;
    let preloaded = ctx.preload(&readings_db, readings).await?;
    let db = mongo.database(readings_db.split("%24").next().unwrap_or_default());
    group(ctx, &db, &readings_db, readings, rows).await?;
    if let Some(first) = rows.first_mut() {
        *first = first.clone().note(&preloaded);
    }
    lookup(ctx, &db, readings, rows).await?;
    sort_limit(ctx, &db, &readings_db, rows).await
}

fn mongo_error(e: mongodb::error::Error) -> Error {
    Error::Invalid(format!("MongoDB: {e}"))
}

/// Every document `pipeline` answers over `coll`.
async fn aggregate(
    coll: &mongodb::Collection<Document>,
    pipeline: Vec<Document>,
) -> Result<Vec<Document>> {
    let cursor = coll.aggregate(pipeline).await.map_err(mongo_error)?;
    cursor.try_collect().await.map_err(mongo_error)
}

/// Runs `op` `count` times one after another (after one unmeasured warm-up), or for the
/// run's duration when `count` is `None`.
async fn repeat<F, Fut>(ctx: &Ctx, count: Option<usize>, op: F) -> Result<Sample>
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<u64>> + Send,
{
    op().await?;
    let until = count.map_or(Until::Deadline(ctx.duration()), Until::Count);
    let op = Arc::new(op);
    Ok(drive(ctx.server.clients(1)?, until, move |_, _| {
        let op = op.clone();
        async move { op().await }
    })
    .await)
}

/// Case 1: the per-device average.
async fn group(
    ctx: &Ctx,
    db: &mongodb::Database,
    http_db: &str,
    readings: Readings,
    rows: &mut Vec<Row>,
) -> Result {
    let coll = db.collection::<Document>("readings");
    let devices = readings.devices as u64;
    let probe = ctx.probe();
    let sample = repeat(ctx, Some(REPEAT), move || {
        let coll = coll.clone();
        async move {
            let pipeline = vec![
                doc! {"$match": {"type": "reading"}},
                doc! {"$group": {"_id": "$deviceID", "avg": {"$avg": "$reading"}}},
            ];
            let groups: Vec<Document> = aggregate(&coll, pipeline).await?;
            expect(groups.len() as u64, devices, "$group")
        }
    })
    .await?;
    let case = format!("$match+$group avg per device, {} docs", readings.docs);
    rows.push(Row::measured("agg", &case, "ops/s", &sample, usage(probe)));

    let client = ctx.client()?;
    let design = json!({"views": {"by_device": {
        "map": "function(doc){ if (doc.type == 'reading') emit(doc.deviceID, doc.reading) }",
        "reduce": "_stats"}}});
    let view = format!("/{http_db}/_design/bench/_view/by_device?group=true");
    let began = Instant::now();
    ctx.send(&client, Method::PUT, &format!("/{http_db}/_design/bench"), Some(design.to_string()))
        .await?;
    ctx.send(&client, Method::GET, &format!("{view}&limit=1"), None).await?;
    let build = Sample::single(readings.docs as u64, began.elapsed());
    rows.push(Row::measured("agg", "reduce view first build (same data)", "docs/s", &build, None));
    let probe = ctx.probe();
    let server = ctx.server.clone();
    let sample = repeat(ctx, Some(REPEAT), move || {
        let (server, view) = (server.clone(), view.clone());
        async move {
            let client = server.client()?;
            let answer = http(&server, &client, Method::GET, &view, None).await?;
            let n = answer["rows"].as_array().map_or(0, Vec::len);
            expect(n as u64, devices, "group=true")
        }
    })
    .await?;
    let case = "reduce view _stats group=true (built), same data";
    rows.push(Row::measured("agg", case, "ops/s", &sample, usage(probe)));
    Ok(())
}

/// Case 2: `$lookup` into an indexed collection.
async fn lookup(
    ctx: &Ctx,
    db: &mongodb::Database,
    readings: Readings,
    rows: &mut Vec<Row>,
) -> Result {
    let (orders_n, devices_n) = (ctx.sizes.lookup, readings.devices);
    let orders = ctx.create_collection(Workload::Agg, "orders").await?;
    let devices = ctx.create_collection(Workload::Agg, "devices").await?;
    let order = move |i: usize| json!({"_id": format!("order-{i:06}"), "device": format!("device-{}", i * 7 % devices_n), "qty": i % 9});
    let device = |i: usize| json!({"_id": format!("dev-{i}"), "code": format!("device-{i}"), "site": i % 40});
    load(ctx, &orders, orders_n, order).await?;
    load(ctx, &devices, devices_n, device).await?;
    db.run_command(
        doc! {"createIndexes": "devices", "indexes": [{"key": {"code": 1}, "name": "code_1"}]},
    )
    .await
    .map_err(mongo_error)?;

    let coll = db.collection::<Document>("orders");
    let probe = ctx.probe();
    let sample = repeat(ctx, Some(REPEAT), move || {
        let coll = coll.clone();
        async move {
            let pipeline = vec![doc! {"$lookup": {"from": "devices", "localField": "device",
            "foreignField": "code", "as": "dev"}}];
            let joined: Vec<Document> = aggregate(&coll, pipeline).await?;
            let matched =
                joined.iter().filter(|d| d.get_array("dev").is_ok_and(|a| a.len() == 1)).count();
            expect(matched as u64, orders_n as u64, "$lookup")
        }
    })
    .await?;
    let case = format!("$lookup {orders_n} docs into an indexed collection ({devices_n} docs)");
    rows.push(Row::measured("agg", &case, "ops/s", &sample, usage(probe)));

    let client = ctx.client()?;
    let design = json!({"views": {"by_code": {"map": "function(doc){ emit(doc.code) }"}}});
    ctx.send(&client, Method::PUT, &format!("/{devices}/_design/bench"), Some(design.to_string()))
        .await?;
    let probe = ctx.probe();
    let server = ctx.server.clone();
    let sample = repeat(ctx, Some(REPEAT), move || {
        let (server, orders, devices) = (server.clone(), orders.clone(), devices.clone());
        async move {
            let client = server.client()?;
            let all = format!("/{orders}/_all_docs?include_docs=true");
            let answer = http(&server, &client, Method::GET, &all, None).await?;
            let mut codes: Vec<Value> = answer["rows"]
                .as_array()
                .map(|rows| rows.iter().map(|r| r["doc"]["device"].clone()).collect())
                .unwrap_or_default();
            codes.sort_by_key(Value::to_string);
            codes.dedup();
            let view = format!("/{devices}/_design/bench/_view/by_code?include_docs=true");
            let body = json!({"keys": codes}).to_string();
            let found = http(&server, &client, Method::POST, &view, Some(body)).await?;
            expect(found["rows"].as_array().map_or(0, Vec::len) as u64, codes.len() as u64, "keys")
        }
    })
    .await?;
    let case = "_all_docs include_docs + view POST keys include_docs (same join)";
    rows.push(Row::measured("agg", case, "ops/s", &sample, usage(probe)));
    Ok(())
}

/// Case 3: the newest ten readings through an index on `ts`.
async fn sort_limit(
    ctx: &Ctx,
    db: &mongodb::Database,
    http_db: &str,
    rows: &mut Vec<Row>,
) -> Result {
    db.run_command(
        doc! {"createIndexes": "readings", "indexes": [{"key": {"ts": -1}, "name": "ts_-1"}]},
    )
    .await
    .map_err(mongo_error)?;
    let coll = db.collection::<Document>("readings");
    let probe = ctx.probe();
    let sample = repeat(ctx, None, move || {
        let coll = coll.clone();
        async move {
            let pipeline = vec![doc! {"$sort": {"ts": -1}}, doc! {"$limit": 10}];
            let top: Vec<Document> = aggregate(&coll, pipeline).await?;
            expect(top.len() as u64, 10, "$sort+$limit")
        }
    })
    .await?;
    rows.push(Row::measured(
        "agg",
        "$sort {ts:-1} + $limit 10, index {ts:-1}",
        "ops/s",
        &sample,
        usage(probe),
    ));

    let client = ctx.client()?;
    let index = json!({"index": {"fields": [{"ts": "desc"}]}, "name": "ts-desc", "type": "json"});
    ctx.send(&client, Method::POST, &format!("/{http_db}/_index"), Some(index.to_string())).await?;
    let find = json!({"selector": {"ts": {"$gt": null}}, "sort": [{"ts": "desc"}], "limit": 10,
        "use_index": "ts-desc"})
    .to_string();
    let path = format!("/{http_db}/_find");
    let probe = ctx.probe();
    let sample = ctx
        .timed_requests(1, ctx.duration(), move |_| {
            (Method::POST, path.clone(), Some(find.clone()))
        })
        .await?;
    rows.push(Row::measured(
        "agg",
        "_find sort ts desc limit 10, Mango index (same data)",
        "ops/s",
        &sample,
        usage(probe),
    ));
    Ok(())
}

/// One request with an optional JSON body; the answer as JSON.
async fn http(
    server: &Server,
    client: &reqwest::Client,
    method: Method,
    path: &str,
    body: Option<String>,
) -> Result<Value> {
    let what = format!("{method} {}", path.split('?').next().unwrap_or_default());
    let mut request = server.request(client, method, path);
    if let Some(body) = body {
        request = request.header(reqwest::header::CONTENT_TYPE, "application/json").body(body);
    }
    server.json(client, request, &what).await
}

/// Loads `n` documents made by `doc` into `db`.
async fn load<F>(ctx: &Ctx, db: &str, n: usize, doc: F) -> Result
where
    F: Fn(usize) -> Value + Send + Sync + 'static,
{
    let sample = ctx
        .bulk_load(db, n, 4, move |_, range| {
            let docs: Vec<Value> = range.map(&doc).collect();
            Bytes::from(json!({"docs": docs}).to_string())
        })
        .await;
    match sample.first_error {
        Some(err) => Err(Error::Invalid(format!("loading {db}: {err}"))),
        None => Ok(()),
    }
}

/// `Ok(1)` (one operation) if `got` is `want`, else an error naming `what`.
fn expect(got: u64, want: u64, what: &str) -> Result<u64> {
    if got == want {
        Ok(1)
    } else {
        Err(Error::Invalid(format!("{what}: {got} results, expected {want}")))
    }
}
