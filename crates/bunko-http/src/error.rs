//! The one place where errors become HTTP responses: each error maps to CouchDB's status
//! code, `error` name and `reason`, always as `{"error": …, "reason": …}`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bunko_doc::Error as DocError;
use bunko_engine::Error as EngineError;
use serde_json::json;

/// An error answered to a client.
#[derive(Debug)]
pub enum ApiError {
    Engine(EngineError),
    /// Any other answer: status, CouchDB error name, reason.
    Other(StatusCode, &'static str, String),
    /// A replication that could not start or run.
    Replication(bunko_replicator::Error),
}

pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    pub fn bad_request(reason: impl Into<String>) -> Self {
        Self::Other(StatusCode::BAD_REQUEST, "bad_request", reason.into())
    }

    pub fn query_parse(reason: impl Into<String>) -> Self {
        Self::Other(StatusCode::BAD_REQUEST, "query_parse_error", reason.into())
    }

    pub fn not_found(reason: impl Into<String>) -> Self {
        Self::Other(StatusCode::NOT_FOUND, "not_found", reason.into())
    }

    pub fn unauthorized(reason: impl Into<String>) -> Self {
        Self::Other(StatusCode::UNAUTHORIZED, "unauthorized", reason.into())
    }

    pub fn forbidden(reason: impl Into<String>) -> Self {
        Self::Other(StatusCode::FORBIDDEN, "forbidden", reason.into())
    }

    pub fn too_large() -> Self {
        Self::Other(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            "the request entity is too large".into(),
        )
    }

    pub fn not_implemented(reason: impl Into<String>) -> Self {
        Self::Other(StatusCode::NOT_IMPLEMENTED, "not_implemented", reason.into())
    }

    /// Status, error name and reason.
    pub fn parts(&self) -> (StatusCode, &'static str, String) {
        match self {
            ApiError::Engine(err) => engine_parts(err),
            ApiError::Other(status, name, reason) => (*status, name, reason.clone()),
            ApiError::Replication(err) => replication_parts(err),
        }
    }
}

/// A replication's failure: bad parameters are `400`; an endpoint's refusal keeps its status
/// and error name (`db_not_found`, `unauthorized`, `forbidden`), as CouchDB reports it.
fn replication_parts(err: &bunko_replicator::Error) -> (StatusCode, &'static str, String) {
    use bunko_replicator::Error as R;
    let reason = err.to_string();
    match err {
        R::Param(_) | R::Invalid(_) => (StatusCode::BAD_REQUEST, "bad_request", reason),
        R::NotFound(_) => (StatusCode::NOT_FOUND, "not_found", "missing".into()),
        R::Http { status, body, url } => {
            let given = body.get("error").and_then(serde_json::Value::as_str).unwrap_or_default();
            let name = ["db_not_found", "unauthorized", "forbidden", "not_found", "bad_request"]
                .into_iter()
                .find(|n| *n == given)
                .unwrap_or("replication_error");
            let reason = body.get("reason").and_then(serde_json::Value::as_str);
            let reason = reason.map_or_else(|| format!("{status} from {url}"), str::to_string);
            let status = StatusCode::from_u16(*status)
                .ok()
                .filter(|s| s.is_client_error())
                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            (status, name, reason)
        }
        _ => (StatusCode::INTERNAL_SERVER_ERROR, "replication_error", reason),
    }
}

fn engine_parts(err: &EngineError) -> (StatusCode, &'static str, String) {
    let reason = err.to_string();
    let (status, name) = match err {
        EngineError::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
        EngineError::Conflict => (StatusCode::CONFLICT, "conflict"),
        EngineError::FileExists => (StatusCode::PRECONDITION_FAILED, "file_exists"),
        EngineError::BadRequest(_) => (StatusCode::BAD_REQUEST, "bad_request"),
        EngineError::QueryParse(_) => (StatusCode::BAD_REQUEST, "query_parse_error"),
        EngineError::Forbidden(_)
        | EngineError::Rejected(_)
        | EngineError::DocumentValidation { .. } => (StatusCode::FORBIDDEN, "forbidden"),
        EngineError::Unauthorized(_) => (StatusCode::UNAUTHORIZED, "unauthorized"),
        EngineError::PartitionOverflow(_) => (StatusCode::FORBIDDEN, "partition_overflow"),
        EngineError::InvalidDesignDoc(_) => (StatusCode::BAD_REQUEST, "invalid_design_doc"),
        EngineError::Invalid { error, .. } => (StatusCode::BAD_REQUEST, *error),
        EngineError::AttachmentTooLarge(_) => {
            (StatusCode::PAYLOAD_TOO_LARGE, "attachment_too_large")
        }
        EngineError::CappedTooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, "document_too_large"),
        EngineError::MissingStub(_) => (StatusCode::PRECONDITION_FAILED, "missing_stub"),
        EngineError::MissingRev => (StatusCode::CONFLICT, "not_found"),
        EngineError::ServiceUnavailable(_) => {
            (StatusCode::SERVICE_UNAVAILABLE, "required index service unavailable")
        }
        EngineError::Doc(doc) => return doc_parts(doc),
        EngineError::Js(js) => return js_parts(js),
        EngineError::TxnConflict(_) => (StatusCode::CONFLICT, "conflict"),
        EngineError::TxnAborted(_) => (StatusCode::CONFLICT, "transaction_aborted"),
        EngineError::InTxn { error, .. } => (engine_parts(error).0, engine_parts(error).1),
        EngineError::Storage(bunko_storage::Error::Poisoned | bunko_storage::Error::Closed) => {
            (StatusCode::SERVICE_UNAVAILABLE, "service_unavailable")
        }
        EngineError::Storage(bunko_storage::Error::Invalid(_)) => {
            (StatusCode::BAD_REQUEST, "bad_request")
        }
        EngineError::Storage(_) | EngineError::Corrupt(_) => {
            (StatusCode::INTERNAL_SERVER_ERROR, "internal_server_error")
        }
        _ => (StatusCode::INTERNAL_SERVER_ERROR, "unknown_error"),
    };
    (status, name, reason)
}

