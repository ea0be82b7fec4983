//! `limit`: the storage engine alone, in this process, as the ceiling that `load` and
//! `write` are quoted against. Like `crates/bunko-storage/examples/limit.rs`, but writing
//! what the engine writes for a new document, with the engine's own key and record
//! encodings (`bunko_engine::keys`, `bunko_engine::records`): per document its `Doc` key
//! (a format 3 record: the `DocInfo` with a one-revision tree as its head, then the body as
//! stored, without `_id`; the revision hash computed as the engine does), its `Seq` entry,
//! and per commit the
//! database's `Stats`. Each commit is `Store::apply` then `Store::sync` on a fresh
//! [`Fjall`] store in a temporary directory (`--temp-dir`, else the system's).
//!
//! | case | what |
//! |---|---|
//! | `1 writer, 1000 docs/commit` | one thread, the `load` documents in commits of 1000 |
//! | `4 writers, 1000 docs/commit` | the same from 4 threads sharing syncs |
//! | `64 writers, 1 doc/commit` | 64 threads committing one document each, for the duration |
//!
//! Bodies are made before the clock starts; keys, records and hashes are made inside it,
//! because the engine does that work too. CPU and peak RSS are this process's.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

use bunko_doc::RevId;
use bunko_engine::keys::Key;
use bunko_engine::records::{self, DocInfo, Stats};
use bunko_engine::revtree::RevTree;
use bunko_storage::{Batch, Fjall, Store};

use super::{Ctx, usage};
use crate::data::Readings;
use crate::error::Result;
use crate::measure::{Sample, Until, drive_threads};
use crate::proc::Probe;
use crate::report::Row;

/// The database id the keys carry.
const DB: u64 = 1;

/// Documents per commit in the bulk cases (as `load`'s batches at full scale).
const PER_COMMIT: usize = 1000;

pub async fn run(ctx: &Ctx, rows: &mut Vec<Row>) -> Result {
    let dir = match &ctx.opts.temp_dir {
        Some(parent) => tempfile::Builder::new().prefix("bunko-bench-").tempdir_in(parent)?,
        None => tempfile::Builder::new().prefix("bunko-bench-").tempdir()?,
    };
    let docs = ctx.sizes.limit;
    let duration = ctx.duration();
    let readings = Readings::new(docs);
    let path = dir.path().to_path_buf();
    let measured = tokio::task::spawn_blocking(move || -> Result<Vec<Row>> {
        let bodies: Vec<Vec<u8>> = (0..docs).map(|i| readings.body(i).into_bytes()).collect();
        let writer = Writer { readings, bodies, seq: AtomicU64::new(0) };
        let mut rows = Vec::new();
        for threads in [1, 4] {
            let store = Fjall::open(&path.join(format!("bulk-{threads}")))?;
            let probe = Probe::start(std::process::id());
            let commits = docs.div_ceil(PER_COMMIT);
            let sample = drive_threads(threads, Until::Count(commits), |_, n| {
                let n = n as usize;
                writer.commit(&store, n * PER_COMMIT..((n + 1) * PER_COMMIT).min(docs))
            });
            let case = format!("{threads} writer{}, 1000 docs/commit", plural(threads));
            rows.push(measured(&case, &sample, probe, &store));
            store.close()?;
        }
        let store = Fjall::open(&path.join("single"))?;
        let next = AtomicU64::new(0);
        let probe = Probe::start(std::process::id());
        let sample = drive_threads(64, Until::Deadline(duration), |_, _| {
            let i = next.fetch_add(1, Ordering::Relaxed) as usize % docs;
            writer.commit(&store, i..i + 1)
        });
        rows.push(measured("64 writers, 1 doc/commit", &sample, probe, &store));
        store.close()?;
        Ok(rows)
    })
    .await
    .map_err(|e| crate::Error::Invalid(format!("the limit workload panicked: {e}")))??;
    rows.extend(measured);
    drop(dir);
    Ok(())
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

fn measured(case: &str, sample: &Sample, probe: Option<Probe>, store: &Fjall) -> Row {
    Row::measured("limit", case, "docs/s", sample, usage(probe)).note(&format!(
        "in-process fjall, {} syncs for {} commits; CPU and RSS are bunko-bench's",
        store.syncs(),
        store.commits()
    ))
}

/// Writes documents as the engine would.
struct Writer {
    readings: Readings,
    bodies: Vec<Vec<u8>>,
    seq: AtomicU64,
}

impl Writer {
    /// Commits documents `range` (new ids each time: the seq makes them unique) in one
    /// batch; returns how many.
    fn commit(&self, store: &Fjall, range: Range<usize>) -> Result<u64> {
        let mut batch = Batch::new();
        let mut stats = Stats::default();
        let count = range.len() as u64;
        for i in range {
            let seq = self.seq.fetch_add(1, Ordering::Relaxed) + 1;
            let id = format!("{}-{seq}", self.readings.id(i));
            let body = &self.bodies[i];
            let rev = RevId::next(None, false, body);
            let mut tree = RevTree::default();
            tree.push(rev.clone(), None, false);
            let info = DocInfo { seq, tree, size: body.len() as u64 };
            // As the server writes a new document: its `Doc` record carries the body.
            let (record, head) = records::DocRecord::encode(&info, Some((&rev, body)));
            batch.put_with_head(Key::Doc(DB, &id).encode(), record, head);
            batch.put(Key::Seq(DB, seq).encode(), id.into_bytes());
            stats.apply(false, body.len() as u64, body.len() as u64, 1);
        }
        batch.put(Key::Stats(DB).encode(), records::encode(&stats));
        let ticket = store.apply(batch)?;
        store.sync(ticket)?;
        Ok(count)
    }
}
