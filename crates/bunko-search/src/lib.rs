//! Cloudant Search (CouchDB's `_search`) over tantivy: full-text indexes defined by design
//! documents, built from the change sequence through the index framework
//! ([`bunko_indexer`]), above the engine so that an embedder who needs no full-text
//! search does not compile it.
//!
//! A request for `GET /{db}/_design/{ddoc}/_search/{index}` goes:
//! 1. [`Search::index`] reads the design document's index definition ([`def`]), whose
//!    signature names the index, and opens (or creates, or rebuilds) its tantivy index
//!    in `<root>/<database id>/<signature>` ([`index`]); the registry keeps it open;
//! 2. with `update=true` (the default) the index catches up with the database: each page
//!    of changes runs the `index` function in the JavaScript sandbox (`bunko-js`), deletes
//!    the documents' old entries and adds their new ones, and commits with the seq it
//!    reached as the commit's payload, which is the checkpoint;
//! 3. [`query`] compiles the Lucene query (`compile.rs`), runs it, and shapes Cloudant's
//!    answer (sort, bookmark, facets, groups, highlights).
//!
//! A background thread per database waits on the database's change notification and
//! updates its registered indexes after writes; progress shows in `_active_tasks`
//! ([`Search::tasks`]). `_search_cleanup` removes the directories of indexes no design
//! document defines ([`Search::cleanup`]). A deleted database's indexes go with it: the
//! engine tells the service ([`Search::register`]), which closes them and removes their
//! directory, as CouchDB's search index manager has Clouseau clean up on a database's
//! `deleted` event; directories of databases deleted while the server was down go at
//! start-up ([`Search::remove_dropped`]).
//!
//! Cloudant Geo ([`geo`]: `st_indexes`, `_geo`) shares the registry, the background
//! updater and the cleanup, and so do Mango `text` indexes ([`mango`]): entries of
//! `indexes` whose `index` is an object, built from each document's fields and searched
//! by the engine's `_find` through [`MangoText`].

pub mod analyzer;
mod compile;
pub mod def;
pub mod geo;
mod geo_store;
mod highlight;
pub mod index;
#[cfg(feature = "japanese")]
mod japanese;
pub mod mango;
pub mod query;
mod ranked;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Weak};

use bunko_engine::changes::{ChangesFilter, ChangesQuery};
use bunko_engine::hooks::IndexHooks;
use bunko_engine::security::UserCtx;
use bunko_engine::{Database, Engine, Error, Result};
use bunko_indexer::{Task, Update};
use parking_lot::Mutex;
use serde_json::{Map, Value, json};

pub use def::IndexDef;
pub use geo::{GeoDef, GeoIndex, GeoQuery};
pub use index::SearchIndex;
pub use mango::MangoText;
pub use query::SearchQuery;

/// The search indexes of every database: where they live and which are open.
#[derive(Debug)]
pub struct Search {
    /// Directory of the indexes; `None` keeps them in memory.
    root: Option<PathBuf>,
    /// Open indexes by database id and signature.
    open: Mutex<HashMap<(u64, String), Arc<SearchIndex>>>,
    /// Open geo indexes by database id and signature.
    geo: Mutex<HashMap<(u64, String), Arc<GeoIndex>>>,
    /// Databases whose background updater runs.
    watched: Mutex<HashSet<u64>>,
    /// Held while an index is opened and while a deleted database's indexes are taken
    /// out of the maps, so that no index of a deleted database is opened (and its
    /// directory made again) after they are.
    opening: Mutex<()>,
}

impl Search {
    /// Indexes under `root` (or in memory).
    pub fn new(root: Option<PathBuf>) -> Arc<Search> {
        Arc::new(Search {
            root,
            open: Mutex::default(),
            geo: Mutex::default(),
            watched: Mutex::default(),
            opening: Mutex::default(),
        })
    }

    /// Registers the service with `engine`, which then tells it of every database deleted
    /// ([`IndexHooks::dropped`]): the database's indexes are closed once any running
    /// update stops, and its index directory is removed (a geo index's entries in the
    /// store too), in the background.
    pub fn register(self: &Arc<Self>, engine: &Engine) {
        engine.add_index_hooks(Arc::new(Hooks(Arc::downgrade(self))));
    }

