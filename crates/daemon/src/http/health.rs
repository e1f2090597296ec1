//! The routes every replica serves, workers included: Prometheus metrics, liveness and
//! readiness (DESIGN.md "HTTP" contract).

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::Json;
use schemars::JsonSchema;
use serde::Serialize;

use crate::shared::Shared;

/// How long `/readyz` waits for the job store before calling the replica not ready.
const READY_PING_TIMEOUT: Duration = Duration::from_secs(2);

pub(super) async fn metrics(State(rt): State<Arc<Shared>>) -> impl IntoResponse {
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

/// `GET /healthz`.
#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct Alive {
    /// Always `ok`.
    status: &'static str,
}

pub(super) async fn healthz() -> Json<Alive> {
    Json(Alive { status: "ok" })
}

/// `GET /readyz`: whether this replica takes work, and why not.
#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct Readiness {
    ready: bool,
    /// `ok`, or why the job store did not answer.
    job_store: String,
    inventory_tables: usize,
    inventory_loaded: bool,
    shutting_down: bool,
}

/// Ready when the job store answers and an inventory is loaded.
pub(super) async fn readyz(State(rt): State<Arc<Shared>>) -> (StatusCode, Json<Readiness>) {
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
        Json(Readiness {
            ready,
            job_store: store.err().unwrap_or_else(|| "ok".into()),
            inventory_tables: tables,
            inventory_loaded,
            shutting_down: !rt.accepting_mutations(),
        }),
    )
}
