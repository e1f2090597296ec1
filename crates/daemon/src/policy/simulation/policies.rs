//! The policies the simulation compares, each choosing which queued candidates run in a
//! budget window: today's thresholds (no budget), first come first served under the budget,
//! LinkedIn AutoComp's published scoring under the budget, and tablekeeper's
//! [`select`](crate::policy::select::select). First come first served and AutoComp also run
//! with tablekeeper's must-run classes exempt from the budget, as tablekeeper's are: that
//! compares the orders alone, at about the same CPU.

use chrono::{DateTime, Utc};

use crate::policy::select::{self, Candidate, Verdict, Window};

/// A policy the simulation runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Policy {
    /// Every candidate runs: what the daemon does without a budget.
    Thresholds,
    /// Oldest candidate first while the budget lasts.
    FirstComeFirstServed,
    /// AutoComp's score, 0.7 × normalised gain − 0.3 × normalised cost, best first while the
    /// budget lasts.
    AutoComp,
    /// [`select::select`]: benefit per CPU-second, weighted and aged; must-run classes.
    Tablekeeper,
    /// [`Policy::FirstComeFirstServed`] with the must-run classes run first, outside the budget.
    FirstComeFirstServedExempt,
    /// [`Policy::AutoComp`] with the must-run classes run first, outside the budget.
    AutoCompExempt,
}

impl Policy {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Policy::Thresholds => "thresholds, no budget",
            Policy::FirstComeFirstServed => "first come, first served",
            Policy::AutoComp => "AutoComp scoring",
            Policy::Tablekeeper => "tablekeeper",
            Policy::FirstComeFirstServedExempt => "first come, first served + must-runs exempt",
            Policy::AutoCompExempt => "AutoComp scoring + must-runs exempt",
        }
    }

    /// Must-run candidates run outside the budget (and are not paid from it).
    pub(crate) fn exempts_must_runs(self) -> bool {
        matches!(
            self,
            Policy::Tablekeeper | Policy::FirstComeFirstServedExempt | Policy::AutoCompExempt
        )
    }
}

/// What AutoComp reads of a candidate beyond the estimate.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AutoCompFacts {
    /// Small files the operation removes (AutoComp's gain; 0 for operations that remove none).
    pub small_files_removed: f64,
    /// An unpartitioned table written in the last 7 days: AutoComp zeroes its gain.
    pub unpartitioned_recently_written: bool,
}

/// AutoComp's cost: GB-hours of a 2 GB executor reading at 2 MB/s, plus its start-up (taken
/// as 0.1 GB-hour: the published model names a start-up cost without a figure).
fn autocomp_cost_gb_hours(bytes: u64) -> f64 {
    const READ_BYTES_PER_SECOND: f64 = 2e6;
    const EXECUTOR_GB: f64 = 2.0;
    const STARTUP_GB_HOURS: f64 = 0.1;
    bytes as f64 / READ_BYTES_PER_SECOND / 3600.0 * EXECUTOR_GB + STARTUP_GB_HOURS
}

/// What `policy` does with `candidates` in `window` at `now`: for each candidate, whether it
/// runs now and whether it is a must-run (tablekeeper's classes, whatever the policy: the
/// simulation counts a must-run that does not run as a miss).
pub(crate) fn choose(
    policy: Policy,
    candidates: &[Candidate<'_>],
    facts: &[AutoCompFacts],
    window: &Window<'_>,
    now: DateTime<Utc>,
) -> Vec<bool> {
    match policy {
        Policy::Thresholds => vec![true; candidates.len()],
        Policy::Tablekeeper => select::select(candidates, window, now)
            .verdicts
            .iter()
            .map(|v| !matches!(v, Verdict::Defer { .. }))
            .collect(),
        Policy::FirstComeFirstServed | Policy::FirstComeFirstServedExempt => {
            let mut order: Vec<usize> = (0..candidates.len()).collect();
            order.sort_by(|&a, &b| {
                candidates[a]
                    .waiting_since
                    .cmp(&candidates[b].waiting_since)
                    .then(candidates[a].table.cmp(candidates[b].table))
                    .then(candidates[a].operation.cmp(&candidates[b].operation))
            });
            admit_in_order(&order, candidates, window, exempt(policy, candidates, now))
        }
        Policy::AutoComp | Policy::AutoCompExempt => {
            let gains: Vec<f64> = facts
                .iter()
                .map(|f| {
                    if f.unpartitioned_recently_written {
                        0.0
                    } else {
                        f.small_files_removed
                    }
                })
                .collect();
            let costs: Vec<f64> = candidates
                .iter()
                .map(|c| autocomp_cost_gb_hours(c.estimate.cost.bytes))
                .collect();
            let max_gain = gains.iter().copied().fold(0.0, f64::max);
            let max_cost = costs.iter().copied().fold(0.0, f64::max);
            let norm = |v: f64, max: f64| if max > 0.0 { v / max } else { 0.0 };
            let score: Vec<f64> = gains
                .iter()
                .zip(&costs)
                .map(|(g, c)| 0.7 * norm(*g, max_gain) - 0.3 * norm(*c, max_cost))
                .collect();
            let mut order: Vec<usize> = (0..candidates.len()).collect();
            order.sort_by(|&a, &b| {
                score[b]
                    .total_cmp(&score[a])
                    .then(candidates[a].table.cmp(candidates[b].table))
                    .then(candidates[a].operation.cmp(&candidates[b].operation))
            });
            admit_in_order(&order, candidates, window, exempt(policy, candidates, now))
        }
    }
}

/// Which candidates `policy` runs outside the budget: the must-runs, if it exempts them.
fn exempt(policy: Policy, candidates: &[Candidate<'_>], now: DateTime<Utc>) -> Vec<bool> {
    candidates
        .iter()
        .map(|c| policy.exempts_must_runs() && c.must_run_at(now).is_some())
        .collect()
}

/// Admits the `exempt` candidates, then the others in `order` while the window's spend is
/// under its budget.
fn admit_in_order(
    order: &[usize],
    candidates: &[Candidate<'_>],
    window: &Window<'_>,
    exempt: Vec<bool>,
) -> Vec<bool> {
    let mut admitted = exempt;
    let mut spent = window.spent;
    for &i in order {
        if spent >= window.limit {
            break;
        }
        if !admitted[i] {
            admitted[i] = true;
            spent += candidates[i].estimate.cost.cpu_seconds;
        }
    }
    admitted
}