/// The status of a show or list function's error, as `chttpd:error_info` gives it.
fn render_status(error: &str) -> StatusCode {
    match error {
        "bad_request" => StatusCode::BAD_REQUEST,
        "unauthorized" => StatusCode::UNAUTHORIZED,
        "forbidden" => StatusCode::FORBIDDEN,
        "not_found" => StatusCode::NOT_FOUND,
        "method_not_allowed" => StatusCode::METHOD_NOT_ALLOWED,
        "not_acceptable" => StatusCode::NOT_ACCEPTABLE,
        "conflict" => StatusCode::CONFLICT,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// A view's JavaScript failure: bad source is the client's fault, the rest is CouchDB's
/// `500` with the query server's error name.
fn js_parts(err: &bunko_js::Error) -> (StatusCode, &'static str, String) {
    let status = match err {
        bunko_js::Error::Compilation(_) => StatusCode::BAD_REQUEST,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    let name = match err {
        bunko_js::Error::Compilation(_) => "compilation_error",
        bunko_js::Error::Timeout { .. } => "timeout",
        bunko_js::Error::InvalidValue(_) => "invalid_value",
        bunko_js::Error::ReduceOverflow(_) => "reduce_overflow_error",
        bunko_js::Error::Fatal { .. } => "map_runtime_error",
        // CouchDB's JavaScript process dies when it runs out of memory.
        bunko_js::Error::OutOfMemory { .. } => "os_process_error",
        _ => "internal_server_error",
    };
    (status, name, err.reason())
}

fn doc_parts(err: &DocError) -> (StatusCode, &'static str, String) {
    let reason = err.to_string();
    let (status, name) = match err {
        DocError::BadRequest(_) | DocError::BadRev(_) => (StatusCode::BAD_REQUEST, "bad_request"),
        DocError::IllegalDocId(_) => (StatusCode::BAD_REQUEST, "illegal_docid"),
        DocError::IllegalPartition(_) => (StatusCode::BAD_REQUEST, "illegal_partition"),
        DocError::IllegalDatabaseName(_) => (StatusCode::BAD_REQUEST, "illegal_database_name"),
        DocError::DocValidation(_) => (StatusCode::BAD_REQUEST, "doc_validation"),
        DocError::TooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, "document_too_large"),
        _ => (StatusCode::BAD_REQUEST, "bad_request"),
    };
    (status, name, reason)
}

/// A Mango selector, sort or fields error, with Mango's error name.
pub fn query_error(err: bunko_query::Error) -> ApiError {
    let status = StatusCode::from_u16(err.status()).unwrap_or(StatusCode::BAD_REQUEST);
    ApiError::Other(status, err.error_name(), err.to_string())
}

impl From<EngineError> for ApiError {
    fn from(err: EngineError) -> Self {
        ApiError::Engine(err)
    }
}

impl From<DocError> for ApiError {
    fn from(err: DocError) -> Self {
        ApiError::Engine(EngineError::Doc(err))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let ApiError::Engine(EngineError::Render { error, reason }) = &self {
            // A show or list function's own error name, with CouchDB's status for it.
            let status = render_status(error);
            return (status, axum::Json(json!({"error": error, "reason": reason}))).into_response();
        }
        let (status, error, reason) = self.parts();
        if status.is_server_error() {
            tracing::error!(%status, error, reason, "request failed");
        }
        let mut response =
            (status, axum::Json(json!({"error": error, "reason": reason}))).into_response();
        if status == StatusCode::PAYLOAD_TOO_LARGE {
            // The rest of the body may be unread, so the server closes the connection after
            // this answer; saying so keeps the client from sending its next request on it.
            response.headers_mut().insert(
                axum::http::header::CONNECTION,
                axum::http::HeaderValue::from_static("close"),
            );
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_map_to_couchdb_names_and_statuses() {
        let table: Vec<(ApiError, u16, &str)> = vec![
            (EngineError::Conflict.into(), 409, "conflict"),
            (EngineError::NotFound("missing".into()).into(), 404, "not_found"),
            (EngineError::FileExists.into(), 412, "file_exists"),
            (EngineError::PartitionOverflow("p:a".into()).into(), 403, "partition_overflow"),
            (EngineError::InvalidDesignDoc("x".into()).into(), 400, "invalid_design_doc"),
            (
                EngineError::Invalid { error: "invalid_key", reason: "x".into() }.into(),
                400,
                "invalid_key",
            ),
            (DocError::IllegalPartition("x".into()).into(), 400, "illegal_partition"),
            (DocError::IllegalDocId("x".into()).into(), 400, "illegal_docid"),
            (DocError::TooLarge("a".into()).into(), 413, "document_too_large"),
            (DocError::IllegalDatabaseName("x".into()).into(), 400, "illegal_database_name"),
            (DocError::DocValidation("x".into()).into(), 400, "doc_validation"),
            (ApiError::too_large(), 413, "too_large"),
            (ApiError::query_parse("x"), 400, "query_parse_error"),
            (
                EngineError::Storage(bunko_storage::Error::Poisoned).into(),
                503,
                "service_unavailable",
            ),
        ];
        for (err, status, name) in table {
            let (s, n, _) = err.parts();
            assert_eq!((s.as_u16(), n), (status, name));
        }
    }
}
