//! The data directory's format marker: a file `BUNKO_FORMAT` holding
//! `bunko storage format <n>`, written when a [`crate::Fjall`] store is opened.
//!
//! A build reads every format up to [`FORMAT_VERSION`]. A directory from before the marker
//! existed has no such file: its layout is format 1 (fjall 3, one keyspace; its keyspace
//! settings, compression included, are stored by fjall and kept), so it opens and gets the
//! marker. A directory written by a newer build, or a marker this build cannot read, is
//! refused before fjall touches it, with a message naming both versions.
//!
//! Formats: 1 = fjall 3, one keyspace `bunko`, keys as in `docs/architecture/keys.md`.

use std::path::Path;

use crate::{Error, Result};

/// The newest format this build reads and the one it writes.
pub const FORMAT_VERSION: u32 = 1;

const FILE: &str = "BUNKO_FORMAT";
const PREFIX: &str = "bunko storage format ";

/// Refuses a directory whose marker names a format this build cannot read.
pub(crate) fn check(dir: &Path) -> Result<()> {
    let path = dir.join(FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(err) => return Err(Error::Io(format!("reading {}: {err}", path.display()))),
    };
    let version = text.trim().strip_prefix(PREFIX).and_then(|v| v.parse::<u32>().ok());
    match version {
        Some(version) if (1..=FORMAT_VERSION).contains(&version) => Ok(()),
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

/// Writes the marker of [`FORMAT_VERSION`] if the directory has none yet.
pub(crate) fn mark(dir: &Path) -> Result<()> {
    let path = dir.join(FILE);
    if path.exists() {
        return Ok(());
    }
    std::fs::write(&path, format!("{PREFIX}{FORMAT_VERSION}\n"))
        .map_err(|err| Error::Io(format!("writing {}: {err}", path.display())))
}
