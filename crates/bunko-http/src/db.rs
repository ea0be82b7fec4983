//! Database routes: `PUT/GET/HEAD/DELETE /{db}`, `_security`, `_revs_limit`,
//! `_ensure_full_commit`, `_compact`; and [`open`], which every per-database handler uses to
//! find the database and check the user's access to it.

use std::sync::Arc;

use axum::extract::{Path, RawQuery, State as AxState};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use bunko_engine::Database;
use bunko_engine::security::Security;
use serde_json::{Value, json};

use crate::body::RawBody;
use crate::error::{ApiError, ApiResult};
use crate::params::Params;
use crate::{State, UserCtx, blocking, doc, render};

/// The access a handler needs to a database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read and write documents.
    Member,
    /// List every document (`_all_docs`, `_changes`): members, but only server admins in
    /// `_replicator` and `_users`, as CouchDB's `chttpd_auth_request` decides by path
    /// before it opens the database.
    List,
    /// Change security, design documents, settings.
    Admin,
    /// Query a view (`_view`, `_list`): members; in the authentication database only its
    /// admins, the only readers of its design documents (`couch_users_db:after_doc_read`).
    View,
}

/// Why a reader who is not an admin of the authentication database may not use its
/// design documents (CouchDB's words).
pub const USERS_DDOC_REASON: &str =
    "Only administrators can view design docs in the users database.";

/// The database `name`, if the user has `access` to it.
pub fn open(state: &State, ctx: &UserCtx, name: &str, access: Access) -> ApiResult<Arc<Database>> {
    let system = matches!(name, "_replicator" | "_users");
    if access == Access::List && system && !ctx.is_server_admin() {
        return Err(ApiError::unauthorized("You are not a server admin."));
    }
    let db = state.engine.db(name)?;
    let security = Security::parse(&db.security())?;
    match access {
        Access::View if name == state.engine.users_db_name() && !security.is_admin(ctx) => {
            return Err(ApiError::forbidden(USERS_DDOC_REASON));
        }
        Access::Member | Access::List | Access::View => security.check_member(ctx)?,
        Access::Admin => security.check_admin(ctx)?,
    }
    Ok(db)
}

pub fn routes() -> Router<State> {
    Router::new()
        .route("/{db}", get(info).head(head).put(create).delete(delete).post(doc::post_doc))
        .route("/{db}/", get(info).head(head).put(create).delete(delete).post(doc::post_doc))
        .route("/{db}/_security", get(get_security).put(put_security))
        .route("/{db}/_revs_limit", get(get_revs_limit).put(put_revs_limit))
        .route("/{db}/_ensure_full_commit", post(ensure_full_commit))
}

async fn create(
    AxState(state): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    Path(name): Path<String>,
    RawQuery(query): RawQuery,
) -> ApiResult<Response> {
    let p = Params::parse(query.as_deref());
    let partitioned = match p.str("partitioned") {
        None | Some("false") => false,
        Some("true") => true,
        Some(_) => return Err(ApiError::bad_request("Invalid `partitioned` parameter")),
    };
    let location = format!("/{}", crate::headers::url_encode(&name));
    blocking(move || Ok(state.engine.create_db(&ctx, &name, partitioned)?)).await?;
    Ok(crate::headers::created_at(render::json(StatusCode::CREATED, json!({"ok": true})), location))
}

async fn delete(
    AxState(state): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    Path(name): Path<String>,
    RawQuery(query): RawQuery,
) -> ApiResult<Response> {
    if Params::parse(query.as_deref()).has("rev") {
        return Err(ApiError::bad_request(
            "You tried to DELETE a database with a ?=rev parameter. Did you mean to DELETE a document instead?",
        ));
    }
    blocking(move || Ok(state.engine.delete_db(&ctx, &name)?)).await?;
    Ok(render::json(StatusCode::OK, json!({"ok": true})))
}

async fn info(
    AxState(state): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    Path(name): Path<String>,
) -> ApiResult<Response> {
    let db = open(&state, &ctx, &name, Access::Member)?;
    Ok(render::json(StatusCode::OK, info_json(&db)))
}

async fn head(
    AxState(state): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    Path(name): Path<String>,
) -> ApiResult<Response> {
    open(&state, &ctx, &name, Access::Member)?;
    Ok(StatusCode::OK.into_response())
}

/// The `GET /{db}` document.
pub fn info_json(db: &Database) -> Value {
    let info = db.info();
    let props = if info.partitioned { json!({"partitioned": true}) } else { json!({}) };
    json!({
        "db_name": info.name,
        "purge_seq": crate::seq::render(db.purge_seq().unwrap_or(0)),
        "update_seq": crate::seq::render(info.update_seq),
        "sizes": {
            "file": info.disk_size,
            "external": info.stats.external,
            "active": info.stats.active,
        },
        "props": props,
        "doc_del_count": info.stats.doc_del_count,
        "doc_count": info.stats.doc_count,
        "disk_format_version": 8,
        "compact_running": db.is_compacting(),
        "cluster": {"q": 1, "n": 1, "w": 1, "r": 1},
        "instance_start_time": "0",
    })
}

async fn get_security(
    AxState(state): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    Path(name): Path<String>,
) -> ApiResult<Response> {
    let db = open(&state, &ctx, &name, Access::Member)?;
    let security: Value = serde_json::from_str(&db.security()).unwrap_or_else(|_| json!({}));
    Ok(render::json(StatusCode::OK, security))
}

async fn put_security(
    AxState(state): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    Path(name): Path<String>,
    body: RawBody,
) -> ApiResult<Response> {
    let db = state.engine.db(&name)?;
    let text = Value::Object(body.object()?).to_string();
    blocking(move || Ok(db.set_security(&ctx, text)?)).await?;
    Ok(render::json(StatusCode::OK, json!({"ok": true})))
}

async fn get_revs_limit(
    AxState(state): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    Path(name): Path<String>,
) -> ApiResult<Response> {
    let db = open(&state, &ctx, &name, Access::Member)?;
    Ok(render::json(StatusCode::OK, json!(db.revs_limit())))
}

async fn put_revs_limit(
    AxState(state): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    Path(name): Path<String>,
    body: RawBody,
) -> ApiResult<Response> {
    let db = state.engine.db(&name)?;
    let limit = match body.json()? {
        Value::Number(n) => n.as_u64().filter(|&n| n > 0),
        _ => None,
    };
    let Some(limit) = limit else {
        return Err(ApiError::bad_request("Rev limit has to be an integer"));
    };
    blocking(move || Ok(db.set_revs_limit(&ctx, limit)?)).await?;
    Ok(render::json(StatusCode::OK, json!({"ok": true})))
}

/// Every acknowledged write is already durable; this answers as CouchDB does.
async fn ensure_full_commit(
    AxState(state): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    Path(name): Path<String>,
) -> ApiResult<Response> {
    open(&state, &ctx, &name, Access::Member)?;
    Ok(render::json(StatusCode::CREATED, json!({"ok": true, "instance_start_time": "0"})))
}

/// `_compact`: starts removing old revision bodies in the background
/// and answers at once, as CouchDB does.
pub async fn compact(
    AxState(state): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    Path(name): Path<String>,
) -> ApiResult<Response> {
    let db = open(&state, &ctx, &name, Access::Admin)?;
    db.start_compaction();
    Ok(render::json(StatusCode::ACCEPTED, json!({"ok": true})))
}
