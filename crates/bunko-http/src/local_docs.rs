//! `GET/POST /{db}/_local_docs`: the database's `_local` documents as `_all_docs` rows
//! (`startkey`/`endkey`, `inclusive_end`, `descending`, `skip`, `limit`, `include_docs`,
//! `keys`), with CouchDB 3's `"total_rows": null, "offset": null`.

use axum::extract::{Path, RawQuery, State as AxState};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use axum::{Extension, Router};
use bunko_engine::Database;
use bunko_engine::local::{LocalDocsQuery, LocalRow};
use serde_json::{Value, json};

use crate::all_docs::post_params_required;
use crate::body::RawBody;
use crate::db::{Access, open};
use crate::doc::local_json;
use crate::error::{ApiError, ApiResult};
use crate::params::Params;
use crate::{State, UserCtx, blocking, render};

pub fn routes() -> Router<State> {
    Router::new().route("/{db}/_local_docs", get(get_local_docs).post(post_local_docs))
}

async fn get_local_docs(
    st: AxState<State>,
    ctx: Extension<UserCtx>,
    Path(db): Path<String>,
    q: RawQuery,
) -> ApiResult<Response> {
    let db = open(&st, &ctx, &db, Access::Member)?;
    run(db, Params::parse(q.0.as_deref())).await
}

async fn post_local_docs(
    st: AxState<State>,
    ctx: Extension<UserCtx>,
    Path(db): Path<String>,
    q: RawQuery,
    body: RawBody,
) -> ApiResult<Response> {
    let db = open(&st, &ctx, &db, Access::Member)?;
    run(db, post_params_required(q.0.as_deref(), &body)?).await
}

fn key(p: &Params, names: &[&str]) -> ApiResult<Option<String>> {
    match p.json_any(names)? {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(ApiError::query_parse("Document ids are strings")),
    }
}

async fn run(db: std::sync::Arc<Database>, p: Params) -> ApiResult<Response> {
    let include_docs = p.flag("include_docs")?;
    let keys = match p.json("keys")? {
        None => None,
        Some(Value::Array(keys)) => Some(keys),
        Some(_) => return Err(ApiError::bad_request("`keys` member must be an array.")),
    };
    let query = LocalDocsQuery {
        start: key(&p, &["startkey", "start_key", "startkey_docid", "start_key_doc_id"])?,
        end: key(&p, &["endkey", "end_key", "endkey_docid", "end_key_doc_id"])?,
        inclusive_end: p.bool("inclusive_end")?.unwrap_or(true),
        descending: p.flag("descending")?,
        skip: p.u64("skip")?.unwrap_or(0),
        limit: p.u64("limit")?,
        include_system: p.flag("include_system")?,
    };
    let rows = blocking(move || match keys {
        None => Ok(db.local_docs(&query)?.iter().map(|r| row(r, include_docs)).collect()),
        Some(mut keys) => {
            // `descending`, `skip` and `limit` apply to the keys, as for `_all_docs`.
            if query.descending {
                keys.reverse();
            }
            let limit =
                query.limit.map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX));
            let skip = usize::try_from(query.skip).unwrap_or(usize::MAX);
            let keys = keys.iter().skip(skip).take(limit);
            Ok(keys.map(|k| keyed_row(&db, k, include_docs)).collect())
        }
    })
    .await?;
    let rows: Vec<Value> = rows;
    let out = json!({"total_rows": null, "offset": null, "rows": rows});
    Ok(render::json(StatusCode::OK, out))
}

fn row(r: &LocalRow, include_docs: bool) -> Value {
    let mut out = json!({"id": r.id, "key": r.id, "value": {"rev": r.rev}});
    if include_docs {
        let doc = local_json(&r.id, &r.rev, &r.body);
        out["doc"] = serde_json::from_slice(&doc).unwrap_or(Value::Null);
    }
    out
}

fn keyed_row(db: &Database, key: &Value, include_docs: bool) -> Value {
    let found = key.as_str().filter(|k| k.starts_with("_local/")).and_then(|id| {
        let (rev, body) = db.get_local(id).ok()?;
        Some(LocalRow { id: id.to_string(), rev, body })
    });
    match found {
        Some(r) => row(&r, include_docs),
        None => json!({"key": key, "error": "not_found"}),
    }
}
