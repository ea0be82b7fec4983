//! The aggregation pipeline's view of the database ([`bunko_query::agg::Env`]) for one
//! `aggregate` command: filters compile as `find`'s do (Mongo dialect), reads are the
//! engine's `stream_mongo` over one storage snapshot taken when the command starts (the
//! input collection and every collection `$lookup`/`$unionWith`/`$graphLookup` read), after
//! the same membership check as every read (an `_id` `$in` from `$lookup` becomes one
//! point read per id), and `$out`/`$merge` write through the engine's write path with the
//! connection's user, so the write gate decides. `$out` replaces an existing collection's
//! documents in one commit, keeping its indexes and options (`Database::replace_docs`), or
//! creates a new one with its documents in one transaction; a capped target is refused
//! (17152), as MongoDB refuses it; `$merge` into a capped collection inserts as any insert,
//! capped. Both stages refuse, when parsed, a view as target (166, the source view too), a
//! `system.*` collection (17385 / 31319) and the `admin`/`local`/`config` databases (31321
//! / 31320), as MongoDB does, so nothing is read or written first.

use std::collections::HashSet;
use std::sync::Arc;

use bson::{Bson, Document};
use bunko_doc::body::ParsedDoc;
use bunko_doc::ejson;
use bunko_engine::find::FindQuery;
use bunko_engine::find::mongo_stream::Snapshot;
use bunko_engine::security::UserCtx;
use bunko_engine::{Database, Engine, WriteOptions};
use bunko_query::agg::spill::Entry;
use bunko_query::agg::{Docs, Env, Matcher, Spill};
use bunko_query::expr::ExprError;
use bunko_query::{Dialect, Direction, FieldPath, Selector};
use serde_json::Value;

use super::Ctx;
use super::admin::{open_or_create_as, user};
use super::crud::{mongo_query, prepare_for, readable_db_as};
use crate::error::MongoError;
use crate::names::Namespace;
use crate::query;

/// The most `_id`s looked up one by one; more are one query.
const POINT_READS: usize = 1000;

/// What an `aggregate` runs with, owned so that its cursor keeps it between `getMore`s.
pub(super) struct AggEnv {
    pub engine: Arc<Engine>,
    pub user: UserCtx,
    /// `$db`.
    pub db: String,
    /// Every collection is read from this one snapshot.
    pub snap: Snapshot,
    pub memory_limit: usize,
    /// `allowDiskUse`: a blocking stage past the memory limit spills to temporary keys.
    pub allow_disk_use: bool,
    pub write_options: WriteOptions,
}

pub(super) fn to_expr(err: MongoError) -> ExprError {
    let extra = err.extra.as_deref().cloned();
    let out = ExprError::new(err.code, err.code_name, err.errmsg);
    match extra {
        Some(extra) => out.with_extra(&extra),
        None => out,
    }
}

pub(crate) fn from_expr(err: ExprError) -> MongoError {
    let name = if err.code_name == "Location" { location_name(err.code) } else { err.code_name };
    let mut out = MongoError::new(err.code, name, err.message);
    let extra = err.extra.and_then(|bytes| Document::from_reader(bytes.as_slice()).ok());
    out.extra = extra.map(Box::new);
    out
}

/// MongoDB names an unnamed error code `Location<code>`. The names must be `'static`: each
/// is made once per code (a bounded set: the codes this crate's sources name).
fn location_name(code: i32) -> &'static str {
    static NAMES: std::sync::OnceLock<
        parking_lot::Mutex<std::collections::HashMap<i32, &'static str>>,
    > = std::sync::OnceLock::new();
    let mut names = NAMES.get_or_init(Default::default).lock();
    names.entry(code).or_insert_with(|| Box::leak(format!("Location{code}").into_boxed_str()))
}

/// A filter as a selector (the selector engine's syntax, Mongo dialect).
pub(super) fn selector(filter: &Document) -> Result<Selector, MongoError> {
    query::selector(filter)
}

pub(super) use crate::query::matches;