    /// Index `name` of design document `ddoc`, opened and registered.
    pub fn index(
        self: &Arc<Self>,
        db: &Arc<Database>,
        ddoc: &str,
        name: &str,
    ) -> Result<Arc<SearchIndex>> {
        let body = design_body(db, ddoc)?;
        let def = IndexDef::from_ddoc(ddoc, &body, name, db.is_partitioned())?;
        let key = (db.id(), def.sig.clone());
        if let Some(index) = self.open.lock().get(&key) {
            return Ok(index.clone());
        }
        let opening = self.opening.lock();
        refuse_dropped(db)?;
        let dir = self.root.as_ref().map(|r| r.join(db.id().to_string()).join(&def.sig));
        let index = Arc::new(SearchIndex::open(def, dir.as_deref())?);
        let index = self.open.lock().entry(key).or_insert(index).clone();
        drop(opening);
        self.watch(db);
        Ok(index)
    }

    /// Answers a search; `partition` is the partition of a `/_partition/{p}/` route;
    /// `include_docs` shows documents as `reader` sees them.
    pub fn search(
        self: &Arc<Self>,
        reader: &UserCtx,
        db: &Arc<Database>,
        ddoc: &str,
        name: &str,
        q: &SearchQuery,
        partition: Option<&str>,
    ) -> Result<Value> {
        let index = self.index(db, ddoc, name)?;
        match (index.def.partitioned, partition) {
            (true, None) => {
                return Err(Error::BadRequest(
                    "`partition` parameter is mandatory for queries to this index.".into(),
                ));
            }
            (false, Some(_)) => {
                return Err(Error::BadRequest("`partition` not supported on this index".into()));
            }
            _ => {}
        }
        if q.update == Update::True {
            index.update(db)?;
        }
        let answer = query::run(&index, q, partition, &|id| load_doc(db, reader, id));
        // `update_after`: answer first, so that the update cannot overtake the read.
        if q.update == Update::Lazy {
            let (db, index) = (db.clone(), index.clone());
            std::thread::spawn(move || log(index.update(&db)));
        }
        answer
    }

    /// `GET /{db}/_design/{ddoc}/_search_info/{index}`.
    pub fn info(self: &Arc<Self>, db: &Arc<Database>, ddoc: &str, name: &str) -> Result<Value> {
        let index = self.index(db, ddoc, name)?;
        let searcher = index.reader.searcher();
        let doc_count = searcher.num_docs();
        let deleted: u64 =
            searcher.segment_readers().iter().map(|s| u64::from(s.num_deleted_docs())).sum();
        let disk_size = match &self.root {
            Some(root) => dir_size(&root.join(db.id().to_string()).join(&index.def.sig)),
            None => 0,
        };
        let seq = index.seq();
        Ok(json!({
            "name": format!("{ddoc}/{name}"),
            "search_index": {
                "pending_seq": db.update_seq(),
                "doc_del_count": deleted,
                "doc_count": doc_count,
                "disk_size": disk_size,
                "committed_seq": seq,
                "signature": index.def.sig,
            }
        }))
    }

    /// Geo index `name` of design document `ddoc` (`st_indexes`), opened and registered.
    pub fn geo_index(
        self: &Arc<Self>,
        db: &Arc<Database>,
        ddoc: &str,
        name: &str,
    ) -> Result<Arc<GeoIndex>> {
        let body = design_body(db, ddoc)?;
        let def = GeoDef::from_ddoc(ddoc, &body, name)?;
        let key = (db.id(), def.sig.clone());
        if let Some(index) = self.geo.lock().get(&key) {
            return Ok(index.clone());
        }
        let opening = self.opening.lock();
        refuse_dropped(db)?;
        let index = Arc::new(GeoIndex::open(def, db)?);
        let index = self.geo.lock().entry(key).or_insert(index).clone();
        drop(opening);
        self.watch(db);
        Ok(index)
    }

