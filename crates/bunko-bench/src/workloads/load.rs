//! `load`: bulk loading. [`crate::cli::Sizes::load`] readings (200k at full scale) through
//! `POST /{db}/_bulk_docs` in batches of [`crate::cli::Sizes::batch`] (1000), from 1 and
//! from 4 clients, into a plain and into a partitioned database (1000 partitions). The
//! request bodies are made before the clock starts, so the figure is the server's.
//! Throughput is documents per second; latency is per `_bulk_docs` request. After the
//! plain 1-client case, two more rows give that database's size on disk ([`Disk`]).

use std::sync::Arc;

use bytes::Bytes;

use super::disk::Disk;
use super::{Ctx, clients_case, usage};
use crate::cli::Workload;
use crate::data::Readings;
use crate::error::Result;
use crate::report::Row;

pub async fn run(ctx: &Ctx, rows: &mut Vec<Row>) -> Result {
    let (docs, size) = (ctx.sizes.load, ctx.sizes.batch);
    let readings = Readings::new(docs);
    let batches = bodies(readings, size);
    for partitioned in [false, true] {
        for clients in [1, 4] {
            let disk =
                if !partitioned && clients == 1 { Some(Disk::start(ctx).await?) } else { None };
            let db = ctx.create_db(Workload::Load, partitioned).await?;
            let batches = batches.clone();
            let probe = ctx.probe();
            let sample = ctx.bulk_load(&db, docs, clients, move |n, _| batches[n].clone()).await;
            let kind = if partitioned { "partitioned" } else { "plain" };
            let case = format!("{kind}, {}", clients_case(clients, "client"));
            let mut row = Row::measured("load", &case, "docs/s", &sample, usage(probe));
            if partitioned {
                row = row.note(&format!("{} partitions", readings.partitions));
            }
            rows.push(row);
            if let Some(disk) = disk {
                rows.extend(disk.rows(ctx, &db, kind, docs).await);
            }
            super::note_busy(rows, ctx.drop_dbs().await);
        }
    }
    Ok(())
}

/// The `_bulk_docs` bodies of `readings`, `size` documents each, made before any clock starts.
pub fn bodies(readings: Readings, size: usize) -> Arc<Vec<Bytes>> {
    let docs = readings.docs;
    Arc::new(
        (0..docs.div_ceil(size))
            .map(|n| Bytes::from(readings.bulk(n * size..((n + 1) * size).min(docs))))
            .collect(),
    )
}
