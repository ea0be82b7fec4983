//! `explain` of `find`, `count`, `distinct`, `delete`, `update` and `findAndModify` (and so
//! pymongo's `cursor.explain()`): the plan of the shared planner in MongoDB's shape
//! (`queryPlanner.winningPlan` with `IXSCAN` + `FETCH`, `IDHACK` or `COLLSCAN`, then `SORT`
//! unless an index scan yields the order (its `direction` then says which way; a
//! `SORT_MERGE` of one `IXSCAN` per point when the filter fixes a field to several), `SKIP`,
//! `LIMIT`; `rejectedPlans`), and with verbosity `executionStats` or `allPlansExecution` (the
//! default) the query run read-only for `executionStats` (`nReturned`, `totalKeysExamined`,
//! `totalDocsExamined`, `executionStages`). `IXSCAN` shows the index's multikey state
//! (`isMultiKey`, `multiKeyPaths`); `allPlansExecution` runs every candidate plan for
//! MongoDB's trial period (`all_plans`). Writes are planned and counted, never applied. On a
//! time-series collection, the query explained is the one run over its stored documents
//! ([`stored_form`]), its field names shown as the measurements' again.

use bson::{Bson, Document, doc};
use bunko_engine::Database;
use bunko_engine::find::mongo_index::MongoScan;
use bunko_engine::index::Index;

use super::crud::{mongo_query, readable_db};
use super::{Ctx, doc_of};
use crate::error::MongoError;
use crate::names::Namespace;
use crate::query;

/// What an explained command asks for.
pub(super) struct Explained {
    pub(super) ns: Namespace,
    pub(super) filter: Document,
    sort: Document,
    skip: usize,
    limit: usize,
    hint: Option<Bson>,
    /// `find`'s projection (empty: none); an aggregation's pushed-down query shows the
    /// paths the next stage reads.
    projection: Document,
}

pub(super) fn explain(ctx: &mut Ctx, command: &Document) -> Result<Document, MongoError> {
    let mut reply = explain_command(ctx, command)?;
    let target = match command.get("explain") {
        Some(Bson::Document(inner)) => explained(ctx, inner).ok(),
        _ => None,
    };
    if target.is_some_and(|t| super::views::is_timeseries(&ctx.server.engine, &t.ns)) {
        super::timeseries_query::measurement_plan(&mut reply);
    }
    Ok(reply)
}

fn explain_command(ctx: &mut Ctx, command: &Document) -> Result<Document, MongoError> {
    let Some(Bson::Document(inner)) = command.get("explain") else {
        return Err(MongoError::type_mismatch("BSON field 'explain.explain' must be an object"));
    };
    let verbosity = match command.get("verbosity") {
        None => "allPlansExecution",
        Some(Bson::String(v))
            if ["queryPlanner", "executionStats", "allPlansExecution"].contains(&v.as_str()) =>
        {
            v.as_str()
        }
        Some(other) => {
            return Err(MongoError::bad_value(format!(
                "Enumeration value '{other}' for field 'explain.verbosity' is not a valid value."
            )));
        }
    };
    let target = explained(ctx, inner)?;
    // On a time-series collection `count` and `distinct` run as aggregations over the
    // stored documents, with no `COUNT_SCAN` or `DISTINCT_SCAN`: their plan is the scan's.
    let scans_entries = !super::views::is_timeseries(&ctx.server.engine, &target.ns);
    if scans_entries && inner.keys().next().is_some_and(|name| name == "count") {
        return super::count::explain(ctx, inner, &target, verbosity);
    }
    if scans_entries
        && inner.keys().next().is_some_and(|name| name == "distinct")
        && let Some(reply) = super::distinct::explain(ctx, inner, &target, verbosity)?
    {
        return Ok(reply);
    }
    let selector = query::selector(&target.filter)?;
    let order = query::sort(&target.sort)?;
    let mut reply = doc! {"explainVersion": "1"};
    let Some(db) = readable_db(ctx, &target.ns, "explain")? else {
        let planner = planner(&target, doc! {"stage": "EOF"}, Vec::new());
        reply.insert("queryPlanner", planner);
        reply.insert("command", inner.clone());
        return Ok(reply);
    };
    let hint = super::indexes::hint(&db, target.hint.as_ref())?;
    let scan = access_scan(&db, &selector, &order, hint.as_deref())?;
    let reads = crate::projection::Projection::parse(&target.projection, &target.filter)?
        .and_then(|p| p.paths());
    let covered = covering(scan.as_ref(), &selector, reads.as_deref(), &order);
    let covers = |r: &MongoScan| covering(Some(r), &selector, reads.as_deref(), &order);
    let rejected: Vec<Document> = scan
        .iter()
        .flat_map(|s| s.rejected.iter())
        .map(|r| stages(&target, &plan_access(r, covers(r)), !order.is_empty(), None))
        .collect();
    let access = access_stage(&target, scan.as_ref(), hint.is_some(), covered);
    let blocking = blocking_sort(&order, scan.as_ref());
    let winning = stages(&target, &access, blocking, None);
    reply.insert("queryPlanner", planner(&target, winning, rejected));
    if verbosity != "queryPlanner" {
        let user = super::admin::user(ctx);
        let trials = match (verbosity, &scan) {
            ("allPlansExecution", Some(s)) if !s.rejected.is_empty() => {
                all_plans(&user, &db, &target, (&selector, &order, reads.as_deref()), s)?
            }
            _ => Vec::new(),
        };
        let bounds = match inner.keys().next().map(String::as_str) {
            Some("find") => super::min_max::bounds(&db, inner)?,
            _ => None,
        };
        let run = (selector, &order[..], hint, blocking, reads);
        let mut stats = execution(&user, &db, &target, (run, bounds.as_ref()), &access)?;
        if verbosity == "allPlansExecution" {
            stats.insert("allPlansExecution", trials);
        }
        reply.insert("executionStats", stats);
    }
    reply.insert("command", inner.clone());
    Ok(reply)
}

