//! `GET /api/v1/operations`: finished jobs newest first, one row each with what it cost and
//! what it did (DESIGN "HTTP"), like an operations-history system table. Rows are built by
//! [`crate::costs::OperationRow`]; this module parses the query.

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::Json;
use chrono::Utc;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tablekeeper_inventory::Operation;
use tablekeeper_store::OperationsFilter;

use super::api::text_without_nul;
use super::error::ApiError;
use crate::costs::{parse_since, OperationRow};
use crate::shared::Shared;

/// Most rows one call returns.
pub(super) const MAX_OPERATIONS_LIMIT: u32 = 1000;
const DEFAULT_OPERATIONS_LIMIT: u32 = 100;

#[derive(Debug, Deserialize)]
pub struct OperationsQuery {
    table: Option<String>,
    owner: Option<String>,
    operation: Option<String>,
    since: Option<String>,
    limit: Option<String>,
}

/// The rows, newest finish first.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Operations {
    pub operations: Vec<OperationRow>,
}

pub async fn list(
    State(rt): State<Arc<Shared>>,
    query: Result<Query<OperationsQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Operations>, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    let given = |v: Option<String>| v.filter(|s| !s.is_empty());
    let operation = match given(q.operation) {
        None => None,
        Some(op) => Some(op.parse::<Operation>().map_err(|_| {
            ApiError::BadRequest(format!(
                "unknown operation `{op}`: use one of {}",
                Operation::ALL.map(|o| o.as_str()).join(", ")
            ))
        })?),
    };
    let since = match given(q.since) {
        None => None,
        Some(since) => Some(
            parse_since(&since, Utc::now())
                .map_err(|e| ApiError::BadRequest(format!("`since`: {e}")))?,
        ),
    };
    let limit = match given(q.limit) {
        None => DEFAULT_OPERATIONS_LIMIT,
        Some(l) => match l.parse::<u32>() {
            Ok(n) if (1..=MAX_OPERATIONS_LIMIT).contains(&n) => n,
            _ => {
                return Err(ApiError::BadRequest(format!(
                    "`limit` must be a whole number from 1 to {MAX_OPERATIONS_LIMIT}, got `{l}`"
                )))
            }
        },
    };
    let (table, owner) = (given(q.table), given(q.owner));
    for (what, value) in [("table", &table), ("owner", &owner)] {
        if let Some(value) = value {
            text_without_nul(what, value)?;
        }
    }
    let jobs = rt
        .store
        .finished_jobs(&OperationsFilter {
            table,
            owner,
            operation,
            since,
            limit: Some(limit),
        })
        .await?;
    let owner_now = |table: &str| rt.fleet.spec(table).map(|spec| spec.owner);
    Ok(Json(Operations {
        operations: jobs
            .iter()
            .map(|job| OperationRow::of(job, owner_now))
            .collect(),
    }))
}
