//! `GET|POST|DELETE /api/v1/tables/{name}/pins` (DESIGN.md "HTTP" contract): the versions a
//! table keeps for others. Listing shows the inventory's `retention.pins` and the pins added
//! here (stored in `table_pins`, so every replica honours them after restarts), each with
//! whether it has expired; adding and removing need the admin token like every mutating route.
//! Inventory pins change through a pull request, never here.

use std::sync::Arc;

use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tablekeeper_inventory::PinAt;
use tablekeeper_store::TablePin;

use super::api::{guard_mutation, text_without_nul, unknown_table};
use super::error::ApiError;
use crate::shared::Shared;

/// One pin as the API shows it.
#[derive(Debug, Serialize, JsonSchema)]
pub struct PinView {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<i64>,
    /// Inventory pins may hold the version at a timestamp instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<DateTime<Utc>>,
    pub until: DateTime<Utc>,
    pub reason: String,
    /// `inventory` or `api`.
    pub source: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_at: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_by: Option<String>,
    /// Past `until`: reported, no longer honoured.
    pub expired: bool,
}

/// `GET /api/v1/tables/{name}/pins`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct PinList {
    pub table: String,
    /// The inventory's pins, then the API's.
    pub pins: Vec<PinView>,
}

/// `DELETE /api/v1/tables/{name}/pins?version=N`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct PinRemoved {
    pub table: String,
    pub version: i64,
    pub removed: bool,
}

pub async fn list(
    State(rt): State<Arc<Shared>>,
    Path(name): Path<String>,
) -> Result<Json<PinList>, ApiError> {
    let spec = rt.fleet.spec(&name).ok_or_else(|| unknown_table(&name))?;
    let now = Utc::now();
    let mut pins: Vec<PinView> = spec
        .retention
        .pins
        .iter()
        .map(|pin| {
            let (version, timestamp) = match pin.at {
                PinAt::Version(v) => (i64::try_from(v).ok(), None),
                PinAt::Timestamp(at) => (None, Some(at)),
            };
            PinView {
                version,
                timestamp,
                until: pin.until,
                reason: pin.reason.clone(),
                source: "inventory",
                created_at: None,
                created_by: None,
                expired: pin.until <= now,
            }
        })
        .collect();
    pins.extend(
        rt.store
            .pins(Some(&name))
            .await?
            .into_iter()
            .map(|pin| PinView {
                version: Some(pin.version),
                timestamp: None,
                until: pin.until,
                reason: pin.reason,
                source: "api",
                created_at: Some(pin.created_at),
                created_by: Some(pin.created_by),
                expired: pin.until <= now,
            }),
    );
    Ok(Json(PinList { table: name, pins }))
}

/// `POST /api/v1/tables/{name}/pins`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NewPin {
    version: i64,
    until: DateTime<Utc>,
    #[serde(default)]
    reason: String,
    /// Who asks (a registry's name, a person); default `api`.
    #[serde(default)]
    created_by: Option<String>,
}

pub async fn add(
    State(rt): State<Arc<Shared>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Result<Json<NewPin>, JsonRejection>,
) -> Result<(StatusCode, Json<TablePin>), ApiError> {
    guard_mutation(&rt, &headers)?;
    let Json(pin) = body.map_err(|e| {
        ApiError::from_json_rejection(
            e,
            r#"{"version": 1482, "until": "2027-03-01T00:00:00Z", "reason": "model run 88"}"#,
        )
    })?;
    text_without_nul("reason", &pin.reason)?;
    if let Some(created_by) = &pin.created_by {
        text_without_nul("created_by", created_by)?;
    }
    if rt.fleet.spec(&name).is_none() {
        return Err(unknown_table(&name));
    }
    if pin.version < 0 {
        return Err(ApiError::BadRequest(format!(
            "version {} does not exist: versions start at 0",
            pin.version
        )));
    }
    if pin.until <= Utc::now() {
        return Err(ApiError::BadRequest(format!(
            "`until` ({}) is not in the future: a pin must hold for some time",
            pin.until.to_rfc3339()
        )));
    }
    let latest = rt
        .fleet
        .with_state(&name, |s| s.probe.as_ref().map(|p| p.version))
        .flatten();
    if let Some(latest) = latest.filter(|latest| pin.version > *latest) {
        return Err(ApiError::BadRequest(format!(
            "version {} does not exist yet: table `{name}` is at version {latest}",
            pin.version
        )));
    }
    let created_by = pin.created_by.unwrap_or_else(|| "api".into());
    let stored = rt
        .store
        .add_pin(&name, pin.version, pin.until, &pin.reason, &created_by)
        .await?;
    tracing::info!(table = %name, version = stored.version, until = %stored.until, reason = %stored.reason, created_by = %stored.created_by, "pin added through the API");
    Ok((StatusCode::CREATED, Json(stored)))
}

#[derive(Debug, Deserialize)]
pub struct RemoveQuery {
    version: Option<String>,
}

pub async fn remove(
    State(rt): State<Arc<Shared>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    Query(query): Query<RemoveQuery>,
) -> Result<Json<PinRemoved>, ApiError> {
    guard_mutation(&rt, &headers)?;
    let spec = rt.fleet.spec(&name).ok_or_else(|| unknown_table(&name))?;
    let version: i64 = query
        .version
        .as_deref()
        .ok_or_else(|| ApiError::BadRequest("say which pin to remove: `?version=N`".into()))?
        .parse()
        .map_err(|_| ApiError::BadRequest("`version` must be a whole number".into()))?;
    if rt.store.remove_pin(&name, version).await? {
        tracing::info!(table = %name, version, "pin removed through the API");
        return Ok(Json(PinRemoved {
            table: name,
            version,
            removed: true,
        }));
    }
    let declared = spec
        .retention
        .pins
        .iter()
        .any(|p| p.at == PinAt::Version(u64::try_from(version).unwrap_or(u64::MAX)));
    if declared {
        return Err(ApiError::Conflict(format!(
            "version {version} of `{name}` is pinned by the inventory (`retention.pins`): \
             remove it there through a pull request"
        )));
    }
    Err(ApiError::NotFound(format!(
        "no pin of version {version} on table `{name}` was added through the API"
    )))
}
