//! Mango JSON indexes, maintained in the writing commit (DESIGN.md §5).
//!
//! 1. Definitions live in design documents (`"language": "query"`, [`def`]). When such a
//!    design document is written, `Database::plan_ddocs` compares its old and new indexes
//!    inside the same commit: a new index gets an [`IndexMeta`] with a fresh storage
//!    number and an empty build cursor; a removed one is marked for background removal.
//! 2. Every document write asks the registry for the live indexes and, for each index
//!    that already covers the document's id, replaces the document's old entries with
//!    its new ones in the same batch ([`entries`]). An index is therefore never stale.
//! 3. An index created over existing documents is filled by [`build`] in id order, one
//!    batch at a time under the database's writer lock; the cursor is stored with each
//!    batch, so a restart resumes where it stopped. Writes to ids at or before the
//!    cursor maintain the index themselves; ids after it are the builder's. Queries use an
//!    index only once it is complete; a query that would choose an index still being
//!    built waits for it (up to [`crate::find::BUILD_WAIT`]), as CouchDB's first query
//!    after creating an index waits for its build.
//!
//! Mango `text` indexes ([`text`]) are kept elsewhere: the engine holds their definitions
//! and plans with them, the search service builds them from the change sequence.
//!
//! Keys: `IdxMeta(db, ddoc, name) → IndexMeta`, and the entries
//! `0x0A | db | num | [partition] | collate(value)… | doc_id → [[values…], doc_id, [whole…]]`
//! (`docs/architecture/keys.md`).

pub mod accesses;
pub mod build;
pub mod def;
pub mod entries;
mod maintain;
pub mod manage;
pub mod mongo;
pub mod text;
pub mod ttl;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::RwLock;
use serde::{Deserialize, Serialize};

pub use accesses::Accesses;
pub use def::{IndexDef, IndexField};
pub use maintain::{DdocChanges, MultikeyMarks, Winner};

/// The stored state of one index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexMeta {
    /// The number naming the index's entries in storage; unique within the database.
    pub num: u64,
    /// [`IndexDef::num`] of the definition this state belongs to.
    pub def_hash: u64,
    /// The last document id the builder has indexed (`None`: none yet).
    pub cursor: Option<String>,
    /// The builder has reached the end: every document is indexed.
    pub ready: bool,
    /// MongoDB's `multiKeyPaths`: per indexed field, the path components at which some
    /// document indexed so far held an array (all empty, or none: not multikey). Set in
    /// the commit of the write (or build step) that first makes them so; only a rebuild
    /// (a new index) clears them, as in MongoDB.
    pub multikey: Vec<Vec<usize>>,
    /// Every entry of this MongoDB index keeps its document's values at the index paths
    /// (`bunko_query::covered::index_fields`), so a covered query may answer from it. Set
    /// for indexes created since entries keep them; an older index (its entries lack them)
    /// is read as not covering until it is built again.
    pub covering: bool,
    /// The fields (positions) at which some document indexed so far held an array inside
    /// the array at the field's end (`{a: [[3]]}` for `a`), whose keys are the inner
    /// array's elements, not the array `distinct` returns; `None` for an index stored
    /// before this was kept (read as possibly nested everywhere).
    pub nested: Option<Vec<usize>>,
}

/// The array component of a document's multikey paths that says it holds an array inside
/// the array at the end of the field (`bunko_query::mongo_index::nested_leaf_arrays`).
pub const NESTED: usize = usize::MAX;

/// [`IndexMeta`] as stored before nested arrays were kept.
#[derive(Deserialize)]
#[cfg_attr(test, derive(Serialize))]
struct IndexMetaV3 {
    num: u64,
    def_hash: u64,
    cursor: Option<String>,
    ready: bool,
    multikey: Vec<Vec<usize>>,
    covering: bool,
}

/// [`IndexMeta`] as stored before covering entries.
#[derive(Deserialize)]
struct IndexMetaV2 {
    num: u64,
    def_hash: u64,
    cursor: Option<String>,
    ready: bool,
    multikey: Vec<Vec<usize>>,
}

/// [`IndexMeta`] as stored before multikey paths were kept.
#[derive(Deserialize)]
struct IndexMetaV1 {
    num: u64,
    def_hash: u64,
    cursor: Option<String>,
    ready: bool,
}

impl IndexMeta {
    /// A stored state, also one written before nested arrays, covering entries or
    /// multikey paths were kept.
    pub fn decode(bytes: &[u8]) -> crate::Result<Self> {
        crate::records::decode::<IndexMeta>(bytes)
            .or_else(|_| {
                let IndexMetaV3 { num, def_hash, cursor, ready, multikey, covering } =
                    crate::records::decode(bytes)?;
                Ok(IndexMeta { num, def_hash, cursor, ready, multikey, covering, nested: None })
            })
            .or_else(|_: crate::Error| {
                let IndexMetaV2 { num, def_hash, cursor, ready, multikey } =
                    crate::records::decode(bytes)?;
                Ok(IndexMeta {
                    num,
                    def_hash,
                    cursor,
                    ready,
                    multikey,
                    covering: false,
                    nested: None,
                })
            })
            .or_else(|_: crate::Error| {
                let IndexMetaV1 { num, def_hash, cursor, ready } = crate::records::decode(bytes)?;
                let (multikey, covering) = (Vec::new(), false);
                Ok(IndexMeta { num, def_hash, cursor, ready, multikey, covering, nested: None })
            })
    }

