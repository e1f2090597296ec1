//! JSON API handlers under `/api/v1` (DESIGN.md "HTTP" contract).

use std::sync::Arc;

use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::Json;
use chrono::Utc;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tablekeeper_inventory::Operation;
use tablekeeper_store::{CommitRow, Job, JobFilter, JobId, JobState, Progress, Task, Trigger};
use tablekeeper_vocab::ProbeFailureKind;

use super::auth::require_admin;
use super::error::ApiError;
use crate::fleet::TableView;
use crate::policy::planner::{self, Decision, Need, Probed};
use crate::shared::Shared;

/// Most jobs one `/api/v1/jobs` call returns; larger requests are clamped.
pub(super) const MAX_JOBS_LIMIT: i64 = 1000;
const DEFAULT_JOBS_LIMIT: i64 = 50;
/// Recent jobs shown with one table.
const TABLE_RECENT_JOBS: i64 = 20;

/// `GET /api/v1/tables/{name}`: the table's view and its last jobs.
#[derive(Debug, Serialize, JsonSchema)]
pub struct TableDetail {
    #[serde(flatten)]
    pub view: TableView,
    pub last_jobs: Vec<Job>,
}

/// `GET /api/v1/tables`: every table of the inventory.
#[derive(Debug, Serialize, JsonSchema)]
pub struct TableList {
    pub tables: Vec<TableView>,
}

pub async fn list_tables(State(rt): State<Arc<Shared>>) -> Json<TableList> {
    Json(TableList {
        tables: rt.fleet.views(Utc::now()),
    })
}

pub async fn get_table(
    State(rt): State<Arc<Shared>>,
    Path(name): Path<String>,
) -> Result<Json<TableDetail>, ApiError> {
    let mut view = rt
        .fleet
        .view(&name, Utc::now())
        .ok_or_else(|| unknown_table(&name))?;
    // fresh from the store: a repair another replica just recorded shows at once
    view.stale_writes = rt.store.stale_writes(Some(&name)).await?;
    let last_jobs = rt
        .store
        .list_jobs(&JobFilter {
            table: Some(name),
            state: None,
            operation: None,
            limit: TABLE_RECENT_JOBS,
        })
        .await?;
    Ok(Json(TableDetail { view, last_jobs }))
}

#[derive(Debug, Deserialize)]
pub struct JobsQuery {
    table: Option<String>,
    state: Option<String>,
    limit: Option<String>,
}

/// `GET /api/v1/jobs`: jobs newest first.
#[derive(Debug, Serialize, JsonSchema)]
pub struct JobList {
    pub jobs: Vec<Job>,
}

pub async fn list_jobs(
    State(rt): State<Arc<Shared>>,
    query: Result<Query<JobsQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<JobList>, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    let state = match q.state.as_deref().filter(|s| !s.is_empty()) {
        None => None,
        Some(s) => Some(s.parse::<JobState>().map_err(|_| {
            ApiError::BadRequest(format!(
                "unknown state `{s}`: use one of queued, running, succeeded, failed, cancelled"
            ))
        })?),
    };
    let limit = match q.limit.as_deref().filter(|s| !s.is_empty()) {
        None => DEFAULT_JOBS_LIMIT,
        Some(l) => match l.parse::<i64>() {
            Ok(n) if n >= 1 => n.min(MAX_JOBS_LIMIT),
            _ => {
                return Err(ApiError::BadRequest(format!(
                    "`limit` must be a whole number from 1 to {MAX_JOBS_LIMIT}, got `{l}`"
                )))
            }
        },
    };
    let table = q.table.filter(|t| !t.is_empty());
    if let Some(table) = &table {
        text_without_nul("table", table)?;
    }
    let jobs = rt
        .store
        .list_jobs(&JobFilter {
            table,
            state,
            operation: None,
            limit,
        })
        .await?;
    Ok(Json(JobList { jobs }))
}

