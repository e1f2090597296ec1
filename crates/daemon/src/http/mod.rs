//! The HTTP server: Prometheus metrics, health probes, the JSON API and the dashboard
//! (DESIGN.md "HTTP" contract). Handlers only read the runtime state or go through the
//! store and scheduler; no maintenance runs on a request's task.

mod api;
mod auth;
mod dashboard;
mod error;
mod pins;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::json;
use tower_http::compression::{CompressionLayer, CompressionLevel};
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;

use crate::shared::Shared;

/// Largest request body accepted: the bodies are `{"operation": "..."}` and a pin.
const MAX_BODY_BYTES: usize = 16 * 1024;
/// Requests slower than this are cut off (a slow store must not pile up connections).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long `/readyz` waits for the job store before calling the replica not ready.
const READY_PING_TIMEOUT: Duration = Duration::from_secs(2);

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
    Router::new()
        .route("/", get(dashboard::page))
        .route("/tables/{name}", get(dashboard::table_page))
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/api/v1/tables", get(api::list_tables))
        .route("/api/v1/tables/{name}", get(api::get_table))
        .route("/api/v1/tables/{name}/jobs", post(api::trigger_job))
        .route("/api/v1/tables/{name}/history", get(api::table_history))
        .route("/api/v1/tables/{name}/pause", post(api::pause))
        .route("/api/v1/tables/{name}/resume", post(api::resume))
        .route(
            "/api/v1/tables/{name}/pins",
            get(pins::list).post(pins::add).delete(pins::remove),
        )
        .route("/api/v1/jobs", get(api::list_jobs))
        .route("/api/v1/jobs/{id}", get(api::get_job))
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
/// connection back in its pool and its next request fails on the closed socket.
async fn close_after_refused_body(mut response: Response) -> Response {
    if response.status() == StatusCode::PAYLOAD_TOO_LARGE {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

async fn metrics(State(rt): State<Arc<Shared>>) -> impl IntoResponse {
    // rendering a large fleet's series takes a few hundred milliseconds of CPU: off the
    // runtime's worker threads, so lease renewals and probes are not held up behind it
    let metrics = rt.metrics.clone();
    let rendered = tokio::task::spawn_blocking(move || metrics.render())
        .await
        .unwrap_or_else(|e| Err(prometheus::Error::Msg(format!("render task failed: {e}"))));
    match rendered {
        Ok(body) => (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8",
            )],
            body,
        )
            .into_response(),
        Err(e) => {
            tracing::error!(error = %e, "cannot render metrics");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

async fn healthz() -> impl IntoResponse {
    Json(json!({ "status": "ok" }))
}

/// Ready when the job store answers and an inventory is loaded.
async fn readyz(State(rt): State<Arc<Shared>>) -> impl IntoResponse {
    let store = match tokio::time::timeout(READY_PING_TIMEOUT, rt.store.ping()).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {READY_PING_TIMEOUT:?}")),
    };
    let tables = rt.fleet.inventory().tables.len();
    let inventory_loaded = !rt.fleet.inventory().sources.is_empty();
    let ready = store.is_ok() && inventory_loaded && rt.accepting_mutations();
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (
        status,
        Json(json!({
            "ready": ready,
            "job_store": store.err().unwrap_or_else(|| "ok".into()),
            "inventory_tables": tables,
            "inventory_loaded": inventory_loaded,
            "shutting_down": !rt.accepting_mutations(),
        })),
    )
}

async fn not_found() -> impl IntoResponse {
    error::ApiError::NotFound("no such route: see README \"HTTP API\" for the routes".into())
}
