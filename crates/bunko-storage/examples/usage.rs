//! Where a data directory's bytes go: every key of a (stopped) Bunko store counted by its
//! tag byte (the key kinds of `docs/architecture/keys.md`), with key bytes, value bytes and
//! what the values take zstd-compressed one by one (as storage format 2 stores them), then
//! the files on disk by kind (tables, journals, other).
//!
//! `cargo run --release -p bunko-storage --example usage -- DATA_DIR`

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;

use bunko_storage::{Fjall, Read};

/// Keys read per scan.
const PAGE: usize = 10_000;

#[derive(Default)]
struct Tally {
    keys: u64,
    key_bytes: u64,
    value_bytes: u64,
    zstd_bytes: u64,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args().nth(1).ok_or("usage: usage DATA_DIR")?;
    let store = Fjall::open(Path::new(&dir))?;
    let mut tallies: BTreeMap<u8, Tally> = BTreeMap::new();
    let mut compressor = zstd::bulk::Compressor::new(1)?;
    let mut start = Bound::Unbounded;
    loop {
        let page = store.scan(&(start, Bound::Unbounded), false, PAGE)?;
        for (key, value) in &page {
            let tally = tallies.entry(key[0]).or_default();
            tally.keys += 1;
            tally.key_bytes += key.len() as u64;
            tally.value_bytes += value.len() as u64;
            let zstd = match value.len() >= 128 {
                true => compressor.compress(value)?.len().min(value.len()),
                false => value.len(),
            };
            tally.zstd_bytes += 1 + zstd as u64;
        }
        match page.last() {
            Some((key, _)) if page.len() == PAGE => start = Bound::Excluded(key.clone()),
            _ => break,
        }
    }
    println!("| tag | keys | key MB | value MB | value MB zstd | bytes/key (key + zstd value) |");
    println!("|---|---|---|---|---|---|");
    let mut total = Tally::default();
    for (tag, t) in &tallies {
        print_row(&format!("0x{tag:02X}"), t);
        total.keys += t.keys;
        total.key_bytes += t.key_bytes;
        total.value_bytes += t.value_bytes;
        total.zstd_bytes += t.zstd_bytes;
    }
    print_row("all", &total);
    drop(store);
    let mut files: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    files_by_kind(Path::new(&dir), &mut files)?;
    println!("\n| files | count | MB allocated |\n|---|---|---|");
    for (kind, (count, bytes)) in files {
        println!("| {kind} | {count} | {:.1} |", bytes as f64 / 1e6);
    }
    Ok(())
}

/// One row of the key table.
fn print_row(label: &str, t: &Tally) {
    let per = (t.key_bytes + t.zstd_bytes) as f64 / t.keys.max(1) as f64;
    println!(
        "| {label} | {} | {:.1} | {:.1} | {:.1} | {per:.0} |",
        t.keys,
        t.key_bytes as f64 / 1e6,
        t.value_bytes as f64 / 1e6,
        t.zstd_bytes as f64 / 1e6
    );
}

/// Adds up the files under `dir` by kind: journals (`*.jnl`), tables (under `tables/`),
/// other.
fn files_by_kind(dir: &Path, files: &mut BTreeMap<&str, (u64, u64)>) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let meta = entry.metadata()?;
        if meta.is_dir() {
            files_by_kind(&path, files)?;
            continue;
        }
        let kind = match path.to_string_lossy() {
            p if p.ends_with(".jnl") => "journal",
            p if p.contains("/tables/") => "table",
            _ => "other",
        };
        let slot = files.entry(kind).or_default();
        slot.0 += 1;
        slot.1 += meta.blocks() * 512;
    }
    Ok(())
}