/// The index scan a query runs (as `find_mongo` chooses it): an index the filter can use,
/// else (unhinted) an index that yields the sort's order, else none.
fn access_scan(
    db: &Database,
    selector: &bunko_query::Selector,
    order: &[(bunko_query::FieldPath, bunko_query::Direction)],
    hint: Option<&str>,
) -> Result<Option<MongoScan>, MongoError> {
    Ok(db.mongo_access(selector, hint, order)?)
}

/// Whether `scan` answers from its index entries alone (a covered query) when the caller
/// needs only `reads` (`None`: whole documents).
fn covering(
    scan: Option<&MongoScan>,
    selector: &bunko_query::Selector,
    reads: Option<&[bunko_query::FieldPath]>,
    order: &[(bunko_query::FieldPath, bunko_query::Direction)],
) -> bool {
    match (scan, reads) {
        (Some(scan), Some(reads)) => scan.covered(selector, reads, order),
        _ => false,
    }
}

/// Whether a sort is done in memory (a `SORT` stage): there is one and no index yields it.
fn blocking_sort(
    order: &[(bunko_query::FieldPath, bunko_query::Direction)],
    scan: Option<&MongoScan>,
) -> bool {
    !order.is_empty() && !scan.is_some_and(|s| s.sorted)
}

/// The stage that reads documents: `FETCH` over `IXSCAN` (a covered query: `IXSCAN`
/// alone), `IDHACK` (an unhinted `_id` equality on a non-numeric value reads one
/// document), or `COLLSCAN`.
pub(super) fn access_stage(
    target: &Explained,
    scan: Option<&MongoScan>,
    hinted: bool,
    covered: bool,
) -> Document {
    let id = target.filter.get("_id").filter(|v| {
        !matches!(v, Bson::Document(_) | Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_))
    });
    match scan {
        Some(s) => plan_access(s, covered),
        None if id.is_some() && !hinted => doc! {"stage": "IDHACK"},
        None => doc! {"stage": "COLLSCAN", "filter": target.filter.clone(), "direction": "forward"},
    }
}

/// The stages reading an index scan's documents: `FETCH` over the `IXSCAN`, or the `IXSCAN`
/// alone for a covered query.
pub(super) fn plan_access(scan: &MongoScan, covered: bool) -> Document {
    let mut fetch = match &scan.merged {
        Some(merged) => sort_merge(merged),
        None => ixscan(&scan.index, Some(scan)),
    };
    match (covered, fetch.remove("inputStage")) {
        (true, Some(Bson::Document(ix))) => ix,
        (_, Some(ix)) => {
            fetch.insert("inputStage", ix);
            fetch
        }
        (_, None) => fetch,
    }
}

