//! JavaScript views of design documents (DESIGN.md §5), built incrementally from
//! `_changes`.
//!
//! 1. [`def`]: a design document's views form a group ([`GroupDef`]) named by a signature
//!    over its definitions; identical design documents share one index.
//! 2. [`Registry`]: the groups this process knows, each an [`Index`] holding the compiled
//!    map functions and the checkpoint. Groups are registered when a design document is
//!    written, when a view is queried, and at start-up for every design document.
//! 3. [`build`]: an index catches up by reading the `Seq` keys after its checkpoint,
//!    mapping the winning bodies of those documents (`bunko_js::CompiledViews::map_batch`),
//!    replacing each document's old rows (found through the back-index) with its new
//!    ones, and storing the new checkpoint, in one commit per page. A background thread
//!    does this after every write; a query with `update=true` does it first.
//! 4. [`query`]: map queries are range scans of the collated keys ([`entries`]); reduce
//!    queries reduce the rows of the range, by group.
//!
//! Unlike Mango indexes, views are not maintained in the writing commit: like CouchDB,
//! a view lags the documents until it is updated, and `update=false` reads it as it is.

pub mod build;
pub mod def;
mod designs;
pub mod entries;
pub mod order;
pub mod query;
mod reduce;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64};

use bunko_js::{CompiledReduce, CompiledViews, Limits, Runtime};
use parking_lot::Mutex;

pub use def::{GroupDef, ViewDef};
pub use entries::ViewMeta;
pub use query::{Update, ViewQuery, ViewResult, ViewRow};

/// One view group's index: its definition, compiled functions and checkpoint.
pub struct Index {
    pub def: GroupDef,
    /// Held while the index is updated; holds the compiled map functions.
    build: Mutex<Option<CompiledViews>>,
    /// The stored checkpoint, as last written.
    meta: Mutex<ViewMeta>,
    /// Compiled JavaScript reduce functions by view name.
    reducers: Mutex<HashMap<String, CompiledReduce>>,
    /// The database's update seq every change up to which is known to be indexed.
    pub(crate) caught_up: AtomicU64,
    /// Row counts by key, for `offset` and partition totals (`view/order.rs`).
    pub(crate) order: order::Orders,
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index").field("sig", &self.def.sig).finish()
    }
}

impl Index {
    fn new(def: GroupDef, meta: ViewMeta) -> Self {
        let order = order::Orders::new(meta.seq == 0);
        Index {
            def,
            build: Mutex::new(None),
            meta: Mutex::new(meta),
            reducers: Mutex::new(HashMap::new()),
            caught_up: AtomicU64::new(0),
            order,
        }
    }

    /// The checkpoint: the seq and row counts the index has reached.
    pub fn meta(&self) -> ViewMeta {
        self.meta.lock().clone()
    }

    /// Whether an update is running now.
    pub fn is_updating(&self) -> bool {
        self.build.is_locked()
    }
}

/// The runtime every view function is compiled with.
pub(crate) fn runtime() -> Runtime {
    Runtime::new(Limits::default())
}

/// The view groups of one database, by signature.
#[derive(Debug, Default)]
pub struct Registry {
    groups: Mutex<HashMap<String, Arc<Index>>>,
    /// The background indexer runs.
    pub(crate) running: AtomicBool,
    /// A write happened since the indexer's round began.
    pub(crate) dirty: AtomicBool,
    /// The group each design document names (`view/designs.rs`).
    pub(crate) designs: designs::Designs,
}

impl Registry {
    /// Every registered group.
    pub fn all(&self) -> Vec<Arc<Index>> {
        self.groups.lock().values().cloned().collect()
    }

    pub fn get(&self, sig: &str) -> Option<Arc<Index>> {
        self.groups.lock().get(sig).cloned()
    }

    /// Registers `def` unless a group with its signature exists; returns the group.
    pub(crate) fn insert(&self, def: GroupDef, meta: ViewMeta) -> Arc<Index> {
        self.groups
            .lock()
            .entry(def.sig.clone())
            .or_insert_with(|| Arc::new(Index::new(def, meta)))
            .clone()
    }

    /// Keeps only the groups whose signature is in `live`.
    pub(crate) fn retain(&self, live: &[String]) {
        self.groups.lock().retain(|sig, _| live.contains(sig));
    }

    pub fn is_empty(&self) -> bool {
        self.groups.lock().is_empty()
    }
}
