//! `count` and its `explain`, planned as MongoDB plans a count:
//!
//! 1. an empty filter without `hint` is the collection's document count
//!    (`RECORD_STORE_FAST_COUNT`, the count `collStats` shows);
//! 2. a filter an index's bounds answer exactly counts that index's entries without
//!    reading a document (`Database::count_mongo_index`): `COUNT` over `COUNT_SCAN` when
//!    the bounds are one interval of keys, over `IXSCAN` when they are several (`$in`);
//! 3. otherwise the query runs as `find` runs it, counting the matches: from the index
//!    entries when the index covers the filter (`IXSCAN` alone), else by reading documents
//!    (`FETCH` over `IXSCAN`, or `COLLSCAN`).
//!
//! `skip` and `limit` apply to the count (MongoDB's `COUNT` stage: `nSkipped`, `nCounted`).
//!
//! pymongo's `count_documents`, an `aggregate` of `[{$match}, {$group: {_id: <constant>,
//! n: {$sum: 1}}}]`, is counted from index entries the same way when the filter's bounds
//! say it whole ([`pipeline`]); otherwise the pipeline runs.

use bson::{Bson, Document, doc};
use bunko_doc::ejson;
use bunko_engine::Database;
use bunko_engine::find::ExecStats;
use bunko_engine::find::mongo_count::Interval;
use bunko_engine::find::mongo_index::MongoScan;
use bunko_engine::security::UserCtx;
use bunko_query::{Node, Selector};

use super::crud::{mongo_query, non_negative, readable_db, within_max_time};
use super::explain::{self, Explained};
use super::{Ctx, cursor_reply, doc_of, int_of, namespace};
use crate::error::MongoError;
use crate::query;

/// How a count was answered.
enum Route {
    /// The collection's document count.
    Fast,
    /// The entries of an index within its bounds.
    Entries(MongoScan),
    /// The matches of the query (`covered`: from the index entries).
    Query { scan: Option<MongoScan>, covered: bool },
}

/// A count before `skip` and `limit`, how it was made and what it examined.
struct Counted {
    total: u64,
    route: Route,
    stats: ExecStats,
}

/// `skip` and `limit` of a count command (`limit` 0: none; a negative one counts as its
/// absolute value, as MongoDB does).
fn window(command: &Document) -> Result<(u64, u64), MongoError> {
    let skip = non_negative(command, "skip")?.unwrap_or(0) as u64;
    let limit = match int_of(command, "limit")? {
        Some(0) | None => u64::MAX,
        Some(n) => n.unsigned_abs(),
    };
    Ok((skip, limit))
}

pub(super) fn count(ctx: &mut Ctx, command: &Document) -> Result<Document, MongoError> {
    let ns = namespace(ctx, command)?;
    let selector = query::selector(&doc_of(command, "query")?)?;
    let (skip, limit) = window(command)?;
    let Some(db) = readable_db(ctx, &ns, "count")? else { return Ok(doc! {"n": 0}) };
    let hint = super::indexes::hint(&db, command.get("hint"))?;
    let started = std::time::Instant::now();
    let counted = run(&super::admin::user(ctx), &db, selector, hint)?;
    within_max_time(command, started)?;
    let n = counted.total.saturating_sub(skip).min(limit);
    Ok(doc! {"n": i32::try_from(n).unwrap_or(i32::MAX)})
}