    /// Answers `GET /{db}/_design/{ddoc}/_geo/{index}`.
    pub fn geo(
        self: &Arc<Self>,
        reader: &UserCtx,
        db: &Arc<Database>,
        ddoc: &str,
        name: &str,
        q: &GeoQuery,
    ) -> Result<Value> {
        let index = self.geo_index(db, ddoc, name)?;
        if q.update == Update::True {
            index.update(db)?;
        }
        let answer = geo::run(&index, db, q, &|id| load_doc(db, reader, id));
        // `update_after`: answer first, so that the update cannot overtake the read.
        if q.update == Update::Lazy {
            let (db, index) = (db.clone(), index.clone());
            std::thread::spawn(move || log(index.update(&db)));
        }
        answer
    }

    /// `GET /{db}/_design/{ddoc}/_geo_info/{index}`.
    pub fn geo_info(self: &Arc<Self>, db: &Arc<Database>, ddoc: &str, name: &str) -> Result<Value> {
        let index = self.geo_index(db, ddoc, name)?;
        let size = index.disk_size(db);
        Ok(json!({
            "name": format!("{ddoc}/{name}"),
            "geo_index": {"doc_count": index.doc_count(), "disk_size": size, "data_size": size}
        }))
    }

    /// `POST /{db}/_search_cleanup`: removes the indexes of `db` no design document
    /// defines any more; returns how many.
    pub fn cleanup(&self, db: &Database) -> Result<usize> {
        let designs = design_docs(db)?;
        let live: HashSet<String> = designs
            .iter()
            .flat_map(|(id, body)| IndexDef::sigs_of(id, body, db.is_partitioned()))
            .collect();
        let live_geo: HashSet<String> =
            designs.iter().flat_map(|(id, body)| GeoDef::sigs_of(id, body)).collect();
        let mut retired = Vec::new();
        self.geo.lock().retain(|(db_id, sig), index| {
            let keep = *db_id != db.id() || live_geo.contains(sig);
            if !keep {
                retired.push(index.clone());
            }
            keep
        });
        for index in retired {
            index.retire(db)?;
        }
        for sig in geo_store::stored_sigs(db)? {
            if !live_geo.contains(&sig) {
                geo_store::GeoKeys::new(db.id(), &sig).clear(db)?;
            }
        }
        let mut removed = 0;
        self.open.lock().retain(|(db_id, sig), _| {
            let keep = *db_id != db.id() || live.contains(sig);
            removed += usize::from(!keep);
            keep
        });
        if let Some(root) = &self.root {
            let dir = root.join(db.id().to_string());
            let entries = std::fs::read_dir(&dir).into_iter().flatten().flatten();
            let mut on_disk = 0;
            for entry in entries {
                let sig = entry.file_name().to_string_lossy().into_owned();
                if sig.starts_with("geo-") {
                    // Geo indexes were kept in files before they moved into the store.
                    std::fs::remove_file(entry.path())
                        .map_err(|e| Error::Unknown(format!("removing geo index: {e}")))?;
                } else if !live.contains(&sig) {
                    std::fs::remove_dir_all(entry.path())
                        .map_err(|e| Error::Unknown(format!("removing search index: {e}")))?;
                    on_disk += 1;
                }
            }
            removed = removed.max(on_disk);
        }
        Ok(removed)
    }

    /// The running search index updates, for `GET /_active_tasks`.
    pub fn tasks(&self, name_of: &dyn Fn(u64) -> Option<String>) -> Vec<Task> {
        let task = |db: u64, ddoc: &str, name: &str, activity: &bunko_indexer::Activity| {
            Some(Task {
                database: name_of(db)?,
                design_document: ddoc.to_string(),
                index: Some(name.to_string()),
                progress: activity.get()?,
            })
        };
        let mut tasks: Vec<Task> = (self.open.lock().iter())
            .filter_map(|((db, _), i)| task(*db, &i.def.ddoc, &i.def.name, &i.activity))
            .collect();
        tasks.extend(
            (self.geo.lock().iter())
                .filter_map(|((db, _), i)| task(*db, &i.def.ddoc, &i.def.name, &i.activity)),
        );
        tasks
    }

