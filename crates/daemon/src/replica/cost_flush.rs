//! Counts and stores what this replica's probes cost (operation `probe`), once a minute and
//! when the replica stops: each table's probe meter is read (`Fleet::take_probe_costs`),
//! priced into the cost counters, and added to the table's row of the day in `probe_costs`,
//! where the chargeback report and the fleet page read every replica's.
//!
//! A period the store cannot take is kept and added to the next one, so nothing counted is
//! lost while Postgres is away; at most [`ROWS_PER_FLUSH`] tables are written per flush (the
//! rest wait, added up). The last flush, at shutdown, writes them all.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use chrono::{DurationRound, TimeDelta, Utc};
use tablekeeper_vocab::{Cost, PROBE_OPERATION};
use tracing::warn;

use crate::fleet::ProbeCost;
use crate::shared::Shared;

/// How often probe costs are counted and stored.
pub(crate) const FLUSH_EVERY: Duration = Duration::from_secs(60);

/// Tables' rows written per flush at most (one statement each): a fleet of thousands spreads
/// its rows over several flushes, the rest waiting (added up) in [`Pending`], so a flush never
/// holds the refresher for long.
const ROWS_PER_FLUSH: usize = 500;

/// What was measured and not stored yet, per table.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    costs: BTreeMap<String, ProbeCost>,
    last: Option<Instant>,
}

/// Counts and stores the probe costs measured since the last flush, if [`FLUSH_EVERY`]
/// passed, or everything at once when `last_time` (the replica is stopping).
pub(crate) async fn flush(rt: &Shared, pending: &mut Pending, last_time: bool) {
    if !last_time && pending.last.is_some_and(|t| t.elapsed() < FLUSH_EVERY) {
        return;
    }
    pending.last = Some(Instant::now());
    for spent in rt.fleet.take_probe_costs() {
        let priced = rt.config.prices.priced(spent.cost);
        rt.metrics
            .count_cost(&spent.owner, PROBE_OPERATION, &priced);
        let entry = pending
            .costs
            .entry(spent.table.clone())
            .or_insert_with(|| ProbeCost {
                cost: Cost::default(),
                ..spent.clone()
            });
        entry.owner = spent.owner;
        entry.cost = entry.cost.plus(&spent.cost);
    }
    let Ok(day) = Utc::now().duration_trunc(TimeDelta::days(1)) else {
        return;
    };
    let replica = rt.config.replica_id.as_str();
    let mut stored = Vec::new();
    let rows = if last_time {
        usize::MAX
    } else {
        ROWS_PER_FLUSH
    };
    for (table, spent) in pending.costs.iter().take(rows) {
        match rt
            .store
            .record_probe_costs(replica, day, table, &spent.owner, &spent.cost)
            .await
        {
            Ok(()) => stored.push(table.clone()),
            Err(e) => {
                warn!(error = %e, table = %table, "cannot store what the table's probes cost; kept for the next flush");
                break;
            }
        }
    }
    for table in stored {
        pending.costs.remove(&table);
    }
}