/// Counts what `selector` matches in `db` (see the module doc).
fn run(
    user: &UserCtx,
    db: &Database,
    selector: Selector,
    hint: Option<String>,
) -> Result<Counted, MongoError> {
    let empty = matches!(selector.root(), Node::Empty) && !selector.has_predicate();
    if empty && hint.is_none() && db.sight(user)?.is_whole() {
        let total = super::stats::doc_count(db);
        return Ok(Counted { total, route: Route::Fast, stats: ExecStats::default() });
    }
    let scan = db.mongo_plan(&selector, hint.as_deref())?;
    if let Some(scan) = scan.clone()
        && let Some(stats) = db.count_mongo_index(user, &selector, &scan)?
    {
        return Ok(Counted { total: stats.results_returned, route: Route::Entries(scan), stats });
    }
    let covered = scan.as_ref().is_some_and(|s| s.covered(&selector, &[], &[]));
    let mut query = mongo_query(selector, 0, usize::MAX);
    query.use_index = hint.map(|h| (h, None));
    query.fields = Some(Vec::new());
    let result = db.find_mongo(user, &query, &[])?;
    let stats = match &result.index {
        Some(_) => result.stats,
        None => ExecStats { keys_examined: 0, ..result.stats },
    };
    let total = result.docs.len() as u64;
    Ok(Counted { total, route: Route::Query { scan, covered }, stats })
}

/// `explain` of a `count` (`target`: the command as `explain` read it).
pub(super) fn explain(
    ctx: &mut Ctx,
    inner: &Document,
    target: &Explained,
    verbosity: &str,
) -> Result<Document, MongoError> {
    let mut reply = doc! {"explainVersion": "1"};
    let Some(db) = readable_db(ctx, &target.ns, "explain")? else {
        let winning = doc! {"stage": "COUNT", "inputStage": {"stage": "EOF"}};
        reply.insert("queryPlanner", explain::planner(target, winning, Vec::new()));
        reply.insert("command", inner.clone());
        return Ok(reply);
    };
    let selector = query::selector(&target.filter)?;
    let hint = super::indexes::hint(&db, inner.get("hint"))?;
    let (skip, limit) = window(inner)?;
    let started = std::time::Instant::now();
    let counted = run(&super::admin::user(ctx), &db, selector, hint.clone())?;
    let millis = started.elapsed().as_millis() as u64;
    let input = plan(target, &counted.route, hint.is_some());
    reply.insert("queryPlanner", explain::planner(target, wrap(input.clone()), Vec::new()));
    if verbosity != "queryPlanner" {
        let n = counted.total.saturating_sub(skip).min(limit);
        let stats = &counted.stats;
        let mut stages = match input {
            Some(stage) => doc! {"stage": "COUNT", "inputStage": examined(stage, stats)},
            None => doc! {"stage": "RECORD_STORE_FAST_COUNT"},
        };
        stages.insert("nReturned", 0);
        stages.insert("nCounted", explain::number(n));
        stages.insert("nSkipped", explain::number(counted.total.min(skip)));
        let mut execution = doc! {
            "executionSuccess": true,
            "nReturned": 0,
            "executionTimeMillis": explain::number(millis),
            "totalKeysExamined": explain::number(stats.keys_examined),
            "totalDocsExamined": explain::number(stats.docs_examined),
            "executionStages": stages,
        };
        if verbosity == "allPlansExecution" {
            execution.insert("allPlansExecution", Vec::<Bson>::new());
        }
        reply.insert("executionStats", execution);
    }
    reply.insert("command", inner.clone());
    Ok(reply)
}

/// `COUNT` over `input`, or `RECORD_STORE_FAST_COUNT` alone.
fn wrap(input: Option<Document>) -> Document {
    match input {
        Some(stage) => doc! {"stage": "COUNT", "inputStage": stage},
        None => doc! {"stage": "RECORD_STORE_FAST_COUNT"},
    }
}

/// The stage under `COUNT` (`None`: a fast count has none).
fn plan(target: &Explained, route: &Route, hinted: bool) -> Option<Document> {
    match route {
        Route::Fast => None,
        Route::Entries(scan) => Some(match scan.interval() {
            Some(interval) => count_scan(scan, &interval),
            None => explain::plan_access(scan, true),
        }),
        Route::Query { scan, covered } => {
            Some(explain::access_stage(target, scan.as_ref(), hinted, *covered))
        }
    }
}

