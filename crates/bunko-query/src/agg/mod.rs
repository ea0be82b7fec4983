//! MongoDB aggregation pipelines: parsed once ([`Pipeline::parse`]) into [`Stage`]s, then
//! pulled document by document ([`Pipeline::stream`], in `stream`): streaming stages
//! (`$match`, `$project`, `$unwind`, `$limit`, `$lookup`, ...) pass each document on as it
//! comes; blocking stages (`$group`, `$sort`, `$bucket`, `$bucketAuto`, `$count`, ...)
//! consume their input within [`Env::memory_limit`] and spill past it.
//!
//! Stages are pure functions of their input documents, except those that read or write
//! other collections (`$lookup`, `$graphLookup`, `$unionWith`, `$out`, `$merge`): they go
//! through an [`Env`], which the engine side implements (reads through the engine's
//! scans, writes through its write gate with the caller's user). `$match` filters are
//! compiled by the [`Env`] too, so that they match exactly as `find` does.
//!
//! Planning: [`Pipeline::pushdown`] splits off a leading `$match` and the `$sort`,
//! `$skip` and `$limit` that follow it, for the caller to run as one `find` through the
//! planner (index ranges, `_id` lookups) instead of reading the whole collection.
//!
//! `project` holds `$project`/`$addFields`/`$unset`, `group` `$group`, `$bucket`,
//! `$bucketAuto`, `$sortByCount`, `$count`; `stages` the other single-input stages;
//! `lookup` and `join` the stages that read or write other collections; `window`
//! `$setWindowFields` and `$fill`, `densify` `$densify`; `spill` keeps `$sort` and
//! `$group` within [`Env::memory_limit`], spilling to temporary storage past it;
//! `meta_sort` and `meta_record` decide what `{$meta: …}` reads at each stage.

mod densify;
mod granularity;
mod group;
mod join;
mod lookup;
mod meta_record;
mod meta_sort;
mod project;
pub mod spill;
mod stages;
mod stream;
mod window;

use std::sync::Arc;

use bson::{Bson, Document};

pub use self::project::Shape;
pub use self::spill::{MemorySpill, Spill};
pub use self::stages::document_sort_key;
pub use self::stream::{Docs, EnvRef, Source, vec_source};
use crate::expr::{Expr, ExprError, Result};

/// MongoDB's default memory limit of a blocking stage (100 MiB).
pub const MEMORY_LIMIT: usize = 100 * 1024 * 1024;

/// A compiled `$match` filter.
pub type Matcher = Arc<dyn Fn(&Document) -> bool + Send + Sync>;

/// What a pipeline needs from the database. A pipeline reads through one `Env` for its
/// whole run (and its cursor's `getMore`s), so an `Env` that reads one storage snapshot
/// gives the pipeline one consistent view of every collection.
pub trait Env: Send + Sync {
    /// Compiles a `find`-style filter (without `$expr`, which the pipeline evaluates).
    fn matcher(&self, filter: &Document) -> Result<Matcher>;
    /// The documents of `coll` matching `filter` (all for an empty filter).
    fn find(&self, coll: &str, filter: &Document) -> Result<Vec<Document>>;
    /// [`Env::find`] as a stream, read as it is consumed (`$unionWith`); by default the
    /// whole answer of `find`.
    fn find_stream(&self, coll: &str, filter: &Document) -> Result<Docs<'static>> {
        Ok(Box::new(self.find(coll, filter)?.into_iter().map(Ok)))
    }
    /// Replaces the whole collection `db.coll` by `docs` (`$out`).
    fn replace_collection(&self, db: Option<&str>, coll: &str, docs: Vec<Document>) -> Result<()>;
    /// Inserts or replaces (by `_id`) each document of `docs` in `db.coll` (`$merge`).
    fn upsert(&self, db: Option<&str>, coll: &str, docs: Vec<Document>) -> Result<()>;
    /// The most bytes a blocking stage (`$group`, `$sort`, `$bucket`, `$bucketAuto`) may
    /// hold in memory.
    fn memory_limit(&self) -> usize {
        MEMORY_LIMIT
    }
    /// `allowDiskUse`: whether a blocking stage past [`Env::memory_limit`] spills
    /// ([`Env::spill`]) rather than failing (MongoDB 6+ defaults it to true).
    fn allow_disk_use(&self) -> bool {
        true
    }
    /// Fresh temporary storage for one blocking stage ([`spill`]).
    fn spill(&self) -> Result<Box<dyn Spill>>;
    /// The name of a ready index of `coll` whose first field is `field`, if it has one (a
    /// `$lookup` then reads each value through it instead of the whole collection).
    fn index_on(&self, _coll: &str, _field: &str) -> Option<String> {
        None
    }
    /// How many documents `coll` holds, if known cheaply (a `$lookup` weighs index lookups
    /// against one read of the collection with it).
    fn count(&self, _coll: &str) -> Option<usize> {
        None
    }
    /// Refuses `db.coll` (`db` `None`: the command's database) as the target of `stage`
    /// (`$out` or `$merge`) where MongoDB does (a system collection, an internal database,
    /// a view). Called when the stage is parsed, before anything is read or written.
    fn check_output(&self, _stage: &str, _db: Option<&str>, _coll: &str) -> Result<()> {
        Ok(())
    }
    /// Finds in another database's collection (`$merge` into another database).
    fn find_in(&self, db: Option<&str>, coll: &str, filter: &Document) -> Result<Vec<Document>> {
        match db {
            None => self.find(coll, filter),
            Some(_) => Err(ExprError::new(
                238,
                "NotImplemented",
                "reading another database is not supported",
            )),
        }
    }
}

