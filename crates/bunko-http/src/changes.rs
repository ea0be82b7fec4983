//! `GET/POST /{db}/_changes` with `feed=normal|longpoll|continuous|eventsource`.
//!
//! Every feed is one loop on a blocking thread: read the changes after `since` from a
//! snapshot, stream them, then (for the waiting feeds) sleep on the database's change
//! notification until a write, a heartbeat or the timeout, and read again from the last seq.
//! Memory does not grow with the feed's length.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Path, RawQuery, State as AxState};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::get;
use axum::{Extension, Router};
use bunko_engine::Database;
use bunko_engine::changes::{ChangeRow, ChangesFilter, ChangesQuery};
use serde_json::{Value, json};

use crate::all_docs::post_params;
use crate::attachment::AttOpts;
use crate::body::RawBody;
use crate::db::{Access, open};
use crate::encoding::Unbuffered;
use crate::error::{ApiError, ApiResult};
use crate::params::Params;
use crate::render::{self, DocOpts};
use crate::stream::{self, Gone, Sink};
use crate::{State, UserCtx};

pub fn routes() -> Router<State> {
    Router::new().route("/{db}/_changes", get(get_changes).post(post_changes))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Feed {
    Normal,
    Longpoll,
    Continuous,
    EventSource,
}

/// A parsed `_changes` request.
struct Request {
    /// Who reads: documents are shown as they may see them.
    reader: UserCtx,
    feed: Feed,
    query: ChangesQuery,
    opts: DocOpts,
    /// `attachments=true` or `att_encoding_info=true` with `include_docs`.
    attachments: AttOpts,
    heartbeat: Option<Duration>,
    timeout: Duration,
}

async fn get_changes(
    st: AxState<State>,
    ctx: Extension<UserCtx>,
    Path(db): Path<String>,
    q: RawQuery,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let db = open(&st, &ctx, &db, Access::List)?;
    start(db, Params::parse(q.0.as_deref()), &ctx, "GET", &headers)
}

async fn post_changes(
    st: AxState<State>,
    ctx: Extension<UserCtx>,
    Path(db): Path<String>,
    q: RawQuery,
    headers: HeaderMap,
    body: RawBody,
) -> ApiResult<Response> {
    let db = open(&st, &ctx, &db, Access::List)?;
    start(db, post_params(q.0.as_deref(), &body)?, &ctx, "POST", &headers)
}

fn start(
    db: Arc<Database>,
    p: Params,
    ctx: &UserCtx,
    method: &str,
    headers: &HeaderMap,
) -> ApiResult<Response> {
    let filter = filter(&db, &p, ctx, method)?;
    let mut request = parse(&db, &p, ctx)?;
    // A browser's EventSource reconnects with the last id it saw: it overrides `since`
    // (chttpd_db's `parse_changes_query`).
    let last_event_id = headers.get("last-event-id").and_then(|v| v.to_str().ok());
    if let (Feed::EventSource, Some(seq)) = (request.feed, last_event_id) {
        request.query.since = crate::seq::parse(seq)?;
    }
    request.query.filter = filter;
    let content_type = match request.feed {
        Feed::EventSource => "text/event-stream",
        _ => "application/json",
    };
    let waits = request.feed != Feed::Normal;
    let mut response =
        stream::response(StatusCode::OK, content_type, move |sink| run(&db, request, sink));
    if waits {
        response.extensions_mut().insert(Unbuffered);
    }
    Ok(response)
}

fn parse(db: &Database, p: &Params, reader: &UserCtx) -> ApiResult<Request> {
    let feed = match p.str("feed").unwrap_or("normal") {
        "normal" => Feed::Normal,
        "longpoll" => Feed::Longpoll,
        "continuous" | "live" => Feed::Continuous,
        "eventsource" => Feed::EventSource,
        _ => {
            return Err(ApiError::bad_request(
                "Supported `feed` types: normal, continuous, live, longpoll, eventsource",
            ));
        }
    };
    let since = match p.str("since") {
        None => 0,
        Some("now") => db.update_seq(),
        Some(text) => crate::seq::parse(text)?,
    };
    let heartbeat = match p.str("heartbeat") {
        None | Some("false") => None,
        Some("true") => Some(Duration::from_millis(60_000)),
        Some(text) => Some(Duration::from_millis(parse_heartbeat(text)?.max(10))),
    };
    let default_timeout = if heartbeat.is_some() { u64::MAX / 4 } else { 60_000 };
    let query = ChangesQuery {
        since,
        limit: p.u64("limit")?,
        descending: p.flag("descending")?,
        include_docs: p.flag("include_docs")?,
        all_leaves: match p.str("style") {
            None | Some("main_only") => false,
            Some("all_docs") => true,
            Some(_) => {
                return Err(ApiError::bad_request("Supported `style` values: main_only, all_docs"));
            }
        },
        filter: ChangesFilter::All,
    };
    let attachments = AttOpts::included(query.include_docs, p)?;
    Ok(Request {
        reader: reader.clone(),
        feed,
        query,
        opts: DocOpts { conflicts: p.flag("conflicts")?, ..Default::default() },
        attachments,
        heartbeat,
        timeout: Duration::from_millis(p.u64("timeout")?.unwrap_or(default_timeout)),
    })
}

fn parse_heartbeat(text: &str) -> ApiResult<u64> {
    match text.parse::<i64>() {
        Ok(ms) if ms >= 0 => Ok(ms as u64),
        Ok(_) => Err(ApiError::bad_request(
            "The heartbeat value should be a positive integer (in milliseconds).",
        )),
        Err(_) => Err(ApiError::bad_request(
            "Invalid heartbeat value. Expecting a positive integer value (in milliseconds).",
        )),
    }
}

/// The `filter` parameter (CouchDB's `couch_changes:configure_filter`): a built-in, or a
/// design document's `filters` function called with a `req` object as CouchDB's
/// `json_req_obj` builds it (`query`, `method`, `path`, `userCtx`…).
fn filter(db: &Database, p: &Params, ctx: &UserCtx, method: &str) -> ApiResult<ChangesFilter> {
    let name = p.str("filter").unwrap_or_default();
    let two_parts = |text: &str, what: &str| -> ApiResult<(String, String)> {
        let parts: Vec<&str> = text.split('/').filter(|s| !s.is_empty()).collect();
        match parts[..] {
            [d, n] => Ok((d.to_string(), n.to_string())),
            _ => Err(ApiError::bad_request(format!(
                "`{what}` must be of the form `designname/{what}name`"
            ))),
        }
    };
    Ok(match name {
        "" => ChangesFilter::All,
        "_doc_ids" => ChangesFilter::DocIds(doc_ids(p)?),
        "_design" => ChangesFilter::Design,
        "_selector" => ChangesFilter::Selector(Box::new(selector(p)?)),
        "_view" => {
            let view = p.str("view").unwrap_or_default();
            if view.is_empty() {
                return Err(ApiError::bad_request("`view` filter parameter is not provided."));
            }
            let (ddoc, view) = two_parts(view, "view")?;
            db.view_filter(&ddoc, &view)?
        }
        other if other.starts_with('_') => {
            return Err(ApiError::bad_request("unknown builtin filter name"));
        }
        other => {
            let (ddoc, name) = two_parts(other, "filter")?;
            let req = json!({
                "method": method,
                "query": p.to_object(),
                "path": [db.name(), "_changes"],
                "headers": {},
                "body": "undefined",
                "form": {},
                "cookie": {},
                "info": null,
                "id": null,
                "userCtx": {"db": db.name(), "name": ctx.name, "roles": ctx.roles},
            });
            db.function_filter(&ddoc, &name, req)?
        }
    })
}

/// The `selector` of `filter=_selector` (CouchDB's `400` when it is missing).
fn selector(p: &Params) -> ApiResult<bunko_query::Selector> {
    let bad = || ApiError::bad_request("Selector must be specified in POST payload");
    let value = p.json("selector").map_err(|_| bad())?.ok_or_else(bad)?;
    bunko_query::Selector::parse(&value).map_err(crate::error::query_error)
}

fn doc_ids(p: &Params) -> ApiResult<Vec<String>> {
    let bad = || ApiError::bad_request("`doc_ids` filter parameter is not a list of doc ids.");
    match p.json("doc_ids").map_err(|_| bad())? {
        Some(Value::Array(ids)) => {
            ids.iter().map(|id| id.as_str().map(String::from).ok_or_else(bad)).collect()
        }
        _ => Err(bad()),
    }
}

fn run(db: &Database, mut req: Request, sink: &mut Sink) -> Result<(), Gone> {
    let deadline = Instant::now() + req.timeout;
    let mut notified = db.subscribe();
    if matches!(req.feed, Feed::Normal | Feed::Longpoll) {
        sink.write(b"{\"results\":[\n")?;
    }
    let mut first = true;
    loop {
        notified.mark_unchanged();
        let (count, last_seq) = emit(db, &req, sink, &mut first)?;
        req.query.since = last_seq;
        let done = match req.feed {
            Feed::Normal => true,
            Feed::Longpoll => count > 0,
            _ => req.query.limit.is_some_and(|l| count >= l),
        };
        if let Some(limit) = req.query.limit.as_mut() {
            *limit = limit.saturating_sub(count);
        }
        if done || Instant::now() >= deadline {
            return finish(db, &req, sink, last_seq);
        }
        sink.flush()?;
        wait(&mut notified, &req, sink, deadline)?;
    }
}

/// Streams the changes after `req.query.since`; returns how many and the last seq.
fn emit(
    db: &Database,
    req: &Request,
    sink: &mut Sink,
    first: &mut bool,
) -> Result<(u64, u64), Gone> {
    let mut changes = db.changes(&req.reader, req.query.clone()).map_err(log)?;
    let mut count = 0;
    for row in changes.by_ref() {
        let mut row = row.map_err(log)?;
        if let Some(doc) = row.doc.as_mut() {
            crate::attachment::show(db, doc, req.attachments).map_err(|_| Gone)?;
        }
        let line = row_json(&row, &req.opts);
        match req.feed {
            Feed::Normal | Feed::Longpoll => {
                if !*first {
                    sink.write(b",\n")?;
                }
                sink.write(&line)?;
            }
            Feed::Continuous => {
                sink.write(&line)?;
                sink.write(b"\n")?;
            }
            Feed::EventSource => {
                sink.write(b"data: ")?;
                sink.write(&line)?;
                sink.write(format!("\nid: {}\n\n", json!(crate::seq::render(row.seq))).as_bytes())?;
            }
        }
        *first = false;
        count += 1;
    }
    Ok((count, changes.last_seq()))
}

/// Waits for a write, sending heartbeats, until the deadline.
fn wait(
    notified: &mut tokio::sync::watch::Receiver<u64>,
    req: &Request,
    sink: &mut Sink,
    deadline: Instant,
) -> Result<(), Gone> {
    wait_for(notified, req.heartbeat, req.feed == Feed::EventSource, sink, deadline)
}

/// Waits for `notified` to change, sending a heartbeat (a newline, or an event-stream
/// `heartbeat` event) every `heartbeat`, until `deadline`. Shared with `_db_updates`.
pub(crate) fn wait_for(
    notified: &mut tokio::sync::watch::Receiver<u64>,
    heartbeat: Option<Duration>,
    event_source: bool,
    sink: &mut Sink,
    deadline: Instant,
) -> Result<(), Gone> {
    let handle = tokio::runtime::Handle::current();
    loop {
        let until_deadline = deadline.saturating_duration_since(Instant::now());
        let step = heartbeat.map_or(until_deadline, |h| h.min(until_deadline));
        let woke = handle.block_on(async { tokio::time::timeout(step, notified.changed()).await });
        match woke {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(_)) => return Err(Gone),
            Err(_) if Instant::now() >= deadline => return Ok(()),
            Err(_) => {
                if !sink.is_open() {
                    return Err(Gone);
                }
                let beat: &[u8] =
                    if event_source { b"event: heartbeat\ndata: \n\n" } else { b"\n" };
                sink.write(beat)?;
                sink.flush()?;
            }
        }
    }
}

