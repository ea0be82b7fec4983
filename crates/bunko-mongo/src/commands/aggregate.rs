//! `aggregate`: a pipeline over a collection (or, with `aggregate: 1`, over `$documents`),
//! answered as a cursor (`batchSize`, then `getMore`) or, with `explain: true`, as the plan.
//!
//! 1. The pipeline is parsed once ([`Pipeline::parse`]); a leading `$changeStream` goes to
//!    [`super::change_stream`].
//! 2. Its leading `$match`/`$sort`/`$skip`/`$limit` ([`Pipeline::pushdown`]) run as one
//!    `stream_mongo` through the engine's query path (an index, or one document for an
//!    `_id` equality), over one storage snapshot taken when the command starts, which every
//!    other collection the pipeline reads is read from too ([`AggEnv`]).
//! 3. The rest of the stages pull documents from it ([`Pipeline::stream`]): the first
//!    batch computes only what it returns (blocking stages consume their input, within
//!    the memory limit), and the cursor keeps the stream, so `getMore` pulls the rest.
//! 4. `$out`/`$merge` write through the engine with the connection's user
//!    ([`AggEnv`]); the reply of a writing pipeline is an empty cursor.
//!
//! A blocking stage (`$group`, `$sort`, `$bucket`, `$sortByCount`) holding more than the
//! memory limit (`MongoConfig::agg_memory_limit`, 100 MiB as MongoDB) spills to the
//! engine's temporary keys (`bunko_query::agg::spill`) when `allowDiskUse` is true (the
//! default, as MongoDB 6+) and fails with `QueryExceededMemoryLimitNoDiskUseAllowed` (292)
//! when it is false. `hint` (an index name or key pattern, as `find` takes it) picks the
//! index of the pushed-down query; `maxTimeMS` limits the command (the command table runs
//! it under the limit, where its scans stop); `collation` applies to the whole pipeline
//! (string comparisons in `$match` and the pushed-down query).

use std::iter::Peekable;
use std::sync::Arc;

use bson::{Bson, DateTime, Document, doc};
use bunko_query::agg::{Docs, Env, EnvRef, Pipeline, Pushdown, Source, vec_source};
use bunko_query::expr::{Expr, IndexKeys, RecordMeta, Vars};
use bunko_query::{Direction, FieldPath};

use super::agg_env::{AggEnv, from_expr, selector, to_expr};
use super::crud::{mongo_query, non_negative, readable_db};
use super::{Ctx, bool_of, cursor_reply, doc_of, namespace};
use crate::error::MongoError;
use crate::names::Namespace;
use crate::wire;

/// The first batch's size when the client names none (MongoDB's default).
const DEFAULT_BATCH: usize = 101;

/// A checked `aggregate` command.
pub(super) struct Request<'c> {
    pub stages: &'c [Bson],
    pub explain: bool,
    pub batch: usize,
    /// `aggregate: 1` (a pipeline starting with `$documents`).
    pub collectionless: bool,
    pub ns: Namespace,
    pub allow_disk_use: bool,
}

