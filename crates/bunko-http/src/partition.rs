//! Cloudant's partition routes, `/{db}/_partition/{partition}/…`.
//!
//! - `GET /{db}/_partition/{p}`: the partition's counters ([`Database::partition_stats`]),
//!   kept by every write, so answering reads one key whatever the partition's size.
//! - `GET /{db}/_partitions`: every partition's counters (Bunko's own, for the console's
//!   partition chart).
//! - `GET/POST /{db}/_partition/{p}/_all_docs`: `_all_docs` bounded to the ids `p:…`, one
//!   contiguous range scan (`docs/architecture/keys.md`).
//! - `GET/POST /{db}/_partition/{p}/_design/{ddoc}/_view/{view}`: a partitioned view over
//!   the partition's range of rows ([`crate::view`]).
//! - `GET/POST /{db}/_partition/{p}/_design/{ddoc}/_search/{index}`: a search of a
//!   partitioned search index, restricted to the partition ([`crate::search`]).
//! - `POST /{db}/_partition/{p}/_find` and `_explain`: Mango over the partition's range of a
//!   partitioned index, or of the partition's documents ([`crate::find`]).
//!
//! The checks run in CouchDB's order (`chttpd_db:handle_partition_req`): a bare
//! `/_partition` is a bad request; the partition name is validated; the database must be
//! partitioned; a `partition` query parameter must agree with the path. Paths under a
//! partition that name nothing known answer `404`.

use std::sync::Arc;

use axum::extract::{Path, RawQuery, State as AxState};
use axum::http::{Method, StatusCode};
use axum::response::Response;
use axum::routing::{any, get};
use axum::{Extension, Router};
use bunko_doc::id::validate_partition;
use bunko_engine::Database;
use bunko_engine::advisor::Client;
use serde_json::json;

use crate::all_docs;
use crate::body::RawBody;
use crate::db::{Access, open};
use crate::error::{ApiError, ApiResult};
use crate::params::Params;
use crate::{State, UserCtx, blocking, find, render};

/// The largest `limit` of a partition query (CouchDB's default `partition_query_limit`).
pub const PARTITION_QUERY_LIMIT: u64 = 268_435_456;

pub fn routes() -> Router<State> {
    Router::new()
        .route("/{db}/_partition", any(bare))
        .route("/{db}/_partition/", any(bare))
        .route("/{db}/_partition/{*rest}", any(dispatch))
        .route("/{db}/_partitions", get(list))
}

/// The most partitions `GET /{db}/_partitions` lists (and its default `limit`).
pub const MAX_PARTITIONS: u64 = 10_000;

/// `GET /{db}/_partitions?limit=N` (Bunko's own; Cloudant has one partition per request):
/// every partition's counters in partition order, as `GET /{db}/_partition/{p}` shows them,
/// read from the per-partition counters every write keeps ([`Database::partitions`]), so
/// the console can chart the skew without reading documents. `truncated` says more exist.
async fn list(
    AxState(st): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    Path(db): Path<String>,
    RawQuery(q): RawQuery,
) -> ApiResult<Response> {
    let db = open(&st, &ctx, &db, Access::Member)?;
    if !db.is_partitioned() {
        return Err(ApiError::bad_request("database is not partitioned"));
    }
    let limit = Params::parse(q.as_deref()).u64("limit")?.unwrap_or(MAX_PARTITIONS);
    let limit = limit.min(MAX_PARTITIONS) as usize;
    let (list, truncated) = blocking(move || Ok(db.partitions(limit)?)).await?;
    let partitions: Vec<_> = list
        .into_iter()
        .map(|(partition, stats)| {
            json!({
                "partition": partition,
                "doc_count": stats.doc_count,
                "doc_del_count": stats.doc_del_count,
                "sizes": {"active": stats.active, "external": stats.external},
            })
        })
        .collect();
    Ok(render::json(StatusCode::OK, json!({"partitions": partitions, "truncated": truncated})))
}

/// `/{db}/_partition` names no partition.
async fn bare() -> ApiError {
    ApiError::bad_request("invalid_partition_req")
}

/// One request under `/{db}/_partition/`, split into the partition and what follows it.
struct PartitionRequest {
    /// Who reads.
    reader: UserCtx,
    db: Arc<Database>,
    partition: String,
    params: Params,
    /// `query_server_config/partition_query_limit`, read per request (it changes at run time).
    limit: u64,
    /// Who asks (for the advisor).
    client: Client,
}

