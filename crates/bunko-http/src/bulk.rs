//! `POST /{db}/_bulk_docs`, `_bulk_get` and `_revs_diff`.

use std::collections::BTreeMap;

use axum::extract::{Path, RawQuery, State as AxState};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::post;
use axum::{Extension, Router};
use bunko_doc::RevId;
use bunko_doc::body;
use bunko_engine::WriteOptions;
use bunko_engine::read::OpenRev;
use serde_json::{Map, Value, json};

use crate::body::RawBody;
use crate::db::{Access, open};
use crate::error::{ApiError, ApiResult};
use crate::params::Params;
use crate::render::{self, DocOpts};
use crate::{State, UserCtx, blocking};

pub fn routes() -> Router<State> {
    Router::new()
        .route("/{db}/_bulk_docs", post(bulk_docs))
        .route("/{db}/_bulk_get", post(bulk_get))
        .route("/{db}/_revs_diff", post(revs_diff))
}

async fn bulk_docs(
    AxState(state): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    Path(db_name): Path<String>,
    body: RawBody,
) -> ApiResult<Response> {
    let mut object = body.request_object()?;
    // Taken out, not cloned: a `load` batch is a megabyte of parsed documents.
    let docs = match object.remove("docs") {
        Some(Value::Array(docs)) => docs,
        Some(_) => return Err(ApiError::bad_request("`docs` parameter must be an array.")),
        None => return Err(ApiError::bad_request("POST body must include `docs` parameter.")),
    };
    let flag = |name: &str, default: bool| match object.get(name) {
        None => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(ApiError::bad_request(format!("`{name}` parameter must be a boolean."))),
    };
    let opts = WriteOptions {
        new_edits: flag("new_edits", true)?,
        all_or_nothing: flag("all_or_nothing", false)?,
        ..Default::default()
    };
    let limits = state.engine.config().limits;
    let parsed =
        docs.into_iter().map(|d| body::from_value(d, &limits)).collect::<Result<Vec<_>, _>>()?;
    let db = state.engine.db(&db_name)?;
    for id in parsed.iter().filter_map(|d| d.id.as_deref()) {
        bunko_doc::id::validate_doc_id(id, db.is_partitioned())?;
    }
    let (locals, parsed): (Vec<_>, Vec<_>) = parsed
        .into_iter()
        .partition(|d| d.id.as_deref().is_some_and(|id| id.starts_with("_local/")));
    let (written, local_results) = blocking(move || {
        let written = db.write_docs(&ctx, parsed, opts)?;
        let mut results = Vec::with_capacity(locals.len());
        for doc in locals {
            let id = doc.id.clone().unwrap_or_default();
            let result = db
                .put_local(&ctx, &id, &doc)
                .and_then(|rev| rev.parse().map_err(bunko_engine::Error::from));
            results.push(bunko_engine::DocResult { id, result });
        }
        Ok((written, results))
    })
    .await?;
    // The sync is awaited here, on the runtime: no blocking thread waits for the disk.
    let mut results = written.durable().await?;
    results.extend(local_results);
    let failed = results.iter().any(|r| r.result.is_err());
    let status = if opts.all_or_nothing && failed {
        StatusCode::EXPECTATION_FAILED
    } else {
        StatusCode::CREATED
    };
    let mut out = Vec::with_capacity(results.len() * 80 + 2);
    out.push(b'[');
    for r in results.into_iter().filter(|r| opts.new_edits || r.result.is_err()) {
        if out.len() > 1 {
            out.push(b',');
        }
        match r.result {
            Ok(rev) => render::push_written(&mut out, &r.id, &rev),
            Err(err) => {
                let (_, error, reason) = ApiError::from(err).parts();
                render::push_json(&mut out, &json!({"id": r.id, "error": error, "reason": reason}));
            }
        }
    }
    out.push(b']');
    Ok(render::json_bytes(status, out))
}

async fn bulk_get(
    AxState(state): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    Extension(client): Extension<bunko_engine::advisor::Client>,
    Path(db_name): Path<String>,
    RawQuery(query): RawQuery,
    body: RawBody,
) -> ApiResult<Response> {
    let db = open(&state, &ctx, &db_name, Access::Member)?;
    let p = Params::parse(query.as_deref());
    let opts = DocOpts { revs: p.flag("revs")?, ..DocOpts::from_params(&p)? };
    let latest = p.flag("latest")?;
    let attachments = crate::attachment::AttOpts {
        data: p.flag("attachments")?,
        since: 0,
        encoding: p.flag("att_encoding_info")?,
    };
    let object = body.request_object()?;
    let Some(Value::Array(requests)) = object.get("docs").cloned() else {
        return Err(ApiError::bad_request("Missing JSON list of 'docs'."));
    };
    let results = blocking(move || {
        let ids: Vec<String> = requests
            .iter()
            .filter_map(|r| r.get("id").and_then(Value::as_str).map(str::to_string))
            .collect();
        db.observe_lookup("_bulk_get", &ids, Some(&client));
        let mut out = Vec::with_capacity(requests.len());
        for request in &requests {
            out.push(bulk_get_one(&ctx, &db, request, &opts, latest, attachments)?);
        }
        Ok(out)
    })
    .await?;
    let mut bytes = b"{\"results\":[".to_vec();
    bytes.extend_from_slice(&results.join(&b","[..]));
    bytes.extend_from_slice(b"]}");
    Ok(render::json_bytes(StatusCode::OK, bytes))
}

