//! The HTTP server: Prometheus metrics, health probes, the JSON API and the dashboard
//! (DESIGN.md "HTTP" contract). Handlers only read the runtime state or go through the
//! store and scheduler; no maintenance runs on a request's task.

mod api;
mod auth;
mod cost_pages;
mod dashboard;
mod error;
mod format;
mod health;
mod openapi;
mod operations;
mod page;
mod pictures;
mod pins;
mod routes;

use std::sync::Arc;
use std::time::Duration;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use tower_http::compression::{CompressionLayer, CompressionLevel};
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;

use crate::shared::Shared;
use error::MAX_BODY_BYTES;
use health::{healthz, metrics, readyz};

/// Requests slower than this are cut off (a slow store must not pile up connections).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

pub fn router(rt: Arc<Shared>) -> Router {
    if rt.config.role == crate::config::Role::Worker {
        // a worker holds no probes: only its health and its own metrics
        return Router::new()
            .route("/metrics", get(metrics))
            .route("/healthz", get(healthz))
            .route("/readyz", get(readyz))
            .fallback(not_found)
            .layer(CompressionLayer::new().quality(CompressionLevel::Fastest))
            .layer(TimeoutLayer::with_status_code(
                StatusCode::SERVICE_UNAVAILABLE,
                REQUEST_TIMEOUT,
            ))
            .layer(TraceLayer::new_for_http())
            .with_state(rt);
    }
    let (routes, document) = routes::documented();
    // rendered once: the document is a fact of this build
    let document = Arc::new(document);
    routes
        .route(
            routes::OPENAPI_PATH,
            get(move || {
                let document = Arc::clone(&document);
                async move { Json(document) }
            }),
        )
        .fallback(not_found)
        // Prometheus asks for gzip: `/metrics` of 10,000 tables shrinks about tenfold on
        // the wire for a few milliseconds of the fastest level (BENCHMARKS.md "Fleet")
        .layer(CompressionLayer::new().quality(CompressionLevel::Fastest))
        .layer(RequestBodyLimitLayer::new(MAX_BODY_BYTES))
        .layer(axum::middleware::map_response(close_after_refused_body))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::SERVICE_UNAVAILABLE,
            REQUEST_TIMEOUT,
        ))
        .layer(TraceLayer::new_for_http())
        .with_state(rt)
}

/// A body over the limit is refused (413) before it is read, and the server then closes
/// the connection. Say so in the response: without `Connection: close` a client puts the
/// connection back in its pool and its next request fails on the closed socket. The body
/// is the JSON error every other refusal has (the limit layer's own is plain text).
async fn close_after_refused_body(response: Response) -> Response {
    if response.status() != StatusCode::PAYLOAD_TOO_LARGE {
        return response;
    }
    let mut response = error::ApiError::PayloadTooLarge {
        limit: MAX_BODY_BYTES,
    }
    .into_response();
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

async fn not_found() -> impl IntoResponse {
    error::ApiError::NotFound("no such route: see README \"HTTP API\" for the routes".into())
}
