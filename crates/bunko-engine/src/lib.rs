//! The Bunko database engine: databases, documents with revision trees, `_local`
//! documents and the `_changes` feed, over any [`bunko_storage::Store`]. It is the
//! embeddable library; the HTTP server (`bunko-http`) is a thin adapter over it.
//!
//! - [`Engine`] (`catalog.rs`) owns the store and the catalog of databases.
//! - [`Database`] (`database.rs`) serializes writes per database: under its writer lock an
//!   update reads the affected [`records::DocInfo`]s, computes new revisions (`write.rs`,
//!   [`revtree`]), and applies one batch holding documents, bodies, `_changes` entries and
//!   counters; then it releases the lock and waits for the group-commit sync before
//!   answering. Every user operation is one atomic commit.
//! - Reads (`read.rs`, `all_docs/`, `changes.rs`) run on storage snapshots and stream;
//!   each takes the reader and passes every document it hands out through the read gate
//!   ([`read_gate`]), as every write passes the write gate (`gate.rs`).
//! - [`hooks`]: what indexes built above the engine from `_changes` (JavaScript views in
//!   `bunko-views`) hear of, and where they keep their state per database.
//! - [`advisor`]: the data-modeling advisor (`GET /{db}/_advise`), which samples a database
//!   through these reads and checks the modeling guides' rules.
//! - [`keys`] lists every key the engine writes.
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use bunko_engine::security::UserCtx;
//! use bunko_engine::{Config, Engine, WriteOptions};
//! use bunko_storage::Memory;
//!
//! // Every write names who makes it; the write gate checks it (`gate.rs`).
//! let me = UserCtx::admin("app");
//! let engine = Engine::open(Arc::new(Memory::new()), Config::default())?;
//! let db = engine.create_db(&me, "people", false)?;
//! let doc = bunko_doc::body::parse(
//!     br#"{"_id": "ada", "name": "Ada", "addresses": [{"city": "London"}]}"#,
//!     &Default::default(),
//! )?;
//! let rev = db.put(&me, doc, WriteOptions::default())?;
//! assert!(rev.to_string().starts_with("1-"));
//! let got = db.get(&me, "ada", None)?;
//! assert_eq!(got.body, br#"{"name":"Ada","addresses":[{"city":"London"}]}"#);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod advisor;
pub mod all_docs;
pub mod attachments;
pub mod buckets;
pub mod capped;
mod catalog;
pub mod changes;
mod compact;
mod database;
pub mod db_updates;
pub mod deadline;
pub mod design;
mod error;
pub mod events;
mod filters;
pub mod find;
mod gate;
pub mod hooks;
mod ids;
pub mod index;
mod js;
pub mod keys;
pub mod local;
pub mod login;
pub mod namespace;
mod password_rules;
mod procedures;
pub mod purge;
pub mod read;
pub mod read_gate;
pub mod records;
mod replace;
mod replicator_check;
pub mod replicator_doc;
pub mod revtree;
mod scope;
pub mod scram;
pub mod security;
mod seqs;
pub mod settings;
pub mod show_list;
pub mod spill;
mod triggers;
mod txn;
pub mod update_fn;
pub mod upload;
mod user_doc;
pub mod users;
pub mod uuids;
mod validators;
mod write;

pub use catalog::{Config, Engine, remove_range};
pub use database::{Database, DbInfo};
pub use error::{Error, Result};
pub use txn::{Applied, Transaction, TxnDoc, TxnWrite};
pub use uuids::Uuids;
pub use write::{DocResult, Durability, WriteOptions, Written};
