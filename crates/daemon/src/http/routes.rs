//! Every route a replica of role `all` serves, each with its handler and its OpenAPI
//! operation, registered together (README "HTTP API", DESIGN.md "HTTP"). The layers around
//! them (compression, body limit, timeout, tracing) are `mod.rs`'s.

use std::sync::Arc;

use axum::Router;
use serde_json::{json, Value};

use super::api::{History, JobDetail, JobList, TableDetail, TableList, TriggerRequest, Triggered};
use super::health::{self, Alive, Readiness};
use super::openapi::{Documented, Op, Route};
use super::operations::Operations;
use super::pins::{NewPin, PinList, PinRemoved};
use super::{api, cost_pages, dashboard, operations, pins};
use crate::fleet::TableView;
use crate::shared::Shared;
use tablekeeper_store::TablePin;

/// The path of the document itself.
pub(super) const OPENAPI_PATH: &str = "/api/v1/openapi.json";

/// A `limit` query parameter of 1 to `max`.
fn limit(max: i64) -> Value {
    json!({ "type": "integer", "minimum": 1, "maximum": max })
}

/// The dashboard's health filter: a health, or empty (the form's "any").
fn health_filter() -> Vec<&'static str> {
    let mut values = vec![""];
    values.extend(crate::fleet::Health::ALL.map(|h| h.as_str()));
    values
}

fn table_name(op: Op) -> Op {
    op.path(
        "name",
        json!({ "type": "string" }),
        "the table's `name` in the inventory",
    )
    .error(404, "no such table in the inventory")
}

