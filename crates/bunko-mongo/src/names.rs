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
//! The other way round, an engine database without `$` (a CouchDB database such as
//! `people`) is the collection `_couchdb.people` ([`COUCH_DB`]): the collection name is the
//! CouchDB name itself. Every other namespace maps to a name with `$`, so the two halves
//! cannot collide; the system databases (`_users`, `_replicator`, `_global_changes`) do not
//! start with a letter and stay out. [`Namespace::engine_name`] and
//! [`Namespace::from_engine`] are the one mapping every command resolves names through,
//! and `from_engine` answers only names `engine_name` gives (so `m()_couchdb$x`, which
//! `_couchdb.x` was before it named CouchDB databases, is no collection).

pub use bunko_engine::namespace::COUCH_DB;
use bunko_engine::namespace::{PREFIX, db_prefix, encode};

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
        if db == COUCH_DB {
            check_couch_name(coll)?;
        }
        Ok(Namespace { db: db.to_string(), coll: coll.to_string() })
    }

    /// Whether this is a CouchDB database without `$` (a collection of [`COUCH_DB`]).
    pub fn is_couch(&self) -> bool {
        self.db == COUCH_DB
    }

    /// `db.coll`.
    pub fn full(&self) -> String {
        format!("{}.{}", self.db, self.coll)
    }

    /// The engine database's name.
    pub fn engine_name(&self) -> String {
        if self.is_couch() {
            return self.coll.clone();
        }
        format!("{}${}", db_prefix(&self.db), encode(&self.coll))
    }

    /// The namespace of an engine database, if it is a MongoDB collection: the inverse of
    /// [`Namespace::engine_name`], and `None` for any name it does not give.
    pub fn from_engine(name: &str) -> Option<Namespace> {
        let ns = match name.split_once('$') {
            Some((db, coll)) => {
                let db = db.strip_prefix(PREFIX).unwrap_or(db);
                Namespace { db: decode(db)?, coll: decode(coll)? }
            }
            None if name.starts_with(|c: char| c.is_ascii_lowercase()) => {
                Namespace { db: COUCH_DB.to_string(), coll: name.to_string() }
            }
            None => return None,
        };
        (ns.engine_name() == name).then_some(ns)
    }
}

/// A collection of [`COUCH_DB`] is a CouchDB database name without `$`.
fn check_couch_name(coll: &str) -> Result<(), MongoError> {
    let couch = coll.starts_with(|c: char| c.is_ascii_lowercase())
        && bunko_doc::id::validate_db_name(coll).is_ok();
    if couch {
        return Ok(());
    }
    Err(MongoError::invalid_namespace(format!(
        "Invalid collection name: {COUCH_DB}.{coll}: the collections of {COUCH_DB} are the \
         CouchDB databases without '$' (a lowercase letter, then a-z, 0-9, _, (, ), +, - or /)"
    )))
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
        assert_eq!(Namespace::from_engine("m()(5f)couchdb$x"), None, "not what engine_name writes");
        assert_eq!(Namespace::from_engine("shop$(62)ooks"), None, "not what engine_name writes");
        assert!(Namespace::new("a.b", "c").is_err());
        assert!(Namespace::new("a", "system.js").is_err());
        assert!(Namespace::new("a", "b$c").is_err());
        Ok(())
    }

    #[test]
    fn couchdb_databases_without_dollar_are_the_collections_of_couchdb() -> Result<(), MongoError> {
        for name in ["people", "a/b", "x(1)+y-z_2"] {
            let ns = Namespace::new(COUCH_DB, name)?;
            assert_eq!(ns.engine_name(), name);
            assert_eq!(Namespace::from_engine(name), Some(ns));
        }
        for system in ["_users", "_replicator", "_global_changes"] {
            assert_eq!(Namespace::from_engine(system), None, "{system}");
            assert!(Namespace::new(COUCH_DB, system).is_err(), "{system}");
        }
        for bad in ["People", "9lives", "caf\u{e9}", "a.b"] {
            let err = Namespace::new(COUCH_DB, bad).err().map(|e| e.code);
            assert_eq!(err, Some(73), "{bad}");
        }
        // What `_couchdb.x` mapped to before is no namespace now, and no other MongoDB
        // database maps to a name without `$`.
        assert_eq!(Namespace::from_engine("m()_couchdb$x"), None);
        assert_eq!(Namespace::new("couchdb", "x")?.engine_name(), "couchdb$x");
        assert_eq!(Namespace::new("_couchdbx", "x")?.engine_name(), "m()_couchdbx$x");
        Ok(())
    }
}
