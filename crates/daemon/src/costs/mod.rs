//! What maintenance cost and bought, read back from the job store for people: one row per
//! finished job (the operations view of `GET /api/v1/operations`, the table page), and the
//! sums the chargeback report and the fleet page show (`report.rs`). Costs are measured where
//! the work ran (`tablekeeper_delta::cost`) and priced there; this module only reads and adds.
//! The budget's windows are read back here too (`budget.rs`).

pub(crate) mod budget;
pub(crate) mod report;

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::Serialize;
use tablekeeper_inventory::Operation;
use tablekeeper_store::{Job, JobId, JobState, Trigger};
use tablekeeper_vocab::{Cost, Outcome};

/// One finished job as an operations-history row (DESIGN "HTTP": `/api/v1/operations`).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct OperationRow {
    pub job_id: JobId,
    pub table: String,
    /// The owner the job's cost is charged to: as its result recorded it, else the table's
    /// owner in the current inventory (a job whose attempts all lost their lease records
    /// none), else null.
    pub owner: Option<String>,
    pub operation: Operation,
    pub trigger: Trigger,
    pub state: JobState,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    /// What the job cost, every attempt's that ended on the replica that ran it (failed,
    /// released and deferred attempts included); null for a job that recorded none (its
    /// attempts all lost their lease, or it ran before costs were measured).
    pub cost: Option<Cost>,
    /// The table before and after; null as for `cost`.
    pub outcome: Option<Outcome>,
    /// What the job was estimated to cost and buy when it was queued (README "Budget");
    /// null for jobs queued without a probe at hand or before estimates were kept.
    pub estimate: Option<crate::policy::estimate::Estimate>,
}

impl OperationRow {
    /// The row of `job`; `owner_now` names a table's owner in the current inventory.
    pub(crate) fn of(job: &Job, owner_now: impl Fn(&str) -> Option<String>) -> Self {
        let result = job.result.as_ref();
        let field = |name: &str| result.and_then(|r| r.get(name)).cloned();
        OperationRow {
            job_id: job.id,
            table: job.table_name.clone(),
            owner: field("owner")
                .and_then(|o| o.as_str().map(str::to_owned))
                .or_else(|| owner_now(&job.table_name)),
            operation: job.operation,
            trigger: job.trigger,
            state: job.state,
            started_at: job.started_at,
            finished_at: job.finished_at,
            cost: field("cost").and_then(|c| serde_json::from_value(c).ok()),
            outcome: field("outcome").and_then(|o| serde_json::from_value(o).ok()),
            estimate: job
                .estimate
                .as_ref()
                .and_then(|e| serde_json::from_value(e.clone()).ok()),
        }
    }
}

/// `since` as the API and the report take it: an RFC 3339 time, or a duration back from `now`
/// (`7d`, `36h`, `90m`).
pub(crate) fn parse_since(text: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>, String> {
    if let Ok(at) = DateTime::parse_from_rfc3339(text) {
        return Ok(at.with_timezone(&Utc));
    }
    let back = humantime::parse_duration(text).map_err(|_| {
        format!(
            "`{text}` is neither an RFC 3339 time (2026-12-01T00:00:00Z) nor a duration (7d, 36h)"
        )
    })?;
    chrono::Duration::from_std(back)
        .ok()
        .and_then(|back| now.checked_sub_signed(back))
        .ok_or_else(|| format!("`{text}` reaches back before any time tablekeeper can name"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_is_a_time_or_a_duration_back() {
        let now = DateTime::parse_from_rfc3339("2026-12-07T00:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(
            parse_since("7d", now).unwrap().to_rfc3339(),
            "2026-11-30T00:00:00+00:00"
        );
        assert_eq!(
            parse_since("2026-12-01T12:00:00+01:00", now)
                .unwrap()
                .to_rfc3339(),
            "2026-12-01T11:00:00+00:00"
        );
        let e = parse_since("last week", now).unwrap_err();
        assert!(e.contains("neither an RFC 3339 time"), "{e}");
    }

    #[test]
    fn a_row_reads_cost_outcome_and_owner_from_the_result() {
        let job: Job = serde_json::from_value(serde_json::json!({
            "id": 7, "table_name": "t", "operation": "compact", "concurrency_key": "t",
            "state": "succeeded", "trigger": "schedule", "priority": 0,
            "run_at": "2026-12-07T00:00:00Z", "attempt": 1, "max_attempts": 3,
            "created_at": "2026-12-07T00:00:00Z",
            "result": {"owner": "team-a", "cost": {"cpu_seconds": 1.5, "requests": {"get": 3}},
                       "outcome": {"before": {"files": 10}, "after": {"files": 1}}}
        }))
        .unwrap();
        let row = OperationRow::of(&job, |_| Some("someone-else".into()));
        assert_eq!(row.owner.as_deref(), Some("team-a"));
        assert_eq!(row.cost.unwrap().requests.get, 3);
        assert_eq!(row.outcome.unwrap().after.files, Some(1));
        let failed = Job {
            result: None,
            ..job
        };
        let row = OperationRow::of(&failed, |_| Some("team-now".into()));
        assert_eq!(row.owner.as_deref(), Some("team-now"));
        assert!(row.cost.is_none());
    }
}