fn finish(db: &Database, req: &Request, sink: &mut Sink, last_seq: u64) -> Result<(), Gone> {
    let pending =
        if req.query.descending { 0 } else { db.pending_changes(last_seq).map_err(log)? };
    let tail = json!({"last_seq": crate::seq::render(last_seq), "pending": pending});
    match req.feed {
        Feed::Normal | Feed::Longpoll => {
            sink.write(b"\n],\n")?;
            let text = tail.to_string();
            sink.write(text.strip_prefix('{').unwrap_or(&text).as_bytes())?;
            sink.write(b"\n")
        }
        Feed::Continuous => sink.write(format!("{tail}\n").as_bytes()),
        Feed::EventSource => Ok(()),
    }
}

fn row_json(row: &ChangeRow, opts: &DocOpts) -> Vec<u8> {
    let changes: Vec<Value> = row.changes.iter().map(|r| json!({"rev": r.to_string()})).collect();
    let mut value = json!({"seq": crate::seq::render(row.seq), "id": row.id, "changes": changes});
    if row.deleted {
        value["deleted"] = json!(true);
    }
    let mut out = Vec::with_capacity(128);
    render::push_json(&mut out, &value);
    if let Some(doc) = &row.doc {
        out.pop();
        out.extend_from_slice(b",\"doc\":");
        out.extend_from_slice(&render::doc_json(doc, opts));
        out.push(b'}');
    }
    out
}

fn log(err: bunko_engine::Error) -> Gone {
    tracing::error!(%err, "_changes stream failed");
    Gone
}
