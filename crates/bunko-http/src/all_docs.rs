//! `GET/POST /{db}/_all_docs` and `/{db}/_design_docs`, streamed. Range queries run as one
//! range scan ([`bunko_engine::all_docs`]); `keys` queries look each id up.

use std::sync::Arc;

use axum::extract::{Path, RawQuery, State as AxState};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use axum::{Extension, Router};
use bunko_engine::Database;
use bunko_engine::advisor::Client;
use bunko_engine::all_docs::{AllDocsQuery, Row};
use serde_json::{Value, json};

use crate::attachment::AttOpts;
use crate::body::RawBody;
use crate::db::{Access, open};
use crate::error::{ApiError, ApiResult};
use crate::params::Params;
use crate::render::{self, DocOpts};
use crate::stream::{self, Gone, Sink};
use crate::{State, UserCtx, blocking};

pub fn routes() -> Router<State> {
    Router::new()
        .route("/{db}/_all_docs", get(get_all).post(post_all))
        .route("/{db}/_design_docs", get(get_design).post(post_design))
}

async fn get_all(
    st: AxState<State>,
    ctx: Extension<UserCtx>,
    client: Extension<Client>,
    Path(db): Path<String>,
    q: RawQuery,
) -> ApiResult<Response> {
    let db = open(&st, &ctx, &db, Access::List)?;
    run(ctx.0, db, Params::parse(q.0.as_deref()), None, None, Some(client.0)).await
}

async fn post_all(
    st: AxState<State>,
    ctx: Extension<UserCtx>,
    client: Extension<Client>,
    Path(db): Path<String>,
    q: RawQuery,
    body: RawBody,
) -> ApiResult<Response> {
    let db = open(&st, &ctx, &db, Access::List)?;
    run(ctx.0, db, post_params_required(q.0.as_deref(), &body)?, None, None, Some(client.0)).await
}

async fn get_design(
    st: AxState<State>,
    ctx: Extension<UserCtx>,
    Path(db): Path<String>,
    q: RawQuery,
) -> ApiResult<Response> {
    let db = open(&st, &ctx, &db, Access::Member)?;
    run(ctx.0, db, Params::parse(q.0.as_deref()), Some("_design/".into()), None, None).await
}

async fn post_design(
    st: AxState<State>,
    ctx: Extension<UserCtx>,
    Path(db): Path<String>,
    q: RawQuery,
    body: RawBody,
) -> ApiResult<Response> {
    let db = open(&st, &ctx, &db, Access::Member)?;
    let p = post_params_required(q.0.as_deref(), &body)?;
    run(ctx.0, db, p, Some("_design/".into()), None, None).await
}

/// The query string plus the members of a POST body.
pub fn post_params(query: Option<&str>, body: &RawBody) -> ApiResult<Params> {
    let mut p = Params::parse(query);
    p.merge_json(&body.object_or_empty()?);
    Ok(p)
}

/// The query string plus the members of a POST body that must be present.
pub fn post_params_required(query: Option<&str>, body: &RawBody) -> ApiResult<Params> {
    let mut p = Params::parse(query);
    p.merge_json(&body.request_object()?);
    Ok(p)
}

/// Runs an `_all_docs` query over ids starting with `prefix`; `partition` names the
/// partition whose counters give `total_rows`; `client` asks (for the advisor).
pub async fn run(
    reader: UserCtx,
    db: Arc<Database>,
    p: Params,
    prefix: Option<String>,
    partition: Option<String>,
    client: Option<Client>,
) -> ApiResult<Response> {
    let include_docs = p.flag("include_docs")?;
    // `attachments=true` inlines attachment data in the included documents.
    let attachments = AttOpts::included(include_docs, &p)?;
    let opts = DocOpts { conflicts: p.flag("conflicts")?, ..Default::default() };
    let update_seq = p.flag("update_seq")?;
    if let Some(keys) = p.json("keys")? {
        let Value::Array(keys) = keys else {
            return Err(ApiError::bad_request("`keys` body member must be an array."));
        };
        let mut keys = keys;
        if p.flag("descending")? {
            keys.reverse();
        }
        let skip = p.u64("skip")?.unwrap_or(0) as usize;
        let limit = p.u64("limit")?.map_or(usize::MAX, |l| l as usize);
        let keys = keys.into_iter().skip(skip).take(limit).collect();
        let docs = Included { include_docs, attachments };
        let scope = Scope { prefix, partition, client };
        return run_keys(reader, db, keys, docs, opts, scope).await;
    }
    let query = range_query(&p, prefix)?;
    let started = {
        let db = db.clone();
        blocking(move || Ok(db.all_docs(&reader, &query, partition.as_deref())?)).await?
    };
    let mut head = json!({"total_rows": started.total_rows, "offset": started.offset});
    if update_seq {
        head["update_seq"] = json!(crate::seq::render(started.update_seq));
    }
    let head = head.to_string();
    let mut rows = started.rows;
    Ok(stream::response(StatusCode::OK, "application/json", move |sink| {
        sink.write(head.strip_suffix('}').unwrap_or(&head).as_bytes())?;
        sink.write(b",\"rows\":[\r\n")?;
        let mut first = true;
        for row in rows.by_ref() {
            let row = match row.and_then(|row| with_data(&db, row, attachments)) {
                Ok(row) => row,
                Err(err) => {
                    tracing::error!(%err, "_all_docs stream failed");
                    return Err(Gone);
                }
            };
            write_row(sink, &row, include_docs, &opts, &mut first)?;
        }
        sink.write(b"\r\n]}\n")
    }))
}

