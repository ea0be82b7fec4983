//! Replication routes over [`bunko_replicator`]: `POST /_replicate`, `GET /_scheduler/jobs`,
//! `GET /_scheduler/docs[/_replicator[/{docid}]]`, and the replication rows of
//! `_active_tasks` ([`tasks`]). Answers have CouchDB 3's shapes.

use axum::extract::{Path, State as AxState};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};
use axum::{Extension, Router};
use bunko_replicator::job::iso8601;
use bunko_replicator::scheduler::{DocState, REPLICATOR_DB};
use bunko_replicator::{Entry, Outcome};
use serde_json::{Value, json};

use crate::auth::require_server_admin;
use crate::body::RawBody;
use crate::error::{ApiError, ApiResult};
use crate::render;
use crate::{State, UserCtx};

pub fn routes() -> Router<State> {
    Router::new()
        .route("/_replicate", post(replicate))
        .route("/_scheduler/jobs", get(jobs))
        .route("/_scheduler/docs", get(docs))
        .route("/_scheduler/docs/{db}", get(docs_of))
        .route("/_scheduler/docs/{db}/{*docid}", get(doc))
}

async fn replicate(
    AxState(st): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    body: RawBody,
) -> ApiResult<Response> {
    let body = body.request_object()?;
    let outcome = st.replicator.replicate(&body, &ctx).await.map_err(ApiError::Replication)?;
    Ok(match outcome {
        Outcome::Done(mut fields) => {
            let mut out = serde_json::Map::new();
            out.insert("ok".into(), json!(true));
            out.append(&mut fields);
            render::json(StatusCode::OK, Value::Object(out))
        }
        Outcome::Continuous(id) => {
            render::json(StatusCode::ACCEPTED, json!({"ok": true, "_local_id": id}))
        }
        Outcome::Cancelled(id) => {
            render::json(StatusCode::OK, json!({"ok": true, "_local_id": id}))
        }
    })
}

fn running(e: &Entry) -> bool {
    !matches!(
        *e.state.lock(),
        bunko_replicator::State::Completed | bunko_replicator::State::Failed(_)
    )
}

async fn jobs(
    AxState(st): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
) -> ApiResult<Response> {
    require_server_admin(&ctx)?;
    let jobs: Vec<Value> = st
        .replicator
        .jobs()
        .iter()
        .filter(|e| running(e))
        .map(|e| {
            let history: Vec<Value> = e
                .history
                .lock()
                .iter()
                .map(|(t, what)| json!({"timestamp": iso8601(*t), "type": what}))
                .collect();
            json!({
                "database": e.doc_id.as_ref().map(|_| REPLICATOR_DB),
                "id": e.rep_id,
                "pid": format!("<{}>", e.rep_id),
                "source": e.job.spec.source.shown(),
                "target": e.job.spec.target.shown(),
                "user": e.user,
                "doc_id": e.doc_id,
                "info": e.job.progress.lock().info(),
                "history": history,
                "node": st.node(),
                "start_time": iso8601(e.added),
            })
        })
        .collect();
    Ok(render::json(StatusCode::OK, json!({"total_rows": jobs.len(), "offset": 0, "jobs": jobs})))
}

/// One `_scheduler/docs` row.
fn doc_row(st: &State, d: &DocState) -> Value {
    let (state, info, errors) = match (&d.error, &d.entry) {
        (Some(error), _) => ("failed".to_string(), json!({"error": error}), 1),
        (None, Some(entry)) => {
            let state = entry.state.lock().clone();
            let info = match &state {
                bunko_replicator::State::Crashing(error)
                | bunko_replicator::State::Failed(error) => {
                    json!({"error": error})
                }
                _ => entry.job.progress.lock().info(),
            };
            (state.name().to_string(), info, *entry.error_count.lock())
        }
        (None, None) if bunko_replicator::state::has_ended(&d.body) => {
            let state =
                d.body.get("_replication_state").and_then(Value::as_str).unwrap_or_default();
            let info = match d.body.get("_replication_state_reason") {
                Some(reason) => json!({"error": reason}),
                None => d.body.get("_replication_stats").cloned().unwrap_or(Value::Null),
            };
            (state.to_string(), info, 0)
        }
        (None, None) => ("initializing".to_string(), Value::Null, 0),
    };
    json!({
        "database": REPLICATOR_DB,
        "doc_id": d.doc_id,
        "id": d.rep_id,
        "node": st.node(),
        "source": d.source,
        "target": d.target,
        "state": state,
        "info": info,
        "error_count": errors,
        "last_updated": iso8601(d.last_updated),
        "start_time": iso8601(d.start_time),
        "source_proxy": null,
        "target_proxy": null,
    })
}

async fn docs(st: AxState<State>, ctx: Extension<UserCtx>) -> ApiResult<Response> {
    docs_of(st, ctx, Path(REPLICATOR_DB.to_string())).await
}

async fn docs_of(
    AxState(st): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    Path(db): Path<String>,
) -> ApiResult<Response> {
    require_server_admin(&ctx)?;
    if db != REPLICATOR_DB {
        return Err(ApiError::not_found("Database does not exist."));
    }
    let docs: Vec<Value> = st.replicator.doc_states().iter().map(|d| doc_row(&st, d)).collect();
    Ok(render::json(StatusCode::OK, json!({"total_rows": docs.len(), "offset": 0, "docs": docs})))
}

async fn doc(
    AxState(st): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    Path((db, docid)): Path<(String, String)>,
) -> ApiResult<Response> {
    require_server_admin(&ctx)?;
    let found = st.replicator.doc_states().into_iter().find(|d| d.doc_id == docid);
    match found {
        Some(d) if db == REPLICATOR_DB => Ok(render::json(StatusCode::OK, doc_row(&st, &d))),
        _ => Err(ApiError::not_found("unknown")),
    }
}

/// The replication rows of `GET /_active_tasks` (`type: "replication"`).
pub fn tasks(st: &State) -> Vec<Value> {
    st.replicator
        .jobs()
        .iter()
        .filter(|e| running(e))
        .map(|e| {
            let p = e.job.progress.lock().clone();
            let spec = &e.job.spec;
            json!({
                "type": "replication",
                "node": st.node(),
                "pid": format!("<{}>", e.rep_id),
                "replication_id": e.rep_id,
                "source": spec.source.shown(),
                "target": spec.target.shown(),
                "continuous": spec.continuous,
                "user": e.user,
                "doc_id": e.doc_id,
                "database": e.doc_id.as_ref().map(|_| REPLICATOR_DB),
                "docs_read": p.stats.docs_read,
                "docs_written": p.stats.docs_written,
                "doc_write_failures": p.stats.doc_write_failures,
                "missing_revisions_found": p.stats.missing_found,
                "revisions_checked": p.stats.missing_checked,
                "bulk_get_docs": p.stats.bulk_get_docs,
                "bulk_get_attempts": p.stats.bulk_get_attempts,
                "changes_pending": p.changes_pending,
                "checkpointed_source_seq": p.checkpointed_source_seq,
                "source_seq": p.source_seq,
                "through_seq": p.through_seq,
                "checkpoint_interval": spec.checkpoint_interval.as_millis() as u64,
                "started_on": p.started_on,
                "updated_on": p.updated_on,
            })
        })
        .collect()
}
