//! Server-level routes: `/`, `/_up`, `/_all_dbs`, `/_uuids`, `/_session`, `/_active_tasks`.

use axum::extract::{RawQuery, State as AxState};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use axum::routing::get;
use axum::{Extension, Router};
use serde_json::{Value, json};

use crate::auth::{self, require_server_admin};
use crate::error::{ApiError, ApiResult};
use crate::params::Params;
use crate::{State, UserCtx, render};

/// What Bunko really has, for clients that read `features` (CouchDB's test suites skip
/// what is absent, e.g. `search`).
pub const FEATURES: &[&str] = &["partitioned"];

/// `FEATURES`, plus `search` when the search service serves text indexes.
fn features(state: &State) -> Vec<&'static str> {
    let mut out = FEATURES.to_vec();
    if state.engine.has_text_search() {
        out.push("search");
    }
    out
}

pub fn routes() -> Router<State> {
    Router::new()
        .route("/", get(welcome))
        .route("/_up", get(up))
        .route("/_all_dbs", get(all_dbs))
        .route("/_uuids", get(uuids))
        .route(
            "/_session",
            get(auth::get_session).post(auth::post_session).delete(auth::delete_session),
        )
}

async fn welcome(AxState(state): AxState<State>) -> Response {
    render::json(
        StatusCode::OK,
        json!({
            "couchdb": "Welcome",
            "version": "3.4.3",
            "vendor": {"name": "Bunko", "version": env!("CARGO_PKG_VERSION")},
            "features": features(&state),
            "uuid": state.server_uuid,
            "bunko": env!("CARGO_PKG_VERSION"),
        }),
    )
}

/// `GET /_up`: `200` while the store accepts writes; `503` once it refuses them (after a
/// failed sync, or while shutting down), so that a health check sees it.
async fn up(AxState(state): AxState<State>) -> Response {
    match state.engine.store().health() {
        Ok(()) => render::json(StatusCode::OK, json!({"status": "ok", "seeds": {}})),
        Err(err) => render::json(
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"status": "error", "reason": err.to_string()}),
        ),
    }
}

async fn all_dbs(
    AxState(state): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    RawQuery(query): RawQuery,
) -> ApiResult<Response> {
    require_server_admin(&ctx)?;
    let p = Params::parse(query.as_deref());
    let names = db_names(&state, &p)?.into_iter().map(Value::String).collect();
    Ok(render::json(StatusCode::OK, Value::Array(names)))
}

/// The database names `_all_dbs` (and `GET /_dbs_info`) list for `startkey`, `endkey`,
/// `inclusive_end`, `descending`, `skip` and `limit`.
pub fn db_names(state: &State, p: &Params) -> ApiResult<Vec<String>> {
    let start = string_key(p, &["startkey", "start_key"])?;
    let end = string_key(p, &["endkey", "end_key"])?;
    let descending = p.flag("descending")?;
    let inclusive_end = p.bool("inclusive_end")?.unwrap_or(true);
    let mut names = state.engine.db_names();
    if descending {
        names.reverse();
    }
    let in_range = |name: &String| {
        let after_start =
            start.as_ref().is_none_or(|s| if descending { name <= s } else { name >= s });
        let before_end = end.as_ref().is_none_or(|e| match (descending, inclusive_end) {
            (false, true) => name <= e,
            (false, false) => name < e,
            (true, true) => name >= e,
            (true, false) => name > e,
        });
        after_start && before_end
    };
    let skip = p.u64("skip")?.unwrap_or(0) as usize;
    let limit = p.u64("limit")?.map_or(usize::MAX, |l| l as usize);
    Ok(names.into_iter().filter(in_range).skip(skip).take(limit).collect())
}

fn string_key(p: &Params, names: &[&str]) -> ApiResult<Option<String>> {
    match p.json_any(names)? {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(ApiError::query_parse("Database names are strings")),
    }
}

