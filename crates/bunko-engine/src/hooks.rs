//! The engine's side of the secondary indexes built above it from the change sequence
//! (JavaScript views in `bunko-views`): what they must hear of, and where they keep their
//! per-database state.
//!
//! Such an index is not maintained in the writing commit, so the engine only tells it
//! that something happened ([`IndexHooks`]): a database was opened (at registration for
//! every open database, then for each one created), a commit was applied (with whether
//! design documents changed), or a database was deleted. Everything else the index does
//! itself, through the database's public reads and its store. Its state per database
//! lives in the database handle ([`Database::extension`]), so it goes when the handle goes.
//!
//! What an index keeps in the store goes with a deleted database without a hook:
//! [`crate::keys::all_db_ranges`] covers the key tags reserved for these indexes
//! ([`crate::keys::VIEW_META`] …), and a background update stops once
//! [`Database::is_dropped`]. An index kept outside the store (search's tantivy
//! directories) removes it when it hears [`IndexHooks::dropped`], as CouchDB's search
//! index manager does on the database's `deleted` event.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::RwLock;

use crate::database::Database;

/// A kind of secondary index built above the engine, as the engine sees it.
pub trait IndexHooks: Send + Sync {
    /// `db` was opened: when the hooks are registered (for every open database) and when
    /// a database is created. A database created while the hooks are being registered
    /// may be announced twice.
    fn opened(&self, db: &Arc<Database>);

    /// A commit to `db` was applied; `ddocs_changed` when it wrote design documents.
    fn written(&self, db: &Arc<Database>, ddocs_changed: bool);

    /// `db` was deleted (by `DELETE /{db}`, or by a rename that replaced it): the deletion
    /// is durable and [`Database::is_dropped`] holds. Its id is never given to another
    /// database, so whatever the index keeps under that id can go.
    fn dropped(&self, db: &Arc<Database>) {
        let _ = db;
    }
}

/// The registered hooks, shared by every database of an engine.
pub(crate) type Hooks = Arc<RwLock<Vec<Arc<dyn IndexHooks>>>>;

/// State that layers above the engine keep per database, one value per type.
#[derive(Default)]
pub(crate) struct Extensions {
    values: RwLock<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>,
}

impl std::fmt::Debug for Extensions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extensions").field("len", &self.values.read().len()).finish()
    }
}

impl Database {
    /// The state of type `T` a layer above keeps for this database, made by `init` the
    /// first time it is asked for.
    pub fn extension<T: Any + Send + Sync>(&self, init: impl FnOnce() -> T) -> Arc<T> {
        let id = TypeId::of::<T>();
        let found = self.extensions.values.read().get(&id).cloned();
        let value = match found {
            Some(value) => value,
            None => {
                self.extensions.values.write().entry(id).or_insert_with(|| Arc::new(init())).clone()
            }
        };
        match value.downcast::<T>() {
            Ok(value) => value,
            Err(_) => unreachable!("extensions are stored under their own type id"),
        }
    }

    /// Tells every registered hook that a commit was applied.
    pub(crate) fn notify_written(self: &Arc<Self>, ddocs_changed: bool) {
        let hooks = self.hooks.read().clone();
        for hook in hooks {
            hook.written(self, ddocs_changed);
        }
    }

    /// Tells every registered hook that this database was deleted.
    pub(crate) fn notify_dropped(self: &Arc<Self>) {
        let hooks = self.hooks.read().clone();
        for hook in hooks {
            hook.dropped(self);
        }
    }

    /// Tells every registered hook that this database was opened.
    pub(crate) fn notify_opened(self: &Arc<Self>) {
        let hooks = self.hooks.read().clone();
        for hook in hooks {
            hook.opened(self);
        }
    }
}

#[cfg(test)]
mod tests {
    use bunko_storage::Memory;
    use parking_lot::Mutex;

    use super::*;
    use crate::security::UserCtx;
    use crate::{Config, Engine, WriteOptions};

    /// Records what it hears: `opened <db>`, `written <db> <ddocs_changed>`,
    /// `dropped <db> <is_dropped>`.
    #[derive(Default)]
    struct Recorder(Mutex<Vec<String>>);

    impl IndexHooks for Recorder {
        fn opened(&self, db: &Arc<Database>) {
            self.0.lock().push(format!("opened {}", db.name()));
        }
        fn written(&self, db: &Arc<Database>, ddocs_changed: bool) {
            self.0.lock().push(format!("written {} {ddocs_changed}", db.name()));
        }
        fn dropped(&self, db: &Arc<Database>) {
            self.0.lock().push(format!("dropped {} {}", db.name(), db.is_dropped()));
        }
    }

    fn put(db: &Database, json: &str) -> crate::Result<()> {
        let doc = bunko_doc::body::parse(json.as_bytes(), &Default::default())?;
        db.put(&UserCtx::admin("test"), doc, WriteOptions::default()).map(drop)
    }

    #[test]
    fn hooks_hear_open_databases_new_ones_and_commits() -> crate::Result<()> {
        let admin = UserCtx::admin("test");
        let engine = Engine::open(Arc::new(Memory::new()), Config::default())?;
        let old = engine.create_db(&admin, "old", false)?;
        let recorder = Arc::new(Recorder::default());
        engine.add_index_hooks(recorder.clone());
        let new = engine.create_db(&admin, "new", false)?;
        put(&new, r#"{"_id": "a"}"#)?;
        put(&old, r#"{"_id": "_design/d", "views": {}}"#)?;
        let heard = recorder.0.lock().clone();
        assert_eq!(heard, ["opened old", "opened new", "written new false", "written old true"]);
        Ok(())
    }

    #[test]
    fn hooks_hear_deletions_and_renames_that_replace_a_database() -> crate::Result<()> {
        let admin = UserCtx::admin("test");
        let engine = Engine::open(Arc::new(Memory::new()), Config::default())?;
        for name in ["gone", "from", "to"] {
            engine.create_db(&admin, name, false)?;
        }
        let recorder = Arc::new(Recorder::default());
        engine.add_index_hooks(recorder.clone());
        recorder.0.lock().clear();
        engine.delete_db(&admin, "gone")?;
        // A rename that fails or replaces nothing deletes nothing.
        assert!(engine.rename_db(&admin, "from", "to", false).is_err());
        engine.create_db(&admin, "other", false)?;
        engine.rename_db(&admin, "other", "elsewhere", false)?;
        engine.rename_db(&admin, "from", "to", true)?;
        let heard = recorder.0.lock().clone();
        assert_eq!(heard, ["dropped gone true", "opened other", "dropped to true"]);
        Ok(())
    }

    #[test]
    fn an_extension_is_made_once_per_database() -> crate::Result<()> {
        let admin = UserCtx::admin("test");
        let engine = Engine::open(Arc::new(Memory::new()), Config::default())?;
        let (a, b) = (engine.create_db(&admin, "a", false)?, engine.create_db(&admin, "b", false)?);
        let first = a.extension(|| Mutex::new(1u32));
        *first.lock() = 2;
        assert_eq!(*a.extension(|| Mutex::new(7u32)).lock(), 2, "the same value");
        assert_eq!(*b.extension(|| Mutex::new(7u32)).lock(), 7, "another database's own");
        Ok(())
    }
}
