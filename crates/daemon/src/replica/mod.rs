//! One running replica (`tablekeeper run`): assembled from the job store, the fleet state, the
//! cron schedules, the workers, the background loops and HTTP ([`serve`]); answering signals
//! and inventory reloads, neither of which can hold up the other ([`control`], [`reload`]);
//! drained on SIGTERM/SIGINT ([`shutdown`]).
//!
//! The loops that keep a replica current live here too, each in its own file: the reaper
//! (jobs of crashed replicas), the refresher (gauges and probe rounds), probe sharing (who
//! probes which table), the reaction to finished jobs ([`after_jobs`]), the probes' cost
//! ([`cost_flush`]), the budget rounds ([`budget`]). Each survives any single failure: it logs with fields and goes on, and
//! every wait in it ends when the replica shuts down.

pub(crate) mod after_jobs;
pub(crate) mod budget;
pub(crate) mod control;
pub(crate) mod cost_flush;
pub(crate) mod fleet_health;
#[cfg(test)]
mod probe_cost;
pub(crate) mod reaper;
pub(crate) mod refresher;
pub(crate) mod reload;
pub(crate) mod serve;
pub(crate) mod sharing;
pub(crate) mod shutdown;

pub(crate) use serve::serve;
