//! Document routes: `POST /{db}`, `GET/HEAD/PUT/DELETE /{db}/{id}`, the same under
//! `/{db}/_design/{name}`, and `_local/{id}` (which refuses attachments, as CouchDB's
//! does). Attachment paths are [`crate::attachment`]'s; `COPY` is [`crate::copy`]'s.

use std::sync::Arc;

use axum::extract::{Path, RawQuery, State as AxState};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Router};
use bunko_doc::RevId;
use bunko_doc::body::{self, ParsedDoc};
use bunko_engine::attachments::of_body;
use bunko_engine::read::OpenRev;
use bunko_engine::security::Security;
use bunko_engine::users::USER_PREFIX;
use bunko_engine::{Database, WriteOptions};
use serde_json::json;

use crate::attachment::AttOpts;
use crate::body::RawBody;
use crate::copy::copy;
use crate::db::{Access, open};
use crate::error::{ApiError, ApiResult};
use crate::headers::{created_at, doc_path};
use crate::multipart::{DocBody, read_related};
use crate::params::Params;
use crate::render::{self, DocOpts};
use crate::{State, UserCtx, blocking};

pub fn routes() -> Router<State> {
    Router::new()
        .route(
            "/{db}/{id}",
            get(get_doc).head(head_doc).put(put_doc).delete(delete_doc).fallback(copy),
        )
        .route(
            "/{db}/_design/{id}",
            get(get_design).head(head_design).put(put_design).delete(delete_design).fallback(copy),
        )
        .route("/{db}/_local/{id}", get(get_local).put(put_local).delete(delete_local))
        .route("/{db}/_local", axum::routing::any(bad_local_id))
        .route("/{db}/_local/", axum::routing::any(bad_local_id))
        .route("/{db}/_local/{id}/{*attachment}", axum::routing::any(local_attachment))
}

type DocPath = Path<(String, String)>;

/// Finds the database and checks read access for one document: in the authentication
/// database a reader who is not one of its admins may read only their own document, and
/// none of its design documents. (Writes are checked by the engine's write gate.)
pub(crate) fn open_for_read(
    state: &State,
    ctx: &UserCtx,
    db: &str,
    id: &str,
) -> ApiResult<Arc<Database>> {
    if db == state.engine.users_db_name() && !ctx.is_server_admin() {
        let handle = state.engine.db(db)?;
        if Security::parse(&handle.security())?.is_admin(ctx) {
            return Ok(handle);
        }
        if id.starts_with("_design/") {
            return Err(ApiError::forbidden(crate::db::USERS_DDOC_REASON));
        }
        let own = ctx.name.as_ref().is_some_and(|n| id == format!("{USER_PREFIX}{n}"));
        if !own {
            return Err(ApiError::not_found("missing"));
        }
        return Ok(handle);
    }
    open(state, ctx, db, Access::Member)
}

async fn get_doc(
    st: AxState<State>,
    ctx: Extension<UserCtx>,
    Path((db, id)): DocPath,
    q: RawQuery,
    h: HeaderMap,
) -> ApiResult<Response> {
    if let Some(name) = id.strip_prefix("_design/") {
        // CouchDB redirects `_design%2Fname` to the canonical `_design/name`.
        let location = format!("/{}/_design/{}", encode_segment(&db), encode_segment(name));
        let query = q.0.map(|q| format!("?{q}")).unwrap_or_default();
        let response = StatusCode::MOVED_PERMANENTLY.into_response();
        return Ok(with_location(response, &format!("{location}{query}")));
    }
    read_doc(st.0, ctx.0, db, id, q.0, h, false).await
}

async fn head_doc(
    st: AxState<State>,
    ctx: Extension<UserCtx>,
    Path((db, id)): DocPath,
    q: RawQuery,
    h: HeaderMap,
) -> ApiResult<Response> {
    read_doc(st.0, ctx.0, db, id, q.0, h, true).await
}

async fn get_design(
    st: AxState<State>,
    ctx: Extension<UserCtx>,
    Path((db, id)): DocPath,
    q: RawQuery,
    h: HeaderMap,
) -> ApiResult<Response> {
    read_doc(st.0, ctx.0, db, format!("_design/{id}"), q.0, h, false).await
}

async fn head_design(
    st: AxState<State>,
    ctx: Extension<UserCtx>,
    Path((db, id)): DocPath,
    q: RawQuery,
    h: HeaderMap,
) -> ApiResult<Response> {
    read_doc(st.0, ctx.0, db, format!("_design/{id}"), q.0, h, true).await
}

