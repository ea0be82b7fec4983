//! `GET /{db}/_design/{ddoc}/_info` for a design document without JavaScript views (a
//! Mango `language: query` document, or one with no views): CouchDB's
//! `{"name", "view_index"}`. Mango indexes are kept current in the writing commit, so
//! nothing is ever pending or being updated; the signature names the index definitions
//! (a hash of `language`, `options`, `views` and `indexes`: it changes only with them).
//! Design documents with views are answered by `view.rs` from their view group.

use axum::Extension;
use axum::extract::{Path, State as AxState};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::db::{Access, open};
use crate::error::ApiResult;
use crate::{State, UserCtx, blocking, render};

/// The answer for a design document that holds no JavaScript views (Mango indexes, or
/// none); [`crate::view`] routes the request and answers for view groups itself.
pub async fn info(
    st: AxState<State>,
    ctx: Extension<UserCtx>,
    Path((db, id)): Path<(String, String)>,
) -> ApiResult<Response> {
    let db = open(&st, &ctx, &db, Access::Member)?;
    let ddoc = format!("_design/{id}");
    let (doc, seq) = blocking(move || Ok((db.get(&ctx, &ddoc, None)?, db.update_seq()))).await?;
    let body: Map<String, Value> = serde_json::from_slice(&doc.body).unwrap_or_default();
    let language = body.get("language").and_then(Value::as_str).unwrap_or("javascript");
    let mut hasher = Sha256::new();
    for key in ["language", "options", "views", "indexes"] {
        hasher.update(body.get(key).map(Value::to_string).unwrap_or_default().as_bytes());
    }
    let signature = hex::encode(hasher.finalize().get(..16).unwrap_or_default());
    let out = json!({
        "name": id,
        "view_index": {
            "updates_pending": {"minimum": 0, "preferred": 0, "total": 0},
            "waiting_commit": false,
            "waiting_clients": 0,
            "updater_running": false,
            "update_seq": seq,
            "sizes": {"file": 0, "external": 0, "active": 0},
            "signature": signature,
            "purge_seq": 0,
            "language": language,
            "compact_running": false,
        }
    });
    Ok(render::json(StatusCode::OK, out))
}
