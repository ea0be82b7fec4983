//! Document ids, partitions and database names, with CouchDB's rules and error texts.
//!
//! In a partitioned database every document id but `_design/…` and `_local/…` has the form
//! `partition:docid`; the partition is everything before the first colon.

use crate::{Error, Result};

/// Databases CouchDB reserves; they may be created although they start with `_`.
pub const SYSTEM_DATABASES: &[&str] = &["_users", "_replicator", "_global_changes"];

/// The longest database name CouchDB accepts.
pub const MAX_DB_NAME_LEN: usize = 238;

/// The longest partition name, in bytes.
pub const MAX_PARTITION_LEN: usize = 128;

/// What kind of document an id names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocKind {
    Normal,
    Design,
    Local,
}

/// The kind of document `id` names.
pub fn kind(id: &str) -> DocKind {
    if id.starts_with("_design/") {
        DocKind::Design
    } else if id.starts_with("_local/") {
        DocKind::Local
    } else {
        DocKind::Normal
    }
}

/// Checks a document id as CouchDB does; in a partitioned database also its partition.
pub fn validate_doc_id(id: &str, partitioned: bool) -> Result<()> {
    let illegal = |reason: &str| Err(Error::IllegalDocId(reason.to_string()));
    match id {
        "" => return illegal("Document id must not be empty"),
        "_design/" => return illegal("Illegal document id `_design/`"),
        "_local/" => return illegal("Illegal document id `_local/`"),
        _ => {}
    }
    if kind(id) != DocKind::Normal {
        return Ok(());
    }
    if id.starts_with('_') {
        return illegal("Only reserved document ids may start with underscore.");
    }
    if partitioned {
        validate_partitioned_id(id)?;
    }
    Ok(())
}

fn validate_partitioned_id(id: &str) -> Result<()> {
    let Some((partition, rest)) = id.split_once(':') else {
        return Err(Error::IllegalDocId("Doc id must be of form partition:id".to_string()));
    };
    validate_partition(partition).map_err(|e| Error::IllegalDocId(e.to_string()))?;
    if rest.is_empty() {
        return Err(Error::IllegalDocId("Document id must not be empty".to_string()));
    }
    if rest.starts_with('_') {
        return Err(Error::IllegalDocId(
            "Only reserved document ids may start with underscore.".to_string(),
        ));
    }
    Ok(())
}

/// Checks a partition name (`400 illegal_partition` with CouchDB's reasons).
pub fn validate_partition(partition: &str) -> Result<()> {
    let illegal = |reason: String| Err(Error::IllegalPartition(reason));
    if partition.is_empty() {
        return illegal("Partition must not be empty".to_string());
    }
    if partition.starts_with('_') {
        return illegal("Partition must not start with an underscore".to_string());
    }
    if partition.len() > MAX_PARTITION_LEN {
        return illegal(format!("Partition must be less than {MAX_PARTITION_LEN} bytes"));
    }
    Ok(())
}

/// The partition of a document id in a partitioned database (`None` for design and local
/// documents, and for ids without a colon).
pub fn partition_of(id: &str) -> Option<&str> {
    if kind(id) != DocKind::Normal {
        return None;
    }
    id.split_once(':').map(|(p, _)| p)
}

/// Checks a database name as CouchDB does (`400 illegal_database_name`).
pub fn validate_db_name(name: &str) -> Result<()> {
    if SYSTEM_DATABASES.contains(&name) {
        return Ok(());
    }
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_lowercase());
    let rest_ok =
        chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_$()+-/".contains(c));
    if first_ok && rest_ok && name.len() <= MAX_DB_NAME_LEN {
        return Ok(());
    }
    Err(Error::IllegalDatabaseName(format!(
        "Name: '{name}'. Only lowercase characters (a-z), digits (0-9), and any of the \
         characters _, $, (, ), +, -, and / are allowed. Must begin with a letter."
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doc_ids() {
        for ok in ["a", "a/b", "_design/x", "_local/y", "日本語", "a:b"] {
            assert_eq!(validate_doc_id(ok, false), Ok(()), "{ok}");
        }
        for bad in ["", "_foo", "_design/", "_local/", "_all_docs"] {
            assert!(matches!(validate_doc_id(bad, false), Err(Error::IllegalDocId(_))), "{bad}");
        }
    }

    #[test]
    fn partitioned_ids() {
        let ok = ["bridge-9876:device-123456-20181211T11:13:24.123456Z", "p:x", "_design/d"];
        for id in ok {
            assert_eq!(validate_doc_id(id, true), Ok(()), "{id}");
        }
        for bad in ["nocolon", ":x", "p:", "_p:x", "p:_x"] {
            assert!(matches!(validate_doc_id(bad, true), Err(Error::IllegalDocId(_))), "{bad}");
        }
        assert_eq!(partition_of("bridge-9876:device-1:ts"), Some("bridge-9876"));
        assert_eq!(partition_of("_design/x:y"), None);
    }

    #[test]
    fn db_names() {
        for ok in ["a", "abc123", "a_$()+-/b", "_users", "_replicator"] {
            assert_eq!(validate_db_name(ok), Ok(()), "{ok}");
        }
        let long = "a".repeat(MAX_DB_NAME_LEN + 1);
        for bad in ["", "A", "1a", "_foo", "a b", "aé", long.as_str()] {
            assert!(validate_db_name(bad).is_err(), "{bad}");
        }
    }
}