async fn put_doc(
    st: AxState<State>,
    ctx: Extension<UserCtx>,
    Path((db, id)): DocPath,
    q: RawQuery,
    h: HeaderMap,
    body: DocBody,
) -> ApiResult<Response> {
    if let Some(name) = id.strip_prefix("_local/") {
        if name.is_empty() {
            return Err(bad_local_id().await);
        }
        let body = body.into_raw().await?;
        return put_local(st, ctx, Path((db, name.to_string())), q, h, body).await;
    }
    write_doc(st.0, ctx.0, db, id, q.0, h, body).await
}

async fn put_design(
    st: AxState<State>,
    ctx: Extension<UserCtx>,
    Path((db, id)): DocPath,
    q: RawQuery,
    h: HeaderMap,
    body: DocBody,
) -> ApiResult<Response> {
    write_doc(st.0, ctx.0, db, format!("_design/{id}"), q.0, h, body).await
}

async fn delete_doc(
    st: AxState<State>,
    ctx: Extension<UserCtx>,
    Path((db, id)): DocPath,
    q: RawQuery,
    h: HeaderMap,
) -> ApiResult<Response> {
    remove_doc(st.0, ctx.0, db, id, q.0, h).await
}

async fn delete_design(
    st: AxState<State>,
    ctx: Extension<UserCtx>,
    Path((db, id)): DocPath,
    q: RawQuery,
    h: HeaderMap,
) -> ApiResult<Response> {
    remove_doc(st.0, ctx.0, db, format!("_design/{id}"), q.0, h).await
}

async fn bad_local_id() -> ApiError {
    ApiError::bad_request("Invalid _local document id.")
}

async fn local_attachment() -> ApiError {
    ApiError::bad_request("_local documents do not accept attachments.")
}

