//! The one error type of the HTTP layer and the single place that decides statuses.
//! Internal error text is logged, never sent to clients; user errors say what to fix.

use axum::extract::rejection::JsonRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;

/// Largest request body accepted: the bodies are `{"operation": "..."}` and a pin.
pub(crate) const MAX_BODY_BYTES: usize = 16 * 1024;

/// The body of every error response: `{"error": "...", "status": N}`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct ErrorBody {
    /// What went wrong and, where the caller can fix it, how.
    pub error: String,
    /// The HTTP status, repeated for clients that log bodies only.
    pub status: u16,
}

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 400: the request is malformed (bad JSON, unknown operation, bad query value).
    #[error("{0}")]
    BadRequest(String),
    /// 401: a token is configured and the request did not present it.
    #[error("missing or wrong bearer token: send `Authorization: Bearer <token>`")]
    Unauthorized,
    /// 403: mutating routes are disabled because no admin token is configured.
    #[error("mutating routes are disabled: no admin token is configured (set the variable named by `admin_token_env`)")]
    MutationsDisabled,
    /// 404: no such table or job.
    #[error("{0}")]
    NotFound(String),
    /// 413: the body is larger than the limit (README "HTTP API").
    #[error("the request body is over the limit of {limit} bytes")]
    PayloadTooLarge { limit: usize },
    /// 409: the request is valid but the table's state refuses it.
    #[error("{0}")]
    Conflict(String),
    /// 503: the replica is shutting down or the job store is unreachable.
    #[error("{0}")]
    Unavailable(String),
    /// 500: a bug or an unexpected store failure; details go to the log only.
    #[error("internal error")]
    Internal(String),
}

impl ApiError {
    fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::MutationsDisabled => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl ApiError {
    /// A JSON body the handler could not take: over the limit (a body sent without a length
    /// is cut off while it is read) is 413, anything else 400 with an `example` of a good one.
    pub fn from_json_rejection(rejection: JsonRejection, example: &str) -> Self {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            return ApiError::PayloadTooLarge {
                limit: MAX_BODY_BYTES,
            };
        }
        ApiError::BadRequest(format!(
            "{}; send a JSON body like {example}",
            rejection.body_text()
        ))
    }
}

impl From<tablekeeper_store::StoreError> for ApiError {
    fn from(e: tablekeeper_store::StoreError) -> Self {
        if e.is_retryable() {
            ApiError::Unavailable(format!("job store unavailable, retry shortly: {e}"))
        } else {
            ApiError::Internal(e.to_string())
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        if let ApiError::Internal(detail) = &self {
            tracing::error!(error = %detail, "http request failed");
        }
        let body = ErrorBody {
            error: self.to_string(),
            status: status.as_u16(),
        };
        let mut response = (status, Json(body)).into_response();
        if matches!(self, ApiError::Unauthorized) {
            response.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Bearer"),
            );
        }
        response
    }
}
