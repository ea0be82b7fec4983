//! How much disk one database takes, measured after `load`'s plain 1-client case (200k
//! documents at full scale), once as loaded and once after compaction. Smaller is better.
//!
//! - Without `--data-dir` (CouchDB): `sizes.file` of `GET /{db}`, the length of the
//!   database's `.couch` file, after the load and again after `POST /{db}/_compact` has
//!   finished (`compact_running` false).
//! - With `--data-dir` (Bunko keeps every database in one store): how many bytes the files
//!   under that directory grew by since just before the database was created (journals
//!   included; space allocated, as `du` counts it), once the server is idle after the
//!   load, and again once it is idle after `POST /{db}/_compact`.
//!
//! Both rows note the documents' own JSON size (`sizes.external`) for scale.

use std::path::Path;
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::Value;

use super::Ctx;
use crate::error::{Error, Result};
use crate::report::Row;

/// The longest [`Disk::compact`] waits for `compact_running` to turn false.
const COMPACT_MAX: Duration = Duration::from_secs(600);

/// A disk measurement of one database, started before the database was filled.
pub struct Disk {
    /// Size of the server's data directory when the measurement started (`--data-dir`).
    before: Option<u64>,
}

impl Disk {
    /// Starts measuring: waits for the server to go idle and, with `--data-dir`, records
    /// the directory's size.
    pub async fn start(ctx: &Ctx) -> Result<Disk> {
        ctx.settle().await;
        let before = ctx.opts.data_dir.as_deref().map(dir_bytes).transpose()?;
        Ok(Disk { before })
    }

    /// The two rows (`disk after load`, `disk after compaction`) of `db`, which holds
    /// `docs` documents; `kind` names the case (e.g. `plain`).
    pub async fn rows(&self, ctx: &Ctx, db: &str, kind: &str, docs: usize) -> Vec<Row> {
        let loaded = self.bytes(ctx, db).await;
        let compacted = match loaded {
            Ok(_) => self.compacted(ctx, db).await,
            Err(_) => Err(Error::Invalid("not measured (the size after load failed)".into())),
        };
        let how = self.how();
        let external = external_mb(ctx, db).await;
        let row = |case: &str, bytes: Result<u64>| match bytes {
            Ok(bytes) => Row::size("load", case, bytes as f64 / 1e6, docs as u64)
                .note(&format!("{how}; {docs} docs, {external}")),
            Err(err) => Row::failed("load", case, &err.to_string()),
        };
        vec![
            row(&format!("disk after load, {kind}"), loaded),
            row(&format!("disk after compaction, {kind}"), compacted),
        ]
    }

    /// The database's size now, once the server is idle.
    async fn bytes(&self, ctx: &Ctx, db: &str) -> Result<u64> {
        ctx.settle().await;
        match (&ctx.opts.data_dir, self.before) {
            (Some(dir), Some(before)) => Ok(dir_bytes(dir)?.saturating_sub(before)),
            _ => sizes(ctx, db).await?["file"]
                .as_u64()
                .ok_or_else(|| Error::Invalid("GET /{db} has no sizes.file".into())),
        }
    }

    /// One size row of `db` as it is now (no compaction), for `items` documents, noting
    /// how it was measured and the server's resident memory (`VmRSS`) with `--pid`.
    pub async fn size_row(
        &self,
        ctx: &Ctx,
        db: &str,
        workload: &str,
        case: &str,
        items: u64,
    ) -> Row {
        match self.bytes(ctx, db).await {
            Ok(bytes) => {
                let rss = ctx.opts.pid.and_then(crate::proc::rss_mb);
                let rss = rss.map_or_else(String::new, |mb| format!("; server RSS {mb:.0} MB"));
                Row::size(workload, case, bytes as f64 / 1e6, items)
                    .note(&format!("{}; {items} docs{rss}", self.how()))
            }
            Err(err) => Row::failed(workload, case, &err.to_string()),
        }
    }

    /// The database's size after compaction.
    async fn compacted(&self, ctx: &Ctx, db: &str) -> Result<u64> {
        compact(ctx, db).await?;
        self.bytes(ctx, db).await
    }

    fn how(&self) -> &'static str {
        if self.before.is_some() {
            "growth of the data directory (space allocated to all files, journals included)"
        } else {
            "sizes.file of GET /{db}"
        }
    }
}

/// `POST /{db}/_compact`, then waits until `GET /{db}` says `compact_running: false`.
async fn compact(ctx: &Ctx, db: &str) -> Result {
    let client = ctx.client()?;
    ctx.send(&client, Method::POST, &format!("/{db}/_compact"), Some(String::new())).await?;
    let began = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let info = ctx.send(&client, Method::GET, &format!("/{db}"), None).await?;
        if info["compact_running"] != Value::Bool(true) {
            return Ok(());
        }
        if began.elapsed() > COMPACT_MAX {
            return Err(Error::Invalid(format!("compaction still running after {COMPACT_MAX:?}")));
        }
    }
}

/// The `sizes` object of `GET /{db}`.
async fn sizes(ctx: &Ctx, db: &str) -> Result<Value> {
    let client = ctx.client()?;
    let info = ctx.send(&client, Method::GET, &format!("/{db}"), None).await?;
    Ok(info["sizes"].clone())
}

/// `sizes.external` as a note, e.g. `183.2 MB of JSON`.
async fn external_mb(ctx: &Ctx, db: &str) -> String {
    match sizes(ctx, db).await.map(|sizes| sizes["external"].as_u64()) {
        Ok(Some(bytes)) => format!("{:.1} MB of JSON (sizes.external)", bytes as f64 / 1e6),
        _ => "sizes.external unknown".to_string(),
    }
}

/// The bytes allocated on disk to the files under `dir`, as `du` counts them: fjall
/// preallocates each journal as a 64 MiB sparse file, so file lengths would count space
/// that holds nothing.
pub fn dir_bytes(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        total += if kind.is_dir() {
            dir_bytes(&entry.path())?
        } else {
            match entry.metadata() {
                Ok(meta) => allocated(&meta),
                // Removed meanwhile (a journal or table replaced by the server).
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => 0,
                Err(err) => return Err(err.into()),
            }
        };
    }
    Ok(total)
}

/// The bytes a file occupies on disk (its length where that is not known).
fn allocated(meta: &std::fs::Metadata) -> u64 {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        // `st_blocks` counts 512-byte units whatever the file system's block size.
        meta.blocks() * 512
    }
    #[cfg(not(unix))]
    meta.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dir_bytes_adds_up_nested_files() -> Result {
        let dir = tempfile::tempdir()?;
        std::fs::write(dir.path().join("a"), [1u8; 10_000])?;
        std::fs::create_dir(dir.path().join("sub"))?;
        std::fs::write(dir.path().join("sub/b"), [1u8; 5_000])?;
        let total = dir_bytes(dir.path())?;
        // Rounded up to whole file-system blocks, but no more than a few per file.
        assert!((15_000..15_000 + 2 * 65_536).contains(&total), "{total}");
        Ok(())
    }

    #[test]
    fn sparse_space_is_not_counted() -> Result {
        let dir = tempfile::tempdir()?;
        let file = std::fs::File::create(dir.path().join("journal"))?;
        file.set_len(64 << 20)?;
        assert!(dir_bytes(dir.path())? < 1 << 20);
        Ok(())
    }
}
