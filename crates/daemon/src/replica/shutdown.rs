//! Draining a replica on SIGTERM/SIGINT, in this order: mutating routes refuse (and `/readyz`
//! turns 503), workers and task coordinators stop claiming, the scheduler stops, running jobs
//! get `shutdown_grace` to finish, the rest are released for other replicas; then nothing new
//! starts (no tick, no probe: `Shared::shutdown` fires, and every loop's wait ends on it), the
//! background loops end, the replica leaves the live set (the others take its tables over at
//! once), HTTP stops, every task the replica started is awaited (a table load in flight
//! finishes: cutting it off would crash deltalake's blocking threads), and the job store's
//! pool closes.

use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::jobs::stops::Stops;
use crate::replica::control::Stop;
use crate::schedule::cron::Scheduler;
use crate::shared::Shared;

/// After the grace period ends, how long released jobs get to write their release.
const RELEASE_WAIT: Duration = Duration::from_secs(10);
/// How long shutdown waits for probes and ticks already in flight: a table load takes
/// seconds even on a slow object store, and bounded store calls (`store_timeout`) end on
/// their own.
const TASK_DRAIN: Duration = Duration::from_secs(60);

/// What a started replica runs, for the drain to stop in order.
#[derive(Debug)]
pub(crate) struct Running {
    pub scheduler: Option<Scheduler>,
    pub http: JoinHandle<std::io::Result<()>>,
    pub http_stop: CancellationToken,
    /// The background loops: each ends when `Shared::shutdown` fires.
    pub loops: Vec<JoinHandle<()>>,
    pub workers: JoinHandle<()>,
    /// What the workers obey: stop claiming first, stop now once the grace ran out.
    pub stops: Stops,
}

/// Drains the replica (module docs) and returns when it is safe to exit.
pub(crate) async fn drain(shared: &Shared, running: Running, reason: Stop) {
    let Running {
        scheduler,
        http,
        http_stop,
        loops,
        workers,
        stops,
    } = running;
    let grace = shared.config.shutdown_grace;
    shared.stop_accepting_mutations();
    // claiming stops before the line is logged, and no start is logged after it
    stops.begin_drain(|| {
        info!(signal = reason.as_str(), grace = ?grace, "shutting down: no new jobs, draining running ones");
    });
    if let Some(scheduler) = scheduler {
        scheduler.shutdown().await;
    }
    let workers_abort = workers.abort_handle();
    tokio::pin!(workers);
    if tokio::time::timeout(grace, &mut workers).await.is_err() {
        warn!("shutdown grace ran out: releasing running jobs to other replicas");
        stops.hard.cancel();
        if tokio::time::timeout(RELEASE_WAIT, &mut workers)
            .await
            .is_err()
        {
            workers_abort.abort();
        }
    }
    // nothing new starts from here: no tick, no probe round, no loop iteration
    shared.shutdown.cancel();
    for handle in loops {
        let _ = handle.await;
    }
    // the others take this replica's tables over now rather than when it ages out
    if let Err(e) = shared.store.leave_replica(&shared.config.replica_id).await {
        warn!(error = %e, "cannot leave the live replicas; the others take its tables over once it ages out");
    }
    http_stop.cancel();
    match http.await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => warn!(error = %e, "http server stopped with an error"),
        Err(e) => warn!(error = %e, "http task failed"),
    }
    shared.tasks.close();
    if tokio::time::timeout(TASK_DRAIN, shared.tasks.wait())
        .await
        .is_err()
    {
        warn!(
            tasks = shared.tasks.len(),
            "probes still running after the drain period; exiting without them"
        );
    }
    shared.store.close().await;
    info!("tablekeeper stopped");
}
