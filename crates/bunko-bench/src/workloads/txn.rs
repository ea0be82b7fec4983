//! `txn`: two-document read-modify-write transfers between accounts, from 16 clients.
//! Each transfer GETs both accounts, then writes both new balances either as one
//! `POST /_transaction` (all or none, Bunko's extension) or as two `PUT`s one after the
//! other (the same writes without a transaction, on any server). A `409` is a conflict:
//! the transfer starts over with fresh reads and the conflict is counted.
//!
//! Cases: "uniform" picks two of 10,000 accounts at random; "skewed" picks from 10 hot
//! accounts 9 times in 10. The ratio of the two variants' rates is the cost of atomicity
//! (issue 15's target: a transaction costs at most 1.5× its two writes).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use reqwest::Method;
use serde_json::{Value, json};

use super::{Ctx, usage};
use crate::cli::Workload;
use crate::error::{Error, Result};
use crate::measure::{Until, drive};
use crate::report::Row;

const CLIENTS: usize = 16;
const ACCOUNTS: usize = 10_000;
const HOT: u64 = 10;
/// A transfer that keeps conflicting this many times is counted as an error.
const MAX_TRIES: usize = 50;

#[derive(Clone, Copy)]
enum Writes {
    Transaction,
    TwoPuts,
}

pub async fn run(ctx: &Ctx, rows: &mut Vec<Row>) -> Result {
    let db = ctx.create_db(Workload::Txn, false).await?;
    let body = |_, range: std::ops::Range<usize>| {
        let docs: Vec<Value> =
            range.map(|i| json!({"_id": account(i as u64), "balance": 1000})).collect();
        Bytes::from(json!({"docs": docs}).to_string())
    };
    let sample = ctx.bulk_load(&db, ACCOUNTS, 4, body).await;
    if let Some(error) = sample.first_error {
        return Err(Error::Invalid(format!("preloading accounts: {error}")));
    }
    for skewed in [false, true] {
        for writes in [Writes::TwoPuts, Writes::Transaction] {
            rows.push(case(ctx, &db, skewed, writes).await?);
        }
    }
    Ok(())
}

async fn case(ctx: &Ctx, db: &str, skewed: bool, writes: Writes) -> Result<Row> {
    let conflicts = Arc::new(AtomicU64::new(0));
    let clients = ctx.server.clients(CLIENTS)?;
    let probe = ctx.probe();
    let (server, db_name, seen) = (ctx.server.clone(), Arc::new(db.to_string()), conflicts.clone());
    let sample = drive(clients, Until::Deadline(ctx.duration()), move |client, n| {
        let (server, db, seen) = (server.clone(), db_name.clone(), seen.clone());
        async move {
            let (from, to) = pick(n, skewed);
            for _ in 0..MAX_TRIES {
                match transfer(&server, &client, &db, from, to, writes).await {
                    Ok(()) => return Ok(1),
                    Err(Error::Status { status, .. }) if status.as_u16() == 409 => {
                        seen.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(other) => return Err(other),
                }
            }
            Err(Error::Invalid(format!("transfer {from}->{to} conflicted {MAX_TRIES} times")))
        }
    })
    .await;
    let choice = if skewed { "skewed" } else { "uniform" };
    let how = match writes {
        Writes::Transaction => "POST /_transaction",
        Writes::TwoPuts => "2 PUTs, no transaction",
    };
    let case = format!("{choice}, {how}, {CLIENTS} clients");
    let row = Row::measured("txn", &case, "transfers/s", &sample, usage(probe));
    let tries = sample.items + conflicts.load(Ordering::Relaxed);
    let rate = 100.0 * conflicts.load(Ordering::Relaxed) as f64 / tries.max(1) as f64;
    Ok(row.note(&format!("conflict rate {rate:.1}% of attempts")))
}

/// Two different accounts for transfer `n`.
fn pick(n: u64, skewed: bool) -> (u64, u64) {
    let (a, b) = (mix(n), mix(n ^ 0x9e37_79b9_7f4a_7c15));
    let choose = |r: u64| {
        if skewed && !r.is_multiple_of(10) { (r >> 8) % HOT } else { (r >> 8) % ACCOUNTS as u64 }
    };
    let (from, mut to) = (choose(a), choose(b));
    if to == from {
        to = (from + 1) % ACCOUNTS as u64;
    }
    (from, to)
}

/// SplitMix64: a well-spread pseudo-random number from `x`.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn account(i: u64) -> String {
    format!("acct-{i:05}")
}

async fn transfer(
    server: &crate::client::Server,
    client: &reqwest::Client,
    db: &str,
    from: u64,
    to: u64,
    writes: Writes,
) -> Result {
    let get = |i: u64| {
        let request = server.request(client, Method::GET, &format!("/{db}/{}", account(i)));
        server.json(client, request, "GET /{db}/{id}")
    };
    let (mut a, mut b) = (get(from).await?, get(to).await?);
    let balance = |doc: &Value| doc["balance"].as_i64().unwrap_or(0);
    a["balance"] = json!(balance(&a) - 1);
    b["balance"] = json!(balance(&b) + 1);
    match writes {
        Writes::Transaction => {
            let body = json!({"docs": [{"db": db, "doc": a}, {"db": db, "doc": b}]});
            let request = server
                .request(client, Method::POST, "/_transaction")
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.to_string());
            server.send(client, request, "POST /_transaction").await?;
        }
        Writes::TwoPuts => {
            for (i, doc) in [(from, a), (to, b)] {
                let request = server
                    .request(client, Method::PUT, &format!("/{db}/{}", account(i)))
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .body(doc.to_string());
                server.send(client, request, "PUT /{db}/{id}").await?;
            }
        }
    }
    Ok(())
}
