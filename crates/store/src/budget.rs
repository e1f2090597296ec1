//! The maintenance budget as the job store keeps it: each queued job's estimate, budget rounds
//! (the due queued jobs and the window's spend read, a verdict written for each job, under a
//! lock every replica takes, so the budget is fleet-wide), and the windows' history for
//! `tablekeeper report budget`. The store knows nothing of how jobs are ranked: the daemon's
//! round function decides, the store reads and writes atomically around it.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use tablekeeper_vocab::{JobId, Operation, Trigger};

use crate::dialect::{args, Arg, Record};
use crate::error::StoreError;
use crate::store::{JobStore, StoreOp};

/// A due queued job, as a budget round reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct QueuedJob {
    pub id: JobId,
    pub table_name: String,
    pub operation: Operation,
    pub trigger: Trigger,
    pub created_at: DateTime<Utc>,
    /// What the daemon wrote when it queued the job (`None` for jobs queued before).
    pub estimate: Option<Value>,
}

/// What the jobs started in a window spent against the budget, in CPU-seconds (measured for
/// finished jobs, estimated for running ones), fleet-wide and per owner: those a round
/// admitted within the budget, and those that ran without a verdict (claimed before a round
/// saw them in shadow mode, or before the budget existed). Must-runs are outside it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WindowSpend {
    pub total: f64,
    pub by_owner: BTreeMap<String, f64>,
}

impl WindowSpend {
    /// Sums the `budget_spent` statement's rows (one per job: its CPU and its owner).
    fn from_rows(rows: &[Record]) -> Result<Self, StoreError> {
        let mut spend = WindowSpend::default();
        for r in rows {
            let cpu = seconds(r.opt_int("cpu_micros")?.unwrap_or(0));
            spend.total += cpu;
            if let Some(owner) = r.opt_text("owner")? {
                *spend.by_owner.entry(owner).or_default() += cpu;
            }
        }
        Ok(spend)
    }
}

/// A round's verdict on one queued job.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobVerdict {
    pub id: i64,
    /// `budget`, a must-run class, or `None` (waits).
    pub class: Option<String>,
    /// `budget` or `owner_budget` when deferred (or, in shadow mode, when it would be).
    pub reason: Option<String>,
    /// The verdict in words.
    pub note: String,
}

/// A deferral, for the windows' history.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Deferral {
    pub id: i64,
    pub table: String,
    pub operation: String,
    pub reason: String,
    pub rank: i64,
    pub ranked: i64,
}

/// What a round function returns.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RoundVerdicts {
    pub verdicts: Vec<JobVerdict>,
    pub deferrals: Vec<Deferral>,
}

/// The window a round spends from, and the budget's mode (`shadow` or `enforce`).
#[derive(Debug, Clone, PartialEq)]
pub struct RoundWindow<'a> {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub limit_cpu_seconds: f64,
    pub mode: &'a str,
}

/// A queued job's latest verdict, for the API, the dashboard and the metrics.
#[derive(Debug, Clone, PartialEq)]
pub struct QueuedVerdict {
    pub table_name: String,
    pub operation: Operation,
    pub class: Option<String>,
    pub reason: Option<String>,
    pub note: Option<String>,
    pub estimate: Option<Value>,
    pub deferred_at: Option<DateTime<Utc>>,
}

/// One window of `report budget`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BudgetWindowRow {
    pub window_start: DateTime<Utc>,
    pub window_end: DateTime<Utc>,
    /// The mode of the window's latest round.
    pub mode: String,
    pub limit_cpu_seconds: f64,
    pub spent_cpu_seconds: f64,
    pub runs: i64,
    /// Jobs an enforced budget deferred in the window.
    pub deferrals: i64,
    /// Jobs shadow mode recorded `enforce` would have deferred in the window.
    pub would_defer: i64,
    /// The longest any job deferred in the window waited, until it started or now.
    pub longest_wait_seconds: Option<i64>,
}

fn micros(seconds: f64) -> i64 {
    (seconds.max(0.0) * 1e6).round().min(i64::MAX as f64) as i64
}

fn seconds(micros: i64) -> f64 {
    micros as f64 / 1e6
}

