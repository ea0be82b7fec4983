//! `POST /{db}/_purge`, `GET /{db}/_purged_infos` and `GET/PUT /{db}/_purged_infos_limit`,
//! with CouchDB 3.4's shapes: `201 {"purge_seq": null, "purged": {id: [revs]}}`,
//! `{"purged_infos": [{"id", "revs"}]}`, the limit as a bare number. Who may purge is the
//! engine's write gate's answer (server admins, as CouchDB's `chttpd_auth_request`).

use axum::extract::{Path, State as AxState};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};
use axum::{Extension, Router};
use bunko_doc::RevId;
use serde_json::{Map, Value, json};

use crate::body::RawBody;
use crate::db::{Access, open};
use crate::error::{ApiError, ApiResult};
use crate::{State, UserCtx, blocking, render};

pub fn routes() -> Router<State> {
    Router::new()
        .route("/{db}/_purge", post(purge))
        .route("/{db}/_purged_infos", get(purged_infos))
        .route("/{db}/_purged_infos_limit", get(get_limit).put(put_limit))
}

async fn purge(
    AxState(state): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    Path(name): Path<String>,
    body: RawBody,
) -> ApiResult<Response> {
    let db = state.engine.db(&name)?;
    let requests = parse_requests(body.request_object()?)?;
    let purged = blocking(move || Ok(db.purge(&ctx, requests)?)).await?;
    let purged: Map<String, Value> = purged
        .into_iter()
        .map(|p| (p.id, json!(p.revs.iter().map(ToString::to_string).collect::<Vec<_>>())))
        .collect();
    Ok(render::json(StatusCode::CREATED, json!({"purge_seq": null, "purged": purged})))
}

/// `{id: ["rev", …]}` as purge requests (`400` on anything else, as `couch_doc:parse_revs`).
fn parse_requests(body: Map<String, Value>) -> ApiResult<Vec<(String, Vec<RevId>)>> {
    body.into_iter()
        .map(|(id, revs)| {
            let Value::Array(revs) = revs else {
                return Err(ApiError::bad_request("Invalid rev format"));
            };
            let revs = revs
                .iter()
                .map(|rev| rev.as_str().and_then(|s| s.parse::<RevId>().ok()))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| ApiError::bad_request("Invalid rev format"))?;
            Ok((id, revs))
        })
        .collect()
}

async fn purged_infos(
    AxState(state): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    Path(name): Path<String>,
) -> ApiResult<Response> {
    let db = open(&state, &ctx, &name, Access::Member)?;
    let infos = blocking(move || Ok(db.purged_infos()?)).await?;
    let infos: Vec<Value> = infos
        .into_iter()
        .map(|(id, revs)| {
            json!({"id": id, "revs": revs.iter().map(ToString::to_string).collect::<Vec<_>>()})
        })
        .collect();
    Ok(render::json(StatusCode::OK, json!({"purged_infos": infos})))
}

async fn get_limit(
    AxState(state): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    Path(name): Path<String>,
) -> ApiResult<Response> {
    let db = state.engine.db(&name)?;
    let limit = blocking(move || Ok(db.purged_infos_limit(&ctx)?)).await?;
    Ok(render::json(StatusCode::OK, json!(limit)))
}

async fn put_limit(
    AxState(state): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    Path(name): Path<String>,
    body: RawBody,
) -> ApiResult<Response> {
    let db = state.engine.db(&name)?;
    let Some(limit) = body.json()?.as_u64() else {
        return Err(ApiError::bad_request("`purged_infos_limit` must be positive integer"));
    };
    blocking(move || Ok(db.set_purged_infos_limit(&ctx, limit)?)).await?;
    Ok(render::json(StatusCode::OK, json!({"ok": true})))
}