/// MongoDB's `COUNT_SCAN`: the index as `IXSCAN` shows it, its bounds as one interval.
fn count_scan(scan: &MongoScan, interval: &Interval) -> Document {
    let mut stage = explain::plan_access(scan, true);
    stage.insert("stage", "COUNT_SCAN");
    stage.remove("direction");
    let key = |fields: &[(String, serde_json::Value)]| -> Document {
        fields.iter().map(|(f, v)| (f.clone(), ejson::value_from_json(v))).collect()
    };
    stage.insert(
        "indexBounds",
        doc! {
            "startKey": key(&interval.start),
            "startKeyInclusive": interval.start_inclusive,
            "endKey": key(&interval.end),
            "endKeyInclusive": interval.end_inclusive,
        },
    );
    stage
}

/// The stage under `COUNT` with what it examined (`keysExamined` on the index stage,
/// `docsExamined` on a `FETCH` or `COLLSCAN`).
fn examined(mut stage: Document, stats: &ExecStats) -> Document {
    let keys = explain::number(stats.keys_examined);
    let docs = explain::number(stats.docs_examined);
    match stage.get_str("stage").unwrap_or_default() {
        "COUNT_SCAN" | "IXSCAN" => {
            stage.insert("keysExamined", keys);
        }
        "FETCH" => {
            if let Ok(ix) = stage.get_document_mut("inputStage") {
                ix.insert("keysExamined", keys);
            }
            stage.insert("docsExamined", docs);
        }
        _ => {
            stage.insert("docsExamined", docs);
        }
    }
    stage
}

/// `[{$match: filter}, {$group: {_id: <constant>, <name>: {$sum: 1}}}]` (pymongo's
/// `count_documents`) answered from index entries when an index's bounds say the filter
/// whole (`None`: the pipeline runs, and so does its `explain`).
pub(super) fn pipeline(ctx: &mut Ctx, command: &Document) -> Result<Option<Document>, MongoError> {
    let Some((filter, id, name)) = count_shape(command) else { return Ok(None) };
    let batch = command.get_document("cursor").ok().map(|c| c.get("batchSize"));
    if command.contains_key("explain") || matches!(batch, Some(Some(Bson::Int32(0)))) {
        return Ok(None);
    }
    let ns = namespace(ctx, command)?;
    let Some(db) = readable_db(ctx, &ns, "aggregate")? else { return Ok(None) };
    let Ok(selector) = query::selector(filter) else { return Ok(None) };
    let hint = super::indexes::hint(&db, command.get("hint"))?;
    let Some(scan) = db.mongo_plan(&selector, hint.as_deref())? else { return Ok(None) };
    let user = super::admin::user(ctx);
    let Some(stats) = db.count_mongo_index(&user, &selector, &scan)? else { return Ok(None) };
    let n = stats.results_returned;
    let total = i32::try_from(n).map_or(Bson::Int64(n as i64), Bson::Int32);
    let docs = match n {
        0 => Vec::new(),
        _ => vec![doc! {"_id": id.clone(), name: total}],
    };
    Ok(Some(cursor_reply(0, &ns.full(), "firstBatch", docs)))
}

/// The filter, group key and count field of a counting pipeline.
fn count_shape(command: &Document) -> Option<(&Document, &Bson, &str)> {
    let Some(Bson::Array(stages)) = command.get("pipeline") else { return None };
    let [Bson::Document(first), Bson::Document(second)] = stages.as_slice() else { return None };
    let (Some(Bson::Document(filter)), 1) = (first.get("$match"), first.len()) else { return None };
    let (Some(Bson::Document(group)), 1) = (second.get("$group"), second.len()) else {
        return None;
    };
    let id = group.get("_id")?;
    let constant = match id {
        Bson::String(s) => !s.starts_with('$'),
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Null | Bson::Boolean(_) => true,
        _ => false,
    };
    let mut rest = group.iter().filter(|(k, _)| *k != "_id");
    let (Some((name, Bson::Document(sum))), None) = (rest.next(), rest.next()) else { return None };
    let one = matches!(sum.get("$sum"), Some(Bson::Int32(1) | Bson::Int64(1)));
    (constant && one && sum.len() == 1).then_some((filter, id, name.as_str()))
}