/// The `winningPlan` of a query over `db` (`None`: the collection does not exist), as
/// `explain` of `find` shows it; `aggregate`'s explain shows its pushed-down stages so.
/// `hint` names the index to use; `reads`, the paths the stage after the query reads
/// (`None`: whole documents), which a covering index answers from its entries.
pub(super) fn winning_plan(
    db: Option<&Database>,
    ns: &Namespace,
    (filter, sort): (&Document, &Document),
    (skip, limit): (usize, usize),
    (hint, reads): (Option<&str>, Option<&[String]>),
) -> Result<Document, MongoError> {
    let paths: Option<Vec<bunko_query::FieldPath>> =
        reads.map(|r| r.iter().map(|p| bunko_query::FieldPath::parse(p)).collect()).transpose()?;
    let mut projection: Document =
        reads.unwrap_or_default().iter().map(|p| (p.clone(), Bson::Int32(1))).collect();
    if !projection.contains_key("_id") && reads.is_some() {
        projection.insert("_id", 0);
    }
    let target = Explained {
        ns: ns.clone(),
        filter: filter.clone(),
        sort: sort.clone(),
        skip,
        limit,
        hint: None,
        projection,
    };
    let Some(db) = db else { return Ok(doc! {"stage": "EOF"}) };
    let order = query::sort(sort)?;
    let selector = query::selector(filter)?;
    let scan = access_scan(db, &selector, &order, hint)?;
    let covered = covering(scan.as_ref(), &selector, paths.as_deref(), &order);
    let access = access_stage(&target, scan.as_ref(), hint.is_some(), covered);
    // The paths read show only as a covered projection (a fetched document goes whole).
    let target = Explained {
        projection: if covered {
            target.projection
        } else {
            doc! {}
        },
        ..target
    };
    Ok(stages(&target, &access, blocking_sort(&order, scan.as_ref()), None))
}

/// The namespace, filter and options of the explained command.
fn explained(ctx: &Ctx, inner: &Document) -> Result<Explained, MongoError> {
    let Some((name, Bson::String(coll))) = inner.iter().next() else {
        return Err(MongoError::failed_to_parse("explain needs a command naming a collection"));
    };
    let db = match inner.get("$db") {
        Some(Bson::String(db)) => db.clone(),
        _ => ctx.db.clone(),
    };
    let ns = Namespace::new(&db, coll)?;
    let count = |field| super::crud::non_negative(inner, field).map(Option::unwrap_or_default);
    let first = |field: &str| match inner.get(field) {
        Some(Bson::Array(items)) => match items.first() {
            Some(Bson::Document(d)) => Ok(d.clone()),
            _ => Err(MongoError::failed_to_parse(format!("{name}.{field} must hold objects"))),
        },
        _ => Err(MongoError::failed_to_parse(format!("BSON field '{name}.{field}' is missing"))),
    };
    let projection = if name == "find" { doc_of(inner, "projection")? } else { Document::new() };
    let (filter, sort, skip, limit, hint) = match name.as_str() {
        "find" => (
            doc_of(inner, "filter")?,
            doc_of(inner, "sort")?,
            count("skip")?,
            count("limit")?,
            inner.get("hint").cloned(),
        ),
        "count" | "distinct" => {
            (doc_of(inner, "query")?, Document::new(), count("skip")?, count("limit")?, None)
        }
        "findAndModify" | "findandmodify" => {
            (doc_of(inner, "query")?, doc_of(inner, "sort")?, 0, 1, None)
        }
        "delete" => {
            let statement = first("deletes")?;
            let limit = super::crud::delete_limit(&statement)?;
            let limit = if limit == usize::MAX { 0 } else { limit };
            (doc_of(&statement, "q")?, Document::new(), 0, limit, statement.get("hint").cloned())
        }
        "update" => {
            let statement = first("updates")?;
            let limit = if super::bool_of(&statement, "multi", false)? { 0 } else { 1 };
            (doc_of(&statement, "q")?, Document::new(), 0, limit, statement.get("hint").cloned())
        }
        other => {
            return Err(MongoError::new(
                59,
                "CommandNotFound",
                format!("Explain failed due to unknown command: {other}"),
            ));
        }
    };
    if super::views::is_timeseries(&ctx.server.engine, &ns) {
        return Ok(stored_form(Explained { ns, filter, sort, skip, limit, hint, projection }));
    }
    Ok(Explained { ns, filter, sort, skip, limit, hint, projection })
}

