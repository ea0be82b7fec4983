//! The document model of Bunko, independent of storage and of any protocol.
//!
//! - [`body`]: parses a JSON document as a client sends it, splitting CouchDB's special
//!   fields (`_id`, `_rev`, `_deleted`, `_revisions`, …) from the user's body, with limits.
//! - [`id`]: document ids, partitions (`partition:docid`) and database names, validated
//!   with CouchDB's rules and error texts.
//! - [`rev`]: revision ids `N-<32 hex>`, computed deterministically.
//! - [`keycode`]: the order-preserving byte encoding every storage key is built with.
//! - [`collate`]: CouchDB's view and raw collation of JSON, and its order-preserving encoding.
//! - [`att`] and [`gzip`]: attachments as clients send them, and how they are stored.
//! - [`fields`]: reads only some top-level members of a stored JSON body.
//! - [`bson_hash`]: MongoDB's hash of a BSON value (hashed indexes).
//!
//! Nothing here knows about storage: `bunko-engine` composes these pieces into keys and
//! records.

pub mod att;
pub mod body;
pub mod bson_hash;
pub mod collate;
pub mod ejson;
pub mod error;
pub mod etf;
pub mod fields;
pub mod gzip;
pub mod id;
pub mod keycode;
pub mod rev;

pub use error::{Error, Result};
pub use rev::RevId;
