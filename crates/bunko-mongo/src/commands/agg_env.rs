//! The aggregation pipeline's view of the database ([`bunko_query::agg::Env`]) for one
//! `aggregate` command: filters compile as `find`'s do (Mongo dialect), reads are the
//! engine's `find_mongo` after the same membership check as every read (an `_id` `$in`
//! from `$lookup` becomes one point read per id), and `$out`/`$merge` write through the
//! engine's write path with the connection's user, so the write gate decides.

use std::sync::Arc;

use bson::{Bson, Document};
use bunko_doc::ejson;
use bunko_engine::{Database, Error, WriteOptions};
use bunko_query::agg::spill::Entry;
use bunko_query::agg::{Env, Matcher, Spill};
use bunko_query::expr::ExprError;
use bunko_query::{Dialect, Selector};
use serde_json::Value;

use super::Ctx;
use super::admin::{open_or_create, user};
use super::crud::{prepare, readable_db, run_query};
use crate::error::MongoError;
use crate::names::Namespace;
use crate::query;

/// The most `_id`s looked up one by one; more are one query.
const POINT_READS: usize = 1000;

pub(super) struct AggEnv<'a> {
    pub ctx: &'a Ctx<'a>,
    /// `allowDiskUse`: a blocking stage past the memory limit spills to temporary keys.
    pub allow_disk_use: bool,
}

pub(super) fn to_expr(err: MongoError) -> ExprError {
    ExprError::new(err.code, err.code_name, err.errmsg)
}

pub(crate) fn from_expr(err: ExprError) -> MongoError {
    let name = if err.code_name == "Location" { location_name(err.code) } else { err.code_name };
    MongoError::new(err.code, name, err.message)
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

pub(super) fn matches(selector: &Selector, doc: &Document) -> bool {
    selector.matches(&ejson::match_view(&Value::Object(ejson::to_json(doc))), Dialect::Mongo)
}

impl AggEnv<'_> {
    fn ns(&self, db: Option<&str>, coll: &str) -> Result<Namespace, ExprError> {
        Namespace::new(db.unwrap_or(&self.ctx.db), coll).map_err(to_expr)
    }

    fn read(&self, ns: &Namespace, filter: &Document) -> Result<Vec<Document>, MongoError> {
        let Some(db) = readable_db(self.ctx, ns, "aggregate")? else { return Ok(Vec::new()) };
        if let Some(ids) = id_list(filter) {
            let mut out = Vec::new();
            for id in ids {
                let one = selector(&bson::doc! {"_id": id})?;
                out.extend(run_query(&db, one, &[], 0, usize::MAX)?);
            }
            return Ok(out);
        }
        run_query(&db, selector(filter)?, &[], 0, usize::MAX)
    }

    fn write(&self, db: &Database, docs: Vec<Document>) -> Result<(), MongoError> {
        let user = user(self.ctx);
        for d in docs {
            let (mut parsed, id) = prepare(&Bson::Document(d))?;
            let doc_id = ejson::doc_id(&id);
            parsed.rev = match db.get(&doc_id, None) {
                Ok(current) => Some(current.rev),
                Err(Error::NotFound(_)) => None,
                Err(err) => return Err(err.into()),
            };
            db.put(&user, parsed, self.ctx.write_options())?;
        }
        Ok(())
    }
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
    pub(super) fn boxed(ctx: &Ctx) -> Box<dyn Spill> {
        Box::new(EngineSpill(ctx.server.engine.spill()))
    }
}

impl Spill for EngineSpill {
    fn put(&mut self, entries: Vec<Entry>) -> Result<(), ExprError> {
        self.0.put(entries).map_err(|e| to_expr(e.into()))
    }

    fn scan(&self, prefix: &[u8]) -> Box<dyn Iterator<Item = Result<Entry, ExprError>> + '_> {
        Box::new(self.0.scan(prefix).map(|e| e.map_err(|e| to_expr(e.into()))))
    }
}

impl Env for AggEnv<'_> {
    fn memory_limit(&self) -> usize {
        self.ctx.server.config.agg_memory_limit
    }

    fn allow_disk_use(&self) -> bool {
        self.allow_disk_use
    }

    fn spill(&self) -> Result<Box<dyn Spill + '_>, ExprError> {
        Ok(EngineSpill::boxed(self.ctx))
    }

    fn matcher(&self, filter: &Document) -> Result<Matcher, ExprError> {
        let selector = selector(filter).map_err(to_expr)?;
        Ok(Arc::new(move |d: &Document| matches(&selector, d)))
    }

    fn find(&self, coll: &str, filter: &Document) -> Result<Vec<Document>, ExprError> {
        let ns = self.ns(None, coll)?;
        self.read(&ns, filter).map_err(to_expr)
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
        let run = || -> Result<(), MongoError> {
            match self.ctx.server.engine.delete_db(&user(self.ctx), &ns.engine_name()) {
                Ok(()) | Err(Error::NotFound(_)) => {}
                Err(err) => return Err(err.into()),
            }
            let target = open_or_create(self.ctx, &ns)?;
            let parsed = docs
                .into_iter()
                .map(|d| prepare(&Bson::Document(d)).map(|(p, _)| p))
                .collect::<Result<Vec<_>, _>>()?;
            let opts = WriteOptions { all_or_nothing: true, ..self.ctx.write_options() };
            for r in target.update_docs(&user(self.ctx), parsed, opts)? {
                if let Err(err) = r.result {
                    return Err(match err {
                        Error::Conflict => MongoError::duplicate_key(&ns.full(), &r.id),
                        other => other.into(),
                    });
                }
            }
            Ok(())
        };
        run().map_err(to_expr)
    }

    fn upsert(&self, db: Option<&str>, coll: &str, docs: Vec<Document>) -> Result<(), ExprError> {
        let ns = self.ns(db, coll)?;
        let target = open_or_create(self.ctx, &ns).map_err(to_expr)?;
        self.write(&target, docs).map_err(to_expr)
    }
}