/// `GET /api/v1/jobs/{id}`: a job, its progress and its tasks.
#[derive(Debug, Serialize, JsonSchema)]
pub struct JobDetail {
    pub job: Job,
    pub progress: Progress,
    pub tasks: Vec<Task>,
}

/// `GET /api/v1/jobs/{id}`: the job with its progress (tasks and bytes done of total, from
/// `job_tasks`; a job that runs whole on one worker has no tasks and shows zeros) and its
/// tasks, each with the worker that ran it.
pub async fn get_job(
    State(rt): State<Arc<Shared>>,
    Path(id): Path<String>,
) -> Result<Json<JobDetail>, ApiError> {
    let id = id.parse::<i64>().map_err(|_| {
        ApiError::BadRequest(format!(
            "`{id}` is not a job id: use the `id` of a job from /api/v1/jobs"
        ))
    })?;
    let job = rt
        .store
        .get_job(JobId(id))
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no job {id}")))?;
    let tasks = rt.store.tasks(job.id).await?;
    let progress = Progress::of(&tasks);
    Ok(Json(JobDetail {
        job,
        progress,
        tasks,
    }))
}

/// Commits one history page holds unless `limit` says otherwise (DESIGN.md "HTTP").
const DEFAULT_HISTORY_LIMIT: i64 = 100;

/// `GET /api/v1/tables/{name}/history`: a page of the table's commits.
#[derive(Debug, Serialize, JsonSchema)]
pub struct History {
    pub table: String,
    /// Newest first.
    pub commits: Vec<CommitRow>,
    /// Version ranges no replica could record (cleaned up from the log first).
    pub gaps: Vec<HistoryGap>,
}

/// Versions `from_version` to `to_version` (both included) are missing from the history.
#[derive(Debug, Serialize, JsonSchema)]
pub struct HistoryGap {
    pub from_version: i64,
    pub to_version: i64,
}

#[derive(Debug, Deserialize)]
pub struct HistoryQuery {
    limit: Option<String>,
    before: Option<String>,
}

/// `GET /api/v1/tables/{name}/history?limit=&before=`: the table's commits newest first, from
/// `table_commits` (so it reaches past the log's retention), with the version ranges no
/// replica could record (cleaned up from the log before tablekeeper saw them).
pub async fn table_history(
    State(rt): State<Arc<Shared>>,
    Path(name): Path<String>,
    query: Result<Query<HistoryQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<History>, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    if rt.fleet.spec(&name).is_none() {
        return Err(unknown_table(&name));
    }
    let max = tablekeeper_store::MAX_HISTORY_LIMIT;
    let limit = match q.limit.as_deref().filter(|s| !s.is_empty()) {
        None => DEFAULT_HISTORY_LIMIT,
        Some(l) => match l.parse::<i64>() {
            Ok(n) if (1..=max).contains(&n) => n,
            _ => {
                return Err(ApiError::BadRequest(format!(
                    "`limit` must be a whole number from 1 to {max}, got `{l}`"
                )))
            }
        },
    };
    let before = match q.before.as_deref().filter(|s| !s.is_empty()) {
        None => None,
        Some(b) => match b.parse::<i64>() {
            Ok(v) if v >= 0 => Some(v),
            _ => {
                return Err(ApiError::BadRequest(format!(
                    "`before` must be a table version (a whole number, 0 or more), got `{b}`"
                )))
            }
        },
    };
    let commits = rt.store.history(&name, before, limit).await?;
    let gaps = rt
        .store
        .history_gaps(&name)
        .await?
        .into_iter()
        .map(|(from_version, to_version)| HistoryGap {
            from_version,
            to_version,
        })
        .collect();
    Ok(Json(History {
        table: name,
        commits,
        gaps,
    }))
}

/// `POST /api/v1/tables/{name}/jobs`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TriggerRequest {
    /// Parsed here rather than by serde, so an unknown one is told the known ones.
    #[schemars(with = "Operation")]
    operation: String,
}

