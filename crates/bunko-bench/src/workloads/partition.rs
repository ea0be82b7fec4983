//! `partition-scaling`: partition queries against the same queries made globally, in
//! partitioned databases of [`crate::cli::Sizes::partition`] readings (10k, 100k and 1M at
//! full scale, or `--partition-sizes`), in partitions of [`PER_PARTITION`] documents at
//! every size (100 partitions at 10k, 10,000 at 1M): every case returns the same 25 rows
//! at every size, so the sizes compare like for like. Per size, each case runs 16
//! connections for half the run's duration, on random partitions:
//!
//! | case | request |
//! |---|---|
//! | partition `_all_docs` | `GET /{db}/_partition/{p}/_all_docs?limit=25` |
//! | global `_all_docs` | `GET /{db}/_all_docs?startkey="{p}:"&endkey="{p}:\ufff0"&limit=25` |
//! | global `_all_docs`, skip | `GET /{db}/_all_docs?startkey="{p}:"&skip=1000&limit=25` |
//! | partition `_find` | `POST /{db}/_partition/{p}/_find`, `deviceID` + `ts`, partitioned index |
//! | global `_find` | `POST /{db}/_find`, the same selector, global index (`partitioned: false`) |
//! | partition `_find`, no index | `reading > 99.5` (0.5% match): reads the whole partition |
//!
//! A partition query reads one contiguous key range, so its cost should follow the
//! partition's size, not the database's. The global form of the unindexed query would
//! scan the whole database and is left out. Cases whose feature is missing are skipped
//! one by one; the workload is skipped whole if neither `_partition` feature exists.

use std::sync::Arc;

use reqwest::Method;

use super::{Ctx, Feature, find, usage};
use crate::cli::Workload;
use crate::data::{Readings, T0};
use crate::error::{Error, Result};
use crate::report::Row;

/// Documents per partition, at every database size (more than the 25 rows a case asks).
pub const PER_PARTITION: usize = 100;

/// A request maker: random number in, (method, path, body) out.
type Request = Arc<dyn Fn(u64) -> (Method, String, Option<String>) + Send + Sync>;

pub async fn run(ctx: &Ctx, rows: &mut Vec<Row>) -> Result {
    let partition = ctx.require(Feature::Partition).await;
    let partition_find = ctx.require(Feature::PartitionFind).await;
    let find_ok = ctx.require(Feature::Find).await;
    if let (Err(Error::Unsupported(a)), Err(Error::Unsupported(b))) = (&partition, &partition_find)
    {
        return Err(Error::Unsupported(format!("no _partition queries: {a}; {b}")));
    }
    for &size in &ctx.sizes.partition {
        let db = ctx.create_db(Workload::PartitionScaling, true).await?;
        let readings = Readings::partitioned(size, PER_PARTITION);
        let mut preloaded = Some(ctx.preload(&db, readings).await?);
        if find_ok.is_ok() {
            create_indexes(ctx, &db, readings, partition_find.is_ok())
                .await
                .map_err(Error::into_unsupported)?;
        }
        let cases: [(&str, &Result, Request); 6] = [
            ("partition _all_docs, limit 25", &partition, part_all_docs(&db, readings)),
            ("global _all_docs on the same range, limit 25", &Ok(()), all_docs(&db, readings)),
            ("global _all_docs, skip 1000, limit 25", &Ok(()), all_docs_skip(&db, readings)),
            ("partition _find deviceID + ts, limit 25", &partition_find, part_find(&db, readings)),
            ("global _find deviceID + ts, limit 25", &find_ok, global_find(&db, readings)),
            ("partition _find on an unindexed field", &partition_find, unindexed(&db, readings)),
        ];
        for (name, needs, request) in cases {
            let case = format!("{size} docs: {name}");
            if let Err(err) = needs {
                rows.push(Row::skipped("partition-scaling", &case, &err.to_string()));
                continue;
            }
            // One untimed request first: servers that build indexes on first use do it now.
            let client = ctx.client()?;
            let (method, path, body) = request(0);
            match ctx.send(&client, method, &path, body).await {
                Ok(_) => {}
                Err(err) if err.means_unsupported() => {
                    rows.push(Row::skipped("partition-scaling", &case, &err.to_string()));
                    continue;
                }
                Err(err) => return Err(err),
            }
            let probe = ctx.probe();
            let duration = ctx.duration() / 2;
            let request = request.clone();
            let sample =
                ctx.timed_requests(find::CONNECTIONS, duration, move |r| request(r)).await?;
            let mut row = Row::measured("partition-scaling", &case, "req/s", &sample, usage(probe));
            if let Some(preloaded) = preloaded.take() {
                row = row.note(&preloaded);
            }
            rows.push(row);
        }
        super::note_busy(rows, ctx.drop_dbs().await);
    }
    Ok(())
}