/// A command on a time-series collection explained as the query it runs over the stored
/// documents ([`super::timeseries_query`]): the part of its filter an index can serve, its
/// sort when it sorts by fields, its hint on the stored fields, no projection.
fn stored_form(target: Explained) -> Explained {
    use super::timeseries_query as ts;
    Explained {
        filter: ts::implied(&target.filter),
        sort: ts::sort(&target.sort).unwrap_or_default(),
        hint: target.hint.as_ref().map(ts::hint),
        projection: Document::new(),
        ..target
    }
}

pub(super) fn planner(target: &Explained, winning: Document, rejected: Vec<Document>) -> Document {
    doc! {
        "namespace": target.ns.full(),
        "parsedQuery": target.filter.clone(),
        "indexFilterSet": false,
        "maxIndexedOrSolutionsReached": false,
        "maxIndexedAndSolutionsReached": false,
        "maxScansToExplodeReached": false,
        "winningPlan": winning,
        "rejectedPlans": rejected,
    }
}

/// A sort served by merging one index scan per point (MongoDB's `SORT_MERGE` over an
/// `IXSCAN` per point) under its `FETCH`.
fn sort_merge(merged: &bunko_engine::find::mongo_merge::Merged) -> Document {
    let pattern: Document = merged
        .order
        .iter()
        .map(|(path, dir)| {
            let dir = if *dir == bunko_query::Direction::Desc { -1 } else { 1 };
            (path.segments().join("."), Bson::Int32(dir))
        })
        .collect();
    let scans: Vec<Bson> = merged
        .parts
        .iter()
        .filter_map(|part| ixscan(&part.index, Some(part)).remove("inputStage"))
        .collect();
    let merge = doc! {"stage": "SORT_MERGE", "sortPattern": pattern, "inputStages": scans};
    doc! {"stage": "FETCH", "inputStage": merge}
}

/// The `IXSCAN` stage under its `FETCH`.
fn ixscan(index: &Index, scan: Option<&MongoScan>) -> Document {
    let spec = index.def.mongo.clone();
    let key: Document = spec.as_ref().map(super::indexes::key_pattern).unwrap_or_default();
    let bounds: Document = scan
        .map(|s| {
            s.index_bounds()
                .into_iter()
                .map(|(f, b)| (f, Bson::Array(b.into_iter().map(Bson::String).collect())))
                .collect()
        })
        .unwrap_or_default();
    // Entries are stored ascending whatever the key pattern says; a scan in descending
    // key order (`reverse`) is `forward` over a descending index, as MongoDB names it. For
    // a scan serving a sort, the direction that counts is that of the first field the
    // bounds do not fix to one value (the first sort field).
    let reverse = scan.is_some_and(|s| s.reverse);
    let moving = scan.filter(|s| s.sorted).map_or(0, MongoScan::fixed_fields);
    let descending = spec.as_ref().and_then(|s| s.key.get(moving).or(s.key.first()));
    let descending = descending.is_some_and(|(_, d)| *d < 0);
    let direction = if reverse == descending { "forward" } else { "backward" };
    let bounds: Document = match reverse {
        true => bounds
            .into_iter()
            .map(|(f, b)| match b {
                Bson::Array(b) => (f, Bson::Array(b.into_iter().rev().map(reversed).collect())),
                other => (f, other),
            })
            .collect(),
        false => bounds,
    };
    let meta = index.meta();
    let paths: Document = index
        .def
        .fields
        .iter()
        .enumerate()
        .map(|(i, field)| {
            (field.name.clone(), Bson::Array(multikey_paths(&field.name, meta.multikey.get(i))))
        })
        .collect();
    let ixscan = doc! {
        "stage": "IXSCAN",
        "keyPattern": key,
        "indexName": index.def.name.clone(),
        "isMultiKey": meta.is_multikey(),
        "multiKeyPaths": paths,
        "isUnique": spec.as_ref().is_some_and(|s| s.unique),
        "isSparse": spec.as_ref().is_some_and(|s| s.sparse),
        "isPartial": spec.as_ref().is_some_and(|s| s.partial.is_some()),
        "indexVersion": 2,
        "direction": direction,
        "indexBounds": bounds,
    };
    doc! {"stage": "FETCH", "inputStage": ixscan}
}