/// The job a manual trigger queued, or the queued one it joined.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Triggered {
    /// False when an already queued job of the operation was joined.
    pub created: bool,
    pub job: Job,
}

pub async fn trigger_job(
    State(rt): State<Arc<Shared>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Result<Json<TriggerRequest>, JsonRejection>,
) -> Result<impl IntoResponse, ApiError> {
    guard_mutation(&rt, &headers)?;
    let Json(req) =
        body.map_err(|e| ApiError::from_json_rejection(e, r#"{"operation": "compact"}"#))?;
    let op: Operation = req
        .operation
        .parse()
        .map_err(|e: tablekeeper_vocab::UnknownName| ApiError::BadRequest(e.to_string()))?;
    let spec = rt.fleet.spec(&name).ok_or_else(|| unknown_table(&name))?;
    let decision = rt
        .fleet
        .with_state(&name, |s| {
            let probed = match (&s.probe_error, s.probe_error_kind, &s.probe) {
                (Some(e), Some(ProbeFailureKind::Unreadable), _) => Probed::Unreadable(e),
                (Some(e), _, _) => Probed::Unreachable(e),
                (None, _, Some(p)) => Probed::Read(p),
                (None, _, None) => Probed::NotYet,
            };
            planner::admit(&spec, op, probed, Need::Forced, Utc::now())
        })
        .unwrap_or_else(|| Decision::Refuse("the table has no state on this replica yet".into()));
    if let Decision::Refuse(reason) = decision {
        return Err(ApiError::Conflict(format!(
            "refused for table `{name}`: {reason}"
        )));
    }
    let (job_id, created) =
        crate::jobs::enqueue::enqueue(&rt, &spec, op, Trigger::Manual, None).await?;
    tracing::info!(table = %name, operation = %op, job_id = job_id.0, created, "manual trigger accepted");
    let job = rt
        .store
        .get_job(job_id)
        .await?
        .ok_or_else(|| ApiError::Internal(format!("job {job_id} vanished after enqueue")))?;
    Ok((StatusCode::ACCEPTED, Json(Triggered { created, job })))
}

pub async fn pause(
    State(rt): State<Arc<Shared>>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Result<Json<TableView>, ApiError> {
    set_paused(&rt, &name, &headers, true).await
}

pub async fn resume(
    State(rt): State<Arc<Shared>>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Result<Json<TableView>, ApiError> {
    set_paused(&rt, &name, &headers, false).await
}

async fn set_paused(
    rt: &Shared,
    name: &str,
    headers: &HeaderMap,
    paused: bool,
) -> Result<Json<TableView>, ApiError> {
    guard_mutation(rt, headers)?;
    if rt.fleet.spec(name).is_none() {
        return Err(unknown_table(name));
    }
    rt.store.set_paused(name, paused).await?;
    rt.fleet
        .update_state(name, |s| s.paused_by_api = Some(paused));
    tracing::info!(table = %name, paused, "pause state changed through the API");
    rt.fleet
        .view(name, Utc::now())
        .map(Json)
        .ok_or_else(|| unknown_table(name))
}

pub(super) fn guard_mutation(rt: &Shared, headers: &HeaderMap) -> Result<(), ApiError> {
    require_admin(rt.admin_token.as_ref().map(|t| t.expose()), headers)?;
    if !rt.accepting_mutations() {
        return Err(ApiError::Unavailable(
            "this replica is shutting down; retry against another replica".into(),
        ));
    }
    Ok(())
}

/// PostgreSQL text cannot hold a NUL character: a filter carrying one is refused here
/// rather than failing in the store.
pub(super) fn text_without_nul(what: &str, value: &str) -> Result<(), ApiError> {
    if value.contains('\0') {
        return Err(ApiError::BadRequest(format!(
            "`{what}` contains a NUL character: remove it"
        )));
    }
    Ok(())
}

pub(super) fn unknown_table(name: &str) -> ApiError {
    ApiError::NotFound(format!("no table `{name}` in the inventory"))
}
