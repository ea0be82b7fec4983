//! Request bodies: read whole with the size limit, then parsed as JSON objects with
//! CouchDB's errors (`400 bad_request` "invalid UTF-8 JSON", `413 too_large`). A compressed
//! body arrives here already inflated ([`crate::encoding`]): the limit counts inflated bytes.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use serde_json::{Map, Value};

use crate::encoding::Inflated;
use crate::error::ApiError;

/// The raw body, with `413 too_large` (as JSON) when over the limit.
pub struct RawBody(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for RawBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let inflated = req.extensions().get::<Inflated>().is_some();
        match Bytes::from_request(req, state).await {
            Ok(bytes) => Ok(RawBody(bytes)),
            Err(rejection) if rejection.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE => {
                Err(ApiError::too_large())
            }
            // CouchDB's answer to a body that does not inflate (chttpd:maybe_decompress).
            Err(_) if inflated => {
                Err(ApiError::bad_request("Request body is not properly gzipped."))
            }
            Err(rejection) => Err(ApiError::bad_request(rejection.body_text())),
        }
    }
}

impl RawBody {
    /// The body as a JSON object.
    pub fn object(&self) -> Result<Map<String, Value>, ApiError> {
        Ok(bunko_doc::body::parse_object(&self.0)?)
    }

    /// A request (not a document) body as a JSON object.
    pub fn request_object(&self) -> Result<Map<String, Value>, ApiError> {
        match self.json()? {
            Value::Object(map) => Ok(map),
            _ => Err(ApiError::bad_request("Request body must be a JSON object")),
        }
    }

    /// A request body as a JSON object, or an empty one if the body is empty.
    pub fn object_or_empty(&self) -> Result<Map<String, Value>, ApiError> {
        if self.0.iter().all(u8::is_ascii_whitespace) {
            Ok(Map::new())
        } else {
            self.request_object()
        }
    }

    /// The body as any JSON value.
    pub fn json(&self) -> Result<Value, ApiError> {
        Ok(bunko_doc::body::parse_json(&self.0)?)
    }
}
