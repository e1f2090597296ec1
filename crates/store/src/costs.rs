//! What maintenance cost, as the job store keeps it: finished jobs for the operations view
//! (their `result` holds `cost`, `outcome` and `owner`; DESIGN "Cost and outcome"), and each
//! table's probe costs a day at a time per replica (`probe_costs`). The chargeback report and
//! `GET /api/v1/operations` read these; nothing here prices or decides anything.

use chrono::{DateTime, Utc};
use tablekeeper_vocab::{Cost, Operation, Requests};

use crate::dialect::args;
use crate::error::StoreError;
use crate::model::Job;
use crate::store::{JobStore, StoreOp};

/// Which finished jobs to list.
#[derive(Debug, Clone, Default)]
pub struct OperationsFilter {
    pub table: Option<String>,
    /// The owner their result names.
    pub owner: Option<String>,
    pub operation: Option<Operation>,
    /// Finished at or after.
    pub since: Option<DateTime<Utc>>,
    /// At most this many (all when `None`).
    pub limit: Option<u32>,
}

/// One table's probe costs on one day (UTC), summed over the replicas.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeCostRow {
    pub table: String,
    pub owner: String,
    /// Midnight UTC of the day.
    pub day: DateTime<Utc>,
    /// Measured, unpriced (`estimated_usd` 0; `wall_seconds` not kept).
    pub cost: Cost,
}

impl JobStore {
    /// Finished jobs (succeeded, failed or cancelled), newest finish first.
    pub async fn finished_jobs(&self, filter: &OperationsFilter) -> Result<Vec<Job>, StoreError> {
        let limit = filter.limit.map_or(i64::MAX, i64::from);
        let args = args!(
            filter.table.as_deref(),
            filter.owner.as_deref(),
            filter.operation.map(Operation::as_str),
            filter.since,
            limit
        );
        self.measured(
            StoreOp::FinishedJobs,
            self.jobs(self.sql().finished_jobs, args),
        )
        .await
    }

    /// Adds what `replica`'s probes of `table` cost to the table's row of `day` (midnight UTC).
    pub async fn record_probe_costs(
        &self,
        replica: &str,
        day: DateTime<Utc>,
        table: &str,
        owner: &str,
        cost: &Cost,
    ) -> Result<(), StoreError> {
        let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        let cpu_micros = (cost.cpu_seconds.max(0.0) * 1e6).round() as i64;
        let r = &cost.requests;
        let args = args!(
            table,
            owner,
            replica,
            day,
            cpu_micros,
            count(r.get),
            count(r.put),
            count(r.list),
            count(r.head),
            count(r.delete),
            count(cost.bytes_read),
            count(cost.bytes_written)
        );
        self.measured(StoreOp::RecordProbeCosts, async {
            self.dialect()
                .execute(self.sql().record_probe_costs, args)
                .await
                .map(drop)
        })
        .await
    }

    /// Each table's probe costs a day at a time from the day of `since` on, summed over
    /// replicas.
    pub async fn probe_costs(&self, since: DateTime<Utc>) -> Result<Vec<ProbeCostRow>, StoreError> {
        let day = since
            .date_naive()
            .and_hms_opt(0, 0, 0)
            .map_or(since, |midnight| midnight.and_utc());
        self.measured(StoreOp::ProbeCosts, async {
            self.dialect()
                .fetch(self.sql().probe_costs, args!(day))
                .await?
                .iter()
                .map(|r| {
                    let count = |column: &str| -> Result<u64, StoreError> {
                        Ok(u64::try_from(r.int(column)?).unwrap_or(0))
                    };
                    Ok(ProbeCostRow {
                        table: r.text("table_name")?,
                        owner: r.text("owner")?,
                        day: r.time("day")?,
                        cost: Cost {
                            cpu_seconds: r.int("cpu_micros")? as f64 / 1e6,
                            requests: Requests {
                                get: count("get_requests")?,
                                put: count("put_requests")?,
                                list: count("list_requests")?,
                                head: count("head_requests")?,
                                delete: count("delete_requests")?,
                            },
                            bytes_read: count("bytes_read")?,
                            bytes_written: count("bytes_written")?,
                            ..Cost::default()
                        },
                    })
                })
                .collect()
        })
        .await
    }
}
