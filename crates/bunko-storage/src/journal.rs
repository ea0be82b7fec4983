//! Letting go of fjall's active journal after [`crate::Store::reclaim`].
//!
//! fjall 3 writes every batch to its active journal (`<dir>/<n>.jnl`) and seals it (starts
//! the next one) only at a memtable flush that finds it past ~64 MB (a constant of fjall's,
//! `worker_pool.rs`); a sealed journal is deleted once its data is in tables. Nothing seals
//! it sooner. So after `_compact` has moved everything into tables, the active journal
//! still holds up to 64 MB of data that tables already have: measured on the `load`
//! benchmark, 61 MB beside 138 MB of tables.
//!
//! [`filler`] lets `reclaim` push the active journal past that mark with writes that it
//! removes again (values of a key no one else writes, incompressible so that fjall's LZ4
//! of large journal values does not shrink them), so that its next flush seals the journal
//! and fjall deletes it. This costs writing up to 64 MB once per `reclaim`, next to the
//! rewrite of every table that the major compaction does anyway; a journal holding less
//! than [`WORTH_SEALING`] is left alone.

use std::path::Path;

/// Bytes past which fjall seals the active journal at the next flush (its `worker_pool.rs`).
const SEAL_AT: u64 = 64_000_000;

/// A journal smaller than this is not worth writing the filler for.
pub(crate) const WORTH_SEALING: u64 = 4 << 20;

/// Size of one filler value.
pub(crate) const CHUNK: usize = 1 << 20;

/// Bytes the active journal (the highest-numbered `*.jnl` in `dir`) holds: the space
/// allocated to it, as fjall sizes the file at 64 MiB up front without writing it. `None`
/// if there is no journal or the file system allocated the whole file.
pub(crate) fn active_journal_bytes(dir: &Path) -> std::io::Result<Option<u64>> {
    let mut newest: Option<(u64, u64)> = None;
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let Some(n) = path
            .extension()
            .filter(|ext| *ext == "jnl")
            .and_then(|_| path.file_stem()?.to_str()?.parse::<u64>().ok())
        else {
            continue;
        };
        if newest.is_none_or(|(m, _)| n > m) {
            let meta = match std::fs::metadata(&path) {
                Ok(meta) => meta,
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
                Err(err) => return Err(err),
            };
            newest = Some((n, allocated(&meta)));
        }
    }
    Ok(newest.map(|(_, bytes)| bytes).filter(|&bytes| bytes < SEAL_AT))
}

#[cfg(unix)]
fn allocated(meta: &std::fs::Metadata) -> u64 {
    use std::os::unix::fs::MetadataExt;
    meta.blocks() * 512
}

/// Without the allocated size, the file's length: fjall's 64 MiB, so never sealed.
#[cfg(not(unix))]
fn allocated(meta: &std::fs::Metadata) -> u64 {
    meta.len()
}

/// The filler values to write for a journal holding `bytes`: how many of [`CHUNK`] bytes.
pub(crate) fn chunks_to_seal(bytes: u64) -> usize {
    let missing = SEAL_AT.saturating_sub(bytes) + CHUNK as u64;
    missing.div_ceil(CHUNK as u64) as usize
}

/// One filler value: [`CHUNK`] pseudo-random bytes (a xorshift sequence).
pub(crate) fn filler() -> Vec<u8> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut out = Vec::with_capacity(CHUNK);
    while out.len() < CHUNK {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filler_takes_the_journal_just_past_the_mark() {
        for bytes in [0, WORTH_SEALING, 40_000_000, SEAL_AT - 1] {
            let written = bytes + (chunks_to_seal(bytes) * CHUNK) as u64;
            assert!(written > SEAL_AT, "{bytes}");
            assert!(written <= SEAL_AT + 2 * CHUNK as u64, "{bytes}");
        }
        assert_eq!(filler().len(), CHUNK);
    }
}
