//! The data directory's format marker: a file `BUNKO_FORMAT` holding
//! `bunko storage format <n>`, written when a [`crate::Fjall`] store is opened.
//!
//! A build reads every format up to [`FORMAT_VERSION`], and writes each directory in the
//! format it has: a new (missing or empty) directory gets [`FORMAT_VERSION`] and its marker
//! before fjall creates anything. A directory from before the marker existed has fjall's
//! files but no marker: its layout is format 1 (fjall 3, one keyspace; its keyspace
//! settings, compression included, are stored by fjall and kept), so it opens, gets the
//! marker of format 1 and stays format 1. A directory written by a newer build, or a marker
//! this build cannot read, is refused before fjall touches it, with a message naming both
//! versions. A format 2 directory is re-marked 3 when this build opens it: its data reads
//! as it is (format 3 only adds what format 2 lacks), but from then on it may hold records
//! a format 2 build would misread, so such a build refuses it.
//!
//! Formats:
//! 1. fjall 3, one keyspace `bunko`, keys as in `docs/architecture/keys.md`, values as given.
//! 2. As 1, but every value starts with a header byte: raw or zstd (`value.rs`).
//! 3. As 2, but a document's `Doc` record may carry its winning revision's body, which
//!    then has no `Rev` key (the engine's `records::DocRecord`, issue 20 point 2), and a
//!    value may be stored as a raw head and a zstd frame of the rest (`value.rs`). A format
//!    1 directory stays format 1 and never gets such records ([`crate::Store::format`]).
//! 4. As 3, but the keys are spread over several fjall keyspaces by their first byte
//!    (`layout.rs`: `meta`, `docs`, `bodies`, `seqs`, `index`, `views`, `spill`) instead of
//!    one keyspace `bunko` (issue 20 point 8). Only a new directory gets it: a format 2 or
//!    3 directory keeps its one keyspace (its data would have to be moved), so a directory's
//!    layout is the one it was created with.

use std::path::Path;

use crate::{Error, Result};

/// The newest format this build reads and the one it writes.
pub const FORMAT_VERSION: u32 = 4;

const FILE: &str = "BUNKO_FORMAT";
const PREFIX: &str = "bunko storage format ";

/// The format of the store in `dir`, marking a new or unmarked directory (see the module
/// docs); refuses a directory whose marker names a format this build cannot read.
pub(crate) fn prepare(dir: &Path) -> Result<u32> {
    match check(dir)? {
        Some(2) => {
            mark(dir, 3)?;
            return Ok(3);
        }
        Some(version) => return Ok(version),
        None => {}
    }
    let io = |err: std::io::Error| Error::Io(format!("opening {}: {err}", dir.display()));
    let fresh = match std::fs::read_dir(dir) {
        Ok(mut entries) => entries.next().is_none(),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => true,
        Err(err) => return Err(io(err)),
    };
    let version = if fresh { FORMAT_VERSION } else { 1 };
    std::fs::create_dir_all(dir).map_err(io)?;
    mark(dir, version)?;
    Ok(version)
}

/// The format named by the marker in `dir` (`None`: no marker), or a refusal.
fn check(dir: &Path) -> Result<Option<u32>> {
    let path = dir.join(FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(Error::Io(format!("reading {}: {err}", path.display()))),
    };
    let version = text.trim().strip_prefix(PREFIX).and_then(|v| v.parse::<u32>().ok());
    match version {
        Some(version) if (1..=FORMAT_VERSION).contains(&version) => Ok(Some(version)),
        Some(version) => Err(Error::Corrupt(format!(
            "{} holds Bunko storage format {version}; this build reads formats 1 to \
             {FORMAT_VERSION}: open it with the Bunko version that wrote it, or a newer one",
            dir.display()
        ))),
        None => Err(Error::Corrupt(format!(
            "{} is not a Bunko format marker (expected \"{PREFIX}<n>\", found {:?})",
            path.display(),
            text.trim()
        ))),
    }
}

/// Writes the marker of format `version`.
fn mark(dir: &Path, version: u32) -> Result<()> {
    let path = dir.join(FILE);
    std::fs::write(&path, format!("{PREFIX}{version}\n"))
        .map_err(|err| Error::Io(format!("writing {}: {err}", path.display())))
}
