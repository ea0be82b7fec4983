//! `mongo`: the IoT readings of `load`, `read` and `find` through the MongoDB wire
//! protocol, with MongoDB's Rust driver, so that one run shows both protocols side by side
//! (`--workloads load,read,find,mongo --mongo-url mongodb://admin:…@127.0.0.1:27017/`):
//!
//! 1. `insert_many` of [`crate::cli::Sizes::load`] readings in batches of
//!    [`crate::cli::Sizes::batch`] (ordered, as drivers send them), 1 client: `load`'s
//!    "plain, 1 client". The documents are made (as BSON) before the clock starts.
//! 2. After a preload of [`crate::cli::Sizes::read`] readings, 32 connections
//!    `find_one({_id})` random existing documents: `read`'s "point GET, 32 connections".
//! 3. After a preload of [`crate::cli::Sizes::find`] readings and `createIndexes` on
//!    `{deviceID: 1, ts: 1}` (which answers once the index is built), 16 connections find a
//!    random device's readings in a `ts` window of half of them, limit 25: `find`'s case.
//! 4. After a preload of [`crate::cli::Sizes::elemmatch`] students and `createIndexes` on
//!    `{"links.target": 1, "links.doc_type": 1}` (the single-collection pattern's index),
//!    16 connections find the students of a random class with the same
//!    `{links: {$elemMatch: {target, doc_type: "class"}}}`, limit 25: `elemmatch`'s case.
//!
//! Each case is preceded by its HTTP twin, the same work over the CouchDB API into a fresh
//! database (`_bulk_docs` 1 client, point `GET`, `_find` after `_index`: the `load`,
//! `read`, `find` and `elemmatch` cases, their rows named `HTTP twin: …`), and every case
//! runs on a fresh database or collection that is dropped, and the server let go idle,
//! before the next starts. The two protocols are so compared like for like within this
//! workload, whatever earlier workloads left the store doing (run last, after `load` and
//! `read` filled and emptied it, MongoDB's inserts looked dearer than HTTP's on a fresh
//! server: session 28).
//!
//! Collections live in the database `bench` and are dropped after their case.

use std::sync::Arc;
use std::time::Instant;

use bson::{Document, RawDocumentBuf, doc};
use bytes::Bytes;
use mongodb::options::{ClientOptions, Credential, ServerAddress};
use mongodb::{Client, Collection, IndexModel};

use super::find::{Plan, index_then_query};
use super::{Ctx, Feature, usage};
use crate::cli::Workload;
use crate::data::{INTERVAL, Readings, Students, T0};
use crate::error::{Error, Result};
use crate::measure::{Sample, Until, drive};
use crate::report::Row;

/// The MongoDB database the workload's collections live in.
const DB: &str = "bench";

pub async fn run(ctx: &Ctx, rows: &mut Vec<Row>) -> Result {
    let client = connect(ctx).await?;
    let mut made = Vec::new();
    let result = cases(ctx, &client, rows, &mut made).await;
    for coll in made {
        let _ = coll.drop().await;
    }
    result
}

/// A driver client for `--mongo-url` (loopback only; `--user`/`--password` log in when the
/// URL names no user), 64 connections at most; the workload is skipped (unsupported) when
/// nothing answers `ping` there.
pub(super) async fn connect(ctx: &Ctx) -> Result<Client> {
    let url = &ctx.opts.mongo_url;
    let unsupported =
        |e: mongodb::error::Error| Error::Unsupported(format!("no MongoDB protocol at {url}: {e}"));
    let mut options = ClientOptions::parse(url).await.map_err(invalid)?;
    let loopback = |host: &str| ["127.0.0.1", "localhost", "::1", "[::1]"].contains(&host);
    if !options.hosts.iter().all(|h| matches!(h, ServerAddress::Tcp { host, .. } if loopback(host)))
    {
        return Err(Error::Invalid(format!("--mongo-url must name a loopback address: {url}")));
    }
    if options.credential.is_none() {
        let login = Credential::builder()
            .username(ctx.opts.user.clone())
            .password(ctx.opts.password.clone())
            .source("admin".to_string())
            .build();
        options.credential = Some(login);
    }
    options.max_pool_size = Some(64);
    options.server_selection_timeout = Some(std::time::Duration::from_secs(3));
    let client = Client::with_options(options).map_err(invalid)?;
    client.database("admin").run_command(doc! {"ping": 1}).await.map_err(unsupported)?;
    Ok(client)
}