/// One field's `multiKeyPaths`: the prefixes of its path that end at an array
/// (`["links"]` for `links.target` over an array of links).
fn multikey_paths(field: &str, components: Option<&Vec<usize>>) -> Vec<Bson> {
    let segments: Vec<&str> = field.split('.').collect();
    let prefix = |c: &usize| segments.get(..=*c).map(|s| Bson::String(s.join(".")));
    components.map(|c| c.iter().filter_map(prefix).collect()).unwrap_or_default()
}

/// An interval as a scan in descending order meets it (`[a, b)` becomes `(b, a]`).
fn reversed(interval: Bson) -> Bson {
    let Bson::String(text) = &interval else { return interval };
    let (Some(open), Some(close)) = (text.chars().next(), text.chars().last()) else {
        return interval;
    };
    let inner = &text[open.len_utf8()..text.len() - close.len_utf8()];
    let Some((lo, hi)) = inner.split_once(", ") else { return interval };
    let open = if close == ']' { '[' } else { '(' };
    let close = if text.starts_with('[') { ']' } else { ')' };
    Bson::String(format!("{open}{hi}, {lo}{close}"))
}

/// The access stage wrapped in `SORT`, `SKIP` and `LIMIT` as the command asks; `counts`
/// adds each stage's `nReturned` (executionStats).
fn stages(target: &Explained, access: &Document, sorted: bool, n: Option<i32>) -> Document {
    let with_n = |mut d: Document| {
        if let Some(n) = n {
            d.insert("nReturned", n);
        }
        d
    };
    let mut plan = access.clone();
    if access.get_str("stage").is_ok_and(|s| s == "IDHACK") {
        return plan; // at most one document
    }
    if sorted {
        plan = with_n(doc! {
            "stage": "SORT",
            "sortPattern": target.sort.clone(),
            "memLimit": 104_857_600,
            "type": "simple",
            "inputStage": plan,
        });
    }
    if target.skip > 0 {
        plan = with_n(
            doc! {"stage": "SKIP", "skipAmount": number(target.skip as u64), "inputStage": plan},
        );
    }
    if let Some(stage) = projection_stage(target, access) {
        plan = with_n(
            doc! {"stage": stage, "transformBy": target.projection.clone(), "inputStage": plan},
        );
    }
    if target.limit > 0 {
        plan = with_n(
            doc! {"stage": "LIMIT", "limitAmount": number(target.limit as u64), "inputStage": plan},
        );
    }
    plan
}

/// The projection stage over `access`, as MongoDB names it: `PROJECTION_COVERED` over
/// an `IXSCAN` alone, `PROJECTION_SIMPLE` for top-level fields included or excluded, else
/// (dotted paths, computed fields, `$slice`, `$elemMatch`, positional) `PROJECTION_DEFAULT`.
fn projection_stage(target: &Explained, access: &Document) -> Option<&'static str> {
    if target.projection.is_empty() {
        return None;
    }
    Some(match access.get_str("stage") {
        Ok("IXSCAN" | "SORT_MERGE") => "PROJECTION_COVERED",
        _ if target.projection.iter().any(|(k, v)| {
            k.contains('.')
                || !matches!(
                    v,
                    Bson::Boolean(_) | Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_)
                )
        }) =>
        {
            "PROJECTION_DEFAULT"
        }
        _ => "PROJECTION_SIMPLE",
    })
}

/// The query of an explained command: selector, sort, hint, whether the sort blocks, and
/// the paths the projection reads (`None`: whole documents).
type Run<'o> = (
    bunko_query::Selector,
    &'o [(bunko_query::FieldPath, bunko_query::Direction)],
    Option<String>,
    bool,
    Option<Vec<bunko_query::FieldPath>>,
);