impl<'c> Request<'c> {
    /// Checks the command's fields as MongoDB does.
    pub fn parse(ctx: &Ctx, command: &'c Document) -> Result<Request<'c>, MongoError> {
        let Some(Bson::Array(stages)) = command.get("pipeline") else {
            return Err(MongoError::type_mismatch(
                "'pipeline' option must be specified as an array",
            ));
        };
        crate::query::collation_of(command)?;
        let explain = bool_of(command, "explain", false)?;
        let cursor = match command.get("cursor") {
            Some(Bson::Document(c)) => Some(c),
            Some(_) => {
                return Err(MongoError::type_mismatch("cursor field must be missing or an object"));
            }
            None => None,
        };
        if cursor.is_none() && !explain {
            return Err(MongoError::failed_to_parse(
                "The 'cursor' option is required, except for aggregate with the explain argument",
            ));
        }
        let batch = match cursor {
            Some(c) => non_negative(c, "batchSize")?.unwrap_or(DEFAULT_BATCH),
            None => DEFAULT_BATCH,
        };
        let collectionless = matches!(
            command.iter().next(),
            Some((_, Bson::Int32(1) | Bson::Int64(1) | Bson::Double(1.0)))
        );
        let ns = if collectionless {
            Namespace { db: ctx.db.clone(), coll: "$cmd.aggregate".into() }
        } else {
            namespace(ctx, command)?
        };
        // MongoDB 6+ defaults it to true (`allowDiskUseByDefault`).
        let allow_disk_use = bool_of(command, "allowDiskUse", true)?;
        Ok(Request { stages, explain, batch, collectionless, ns, allow_disk_use })
    }

    /// The name of the pipeline's first stage.
    pub fn first_stage(&self) -> Option<&str> {
        let first = self.stages.first().and_then(|s| s.as_document());
        first.and_then(|d| d.keys().next()).map(String::as_str)
    }

    /// Whether the pipeline opens a change stream.
    pub fn is_change_stream(&self) -> bool {
        self.first_stage() == Some("$changeStream")
    }

    /// Runs the pipeline: the explain document, or the stream of result documents.
    /// `input` opens the pushed-down part over the collection; `plan` is its explained
    /// `winningPlan`; `keys` gives its documents' index keys, asked for only when a stage
    /// reads `{$meta: "indexKey"}` or `{$meta: "recordId"}` (`bunko_query::agg::meta_record`).
    pub fn run<'a>(
        &self,
        command: &Document,
        env: &EnvRef<'a>,
        (input, keys): (&Input<'_, 'a>, &Keys),
        plan: &dyn Fn(&Pushdown) -> Result<Document, MongoError>,
    ) -> Result<Result<Docs<'a>, Document>, MongoError> {
        let pipeline = Pipeline::parse(self.stages, Some(env.as_ref())).map_err(from_expr)?;
        if self.collectionless && !pipeline.is_collectionless() {
            let first = self.stages.first().and_then(|s| s.as_document());
            return Err(MongoError::invalid_namespace(format!(
                "{{aggregate: 1}} is not valid for '{}'; a collection is required.",
                first.and_then(|d| d.keys().next().cloned()).unwrap_or_default()
            )));
        }
        let vars = variables(command)?;
        let push = if self.collectionless { Pushdown::default() } else { pipeline.pushdown() };
        if self.explain {
            let plan = match self.collectionless {
                true => doc! {"stage": "EOF"},
                false => plan(&push)?,
            };
            return Ok(Err(explain_reply(&self.ns, self.stages, &push, env.as_ref(), plan)));
        }
        let source = match self.collectionless || push.limit == Some(0) {
            true => vec_source(Vec::new()),
            false => input(&push)?,
        };
        let vars = match pipeline.reads_record_meta() && !self.collectionless {
            true => vars.with_record_meta(RecordMeta::Unknown, keys(&push)?),
            false => vars,
        };
        Ok(Ok(pipeline.stream(push.stages, source, env, &vars).map_err(from_expr)?))
    }
}

/// Opens the pushed-down part of a pipeline over the collection.
pub(super) type Input<'i, 'a> = dyn Fn(&Pushdown) -> Result<Source<'a>, MongoError> + 'i;

/// The index keys of the documents a pushed-down query reads (`None`: none).
pub(super) type Keys<'k> = dyn Fn(&Pushdown) -> Result<Option<IndexKeys>, MongoError> + 'k;

/// `aggregate`, under the command's `collation` (its string comparisons: `$match`, the
/// pushed-down query, and each later batch the cursor computes).
pub(super) fn aggregate(ctx: &mut Ctx, command: &Document) -> Result<Document, MongoError> {
    let collation = crate::query::collation_of(command)?;
    bunko_query::collation::with(collation.clone(), || {
        if let Some(reply) = super::count::pipeline(ctx, command)? {
            return Ok(reply);
        }
        run(ctx, command, collation)
    })
}

