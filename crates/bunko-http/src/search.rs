//! Cloudant Search routes over `bunko-search`:
//! - `GET/POST /{db}/_design/{ddoc}/_search/{index}` (and the partition form, dispatched
//!   from `partition.rs`);
//! - `GET /{db}/_design/{ddoc}/_search_info/{index}`;
//! - `POST /{db}/_search_cleanup` (and `_geo_cleanup`: both remove every unused search and
//!   geo index);
//! - Cloudant Geo: `GET /{db}/_design/{ddoc}/_geo/{index}` and `_geo_info/{index}`.
//!
//! Reads need database membership, cleanup needs database admin, exactly as views.

use std::sync::Arc;

use axum::extract::{Path, RawQuery, State as AxState};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};
use axum::{Extension, Router};
use bunko_engine::Database;
use bunko_search::{GeoQuery, SearchQuery};
use serde_json::json;

use crate::body::RawBody;
use crate::db::{Access, open};
use crate::error::ApiResult;
use crate::params::Params;
use crate::render;
use crate::{State, UserCtx, blocking};

pub fn routes() -> Router<State> {
    Router::new()
        .route("/{db}/_design/{ddoc}/_search/{index}", get(get_search).post(post_search))
        .route("/{db}/_design/{ddoc}/_search_info/{index}", get(info))
        .route("/{db}/_search_cleanup", post(cleanup))
        .route("/{db}/_geo_cleanup", post(cleanup))
        .route("/{db}/_design/{ddoc}/_geo/{index}", get(geo))
        .route("/{db}/_design/{ddoc}/_geo_info/{index}", get(geo_info))
}

async fn get_search(
    st: AxState<State>,
    ctx: Extension<UserCtx>,
    Path((db, ddoc, index)): Path<(String, String, String)>,
    q: RawQuery,
) -> ApiResult<Response> {
    let db = open(&st, &ctx, &db, Access::Member)?;
    let drilldown = drilldowns(q.0.as_deref());
    search(&st, (ctx.0, db), &ddoc, index, Params::parse(q.0.as_deref()), drilldown, None).await
}

/// Every `drilldown` of a query string (the parameter may repeat).
pub fn drilldowns(query: Option<&str>) -> Vec<String> {
    let pairs = form_urlencoded::parse(query.unwrap_or_default().as_bytes());
    pairs.filter(|(k, _)| k == "drilldown").map(|(_, v)| v.into_owned()).collect()
}

async fn post_search(
    st: AxState<State>,
    ctx: Extension<UserCtx>,
    Path((db, ddoc, index)): Path<(String, String, String)>,
    q: RawQuery,
    body: RawBody,
) -> ApiResult<Response> {
    let db = open(&st, &ctx, &db, Access::Member)?;
    let mut params = Params::parse(q.0.as_deref());
    params.merge_json(&body.object_or_empty()?);
    search(&st, (ctx.0, db), &ddoc, index, params, drilldowns(q.0.as_deref()), None).await
}

/// Runs one search; `drilldown` lists a query string's repeated `drilldown`s, `partition`
/// is the partition of a `/_partition/{p}/` route; `reader` reads `db`.
pub async fn search(
    st: &State,
    (reader, db): (UserCtx, Arc<Database>),
    ddoc: &str,
    index: String,
    params: Params,
    drilldown: Vec<String>,
    partition: Option<String>,
) -> ApiResult<Response> {
    let mut q = SearchQuery::parse(&|name| params.str(name).map(str::to_string))?;
    if drilldown.len() > 1 {
        q.set_drilldowns(&drilldown)?;
    }
    let (search, ddoc) = (st.search.clone(), format!("_design/{ddoc}"));
    let answer = blocking(move || {
        Ok(search.search(&reader, &db, &ddoc, &index, &q, partition.as_deref())?)
    })
    .await?;
    Ok(render::json(StatusCode::OK, answer))
}

/// `GET /{db}/_design/{ddoc}/_search_info/{index}`.
async fn info(
    st: AxState<State>,
    ctx: Extension<UserCtx>,
    Path((db, ddoc, index)): Path<(String, String, String)>,
) -> ApiResult<Response> {
    let db = open(&st, &ctx, &db, Access::Member)?;
    let (search, ddoc) = (st.search.clone(), format!("_design/{ddoc}"));
    let answer = blocking(move || Ok(search.info(&db, &ddoc, &index)?)).await?;
    Ok(render::json(StatusCode::OK, answer))
}

/// `POST /{db}/_search_cleanup`: removes the search indexes no design document uses.
async fn cleanup(
    st: AxState<State>,
    ctx: Extension<UserCtx>,
    Path(db): Path<String>,
) -> ApiResult<Response> {
    let db = open(&st, &ctx, &db, Access::Admin)?;
    let search = st.search.clone();
    blocking(move || Ok(search.cleanup(&db)?)).await?;
    Ok(render::json(StatusCode::ACCEPTED, json!({"ok": true})))
}

/// `GET /{db}/_design/{ddoc}/_geo/{index}`.
async fn geo(
    st: AxState<State>,
    ctx: Extension<UserCtx>,
    Path((db, ddoc, index)): Path<(String, String, String)>,
    q: RawQuery,
) -> ApiResult<Response> {
    let db = open(&st, &ctx, &db, Access::Member)?;
    let params = Params::parse(q.0.as_deref());
    let q = GeoQuery::parse(&|name| params.str(name).map(str::to_string))?;
    let (search, ddoc) = (st.search.clone(), format!("_design/{ddoc}"));
    let answer = blocking(move || Ok(search.geo(&ctx, &db, &ddoc, &index, &q)?)).await?;
    Ok(render::json(StatusCode::OK, answer))
}

/// `GET /{db}/_design/{ddoc}/_geo_info/{index}`.
async fn geo_info(
    st: AxState<State>,
    ctx: Extension<UserCtx>,
    Path((db, ddoc, index)): Path<(String, String, String)>,
) -> ApiResult<Response> {
    let db = open(&st, &ctx, &db, Access::Member)?;
    let (search, ddoc) = (st.search.clone(), format!("_design/{ddoc}"));
    let answer = blocking(move || Ok(search.geo_info(&db, &ddoc, &index)?)).await?;
    Ok(render::json(StatusCode::OK, answer))
}