impl JobStore {
    /// One budget round: under a lock every replica's round takes, reads the due queued jobs
    /// and what the window spent, asks `decide`, and writes its verdicts (and the window and
    /// its deferrals) before the lock is released. Returns the verdicts written.
    pub async fn budget_round<F>(
        &self,
        window: &RoundWindow<'_>,
        decide: F,
    ) -> Result<RoundVerdicts, StoreError>
    where
        F: FnOnce(&[QueuedJob], &WindowSpend) -> RoundVerdicts + Send,
    {
        self.measured(StoreOp::BudgetRound, async {
            let sql = self.sql();
            let mut tx = self.dialect().begin().await?;
            tx.execute(sql.budget_lock, Vec::new()).await?;
            let queued = tx
                .fetch(sql.budget_queued, Vec::new())
                .await?
                .iter()
                .map(|r| {
                    Ok(QueuedJob {
                        id: JobId(r.int("id")?),
                        table_name: r.text("table_name")?,
                        operation: r.parsed("operation")?,
                        trigger: r.parsed("trigger")?,
                        created_at: r.time("created_at")?,
                        estimate: r.opt_json("estimate")?,
                    })
                })
                .collect::<Result<Vec<_>, StoreError>>()?;
            let spend = WindowSpend::from_rows(
                &tx.fetch(sql.budget_spent, args!(window.start, window.end))
                    .await?,
            )?;
            let verdicts = decide(&queued, &spend);
            tx.execute(
                sql.budget_window,
                args!(
                    window.start,
                    window.end,
                    micros(window.limit_cpu_seconds),
                    window.mode
                ),
            )
            .await?;
            if !verdicts.verdicts.is_empty() {
                let json = serde_json::to_value(&verdicts.verdicts)
                    .map_err(|e| StoreError::Corrupt(format!("budget verdicts: {e}")))?;
                tx.execute(sql.budget_verdicts, args!(Arg::Json(Some(json))))
                    .await?;
            }
            if !verdicts.deferrals.is_empty() {
                let json = serde_json::to_value(&verdicts.deferrals)
                    .map_err(|e| StoreError::Corrupt(format!("budget deferrals: {e}")))?;
                tx.execute(
                    sql.budget_deferrals,
                    args!(window.start, window.mode, Arg::Json(Some(json))),
                )
                .await?;
            }
            tx.commit().await?;
            Ok(verdicts)
        })
        .await
    }

    /// Writes a queued job's estimate (a job no longer queued keeps the one it ran with).
    pub async fn set_estimate(&self, id: JobId, estimate: Value) -> Result<(), StoreError> {
        self.measured(StoreOp::SetEstimate, async {
            self.dialect()
                .execute(
                    self.sql().set_estimate,
                    args!(id.0, Arg::Json(Some(estimate))),
                )
                .await
                .map(|_| ())
        })
        .await
    }

    /// Every queued job's latest budget verdict.
    pub async fn budget_queue(&self) -> Result<Vec<QueuedVerdict>, StoreError> {
        self.measured(StoreOp::BudgetQueue, async {
            self.dialect()
                .fetch(self.sql().budget_queue, Vec::new())
                .await?
                .iter()
                .map(|r| {
                    Ok(QueuedVerdict {
                        table_name: r.text("table_name")?,
                        operation: r.parsed("operation")?,
                        class: r.opt_text("budget_class")?,
                        reason: r.opt_text("budget_reason")?,
                        note: r.opt_text("budget_note")?,
                        estimate: r.opt_json("estimate")?,
                        deferred_at: r.opt_time("deferred_at")?,
                    })
                })
                .collect()
        })
        .await
    }

    /// What the jobs started in [`start`, `end`) spent against the budget ([`WindowSpend`]).
    pub async fn budget_spent(
        &self,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
    ) -> Result<WindowSpend, StoreError> {
        self.measured(StoreOp::BudgetSpent, async {
            WindowSpend::from_rows(
                &self
                    .dialect()
                    .fetch(self.sql().budget_spent, args!(start, end))
                    .await?,
            )
        })
        .await
    }

    /// The budget windows that started at or after `since`, oldest first.
    pub async fn budget_report(
        &self,
        since: DateTime<Utc>,
    ) -> Result<Vec<BudgetWindowRow>, StoreError> {
        self.measured(StoreOp::BudgetReport, async {
            self.dialect()
                .fetch(self.sql().budget_report, args!(since))
                .await?
                .iter()
                .map(|r| {
                    Ok(BudgetWindowRow {
                        window_start: r.time("window_start")?,
                        window_end: r.time("window_end")?,
                        mode: r.text("mode")?,
                        limit_cpu_seconds: seconds(r.int("limit_micros")?),
                        spent_cpu_seconds: seconds(r.opt_int("spent_micros")?.unwrap_or(0)),
                        runs: r.int("runs")?,
                        deferrals: r.int("deferrals")?,
                        would_defer: r.int("would_defer")?,
                        longest_wait_seconds: r.opt_int("longest_wait_seconds")?,
                    })
                })
                .collect()
        })
        .await
    }

    /// Finished jobs since `since` that carried an estimate and measured their cost:
    /// (operation, estimated CPU-seconds, measured CPU-seconds), oldest first.
    pub async fn estimates_and_costs(
        &self,
        since: DateTime<Utc>,
    ) -> Result<Vec<(Operation, f64, f64)>, StoreError> {
        self.measured(StoreOp::EstimatesAndCosts, async {
            self.dialect()
                .fetch(self.sql().estimates_and_costs, args!(since))
                .await?
                .iter()
                .map(|r| {
                    Ok((
                        r.parsed("operation")?,
                        seconds(r.int("estimated_micros")?),
                        seconds(r.int("measured_micros")?),
                    ))
                })
                .collect()
        })
        .await
    }
}
