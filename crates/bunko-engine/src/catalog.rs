//! The engine and its catalog of databases.
//!
//! Each database gets a numeric id when created; all its keys carry that id. Deleting a
//! database removes its catalog entry and writes a `Dropped` marker in one commit, then a
//! background thread removes its keys in bounded batches (resumed at the next start if the
//! server stops first).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use bunko_doc::body::Limits;
use bunko_doc::id::validate_db_name;
use bunko_storage::{Batch, Store};
use parking_lot::{Mutex, RwLock};

use crate::database::Database;
use crate::keys::{self, Key};
use crate::login::Logins;
use crate::records::{self, DbMeta};
use crate::security::UserCtx;
use crate::settings::Settings;
use crate::uuids::Uuids;
use crate::{Error, Result};

/// Engine settings.
#[derive(Debug, Clone)]
pub struct Config {
    pub limits: Limits,
    /// Largest total size of one partition's documents (Cloudant: 10 GiB).
    pub max_partition_size: u64,
    /// `revs_limit` of new databases.
    pub revs_limit: u64,
    /// PBKDF2 iterations for new `_users` passwords.
    pub pbkdf2_iterations: u32,
    /// PBKDF2 function of new `_users` passwords (`[chttpd_auth] pbkdf2_prf`).
    pub pbkdf2_prf: crate::users::Prf,
    /// Whether a login re-hashes a password stored with other settings
    /// (`[chttpd_auth] upgrade_hash_on_auth`, off by default as in CouchDB).
    pub upgrade_hash_on_auth: bool,
    /// Whether `_users`' `_security` may be changed (CouchDB's
    /// `[couchdb] users_db_security_editable`, off by default).
    pub users_db_security_editable: bool,
    /// How long a transaction may stay open (MongoDB's `transactionLifetimeLimitSeconds`).
    pub txn_lifetime: std::time::Duration,
    /// Most bytes of document bodies one transaction may buffer.
    pub txn_max_bytes: usize,
    /// Server admins: name and password (CouchDB's `[admins]`).
    pub admins: Vec<(String, String)>,
    /// Counting failed logins (CouchDB's `[chttpd_auth_lockout]`).
    pub lockout: crate::login::LockoutConfig,
    /// Largest attachment body in bytes (CouchDB's `[couchdb] max_attachment_size`).
    pub max_attachment_size: u64,
    /// Which attachments are stored gzipped (CouchDB's `[attachments] compressible_types`
    /// and `compression_level`).
    pub att_gzip: bunko_doc::gzip::Policy,
    /// Most documents one `_purge` request may name (CouchDB 3.4's
    /// `[purge] max_document_id_number`, 100).
    pub purge_max_ids: u64,
    /// Most revisions one `_purge` request may name (`[purge] max_revisions_number`, 1000).
    pub purge_max_revs: u64,
    /// The authentication database (CouchDB's `[chttpd_auth] authentication_db`, `_users`).
    pub users_db: String,
    /// Whether a user document with conflicts may log in
    /// (`[chttpd_auth] allow_conflicted_user_docs`, off by default).
    pub allow_conflicted_user_docs: bool,
    /// Requirements of new passwords (`[couch_httpd_auth] password_regexp`,
    /// `password_rules`).
    pub password_regexp: Option<String>,
    /// Bytes of documents a view build reads into one page (the memory budget's share,
    /// `bunko_storage::MemoryBudget`).
    pub view_page_bytes: u64,
}

impl Config {
    /// How new `_users` password hashes are made.
    pub fn hashing(&self) -> crate::users::Hashing {
        crate::users::Hashing { iterations: self.pbkdf2_iterations, prf: self.pbkdf2_prf }
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            limits: Limits::default(),
            max_partition_size: 10 << 30,
            revs_limit: 1000,
            pbkdf2_iterations: 600_000,
            pbkdf2_prf: crate::users::Prf::Sha256,
            upgrade_hash_on_auth: false,
            users_db_security_editable: false,
            txn_lifetime: std::time::Duration::from_secs(60),
            txn_max_bytes: 16 << 20,
            admins: Vec::new(),
            lockout: crate::login::LockoutConfig::default(),
            max_attachment_size: 1 << 30,
            att_gzip: bunko_doc::gzip::Policy::default(),
            purge_max_ids: 100,
            purge_max_revs: 1000,
            users_db: crate::users::USERS_DB.to_string(),
            allow_conflicted_user_docs: false,
            password_regexp: None,
            view_page_bytes: bunko_storage::MemoryBudget::DEFAULT.split().view_page_bytes,
        }
    }
}

