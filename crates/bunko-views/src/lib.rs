//! JavaScript views of design documents (DESIGN.md §5), built incrementally from
//! `_changes`: a user of the index framework ([`bunko_indexer`]) above the engine, so that
//! an embedder who needs no views does not compile them.
//!
//! The engine knows views only through its hooks: [`register`] adds [`ViewHooks`], which
//! load a database's view groups when it opens and wake the background indexer after
//! every commit; the views' state of a database lives in the database handle
//! ([`registry`]), and their keys under the tags the engine reserves for them
//! (`bunko_engine::keys::VIEW_META` …; [`entries`]). Queries and maintenance are
//! functions of a database: [`query_view`], [`view_info`], [`view_cleanup`],
//! [`view_tasks`], [`design_group`].
//!
//! 1. [`def`]: a design document's views form a group ([`GroupDef`]); each distinct map
//!    function is a map index ([`MapDef`]) named by a signature over what changes its rows,
//!    so editing one view (or a reduce function) keeps the other map indexes, and
//!    identical map functions share one index across design documents.
//! 2. [`Registry`]: the groups this process knows, each an [`Index`] holding its compiled
//!    map functions and its map indexes ([`MapIndex`], each with its checkpoint). Groups are
//!    registered when a design document is written, when a view is queried, and at
//!    start-up for every design document.
//! 3. [`build`]: a group catches up by reading the `Seq` keys after the lowest checkpoint
//!    of its map indexes, mapping the winning bodies of those documents through the map
//!    indexes at that checkpoint (one `bunko_js::CompiledViews` call for all of them),
//!    replacing each document's old rows (found through the back-index) with its new
//!    ones, and storing the new checkpoints, in one commit per page. A background thread
//!    does this after every write; a query with `update=true` does it first. The loop,
//!    its progress and the background updater are the index framework's
//!    ([`bunko_indexer`]); this module says how a page of changes becomes rows.
//! 4. `purge`: before reading changes, an update removes the rows of documents purged
//!    since each map index's purge checkpoint (`_local/purge-mrview-{sig}`).
//! 5. [`query`]: map queries are range scans of the collated keys ([`entries`]); reduce
//!    queries reduce the rows of the range, by group.
//!
//! Unlike Mango indexes, views are not maintained in the writing commit: like CouchDB,
//! a view lags the documents until it is updated, and `update=false` reads it as it is.

pub mod build;
pub mod def;
pub mod entries;
mod info;
pub mod order;
mod purge;
pub mod query;
mod reduce;
mod rows;
#[cfg(test)]
mod testing;

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use bunko_engine::hooks::IndexHooks;
use bunko_engine::{Database, Engine};
use bunko_indexer::{Activity, Background, Designs};
use bunko_js::{CompiledReduce, CompiledViews, Limits, Runtime};
use parking_lot::Mutex;

pub use build::{
    ViewTask, design_group, design_groups, update_view, view_cleanup, view_index, view_tasks,
};
use build::{load_views, spawn_view_indexer, views_after_write};
pub use bunko_indexer::{Progress, Update};
pub use def::{GroupDef, MapDef, ViewDef};
pub use entries::MapMeta;
pub use info::ViewInfo;
pub use info::{compact_view_group, view_info};
pub use query::{ViewQuery, ViewResult, ViewRow};
pub use query::{is_short_read, query_view};
pub use rows::{PlainRows, RowIter};

/// One map index: its rows are keyed by `sig` ([`entries`]).
#[derive(Debug)]
pub struct MapIndex {
    pub sig: String,
    /// Held while the index is updated, by the group updating it.
    build: Mutex<()>,
    /// Set (under `build`) once `_view_cleanup` removed the index: a build that was about to
    /// start on it must not write its rows back.
    removed: std::sync::atomic::AtomicBool,
    /// The stored checkpoint, as last written.
    meta: Mutex<MapMeta>,
}

impl MapIndex {
    fn new(sig: String, meta: MapMeta) -> Self {
        let removed = std::sync::atomic::AtomicBool::new(false);
        MapIndex { sig, build: Mutex::new(()), removed, meta: Mutex::new(meta) }
    }

    /// The checkpoint: the seq and row count the index has reached.
    pub fn meta(&self) -> MapMeta {
        *self.meta.lock()
    }
}