    /// Opens every search index of every design document of `db` (at start-up), so the
    /// background updater keeps them current.
    pub fn load(self: &Arc<Self>, db: &Arc<Database>) -> Result<()> {
        for (id, body) in design_docs(db)? {
            if let Some(Value::Object(indexes)) = body.get("indexes") {
                for name in indexes.keys() {
                    if let Err(err) = self.index(db, &id, name) {
                        tracing::warn!(%err, ddoc = id, name, "search index not opened");
                    }
                }
            }
            if let Some(Value::Object(indexes)) = body.get("st_indexes") {
                for name in indexes.keys() {
                    if let Err(err) = self.geo_index(db, &id, name) {
                        tracing::warn!(%err, ddoc = id, name, "geo index not opened");
                    }
                }
            }
        }
        Ok(())
    }

    /// Starts `db`'s background updater unless it runs: a thread that waits for the
    /// database's next durable change and then updates each of its open indexes, until
    /// the database is deleted.
    fn watch(self: &Arc<Self>, db: &Arc<Database>) {
        if !self.watched.lock().insert(db.id()) {
            return;
        }
        let (search, weak, mut changes) =
            (Arc::downgrade(self), Arc::downgrade(db), db.subscribe());
        let id = db.id();
        std::thread::spawn(move || {
            while futures::executor::block_on(changes.changed()).is_ok() {
                if !round(&search, &weak, id) {
                    break;
                }
            }
            if let Some(search) = search.upgrade() {
                drop(search.forget(id));
            }
        });
    }

    /// Lets go of everything kept for database `id` once it is gone: its updater's entry
    /// and its open indexes (a geo index's R*-tree and documents, a search index's reader
    /// and writer), which would otherwise stay in memory until a restart (~250 MB after
    /// `bunko-bench --workloads search` had deleted its databases); returns the indexes.
    fn forget(&self, id: u64) -> (Vec<Arc<SearchIndex>>, Vec<Arc<GeoIndex>>) {
        self.watched.lock().remove(&id);
        (take_of(&mut self.open.lock(), id), take_of(&mut self.geo.lock(), id))
    }

    /// Database `db` was deleted: takes its indexes out of the maps, then, in the
    /// background, lets each finish the page it may be updating, retires it, and removes
    /// the database's index directory.
    fn dropped(&self, db: &Arc<Database>) {
        let id = db.id();
        let opening = self.opening.lock();
        let (search, geo) = self.forget(id);
        drop(opening);
        let (dir, db) = (self.root.as_ref().map(|r| r.join(id.to_string())), db.clone());
        std::thread::spawn(move || {
            search.iter().for_each(|index| index.retire());
            geo.iter().for_each(|index| log(index.retire(&db)));
            if let Some(dir) = dir {
                remove_dir(&dir);
            }
        });
    }

    /// Removes the index directories of databases that no longer exist: deleted while the
    /// server was down, or before their directories were removed. Run at start-up, before
    /// the indexes are opened; returns how many went. A database's id is never given to
    /// another, so a directory named by an id the engine does not know is no one's.
    pub fn remove_dropped(&self, engine: &Engine) -> usize {
        let Some(root) = &self.root else { return 0 };
        // Listed before the live ids are read: a database created meanwhile is not listed.
        let listed: Vec<(u64, PathBuf)> = std::fs::read_dir(root)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|entry| Some((entry.file_name().to_str()?.parse().ok()?, entry.path())))
            .collect();
        let live: HashSet<u64> = engine
            .db_names()
            .iter()
            .filter_map(|name| engine.get_db(name))
            .map(|db| db.id())
            .collect();
        let gone: Vec<&PathBuf> =
            listed.iter().filter(|(id, _)| !live.contains(id)).map(|(_, dir)| dir).collect();
        gone.iter().for_each(|dir| remove_dir(dir));
        gone.len()
    }

    /// How many indexes are open, search and geo, for database `id`.
    pub fn open_indexes(&self, id: u64) -> usize {
        let search = self.open.lock().keys().filter(|(db, _)| *db == id).count();
        search + self.geo.lock().keys().filter(|(db, _)| *db == id).count()
    }
}

