//! View routes: `GET/POST /{db}/_design/{ddoc}/_view/{view}`, `POST …/_view/{view}/queries`,
//! `GET /{db}/_design/{ddoc}/_info`, `POST /{db}/_view_cleanup` and
//! `POST /{db}/_compact/{ddoc}`. The partition form
//! `/{db}/_partition/{p}/_design/{ddoc}/_view/{view}` is dispatched from
//! [`crate::partition`] to [`query`].
//!
//! Handlers parse the parameters into a [`ViewQuery`], run
//! [`bunko_views::query_view`] on a blocking thread and render
//! `{"total_rows","offset","rows":[{"id","key","value"[,"doc"]}]}` (reduce answers have only
//! `rows`). Map rows stream from the query's snapshot ([`crate::stream`]); reduce rows are
//! computed before the answer starts.

use std::sync::Arc;

use axum::extract::{Path, RawQuery, State as AxState};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};
use axum::{Extension, Router};
use bunko_engine::Database;
use bunko_views::{RowIter, Update, ViewInfo, ViewQuery, ViewResult, ViewRow};
use serde_json::{Map, Value, json};

use crate::attachment::AttOpts;
use crate::body::RawBody;
use crate::db::{Access, open};
use crate::error::{ApiError, ApiResult};
use crate::params::Params;
use crate::render::{self, DocOpts};
use crate::stream::{self, Gone};
use crate::{State, UserCtx, blocking};

pub fn routes() -> Router<State> {
    Router::new()
        .route("/{db}/_design/{ddoc}/_view/{view}", get(get_view).post(post_view))
        .route("/{db}/_design/{ddoc}/_view/{view}/queries", post(post_queries))
        .route("/{db}/_design/{ddoc}/_info", get(info))
        .route("/{db}/_view_cleanup", post(cleanup))
        .route("/{db}/_compact/{ddoc}", post(compact))
        .route("/{db}/_temp_view", post(temp_view))
}

/// `POST /{db}/_temp_view`: gone since CouchDB 2.0.
async fn temp_view() -> ApiError {
    ApiError::Other(
        StatusCode::GONE,
        "gone",
        "Temporary views are not supported in CouchDB".to_string(),
    )
}

async fn get_view(
    st: AxState<State>,
    ctx: Extension<UserCtx>,
    Path((db, ddoc, view)): Path<(String, String, String)>,
    q: RawQuery,
) -> ApiResult<Response> {
    let db = open(&st, &ctx, &db, Access::View)?;
    query(ctx.0, db, format!("_design/{ddoc}"), view, Params::parse(q.0.as_deref()), None).await
}

async fn post_view(
    st: AxState<State>,
    ctx: Extension<UserCtx>,
    Path((db, ddoc, view)): Path<(String, String, String)>,
    q: RawQuery,
    body: RawBody,
) -> ApiResult<Response> {
    let db = open(&st, &ctx, &db, Access::View)?;
    let mut params = Params::parse(q.0.as_deref());
    let body = body.object_or_empty()?;
    if body.get("keys").is_some_and(|keys| !keys.is_array()) {
        return Err(ApiError::bad_request("`keys` member must be an array."));
    }
    params.merge_json(&body);
    query(ctx.0, db, format!("_design/{ddoc}"), view, params, None).await
}