/// The database engine: a store plus the catalog of databases in it.
pub struct Engine {
    store: Arc<dyn Store>,
    settings: Settings,
    dbs: RwLock<BTreeMap<String, Arc<Database>>>,
    /// Serializes catalog changes (create, delete).
    catalog: Mutex<u64>,
    logins: Logins,
    /// The search service text indexes are served by (see [`crate::find::text`]).
    text: crate::find::text::Hook,
    /// The indexes built above the engine (see [`crate::hooks`]).
    hooks: crate::hooks::Hooks,
    /// Each client's last query, for the advisor's rule 8 (in memory only).
    clients: Arc<crate::advisor::Clients>,
}

const NEXT_DB_ID: &str = "next_db_id";

impl Engine {
    /// Opens the engine over `store`, loading the catalog and resuming unfinished drops;
    /// temporary keys a crash left behind are removed first.
    pub fn open(store: Arc<dyn Store>, config: Config) -> Result<Engine> {
        crate::spill::remove_all(store.as_ref())?;
        let settings = Settings::open(store.as_ref(), config)?;
        let config = settings.live().clone();
        let clients = Arc::new(crate::advisor::Clients::default());
        let mut dbs = BTreeMap::new();
        let text = crate::find::text::Hook::default();
        let hooks = crate::hooks::Hooks::default();
        for entry in bunko_storage::Iter::new(store.snapshot(), keys::db_range(), false, 256) {
            let (_, value) = entry?;
            let meta = DbMeta::decode(&value)?;
            let (config, clients, text, hooks) =
                (config.clone(), clients.clone(), text.clone(), hooks.clone());
            let db = Database::load(store.clone(), config, clients, meta, text, hooks)?;
            dbs.insert(db.name().to_string(), db);
        }
        let next_id = match store.get(&Key::Meta(NEXT_DB_ID).encode())? {
            Some(bytes) => records::decode(&bytes)?,
            None => 1,
        };
        let now = config.get();
        let logins = Logins::new(now.admins.clone(), now.lockout.clone());
        let catalog = Mutex::new(next_id);
        let dbs = RwLock::new(dbs);
        let engine = Engine { store, settings, dbs, catalog, logins, text, hooks, clients };
        engine.resume_drops()?;
        Ok(engine)
    }

    /// Registers the search service that builds and searches Mango text indexes (once;
    /// a second registration is ignored).
    pub fn set_text_search(&self, search: Arc<dyn crate::find::text::TextSearch>) {
        let _ = self.text.set(search);
    }

    /// Registers an index kind built above the engine (views): it hears of every open
    /// database now, and of every database created and every commit from now on.
    pub fn add_index_hooks(&self, hooks: Arc<dyn crate::hooks::IndexHooks>) {
        self.hooks.write().push(hooks.clone());
        let dbs: Vec<Arc<Database>> = self.dbs.read().values().cloned().collect();
        for db in &dbs {
            hooks.opened(db);
        }
    }

    /// Whether text indexes can be served (`GET /` then lists `search`).
    pub fn has_text_search(&self) -> bool {
        self.text.get().is_some()
    }

    /// The current settings (they change at run time through [`Engine::set_config`]).
    pub fn config(&self) -> Arc<Config> {
        self.settings.live().get()
    }

