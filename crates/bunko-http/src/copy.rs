//! `COPY /{db}/{id}` (and `/{db}/_design/{id}`), CouchDB's `chttpd_db` copy: the document
//! (at `?rev=`, else its winning revision), attachments included, written as the document
//! the `Destination` header names (`id` or `id?rev=…` to overwrite that revision), as an
//! ordinary write of the requesting user. `201` with `Location` and `ETag`, as CouchDB
//! answers. A `POST` there is CouchDB's HTML form upload (`form.rs`); any other method
//! is `405`.

use axum::Extension;
use axum::extract::{MatchedPath, Path, RawQuery, Request, State as AxState};
use axum::http::request::Parts;
use axum::http::{Method, StatusCode};
use axum::response::Response;
use bunko_doc::RevId;
use bunko_engine::WriteOptions;
use serde_json::{Map, Value};

use crate::doc::{open_for_read, write_one, written};
use crate::error::{ApiError, ApiResult};
use crate::headers::{created_at, doc_path};
use crate::params::Params;
use crate::render::{self, DocOpts};
use crate::{State, UserCtx, blocking};

/// The fallback of the document routes: `COPY`, or `405`.
pub async fn copy(
    AxState(state): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    matched: MatchedPath,
    Path((db_name, id)): Path<(String, String)>,
    RawQuery(query): RawQuery,
    request: Request,
) -> ApiResult<Response> {
    let (Parts { method, headers, .. }, body) = request.into_parts();
    let design = matched.as_str().starts_with("/{db}/_design/");
    let id = if design { format!("_design/{id}") } else { id };
    if method == Method::POST {
        return crate::form::upload(&state, ctx, &db_name, id, &headers, body).await;
    }
    if method.as_str() != "COPY" {
        return Err(ApiError::Other(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            "Only DELETE,GET,HEAD,POST,PUT,COPY allowed".into(),
        ));
    }
    let destination = headers.get("destination").and_then(|v| v.to_str().ok());
    let destination = destination
        .ok_or_else(|| ApiError::bad_request("Destination header is mandatory for COPY."))?;
    if destination.starts_with("http://") || destination.starts_with("https://") {
        return Err(ApiError::bad_request("Destination URL must be relative."));
    }
    let (target, target_rev) = match destination.split_once('?') {
        Some((target, query)) => {
            (target, Params::parse(Some(query)).str("rev").map(str::to_string))
        }
        None => (destination, None),
    };
    // `chttpd:unquote`: percent-decoded, `+` a space.
    let target: String = form_urlencoded::parse(format!("x={target}").as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default();
    let rev = Params::parse(query.as_deref()).str("rev").map(str::parse::<RevId>).transpose()?;
    let db = open_for_read(&state, &ctx, &db_name, &id)?;
    let (source, reader) = (db.clone(), ctx.clone());
    let body = blocking(move || {
        let mut doc = source.get(&reader, &id, rev.as_ref())?;
        crate::attachment::inline(&source, &mut doc, 0)?;
        Ok(render::doc_json(&doc, &DocOpts::default()))
    })
    .await?;
    let mut copied: Map<String, Value> = serde_json::from_slice(&body)
        .map_err(|_| ApiError::bad_request("the document cannot be copied"))?;
    copied.insert("_id".into(), Value::String(target.clone()));
    match target_rev {
        Some(rev) => copied.insert("_rev".into(), Value::String(rev)),
        None => copied.remove("_rev"),
    };
    let bytes = serde_json::to_vec(&copied)
        .map_err(|_| ApiError::bad_request("the document cannot be copied"))?;
    let doc = bunko_doc::body::parse(&bytes, &state.engine.config().limits)?;
    let (id, rev) = write_one(db, ctx, doc, WriteOptions::default(), bytes.len()).await?;
    Ok(created_at(written(StatusCode::CREATED, &id, &rev), doc_path(&db_name, &id)))
}