/// A `$match` stage's test of `filter`: converts only the members the filter reads.
pub(super) fn matcher(filter: &Document) -> Result<Matcher, ExprError> {
    let selector = selector(filter).map_err(to_expr)?;
    let reads = selector.reads();
    Ok(Arc::new(move |d: &Document| {
        let Some(names) = &reads else { return matches(&selector, d) };
        let read = d.iter().filter(|(name, _)| names.contains(name));
        let json = read.map(|(name, v)| (name.clone(), ejson::value_to_json(v))).collect();
        selector.matches(&Value::Object(json), Dialect::Mongo)
    }))
}

impl AggEnv {
    /// The environment of `ctx`'s command, reading from a snapshot taken now.
    pub fn new(ctx: &Ctx, allow_disk_use: bool) -> AggEnv {
        AggEnv {
            engine: ctx.server.engine.clone(),
            user: user(ctx),
            db: ctx.db.clone(),
            snap: ctx.server.engine.snapshot(),
            memory_limit: ctx.server.config.agg_memory_limit,
            allow_disk_use,
            write_options: ctx.write_options(),
        }
    }

    fn ns(&self, db: Option<&str>, coll: &str) -> Result<Namespace, ExprError> {
        Namespace::new(db.unwrap_or(&self.db), coll).map_err(to_expr)
    }

    /// The collection's database if it exists, after the read check.
    pub fn readable(&self, ns: &Namespace) -> Result<Option<Arc<Database>>, MongoError> {
        readable_db_as(&self.engine, &self.user, ns, "aggregate")
    }

    /// The documents of `ns` that `query` selects, in `order`, streamed from the snapshot;
    /// with `reads`, holding only those top-level fields (the rest is not converted).
    pub fn stream(
        &self,
        ns: &Namespace,
        query: &FindQuery,
        order: &[(FieldPath, Direction)],
        reads: Option<Vec<String>>,
    ) -> Result<Docs<'static>, MongoError> {
        let Some(db) = self.readable(ns)? else { return Ok(Box::new(std::iter::empty())) };
        let docs = db.stream_mongo(&self.user, &self.snap, query, order, reads.as_deref())?;
        Ok(Box::new(docs.map(move |doc| match doc {
            Ok(Value::Object(mut fields)) => {
                if let Some(keep) = &reads {
                    fields.retain(|name, _| keep.contains(name));
                }
                Ok(ejson::from_json(&fields))
            }
            Ok(_) => Ok(Document::new()),
            Err(err) => Err(to_expr(err.into())),
        })))
    }

    fn read(&self, ns: &Namespace, filter: &Document) -> Result<Vec<Document>, MongoError> {
        if super::views::is_timeseries(&self.engine, ns) {
            return self.measurements(ns, filter);
        }
        let all = |filter: &Document| {
            let query = mongo_query(selector(filter)?, 0, usize::MAX);
            let docs: Result<Vec<Document>, ExprError> =
                self.stream(ns, &query, &[], None)?.collect();
            docs.map_err(from_expr)
        };
        let Some(ids) = id_list(filter) else { return all(filter) };
        let mut out = Vec::new();
        for id in ids {
            out.extend(all(&bson::doc! {"_id": id})?);
        }
        Ok(out)
    }

    /// The measurements of the time-series collection `ns` that match `filter` (a
    /// `$lookup`, `$unionWith` or `$graphLookup` from it), as its reads show them.
    fn measurements(&self, ns: &Namespace, filter: &Document) -> Result<Vec<Document>, MongoError> {
        let wanted = selector(filter)?;
        // The part of the filter an index on the stored form can serve, then all of it.
        let stored = super::timeseries_query::implied(filter);
        let query = mongo_query(selector(&stored)?, 0, usize::MAX);
        let mut out = Vec::new();
        for doc in self.stream(ns, &query, &[], None)? {
            let doc = doc.map_err(from_expr)?;
            if let Ok(m) = doc.get_document("m")
                && query::matches(&wanted, m)
            {
                out.push(m.clone());
            }
        }
        Ok(out)
    }

    /// `$out` into the existing collection `ns`: its documents are replaced in one commit
    /// ([`Database::replace_docs`]), so its indexes, options and `_security` stay, its
    /// `unique` indexes and validator judge the new documents, and a failure leaves the
    /// old ones. MongoDB refuses a capped target (17152) and a view (166).
    fn replace(
        &self,
        ns: &Namespace,
        target: &Database,
        docs: Vec<Document>,
    ) -> Result<(), MongoError> {
        if target.is_capped()? {
            return Err(MongoError::new(
                17152,
                "Location17152",
                format!("namespace '{}' is capped so it can't be used for $out", ns.full()),
            ));
        }
        if super::views::is_view(&self.engine, ns) {
            return Err(super::views::refused(ns));
        }
        let parsed = out_docs(ns, target, docs)?;
        for written in target.replace_docs(&self.user, parsed, self.write_options)? {
            written.result?;
        }
        Ok(())
    }

    /// `$out` into `ns`, which does not exist: the collection is created with its documents
    /// in one transaction, so that it appears whole or, on a failure, not at all (as
    /// MongoDB's temporary collection). Its `_security` is what any new collection gets.
    fn create_filled(&self, ns: &Namespace, docs: Vec<Document>) -> Result<(), MongoError> {
        let name = ns.engine_name();
        let mut txn = self.engine.begin(&self.user).unbounded();
        let target = txn.create_db(&name)?;
        super::roles::grant(&target, &self.user)?;
        for parsed in out_docs(ns, &target, docs)? {
            txn.put(&name, parsed)?;
        }
        txn.commit()?;
        Ok(())
    }

    fn write(&self, db: &Database, docs: Vec<Document>) -> Result<(), MongoError> {
        for d in docs {
            let (mut parsed, id) = prepare_for(db, &Bson::Document(d), false)?;
            let doc_id = ejson::doc_id(&id);
            parsed.rev = db.current_rev(&doc_id)?;
            db.put(&self.user, parsed, self.write_options)?;
        }
        Ok(())
    }
}

