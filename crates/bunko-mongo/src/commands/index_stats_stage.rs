//! `$indexStats` as the first stage of `aggregate`: one document per index of the
//! collection, in `listIndexes` order, in MongoDB's shape: `name`, `key`, `host`,
//! `accesses: {ops, since}`, `spec` (the index as `listIndexes` shows it) and `building:
//! true` while it is being built. `ops` counts the queries (`find`, `aggregate`, `count`,
//! `distinct`, `update`, `delete`, `findAndModify`) whose plan read the index, or, for
//! `_id_`, read a document by its `_id`; the counters live in memory
//! (`bunko_engine::index::Accesses`) and start again when the server restarts or the
//! index is created again, as MongoDB's do. A missing collection has no indexes. The
//! stage becomes `$documents` holding those documents, and the rest of the pipeline runs
//! over them.

use bson::{Bson, DateTime, Document, doc};

use super::{Ctx, indexes};
use crate::error::MongoError;
use crate::names::Namespace;

/// The pipeline with a leading `$indexStats` replaced by `$documents`; `None` without one.
pub(super) fn rewrite(
    ctx: &mut Ctx,
    ns: &Namespace,
    stages: &[Bson],
) -> Result<Option<Vec<Bson>>, MongoError> {
    let first = stages.first().and_then(Bson::as_document);
    let Some(spec) = first.and_then(|s| s.get("$indexStats")) else { return Ok(None) };
    if !matches!(spec, Bson::Document(d) if d.is_empty()) {
        return Err(MongoError::new(
            28803,
            "Location28803",
            "The $indexStats stage specification must be an empty object",
        ));
    }
    let host = ctx.session.local.to_string();
    let listed = match ctx.server.engine.get_db(&ns.engine_name()) {
        // A time-series collection's indexes as its `listIndexes` shows them.
        Some(db) if super::views::is_timeseries(&ctx.server.engine, ns) => {
            super::timeseries_index::list(&db, ns)
        }
        _ => indexes::list_indexes(ctx, &doc! {"listIndexes": &ns.coll}),
    };
    let stats = match listed {
        Ok(reply) => first_batch(&reply)
            .into_iter()
            .map(|spec| Bson::Document(entry(ctx, ns, &host, spec)))
            .collect(),
        Err(err) if err.code == 26 => Vec::new(),
        Err(err) => return Err(err),
    };
    // Literal: a spec's `partialFilterExpression` holds `$` operators, not expressions.
    let mut rewritten = vec![Bson::Document(doc! {"$documents": {"$literal": stats}})];
    rewritten.extend(stages[1..].iter().cloned());
    Ok(Some(rewritten))
}

/// The statistics document of the index `spec` describes.
fn entry(ctx: &Ctx, ns: &Namespace, host: &str, spec: Document) -> Document {
    let name = spec.get_str("name").unwrap_or_default().to_string();
    let db = ctx.server.engine.get_db(&ns.engine_name());
    let (ops, since, building) = match db {
        Some(db) if name == "_id_" => (db.id_accesses.ops(), db.id_accesses.since_millis(), false),
        Some(db) => match db.mongo_indexes().into_iter().find(|i| i.def.name == name) {
            Some(i) => (i.accesses.ops(), i.accesses.since_millis(), !i.is_ready()),
            None => (0, DateTime::now().timestamp_millis(), false),
        },
        None => (0, DateTime::now().timestamp_millis(), false),
    };
    let mut out = doc! {
        "name": &name,
        "key": spec.get("key").cloned().unwrap_or(Bson::Document(Document::new())),
        "host": host,
        "accesses": {
            "ops": i64::try_from(ops).unwrap_or(i64::MAX),
            "since": DateTime::from_millis(since),
        },
        "spec": spec,
    };
    if building {
        out.insert("building", true);
    }
    out
}

/// The documents of a cursor reply's first batch.
fn first_batch(reply: &Document) -> Vec<Document> {
    let batch = reply.get_document("cursor").and_then(|c| c.get_array("firstBatch"));
    batch.map(|b| b.iter().filter_map(Bson::as_document).cloned().collect()).unwrap_or_default()
}