async fn dispatch(
    st: AxState<State>,
    ctx: Extension<UserCtx>,
    client: Extension<Client>,
    method: Method,
    Path((db, rest)): Path<(String, String)>,
    q: RawQuery,
    body: RawBody,
) -> ApiResult<Response> {
    let (partition, tail) = rest.split_once('/').unwrap_or((rest.as_str(), ""));
    let tail: Vec<&str> = tail.split('/').filter(|s| !s.is_empty()).collect();
    if tail.is_empty() {
        return info(&st, &ctx, &method, &db, partition).await;
    }
    let db = open(&st, &ctx, &db, Access::Member)?;
    if !db.is_partitioned() {
        return Err(ApiError::bad_request("database is not partitioned"));
    }
    validate_partition(partition)?;
    let params = Params::parse(q.0.as_deref());
    if params.str("partition").is_some_and(|p| p != partition) {
        return Err(ApiError::bad_request("Conflicting value for `partition` in query string"));
    }
    let limit = st
        .engine
        .settings()
        .get_u64("query_server_config", "partition_query_limit")
        .unwrap_or(PARTITION_QUERY_LIMIT);
    let (partition, client) = (partition.to_string(), client.0);
    let req = PartitionRequest { reader: ctx.0, db, partition, params, limit, client };
    match (tail.as_slice(), &method) {
        (["_all_docs"], &Method::GET) => all_docs(req, None).await,
        (["_all_docs"], &Method::POST) => all_docs(req, Some(body)).await,
        (["_all_docs"], _) => Err(method_not_allowed("GET,HEAD,POST")),
        (["_find"], &Method::POST) => {
            find::find(req.reader, req.db, Some(req.partition), body, req.client).await
        }
        (["_explain"], &Method::POST) => find::explain(req.db, Some(req.partition), body).await,
        (["_find" | "_explain"], _) => Err(method_not_allowed("POST")),
        (["_design", ddoc, "_view", view], &Method::GET | &Method::POST) => {
            let mut params = req.params;
            if method == Method::POST {
                params.merge_json(&body.object_or_empty()?);
            }
            params.remove("partition");
            check_limit(&params, req.limit)?;
            let (ddoc, view) = (format!("_design/{ddoc}"), view.to_string());
            crate::view::query(req.reader, req.db, ddoc, view, params, Some(req.partition)).await
        }
        (["_design", _, "_view", _], _) => Err(method_not_allowed("GET,POST")),
        (["_design", ddoc, "_search", index], &Method::GET | &Method::POST) => {
            let mut params = req.params;
            if method == Method::POST {
                params.merge_json(&body.object_or_empty()?);
            }
            let drilldown = crate::search::drilldowns(q.0.as_deref());
            check_partition_search(&params, &req.partition, !drilldown.is_empty())?;
            params.remove("partition");
            let (db, index) = (req.db, index.to_string());
            let partition = Some(req.partition);
            crate::search::search(&st, (req.reader, db), ddoc, index, params, drilldown, partition)
                .await
        }
        (["_design", _, "_search", _], _) => Err(method_not_allowed("GET,POST")),
        _ => Err(ApiError::not_found("missing")),
    }
}

/// What Cloudant Search refuses in a partition query (`dreyfus_httpd`): a body `partition`
/// naming another partition, and the options that need every partition (facets, drilldown,
/// grouping).
fn check_partition_search(params: &Params, partition: &str, drilldown: bool) -> ApiResult<()> {
    if params.str("partition").is_some_and(|p| p != partition) {
        return Err(ApiError::bad_request("Multiple conflicting values for `partition` provided"));
    }
    const GLOBAL_ONLY: [&str; 7] =
        ["counts", "drilldown", "ranges", "group_field", "group_sort", "group_limit", "group_by"];
    if drilldown || GLOBAL_ONLY.iter().any(|name| params.str(name).is_some()) {
        return Err(ApiError::bad_request(
            "`partition` and any of `drilldown`, `ranges`, `group_field`, `group_sort`, \
             `group_limit` or `group_by` are incompatible",
        ));
    }
    Ok(())
}

/// `GET /{db}/_partition/{p}`: the partition's document counts and sizes.
async fn info(
    st: &State,
    ctx: &UserCtx,
    method: &Method,
    db: &str,
    partition: &str,
) -> ApiResult<Response> {
    if method == Method::POST && partition.starts_with('_') {
        validate_partition(partition)?;
    }
    if method != Method::GET {
        return Err(method_not_allowed("GET"));
    }
    validate_partition(partition)?;
    let db = open(st, ctx, db, Access::Member)?;
    if !db.is_partitioned() {
        return Err(ApiError::bad_request("database is not partitioned"));
    }
    let name = partition.to_string();
    let (stats, db_name) = blocking(move || Ok((db.partition_stats(&name)?, db.name()))).await?;
    Ok(render::json(
        StatusCode::OK,
        json!({
            "db_name": db_name,
            "sizes": {"active": stats.active, "external": stats.external},
            "partition": partition,
            "doc_count": stats.doc_count,
            "doc_del_count": stats.doc_del_count,
        }),
    ))
}

/// `_all_docs` over the partition's ids.
async fn all_docs(req: PartitionRequest, body: Option<RawBody>) -> ApiResult<Response> {
    let PartitionRequest { reader, db, partition, params, limit, client } = req;
    let mut params = params;
    if let Some(body) = body {
        params.merge_json(&body.request_object()?);
    }
    params.remove("partition");
    check_limit(&params, limit)?;
    let prefix = format!("{partition}:");
    all_docs::run(reader, db, params, Some(prefix), Some(partition), Some(client)).await
}

/// A partition query's `limit` may not exceed `max` (`partition_query_limit`).
fn check_limit(params: &Params, max: u64) -> ApiResult<()> {
    if let Some(limit) = params.u64("limit")?
        && limit > max
    {
        return Err(ApiError::query_parse(format!("Limit is too large, must not exceed {max}")));
    }
    Ok(())
}

fn method_not_allowed(allowed: &str) -> ApiError {
    ApiError::Other(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!("Only {allowed} allowed"),
    )
}
