//! `GET /_dbs_info` (every database's info, with `_all_dbs`'s range parameters; server
//! admins, like `_all_dbs`) and `POST /_dbs_info` (`{"keys": [...]}`, at most
//! `chttpd/max_db_number_for_dbs_info_req`, 100 by default), as CouchDB's
//! `chttpd_misc:handle_dbs_info_req`. A database the user may not read is `not_found`, as
//! a missing one is (CouchDB shows every database's info to anyone).

use axum::extract::{RawQuery, State as AxState};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use axum::{Extension, Router};
use serde_json::{Value, json};

use crate::auth::require_server_admin;
use crate::body::RawBody;
use crate::db::{Access, info_json, open};
use crate::error::{ApiError, ApiResult};
use crate::params::Params;
use crate::{State, UserCtx, render};

/// CouchDB's default `max_db_number_for_dbs_info_req`.
const MAX_KEYS: u64 = 100;

pub fn routes() -> Router<State> {
    Router::new().route("/_dbs_info", get(get_all).post(post_keys))
}

async fn get_all(
    AxState(st): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    RawQuery(query): RawQuery,
) -> ApiResult<Response> {
    require_server_admin(&ctx)?;
    let names = crate::server::db_names(&st, &Params::parse(query.as_deref()))?;
    let rows: Vec<Value> = names
        .iter()
        .filter_map(|name| st.engine.get_db(name))
        .map(|db| json!({"key": db.name(), "info": info_json(&db)}))
        .collect();
    Ok(render::json(StatusCode::OK, Value::Array(rows)))
}

async fn post_keys(
    AxState(st): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    body: RawBody,
) -> ApiResult<Response> {
    let body = body.request_object()?;
    let keys = match body.get("keys") {
        None => return Err(ApiError::bad_request("`keys` member must exist.")),
        Some(Value::Array(keys)) => keys,
        Some(_) => return Err(ApiError::bad_request("`keys` member must be an array.")),
    };
    let max = st.engine.settings().get_u64("chttpd", "max_db_number_for_dbs_info_req");
    if keys.len() as u64 > max.unwrap_or(MAX_KEYS) {
        return Err(ApiError::bad_request("too_many_keys"));
    }
    let rows: Vec<Value> = keys
        .iter()
        .map(|key| {
            let found = key.as_str().and_then(|name| open(&st, &ctx, name, Access::Member).ok());
            match found {
                Some(db) => json!({"key": key, "info": info_json(&db)}),
                None => json!({"key": key, "error": "not_found"}),
            }
        })
        .collect();
    Ok(render::json(StatusCode::OK, Value::Array(rows)))
}
