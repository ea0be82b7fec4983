//! `GET /_db_updates` (server admins): the engine's feed of database events
//! ([`bunko_engine::db_updates`]) with `feed=normal|longpoll|continuous|eventsource`,
//! `since` (a seq or `now`), `limit`, `descending`, `timeout` and `heartbeat`, in the shapes
//! of CouchDB's `global_changes_httpd`: rows `{"db_name", "type", "seq"}`, then `last_seq`.

use std::time::{Duration, Instant};

use axum::extract::{RawQuery, State as AxState};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use axum::{Extension, Router};
use bunko_engine::db_updates::{DbUpdate, DbUpdates, global};
use serde_json::json;

use crate::auth::require_server_admin;
use crate::changes::wait_for;
use crate::encoding::Unbuffered;
use crate::error::{ApiError, ApiResult};
use crate::params::Params;
use crate::stream::{self, Gone, Sink};
use crate::{State, UserCtx};

pub fn routes() -> Router<State> {
    Router::new().route("/_db_updates", get(db_updates))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Feed {
    Normal,
    Longpoll,
    Continuous,
    EventSource,
}

struct Request {
    feed: Feed,
    since: u64,
    limit: Option<u64>,
    descending: bool,
    timeout: Duration,
    heartbeat: Option<Duration>,
}

async fn db_updates(
    AxState(_st): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    RawQuery(query): RawQuery,
) -> ApiResult<Response> {
    require_server_admin(&ctx)?;
    let p = Params::parse(query.as_deref());
    let feed = match p.str("feed").unwrap_or("normal") {
        "normal" => Feed::Normal,
        "longpoll" => Feed::Longpoll,
        "continuous" => Feed::Continuous,
        "eventsource" => Feed::EventSource,
        _ => {
            return Err(ApiError::bad_request(
                "Supported `feed` types: normal, continuous, longpoll, eventsource",
            ));
        }
    };
    let since = match p.str("since") {
        None => 0,
        Some("now") => global().last_seq(),
        Some(text) => crate::seq::parse(text)?,
    };
    let heartbeat = match p.str("heartbeat") {
        None | Some("false") => None,
        Some("true") => Some(Duration::from_millis(60_000)),
        Some(_) => Some(Duration::from_millis(p.u64("heartbeat")?.unwrap_or(60_000).max(10))),
    };
    let request = Request {
        feed,
        since,
        limit: p.u64("limit")?,
        descending: p.flag("descending")?,
        timeout: Duration::from_millis(p.u64("timeout")?.unwrap_or(60_000)),
        heartbeat,
    };
    let content_type =
        if feed == Feed::EventSource { "text/event-stream" } else { "application/json" };
    let mut response =
        stream::response(StatusCode::OK, content_type, move |sink| run(global(), request, sink));
    if feed != Feed::Normal {
        response.extensions_mut().insert(Unbuffered);
    }
    Ok(response)
}

fn row(u: &DbUpdate) -> String {
    json!({"db_name": u.db_name, "type": u.kind, "seq": crate::seq::render(u.seq)}).to_string()
}

fn run(feed: &DbUpdates, mut req: Request, sink: &mut Sink) -> Result<(), Gone> {
    let deadline = Instant::now() + req.timeout;
    let mut notified = feed.subscribe();
    let listed = matches!(req.feed, Feed::Normal | Feed::Longpoll);
    if listed {
        sink.write(b"{\"results\":[\n")?;
    }
    let mut first = true;
    loop {
        notified.mark_unchanged();
        let rows = feed.since(req.since, req.descending, req.limit);
        for u in &rows {
            let line = row(u);
            match req.feed {
                Feed::Normal | Feed::Longpoll => {
                    sink.write(if first { b"" } else { b",\r\n" })?;
                    sink.write(line.as_bytes())?;
                }
                Feed::Continuous => sink.write(format!("{line}\n").as_bytes())?,
                Feed::EventSource => sink.write(
                    format!("data: {line}\nid: {}\n\n", json!(crate::seq::render(u.seq)))
                        .as_bytes(),
                )?,
            }
            first = false;
            req.since = req.since.max(u.seq);
        }
        let count = rows.len() as u64;
        if let Some(limit) = req.limit.as_mut() {
            *limit = limit.saturating_sub(count);
        }
        let done = match req.feed {
            Feed::Normal => true,
            Feed::Longpoll => count > 0,
            _ => req.limit == Some(0),
        };
        if done || req.descending || Instant::now() >= deadline {
            break;
        }
        sink.flush()?;
        let event_source = req.feed == Feed::EventSource;
        wait_for(&mut notified, req.heartbeat, event_source, sink, deadline)?;
    }
    let last =
        json!(crate::seq::render(req.since.max(if req.descending { feed.last_seq() } else { 0 })));
    match req.feed {
        Feed::Normal | Feed::Longpoll => {
            sink.write(format!("\n],\n\"last_seq\":{last}}}\n").as_bytes())
        }
        Feed::Continuous => sink.write(format!("{{\"last_seq\":{last}}}\n").as_bytes()),
        Feed::EventSource => Ok(()),
    }
}