/// One stage.
#[derive(Clone)]
pub enum Stage {
    Match { filter: Document, matcher: Option<Matcher>, expr: Option<Expr> },
    Shape(Shape),
    Group(group::Group),
    Sort(Vec<(Vec<String>, bool)>),
    Limit(usize),
    Skip(usize),
    Count(String),
    Unwind(stages::Unwind),
    ReplaceRoot(Expr),
    Facet(Vec<(String, Pipeline)>),
    Bucket(group::Bucket),
    BucketAuto(group::BucketAuto),
    Sample(usize),
    Documents(Expr),
    Lookup(lookup::Lookup),
    GraphLookup(join::GraphLookup),
    UnionWith(String, Pipeline),
    Out(Option<String>, String),
    Merge(join::Merge),
    SetWindowFields(window::SetWindowFields),
    Fill(window::Fill),
    Densify(densify::Densify),
}

/// A parsed pipeline.
#[derive(Clone, Default)]
pub struct Pipeline {
    /// Shared: a stage's stream holds the pipeline while it runs.
    pub stages: Arc<Vec<(String, Stage)>>,
    /// Per stage, the sort whose key its `{$meta: "sortKey"}` reads ([`meta_sort`]).
    sorts: Arc<Vec<Option<crate::expr::SortSpec>>>,
    /// Per stage, what its `{$meta: "indexKey"}`/`{$meta: "recordId"}` read
    /// ([`meta_record`]).
    records: Arc<Vec<crate::expr::RecordMeta>>,
}

/// The part of a pipeline a `find` can answer.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Pushdown {
    pub filter: Document,
    pub sort: Vec<(Vec<String>, bool)>,
    pub skip: usize,
    pub limit: Option<usize>,
    /// How many leading stages it replaces.
    pub stages: usize,
    /// The top-level fields the first stage after it reads, when it reads only those (a
    /// `$group`): the caller may hand the pipeline documents holding just these fields,
    /// converting less of each stored document.
    pub reads: Option<Vec<String>>,
    /// The whole (dotted) paths the stage after it reads, when it reads only those (an
    /// inclusion `$project`, a `$group`, a `$count`): an index holding them all may
    /// answer from its entries alone (a covered query).
    pub paths: Option<Vec<String>>,
}

/// A stage name MongoDB has but Bunko does not implement yet.
const NOT_YET: &[&str] = &[
    "$geoNear",
    "$redact",
    "$planCacheStats",
    "$listSessions",
    "$currentOp",
    "$shardedDataDistribution",
    "$changeStreamSplitLargeEvent",
];

/// MongoDB's refusal (`SearchNotEnabled`, 31082) of the search index commands and the
/// `$listSearchIndexes` stage on a server without a search index manager (a self-managed
/// MongoDB 8 without `mongot`), which Bunko is.
pub const SEARCH_INDEXES_NOT_ENABLED: &str = "Using Atlas Search Database Commands and the \
    $listSearchIndexes aggregation stage requires additional configuration. Please connect to \
    Atlas or an AtlasCLI local deployment to enable. For more information on how to connect, \
    see https://dochub.mongodb.org/core/atlas-cli-deploy-local-reqs.";

/// MongoDB's refusal (`SearchNotEnabled`, 31082) of `$search`, `$searchMeta` and
/// `$vectorSearch` on such a server (its missing space after "enable." included).
const SEARCH_NOT_ENABLED: &str = "Using $search and $vectorSearch aggregation stages requires \
    additional configuration. Please connect to Atlas or an AtlasCLI local deployment to \
    enable.For more information on how to connect, see \
    https://dochub.mongodb.org/core/atlas-cli-deploy-local-reqs.";