    /// The settings as `section/key` strings (`/_node/{node}/_config`).
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Serializes catalog and settings changes.
    pub(crate) fn catalog_lock(&self) -> parking_lot::MutexGuard<'_, u64> {
        self.catalog.lock()
    }

    /// The name of the authentication database (`[chttpd_auth] authentication_db`).
    pub fn users_db_name(&self) -> String {
        self.config().users_db.clone()
    }

    /// Creates the authentication database if it is missing and makes sure it holds
    /// `_design/_auth` (at start-up, as `ctx`: the server).
    pub fn ensure_users_db(&self, ctx: &UserCtx) -> Result<()> {
        let name = self.users_db_name();
        let db = match self.get_db(&name) {
            Some(db) => db,
            None => self.create_db(ctx, &name, false)?,
        };
        crate::users::ensure_auth_ddoc(&db, ctx);
        Ok(())
    }

    /// Server admins, password checks and the login lockout, for every protocol.
    pub fn logins(&self) -> &Logins {
        &self.logins
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// Returns once every write applied so far, by any caller, is durable (an empty
    /// commit: group commit syncs in apply order). For answering from what a write that
    /// may still be waiting for its sync left behind, such as a retried MongoDB write's
    /// kept reply. Fails if a sync failed.
    pub fn sync_applied(&self) -> Result<()> {
        Ok(self.store.commit(Batch::new())?)
    }

    /// A consistent view of every database as of now (one storage snapshot).
    pub fn snapshot(&self) -> bunko_storage::Snapshot {
        self.store.snapshot()
    }

    /// Temporary keys for a query operator past its memory budget, removed when dropped.
    pub fn spill(&self) -> crate::spill::Spill {
        crate::spill::Spill::new(self.store.clone())
    }

    /// Server-generated document ids (CouchDB's `sequential` algorithm).
    pub fn uuids(&self) -> &Uuids {
        crate::uuids::global()
    }

    /// Creates a database as `ctx`, a server admin (`412 file_exists` if it exists).
    pub fn create_db(&self, ctx: &UserCtx, name: &str, partitioned: bool) -> Result<Arc<Database>> {
        let mut next_id = self.catalog.lock();
        let meta = self.new_meta(ctx, name, partitioned, &next_id)?;
        let mut batch = Batch::new();
        batch.put(Key::Db(name).encode(), records::encode(&meta));
        batch.put(Key::Meta(NEXT_DB_ID).encode(), records::encode(&(*next_id + 1)));
        self.store.commit(batch)?;
        *next_id += 1;
        let db = self.load(meta)?;
        self.dbs.write().insert(name.to_string(), db.clone());
        drop(next_id);
        crate::db_updates::global().note("created", name);
        if db.is_users_db() {
            crate::users::ensure_auth_ddoc(&db, ctx);
        }
        Ok(db)
    }

    /// The catalog record of a new database `name`, checked as `ctx` may create it, with
    /// the next free id (the caller holds the catalog lock, `next_id`).
    fn new_meta(
        &self,
        ctx: &UserCtx,
        name: &str,
        partitioned: bool,
        next_id: &u64,
    ) -> Result<DbMeta> {
        let security = crate::gate::admit_create_db(ctx, name)?;
        validate_db_name(name)?;
        if partitioned && name.starts_with('_') {
            return Err(Error::BadRequest("Cannot partition a system database".to_string()));
        }
        if self.dbs.read().contains_key(name) {
            return Err(Error::FileExists);
        }
        Ok(DbMeta {
            id: *next_id,
            name: name.to_string(),
            created_us: now_us(),
            partitioned,
            revs_limit: self.config().revs_limit,
            security: security.unwrap_or_else(|| {
                r#"{"members":{"roles":["_admin"]},"admins":{"roles":["_admin"]}}"#.to_string()
            }),
            renamed: None,
        })
    }

    fn load(&self, meta: DbMeta) -> Result<Arc<Database>> {
        let (live, clients) = (self.settings.live().clone(), self.clients.clone());
        let (text, hooks) = (self.text.clone(), self.hooks.clone());
        Database::load(self.store.clone(), live, clients, meta, text, hooks)
    }

    /// A database that a transaction creates ([`crate::Transaction::create_db`]): checked
    /// as [`Engine::create_db`] checks, with its own id, but in no catalog until
    /// [`Engine::attach`] writes it in the transaction's commit.
    pub(crate) fn prepare_db(&self, ctx: &UserCtx, name: &str) -> Result<Arc<Database>> {
        let mut next_id = self.catalog.lock();
        let meta = self.new_meta(ctx, name, false, &next_id)?;
        let mut batch = Batch::new();
        batch.put(Key::Meta(NEXT_DB_ID).encode(), records::encode(&(*next_id + 1)));
        self.store.commit(batch)?;
        *next_id += 1;
        let db = self.load(meta)?;
        db.set_pending(true);
        Ok(db)
    }

    /// Puts the catalog records of `created` (from [`Engine::prepare_db`]) into `batch`,
    /// under the catalog lock it returns; a name someone else created meanwhile is a
    /// conflict. [`Engine::attached`] then registers them once the batch is applied.
    pub(crate) fn attach(
        &self,
        created: &[Arc<Database>],
        batch: &mut Batch,
    ) -> Result<parking_lot::MutexGuard<'_, u64>> {
        let guard = self.catalog.lock();
        for db in created {
            let meta = db.meta();
            if self.dbs.read().contains_key(&meta.name) {
                return Err(Error::TxnConflict(format!(
                    "database {} was created meanwhile",
                    meta.name
                )));
            }
            batch.put(Key::Db(&meta.name).encode(), records::encode(&meta));
        }
        Ok(guard)
    }

    /// Registers the databases [`Engine::attach`] wrote, their batch applied.
    pub(crate) fn attached(&self, created: &[Arc<Database>]) {
        for db in created {
            db.set_pending(false);
            self.dbs.write().insert(db.name().to_string(), db.clone());
            crate::db_updates::global().note("created", &db.name());
        }
    }

    /// Deletes a database as `ctx`, a server admin; its keys are removed in the background.
    pub fn delete_db(&self, ctx: &UserCtx, name: &str) -> Result<()> {
        crate::gate::admit_server_admin(ctx)?;
        let guard = self.catalog.lock();
        let dropped = self.drop_locked(name)?;
        drop(guard);
        dropped.notify_dropped();
        // CouchDB's auth cache restarts on such an event and then follows the configured
        // authentication database, making sure it holds `_design/_auth`.
        if let Some(users) = self.get_db(&self.users_db_name()) {
            crate::users::ensure_auth_ddoc(&users, ctx);
        }
        Ok(())
    }

    /// Renames a database as `ctx`, a server admin (MongoDB's `renameCollection`). Its keys
    /// are keyed by its id, so only the catalog entry moves, recording the rename
    /// ([`crate::records::Renamed`]). An existing `to` is `412 file_exists` unless
    /// `drop_target`, which deletes it first.
    pub fn rename_db(&self, ctx: &UserCtx, from: &str, to: &str, drop_target: bool) -> Result<()> {
        crate::gate::admit_server_admin(ctx)?;
        validate_db_name(to)?;
        let guard = self.catalog.lock();
        let db = self.db(from)?;
        let mut dropped = None;
        if self.get_db(to).is_some() {
            if !drop_target {
                return Err(Error::FileExists);
            }
            dropped = Some(self.drop_locked(to)?);
        }
        let renamed = db.rename(to, dropped.as_ref().map(|d| d.id()));
        if renamed.is_ok() {
            let mut dbs = self.dbs.write();
            dbs.remove(from);
            dbs.insert(to.to_string(), db);
        }
        drop(guard);
        if let Some(dropped) = dropped {
            dropped.notify_dropped();
        }
        renamed
    }

    /// [`Engine::delete_db`] under the catalog lock; returns the deleted database, whose
    /// hooks the caller tells once the lock is released.
    fn drop_locked(&self, name: &str) -> Result<Arc<Database>> {
        let db = self.db(name)?;
        let mut batch = Batch::new();
        batch.delete(Key::Db(name).encode());
        batch.put(Key::Dropped(db.id()).encode(), Vec::new());
        db.drop_with(batch)?;
        self.dbs.write().remove(name);
        self.spawn_drop(db.id());
        crate::db_updates::global().note("deleted", name);
        Ok(db)
    }

    /// The database called `name`, or `404 not_found`.
    pub fn db(&self, name: &str) -> Result<Arc<Database>> {
        self.get_db(name).ok_or_else(|| Error::NotFound("Database does not exist.".to_string()))
    }

    pub fn get_db(&self, name: &str) -> Option<Arc<Database>> {
        self.dbs.read().get(name).cloned()
    }

    /// All database names, sorted.
    pub fn db_names(&self) -> Vec<String> {
        self.dbs.read().keys().cloned().collect()
    }

    /// A server-wide value stored under `Meta(name)`, created by `init` if absent.
    pub fn meta_or_init(&self, name: &str, init: impl FnOnce() -> Vec<u8>) -> Result<Vec<u8>> {
        let _guard = self.catalog.lock();
        let key = Key::Meta(name).encode();
        if let Some(value) = self.store.get(&key)? {
            return Ok(value);
        }
        let value = init();
        let mut batch = Batch::new();
        batch.put(key, value.clone());
        self.store.commit(batch)?;
        Ok(value)
    }

    /// The values of the server-wide records whose name starts with `prefix` (a front
    /// end's state that must survive restarts, such as MongoDB's retryable-write replies).
    pub fn metas(&self, prefix: &str) -> Result<Vec<Vec<u8>>> {
        let range = keys::meta_prefix(prefix);
        let entries = bunko_storage::Iter::new(self.store.snapshot(), range, false, 256);
        entries.map(|entry| Ok(entry?.1)).collect()
    }

    /// The server-wide record `name`, if there is one.
    pub fn meta(&self, name: &str) -> Result<Option<Vec<u8>>> {
        Ok(self.store.get(&Key::Meta(name).encode())?)
    }

    /// Sets the server-wide record `name` and returns once it is durable (a synced commit
    /// of its own, shared with concurrent ones by the group commit), for a value that must
    /// be on disk before it is used.
    pub fn set_meta_durably(&self, name: &str, value: Vec<u8>) -> Result<()> {
        let mut batch = Batch::new();
        batch.put(Key::Meta(name).encode(), value);
        self.store.commit(batch)?;
        Ok(())
    }

    /// Sets (`Some`) or removes the server-wide record `name`. The change is applied at
    /// once and made durable by the next synced commit (its caller's own write, synced
    /// before, comes first): it waits for no sync of its own, so a crash may lose it, but
    /// not a clean restart.
    pub fn set_meta(&self, name: &str, value: Option<Vec<u8>>) -> Result<()> {
        let mut batch = Batch::new();
        let key = Key::Meta(name).encode();
        match value {
            Some(value) => batch.put(key, value),
            None => batch.delete(key),
        }
        self.store.apply(batch)?;
        Ok(())
    }

    fn resume_drops(&self) -> Result<()> {
        let snapshot = self.store.snapshot();
        for entry in bunko_storage::Iter::new(snapshot, keys::dropped_range(), false, 256) {
            let (key, _) = entry?;
            self.spawn_drop(keys::decode_dropped(&key)?);
        }
        let snapshot = self.store.snapshot();
        for entry in bunko_storage::Iter::new(snapshot, keys::idx_dropped_range(), false, 256) {
            let (key, _) = entry?;
            let (db, num) = keys::decode_idx_dropped(&key)?;
            spawn_index_drop(self.store.clone(), db, num);
        }
        Ok(())
    }

    fn spawn_drop(&self, db_id: u64) {
        let store = self.store.clone();
        std::thread::spawn(move || {
            if let Err(err) = remove_db_keys(store.as_ref(), db_id) {
                tracing::warn!(db_id, %err, "removing a dropped database's keys failed");
            }
        });
    }
}

