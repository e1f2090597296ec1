//! Probe rounds: the tables whose probe is due, a few at a time, each probed and recorded
//! ([`crate::schedule::record`]). The refresher runs a round every few seconds; `plan` probes
//! the whole fleet once without recording.

use futures::StreamExt;

use crate::fleet::Fleet;
use crate::shared::Shared;

/// Tables probed at once. Probes wait on storage round trips (object stores: tens of
/// milliseconds each), so one at a time would take minutes per round for a large fleet;
/// a small bound keeps a fleet of thousands from opening thousands of connections at once.
const PROBE_CONCURRENCY: usize = 8;

/// Probes every table whose probe is due, [`PROBE_CONCURRENCY`] at a time, and records what
/// the probes read ([`crate::schedule::record`]).
pub async fn probe_due(rt: &Shared) {
    let (inventory, due) = rt.fleet.due_for_probe();
    futures::stream::iter(due.iter().filter_map(|&i| inventory.tables.get(i)))
        .for_each_concurrent(PROBE_CONCURRENCY, |spec| async move {
            // a round in progress at shutdown finishes the probes it started, no more
            if !rt.stopping() {
                let _ = crate::schedule::record::probe(rt, spec).await;
            }
        })
        .await;
}

/// Probes every table, [`PROBE_CONCURRENCY`] at a time, without recording anything (for
/// commands that run without a job store).
pub(crate) async fn probe_all_fleet(fleet: &Fleet) {
    let inventory = fleet.inventory();
    futures::stream::iter(&inventory.tables)
        .for_each_concurrent(PROBE_CONCURRENCY, |spec| async move {
            let _ = fleet.probe(spec).await;
        })
        .await;
}