pub(crate) fn range_query(p: &Params, prefix: Option<String>) -> ApiResult<AllDocsQuery> {
    let key = string_param(p, &["key"])?;
    let start = key
        .clone()
        .or(string_param(p, &["startkey", "start_key"])?)
        .or(string_param(p, &["startkey_docid", "start_key_doc_id"])?);
    let end = key
        .or(string_param(p, &["endkey", "end_key"])?)
        .or(string_param(p, &["endkey_docid", "end_key_doc_id"])?);
    Ok(AllDocsQuery {
        start,
        end,
        inclusive_end: p.bool("inclusive_end")?.unwrap_or(true),
        descending: p.flag("descending")?,
        skip: p.u64("skip")?.unwrap_or(0),
        limit: p.u64("limit")?,
        include_docs: p.flag("include_docs")?,
        prefix,
    })
}

/// A key parameter of `_all_docs`, which must be a string (document ids are strings).
fn string_param(p: &Params, names: &[&str]) -> ApiResult<Option<String>> {
    let is_docid = names.iter().any(|n| n.contains("docid") || n.contains("doc_id"));
    let value = if is_docid {
        names.iter().find_map(|n| p.str(n)).map(|s| match serde_json::from_str::<Value>(s) {
            Ok(Value::String(parsed)) => Value::String(parsed),
            _ => Value::String(s.to_string()),
        })
    } else {
        p.json_any(names)?
    };
    match value {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(ApiError::query_parse(format!("Invalid key for _all_docs: {other}"))),
    }
}

/// Whether rows carry their documents, and those their attachments' data.
#[derive(Clone, Copy)]
struct Included {
    include_docs: bool,
    attachments: AttOpts,
}

/// A row whose document, if any, shows its attachments as asked.
fn with_data(db: &Database, mut row: Row, attachments: AttOpts) -> bunko_engine::Result<Row> {
    crate::attachment::inline_included(db, row.doc.as_mut(), attachments)?;
    Ok(row)
}

/// What a `keys` query covers, and who asks.
struct Scope {
    prefix: Option<String>,
    partition: Option<String>,
    client: Option<Client>,
}

async fn run_keys(
    reader: UserCtx,
    db: Arc<Database>,
    keys: Vec<Value>,
    docs: Included,
    opts: DocOpts,
    scope: Scope,
) -> ApiResult<Response> {
    let Scope { prefix, partition, client } = scope;
    let ids: Vec<String> = keys.iter().map(|k| k.as_str().unwrap_or("\u{0}").to_string()).collect();
    let (total, found) = blocking(move || {
        let total = match &partition {
            Some(p) => db.partition_stats(p)?.doc_count,
            None => db.info().stats.doc_count,
        };
        let rows = db.all_docs_keys(&reader, &ids, docs.include_docs, client.as_ref())?;
        let rows = rows
            .into_iter()
            .map(|row| row.map(|row| with_data(&db, row, docs.attachments)).transpose());
        Ok((total, rows.collect::<bunko_engine::Result<Vec<_>>>()?))
    })
    .await?;
    let mut out = format!("{{\"total_rows\":{total},\"offset\":null,\"rows\":[\r\n").into_bytes();
    let mut sink_rows = Vec::new();
    for (key, row) in keys.iter().zip(found) {
        let in_scope =
            key.as_str().is_some_and(|k| prefix.as_ref().is_none_or(|p| k.starts_with(p.as_str())));
        match row {
            Some(row) if in_scope => sink_rows.push(row_json(&row, docs.include_docs, &opts)),
            _ => {
                let mut bytes = Vec::new();
                render::push_json(&mut bytes, &json!({"key": key, "error": "not_found"}));
                sink_rows.push(bytes);
            }
        }
    }
    out.extend_from_slice(&sink_rows.join(&b",\r\n"[..]));
    out.extend_from_slice(b"\r\n]}\n");
    Ok(render::json_bytes(StatusCode::OK, out))
}

fn write_row(
    sink: &mut Sink,
    row: &Row,
    include_docs: bool,
    opts: &DocOpts,
    first: &mut bool,
) -> Result<(), Gone> {
    if !*first {
        sink.write(b",\r\n")?;
    }
    *first = false;
    sink.write(&row_json(row, include_docs, opts))
}

/// One `_all_docs` row.
pub fn row_json(row: &Row, include_docs: bool, opts: &DocOpts) -> Vec<u8> {
    let mut value = json!({"rev": row.rev.to_string()});
    if row.deleted {
        value["deleted"] = json!(true);
    }
    let mut out = Vec::with_capacity(128);
    out.extend_from_slice(b"{\"id\":");
    render::push_json(&mut out, &json!(row.id));
    out.extend_from_slice(b",\"key\":");
    render::push_json(&mut out, &json!(row.id));
    out.extend_from_slice(b",\"value\":");
    render::push_json(&mut out, &value);
    if include_docs {
        out.extend_from_slice(b",\"doc\":");
        match &row.doc {
            Some(doc) => out.extend_from_slice(&render::doc_json(doc, opts)),
            None => out.extend_from_slice(b"null"),
        }
    }
    out.push(b'}');
    out
}