/// A partitioned and a global index on `deviceID, ts`.
/// Then waits until both answer queries ([`find::wait_for_index`]).
async fn create_indexes(ctx: &Ctx, db: &str, readings: Readings, partitioned: bool) -> Result {
    let client = ctx.client()?;
    let path = format!("/{db}/_index");
    let global = r#"{"index":{"fields":["deviceID","ts"]},"name":"global","partitioned":false}"#;
    ctx.send(&client, Method::POST, &path, Some(global.into())).await?;
    let mut queries = vec![global_find(db, readings)];
    if partitioned {
        let part = r#"{"index":{"fields":["deviceID","ts"]},"name":"part","partitioned":true}"#;
        ctx.send(&client, Method::POST, &path, Some(part.into())).await?;
        queries.push(part_find(db, readings));
    }
    for query in queries {
        let (method, path, body) = query(0);
        let body = body.unwrap_or_default();
        let answer = ctx.send(&client, method, &path, Some(body.clone())).await?;
        if find::no_index_warning(&answer) {
            find::wait_for_index(ctx, &client, &path, &body).await?;
        }
    }
    Ok(())
}

fn part_all_docs(db: &str, readings: Readings) -> Request {
    let db = db.to_string();
    Arc::new(move |r| {
        let p = Readings::partition(r as usize % readings.partitions);
        (Method::GET, format!("/{db}/_partition/{p}/_all_docs?limit=25"), None)
    })
}

fn all_docs(db: &str, readings: Readings) -> Request {
    let db = db.to_string();
    Arc::new(move |r| {
        let p = Readings::partition(r as usize % readings.partitions);
        let start = encode(&format!("\"{p}:\""));
        let end = encode(&format!("\"{p}:\u{fff0}\""));
        (Method::GET, format!("/{db}/_all_docs?startkey={start}&endkey={end}&limit=25"), None)
    })
}

/// A page 1,000 documents past a random partition's start: `offset` and `skip` both deep.
fn all_docs_skip(db: &str, readings: Readings) -> Request {
    let db = db.to_string();
    Arc::new(move |r| {
        let p = Readings::partition(r as usize % readings.partitions);
        let start = encode(&format!("\"{p}:\""));
        (Method::GET, format!("/{db}/_all_docs?startkey={start}&skip=1000&limit=25"), None)
    })
}

/// The selector of both `_find` cases: one device's readings (all of them match `ts`,
/// `limit` 25), and the device's partition.
pub(super) fn device_selector(readings: &Readings, r: u64) -> (String, String) {
    let device = r as usize % readings.devices;
    let partition = Readings::partition(readings.infra(device));
    let body = format!(
        r#"{{"selector":{{"deviceID":"device-{device}","ts":{{"$gte":{T0}}}}},"limit":25}}"#
    );
    (partition, body)
}

fn part_find(db: &str, readings: Readings) -> Request {
    let db = db.to_string();
    Arc::new(move |r| {
        let (p, body) = device_selector(&readings, r);
        (Method::POST, format!("/{db}/_partition/{p}/_find"), Some(body))
    })
}

fn global_find(db: &str, readings: Readings) -> Request {
    let db = db.to_string();
    Arc::new(move |r| {
        let (_, body) = device_selector(&readings, r);
        (Method::POST, format!("/{db}/_find"), Some(body))
    })
}

fn unindexed(db: &str, readings: Readings) -> Request {
    let db = db.to_string();
    Arc::new(move |r| {
        let p = Readings::partition(r as usize % readings.partitions);
        let body = r#"{"selector":{"reading":{"$gt":99.5}},"limit":25}"#.to_string();
        (Method::POST, format!("/{db}/_partition/{p}/_find"), Some(body))
    })
}

/// Percent-encodes a query-string value (JSON keys have quotes and non-ASCII).
fn encode(value: &str) -> String {
    let mut out = String::new();
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || b"-_.~".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn global_all_docs_covers_one_partition() {
        let (method, path, body) = all_docs("db", Readings::partitioned(10_000, PER_PARTITION))(3);
        assert_eq!(method, Method::GET);
        assert_eq!(
            path,
            "/db/_all_docs?startkey=%22bridge-3%3A%22&endkey=%22bridge-3%3A%EF%BF%B0%22&limit=25"
        );
        assert!(body.is_none());
    }

    #[test]
    fn find_cases_ask_the_partition_of_the_device() {
        let readings = Readings::partitioned(10_000, PER_PARTITION);
        let (_, path, body) = part_find("db", readings)(1234);
        assert_eq!(path, "/db/_partition/bridge-34/_find");
        assert!(body.unwrap().contains(r#""deviceID":"device-34""#));
    }

    /// Every size returns the same number of rows: every partition holds `PER_PARTITION`
    /// documents (more than `limit` 25), at 10k as at 1M (issue 20: 10 rows at 10k before).
    #[test]
    fn partitions_hold_the_same_documents_at_every_size() {
        for size in [10_000, 100_000, 1_000_000] {
            let readings = Readings::partitioned(size, PER_PARTITION);
            let mut per_partition = vec![0; readings.partitions];
            for i in 0..size {
                per_partition[readings.infra(readings.device(i))] += 1;
            }
            assert!(per_partition.iter().all(|&n| n == PER_PARTITION), "{size}");
            assert!(readings.per_device() >= 25, "{size}: a device has 25 readings to find");
        }
    }
}
