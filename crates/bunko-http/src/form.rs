//! `POST /{db}/{id}` as an HTML form (`multipart/form-data`), CouchDB's attachment upload
//! from a browser (`chttpd_db:db_doc_req` `POST`): the `Referer` must name this host, the
//! form's `_attachments` files are added to the document (replacing those of the same
//! names) at the revision `_rev` names, or to the document the form's `_doc` field holds.
//! Files stream into temporary storage as they arrive (`receive.rs`), as other uploads.

use axum::body::Body;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use bunko_doc::RevId;
use bunko_doc::att::{AttIn, DEFAULT_TYPE};
use bunko_engine::upload::Uploaded;

use crate::doc::written;
use crate::error::{ApiError, ApiResult};
use crate::receive::{OffRuntime, receive};
use crate::{State, UserCtx, blocking};

/// Writes the form upload to document `id` of `db_name`.
pub async fn upload(
    state: &State,
    ctx: UserCtx,
    db_name: &str,
    id: String,
    headers: &HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    check_referer(headers)?;
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
    let boundary = content_type
        .filter(|t| t.to_ascii_lowercase().starts_with("multipart/form-data"))
        .ok_or_else(|| {
            ApiError::Other(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "bad_content_type",
                "Content-Type must be multipart/form-data".into(),
            )
        })
        .and_then(|t| {
            multer::parse_boundary(t).map_err(|e| ApiError::bad_request(e.to_string()))
        })?;
    let db = state.engine.db(db_name)?;
    let mut form = multer::Multipart::new(body.into_data_stream(), boundary);
    let (mut rev, mut doc_json, mut atts, mut uploads) = (None, None, Vec::new(), Vec::new());
    let bad = |e: multer::Error| ApiError::bad_request(e.to_string());
    while let Some(field) = form.next_field().await.map_err(bad)? {
        match (field.name().unwrap_or_default(), field.file_name().map(str::to_string)) {
            ("_attachments", Some(name)) => {
                let content_type =
                    field.content_type().map_or(DEFAULT_TYPE.into(), |m| m.to_string());
                db.admit_attachment(&ctx, &id, &name)?;
                let uploaded: OffRuntime<Uploaded> =
                    receive(db.upload(&name, &content_type), Box::pin(field), bad).await?;
                let body = uploaded.body();
                atts.push(AttIn { name, content_type, revpos: None, body });
                uploads.push(uploaded);
            }
            ("_rev", _) => rev = Some(field.text().await.map_err(bad)?.parse::<RevId>()?),
            ("_doc", _) => doc_json = Some(field.bytes().await.map_err(bad)?),
            _ => {}
        }
    }
    let doc = match doc_json {
        Some(json) => Some(bunko_doc::body::parse(&json, &state.engine.config().limits)?),
        None => None,
    };
    let doc_id = id.clone();
    let rev = blocking(move || {
        let rev = db.put_with_attachments(&ctx, &doc_id, doc, rev, atts);
        drop(uploads);
        Ok(rev?)
    })
    .await?;
    Ok(written(StatusCode::CREATED, &id, &rev))
}

/// CouchDB's `couch_httpd:validate_referer`: a form post must come from a page of this
/// host (`X-Forwarded-Host`, else `Host`).
fn check_referer(headers: &HeaderMap) -> ApiResult<()> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let referer =
        text("referer").ok_or_else(|| ApiError::bad_request("Referer header required."))?;
    let host = text("x-forwarded-host").or_else(|| text("host")).unwrap_or_default();
    let referer_host = referer.split_once("://").map_or("", |(_, rest)| rest);
    let referer_host = referer_host.split(['/', '?', '#']).next().unwrap_or_default();
    if referer_host != host {
        return Err(ApiError::bad_request("Referer header must match host."));
    }
    Ok(())
}