/// Runs one view query and renders the answer. The query and the answer's first
/// `FIRST` bytes are done in one task: a short answer (the usual key lookup) goes out
/// whole, and only a longer one streams the rest from another. That task runs on the
/// async worker for a short read of a current view (`bunko_views::is_short_read`: a few
/// cached keys, cheaper than the hop), on a blocking thread otherwise.
pub async fn query(
    reader: UserCtx,
    db: Arc<Database>,
    ddoc: String,
    view: String,
    params: Params,
    partition: Option<String>,
) -> ApiResult<Response> {
    let q = parse(&params)?;
    // `?partition=` on the global path queries one partition, as the partition path does.
    let partition = match (partition, params.str("partition")) {
        (None, Some(p)) => {
            bunko_doc::id::validate_partition(p)?;
            Some(p.to_string())
        }
        (partition, _) => partition,
    };
    let opts = DocOpts { conflicts: params.flag("conflicts")?, ..Default::default() };
    // `attachments=true` inlines attachment data in the included documents.
    let attachments = AttOpts::included(q.include_docs, &params)?;
    let inline = bunko_views::is_short_read(&db, &ddoc, &view, &q);
    let first_part = move || {
        let ViewResult { total_rows, offset, update_seq, mut rows } =
            bunko_views::query_view(&reader, &db, &ddoc, &view, &q, partition.as_deref())?;
        let head = head_json(total_rows, offset, update_seq).to_string();
        let mut out = Vec::with_capacity(1024);
        out.extend_from_slice(head.strip_suffix('}').unwrap_or(&head).as_bytes());
        out.extend_from_slice(if head.len() > 2 { b",\"rows\":[\r\n" } else { b"\"rows\":[\r\n" });
        let mut written = 0;
        while out.len() < FIRST {
            let Some(row) = push_next(&mut out, &mut rows, &db, attachments, &opts, written) else {
                out.extend_from_slice(b"\r\n]}\n");
                return Ok((out, None));
            };
            row?;
            written += 1;
        }
        Ok((out, Some((db, rows, opts, written))))
    };
    let (first, rest) = if inline { first_part()? } else { blocking(first_part).await? };
    let Some((db, rows, opts, written)) = rest else {
        return Ok(render::json_bytes(StatusCode::OK, first));
    };
    Ok(stream::response(StatusCode::OK, "application/json", move |sink| {
        sink.write(&first)?;
        let (mut out, mut rows) = (Vec::new(), rows);
        for i in written.. {
            out.clear();
            match push_next(&mut out, &mut rows, &db, attachments, &opts, i) {
                None => break,
                Some(Ok(())) => sink.write(&out)?,
                Some(Err(err)) => {
                    tracing::error!(%err, "view stream failed");
                    return Err(Gone);
                }
            }
        }
        sink.write(b"\r\n]}\n")
    }))
}

/// A row whose included document shows its attachments as asked.
fn with_data(
    db: &Database,
    mut row: ViewRow,
    attachments: AttOpts,
) -> bunko_engine::Result<ViewRow> {
    crate::attachment::inline_included(db, row.doc.as_mut().and_then(Option::as_mut), attachments)?;
    Ok(row)
}

/// Appends the next of `rows` as row number `i` of an answer (with the separator before
/// it); `None` after the last row. Map rows without documents are copied from their
/// stored JSON text ([`bunko_views::RowIter::plain`]), others decoded and rendered.
fn push_next(
    out: &mut Vec<u8>,
    rows: &mut RowIter,
    db: &Database,
    attachments: AttOpts,
    opts: &DocOpts,
    i: usize,
) -> Option<bunko_engine::Result<()>> {
    let Some(mut plain) = rows.plain() else {
        let row = rows.next()?;
        return Some(row.and_then(|row| {
            push_row(out, &with_data(db, row, attachments)?, opts, i);
            Ok(())
        }));
    };
    let mark = out.len();
    if i > 0 {
        out.extend_from_slice(b",\r\n");
    }
    let row = plain.next_json(out);
    if row.is_none() {
        out.truncate(mark);
    }
    row
}

/// Bytes of an answer rendered before deciding to stream the rest.
const FIRST: usize = 16 * 1024;

/// Appends row number `i` of an answer (with the separator before it).
fn push_row(out: &mut Vec<u8>, row: &ViewRow, opts: &DocOpts, i: usize) {
    if i > 0 {
        out.extend_from_slice(b",\r\n");
    }
    if row.doc.is_some() || row.error.is_some() {
        render::push_json(out, &row_json(row, opts));
        return;
    }
    // The common row, written without building a JSON object first.
    let mut first = true;
    if let Some(id) = &row.id {
        out.extend_from_slice(b"{\"id\":");
        // Writing a string into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, id.as_str());
        first = false;
    }
    out.extend_from_slice(if first { b"{\"key\":" } else { b",\"key\":" });
    render::push_json(out, &row.key);
    out.extend_from_slice(b",\"value\":");
    render::push_json(out, &row.value);
    out.push(b'}');
}

