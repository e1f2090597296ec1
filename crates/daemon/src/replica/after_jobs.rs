//! What a replica does when one of its job attempts ends (the workers report it through
//! [`Shared::job_finished`]): the failure streaks are read again from the job table (a streak
//! is the fleet's, not this replica's), and after a success the table's cached reads expire and
//! it is probed at once (on a replica that plans), so its figures show the maintenance just
//! done; otherwise its gauges are republished from what is known.
//!
//! The workers never probe: they report, and this loop reacts, so the job layer does not
//! reach up into the probe rounds.

use std::sync::Arc;

use chrono::Utc;
use tablekeeper_store::AttemptOutcome;

use crate::config::Role;
use crate::replica::refresher::refresh_failure_streaks;
use crate::shared::Shared;

/// Reacts to finished attempts until the replica shuts down.
pub(crate) async fn after_jobs(shared: Arc<Shared>) {
    loop {
        let finished = tokio::select! {
            () = shared.shutdown.cancelled() => return,
            finished = shared.finished_jobs() => finished,
        };
        refresh_failure_streaks(&shared).await;
        for (table, outcome) in finished {
            let Some(spec) = shared.fleet.spec(&table) else {
                continue; // removed by a reload meanwhile
            };
            let succeeded = outcome == AttemptOutcome::Succeeded;
            if succeeded {
                shared.fleet.expire_cached_reads(&spec).await;
            }
            // a worker probes nothing: the replicas that plan see the result on their next probe
            let probed = succeeded
                && shared.config.role == Role::All
                && !shared.stopping()
                && crate::schedule::record::probe(&shared, &spec).await.is_ok();
            if !probed {
                crate::metrics::publish::table(&shared.metrics, &shared.fleet, &spec, Utc::now());
            }
        }
    }
}
