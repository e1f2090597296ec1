//! The budget in the job table: the estimate each queued job carries, and budget rounds. A
//! round reads every due queued job and what the window's budgeted jobs spent (all replicas
//! together, [`tablekeeper_store::JobStore::budget_round`]), ranks them with
//! [`crate::policy::select`], and writes a verdict on each. Under `mode: enforce` a worker
//! claims only the jobs the latest round admitted; under `mode: shadow` every job runs and
//! the verdicts record what `enforce` would have deferred.
//!
//! Everything a round ranks by is in the job table (the estimate written when the job was
//! queued, its creation time from the database clock) or in the inventory, so every replica's
//! round reaches the same verdicts.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tablekeeper_delta::Probe;
use tablekeeper_inventory::{Budget, BudgetMode, Inventory, Operation, TableSpec};
use tablekeeper_store::{
    Deferral, JobVerdict, QueuedJob, RoundVerdicts, RoundWindow, Trigger, WindowSpend,
};
use tracing::{info, warn};

use crate::policy::estimate::{self, Estimate, Rates};
use crate::policy::select::{self, Candidate, DeferReason, MustRun, Verdict, Window};
use crate::shared::Shared;

/// What a queued job's `estimate` column holds (DESIGN.md "Budget"): the estimate, and the
/// facts of the moment it was queued that a round needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct JobEstimate {
    #[serde(flatten)]
    pub estimate: Estimate,
    /// The table's owner when queued: the window's spend is summed per owner by it.
    pub owner: String,
    /// The erasure deadline was at risk when the job was queued.
    #[serde(default)]
    pub erasure_at_risk: bool,
}

/// The estimate a job of `op` on `spec` gets when queued, from the table's latest probe.
/// `None` without a probe (the job then ranks as free and benefit-less until a tick with a
/// probe joins it).
pub(crate) fn estimate_job(
    spec: &TableSpec,
    op: Operation,
    probe: Option<&Probe>,
    rates: &Rates,
    now: DateTime<Utc>,
) -> Option<JobEstimate> {
    let probe = probe?;
    Some(JobEstimate::new(
        spec,
        op,
        estimate::estimate(spec, op, probe, rates),
        probe,
        now,
    ))
}

impl JobEstimate {
    /// `estimate` of a job of `op` on `spec`, with what the round needs beside it.
    pub(crate) fn new(
        spec: &TableSpec,
        op: Operation,
        estimate: Estimate,
        probe: &Probe,
        now: DateTime<Utc>,
    ) -> Self {
        JobEstimate {
            estimate,
            owner: spec.owner.clone(),
            erasure_at_risk: op == Operation::Purge
                && crate::policy::erasure::deadline_at_risk(spec, probe, now),
        }
    }
}

/// The window `budget` spends from at `now`.
pub(crate) fn window_of(budget: &Budget, now: DateTime<Utc>) -> (DateTime<Utc>, DateTime<Utc>) {
    select::window_at(now, budget.window)
}

/// What a round decided, for the metrics and the log.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct RoundSummary {
    pub admitted: usize,
    pub must_run: usize,
    /// Deferred (or would be) per (operation, reason).
    pub deferred: BTreeMap<(Operation, DeferReason), i64>,
    pub limit: f64,
    pub spent: f64,
}