async fn cases(
    ctx: &Ctx,
    client: &Client,
    rows: &mut Vec<Row>,
    made: &mut Vec<Collection<Document>>,
) -> Result {
    // Start on an idle server: the workloads before this one dropped their databases.
    super::note_busy(rows, ctx.settle().await);
    let mut collection = |case: &str| {
        let coll = client.database(DB).collection::<Document>(&format!("{case}-{}", made.len()));
        made.push(coll.clone());
        coll
    };
    let (docs, batch) = (ctx.sizes.load, ctx.sizes.batch);
    let readings = Readings::new(docs);
    let bodies = super::load::bodies(readings, batch);
    let db = ctx.create_db(Workload::Mongo, false).await?;
    let probe = ctx.probe();
    let sample = ctx.bulk_load(&db, docs, 1, move |n, _| bodies[n].clone()).await;
    rows.push(Row::measured(
        "mongo",
        &twin("_bulk_docs, 1 client"),
        "docs/s",
        &sample,
        usage(probe),
    ));
    super::note_busy(rows, ctx.drop_dbs().await);
    let load = collection("load");
    let probe = ctx.probe();
    let sample = insert(client, &load, readings, batch, 1).await;
    rows.push(Row::measured("mongo", "insert_many, 1 client", "docs/s", &sample, usage(probe)));
    dropped(ctx, rows, &load).await;

    let readings = Readings::new(ctx.sizes.read);
    let db = ctx.create_db(Workload::Mongo, false).await?;
    let preloaded = ctx.preload(&db, readings).await?;
    let probe = ctx.probe();
    let sample = super::read::point_gets(&ctx.server, &db, readings, ctx.duration()).await?;
    let row = Row::measured("mongo", &twin(super::read::CASE), "req/s", &sample, usage(probe));
    rows.push(row.note(&preloaded));
    super::note_busy(rows, ctx.drop_dbs().await);
    let read = collection("read");
    let preloaded = preload(client, &read, readings, batch).await?;
    let probe = ctx.probe();
    let connections = super::read::CONNECTIONS;
    let sample = timed(client, &read, connections, ctx, move |c, r| by_id(c, readings, r)).await;
    let case = "find_one({_id}), 32 connections";
    rows.push(Row::measured("mongo", case, "req/s", &sample, usage(probe)).note(&preloaded));
    dropped(ctx, rows, &read).await;

    let readings = Readings::new(ctx.sizes.find);
    let case = "deviceID + ts range, limit 25, 16 connections";
    if ctx.require(Feature::Find).await.is_ok() {
        let db = ctx.create_db(Workload::Mongo, false).await?;
        let preloaded = ctx.preload(&db, readings).await?;
        let index = r#"{"index":{"fields":["deviceID","ts"]},"name":"by-device-ts","type":"json"}"#;
        let plan = Plan { workload: "mongo", db: &db, docs: readings.docs, index, case, preloaded };
        http_twin(ctx, rows, plan, move |r| super::find::selector(&readings, r)).await?;
    }
    let find = collection("find");
    let preloaded = preload(client, &find, readings, batch).await?;
    let began = Instant::now();
    let index = IndexModel::builder().keys(doc! {"deviceID": 1, "ts": 1}).build();
    find.create_index(index).await.map_err(invalid)?;
    let note = format!("{preloaded}; createIndexes took {:.0} ms", ms(began));
    let probe = ctx.probe();
    let connections = super::find::CONNECTIONS;
    let sample = timed(client, &find, connections, ctx, move |c, r| by_range(c, readings, r)).await;
    rows.push(Row::measured("mongo", case, "req/s", &sample, usage(probe)).note(&note));
    dropped(ctx, rows, &find).await;

    let students = Students::new(ctx.sizes.elemmatch);
    let case = "$elemMatch on links, limit 25, 16 connections";
    if ctx.require(Feature::Find).await.is_ok() {
        let db = ctx.create_db(Workload::Mongo, false).await?;
        let began = Instant::now();
        let sample = ctx
            .bulk_load(&db, students.docs, 4, move |_, range| Bytes::from(students.bulk(range)))
            .await;
        let preloaded = super::preload_note(&sample, began)?;
        let index = r#"{"index":{"fields":["links.target","links.doc_type"]},"name":"by-link","type":"json"}"#;
        let plan = Plan { workload: "mongo", db: &db, docs: students.docs, index, case, preloaded };
        http_twin(ctx, rows, plan, move |r| super::elemmatch::selector(students, r)).await?;
    }
    let links = collection("links");
    let preloaded = preload_students(client, &links, students, batch).await?;
    let began = Instant::now();
    let index = IndexModel::builder().keys(doc! {"links.target": 1, "links.doc_type": 1}).build();
    links.create_index(index).await.map_err(invalid)?;
    let note = format!("{preloaded}; createIndexes took {:.0} ms", ms(began));
    let probe = ctx.probe();
    let sample = timed(client, &links, connections, ctx, move |c, r| by_link(c, students, r)).await;
    rows.push(Row::measured("mongo", case, "req/s", &sample, usage(probe)).note(&note));
    dropped(ctx, rows, &links).await;
    Ok(())
}

