//! The one error type of the HTTP layer and the single place that decides statuses.
//! Internal error text is logged, never sent to clients; user errors say what to fix.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

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
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
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
        let mut response = (
            status,
            Json(json!({ "error": self.to_string(), "status": status.as_u16() })),
        )
            .into_response();
        if matches!(self, ApiError::Unauthorized) {
            response.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Bearer"),
            );
        }
        response
    }
}