/// Removes the entries of a dropped index in the background.
pub(crate) fn spawn_index_drop(store: Arc<dyn Store>, db: u64, num: u64) {
    std::thread::spawn(move || {
        if let Err(err) = crate::index::build::remove_index_entries(store.as_ref(), db, num) {
            tracing::warn!(db, num, %err, "removing a dropped index's entries failed");
        }
    });
}

/// Removes every key of a dropped database in batches, then its `Dropped` marker.
fn remove_db_keys(store: &dyn Store, db_id: u64) -> Result<()> {
    for range in keys::all_db_ranges(db_id) {
        remove_range(store, &range)?;
    }
    let mut batch = Batch::new();
    batch.delete(Key::Dropped(db_id).encode());
    store.commit(batch)?;
    Ok(())
}

/// Removes every key of `range`, a thousand per commit.
/// Each page starts after the last key removed, so the scan never walks back over the
/// deletion markers it left (which made removing a large range quadratic).
pub fn remove_range(store: &dyn Store, range: &bunko_storage::Range) -> Result<()> {
    let mut range = range.clone();
    loop {
        let page = store.scan(&range, false, 1000)?;
        let Some((last, _)) = page.last() else {
            return Ok(());
        };
        range.0 = std::ops::Bound::Excluded(last.clone());
        let mut batch = Batch::new();
        for (key, _) in page {
            batch.delete(key);
        }
        store.commit(batch)?;
    }
}

pub(crate) fn now_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
}