/// `$out`'s documents, prepared for `target`; two with one `_id` are MongoDB's duplicate
/// key error on `_id_` (checked here: a transaction takes a second write of an id as a new
/// version of the first).
fn out_docs(
    ns: &Namespace,
    target: &Database,
    docs: Vec<Document>,
) -> Result<Vec<ParsedDoc>, MongoError> {
    let mut ids = HashSet::with_capacity(docs.len());
    let mut out = Vec::with_capacity(docs.len());
    for d in docs {
        let (parsed, id) = prepare_for(target, &Bson::Document(d), false)?;
        if !ids.insert(parsed.id.clone()) {
            let key = [("_id".to_string(), ejson::value_to_json(&id))];
            return Err(MongoError::duplicate_in(&ns.engine_name(), "_id_", &key));
        }
        out.push(parsed);
    }
    Ok(out)
}

/// MongoDB's refusal of `db.coll` as the target of `stage` (`$out` or `$merge`) by its
/// name: a system collection or an internal database (the two stages word it differently).
fn output_names(stage: &str, db: &str, coll: &str) -> Result<(), ExprError> {
    let out = stage == "$out";
    if coll.starts_with("system.") {
        let (code, verb) = if out { (17385, "Can't") } else { (31319, "Cannot") };
        let msg = format!("{verb} {stage} to special collection: {coll}");
        return Err(ExprError::location(code, msg));
    }
    if matches!(db, "admin" | "local" | "config") {
        let (code, verb) = if out { (31321, "Can't") } else { (31320, "Cannot") };
        return Err(ExprError::location(
            code,
            format!("{verb} {stage} to internal database: {db}"),
        ));
    }
    Ok(())
}

/// `{_id: {$in: [ids]}}` with few non-numeric ids (numeric ids of different types are
/// equal in MongoDB but different document ids).
fn id_list(filter: &Document) -> Option<Vec<Bson>> {
    let (Some(Bson::Document(cond)), 1) = (filter.get("_id"), filter.len()) else { return None };
    let (Some(Bson::Array(ids)), 1) = (cond.get("$in"), cond.len()) else { return None };
    let plain = ids.iter().all(|i| {
        !matches!(
            i,
            Bson::Int32(_)
                | Bson::Int64(_)
                | Bson::Double(_)
                | Bson::Decimal128(_)
                | Bson::RegularExpression(_)
                | Bson::Null
        )
    });
    (plain && ids.len() <= POINT_READS).then(|| ids.clone())
}

/// The engine's temporary keys as a pipeline's [`Spill`].
pub(super) struct EngineSpill(bunko_engine::spill::Spill);