/// How the engine tells the search service of deleted databases.
struct Hooks(Weak<Search>);

impl IndexHooks for Hooks {
    fn opened(&self, _: &Arc<Database>) {}

    fn written(&self, _: &Arc<Database>, _: bool) {}

    fn dropped(&self, db: &Arc<Database>) {
        if let Some(search) = self.0.upgrade() {
            search.dropped(db);
        }
    }
}

/// `404 not_found` for a deleted database, whose indexes are not opened again.
fn refuse_dropped(db: &Database) -> Result<()> {
    if db.is_dropped() {
        return Err(Error::NotFound("Database does not exist.".into()));
    }
    Ok(())
}

/// Takes the indexes of database `id` out of `map`.
fn take_of<T>(map: &mut HashMap<(u64, String), Arc<T>>, id: u64) -> Vec<Arc<T>> {
    let keys: Vec<(u64, String)> = map.keys().filter(|(db, _)| *db == id).cloned().collect();
    keys.iter().filter_map(|key| map.remove(key)).collect()
}

/// Removes a deleted database's index directory; a failure is logged (the next start-up
/// tries again, [`Search::remove_dropped`]).
fn remove_dir(dir: &std::path::Path) {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => {}
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
        Err(err) => {
            tracing::warn!(%err, dir = %dir.display(), "removing a deleted database's search indexes failed")
        }
    }
}

/// One background round over database `id`'s open indexes; `false` once the database
/// or the service is gone.
fn round(search: &Weak<Search>, db: &Weak<Database>, id: u64) -> bool {
    let (Some(search), Some(db)) = (search.upgrade(), db.upgrade()) else { return false };
    if db.is_dropped() {
        return false;
    }
    let indexes: Vec<Arc<SearchIndex>> =
        search.open.lock().iter().filter(|((d, _), _)| *d == id).map(|(_, i)| i.clone()).collect();
    for index in indexes {
        log(index.update(&db));
    }
    let geos: Vec<Arc<GeoIndex>> =
        search.geo.lock().iter().filter(|((d, _), _)| *d == id).map(|(_, i)| i.clone()).collect();
    for index in geos {
        log(index.update(&db));
    }
    true
}

/// A document as `include_docs` shows it to `reader`, with `_id` and `_rev`.
fn load_doc(db: &Database, reader: &UserCtx, id: &str) -> Option<Value> {
    let doc = db.get(reader, id, None).ok().filter(|d| !d.deleted)?;
    let mut body: Map<String, Value> = serde_json::from_slice(&doc.body).ok()?;
    let mut out = Map::new();
    out.insert("_id".into(), json!(doc.id));
    out.insert("_rev".into(), json!(doc.rev.to_string()));
    out.append(&mut body);
    Some(Value::Object(out))
}

fn log(result: Result<()>) {
    if let Err(err) = result {
        tracing::warn!(%err, "search index update stopped");
    }
}

/// The body of design document `ddoc`, or `404 not_found`.
fn design_body(db: &Database, ddoc: &str) -> Result<Map<String, Value>> {
    let doc =
        db.get(&UserCtx::system(), ddoc, None).map_err(|_| Error::NotFound("missing".into()))?;
    if doc.deleted {
        return Err(Error::NotFound("deleted".into()));
    }
    serde_json::from_slice(&doc.body).map_err(|e| Error::Corrupt(e.to_string()))
}

/// Every live design document of `db`: `(id, body)`.
fn design_docs(db: &Database) -> Result<Vec<(String, Map<String, Value>)>> {
    let query = ChangesQuery {
        since: 0,
        limit: None,
        descending: false,
        include_docs: true,
        all_leaves: false,
        filter: ChangesFilter::Design,
    };
    let mut out = Vec::new();
    for row in db.changes(&UserCtx::system(), query)? {
        let row = row?;
        if let Some(doc) = row.doc.filter(|d| !d.deleted)
            && let Ok(body) = serde_json::from_slice(&doc.body)
        {
            out.push((row.id, body));
        }
    }
    Ok(out)
}

/// Bytes of the files under `dir`.
fn dir_size(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum()
}
