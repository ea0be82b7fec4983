//! `POST /_transaction`: several document writes, across databases, applied all or none,
//! with the revisions they depend on checked at commit (a Bunko extension; CouchDB has no
//! multi-document transactions). One request is one engine transaction
//! ([`bunko_engine::Transaction`]):
//!
//! ```json
//! {"docs":   [{"db": "publishers", "doc": {"_id": "mspress", "_rev": "3-…", "countOfBooks": 13}},
//!             {"db": "books", "doc": {"_id": "b13", "pub_id": "mspress"}}],
//!  "expect": [{"db": "books", "id": "b12", "rev": "1-…"}, {"db": "books", "id": "b99", "rev": null}]}
//! ```
//!
//! `201 {"ok": true, "results": [{"db", "id", "rev"}, …]}` when committed. Every write
//! still gets a new revision and a `_changes` entry, so replication sees ordinary edits. A
//! changed expectation is `409 conflict` ("transaction conflict: …", retry it); a document
//! that fails (a stale `_rev`, a refused write) fails the whole request with its own error,
//! the reason naming `db/id`.

use axum::Extension;
use axum::extract::State as AxState;
use axum::http::StatusCode;
use axum::response::Response;
use bunko_doc::RevId;
use serde_json::{Map, Value, json};

use crate::body::RawBody;
use crate::error::{ApiError, ApiResult};
use crate::{State, UserCtx, blocking, render};

/// One write of the request.
struct Write {
    db: String,
    doc: bunko_doc::body::ParsedDoc,
}

/// One expectation: `id` in `db` has winning revision `rev` (`None`: absent).
struct Expect {
    db: String,
    id: String,
    rev: Option<RevId>,
}

pub async fn post(
    AxState(state): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    body: RawBody,
) -> ApiResult<Response> {
    let request = body.request_object()?;
    let limits = state.engine.config().limits;
    let writes = parse_writes(&request, &limits)?;
    let expects = parse_expects(&request)?;
    let applied = blocking(move || {
        let mut txn = state.engine.begin(&ctx);
        for e in expects {
            txn.expect(&e.db, &e.id, e.rev)?;
        }
        for w in writes {
            txn.put(&w.db, w.doc)?;
        }
        Ok(txn.apply()?)
    })
    .await?;
    // The sync is awaited here, on the runtime: no blocking thread waits for the disk.
    let written = applied.durable().await?;
    let results: Vec<Value> = written
        .into_iter()
        .map(|w| json!({"db": w.db, "id": w.id, "rev": w.rev.to_string()}))
        .collect();
    Ok(render::json(StatusCode::CREATED, json!({"ok": true, "results": results})))
}

fn parse_writes(
    request: &Map<String, Value>,
    limits: &bunko_doc::body::Limits,
) -> ApiResult<Vec<Write>> {
    let Some(Value::Array(docs)) = request.get("docs") else {
        return Err(ApiError::bad_request("`docs` must be an array of {db, doc}."));
    };
    docs.iter()
        .map(|entry| {
            let db = db_name(entry)?;
            let Some(doc @ Value::Object(_)) = entry.get("doc") else {
                return Err(ApiError::bad_request("Each write needs a `doc` object."));
            };
            let doc = bunko_doc::body::from_value(doc.clone(), limits)?;
            if doc.id.is_none() {
                return Err(ApiError::bad_request("Each `doc` needs an `_id`."));
            }
            Ok(Write { db, doc })
        })
        .collect()
}

fn parse_expects(request: &Map<String, Value>) -> ApiResult<Vec<Expect>> {
    let entries = match request.get("expect") {
        None => return Ok(Vec::new()),
        Some(Value::Array(entries)) => entries,
        Some(_) => return Err(ApiError::bad_request("`expect` must be an array.")),
    };
    entries
        .iter()
        .map(|entry| {
            let db = db_name(entry)?;
            let Some(Value::String(id)) = entry.get("id") else {
                return Err(ApiError::bad_request("Each expectation needs an `id` string."));
            };
            let rev = match entry.get("rev") {
                None | Some(Value::Null) => None,
                Some(Value::String(rev)) => Some(rev.parse()?),
                Some(_) => return Err(ApiError::bad_request("`rev` must be a string or null.")),
            };
            Ok(Expect { db, id: id.clone(), rev })
        })
        .collect()
}

fn db_name(entry: &Value) -> ApiResult<String> {
    match entry.get("db") {
        Some(Value::String(db)) => Ok(db.clone()),
        _ => Err(ApiError::bad_request("Each entry needs a `db` string.")),
    }
}
