//! What a replica knows of the budget: the throughputs its estimates use (relearnt from the
//! job store's finished jobs) and the latest round's verdict on every queued job (read back
//! from the job store after each round, so every replica shows the same verdicts).

use std::collections::BTreeMap;
use std::sync::RwLock;

use chrono::{DateTime, Utc};
use tablekeeper_inventory::{BudgetMode, Operation, TableSpec};
use tablekeeper_store::QueuedVerdict;

use super::view::TableView;
use crate::policy::estimate::{self, Estimate, Rates};
use crate::policy::planner::Decision;

/// A queued job's latest budget verdict.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct JobBudget {
    /// `budget`, a must-run class, or `None` (waits).
    pub class: Option<String>,
    /// `budget` or `owner_budget` while deferred (shadow mode: would be).
    pub reason: Option<String>,
    pub note: Option<String>,
    pub estimate: Option<Estimate>,
    pub deferred_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Default)]
pub(crate) struct BudgetKnowledge {
    rates: RwLock<Rates>,
    verdicts: RwLock<BTreeMap<(String, Operation), JobBudget>>,
}

impl BudgetKnowledge {
    pub(crate) fn rates(&self) -> Rates {
        self.rates.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub(crate) fn set_rates(&self, rates: Rates) {
        *self.rates.write().unwrap_or_else(|e| e.into_inner()) = rates;
    }

    /// Replaces the verdicts with the job store's (every queued job's).
    pub(crate) fn set_verdicts(&self, rows: Vec<QueuedVerdict>) {
        let verdicts = rows
            .into_iter()
            .map(|r| {
                let estimate = r
                    .estimate
                    .and_then(|v| serde_json::from_value::<Estimate>(v).ok());
                (
                    (r.table_name, r.operation),
                    JobBudget {
                        class: r.class,
                        reason: r.reason,
                        note: r.note,
                        estimate,
                        deferred_at: r.deferred_at,
                    },
                )
            })
            .collect();
        *self.verdicts.write().unwrap_or_else(|e| e.into_inner()) = verdicts;
    }

    /// Forgets every verdict (the inventory has no budget any more).
    pub(crate) fn clear_verdicts(&self) {
        self.verdicts
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    pub(crate) fn verdict(&self, table: &str, op: Operation) -> Option<JobBudget> {
        self.verdicts
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(table.to_string(), op))
            .cloned()
    }
}

impl BudgetKnowledge {
    /// Adds the budget to a table's operation views: each due operation's estimate (its
    /// queued job's, else one from the last probe), and the latest round's deferral: under
    /// `enforce` the decision becomes `deferred`, in shadow mode `would_defer` says so.
    pub(crate) fn overlay(&self, spec: &TableSpec, mode: Option<BudgetMode>, view: &mut TableView) {
        let rates = self.rates();
        for o in &mut view.operations {
            let verdict = self.verdict(&spec.name, o.operation);
            o.estimate = verdict.as_ref().and_then(|v| v.estimate).or_else(|| {
                view.probe
                    .as_deref()
                    .filter(|_| o.decision.should_run())
                    .map(|p| estimate::estimate(spec, o.operation, p, &rates))
            });
            let Some(JobBudget {
                reason: Some(_),
                note: Some(note),
                ..
            }) = verdict
            else {
                continue;
            };
            match mode {
                Some(BudgetMode::Enforce) => o.decision = Decision::Deferred(note),
                Some(BudgetMode::Shadow) => o.would_defer = Some(note),
                None => {}
            }
        }
    }
}