/// `POST …/_view/{view}/queries`: `{"queries": [{…}, …]}` → `{"results": [{…}, …]}`.
async fn post_queries(
    st: AxState<State>,
    ctx: Extension<UserCtx>,
    Path((db, ddoc, view)): Path<(String, String, String)>,
    q: RawQuery,
    body: RawBody,
) -> ApiResult<Response> {
    let db = open(&st, &ctx, &db, Access::View)?;
    let body = body.request_object()?;
    let Some(Value::Array(queries)) = body.get("queries") else {
        return Err(ApiError::bad_request("`queries` member must be an array."));
    };
    let base = Params::parse(q.0.as_deref());
    let mut parsed = Vec::with_capacity(queries.len());
    for item in queries {
        let Value::Object(item) = item else {
            return Err(ApiError::bad_request("Each query must be an object."));
        };
        let mut params = base.clone();
        params.merge_json(item);
        let opts = DocOpts { conflicts: params.flag("conflicts")?, ..Default::default() };
        parsed.push((parse(&params)?, opts));
    }
    let ddoc = format!("_design/{ddoc}");
    let results = blocking(move || {
        let mut out = Vec::with_capacity(parsed.len());
        for (q, opts) in &parsed {
            out.push(result_json(
                bunko_views::query_view(&ctx, &db, &ddoc, &view, q, None)?,
                opts,
            )?);
        }
        Ok(out)
    })
    .await?;
    Ok(render::json(StatusCode::OK, json!({"results": results})))
}

/// `GET /{db}/_design/{ddoc}/_info`.
async fn info(
    st: AxState<State>,
    ctx: Extension<UserCtx>,
    Path((db, ddoc)): Path<(String, String)>,
) -> ApiResult<Response> {
    let handle = open(&st, &ctx, &db, Access::Member)?;
    let id = format!("_design/{ddoc}");
    let probe = handle.clone();
    let probe_id = id.clone();
    if blocking(move || Ok(bunko_views::design_group(&probe, &probe_id)?)).await?.is_none() {
        return crate::ddoc_info::info(st, ctx, Path((db, ddoc))).await;
    }
    let compacting = handle.is_compacting();
    let db = handle;
    let (group, updating, (seq, info)) = blocking(move || {
        let Some(def) = bunko_views::design_group(&db, &id)? else {
            return Ok((None, false, (0, ViewInfo::default())));
        };
        let index = bunko_views::view_index(&db, def.clone())?;
        let info = bunko_views::view_info(&db, &index)?;
        Ok((Some(def), index.is_updating(), (index.seq(), info)))
    })
    .await?;
    let (sig, language) = match &group {
        Some(def) => (def.sig.clone(), def.language.clone()),
        None => (String::new(), "javascript".to_string()),
    };
    Ok(render::json(
        StatusCode::OK,
        json!({
            "name": ddoc,
            "view_index": {
                "signature": sig,
                "language": language,
                "update_seq": seq,
                "updates_pending":
                    {"minimum": info.pending, "preferred": info.pending, "total": info.pending},
                "purge_seq": info.purge_seq,
                "updater_running": updating,
                "compact_running": compacting,
                "waiting_clients": 0,
                "waiting_commit": false,
                "sizes": {"active": info.active, "external": info.external, "file": info.file},
                "collator_versions": [bunko_doc::collate::COLLATION_VERSION],
            }
        }),
    ))
}

/// `POST /{db}/_view_cleanup`: removes the indexes no design document uses any more.
async fn cleanup(
    st: AxState<State>,
    ctx: Extension<UserCtx>,
    Path(db): Path<String>,
) -> ApiResult<Response> {
    let db = open(&st, &ctx, &db, Access::Admin)?;
    blocking(move || Ok(bunko_views::view_cleanup(&db)?)).await?;
    Ok(render::json(StatusCode::ACCEPTED, json!({"ok": true})))
}

/// `POST /{db}/_compact/{ddoc}`: compacts the design document's view group in the
/// background and answers at once, as CouchDB does.
async fn compact(
    st: AxState<State>,
    ctx: Extension<UserCtx>,
    Path((db, ddoc)): Path<(String, String)>,
) -> ApiResult<Response> {
    let db = open(&st, &ctx, &db, Access::Admin)?;
    let id = format!("_design/{ddoc}");
    blocking(move || {
        let missing = || bunko_engine::Error::NotFound("missing".into());
        let def = bunko_views::design_group(&db, &id)?.ok_or_else(missing)?;
        let index = bunko_views::view_index(&db, def)?;
        bunko_views::compact_view_group(&db, index);
        Ok(())
    })
    .await?;
    Ok(render::json(StatusCode::ACCEPTED, json!({"ok": true})))
}

