//! Acknowledged means durable, across `kill -9`: a child process (this test binary, run
//! again with `BUNKO_CRASH_DIR` set) commits from several threads and prints each key once
//! its commit returns; the parent kills it mid-stream, reopens the store, and checks that
//! every acknowledged key is there.
//!
//! This is what proves that a sync flushes fjall's userspace journal buffer: batches are
//! written with `durability(None)`, and a clean drop would flush the buffer anyway, so
//! only a killed process shows whether acknowledged data really reached the file. It
//! cannot prove the fsync (the page cache survives a killed process; only a power cut
//! would tell); `journals_are_where_sync_expects_them` in `fjall_store.rs` guards that
//! the fsync finds the journal.

mod common;

use bunko_storage::{Batch, Fjall, Read, Store};
use common::TestResult;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;

const CHILD_ENV: &str = "BUNKO_CRASH_DIR";
const THREADS: usize = 8;
const ACKS_BEFORE_KILL: usize = 2_000;

#[test]
fn fjall_acknowledged_commits_survive_kill() -> TestResult {
    if let Some(dir) = std::env::var_os(CHILD_ENV) {
        return child(std::path::Path::new(&dir));
    }
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("db");
    let mut child = Command::new(std::env::current_exe()?)
        .args(["--exact", "fjall_acknowledged_commits_survive_kill", "--nocapture"])
        .env(CHILD_ENV, &path)
        .stdout(Stdio::piped())
        .spawn()?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let mut acked = Vec::new();
    for line in BufReader::new(stdout).lines() {
        if let Some(key) = line?.strip_prefix("ack ") {
            acked.push(key.to_owned());
            if acked.len() == ACKS_BEFORE_KILL {
                child.kill()?; // SIGKILL: no destructors, no buffer flushes
                break;
            }
        }
    }
    child.wait()?;
    assert_eq!(acked.len(), ACKS_BEFORE_KILL, "child stopped early");

    let store = Fjall::open(&path)?;
    for key in &acked {
        assert!(store.get(key.as_bytes())?.is_some(), "acknowledged {key} was lost");
    }
    Ok(())
}

/// Commits forever from several threads, printing each key after its commit returns.
fn child(path: &std::path::Path) -> TestResult {
    let store = Arc::new(Fjall::open(path)?);
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let store = store.clone();
            std::thread::spawn(move || -> TestResult {
                for i in 0.. {
                    let key = format!("t{t}/{i:08}");
                    let mut batch = Batch::new();
                    batch.put(key.clone(), vec![b'v'; 200]);
                    store.commit(batch)?;
                    let mut out = std::io::stdout().lock();
                    writeln!(out, "ack {key}")?;
                    out.flush()?;
                }
                Ok(())
            })
        })
        .collect();
    for thread in threads {
        thread.join().map_err(|_| "committer panicked")??;
    }
    Ok(())
}