fn usize_arg(stage: &str, v: &Bson, code: i32) -> Result<usize> {
    match crate::expr::value::to_int(v) {
        Some(n) if n >= 0 && crate::expr::value::is_number(v) => Ok(n as usize),
        Some(n) if crate::expr::value::is_number(v) => {
            Err(ExprError::location(code, format!("the {stage} must be positive, found {n}")))
        }
        _ => Err(ExprError::location(code, format!("the {stage} must be specified as a number"))),
    }
}

fn doc_arg<'a>(stage: &str, v: &'a Bson, code: i32) -> Result<&'a Document> {
    match v {
        Bson::Document(d) => Ok(d),
        _ => Err(ExprError::location(code, format!("the {stage} specification must be an object"))),
    }
}

impl Pipeline {
    /// Parses a pipeline; `$match` filters are compiled by `env` (when given).
    pub fn parse(stages: &[Bson], env: Option<&dyn Env>) -> Result<Pipeline> {
        let mut out = Vec::new();
        for (i, s) in stages.iter().enumerate() {
            let Bson::Document(d) = s else {
                return Err(ExprError::type_mismatch(
                    "Each element of the 'pipeline' array must be an object",
                ));
            };
            let (Some((name, arg)), 1) = (d.iter().next(), d.len()) else {
                return Err(ExprError::location(
                    40323,
                    "A pipeline stage specification object must contain exactly one field.",
                ));
            };
            let stage = parse_stage(name, arg, env)?;
            let last = i + 1 == stages.len();
            if matches!(stage, Stage::Out(..) | Stage::Merge(_)) && !last {
                return Err(ExprError::location(
                    40601,
                    format!("{name} can only be the final stage in the pipeline"),
                ));
            }
            if matches!(stage, Stage::Documents(_)) && i != 0 {
                return Err(ExprError::location(
                    40602,
                    "$documents is only valid as the first stage in a pipeline",
                ));
            }
            out.push((name.clone(), stage));
        }
        let sorts = meta_sort::sorts(&out, stages)?;
        let records = meta_record::states(&out, stages)?;
        Ok(Pipeline { stages: Arc::new(out), sorts: Arc::new(sorts), records: Arc::new(records) })
    }

    /// Whether a stage reads `{$meta: "indexKey"}` or `{$meta: "recordId"}`
    /// (the `meta_record` module).
    pub fn reads_record_meta(&self) -> bool {
        self.records.iter().any(|r| *r != crate::expr::RecordMeta::Unknown)
    }

    /// Whether the pipeline starts with `$documents` (needs no collection).
    pub fn is_collectionless(&self) -> bool {
        matches!(self.stages.first(), Some((_, Stage::Documents(_))))
    }

    /// Whether the pipeline writes (`$out`/`$merge`).
    pub fn writes(&self) -> bool {
        matches!(self.stages.last(), Some((_, Stage::Out(..) | Stage::Merge(_))))
    }

    /// The leading `$match`/`$sort`/`$skip`/`$limit` a `find` can answer. A `$match` with
    /// `$expr` stays in the pipeline, and so does a `$sort` without a `$limit` after it
    /// (the pipeline's `$sort` keeps to the memory budget and spills; a top-k sort is small).
    pub fn pushdown(&self) -> Pushdown {
        let mut p = Pushdown::default();
        for (i, (_, stage)) in self.stages.iter().enumerate() {
            match stage {
                Stage::Match { filter, expr: None, .. } if i == 0 => p.filter = filter.clone(),
                Stage::Sort(keys)
                    if p.sort.is_empty()
                        && p.skip == 0
                        && p.limit.is_none()
                        && self.limit_follows(i) =>
                {
                    p.sort = keys.clone()
                }
                Stage::Skip(n) => {
                    p.skip += n;
                    p.limit = p.limit.map(|l| l.saturating_sub(*n));
                }
                Stage::Limit(n) => p.limit = Some(p.limit.map_or(*n, |l| l.min(*n))),
                _ => break,
            }
            p.stages += 1;
        }
        p.reads = match self.stages.get(p.stages) {
            Some((_, Stage::Group(group))) => group.reads(),
            _ => None,
        };
        p.paths = match self.stages.get(p.stages) {
            Some((_, Stage::Group(group))) => group.paths(),
            Some((_, Stage::Shape(shape))) => shape.paths(),
            Some((_, Stage::Count(_))) => Some(Vec::new()),
            _ => None,
        };
        p
    }