fn run(
    ctx: &mut Ctx,
    command: &Document,
    collation: Option<Arc<bunko_query::collation::Collation>>,
) -> Result<Document, MongoError> {
    let request = Request::parse(ctx, command)?;
    if request.is_change_stream() {
        return super::change_stream::open(ctx, command);
    }
    let stats = match request.first_stage() {
        Some("$collStats") => super::coll_stats_stage::rewrite(ctx, &request.ns, request.stages)?,
        Some("$indexStats") => super::index_stats_stage::rewrite(ctx, &request.ns, request.stages)?,
        _ => super::local_sessions_stage::rewrite(ctx, request.stages, request.collectionless)?,
    };
    let request = match &stats {
        Some(stages) => Request { stages, collectionless: true, ..request },
        None => request,
    };
    let db = readable_db(ctx, &request.ns, "aggregate")?.filter(|_| !request.collectionless);
    let hint = match &db {
        Some(db) => super::indexes::hint(db, command.get("hint"))?,
        None => None,
    };
    let agg = Arc::new(AggEnv::new(ctx, request.allow_disk_use));
    let env: EnvRef<'static> = agg.clone();
    let input = |push: &Pushdown| -> Result<Source<'static>, MongoError> {
        let limit = push.limit.unwrap_or(usize::MAX);
        let mut query = mongo_query(selector(&push.filter)?, push.skip, limit);
        query.use_index = hint.clone().map(|name| (name, None));
        // The paths the next stage reads: an index holding them answers from its entries.
        query.fields = paths_of(push)?;
        let (agg, ns, order) = (agg.clone(), request.ns.clone(), order_of(push)?);
        let reads = push.reads.clone();
        Ok(Arc::new(move || agg.stream(&ns, &query, &order, reads.clone()).map_err(to_expr)))
    };
    let keys = |push: &Pushdown| -> Result<Option<IndexKeys>, MongoError> {
        let Some(db) = &db else { return Ok(None) };
        let source =
            super::crud::key_source(db, command, &selector(&push.filter)?, &order_of(push)?)?;
        Ok(Some(Arc::new(move |doc: &Document| source.key(doc).ok().flatten())))
    };
    let plan = |push: &Pushdown| explained(ctx, &request.ns, push, hint.as_deref());
    let docs = match request.run(command, &env, (&input, &keys), &plan)? {
        Ok(docs) => docs,
        Err(explain) => return Ok(explain),
    };
    observe(ctx, &request);
    let mut docs = docs.peekable();
    let (first, more) = pull(&mut docs, request.batch)?;
    let ns = request.ns.full();
    let id = match more {
        false => 0,
        true => {
            let next = Box::new(move |n| {
                bunko_query::collation::with(collation.clone(), || pull(&mut docs, n))
            });
            ctx.server.cursors.open(ns.clone(), ctx.session.user.clone(), next)
        }
    };
    Ok(cursor_reply(id, &ns, "firstBatch", first))
}

/// The `winningPlan` of the pushed-down stages over `ns`, with the index `hint` names.
pub(super) fn explained(
    ctx: &Ctx,
    ns: &Namespace,
    push: &Pushdown,
    hint: Option<&str>,
) -> Result<Document, MongoError> {
    let db = readable_db(ctx, ns, "aggregate")?;
    let limit = push.limit.unwrap_or(0);
    let query = (&push.filter, &sort_doc(push));
    let read = (hint, push.paths.as_deref());
    super::explain::winning_plan(db.as_deref(), ns, query, (push.skip, limit), read)
}

/// The paths the stage after the pushed-down query reads (`None`: whole documents).
fn paths_of(push: &Pushdown) -> Result<Option<Vec<FieldPath>>, MongoError> {
    let parse = |p: &String| FieldPath::parse(p).map_err(MongoError::from);
    push.paths.as_ref().map(|paths| paths.iter().map(parse).collect()).transpose()
}

/// The next batch of a pipeline's answer: up to `size` documents (`0`: no count limit)
/// and at most 16 MiB of them (at least one); and whether more follow. Only what the
/// batch holds is computed (and the next document, to know whether there is one).
fn pull(
    docs: &mut Peekable<Docs<'static>>,
    size: usize,
) -> Result<(Vec<Document>, bool), MongoError> {
    let size = if size == 0 { usize::MAX } else { size };
    let (mut out, mut bytes) = (Vec::new(), 0);
    while out.len() < size {
        let len = match docs.peek() {
            None => break,
            Some(Ok(next)) => next.to_vec().map_or(0, |v| v.len()),
            Some(Err(_)) => 0,
        };
        if !out.is_empty() && bytes + len > wire::MAX_BSON_SIZE {
            break;
        }
        bytes += len;
        out.extend(docs.next().transpose().map_err(from_expr)?);
    }
    Ok((out, docs.peek().is_some()))
}

