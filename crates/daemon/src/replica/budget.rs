//! The budget loop: a budget round every [`ROUND_INTERVAL`] while the inventory has a budget
//! (`jobs::budget`), the verdicts read back for the API and the dashboard, and the estimates'
//! throughputs relearnt from the job store's finished jobs every [`RELEARN_INTERVAL`] (with
//! or without a budget: the estimates are shown either way). Every replica runs it; the store serialises the rounds, so
//! the budget is the fleet's, not a replica's.

use std::sync::Arc;
use std::time::Duration;

use crate::shared::Shared;

/// How often a replica runs a budget round: a job queued under an enforced budget waits at
/// most this long for its verdict.
pub(crate) const ROUND_INTERVAL: Duration = Duration::from_secs(2);

/// How often the throughputs are relearnt from finished jobs.
const RELEARN_INTERVAL: Duration = Duration::from_secs(30);

/// Runs until the replica stops.
pub(crate) async fn budget_loop(rt: Arc<Shared>) {
    let mut rounds = tokio::time::interval(ROUND_INTERVAL);
    rounds.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut learnt_at: Option<tokio::time::Instant> = None;
    loop {
        tokio::select! {
            () = rt.shutdown.cancelled() => return,
            _ = rounds.tick() => {}
        }
        if learnt_at.is_none_or(|t| t.elapsed() >= RELEARN_INTERVAL) {
            if let Some(rates) = crate::jobs::budget::learnt_rates(&rt).await {
                rt.fleet.budget.set_rates(rates);
            }
            learnt_at = Some(tokio::time::Instant::now());
        }
        if rt.fleet.inventory().budget.is_none() {
            rt.metrics.set_budget(None);
            rt.fleet.budget.clear_verdicts();
            continue;
        }
        crate::jobs::budget::round(&rt).await;
        // every replica shows the verdicts the store holds, whichever replica's round wrote them
        match rt.store.budget_queue().await {
            Ok(rows) => rt.fleet.budget.set_verdicts(rows),
            Err(e) => tracing::warn!(error = %e, "budget: cannot read the queued jobs' verdicts"),
        }
    }
}