/// The name of an HTTP twin's row: the same work over the CouchDB API.
fn twin(case: &str) -> String {
    format!("{HTTP_TWIN}{case}")
}

/// What an HTTP twin's case name starts with.
const HTTP_TWIN: &str = "HTTP twin: ";

/// The `find` or `elemmatch` case over HTTP ([`index_then_query`]), its rows named as twins.
async fn http_twin<Q>(ctx: &Ctx, rows: &mut Vec<Row>, plan: Plan<'_>, query: Q) -> Result
where
    Q: Fn(u64) -> String + Send + Sync + 'static,
{
    let from = rows.len();
    let result = index_then_query(ctx, rows, plan, query).await;
    for row in rows.iter_mut().skip(from) {
        row.case = twin(&row.case);
    }
    super::note_busy(rows, ctx.drop_dbs().await);
    result
}

/// Drops a case's collection and waits for the server to go idle, so that the next case
/// starts as fresh as its twin did.
async fn dropped(ctx: &Ctx, rows: &mut [Row], coll: &Collection<Document>) {
    let _ = coll.drop().await;
    super::note_busy(rows, ctx.settle().await);
}

/// `clients` clients inserting `readings` with `insert_many` in batches of `size`. The
/// documents are encoded as BSON before the clock starts and lent to the driver, as `load`
/// sends `_bulk_docs` bodies made before it starts: neither client encodes while timed.
async fn insert(
    client: &Client,
    coll: &Collection<Document>,
    readings: Readings,
    size: usize,
    clients: usize,
) -> Sample {
    let batches: Vec<Vec<RawDocumentBuf>> = match (0..readings.docs.div_ceil(size))
        .map(|n| {
            (n * size..((n + 1) * size).min(readings.docs))
                .map(|i| raw_reading(&readings, i))
                .collect()
        })
        .collect::<Result<_>>()
    {
        Ok(batches) => batches,
        Err(err) => return Sample::failed(err.to_string()),
    };
    let (batches, count) = (Arc::new(batches), readings.docs.div_ceil(size));
    let coll = coll.clone_with_type::<RawDocumentBuf>();
    drive(vec![client.clone(); clients], Until::Count(count), move |_, n| {
        let (coll, batches) = (coll.clone(), batches.clone());
        async move {
            let batch = batches.get(n as usize).map_or(&[][..], Vec::as_slice);
            let written = coll.insert_many(batch).await.map_err(invalid)?;
            Ok(written.inserted_ids.len() as u64)
        }
    })
    .await
}

/// Loads `readings` with 4 clients; says how long it took.
async fn preload(
    client: &Client,
    coll: &Collection<Document>,
    readings: Readings,
    size: usize,
) -> Result<String> {
    let began = Instant::now();
    let sample = insert(client, coll, readings, size, 4).await;
    if let Some(error) = sample.first_error {
        return Err(Error::Invalid(format!("preloading failed: {error}")));
    }
    Ok(format!("{} docs preloaded in {:.1} s", readings.docs, began.elapsed().as_secs_f64()))
}

/// Loads `students` with `insert_many` from 4 clients; says how long it took.
async fn preload_students(
    client: &Client,
    coll: &Collection<Document>,
    students: Students,
    size: usize,
) -> Result<String> {
    let began = Instant::now();
    let batches = students.docs.div_ceil(size);
    let coll = coll.clone();
    let sample = drive(vec![client.clone(); 4], Until::Count(batches), move |_, n| {
        let coll = coll.clone();
        async move {
            let range = n as usize * size..((n as usize + 1) * size).min(students.docs);
            let docs = range.map(|i| to_bson(&students.doc(i))).collect::<Result<Vec<_>>>()?;
            Ok(coll.insert_many(docs).await.map_err(invalid)?.inserted_ids.len() as u64)
        }
    })
    .await;
    if let Some(error) = sample.first_error {
        return Err(Error::Invalid(format!("preloading failed: {error}")));
    }
    Ok(format!("{} docs preloaded in {:.1} s", students.docs, began.elapsed().as_secs_f64()))
}

/// One `find` of the students of a random class, limit 25.
async fn by_link(coll: Collection<Document>, students: Students, r: u64) -> Result<u64> {
    let class = students.class(r as usize % students.classes);
    let filter = doc! {"links": {"$elemMatch": {"target": class, "doc_type": "class"}}};
    let mut cursor = coll.find(filter).limit(25).await.map_err(invalid)?;
    while cursor.advance().await.map_err(invalid)? {}
    Ok(1)
}

/// One `find_one` of a random reading by `_id`.
async fn by_id(coll: Collection<Document>, readings: Readings, r: u64) -> Result<u64> {
    let id = readings.id(r as usize % readings.docs);
    match coll.find_one(doc! {"_id": &id}).await.map_err(invalid)? {
        Some(_) => Ok(1),
        None => Err(Error::Invalid(format!("no document {id}"))),
    }
}

/// One `find` of a random device's readings in a window of half of them, limit 25.
async fn by_range(coll: Collection<Document>, readings: Readings, r: u64) -> Result<u64> {
    let device = r as usize % readings.devices;
    let per_device = readings.per_device() as u64;
    let from = T0 + ((r >> 24) % per_device) * INTERVAL;
    let to = from + (per_device / 2).max(1) * INTERVAL;
    let filter = doc! {"deviceID": format!("device-{device}"),
    "ts": {"$gte": from as i64, "$lt": to as i64}};
    let mut cursor = coll.find(filter).limit(25).await.map_err(invalid)?;
    while cursor.advance().await.map_err(invalid)? {}
    Ok(1)
}

/// `connections` clients running `op(collection, random number)` for the run's duration.
async fn timed<F, Fut>(
    client: &Client,
    coll: &Collection<Document>,
    connections: usize,
    ctx: &Ctx,
    op: F,
) -> Sample
where
    F: Fn(Collection<Document>, u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<u64>> + Send + 'static,
{
    let coll = coll.clone();
    let clients = vec![client.clone(); connections];
    drive(clients, Until::Deadline(ctx.duration()), move |_, r| op(coll.clone(), r)).await
}

/// Reading `i` as a BSON document (`_id` first), from the same JSON `load` sends.
fn reading(readings: &Readings, i: usize) -> Result<Document> {
    to_bson(&readings.doc(i))
}

/// [`reading`] as BSON bytes.
fn raw_reading(readings: &Readings, i: usize) -> Result<RawDocumentBuf> {
    RawDocumentBuf::try_from(&reading(readings, i)?).map_err(|e| Error::Invalid(e.to_string()))
}

/// A JSON document as BSON (key order kept).
fn to_bson(json: &str) -> Result<Document> {
    let json: serde_json::Value =
        serde_json::from_str(json).map_err(|e| Error::Invalid(e.to_string()))?;
    bson::serialize_to_document(&json).map_err(|e| Error::Invalid(e.to_string()))
}

fn invalid(err: mongodb::error::Error) -> Error {
    Error::Invalid(format!("mongodb: {err}"))
}

fn ms(began: Instant) -> f64 {
    began.elapsed().as_secs_f64() * 1000.0
}
