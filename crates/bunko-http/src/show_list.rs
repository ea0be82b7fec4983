//! Show and list functions ([`bunko_engine::show_list`]), CouchDB 3.4's routes:
//! `GET/POST /{db}/_design/{ddoc}/_show/{name}[/{docid}]` and
//! `GET/POST /{db}/_design/{ddoc}/_list/{name}[/{other ddoc}]/{view}` (the view's query
//! parameters select the rows; `head` is `{total_rows, offset}` of a map view). Both only
//! read, as a member of the database; their response object is answered as an update
//! function's (`update::respond`), a list defaulting to `application/json`. A
//! show answers with its own `ETag` (`If-None-Match` → `304`) and `Vary: Accept`.

use axum::extract::State as AxState;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Router};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::db::{Access, open};
use crate::error::{ApiError, ApiResult};
use crate::params::Params;
use crate::update::{Call, request, respond};
use crate::{State, UserCtx, blocking};

pub fn routes() -> Router<State> {
    Router::new()
        .route("/{db}/_design/{ddoc}/_show/{name}", get(show).post(show))
        .route("/{db}/_design/{ddoc}/_show/{name}/{*docid}", get(show).post(show))
        .route("/{db}/_design/{ddoc}/_list/{name}/{view}", get(list).post(list))
        .route("/{db}/_design/{ddoc}/_list/{name}/{other}/{view}", get(list).post(list))
        .route("/{db}/_design/{ddoc}/_show", get(no_show).post(no_show))
        .route("/{db}/_design/{ddoc}/_show/", get(no_show).post(no_show))
        .route("/{db}/_design/{ddoc}/_list/{name}", get(no_list).post(no_list))
}

/// A show path without a function name (CouchDB's `show_error`).
async fn no_show() -> ApiError {
    ApiError::Other(StatusCode::NOT_FOUND, "show_error", "Invalid path.".into())
}

/// A list path without a view (CouchDB's `list_error`).
async fn no_list() -> ApiError {
    ApiError::Other(StatusCode::NOT_FOUND, "list_error", "Invalid path.".into())
}

async fn show(
    AxState(state): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    call: Call,
) -> ApiResult<Response> {
    let (db_name, ddoc, name, id) = call.target();
    let db = open(&state, &ctx, &db_name, Access::Member)?;
    let mut path = vec![db_name, "_design".into(), ddoc.clone(), "_show".into(), name.clone()];
    path.extend(id.clone());
    let req = request(&state, &ctx, path, id.as_deref(), &call);
    let accept = call.headers.get(header::ACCEPT).cloned();
    let response = blocking(move || Ok(db.run_show(&ddoc, &name, id.as_deref(), &req)?)).await?;
    // CouchDB's own ETag (the function cannot set one) and `Vary: Accept`: here a digest
    // of the response with the Accept header it answered.
    let digest = Sha256::digest(format!("{response:?}{accept:?}").as_bytes());
    let etag = format!("\"{}\"", hex::encode(digest.get(..16).unwrap_or_default()));
    let matches =
        call.headers.get(header::IF_NONE_MATCH).is_some_and(|v| v.as_bytes() == etag.as_bytes());
    let mut out = if matches {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        respond(&response, StatusCode::OK)
    };
    if let Ok(etag) = HeaderValue::from_str(&etag) {
        out.headers_mut().insert(header::ETAG, etag);
    }
    out.headers_mut().insert(header::VARY, HeaderValue::from_static("Accept"));
    Ok(out)
}

async fn list(
    AxState(state): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    call: Call,
) -> ApiResult<Response> {
    let (db_name, ddoc, name, _) = call.target();
    let view_ddoc = call.params.get("other").cloned().unwrap_or_else(|| ddoc.clone());
    let view = call.param("view");
    let db = open(&state, &ctx, &db_name, Access::Member)?;
    let mut params = Params::parse(call.query.as_deref());
    if call.method == Method::POST {
        params.merge_json(&call.body.object_or_empty()?);
    }
    let query = crate::view::parse(&params)?;
    let opts =
        crate::render::DocOpts { conflicts: params.flag("conflicts")?, ..Default::default() };
    let mut path = vec![db_name, "_design".into(), ddoc.clone(), "_list".into(), name.clone()];
    if view_ddoc != ddoc {
        path.push(view_ddoc.clone());
    }
    path.push(view.clone());
    let req = request(&state, &ctx, path, None, &call);
    let mut response = blocking(move || {
        let result =
            bunko_views::query_view(&db, &format!("_design/{view_ddoc}"), &view, &query, None)?;
        let head = crate::view::head_json(result.total_rows, result.offset, result.update_seq);
        let rows: Vec<Value> = result
            .rows
            .map(|row| row.map(|r| crate::view::row_json(&r, &opts)))
            .collect::<Result<_, _>>()?;
        Ok(db.run_list(&ddoc, &name, &head, &req, &rows)?)
    })
    .await?;
    let headers = response.entry("headers").or_insert_with(|| json!({}));
    if let Some(headers) = headers.as_object_mut() {
        headers.entry("Content-Type").or_insert_with(|| json!("application/json"));
    }
    Ok(respond(&response, StatusCode::OK))
}
