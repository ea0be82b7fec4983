//! `changes`: pages of the changes feed, as a client that follows or replicates a database
//! reads it (PouchDB's replicator asks `_changes?since=…&limit=…` page after page).
//! [`crate::cli::Sizes::read`] readings are preloaded (100k at full scale), then 16
//! connections each ask for a page of 25 changes after a random seq of the preload, for half
//! the run's duration per case:
//!
//! | case | request |
//! |---|---|
//! | page of 25 | `GET /{db}/_changes?since={seq}&limit=25` |
//! | page of 25 with documents | `GET /{db}/_changes?since={seq}&limit=25&include_docs=true` |
//!
//! Each answer also says how many changes follow the page (`pending`), which a server must
//! count without reading them for the cost of a page not to grow with the database.
//! Throughput is requests per second. The seqs asked are the server's own (opaque strings
//! in CouchDB 2+ and Bunko): every [`STRIDE`]th seq of the whole feed, read once before
//! the clock starts.

use std::sync::Arc;

use reqwest::Method;
use serde_json::Value;

use super::{Ctx, usage};
use crate::cli::Workload;
use crate::data::Readings;
use crate::error::{Error, Result};
use crate::measure::{Until, drive};
use crate::report::Row;

const CONNECTIONS: usize = 16;

/// Changes per page.
const PAGE: usize = 25;

/// One seq of this many in the feed is asked for.
const STRIDE: usize = 100;

pub async fn run(ctx: &Ctx, rows: &mut Vec<Row>) -> Result {
    let db = ctx.create_db(Workload::Changes, false).await?;
    let readings = Readings::new(ctx.sizes.read);
    let preloaded = ctx.preload(&db, readings).await?;
    let feed = ctx.send(&ctx.client()?, Method::GET, &format!("/{db}/_changes"), None).await?;
    let seqs: Vec<String> = feed["results"]
        .as_array()
        .into_iter()
        .flatten()
        .step_by(STRIDE)
        .filter_map(|row| match &row["seq"] {
            Value::String(seq) => Some(seq.clone()),
            Value::Number(seq) => Some(seq.to_string()),
            _ => None,
        })
        .collect();
    if seqs.is_empty() {
        return Err(Error::Invalid("the preloaded database's _changes lists no seq".into()));
    }
    let seqs = Arc::new(seqs);
    let cases = [("page of 25", ""), ("page of 25 with documents", "&include_docs=true")];
    for (case, extra) in cases {
        let probe = ctx.probe();
        let clients = ctx.server.clients(CONNECTIONS)?;
        let (server, db, seqs) = (ctx.server.clone(), Arc::new(db.clone()), seqs.clone());
        let sample = drive(clients, Until::Deadline(ctx.duration() / 2), move |client, r| {
            let (server, db, seqs) = (server.clone(), db.clone(), seqs.clone());
            async move {
                let since = &seqs[r as usize % seqs.len()];
                let path = format!("/{db}/_changes?since={since}&limit={PAGE}{extra}");
                let request = server.request(&client, Method::GET, &path);
                server.send(&client, request, "GET /{db}/_changes").await?;
                Ok(1)
            }
        })
        .await;
        rows.push(Row::measured("changes", case, "req/s", &sample, usage(probe)).note(&preloaded));
    }
    Ok(())
}
