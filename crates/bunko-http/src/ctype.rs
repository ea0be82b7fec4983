//! CouchDB's `validate_ctype`: a `POST` to an endpoint that reads a JSON body must say
//! `Content-Type: application/json` (parameters after `;` allowed), or it gets
//! `415 bad_content_type` before its body is read. Which endpoints is one table here
//! (`needs_json`), so that handlers stay free of the check.

use axum::extract::Request;
use axum::http::{Method, StatusCode, header};

use crate::error::ApiError;

/// Endpoints under `/{db}/` whose `POST` takes a JSON body.
const DB_ENDPOINTS: &[&str] = &[
    "_all_docs",
    "_design_docs",
    "_local_docs",
    "_bulk_docs",
    "_bulk_get",
    "_find",
    "_explain",
    "_index",
    "_changes",
    "_purge",
    "_revs_diff",
    "_missing_revs",
    "_ensure_full_commit",
    "_compact",
];

/// Refuses a `POST` with a JSON-body endpoint unless its content type is JSON.
pub fn require_json(req: &Request) -> Result<(), ApiError> {
    if req.method() == Method::POST && needs_json(req.uri().path()) && !is_json(req) {
        return Err(ApiError::Other(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "bad_content_type",
            "Content-Type must be application/json".to_string(),
        ));
    }
    Ok(())
}

fn is_json(req: &Request) -> bool {
    let value = req.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
    value.and_then(|v| v.split(';').next()).is_some_and(|ctype| ctype == "application/json")
}

/// Whether a `POST` to `path` reads a JSON body.
fn needs_json(path: &str) -> bool {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    match parts.as_slice() {
        // `POST /{db}` creates a document; `/_session` and other server endpoints differ.
        [db] => {
            (!db.is_empty() && !db.starts_with('_')) || is_system_db(db) || *db == "_transaction"
        }
        [_, endpoint] => DB_ENDPOINTS.contains(endpoint),
        [_, "_index", "_bulk_delete"] | [_, "_compact", _] => true,
        [_, "_design", _, "_view", _] | [_, "_design", _, "_view", _, "queries"] => true,
        [_, "_partition", _, "_all_docs" | "_find" | "_explain"] => true,
        [_, "_partition", _, "_design", _, "_view", _] => true,
        _ => false,
    }
}

fn is_system_db(name: &str) -> bool {
    matches!(name, "_users" | "_replicator" | "_global_changes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_endpoints_are_the_ones_couchdb_checks() {
        for path in [
            "/db",
            "/_users",
            "/db/_all_docs",
            "/db/_bulk_docs",
            "/db/_find",
            "/db/_index/_bulk_delete",
            "/db/_design/d/_view/v",
            "/db/_design/d/_view/v/queries",
            "/db/_partition/p/_all_docs",
            "/db/_partition/p/_design/d/_view/v",
            "/db/_compact/ddoc",
        ] {
            assert!(needs_json(path), "{path}");
        }
        for path in
            ["/", "/_session", "/_replicate", "/db/_view_cleanup", "/db/doc", "/db/_temp_view"]
        {
            assert!(!needs_json(path), "{path}");
        }
    }
}