fn operations() -> Documented<Arc<Shared>> {
    Documented::new()
        .route(
            "/",
            Route::new().get(
                dashboard::page,
                Op::new(
                    "dashboard",
                    "the dashboard: every table worst first, 50 a page",
                )
                .query(
                    "owner",
                    json!({ "type": "string" }),
                    "only this owner's tables",
                )
                .query(
                    "health",
                    json!({ "enum": health_filter() }),
                    "only tables of this health (empty: any)",
                )
                .query(
                    "page",
                    json!({ "type": "integer", "minimum": 1, "maximum": u32::MAX }),
                    "the page, from 1",
                )
                .text(
                    200,
                    "text/html",
                    "the page (server-rendered, no JavaScript)",
                )
                .error(400, "an unknown health or a page that is not a number"),
            ),
        )
        .route(
            "/tables/{name}",
            Route::new().get(
                dashboard::table_page,
                table_name(Op::new("table_page", "one table's page")).text(
                    200,
                    "text/html",
                    "the page",
                ),
            ),
        )
        .route(
            "/metrics",
            Route::new().get(
                health::metrics,
                Op::new("metrics", "Prometheus text format")
                    .text(200, "text/plain", "every series")
                    .error(500, "the registry could not be rendered"),
            ),
        )
        .route(
            "/healthz",
            Route::new().get(
                health::healthz,
                Op::new("healthz", "the process is alive").json::<Alive>(200, "alive"),
            ),
        )
        .route(
            "/readyz",
            Route::new().get(
                health::readyz,
                Op::new("readyz", "the job store answers and an inventory is loaded")
                    .json::<Readiness>(200, "ready")
                    .json::<Readiness>(503, "not ready, or shutting down"),
            ),
        )
        .route(
            "/api/v1/tables",
            Route::new().get(
                api::list_tables,
                Op::new(
                    "list_tables",
                    "every table: health, staleness, decisions, drift",
                )
                .json::<TableList>(200, "the tables"),
            ),
        )
        .route(
            "/api/v1/tables/{name}",
            Route::new().get(
                api::get_table,
                table_name(Op::new("get_table", "one table with its last 20 jobs"))
                    .json::<TableDetail>(200, "the table"),
            ),
        )
        .route(
            "/api/v1/tables/{name}/jobs",
            Route::new().post(
                api::trigger_job,
                table_name(Op::new("trigger_job", "queue an operation now"))
                    .body::<TriggerRequest>()
                    .json::<Triggered>(202, "the job queued, or the queued one joined")
                    .error(400, "not a known operation, or a malformed body")
                    .error(409, "the table's state refuses the operation")
                    .mutating(),
            ),
        )
        .route(
            "/api/v1/tables/{name}/history",
            Route::new().get(
                api::table_history,
                table_name(Op::new(
                    "table_history",
                    "the table's commits, newest first",
                ))
                .query(
                    "limit",
                    limit(tablekeeper_store::MAX_HISTORY_LIMIT),
                    "default 100",
                )
                .query(
                    "before",
                    json!({ "type": "integer", "minimum": 0 }),
                    "only versions older than this",
                )
                .json::<History>(200, "a page of commits")
                .error(400, "a bad `limit` or `before`"),
            ),
        )
        .route(
            "/api/v1/tables/{name}/pause",
            Route::new().post(
                api::pause,
                table_name(Op::new(
                    "pause",
                    "pause maintenance of the table on every replica",
                ))
                .json::<TableView>(200, "the table, paused")
                .mutating(),
            ),
        )
        .route(
            "/api/v1/tables/{name}/resume",
            Route::new().post(
                api::resume,
                table_name(Op::new("resume", "resume maintenance of the table"))
                    .json::<TableView>(200, "the table, resumed")
                    .mutating(),
            ),
        )
        .route(
            "/api/v1/tables/{name}/pins",
            Route::new()
                .get(
                    pins::list,
                    table_name(Op::new("list_pins", "the inventory's pins and the API's"))
                        .json::<PinList>(200, "the pins"),
                )
                .post(
                    pins::add,
                    table_name(Op::new("add_pin", "pin a version until a time"))
                        .body::<NewPin>()
                        .json::<TablePin>(201, "the stored pin")
                        .error(
                            400,
                            "a version the table does not have, or `until` in the past",
                        )
                        .mutating(),
                )
                .delete(
                    pins::remove,
                    table_name(Op::new("remove_pin", "remove a pin added through the API"))
                        .required_query(
                            "version",
                            json!({ "type": "integer" }),
                            "the pinned version",
                        )
                        .json::<PinRemoved>(200, "removed")
                        .error(400, "no `version`, or not a whole number")
                        .error(409, "the inventory pins the version")
                        .mutating(),
                ),
        )
        .route(
            "/api/v1/jobs",
            Route::new().get(
                api::list_jobs,
                Op::new("list_jobs", "jobs newest first")
                    .query(
                        "table",
                        json!({ "type": "string" }),
                        "only this table's jobs",
                    )
                    .query(
                        "state",
                        json!({ "enum": tablekeeper_store::JobState::ALL.map(|s| s.as_str()) }),
                        "only jobs in this state",
                    )
                    .query("limit", limit(api::MAX_JOBS_LIMIT), "default 50")
                    .json::<JobList>(200, "the jobs")
                    .error(400, "a bad `state` or `limit`"),
            ),
        )
        .route(
            "/costs",
            Route::new().get(
                cost_pages::fleet_costs,
                Op::new(
                    "fleet_costs",
                    "the dashboard's cost page: by owner and operation, last 1, 7 and 30 days",
                )
                .text(200, "text/html", "the page")
                .error(503, "the job store cannot be read"),
            ),
        )
        .route(
            "/api/v1/operations",
            Route::new().get(
                operations::list,
                Op::new(
                    "list_operations",
                    "finished jobs newest first, each with its cost and outcome",
                )
                .query(
                    "table",
                    json!({ "type": "string" }),
                    "only this table's jobs",
                )
                .query(
                    "owner",
                    json!({ "type": "string" }),
                    "only jobs charged to this owner",
                )
                .query(
                    "operation",
                    json!({ "enum": tablekeeper_inventory::Operation::ALL.map(|o| o.as_str()) }),
                    "only this operation",
                )
                .query(
                    "since",
                    json!({ "type": "string" }),
                    "finished at or after: an RFC 3339 time or a duration back (`7d`)",
                )
                .query(
                    "limit",
                    limit(i64::from(operations::MAX_OPERATIONS_LIMIT)),
                    "default 100",
                )
                .json::<Operations>(200, "the rows")
                .error(400, "a bad `operation`, `since` or `limit`"),
            ),
        )
        .route(
            "/api/v1/jobs/{id}",
            Route::new().get(
                api::get_job,
                Op::new("get_job", "a job with its progress and tasks")
                    .path(
                        "id",
                        json!({ "type": "integer", "format": "int64" }),
                        "the job's `id`",
                    )
                    .json::<JobDetail>(200, "the job")
                    .error(400, "not a job id")
                    .error(404, "no such job"),
            ),
        )
}

/// The routes of role `all` and the document that describes them, the route serving it
/// included.
pub(super) fn documented() -> (Router<Arc<Shared>>, Value) {
    operations().finish((
        OPENAPI_PATH,
        Op::new("openapi", "this document (OpenAPI 3.1)")
            .json::<Value>(200, "the OpenAPI document"),
    ))
}