impl EngineSpill {
    pub(super) fn boxed(engine: &Engine) -> Box<dyn Spill> {
        Box::new(EngineSpill(engine.spill()))
    }
}

impl Spill for EngineSpill {
    fn put(&mut self, entries: Vec<Entry>) -> Result<(), ExprError> {
        self.0.put(entries).map_err(|e| to_expr(e.into()))
    }

    fn scan(&self, prefix: &[u8]) -> Box<dyn Iterator<Item = Result<Entry, ExprError>> + Send> {
        Box::new(self.0.scan(prefix).map(|e| e.map_err(|e| to_expr(e.into()))))
    }
}

impl Env for AggEnv {
    fn memory_limit(&self) -> usize {
        self.memory_limit
    }

    fn allow_disk_use(&self) -> bool {
        self.allow_disk_use
    }

    fn spill(&self) -> Result<Box<dyn Spill>, ExprError> {
        Ok(EngineSpill::boxed(&self.engine))
    }

    fn index_on(&self, coll: &str, field: &str) -> Option<String> {
        let db = self.engine.get_db(&self.ns(None, coll).ok()?.engine_name())?;
        let indexes = db.plannable_mongo_indexes();
        let usable = |i: &&Arc<bunko_engine::index::Index>| {
            // A collated index serves no string bounds of a simple-collation lookup.
            i.def
                .mongo
                .as_ref()
                .is_some_and(|s| !s.sparse && s.partial.is_none() && s.collation.is_none())
                && i.def.fields.first().is_some_and(|f| f.name == field)
        };
        indexes.iter().find(usable).map(|i| i.def.name.clone())
    }

    fn count(&self, coll: &str) -> Option<usize> {
        let db = self.engine.get_db(&self.ns(None, coll).ok()?.engine_name())?;
        usize::try_from(db.info().stats.doc_count).ok()
    }

    fn matcher(&self, filter: &Document) -> Result<Matcher, ExprError> {
        matcher(filter)
    }

    fn check_output(&self, stage: &str, db: Option<&str>, coll: &str) -> Result<(), ExprError> {
        let db = db.unwrap_or(&self.db);
        output_names(stage, db, coll)?;
        let ns = self.ns(Some(db), coll)?;
        if super::views::is_view(&self.engine, &ns) {
            return Err(to_expr(super::views::refused(&ns)));
        }
        Ok(())
    }

    fn find(&self, coll: &str, filter: &Document) -> Result<Vec<Document>, ExprError> {
        let ns = self.ns(None, coll)?;
        self.read(&ns, filter).map_err(to_expr)
    }

    fn find_stream(&self, coll: &str, filter: &Document) -> Result<Docs<'static>, ExprError> {
        let ns = self.ns(None, coll)?;
        if super::views::is_timeseries(&self.engine, &ns) {
            let found = self.measurements(&ns, filter).map_err(to_expr)?;
            return Ok(Box::new(found.into_iter().map(Ok)));
        }
        let query = mongo_query(selector(filter).map_err(to_expr)?, 0, usize::MAX);
        self.stream(&ns, &query, &[], None).map_err(to_expr)
    }

    fn find_in(
        &self,
        db: Option<&str>,
        coll: &str,
        filter: &Document,
    ) -> Result<Vec<Document>, ExprError> {
        let ns = self.ns(db, coll)?;
        self.read(&ns, filter).map_err(to_expr)
    }

    fn replace_collection(
        &self,
        db: Option<&str>,
        coll: &str,
        docs: Vec<Document>,
    ) -> Result<(), ExprError> {
        let ns = self.ns(db, coll)?;
        match self.engine.get_db(&ns.engine_name()) {
            Some(target) => self.replace(&ns, &target, docs),
            None => self.create_filled(&ns, docs),
        }
        .map_err(to_expr)
    }

    fn upsert(&self, db: Option<&str>, coll: &str, docs: Vec<Document>) -> Result<(), ExprError> {
        let ns = self.ns(db, coll)?;
        let target = open_or_create_as(&self.engine, &self.user, &ns).map_err(to_expr)?;
        self.write(&target, docs).map_err(to_expr)
    }
}
