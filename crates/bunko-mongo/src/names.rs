//! Namespaces: a MongoDB collection `db.coll` is the engine database named
//! `enc(db) + "$" + enc(coll)`, a reversible mapping into CouchDB's database names
//! (`^[a-z][a-z0-9_$()+/-]*$`). The encoding is the engine's
//! ([`bunko_engine::namespace`]), whose write gate reads it; this module checks and decodes.
//!
//! - `enc` keeps `a`–`z`, `0`–`9`, `_` and `-`, and writes every other character as `(`,
//!   the lower-case hex of its UTF-8 bytes, `)`: `Users.archive` is `(55)sers(2e)archive`.
//! - `$` cannot occur in a MongoDB database name and `enc` never writes it, so the first
//!   `$` splits the name; collection names may not contain `$` either (as in MongoDB).
//! - A CouchDB name must start with a letter: a database part that would not is prefixed
//!   with `m()` (`enc` never writes `()`), so `Test.c` is `m()(54)est$c`.
//!
//! Engine databases without `$` (CouchDB databases) are not MongoDB collections in this
//! version.

pub use bunko_engine::namespace::db_prefix;
use bunko_engine::namespace::{PREFIX, encode};

use crate::error::MongoError;

/// A collection's namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Namespace {
    pub db: String,
    pub coll: String,
}

impl Namespace {
    /// Checks names as MongoDB does.
    pub fn new(db: &str, coll: &str) -> Result<Namespace, MongoError> {
        check_db(db)?;
        if coll.is_empty() || coll.contains(['$', '\0']) {
            return Err(MongoError::invalid_namespace(format!("Invalid collection name: {coll}")));
        }
        if coll.starts_with("system.") {
            return Err(MongoError::invalid_namespace(format!(
                "Invalid system namespace: {db}.{coll}"
            )));
        }
        Ok(Namespace { db: db.to_string(), coll: coll.to_string() })
    }

    /// `db.coll`.
    pub fn full(&self) -> String {
        format!("{}.{}", self.db, self.coll)
    }

    /// The engine database's name.
    pub fn engine_name(&self) -> String {
        format!("{}${}", db_prefix(&self.db), encode(&self.coll))
    }

    /// The namespace of an engine database, if it is a MongoDB collection.
    pub fn from_engine(name: &str) -> Option<Namespace> {
        let (db, coll) = name.split_once('$')?;
        let db = db.strip_prefix(PREFIX).unwrap_or(db);
        Some(Namespace { db: decode(db)?, coll: decode(coll)? })
    }
}

/// MongoDB's database-name rules.
pub fn check_db(db: &str) -> Result<(), MongoError> {
    let bad = db.is_empty() || db.len() > 63 || db.contains(['/', '\\', '.', ' ', '"', '$', '\0']);
    if bad {
        return Err(MongoError::invalid_namespace(format!("Invalid database name: '{db}'")));
    }
    Ok(())
}

fn decode(text: &str) -> Option<String> {
    let mut bytes = Vec::with_capacity(text.len());
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if c == '(' {
            let end = rest.find(')')?;
            let hex = rest.get(1..end)?;
            if hex.is_empty() || hex.len() % 2 != 0 {
                return None;
            }
            for i in (0..hex.len()).step_by(2) {
                bytes.push(u8::from_str_radix(hex.get(i..i + 2)?, 16).ok()?);
            }
            rest = rest.get(end + 1..)?;
        } else {
            bytes.push(u8::try_from(u32::from(c)).ok()?);
            rest = rest.get(c.len_utf8()..)?;
        }
    }
    String::from_utf8(bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_both_ways() -> Result<(), MongoError> {
        let cases = [
            ("shop", "books", "shop$books"),
            ("shop", "Users.archive", "shop$(55)sers(2e)archive"),
            ("Test", "c", "m()(54)est$c"),
            ("9lives", "猫", "m()9lives$(e78cab)"),
            ("a", "x(y)", "a$x(28)y(29)"),
        ];
        for (db, coll, engine) in cases {
            let ns = Namespace::new(db, coll)?;
            assert_eq!(ns.engine_name(), engine);
            assert_eq!(Namespace::from_engine(engine), Some(ns));
            assert!(bunko_doc::id::validate_db_name(engine).is_ok(), "{engine}");
        }
        assert_eq!(Namespace::from_engine("plaindb"), None);
        assert!(Namespace::new("a.b", "c").is_err());
        assert!(Namespace::new("a", "system.js").is_err());
        assert!(Namespace::new("a", "b$c").is_err());
        Ok(())
    }
}