/// Runs the query read-only and reports what it examined.
fn execution(
    user: &bunko_engine::security::UserCtx,
    db: &Database,
    target: &Explained,
    ((selector, order, hint, blocking, reads), bounds): (Run, Option<&super::min_max::Bounds>),
    access: &Document,
) -> Result<Document, MongoError> {
    let limit = if target.limit == 0 { usize::MAX } else { target.limit };
    let mut query = mongo_query(selector, target.skip, limit);
    query.use_index = hint.map(|h| (h, None));
    query.fields = reads;
    let started = std::time::Instant::now();
    let result = match bounds {
        Some(bounds) => super::min_max::run(user, db, query, order, bounds)?,
        None => db.find_mongo(user, &query, order)?,
    };
    let millis = number(started.elapsed().as_millis() as u64);
    let n = result.docs.len() as i32;
    let (keys, docs) = match &result.index {
        Some(_) => (result.stats.keys_examined, result.stats.docs_examined),
        None => (0, result.stats.docs_examined),
    };
    let access = counted(access, keys, docs, n);
    Ok(doc! {
        "executionSuccess": true,
        "nReturned": n,
        "executionTimeMillis": millis,
        "totalKeysExamined": number(keys),
        "totalDocsExamined": number(docs),
        "executionStages": stages(target, &access, blocking, Some(n)),
    })
}

/// The access stage with what it examined and returned (a covered `IXSCAN` alone: its
/// keys).
fn counted(access: &Document, keys: u64, docs: u64, n: i32) -> Document {
    let mut access = access.clone();
    if access.get_str("stage").is_ok_and(|s| s == "IXSCAN") {
        access.insert("keysExamined", number(keys));
        access.insert("nReturned", number(keys));
        return access;
    }
    if let Some(Bson::Document(ix)) = access.get_mut("inputStage") {
        ix.insert("keysExamined", number(keys));
        ix.insert("nReturned", number(keys));
    }
    access.insert("docsExamined", number(docs));
    access.insert("nReturned", n);
    access
}

/// MongoDB's trial period: each candidate plan runs until it returns this many documents
/// (`internalQueryPlanEvaluationMaxResults`)…
const TRIAL_RESULTS: u64 = 101;
/// …or has read this many keys (`internalQueryPlanEvaluationWorks`), or 30% of the
/// collection's documents if more (`internalQueryPlanEvaluationCollFraction`).
const TRIAL_KEYS: u64 = 10_000;

/// What a trial run reads: the filter, the sort and the paths the projection needs.
type Trial<'t> = (
    &'t bunko_query::Selector,
    &'t [(bunko_query::FieldPath, bunko_query::Direction)],
    Option<&'t [bunko_query::FieldPath]>,
);

/// `allPlansExecution`: every candidate plan (the winning one first, then the rejected
/// ones) run read-only for MongoDB's trial period, with what each examined and returned.
fn all_plans(
    user: &bunko_engine::security::UserCtx,
    db: &Database,
    target: &Explained,
    (selector, order, reads): Trial,
    scan: &MongoScan,
) -> Result<Vec<Bson>, MongoError> {
    let wanted = match target.limit {
        0 => TRIAL_RESULTS,
        limit => TRIAL_RESULTS.min((target.skip + limit) as u64),
    };
    let keys = TRIAL_KEYS.max(db.info().stats.doc_count * 3 / 10);
    let mut out = Vec::new();
    for plan in std::iter::once(scan).chain(&scan.rejected) {
        let started = std::time::Instant::now();
        let covered = covering(Some(plan), selector, reads, order);
        let stats = db.trial_mongo_scan(user, selector, (plan, covered), (wanted, keys))?;
        let n = i32::try_from(stats.results_returned).unwrap_or(i32::MAX);
        let access =
            counted(&plan_access(plan, covered), stats.keys_examined, stats.docs_examined, n);
        out.push(Bson::Document(doc! {
            "nReturned": n,
            "executionTimeMillisEstimate": number(started.elapsed().as_millis() as u64),
            "totalKeysExamined": number(stats.keys_examined),
            "totalDocsExamined": number(stats.docs_examined),
            "executionStages": stages(target, &access, !order.is_empty() && !plan.sorted, Some(n)),
        }));
    }
    Ok(out)
}

/// A count as MongoDB's explain writes it: int32 when it fits (mongosh and the drivers see
/// a plain number), int64 beyond.
pub(super) fn number(n: u64) -> Bson {
    i32::try_from(n).map_or(Bson::Int64(n as i64), Bson::Int32)
}