    /// Whether a `$limit` follows stage `i`, past any `$skip`s.
    fn limit_follows(&self, i: usize) -> bool {
        let mut rest = self.stages.iter().skip(i + 1).map(|(_, s)| s);
        rest.find(|s| !matches!(s, Stage::Skip(_))).is_some_and(|s| matches!(s, Stage::Limit(_)))
    }
}

fn parse_stage(name: &str, arg: &Bson, env: Option<&dyn Env>) -> Result<Stage> {
    Ok(match name {
        "$match" => {
            let filter = doc_arg(name, arg, 15959)?;
            let (rest, expr) = split_expr(filter)?;
            let matcher = match env {
                Some(env) if !rest.is_empty() => Some(env.matcher(&rest)?),
                _ => None,
            };
            Stage::Match { filter: rest, matcher, expr }
        }
        "$project" => Stage::Shape(Shape::project(doc_arg(name, arg, 15969)?)?),
        "$addFields" | "$set" => Stage::Shape(Shape::add_fields(doc_arg(name, arg, 40272)?)?),
        "$unset" => Stage::Shape(Shape::unset(arg)?),
        "$group" => Stage::Group(group::Group::parse(doc_arg(name, arg, 15947)?)?),
        "$sort" => Stage::Sort(stages::sort_spec(arg)?),
        "$limit" => match usize_arg("limit", arg, 15957)? {
            0 => return Err(ExprError::location(15958, "the limit must be positive")),
            n => Stage::Limit(n),
        },
        "$skip" => Stage::Skip(usize_arg("skip", arg, 15956)?),
        "$count" => Stage::Count(stages::count_field(arg)?),
        "$unwind" => Stage::Unwind(stages::Unwind::parse(arg)?),
        "$replaceRoot" => {
            let d = doc_arg(name, arg, 40228)?;
            let Some(e) = d.get("newRoot") else {
                return Err(ExprError::location(
                    40231,
                    "no newRoot specified for the $replaceRoot stage",
                ));
            };
            Stage::ReplaceRoot(Expr::parse(e)?)
        }
        "$replaceWith" => Stage::ReplaceRoot(Expr::parse(arg)?),
        "$sortByCount" => Stage::Group(group::Group::sort_by_count(arg)?),
        "$facet" => {
            let d = doc_arg(name, arg, 15955)?;
            let mut facets = Vec::new();
            for (k, v) in d {
                let Bson::Array(items) = v else {
                    return Err(ExprError::location(
                        40170,
                        format!(
                            "arguments to $facet must be arrays, {k} is type {}",
                            crate::expr::value::type_name(v)
                        ),
                    ));
                };
                let p = Pipeline::parse(items, env)?;
                if let Some((bad, _)) = p
                    .stages
                    .iter()
                    .find(|(n, _)| {
                        matches!(
                            n.as_str(),
                            "$out"
                                | "$merge"
                                | "$facet"
                                | "$documents"
                                | "$unionWith"
                                | "$lookup"
                                | "$graphLookup"
                        )
                    })
                    .filter(|(n, _)| matches!(n.as_str(), "$out" | "$merge" | "$facet"))
                {
                    return Err(ExprError::location(
                        40600,
                        format!("{bad} is not allowed to be used within a $facet stage"),
                    ));
                }
                facets.push((k.clone(), p));
            }
            if facets.is_empty() {
                return Err(ExprError::location(
                    40169,
                    "the $facet specification must be a non-empty object",
                ));
            }
            Stage::Facet(facets)
        }
        "$setWindowFields" => Stage::SetWindowFields(window::SetWindowFields::parse(arg)?),
        "$densify" => Stage::Densify(densify::Densify::parse(arg)?),
        "$fill" => Stage::Fill(window::Fill::parse(arg)?),
        "$bucket" => Stage::Bucket(group::Bucket::parse(doc_arg(name, arg, 40201)?)?),
        "$bucketAuto" => Stage::BucketAuto(group::BucketAuto::parse(doc_arg(name, arg, 40240)?)?),
        "$sample" => {
            let d = doc_arg(name, arg, 28745)?;
            let size = d
                .get("size")
                .ok_or_else(|| ExprError::location(28749, "$sample stage must specify a size"))?;
            Stage::Sample(usize_arg("size argument to $sample", size, 28746)?)
        }
        "$documents" => Stage::Documents(Expr::parse(arg)?),
        "$lookup" => Stage::Lookup(lookup::Lookup::parse(doc_arg(name, arg, 40319)?, env)?),
        "$graphLookup" => Stage::GraphLookup(join::GraphLookup::parse(doc_arg(name, arg, 40327)?)?),
        "$unionWith" => {
            let (coll, pipeline) = match arg {
                Bson::String(c) => (c.clone(), Pipeline::default()),
                Bson::Document(d) => {
                    let coll = d
                        .get_str("coll")
                        .map_err(|_| ExprError::failed_to_parse("$unionWith needs 'coll'"))?
                        .to_string();
                    let p = match d.get("pipeline") {
                        Some(Bson::Array(items)) => Pipeline::parse(items, env)?,
                        _ => Pipeline::default(),
                    };
                    (coll, p)
                }
                _ => {
                    return Err(ExprError::failed_to_parse(
                        "the $unionWith stage specification must be an object or string",
                    ));
                }
            };
            Stage::UnionWith(coll, pipeline)
        }
        "$out" => {
            let (db, coll) = match arg {
                Bson::String(c) => (None, c.clone()),
                Bson::Document(d) => (
                    d.get_str("db").ok().map(str::to_string),
                    d.get_str("coll")
                        .map_err(|_| ExprError::failed_to_parse("$out needs 'coll'"))?
                        .to_string(),
                ),
                _ => {
                    return Err(ExprError::location(
                        16990,
                        "$out only supports a string or object argument",
                    ));
                }
            };
            if let Some(env) = env {
                env.check_output(name, db.as_deref(), &coll)?;
            }
            Stage::Out(db, coll)
        }
        "$merge" => Stage::Merge(join::Merge::parse(arg, env)?),
        // Run by the front end when first (it turns them into `$documents`); anywhere else:
        first @ ("$changeStream" | "$collStats" | "$indexStats" | "$listLocalSessions") => {
            return Err(ExprError::location(
                40602,
                format!("{first} is only valid as the first stage in a pipeline"),
            ));
        }
        "$search" | "$searchMeta" | "$vectorSearch" => {
            return Err(ExprError::new(31082, "SearchNotEnabled", SEARCH_NOT_ENABLED));
        }
        "$listSearchIndexes" => {
            return Err(ExprError::new(31082, "SearchNotEnabled", SEARCH_INDEXES_NOT_ENABLED));
        }
        n if NOT_YET.contains(&n) => {
            return Err(ExprError::new(
                238,
                "NotImplemented",
                format!("the {n} stage is not supported yet"),
            ));
        }
        other => {
            return Err(ExprError::location(
                40324,
                format!("Unrecognized pipeline stage name: '{other}'"),
            ));
        }
    })
}