/// One view group's index: its definition, compiled functions and map indexes.
pub struct Index {
    pub def: GroupDef,
    /// The map indexes of `def.maps`, in the same order.
    pub maps: Vec<Arc<MapIndex>>,
    /// Held while the group is updated; holds the compiled map functions, one copy per
    /// build worker (empty until the first update).
    build: Mutex<Vec<CompiledViews>>,
    /// Compiled JavaScript reduce functions by view name.
    reducers: Mutex<HashMap<String, CompiledReduce>>,
    /// The running update's progress, while one maps documents.
    pub(crate) activity: Activity,
    /// The database's update seq every change up to which is known to be indexed.
    pub(crate) caught_up: AtomicU64,
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index").field("sig", &self.def.sig).finish()
    }
}

impl Index {
    fn new(def: GroupDef, maps: Vec<Arc<MapIndex>>) -> Self {
        Index {
            def,
            maps,
            build: Mutex::new(Vec::new()),
            reducers: Mutex::new(HashMap::new()),
            activity: Activity::default(),
            caught_up: AtomicU64::new(0),
        }
    }

    /// The seq every map index of the group has reached.
    pub fn seq(&self) -> u64 {
        self.maps.iter().map(|m| m.meta().seq).min().unwrap_or(0)
    }

    /// The map index of view `view`.
    pub fn map_of(&self, view: &ViewDef) -> Option<&Arc<MapIndex>> {
        self.maps.get(view.map)
    }

    /// The running update's progress, if one is mapping documents.
    pub fn progress(&self) -> Option<Progress> {
        self.activity.get()
    }

    /// Whether an update of this group, or of one of its map indexes, runs now.
    pub fn is_updating(&self) -> bool {
        self.build.is_locked() || self.maps.iter().any(|m| m.build.is_locked())
    }
}

/// The runtime every view function is compiled with.
pub(crate) fn runtime() -> Runtime {
    Runtime::new(Limits::default())
}

/// The views' state of `db`, kept in the database handle.
pub fn registry(db: &Database) -> Arc<Registry> {
    db.extension(|| Registry::new(db.weak()))
}

/// How the engine tells views of databases opened and commits applied.
#[derive(Debug)]
pub struct ViewHooks;

impl IndexHooks for ViewHooks {
    fn opened(&self, db: &Arc<Database>) {
        if let Err(err) = load_views(db) {
            tracing::warn!(%err, db = db.name(), "loading view definitions failed");
        }
        spawn_view_indexer(db);
    }

    fn written(&self, db: &Arc<Database>, ddocs_changed: bool) {
        views_after_write(db, ddocs_changed);
    }
}

/// Registers views with `engine`: every open database's view groups are loaded and kept
/// current in the background from now on.
pub fn register(engine: &Engine) {
    engine.add_index_hooks(Arc::new(ViewHooks));
}

/// Unix time in seconds.
pub(crate) fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The view groups of one database by group signature, and their map indexes by map
/// signature.
#[derive(Debug)]
pub struct Registry {
    /// The database, for the background indexer.
    db: Weak<Database>,
    groups: Mutex<HashMap<String, Arc<Index>>>,
    maps: Mutex<HashMap<String, Arc<MapIndex>>>,
    /// Map indexes dropped from `maps` (no design document uses them) that a build may
    /// still hold: registering the signature again reuses the same one (one builder per
    /// index), and `_view_cleanup` finds it to wait for its build before removing its rows.
    retired: Mutex<HashMap<String, std::sync::Weak<MapIndex>>>,
    /// The background indexer.
    pub(crate) background: Background,
    /// The group each design document names.
    pub(crate) designs: Designs,
    /// Row counts by key of every map index, for `offset` and partition totals
    /// ([`order`]).
    pub(crate) order: order::Orders,
    /// Held shared while groups and map indexes are registered, and exclusively by
    /// `_view_cleanup` while it drops and removes indexes, so that a registration made from
    /// an older read of the design documents cannot revive an index being removed (it
    /// registers afterwards, from the store, as a fresh index).
    pub(crate) registration: parking_lot::RwLock<()>,
}

impl Registry {
    fn new(db: Weak<Database>) -> Registry {
        Registry {
            db,
            groups: Mutex::default(),
            maps: Mutex::default(),
            retired: Mutex::default(),
            background: Background::default(),
            designs: Designs::default(),
            order: order::Orders::default(),
            registration: parking_lot::RwLock::default(),
        }
    }

    /// The database, unless it is gone.
    pub(crate) fn db(&self) -> Option<Arc<Database>> {
        self.db.upgrade()
    }