async fn uuids(AxState(state): AxState<State>, RawQuery(query): RawQuery) -> ApiResult<Response> {
    let p = Params::parse(query.as_deref());
    let count = p.u64("count")?.unwrap_or(1);
    let max_count = state.engine.settings().get_u64("uuids", "max_count").unwrap_or(1000);
    if count > max_count {
        return Err(ApiError::Other(
            StatusCode::BAD_REQUEST,
            "bad_request",
            "count parameter too large".into(),
        ));
    }
    let ids: Vec<String> = (0..count).map(|_| state.engine.uuids().next()).collect();
    // CouchDB's cache-busting headers, and an `ETag` of these ids.
    let etag = format!("\"{:032x}\"", xxhash_rust::xxh3::xxh3_128(ids.concat().as_bytes()));
    let mut response = render::json(StatusCode::OK, json!({"uuids": ids}));
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
    headers.insert(header::EXPIRES, HeaderValue::from_static("Mon, 01 Jan 1990 00:00:00 GMT"));
    if let Ok(etag) = HeaderValue::from_str(&etag) {
        headers.insert(header::ETAG, etag);
    }
    Ok(response)
}

/// `GET /_active_tasks`: the Mango indexes being built over existing documents and the
/// view groups and search indexes being updated, in CouchDB's task shape (`type:
/// "indexer"` or `"search_indexer"`, `changes_done`, `total_changes`, `progress`; views and
/// search indexes also `started_on` and `updated_on`).
pub async fn active_tasks(
    AxState(state): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
) -> ApiResult<Response> {
    require_server_admin(&ctx)?;
    let node = state.node().to_string();
    let dbs: Vec<_> =
        state.engine.db_names().iter().filter_map(|name| state.engine.get_db(name)).collect();
    let names: std::collections::HashMap<u64, String> =
        dbs.iter().map(|db| (db.id(), db.name())).collect();
    let mut tasks: Vec<Value> = dbs
        .iter()
        .flat_map(|db| db.build_tasks())
        .map(|t| {
            let progress = percent(t.docs_done, t.docs_total);
            json!({
                "type": "indexer",
                "node": node,
                "pid": format!("<{}/{}>", t.ddoc, t.index),
                "database": t.database,
                "design_document": t.ddoc,
                "index": t.index,
                "changes_done": t.docs_done,
                "total_changes": t.docs_total,
                "progress": progress,
            })
        })
        .collect();
    let views = crate::blocking(move || {
        let mut views = Vec::new();
        for db in &dbs {
            views.extend(bunko_views::view_tasks(db)?);
        }
        Ok(views)
    })
    .await?;
    tasks.extend(views.into_iter().map(|t| {
        let p = t.progress;
        json!({
            "type": "indexer",
            "node": node,
            "pid": format!("<{}/{}>", t.database, t.design_document),
            "indexer_pid": format!("<{}/{}>", t.database, t.design_document),
            // What CouchDB 3.4.3 shows for a running indexer (its Erlang process waits on
            // messages between batches).
            "process_status": "waiting",
            "database": t.database,
            "design_document": t.design_document,
            "changes_done": p.changes_done,
            "total_changes": p.total_changes,
            "progress": percent(p.changes_done, p.total_changes),
            "started_on": p.started_on,
            "updated_on": p.updated_on,
        })
    }));
    let searches = state.search.tasks(&|id| names.get(&id).cloned());
    tasks.extend(searches.into_iter().map(|t| {
        let p = t.progress;
        let index = t.index.unwrap_or_default();
        json!({
            "type": "search_indexer",
            "node": node,
            "pid": format!("<{}/{}/{}>", t.database, t.design_document, index),
            "database": t.database,
            "design_document": t.design_document,
            "index": index,
            "changes_done": p.changes_done,
            "total_changes": p.total_changes,
            "progress": percent(p.changes_done, p.total_changes),
            "started_on": p.started_on,
            "updated_on": p.updated_on,
        })
    }));
    tasks.extend(crate::replicate::tasks(&state));
    Ok(render::json(StatusCode::OK, Value::Array(tasks)))
}

/// `done` of `total` as a whole percentage, 0 to 100.
fn percent(done: u64, total: u64) -> u64 {
    (done * 100).checked_div(total).unwrap_or(0).min(100)
}