/// `filter` with the user variables `bound` visible in every `$expr` nested in it (inside
/// `$and`/`$or`/`$nor`/`$elemMatch`...): each becomes a `$let` binding them as literals, so
/// the compiled filter sees a `$lookup`'s `let` as the pipeline does. `None` when the
/// filter has no nested `$expr` or nothing is bound.
pub fn with_lets(filter: &Document, bound: &[(String, Bson)]) -> Option<Document> {
    fn has_expr(v: &Bson) -> bool {
        match v {
            Bson::Document(d) => d.iter().any(|(k, v)| k == "$expr" || has_expr(v)),
            Bson::Array(items) => items.iter().any(has_expr),
            _ => false,
        }
    }
    fn rewrite(v: &Bson, lets: &Document) -> Bson {
        match v {
            Bson::Document(d) => Bson::Document(
                d.iter()
                    .map(|(k, v)| match k.as_str() {
                        "$expr" => (
                            k.clone(),
                            bson::bson!({"$let": {"vars": lets.clone(), "in": v.clone()}}),
                        ),
                        _ => (k.clone(), rewrite(v, lets)),
                    })
                    .collect(),
            ),
            Bson::Array(items) => Bson::Array(items.iter().map(|i| rewrite(i, lets)).collect()),
            other => other.clone(),
        }
    }
    let filter = Bson::Document(filter.clone());
    if bound.is_empty() || !has_expr(&filter) {
        return None;
    }
    let lets: Document =
        bound.iter().map(|(n, v)| (n.clone(), bson::bson!({"$literal": v.clone()}))).collect();
    match rewrite(&filter, &lets) {
        Bson::Document(d) => Some(d),
        _ => None,
    }
}

/// A filter without its top-level `$expr`, and that `$expr` parsed.
pub fn split_expr(filter: &Document) -> Result<(Document, Option<Expr>)> {
    let mut rest = Document::new();
    let mut expr = None;
    for (k, v) in filter {
        if k == "$expr" {
            expr = Some(Expr::parse(v)?);
        } else {
            rest.insert(k.clone(), v.clone());
        }
    }
    Ok((rest, expr))
}

#[cfg(test)]
mod tests;
