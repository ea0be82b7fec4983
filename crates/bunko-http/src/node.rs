//! `/_node/{node}`: the node's name, `_versions` and its run-time settings (`_config`), as
//! CouchDB 3.4's `chttpd_node` serves them, and `/_membership`, the one node of this cluster (which tools
//! and CouchDB's test suite read to find the node names to configure). Everything here needs
//! a server admin (CouchDB's `chttpd_auth_request`). `{node}` is `_local` or this node's name
//! ([`crate::HttpConfig::node_name`], `bunko serve --node-name`); any other is `404
//! not_found` "no such node". Values are JSON strings; a change is applied at once and
//! persisted by the engine ([`bunko_engine::Engine::set_config`]), whatever
//! `X-Couch-Persist` says.

use axum::extract::{Path, State as AxState};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};
use axum::{Extension, Router};
use serde_json::{Value, json};

use crate::auth::require_server_admin;
use crate::body::RawBody;
use crate::error::{ApiError, ApiResult};
use crate::{State, UserCtx, blocking, render};

/// This node's name unless configured.
pub const DEFAULT_NODE: &str = "bunko@127.0.0.1";

pub fn routes() -> Router<State> {
    Router::new()
        .route("/_membership", get(membership).fallback(membership_not_get))
        .route("/_node/{node}", get(name))
        .route("/_node/{node}/_versions", get(versions).fallback(versions_not_get))
        .route("/_node/{node}/_config", get(all))
        .route("/_node/{node}/_config/_reload", post(reload))
        .route("/_node/{node}/_config/{section}", get(section))
        .route("/_node/{node}/_config/{section}/{key}", get(value).put(set).delete(remove))
}

/// Fails unless `ctx` is a server admin and `node` names this node.
pub(crate) fn check(state: &State, ctx: &UserCtx, node: &str) -> ApiResult<()> {
    require_server_admin(ctx)?;
    if node == "_local" || node == state.node() {
        Ok(())
    } else {
        Err(ApiError::not_found(format!("no such node: {node}")))
    }
}

/// `GET /_membership` (`mem3_httpd`): this node, in both lists.
async fn membership(
    AxState(state): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
) -> ApiResult<Response> {
    require_server_admin(&ctx)?;
    let node = state.node();
    Ok(render::json(StatusCode::OK, json!({"all_nodes": [node], "cluster_nodes": [node]})))
}

async fn membership_not_get(Extension(ctx): Extension<UserCtx>) -> ApiResult<Response> {
    require_server_admin(&ctx)?;
    Err(only_get())
}

/// CouchDB's answer to a method other than GET on a GET-only node resource.
fn only_get() -> ApiError {
    ApiError::Other(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", "Only GET allowed".into())
}

async fn name(
    AxState(state): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    Path(node): Path<String>,
) -> ApiResult<Response> {
    check(&state, &ctx, &node)?;
    Ok(render::json(StatusCode::OK, json!({"name": state.node()})))
}

/// `GET /_node/{node}/_versions`: the JavaScript engine, as CouchDB names it (clients and
/// CouchDB's test suite check for `quickjs`), and Bunko's version.
async fn versions(
    AxState(state): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    Path(node): Path<String>,
) -> ApiResult<Response> {
    check(&state, &ctx, &node)?;
    let versions = json!({
        "javascript_engine": {"name": "quickjs"},
        "bunko": {"version": env!("CARGO_PKG_VERSION")},
    });
    Ok(render::json(StatusCode::OK, versions))
}

async fn versions_not_get(
    AxState(state): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    Path(node): Path<String>,
) -> ApiResult<Response> {
    check(&state, &ctx, &node)?;
    Err(only_get())
}

async fn all(
    AxState(state): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    Path(node): Path<String>,
) -> ApiResult<Response> {
    check(&state, &ctx, &node)?;
    let values = blocking(move || Ok(state.engine.config_values())).await?;
    Ok(render::json(StatusCode::OK, json!(values)))
}

/// `POST …/_config/_reload`: every change is already persisted, so there is nothing to
/// flush; answers CouchDB's `{"ok": true}`.
async fn reload(
    AxState(state): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    Path(node): Path<String>,
) -> ApiResult<Response> {
    check(&state, &ctx, &node)?;
    Ok(render::json(StatusCode::OK, json!({"ok": true})))
}

async fn section(
    AxState(state): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    Path((node, section)): Path<(String, String)>,
) -> ApiResult<Response> {
    check(&state, &ctx, &node)?;
    let values = blocking(move || Ok(state.engine.config_values())).await?;
    let keys = values.get(&section).cloned().unwrap_or_default();
    Ok(render::json(StatusCode::OK, json!(keys)))
}

fn unknown() -> ApiError {
    ApiError::not_found("unknown_config_value")
}

async fn value(
    AxState(state): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    Path((node, section, key)): Path<(String, String, String)>,
) -> ApiResult<Response> {
    check(&state, &ctx, &node)?;
    let value = blocking(move || Ok(state.engine.config_value(&section, &key))).await?;
    Ok(render::json(StatusCode::OK, Value::String(value.ok_or_else(unknown)?)))
}

async fn set(
    AxState(state): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    Path((node, section, key)): Path<(String, String, String)>,
    body: RawBody,
) -> ApiResult<Response> {
    check(&state, &ctx, &node)?;
    let Ok(Value::String(new)) = body.json() else {
        return Err(ApiError::bad_request("a JSON string expected"));
    };
    let old = blocking(move || {
        let old = state.engine.set_config(&ctx, &section, &key, Some(&new))?;
        state.refresh();
        Ok(old)
    })
    .await?;
    Ok(render::json(StatusCode::OK, Value::String(old.unwrap_or_default())))
}

async fn remove(
    AxState(state): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    Path((node, section, key)): Path<(String, String, String)>,
) -> ApiResult<Response> {
    check(&state, &ctx, &node)?;
    let old = blocking(move || {
        if state.engine.config_value(&section, &key).is_none() {
            return Err(unknown());
        }
        let old = state.engine.set_config(&ctx, &section, &key, None)?;
        state.refresh();
        Ok(old)
    })
    .await?;
    Ok(render::json(StatusCode::OK, Value::String(old.unwrap_or_default())))
}