/// Percent-encodes one path segment (for `Location` headers).
pub fn encode_segment(segment: &str) -> String {
    percent_encoding::utf8_percent_encode(segment, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// Adds a `Location` header.
pub fn with_location(mut response: Response, location: &str) -> Response {
    if let Ok(value) = HeaderValue::from_str(location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    response
}

/// `POST /{db}`: a new document; the id is generated unless the body has `_id`.
pub async fn post_doc(
    AxState(state): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    Path(db_name): Path<String>,
    RawQuery(query): RawQuery,
    body: RawBody,
) -> ApiResult<Response> {
    let mut doc =
        body::parse(&body.0, &state.engine.config().limits).map_err(|e| with_id(e, ""))?;
    let db = state.engine.db(&db_name)?;
    if batched(&Params::parse(query.as_deref()))? {
        let id = doc.id.get_or_insert_with(|| state.engine.uuids().next()).clone();
        return Ok(in_batch(id, move || {
            let mut results = db.update_docs(&ctx, vec![doc], WriteOptions::default())?;
            results.pop().map_or(Ok(()), |r| r.result.map(drop))
        }));
    }
    let (id, rev) = write_one(db, ctx, doc, WriteOptions::default(), body.0.len()).await?;
    let location = doc_path(&db_name, &id);
    Ok(created_at(written(StatusCode::CREATED, &id, &rev), location))
}

/// Names the document in a `document_too_large` error (CouchDB's reason is the id).
fn with_id(err: bunko_doc::Error, id: &str) -> bunko_doc::Error {
    match err {
        bunko_doc::Error::TooLarge(found) if found.is_empty() => {
            bunko_doc::Error::TooLarge(id.to_string())
        }
        other => other,
    }
}

async fn read_doc(
    state: State,
    ctx: UserCtx,
    db_name: String,
    id: String,
    query: Option<String>,
    headers: HeaderMap,
    head: bool,
) -> ApiResult<Response> {
    let db = open_for_read(&state, &ctx, &db_name, &id)?;
    let p = Params::parse(query.as_deref());
    let opts = DocOpts::from_params(&p)?;
    let attachments = p.flag("attachments")?;
    let encoding = p.flag("att_encoding_info")?;
    let atts_since = match p.str("atts_since") {
        Some(text) => Some(parse_open_revs(text)?.unwrap_or_default()),
        None => None,
    };
    if let Some(open_revs) = p.str("open_revs") {
        let revs = parse_open_revs(open_revs)?;
        let latest = p.flag("latest")?;
        if crate::multipart::accepts(&headers, "mixed") {
            let found = {
                let (db, id, ctx) = (db.clone(), id.clone(), ctx.clone());
                blocking(move || Ok(db.open_revs(&ctx, &id, revs, latest)?)).await?
            };
            // CouchDB sends every attachment but those `atts_since` already has.
            let since = match (&atts_since, found.iter().find_map(open_doc)) {
                (Some(since), Some(doc)) => crate::attachment::since_pos(doc, since),
                _ => 0,
            };
            return Ok(crate::multipart::open_revs_mixed(db, found, opts, since));
        }
        let found = blocking(move || {
            let mut found = db.open_revs(&ctx, &id, revs, latest)?;
            let shown = AttOpts { data: attachments, since: 0, encoding };
            for entry in &mut found {
                if let OpenRev::Ok(doc) = entry {
                    crate::attachment::show(&db, doc, shown)?;
                }
            }
            Ok(found)
        })
        .await?;
        return Ok(open_revs_json(&found, &opts));
    }
    let mut rev = p.str("rev").map(str::parse::<RevId>).transpose()?;
    if let (Some(old), true) = (&rev, p.flag("latest")?) {
        let (db, id, old, ctx) = (db.clone(), id.clone(), old.clone(), ctx.clone());
        let leaves = blocking(move || Ok(db.open_revs(&ctx, &id, Some(vec![old]), true)?)).await?;
        rev = leaves.into_iter().find_map(|l| match l {
            OpenRev::Ok(doc) => Some(doc.stored_rev.unwrap_or(doc.rev)),
            OpenRev::Missing(_) => None,
        });
    }
    let with_revs_info = opts.revs_info;
    let shown = AttOpts { data: attachments || atts_since.is_some(), since: 0, encoding };
    let plain = !with_revs_info && !shown.data && !shown.encoding;
    if shown.data && !head && crate::multipart::accepts(&headers, "related") {
        let (db2, id, rev, atts_since) = (db.clone(), id.clone(), rev.clone(), atts_since.clone());
        let reader = ctx.clone();
        let found = blocking(move || {
            let mut doc = db2.get(&reader, &id, rev.as_ref())?;
            if with_revs_info {
                db2.fill_revs_info(&mut doc)?;
            }
            let since = atts_since.map_or(0, |s| crate::attachment::since_pos(&doc, &s));
            Ok((doc, since))
        })
        .await?;
        let (doc, since) = found;
        if !of_body(&doc.body).is_empty() {
            let etag = format!("\"{}\"", doc.rev);
            return Ok(with_etag(crate::multipart::doc_related(db, doc, &opts, since)?, &etag));
        }
    }
    let doc = if plain {
        // Two point lookups, served from fjall's caches in the common case: cheaper here
        // than the hop to a blocking thread and back (issue 20, docs/performance.md).
        db.get(&ctx, &id, rev.as_ref())?
    } else {
        read_full(ctx, db, id, rev, with_revs_info, atts_since, shown).await?
    };
    let etag = format!("\"{}\"", doc.rev);
    if if_none_match(&headers, &etag) {
        return Ok(with_etag(StatusCode::NOT_MODIFIED.into_response(), &etag));
    }
    let response = if head {
        StatusCode::OK.into_response()
    } else {
        render::json_bytes(StatusCode::OK, render::doc_json(&doc, &opts))
    };
    Ok(with_etag(response, &etag))
}

/// A document with its `revs_info` or attachments, read on a blocking thread (attachment
/// bodies can be large).
async fn read_full(
    reader: UserCtx,
    db: Arc<Database>,
    id: String,
    rev: Option<RevId>,
    with_revs_info: bool,
    atts_since: Option<Vec<RevId>>,
    mut shown: AttOpts,
) -> ApiResult<bunko_engine::read::DocOut> {
    blocking(move || {
        let mut doc = db.get(&reader, &id, rev.as_ref())?;
        if with_revs_info {
            db.fill_revs_info(&mut doc)?;
        }
        if let Some(since) = &atts_since {
            shown.since = crate::attachment::since_pos(&doc, since);
        }
        crate::attachment::show(&db, &mut doc, shown)?;
        Ok(doc)
    })
    .await
}

fn open_doc(entry: &OpenRev) -> Option<&bunko_engine::read::DocOut> {
    match entry {
        OpenRev::Ok(doc) => Some(doc),
        OpenRev::Missing(_) => None,
    }
}

fn parse_open_revs(text: &str) -> ApiResult<Option<Vec<RevId>>> {
    if text == "all" {
        return Ok(None);
    }
    let list: Vec<String> = serde_json::from_str(text)
        .map_err(|_| ApiError::bad_request("`open_revs` must be `all` or a JSON array of revs"))?;
    Ok(Some(list.iter().map(|r| r.parse()).collect::<Result<_, _>>()?))
}

fn open_revs_json(found: &[OpenRev], opts: &DocOpts) -> Response {
    let mut out = b"[".to_vec();
    for (i, entry) in found.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        match entry {
            OpenRev::Ok(doc) => {
                out.extend_from_slice(b"{\"ok\":");
                out.extend_from_slice(&render::doc_json(doc, opts));
                out.push(b'}');
            }
            OpenRev::Missing(rev) => {
                render::push_json(&mut out, &json!({"missing": rev.to_string()}))
            }
        }
    }
    out.push(b']');
    render::json_bytes(StatusCode::OK, out)
}

async fn write_doc(
    state: State,
    ctx: UserCtx,
    db_name: String,
    id: String,
    query: Option<String>,
    headers: HeaderMap,
    body: DocBody,
) -> ApiResult<Response> {
    let db = state.engine.db(&db_name)?;
    let p = Params::parse(query.as_deref());
    let limits = state.engine.config().limits;
    let parse = |json: &[u8]| Ok(body::parse(json, &limits).map_err(|e| with_id(e, &id))?);
    // Streamed attachment bodies, kept until the write returns.
    let (mut doc, uploads, bytes) = match body {
        DocBody::Json(raw) => (parse(&raw.0)?, Vec::new(), raw.0.len()),
        DocBody::Related { boundary, body, limit } => {
            let (doc, uploads) = read_related(&db, boundary, body, limit, parse).await?;
            (doc, uploads, usize::MAX)
        }
    };
    doc.id = Some(id.clone());
    doc.rev = merge_rev(doc.rev.take(), &p, &headers)?;
    let new_edits = p.bool("new_edits")?.unwrap_or(true);
    let opts = WriteOptions { new_edits, ..Default::default() };
    // CouchDB's `batch=ok` answer has no `Location`.
    let location = doc_path(&db_name, &id);
    if batched(&p)? {
        return Ok(in_batch(id, move || {
            let result = db.put(&ctx, doc, opts).map(drop);
            drop(uploads);
            result
        }));
    }
    let (_, rev) = write_one(db, ctx, doc, opts, bytes).await?;
    drop(uploads);
    Ok(created_at(written(StatusCode::CREATED, &id, &rev), location))
}

/// Writes one document of `bytes` as sent: the edit is staged and applied on this async
/// worker when the engine calls it light (`Database::is_light_write`), else on a blocking
/// thread (JavaScript, password hashing, large bodies); then its sync is awaited on the
/// runtime, so a request waiting for the disk holds no thread. Returns the document's id
/// and new revision.
pub(crate) async fn write_one(
    db: Arc<Database>,
    ctx: UserCtx,
    doc: ParsedDoc,
    opts: WriteOptions,
    bytes: usize,
) -> ApiResult<(String, RevId)> {
    let written = if db.is_light_write(&doc, bytes) {
        db.write_docs(&ctx, vec![doc], opts)?
    } else {
        blocking(move || Ok(db.write_docs(&ctx, vec![doc], opts)?)).await?
    };
    let mut results = written.durable().await?;
    let result = results.pop().ok_or_else(|| ApiError::bad_request("no document"))?;
    Ok((result.id, result.result?))
}

/// Whether a write asks for `batch=ok` (any other value is ignored, as in CouchDB).
fn batched(p: &Params) -> ApiResult<bool> {
    Ok(p.str("batch") == Some("ok"))
}

/// A `batch=ok` write: answered `202 {"ok": true, "id"}` at once, written in the background
/// (through the same engine call, so the same write gate); like CouchDB, a write that then
/// fails (a conflict) is only logged.
fn in_batch(
    id: String,
    write: impl FnOnce() -> bunko_engine::Result<()> + Send + 'static,
) -> Response {
    let logged = id.clone();
    tokio::task::spawn_blocking(move || {
        if let Err(err) = write() {
            tracing::warn!(id = %logged, %err, "batch=ok write failed");
        }
    });
    render::json(StatusCode::ACCEPTED, json!({"ok": true, "id": id}))
}

async fn remove_doc(
    state: State,
    ctx: UserCtx,
    db_name: String,
    id: String,
    query: Option<String>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let db = state.engine.db(&db_name)?;
    let p = Params::parse(query.as_deref());
    let rev = merge_rev(None, &p, &headers)?;
    let doc_id = id.clone();
    let rev = blocking(move || Ok(db.delete(&ctx, &doc_id, rev)?)).await?;
    Ok(written(StatusCode::OK, &id, &rev))
}

/// The revision an edit names: `_rev` in the body, `?rev=`, or `If-Match`, which must agree.
pub(crate) fn merge_rev(
    body_rev: Option<RevId>,
    p: &Params,
    headers: &HeaderMap,
) -> ApiResult<Option<RevId>> {
    let query_rev = p.str("rev").map(str::parse::<RevId>).transpose()?;
    let header_rev = headers
        .get(header::IF_MATCH)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim_matches('"').parse::<RevId>())
        .transpose()?;
    let mut chosen = body_rev;
    let sources = [
        (query_rev, "Document rev from request body and query string have different values"),
        (header_rev, "Document rev and etag have different values"),
    ];
    for (other, reason) in sources {
        let Some(other) = other else { continue };
        match &chosen {
            Some(rev) if *rev != other => return Err(ApiError::bad_request(reason)),
            _ => chosen = Some(other),
        }
    }
    Ok(chosen)
}

pub(crate) fn written(status: StatusCode, id: &str, rev: &RevId) -> Response {
    let mut out = Vec::with_capacity(96);
    render::push_written(&mut out, id, rev);
    let response = render::json_bytes(status, out);
    with_etag(response, &format!("\"{rev}\""))
}

fn with_etag(mut response: Response, etag: &str) -> Response {
    if let Ok(value) = HeaderValue::from_str(etag) {
        response.headers_mut().insert(header::ETAG, value);
    }
    response
}

fn if_none_match(headers: &HeaderMap, etag: &str) -> bool {
    headers.get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()).is_some_and(|v| {
        // A weak `W/"…"` matches too, as in CouchDB's `etag_match`.
        let tags = v.split(',').map(|t| t.trim()).map(|t| t.strip_prefix("W/").unwrap_or(t));
        tags.into_iter().any(|t| t == etag || t == "*")
    })
}