/// Logs the pipeline for the advisor's `$lookup` chains (issue 18, rule 8).
fn observe(ctx: &Ctx, request: &Request) {
    if request.collectionless {
        return;
    }
    let Some(db) = ctx.server.engine.get_db(&request.ns.engine_name()) else { return };
    let stages: Vec<serde_json::Value> = request
        .stages
        .iter()
        .filter_map(Bson::as_document)
        .map(|d| serde_json::Value::Object(bunko_doc::ejson::to_json(d)))
        .collect();
    db.observe_pipeline(&stages);
}

/// `$$NOW` and the command's `let` variables.
fn variables(command: &Document) -> Result<Vars, MongoError> {
    let mut vars = Vars::new(&Document::new(), DateTime::now());
    for (name, e) in doc_of(command, "let")? {
        bunko_query::expr::cond_check_var_name(&name).map_err(from_expr)?;
        let value = Expr::parse(&e).and_then(|e| e.eval(&mut vars.clone())).map_err(from_expr)?;
        vars.bind(&name, value);
    }
    Ok(vars)
}

/// The pushed-down sort as `find` takes it.
pub(super) fn order_of(push: &Pushdown) -> Result<Vec<(FieldPath, Direction)>, MongoError> {
    push.sort
        .iter()
        .map(|(path, asc)| {
            let path = FieldPath::parse(&path.join(".")).map_err(MongoError::from)?;
            Ok((path, if *asc { Direction::Asc } else { Direction::Desc }))
        })
        .collect()
}

/// `explain: true`: the stages pushed into the query (its `winningPlan` as `find`'s
/// explain shows it: an index-served `$sort` is an `IXSCAN` with its direction and no
/// `SORT` stage) and the ones run after it.
fn explain_reply(
    ns: &Namespace,
    stages: &[Bson],
    push: &Pushdown,
    env: &dyn Env,
    plan: Document,
) -> Document {
    let name =
        |s: &Bson| s.as_document().and_then(|d| d.keys().next().cloned()).unwrap_or_default();
    let pushed: Vec<String> = stages.iter().take(push.stages).map(name).collect();
    let query_planner =
        doc! {"namespace": ns.full(), "parsedQuery": push.filter.clone(), "winningPlan": plan};
    let mut out = vec![Bson::Document(
        doc! {"$cursor": {"queryPlanner": query_planner, "pushedDown": pushed}},
    )];
    out.extend(stages.iter().skip(push.stages).map(|s| annotated(s, env)));
    doc! {"explainVersion": "1", "stages": out}
}

/// The pushed-down sort as a sort document.
pub(super) fn sort_doc(push: &Pushdown) -> Document {
    let sort = push.sort.iter();
    sort.map(|(p, asc)| (p.join("."), Bson::Int32(if *asc { 1 } else { -1 }))).collect()
}

/// A stage as `explain` shows it; a `$lookup` on `localField`/`foreignField` says how it
/// reads the foreign collection: `bunkoStrategy` `IdLookups` (`_id` point reads),
/// `IndexLookups` (each value through the foreign field's index, named by `indexName`, with
/// MongoDB's `strategy: "IndexedLoopJoin"`), or `CollectionRead` (the foreign collection
/// read once, joined in memory: `HashJoin`).
fn annotated(stage: &Bson, env: &dyn Env) -> Bson {
    let Some(Ok(lookup)) = stage.as_document().map(|d| d.get_document("$lookup")) else {
        return stage.clone();
    };
    let (Ok(foreign), Ok(from)) = (lookup.get_str("foreignField"), lookup.get_str("from")) else {
        return stage.clone();
    };
    let index = env.index_on(from, foreign);
    let (ours, theirs) = match (foreign, &index) {
        ("_id", _) => ("IdLookups", "IndexedLoopJoin"),
        (_, Some(_)) => ("IndexLookups", "IndexedLoopJoin"),
        (_, None) => ("CollectionRead", "HashJoin"),
    };
    let mut shown = lookup.clone();
    shown.insert("bunkoStrategy", ours);
    let mut out = doc! {"$lookup": shown, "strategy": theirs};
    match (foreign, index) {
        ("_id", _) => out.insert("indexName", "_id_"),
        (_, Some(name)) => out.insert("indexName", name),
        (_, None) => None,
    };
    Bson::Document(out)
}
