//! Mango queries: selectors, `sort`, `fields`, and the keys of multikey JSON indexes.
//!
//! The data flow of a `_find`, in the order of the modules:
//!
//! 1. [`Selector::parse`] validates the request's `selector` with CouchDB's errors
//!    ([`Error`]: `error` name, `reason` text, status) and normalizes it: implicit operators
//!    made explicit, nested field names combined into [`FieldPath`]s, negations pushed down
//!    ([`selector`]).
//! 2. The planner ([`plan`]) reads the normalized tree: [`Selector::fields`],
//!    [`Selector::conditions`], [`Selector::implies_exists`], [`Selector::is_noop`]; index
//!    entries come from [`index_keys()`], one per array element where a path crosses an array.
//! 3. Each candidate document is tested with [`Selector::matches`] in a [`Dialect`]: Mango
//!    (CouchDB) or Mongo (paths reach into arrays).
//! 4. Results are ordered by [`Sort`] and projected by [`Fields`].
//!
//! [`text`] turns a selector into the query a Mango `text` index answers.
//!
//! [`update`] holds MongoDB's update operators as pure functions on BSON documents.
//!
//! Everything here is pure: no storage, no I/O. Values are `serde_json` values with number
//! text preserved, so `1` and `1.0` stay distinguishable where CouchDB distinguishes them
//! (see [`term`]). No input can panic this crate.

pub mod agg;
pub mod bson_order;
mod cmp;
pub mod collation;
pub mod covered;
pub mod erl;
pub mod error;
pub mod expr;
pub mod fields;
pub mod index_keys;
pub mod mongo_index;
pub mod numbers;
pub mod path;
pub mod plan;
pub mod schema;
pub mod selector;
pub mod sort;
pub mod term;
pub mod text;
pub mod update;
pub mod update_pipeline;

#[cfg(test)]
mod bench_docs;

pub use error::Error;
pub use fields::Fields;
pub use index_keys::index_keys;
pub use path::FieldPath;
pub use selector::{BitTest, Cond, Dialect, Node, Pattern, Predicate, Selector, positions_of};
pub use sort::{Direction, Sort};