async fn get_local(
    AxState(state): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    Path((db_name, name)): DocPath,
) -> ApiResult<Response> {
    let db = open(&state, &ctx, &db_name, Access::Member)?;
    let id = format!("_local/{name}");
    let (rev, body) = blocking({
        let id = id.clone();
        move || Ok(db.get_local(&id)?)
    })
    .await?;
    Ok(render::json_bytes(StatusCode::OK, local_json(&id, &rev, &body)))
}

/// A local document as JSON: `_id` and `_rev` spliced before the stored body's members.
pub fn local_json(id: &str, rev: &str, body: &str) -> Vec<u8> {
    let mut out = format!("{{\"_id\":{},\"_rev\":\"{rev}\"", json!(id)).into_bytes();
    let inner = body.strip_prefix('{').and_then(|b| b.strip_suffix('}')).unwrap_or_default();
    if !inner.is_empty() {
        out.push(b',');
        out.extend_from_slice(inner.as_bytes());
    }
    out.push(b'}');
    out
}

async fn put_local(
    AxState(state): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    Path((db_name, name)): DocPath,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: RawBody,
) -> ApiResult<Response> {
    let db = state.engine.db(&db_name)?;
    let id = format!("_local/{name}");
    let mut doc = body::parse(&body.0, &state.engine.config().limits)?;
    doc.rev = merge_rev(doc.rev.take(), &Params::parse(query.as_deref()), &headers)?;
    let rev = blocking({
        let id = id.clone();
        move || Ok(db.put_local(&ctx, &id, &doc)?)
    })
    .await?;
    let location = doc_path(&db_name, &id);
    let answer = render::json(StatusCode::CREATED, json!({"ok": true, "id": id, "rev": rev}));
    Ok(created_at(answer, location))
}

async fn delete_local(
    AxState(state): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    Path((db_name, name)): DocPath,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let db = state.engine.db(&db_name)?;
    let id = format!("_local/{name}");
    let rev = merge_rev(None, &Params::parse(query.as_deref()), &headers)?;
    let doc = ParsedDoc { rev, deleted: true, ..Default::default() };
    let rev = blocking({
        let id = id.clone();
        move || Ok(db.put_local(&ctx, &id, &doc)?)
    })
    .await?;
    Ok(render::json(StatusCode::OK, json!({"ok": true, "id": id, "rev": rev})))
}