/// A round's verdicts on `queued`, given what the window spent and each operation's last
/// success (pure).
pub(crate) fn decide(
    inventory: &Inventory,
    budget: &Budget,
    queued: &[QueuedJob],
    spend: &WindowSpend,
    last_success: impl Fn(&str, Operation) -> Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> (RoundVerdicts, RoundSummary) {
    let (_, end) = window_of(budget, now);
    let estimates: Vec<Option<JobEstimate>> = queued
        .iter()
        .map(|q| {
            q.estimate
                .as_ref()
                .and_then(|v| serde_json::from_value(v.clone()).ok())
        })
        .collect();
    let mut candidates = Vec::with_capacity(queued.len());
    let mut rows = Vec::with_capacity(queued.len());
    for (q, est) in queued.iter().zip(&estimates) {
        // a job for a table no longer in the inventory is left as it is: the executor
        // refuses it when it is claimed
        let Some(spec) = inventory.table(&q.table_name) else {
            continue;
        };
        let must_run = match (q.operation, q.trigger) {
            (Operation::Repair, _) => Some(MustRun::Repair),
            (_, Trigger::Manual) => Some(MustRun::Asked),
            _ if est.as_ref().is_some_and(|e| e.erasure_at_risk) => Some(MustRun::ErasureAtRisk),
            _ => None,
        };
        candidates.push(Candidate {
            table: &q.table_name,
            owner: est
                .as_ref()
                .map_or(spec.owner.as_str(), |e| e.owner.as_str()),
            operation: q.operation,
            importance: spec.importance,
            estimate: est.as_ref().map(|e| e.estimate).unwrap_or_default(),
            waiting_since: q.created_at,
            last_success: last_success(&q.table_name, q.operation),
            alert_after: select::alert_after(q.operation),
            must_run,
        });
        rows.push(q);
    }
    let window = Window {
        end,
        limit: budget.cpu_seconds,
        spent: spend.total,
        owner_caps: &budget.owners,
        owner_spent: spend.by_owner.clone(),
    };
    let selection = select::select(&candidates, &window, now);
    let shadow = budget.mode == BudgetMode::Shadow;
    let mut out = RoundVerdicts::default();
    let mut summary = RoundSummary {
        limit: budget.cpu_seconds,
        spent: spend.total,
        ..RoundSummary::default()
    };
    for ((verdict, candidate), q) in selection.verdicts.iter().zip(&candidates).zip(&rows) {
        let text = select::explain(verdict, candidate, &selection, &window);
        let (class, reason) = match verdict {
            Verdict::Admit { .. } => {
                summary.admitted += 1;
                (Some("budget".to_string()), None)
            }
            Verdict::MustRun(class) => {
                summary.must_run += 1;
                (Some(class.as_str().to_string()), None)
            }
            Verdict::Defer { reason, rank } => {
                *summary.deferred.entry((q.operation, *reason)).or_default() += 1;
                out.deferrals.push(Deferral {
                    id: q.id.0,
                    table: q.table_name.clone(),
                    operation: q.operation.as_str().to_string(),
                    reason: reason.as_str().to_string(),
                    rank: i64::try_from(*rank).unwrap_or(i64::MAX),
                    ranked: i64::try_from(selection.ranked).unwrap_or(i64::MAX),
                });
                // in shadow mode the job runs as a budgeted one, and says what enforce would do
                (
                    shadow.then(|| "budget".to_string()),
                    Some(reason.as_str().to_string()),
                )
            }
        };
        let note = if shadow && reason.is_some() {
            format!("shadow mode, runs; would be {text}")
        } else {
            text
        };
        out.verdicts.push(JobVerdict {
            id: q.id.0,
            class,
            reason,
            note,
        });
    }
    (out, summary)
}

/// Runs one budget round if the inventory has a budget, and publishes what it decided.
pub(crate) async fn round(rt: &Shared) {
    let inventory = rt.fleet.inventory();
    let Some(budget) = inventory.budget.clone() else {
        rt.metrics.set_budget(None);
        return;
    };
    let now = Utc::now();
    let (start, end) = window_of(&budget, now);
    let window = RoundWindow {
        start,
        end,
        limit_cpu_seconds: budget.cpu_seconds,
        mode: budget.mode.as_str(),
    };
    let mut summary = RoundSummary::default();
    let result = rt
        .store
        .budget_round(&window, |queued, spend| {
            let last_success = |table: &str, op| rt.fleet.last_success(table, op);
            let (verdicts, s) = decide(&inventory, &budget, queued, spend, last_success, now);
            summary = s;
            verdicts
        })
        .await;
    match result {
        Ok(_) => {
            let deferred: Vec<(Operation, &str, i64)> = Operation::ALL
                .into_iter()
                .flat_map(|op| DeferReason::ALL.map(|r| (op, r)))
                .map(|(op, r)| {
                    let n = summary.deferred.get(&(op, r)).copied().unwrap_or(0);
                    (op, r.as_str(), n)
                })
                .collect();
            rt.metrics.set_budget(Some(crate::metrics::BudgetFigures {
                deferred: &deferred,
                limit: summary.limit,
                spent: summary.spent,
            }));
            let deferred_total: i64 = summary.deferred.values().sum();
            if deferred_total > 0 {
                info!(
                    mode = budget.mode.as_str(),
                    admitted = summary.admitted,
                    must_run = summary.must_run,
                    deferred = deferred_total,
                    spent_cpu_seconds = summary.spent,
                    limit_cpu_seconds = summary.limit,
                    window_end = %end,
                    "budget round: candidates deferred"
                );
            }
        }
        Err(e) => warn!(error = %e, "budget round: cannot reach the job store"),
    }
}

/// Whether workers claim only what a budget round admitted.
pub(crate) fn enforced(inventory: &Inventory) -> bool {
    inventory
        .budget
        .as_ref()
        .is_some_and(|b| b.mode == BudgetMode::Enforce)
}

/// How many finished jobs the throughputs learn from (the newest ones).
const LEARN_FROM_JOBS: u32 = 1000;

/// The throughputs learnt from the newest finished jobs in the job store (every replica's).
pub(crate) async fn learnt_rates(rt: &Shared) -> Option<Rates> {
    let filter = tablekeeper_store::OperationsFilter {
        limit: Some(LEARN_FROM_JOBS),
        ..Default::default()
    };
    let jobs = match rt.store.finished_jobs(&filter).await {
        Ok(jobs) => jobs,
        Err(e) => {
            warn!(error = %e, "budget: cannot read finished jobs to learn throughputs from");
            return None;
        }
    };
    let mut rates = Rates::default();
    // oldest first, so the order matches the jobs' own
    for job in jobs.iter().rev() {
        let Some(result) = &job.result else { continue };
        let cost = result
            .get("cost")
            .and_then(|c| serde_json::from_value(c.clone()).ok());
        let outcome = result
            .get("outcome")
            .and_then(|c| serde_json::from_value(c.clone()).ok())
            .unwrap_or_default();
        if let Some(cost) = cost {
            rates.learn(job.operation, &cost, &outcome);
        }
    }
    Some(rates)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use tablekeeper_store::JobId;

    fn inventory(mode: &str) -> Inventory {
        let yaml = format!(
            "budget: {{ window: 1h, cpu_seconds: 10, mode: {mode} }}\ntables:\n  - {{ name: a, path: /d/a, owner: o }}\n  - {{ name: b, path: /d/b, owner: o, maintenance: {{ importance: high }} }}\n"
        );
        Inventory::parse(Path::new("inv.yaml"), &yaml).unwrap()
    }

    fn queued(id: i64, table: &str, op: Operation, cpu: f64, benefit: f64) -> QueuedJob {
        let est = JobEstimate {
            estimate: Estimate {
                cost: estimate::EstimatedCost {
                    cpu_seconds: cpu,
                    ..Default::default()
                },
                benefit,
            },
            owner: "o".into(),
            erasure_at_risk: false,
        };
        QueuedJob {
            id: JobId(id),
            table_name: table.into(),
            operation: op,
            trigger: Trigger::Schedule,
            created_at: "2026-11-29T11:59:00Z".parse().unwrap(),
            estimate: Some(serde_json::to_value(est).unwrap()),
        }
    }

    #[test]
    fn enforce_defers_past_the_budget_and_shadow_only_says_so() {
        let now: DateTime<Utc> = "2026-11-29T12:00:00Z".parse().unwrap();
        let jobs = [
            queued(1, "a", Operation::Compact, 8.0, 80.0),
            queued(2, "b", Operation::Compact, 8.0, 40.0),
            queued(3, "a", Operation::Repair, 50.0, 1.0),
        ];
        let spend = WindowSpend {
            total: 4.0,
            ..WindowSpend::default()
        };
        let inv = inventory("enforce");
        let (v, s) = decide(
            &inv,
            inv.budget.as_ref().unwrap(),
            &jobs,
            &spend,
            |_, _| None,
            now,
        );
        // b: 40 points × 4 (high) per 8 CPU-s ranks before a: 80 per 8
        assert_eq!(v.verdicts[1].class.as_deref(), Some("budget"));
        assert_eq!(v.verdicts[0].class, None);
        assert_eq!(v.verdicts[0].reason.as_deref(), Some("budget"));
        assert!(
            v.verdicts[0].note.contains("rank 2 of 2"),
            "{:?}",
            v.verdicts[0]
        );
        assert_eq!(v.verdicts[2].class.as_deref(), Some("repair"));
        assert_eq!(v.deferrals.len(), 1);
        assert_eq!(s.deferred[&(Operation::Compact, DeferReason::Budget)], 1);

        let inv = inventory("shadow");
        let (v, _) = decide(
            &inv,
            inv.budget.as_ref().unwrap(),
            &jobs,
            &spend,
            |_, _| None,
            now,
        );
        assert_eq!(
            v.verdicts[0].class.as_deref(),
            Some("budget"),
            "shadow runs it"
        );
        assert_eq!(v.verdicts[0].reason.as_deref(), Some("budget"));
        assert!(v.verdicts[0]
            .note
            .starts_with("shadow mode, runs; would be deferred"));
    }
}