    /// Every registered group.
    pub fn all(&self) -> Vec<Arc<Index>> {
        self.groups.lock().values().cloned().collect()
    }

    pub fn get(&self, sig: &str) -> Option<Arc<Index>> {
        self.groups.lock().get(sig).cloned()
    }

    /// The registered map index `sig`.
    pub(crate) fn map(&self, sig: &str) -> Option<Arc<MapIndex>> {
        self.maps.lock().get(sig).cloned()
    }

    /// Registers map index `sig` with checkpoint `meta` unless it exists; returns it.
    pub(crate) fn insert_map(&self, sig: &str, meta: MapMeta) -> Arc<MapIndex> {
        self.maps
            .lock()
            .entry(sig.to_string())
            .or_insert_with(|| {
                let retired = self.retired.lock().remove(sig).and_then(|w| w.upgrade());
                if let Some(map) = retired.filter(|m| !m.removed.load(Ordering::Acquire)) {
                    return map;
                }
                if meta.seq == 0 {
                    self.order.mark_fresh(sig);
                }
                Arc::new(MapIndex::new(sig.to_string(), meta))
            })
            .clone()
    }

    /// Registers `def` (with its map indexes) unless a group with its signature exists;
    /// returns the group.
    pub(crate) fn insert(&self, def: GroupDef, maps: Vec<Arc<MapIndex>>) -> Arc<Index> {
        self.groups
            .lock()
            .entry(def.sig.clone())
            .or_insert_with(|| Arc::new(Index::new(def, maps)))
            .clone()
    }

    /// Keeps only the groups whose signature is in `live`, and the map indexes they use;
    /// returns the map indexes it dropped.
    pub(crate) fn retain(&self, live: &[String]) -> Vec<Arc<MapIndex>> {
        let mut groups = self.groups.lock();
        groups.retain(|sig, _| live.contains(sig));
        let used: std::collections::HashSet<&str> =
            groups.values().flat_map(|g| g.maps.iter().map(|m| m.sig.as_str())).collect();
        let mut dropped = Vec::new();
        self.maps.lock().retain(|sig, map| {
            let keep = used.contains(sig.as_str());
            if !keep {
                self.order.forget(sig);
                self.retired.lock().insert(sig.clone(), Arc::downgrade(map));
                dropped.push(map.clone());
            }
            keep
        });
        dropped
    }

    /// A map index dropped earlier that a build may still hold (see `retired`).
    pub(crate) fn take_retired(&self, sig: &str) -> Option<Arc<MapIndex>> {
        self.retired.lock().remove(sig).and_then(|w| w.upgrade())
    }

    pub fn is_empty(&self) -> bool {
        self.groups.lock().is_empty()
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use bunko_engine::security::UserCtx;
    use bunko_engine::{Config, Engine, Result};
    use bunko_storage::Memory;
    use serde_json::json;

    use super::*;
    use crate::testing::put;

    /// The seq every registered view group of `db` has reached, once the background
    /// indexer got there (or after 10 s).
    fn background_seq(db: &Database, target: u64) -> u64 {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let groups = registry(db).all();
            let seq = groups.iter().map(|g| g.seq()).min().unwrap_or(0);
            if (!groups.is_empty() && seq >= target) || Instant::now() > deadline {
                return seq;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn registered_views_are_loaded_and_kept_current_without_a_query() -> Result<()> {
        let engine = Engine::open(Arc::new(Memory::new()), Config::default())?;
        let db = engine.create_db(&UserCtx::admin("test"), "v", false)?;
        put(
            &db,
            json!({"_id": "_design/d", "views": {"v": {"map": "function(d) { emit(d.n); }"}}}),
        )?;
        put(&db, json!({"_id": "a", "n": 1}))?;
        assert!(registry(&db).is_empty(), "without registration nothing is loaded");

        register(&engine);
        assert_eq!(background_seq(&db, db.update_seq()), db.update_seq(), "loaded at registration");
        put(&db, json!({"_id": "b", "n": 2}))?;
        assert_eq!(background_seq(&db, db.update_seq()), db.update_seq(), "updated after a write");
        let q = ViewQuery { update: Update::False, ..ViewQuery::default() };
        let r = query_view(&UserCtx::system(), &db, "_design/d", "v", &q, None)?;
        assert_eq!(r.total_rows, Some(2));
        Ok(())
    }
}