    /// Whether no document indexed so far held an array inside the array at the end of
    /// field `field` (known only for an index stored since this is kept).
    pub fn flat_at(&self, field: usize) -> bool {
        self.nested.as_ref().is_some_and(|n| !n.contains(&field))
    }

    /// Whether a document made the index multikey.
    pub fn is_multikey(&self) -> bool {
        self.multikey.iter().any(|p| !p.is_empty())
    }

    /// This state with the array components `paths` (per field) added, if any is new; a
    /// component [`NESTED`] marks an array inside the field's last array.
    pub fn with_multikey(&self, paths: &[Vec<usize>]) -> Option<IndexMeta> {
        let mut merged = self.multikey.clone();
        merged.resize(merged.len().max(paths.len()), Vec::new());
        let mut nested = self.nested.clone();
        let mut changed = false;
        for (field, (into, from)) in merged.iter_mut().zip(paths).enumerate() {
            for component in from {
                if *component == NESTED {
                    if let Some(n) = nested.as_mut().filter(|n| !n.contains(&field)) {
                        n.push(field);
                        changed = true;
                    }
                } else if !into.contains(component) {
                    into.push(*component);
                    changed = true;
                }
            }
            into.sort_unstable();
        }
        changed.then(|| IndexMeta { multikey: merged, nested, ..self.clone() })
    }
}

/// A live index: its definition and build progress.
#[derive(Debug)]
pub struct Index {
    pub def: IndexDef,
    pub compiled: entries::Compiled,
    state: RwLock<IndexMeta>,
    /// Documents the builder has read so far in this process.
    built: AtomicU64,
    /// Queries that used the index since it was loaded or created (`$indexStats`).
    pub accesses: Accesses,
}

impl Index {
    pub fn new(def: IndexDef, meta: IndexMeta) -> Result<Self, String> {
        let compiled = entries::Compiled::new(&def)?;
        let (state, built) = (RwLock::new(meta), AtomicU64::new(0));
        Ok(Index { def, compiled, state, built, accesses: Accesses::default() })
    }

    pub fn num(&self) -> u64 {
        self.state.read().num
    }

    pub fn meta(&self) -> IndexMeta {
        self.state.read().clone()
    }

    pub fn is_ready(&self) -> bool {
        self.state.read().ready
    }

    /// Whether writes to `id` must maintain this index (the builder has passed it).
    pub fn covers(&self, id: &str) -> bool {
        let state = self.state.read();
        state.ready || state.cursor.as_deref().is_some_and(|c| id <= c)
    }

    pub fn built(&self) -> u64 {
        self.built.load(Ordering::Relaxed)
    }

    pub(crate) fn add_built(&self, docs: u64) {
        self.built.fetch_add(docs, Ordering::Relaxed);
    }

    pub(crate) fn set_meta(&self, meta: IndexMeta) {
        *self.state.write() = meta;
    }
}

/// The live indexes of one database.
#[derive(Debug, Default)]
pub struct Registry {
    indexes: RwLock<Arc<Vec<Arc<Index>>>>,
}

impl Registry {
    pub fn all(&self) -> Arc<Vec<Arc<Index>>> {
        self.indexes.read().clone()
    }

    pub fn replace(&self, indexes: Vec<Arc<Index>>) {
        *self.indexes.write() = Arc::new(indexes);
    }

    /// The index `name` of design document `ddoc`.
    pub fn get(&self, ddoc: &str, name: &str) -> Option<Arc<Index>> {
        self.all().iter().find(|i| i.def.ddoc == ddoc && i.def.name == name).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An index stored before its entries kept the covered fields loads as not covering.
    #[test]
    fn states_stored_before_covering_entries_do_not_cover() {
        #[derive(Serialize)]
        struct V2 {
            num: u64,
            def_hash: u64,
            cursor: Option<String>,
            ready: bool,
            multikey: Vec<Vec<usize>>,
        }
        let old = V2 { num: 7, def_hash: 9, cursor: None, ready: true, multikey: vec![vec![0]] };
        let meta = IndexMeta::decode(&crate::records::encode(&old)).unwrap();
        assert_eq!((meta.num, meta.ready, meta.covering), (7, true, false));
        assert_eq!(meta.multikey, vec![vec![0]]);
        let new = IndexMeta { covering: true, ..meta };
        assert_eq!(IndexMeta::decode(&crate::records::encode(&new)).unwrap(), new);
    }

    /// An index stored before nested arrays were kept knows nothing of them; a newer one
    /// records the fields a document nested an array at, and keeps them.
    #[test]
    fn nested_arrays_are_known_only_where_kept() {
        let old = IndexMetaV3 {
            num: 7,
            def_hash: 9,
            cursor: None,
            ready: true,
            multikey: vec![],
            covering: true,
        };
        let meta = IndexMeta::decode(&crate::records::encode(&old)).unwrap();
        assert_eq!((meta.covering, meta.nested.clone(), meta.flat_at(0)), (true, None, false));
        let kept = IndexMeta { nested: Some(Vec::new()), multikey: vec![vec![], vec![]], ..meta };
        assert!(kept.flat_at(1));
        let marked = kept.with_multikey(&[vec![], vec![0, NESTED]]).unwrap();
        assert_eq!(
            (marked.multikey.clone(), marked.nested.clone()),
            (vec![vec![], vec![0]], Some(vec![1]))
        );
        assert!(marked.flat_at(0) && !marked.flat_at(1));
        assert_eq!(marked.with_multikey(&[vec![], vec![0, NESTED]]), None, "nothing new");
        assert_eq!(IndexMeta::decode(&crate::records::encode(&marked)).unwrap(), marked);
    }
}
