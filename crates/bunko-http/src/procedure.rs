//! `POST /{db}/_design/{ddoc}/_procedures/{name}`: runs a procedure of a design document
//! in one engine transaction ([`bunko_engine::Engine::call_procedure`]; a Bunko extension,
//! docs/procedures.md). The request body, any JSON value (empty: `null`), is the
//! procedure's argument; `200` with what it returned once its writes are committed.

use axum::Extension;
use axum::Router;
use axum::extract::{Path, State as AxState};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::post;
use serde_json::Value;

use crate::body::RawBody;
use crate::error::ApiResult;
use crate::{State, UserCtx, blocking, render};

pub fn routes() -> Router<State> {
    Router::new().route("/{db}/_design/{ddoc}/_procedures/{name}", post(call))
}

async fn call(
    AxState(state): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    Path((db, ddoc, name)): Path<(String, String, String)>,
    body: RawBody,
) -> ApiResult<Response> {
    let arg = if body.0.iter().all(u8::is_ascii_whitespace) { Value::Null } else { body.json()? };
    let result =
        blocking(move || Ok(state.engine.call_procedure(&ctx, &db, &ddoc, &name, &arg)?)).await?;
    Ok(render::json(StatusCode::OK, result))
}
