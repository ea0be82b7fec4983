//! The engine's side of the secondary indexes built above it from the change sequence
//! (JavaScript views in `bunko-views`): what they must hear of, and where they keep their
//! per-database state.
//!
//! Such an index is not maintained in the writing commit, so the engine only tells it
//! that something happened ([`IndexHooks`]): a database was opened (at registration for
//! every open database, then for each one created), or a commit was applied (with whether
//! design documents changed). Everything else the index does itself, through the
//! database's public reads and its store. Its state per database lives in the database
//! handle ([`Database::extension`]), so it goes when the handle goes.
//!
//! Dropping a database needs no hook: [`crate::keys::all_db_ranges`] covers the key
//! tags reserved for these indexes ([`crate::keys::VIEW_META`] …), and a background
//! update stops once [`Database::is_dropped`].

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

    /// Records what it hears: `opened <db>`, `written <db> <ddocs_changed>`.
    #[derive(Default)]
    struct Recorder(Mutex<Vec<String>>);

    impl IndexHooks for Recorder {
        fn opened(&self, db: &Arc<Database>) {
            self.0.lock().push(format!("opened {}", db.name()));
        }
        fn written(&self, db: &Arc<Database>, ddocs_changed: bool) {
            self.0.lock().push(format!("written {} {ddocs_changed}", db.name()));
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
