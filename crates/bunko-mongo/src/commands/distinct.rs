//! `distinct` and its `explain`: a `DISTINCT_SCAN` of an index where one answers
//! (`bunko_engine::find::mongo_distinct`: the key is a field of the index, and the filter
//! is empty or said whole by the index bounds), reading about one entry per value, shown
//! as MongoDB 8 shows it (`PROJECTION_COVERED` over it, or `PROJECTION_DEFAULT` over one
//! that reads documents, `isFetching`);
//! otherwise the matching documents, each value reached through arrays. Values equal in
//! MongoDB's order (under the query's collation) count once, the first met kept.

use bson::{Bson, Document, doc};
use bunko_doc::ejson;
use bunko_engine::Database;
use bunko_engine::find::ExecStats;
use bunko_engine::find::mongo_distinct::DistinctScan;
use bunko_engine::security::UserCtx;
use bunko_query::{FieldPath, Selector};
use serde_json::Value;

use super::crud::{mongo_query, non_negative, reach, readable_db, run_hinted, within_max_time};
use super::explain::{self, Explained};
use super::{Ctx, doc_of, namespace};
use crate::error::MongoError;
use crate::query;

fn key_of(command: &Document) -> Result<&str, MongoError> {
    command.get_str("key").map_err(|_| {
        MongoError::failed_to_parse("BSON field 'distinct.key' is missing but a required field")
    })
}

pub(super) fn distinct(ctx: &mut Ctx, command: &Document) -> Result<Document, MongoError> {
    let started = std::time::Instant::now();
    non_negative(command, "maxTimeMS")?;
    let ns = namespace(ctx, command)?;
    let key = key_of(command)?;
    let selector = query::selector(&doc_of(command, "query")?)?;
    let Some(db) = readable_db(ctx, &ns, "distinct")? else {
        return Ok(doc! {"values": []});
    };
    let hint = super::indexes::hint(&db, command.get("hint"))?;
    let user = super::admin::user(ctx);
    let values = match indexed(&user, &db, &selector, key, hint.as_deref())? {
        Some((values, _, _)) => values.iter().map(ejson::value_from_json).collect(),
        None => {
            let path: Vec<&str> = key.split('.').collect();
            let mut reached = Vec::new();
            let query = mongo_query(selector, 0, usize::MAX);
            for doc in run_hinted(&user, &db, query, &[], hint)? {
                reach(&Bson::Document(doc), &path, &mut reached);
            }
            reached
        }
    };
    within_max_time(command, started)?;
    Ok(doc! {"values": once_each(values)})
}

/// `values` without those equal to an earlier one in MongoDB's order.
fn once_each(values: Vec<Bson>) -> Vec<Bson> {
    let mut out: Vec<(Value, Bson)> = Vec::new();
    for value in values {
        let view = ejson::value_to_json(&value);
        if !out.iter().any(|(v, _)| bunko_query::bson_order::compare(v, &view).is_eq()) {
            out.push((view, value));
        }
    }
    out.into_iter().map(|(_, v)| v).collect()
}

/// The values a distinct scan gives, with what it examined and its plan (`None`: no index
/// answers).
fn indexed(
    user: &UserCtx,
    db: &Database,
    selector: &Selector,
    key: &str,
    hint: Option<&str>,
) -> Result<Option<(Vec<Value>, ExecStats, DistinctScan)>, MongoError> {
    let Ok(path) = FieldPath::parse(key) else { return Ok(None) };
    let Some(plan) = db.distinct_plan(selector, &path, hint)? else { return Ok(None) };
    let Some((values, stats)) = db.distinct_mongo_index(user, selector, &plan)? else {
        return Ok(None);
    };
    Ok(Some((values, stats, plan)))
}

/// `explain` of a `distinct` a distinct scan answers (`None`: explained as a query).
pub(super) fn explain(
    ctx: &mut Ctx,
    inner: &Document,
    target: &Explained,
    verbosity: &str,
) -> Result<Option<Document>, MongoError> {
    let Some(db) = readable_db(ctx, &target.ns, "explain")? else { return Ok(None) };
    let key = key_of(inner)?;
    let selector = query::selector(&target.filter)?;
    let hint = super::indexes::hint(&db, inner.get("hint"))?;
    let started = std::time::Instant::now();
    let user = super::admin::user(ctx);
    let Some((values, stats, plan)) = indexed(&user, &db, &selector, key, hint.as_deref())? else {
        return Ok(None);
    };
    let millis = explain::number(started.elapsed().as_millis() as u64);
    let n = once_each(values.iter().map(ejson::value_from_json).collect()).len() as u64;
    let mut scan = explain::plan_access(&plan.scan, true);
    scan.insert("stage", "DISTINCT_SCAN");
    scan.insert("isFetching", plan.fetch);
    // MongoDB 8's distinct scan reads the documents itself (`isFetching`); the projection
    // above it is covered when it does not.
    let on_top = |mut scan: Document, counts: Option<&ExecStats>| {
        let stage = if plan.fetch { "PROJECTION_DEFAULT" } else { "PROJECTION_COVERED" };
        let mut projection = doc! {"stage": stage};
        if let Some(stats) = counts {
            projection.insert("nReturned", explain::number(n));
            if plan.fetch {
                scan.insert("docsExamined", explain::number(stats.docs_examined));
            }
        }
        projection.insert("transformBy", doc! {"_id": 0, key: 1});
        projection.insert("inputStage", scan);
        projection
    };
    let mut reply = doc! {"explainVersion": "1"};
    let winning = on_top(scan.clone(), None);
    reply.insert("queryPlanner", explain::planner(target, winning, Vec::new()));
    if verbosity != "queryPlanner" {
        let mut counted = scan;
        counted.insert("nReturned", explain::number(stats.results_returned));
        counted.insert("keysExamined", explain::number(stats.keys_examined));
        let mut execution = doc! {
            "executionSuccess": true,
            "nReturned": explain::number(n),
            "executionTimeMillis": millis,
            "totalKeysExamined": explain::number(stats.keys_examined),
            "totalDocsExamined": explain::number(stats.docs_examined),
            "executionStages": on_top(counted, Some(&stats)),
        };
        if verbosity == "allPlansExecution" {
            execution.insert("allPlansExecution", Vec::<Bson>::new());
        }
        reply.insert("executionStats", execution);
    }
    reply.insert("command", inner.clone());
    Ok(Some(reply))
}
