//! Show and list functions ([`bunko_engine::show_list`]), CouchDB 3.4's routes:
//! `GET/POST /{db}/_design/{ddoc}/_show/{name}[/{docid}]` and
//! `GET/POST /{db}/_design/{ddoc}/_list/{name}[/{other ddoc}]/{view}` (the view's query
//! parameters select the rows; `head` is `{total_rows, offset}` of a map view). Both only
//! read, as a member of the database; their response object is answered as an update
//! function's (`update::respond`), a list defaulting to `application/json`. A
//! show answers with CouchDB's `ETag` (`show_etag`: `If-None-Match` → `304` without
//! running the function) and `Vary: Accept`.

use axum::extract::State as AxState;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Router};
use bunko_doc::etf;
use bunko_engine::Database;
use serde_json::{Value, json};

use crate::db::{Access, open};
use crate::error::{ApiError, ApiResult};
use crate::params::Params;
use crate::update::{Call, request, respond};
use crate::{State, UserCtx, blocking};

pub fn routes() -> Router<State> {
    Router::new()
        .route("/{db}/_design/{ddoc}/_show/{name}", get(show).post(show))
        .route("/{db}/_design/{ddoc}/_show/{name}/{*docid}", get(show).post(show))
        .route("/{db}/_design/{ddoc}/_list/{name}/{view}", get(list).post(list).options(list))
        .route(
            "/{db}/_design/{ddoc}/_list/{name}/{other}/{view}",
            get(list).post(list).options(list),
        )
        .route("/{db}/_design/{ddoc}/_show", get(no_show).post(no_show))
        .route("/{db}/_design/{ddoc}/_show/", get(no_show).post(no_show))
        .route("/{db}/_design/{ddoc}/_list/{name}", get(no_list).post(no_list))
}

/// A show path without a function name (CouchDB's `show_error`).
async fn no_show() -> ApiError {
    ApiError::Other(StatusCode::NOT_FOUND, "show_error", "Invalid path.".into())
}

/// A list path without a view (CouchDB's `list_error`).
async fn no_list() -> ApiError {
    ApiError::Other(StatusCode::NOT_FOUND, "list_error", "Invalid path.".into())
}

async fn show(
    AxState(state): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    call: Call,
) -> ApiResult<Response> {
    let (db_name, ddoc, name, id) = call.target();
    // In the authentication database a show runs on the reader's own document only.
    let db = crate::doc::open_for_read(&state, &ctx, &db_name, id.as_deref().unwrap_or(""))?;
    let mut path = vec![db_name, "_design".into(), ddoc.clone(), "_show".into(), name.clone()];
    path.extend(id.clone());
    let req = request(&state, &ctx, path, id.as_deref(), &call);
    // Repeated headers read as one, joined by ", " (as mochiweb keeps them).
    let accepts: Vec<&[u8]> =
        call.headers.get_all(header::ACCEPT).iter().map(|v| v.as_bytes()).collect();
    let accept = (!accepts.is_empty()).then(|| accepts.join(&b", "[..]));
    let etag = {
        let (db, ddoc, id, ctx) = (db.clone(), ddoc.clone(), id.clone(), ctx.clone());
        blocking(move || Ok(show_etag(&db, &ctx, &ddoc, id.as_deref(), accept.as_deref()))).await?
    };
    let matches = etag.as_ref().is_some_and(|etag| {
        let given = call.headers.get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok());
        given.is_some_and(|v| v.split([',', ' ']).any(|t| t == etag))
    });
    let response = if matches {
        None
    } else {
        Some(blocking(move || Ok(db.run_show(&ctx, &ddoc, &name, id.as_deref(), &req)?)).await?)
    };
    let mut out = match response {
        Some(response) => respond(&response, StatusCode::OK),
        None => StatusCode::NOT_MODIFIED.into_response(),
    };
    if let Some(etag) = etag.and_then(|etag| HeaderValue::from_str(&etag).ok()) {
        out.headers_mut().insert(header::ETAG, etag);
    }
    out.headers_mut().insert(header::VARY, HeaderValue::from_static("Accept"));
    Ok(out)
}