fn bulk_get_one(
    reader: &UserCtx,
    db: &bunko_engine::Database,
    request: &Value,
    opts: &DocOpts,
    latest: bool,
    attachments: crate::attachment::AttOpts,
) -> ApiResult<Vec<u8>> {
    let id = request.get("id").and_then(Value::as_str).unwrap_or_default().to_string();
    let rev_text = request.get("rev").and_then(Value::as_str);
    let error = |rev: &str, error: &str, reason: &str| json!({"error": {"id": id, "rev": rev, "error": error, "reason": reason}});
    let mut docs: Vec<Vec<u8>> = Vec::new();
    if id.is_empty() {
        docs.push(
            error("undefined", "illegal_docid", "Document id must not be empty")
                .to_string()
                .into_bytes(),
        );
    } else if let Some(reason) = partition_error(db, &id) {
        let entry = json!({"error": {"id": id, "rev": rev_text, "error": "illegal_docid", "reason": reason}});
        docs.push(entry.to_string().into_bytes());
    } else {
        let revs = match rev_text.map(str::parse::<RevId>).transpose() {
            Ok(rev) => rev.map(|r| vec![r]),
            Err(_) => {
                let entry =
                    error(rev_text.unwrap_or_default(), "bad_request", "Invalid rev format");
                return Ok(result_json(&id, &[entry.to_string().into_bytes()]));
            }
        };
        let found = match revs {
            Some(revs) => db.open_revs(reader, &id, Some(revs), latest),
            None => db.open_revs(reader, &id, None, latest),
        };
        match found {
            Ok(found) => {
                for entry in found {
                    docs.push(match entry {
                        OpenRev::Ok(mut doc) => {
                            crate::attachment::show(db, &mut doc, attachments)?;
                            let mut out = b"{\"ok\":".to_vec();
                            out.extend_from_slice(&render::doc_json(&doc, opts));
                            out.push(b'}');
                            out
                        }
                        OpenRev::Missing(rev) => {
                            error(&rev.to_string(), "not_found", "missing").to_string().into_bytes()
                        }
                    });
                }
            }
            Err(bunko_engine::Error::NotFound(reason)) => {
                docs.push(
                    error(rev_text.unwrap_or("undefined"), "not_found", &reason)
                        .to_string()
                        .into_bytes(),
                );
            }
            Err(err) => return Err(err.into()),
        }
    }
    Ok(result_json(&id, &docs))
}

/// Why `id` cannot name a document of a partitioned database, if it cannot.
fn partition_error(db: &bunko_engine::Database, id: &str) -> Option<String> {
    if !db.is_partitioned() {
        return None;
    }
    bunko_doc::id::validate_doc_id(id, true).err().map(|err| err.to_string())
}

fn result_json(id: &str, docs: &[Vec<u8>]) -> Vec<u8> {
    let mut out = b"{\"id\":".to_vec();
    render::push_json(&mut out, &json!(id));
    out.extend_from_slice(b",\"docs\":[");
    out.extend_from_slice(&docs.join(&b","[..]));
    out.extend_from_slice(b"]}");
    out
}

async fn revs_diff(
    AxState(state): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    Path(db_name): Path<String>,
    body: RawBody,
) -> ApiResult<Response> {
    let db = open(&state, &ctx, &db_name, Access::Member)?;
    let mut request = BTreeMap::new();
    for (id, revs) in body.request_object()? {
        let Value::Array(revs) = revs else {
            return Err(ApiError::bad_request("Each document must map to an array of revs"));
        };
        let revs = revs
            .iter()
            .map(|r| {
                r.as_str()
                    .ok_or_else(|| ApiError::bad_request("Invalid rev format"))
                    .and_then(|r| Ok(r.parse::<RevId>()?))
            })
            .collect::<ApiResult<Vec<_>>>()?;
        request.insert(id, revs);
    }
    let diff = blocking(move || Ok(db.revs_diff(request)?)).await?;
    let mut out = Map::new();
    for (id, (missing, ancestors)) in diff {
        let mut entry = json!({"missing": render::revs(&missing)});
        if !ancestors.is_empty() {
            entry["possible_ancestors"] = render::revs(&ancestors);
        }
        out.insert(id, entry);
    }
    Ok(render::json(StatusCode::OK, Value::Object(out)))
}