/// The view parameters of a request.
pub(crate) fn parse(p: &Params) -> ApiResult<ViewQuery> {
    let docid = |names: &[&str]| {
        names.iter().find_map(|n| p.str(n)).map(|s| match serde_json::from_str::<Value>(s) {
            Ok(Value::String(parsed)) => parsed,
            _ => s.to_string(),
        })
    };
    let keys = match p.json("keys")? {
        None => None,
        Some(Value::Array(keys)) => Some(keys),
        Some(_) => return Err(ApiError::query_parse("`keys` must be an array of strings.")),
    };
    let ranged = ["key", "startkey", "start_key", "endkey", "end_key"];
    if keys.is_some() && ranged.iter().any(|name| p.str(name).is_some()) {
        return Err(ApiError::query_parse(
            "`keys` is incompatible with `key`, `start_key` and `end_key`",
        ));
    }
    if p.str("stable").is_some_and(|v| v != "true" && v != "false") {
        return Err(ApiError::query_parse("Invalid value for `stable`."));
    }
    // Checked as CouchDB does (`sorted` matters only to a clustered merge; `attachments`
    // is read by the query route).
    for flag in ["sorted", "attachments", "att_encoding_info"] {
        p.bool(flag)?;
    }
    let update = Update::parse(p.str("update"), p.str("stale"))
        .map_err(|name| ApiError::query_parse(format!("Invalid value for `{name}`.")))?;
    Ok(ViewQuery {
        key: p.json("key")?,
        keys,
        start_key: p.json_any(&["startkey", "start_key"])?,
        end_key: p.json_any(&["endkey", "end_key"])?,
        start_key_doc_id: docid(&["startkey_docid", "start_key_doc_id"]),
        end_key_doc_id: docid(&["endkey_docid", "end_key_doc_id"]),
        inclusive_end: p.bool("inclusive_end")?.unwrap_or(true),
        descending: p.flag("descending")?,
        limit: p.u64("limit")?,
        skip: p.u64("skip")?.unwrap_or(0),
        include_docs: p.flag("include_docs")?,
        reduce: p.bool("reduce")?,
        group: p.bool("group")?,
        group_level: p.u64("group_level")?,
        update,
        update_seq: p.flag("update_seq")?,
    })
}

/// The members before `rows`: `total_rows`, `offset`, `update_seq`.
pub(crate) fn head_json(
    total_rows: Option<u64>,
    offset: Option<u64>,
    update_seq: Option<u64>,
) -> Value {
    let mut out = Map::new();
    if let Some(total) = total_rows {
        out.insert("total_rows".into(), json!(total));
    }
    if let Some(offset) = offset {
        out.insert("offset".into(), json!(offset));
    }
    if let Some(seq) = update_seq {
        out.insert("update_seq".into(), json!(crate::seq::render(seq)));
    }
    Value::Object(out)
}

/// A whole answer as one JSON value (for `queries`).
fn result_json(result: ViewResult, opts: &DocOpts) -> bunko_engine::Result<Value> {
    let mut out = head_json(result.total_rows, result.offset, result.update_seq);
    let rows = result.rows.map(|row| row.map(|r| row_json(&r, opts))).collect::<Result<_, _>>()?;
    if let Value::Object(members) = &mut out {
        members.insert("rows".into(), Value::Array(rows));
    }
    Ok(out)
}

pub(crate) fn row_json(row: &ViewRow, opts: &DocOpts) -> Value {
    let mut out = Map::new();
    if let Some(id) = &row.id {
        out.insert("id".into(), json!(id));
    }
    out.insert("key".into(), row.key.clone());
    match &row.error {
        Some(reason) => {
            out.insert("error".into(), json!("reduce_overflow_error"));
            out.insert("reason".into(), json!(reason));
        }
        None => {
            out.insert("value".into(), row.value.clone());
        }
    }
    if let Some(doc) = &row.doc {
        let doc = doc
            .as_ref()
            .and_then(|d| serde_json::from_slice(&render::doc_json(d, opts)).ok())
            .unwrap_or(Value::Null);
        out.insert("doc".into(), doc);
    }
    Value::Object(out)
}