/// A show's `ETag` as CouchDB's `chttpd_show:show_etag` makes it, before the function
/// runs: `couch_httpd:make_etag({DDocEtag, DocEtag | nil, Accept | undefined, Roles, []})`,
/// the XXH3-128 of that term's external format in base 36, quoted; the etags of
/// documents are their quoted revisions. `None` when the design document is missing (the
/// show then fails).
fn show_etag(
    db: &Database,
    reader: &UserCtx,
    ddoc: &str,
    id: Option<&str>,
    accept: Option<&[u8]>,
) -> Option<String> {
    let roles = &reader.roles;
    let rev_etag = |id: &str| db.get(reader, id, None).ok().map(|doc| format!("\"{}\"", doc.rev));
    let ddoc_etag = rev_etag(&format!("_design/{ddoc}"))?;
    let mut term = etf::Writer::new();
    term.tuple_header(5).binary(ddoc_etag.as_bytes());
    match id.and_then(rev_etag) {
        Some(etag) => term.binary(etag.as_bytes()),
        None => term.atom("nil"),
    };
    match accept {
        Some(accept) => term.string(accept),
        None => term.atom("undefined"),
    };
    if !roles.is_empty() {
        term.list_header(roles.len());
        for role in roles {
            term.binary(role.as_bytes());
        }
    }
    term.nil().nil();
    let hash = xxhash_rust::xxh3::xxh3_128(&term.finish());
    Some(format!("\"{}\"", base36(hash)))
}

/// Erlang's `~.36B`: base 36, upper-case digits.
fn base36(mut n: u128) -> String {
    const DIGITS: &[u8; 36] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
    let mut out = Vec::new();
    loop {
        out.push(DIGITS[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

async fn list(
    AxState(state): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    call: Call,
) -> ApiResult<Response> {
    let (db_name, ddoc, name, _) = call.target();
    let view_ddoc = call.params.get("other").cloned().unwrap_or_else(|| ddoc.clone());
    let view = call.param("view");
    let db = open(&state, &ctx, &db_name, Access::View)?;
    let mut params = Params::parse(call.query.as_deref());
    if call.method == Method::POST {
        params.merge_json(&call.body.object_or_empty()?);
    }
    let query = crate::view::parse(&params)?;
    let opts =
        crate::render::DocOpts { conflicts: params.flag("conflicts")?, ..Default::default() };
    let mut path = vec![db_name, "_design".into(), ddoc.clone(), "_list".into(), name.clone()];
    if view_ddoc != ddoc {
        path.push(view_ddoc.clone());
    }
    path.push(view.clone());
    let req = request(&state, &ctx, path, None, &call);
    if view == "_all_docs" {
        // CouchDB lists `_all_docs` rows too (`couch_mrview_show`).
        let range = crate::all_docs::range_query(&params, None)?;
        let mut response = blocking(move || {
            let all = db.all_docs(&ctx, &range, None)?;
            let head = crate::view::head_json(Some(all.total_rows), Some(all.offset), None);
            let rows: Vec<Value> = all
                .rows
                .map(|row| {
                    let row = row?;
                    let json = crate::all_docs::row_json(&row, range.include_docs, &opts);
                    Ok(serde_json::from_slice(&json).unwrap_or(Value::Null))
                })
                .collect::<bunko_engine::Result<_>>()?;
            Ok(db.run_list(&ddoc, &name, &head, &req, &rows)?)
        })
        .await?;
        return Ok(list_response(&mut response));
    }
    let mut response = blocking(move || {
        let result = bunko_views::query_view(
            &ctx,
            &db,
            &format!("_design/{view_ddoc}"),
            &view,
            &query,
            None,
        )?;
        let head = crate::view::head_json(result.total_rows, result.offset, result.update_seq);
        let rows: Vec<Value> = result
            .rows
            .map(|row| row.map(|r| crate::view::row_json(&r, &opts)))
            .collect::<Result<_, _>>()?;
        Ok(db.run_list(&ddoc, &name, &head, &req, &rows)?)
    })
    .await?;
    Ok(list_response(&mut response))
}

/// A list function's answer, `application/json` unless it says otherwise.
fn list_response(response: &mut serde_json::Map<String, Value>) -> Response {
    let headers = response.entry("headers").or_insert_with(|| json!({}));
    if let Some(headers) = headers.as_object_mut() {
        headers.entry("Content-Type").or_insert_with(|| json!("application/json"));
    }
    respond(response, StatusCode::OK)
}
