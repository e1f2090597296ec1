//! Runs an operation while holding its lease: renews it on the [`LeaseClock`]'s schedule and
//! drops the operation (cancelling the Delta operation before it can commit) as soon as the
//! lease is known lost or can no longer be confirmed before the clock's abandon deadline,
//! which the store's proof (`tablekeeper_store::lease`) places strictly before any other
//! replica may take the job over.
//!
//! Lease safety (DESIGN.md hazards: two compactions of the same files both commit and
//! duplicate rows) rests on this module alone; it holds no database transaction while the
//! operation runs and reads time only from tokio's clock, so the tests below drive it under
//! paused time against a real SQLite job store.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use tablekeeper_store::{JobStore, Lease, LeaseClock, StoreError, TaskLease};
use tokio_util::sync::CancellationToken;
use tracing::{error, warn};

/// Why a worker gave up its job's lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LeaseLoss {
    /// The deadline counted from the claim had passed before the operation could start
    /// (the store was slow to answer): another replica may own the job already.
    ClaimedTooLate,
    /// No renewal was confirmed in time.
    NotConfirmed,
    /// A renewal answered that the lease is gone (the job was taken over or cancelled).
    Gone,
}

/// How a watched operation ended.
#[derive(Debug)]
pub(crate) enum Watched<T> {
    Finished(T),
    LeaseLost(LeaseLoss),
    /// The replica is shutting down past its grace period.
    Shutdown,
    /// The table's `maintenance.timeout` ran out.
    TimedOut(Duration),
}

/// A lease renewal in flight: when it was sent, and what the store answered.
type Renewal<'a> =
    Pin<Box<dyn Future<Output = (Instant, Result<Option<DateTime<Utc>>, StoreError>)> + Send + 'a>>;

/// What a renewal answers: the new expiry, or `None` when the lease is lost.
pub(crate) type RenewFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Option<DateTime<Utc>>, StoreError>> + Send + 'a>>;

/// A lease the watch can renew: a job's, or one task's (whose renewal also fails once the
/// task's job stops running, so a task never outlives its job's hold on the table's key).
pub(crate) trait Renew: Sync {
    /// Extends the lease by `length`; `None` when it is lost.
    fn renew<'a>(&'a self, store: &'a JobStore, length: Duration) -> RenewFuture<'a>;
}

impl Renew for Lease {
    fn renew<'a>(&'a self, store: &'a JobStore, length: Duration) -> RenewFuture<'a> {
        Box::pin(store.heartbeat(self, length))
    }
}

impl Renew for TaskLease {
    fn renew<'a>(&'a self, store: &'a JobStore, length: Duration) -> RenewFuture<'a> {
        Box::pin(store.heartbeat_task(self, length))
    }
}

/// Now on tokio's clock, which tests pause and advance.
fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

fn until(instant: Instant) -> tokio::time::Sleep {
    tokio::time::sleep_until(tokio::time::Instant::from_std(instant))
}

/// Runs `operation` while renewing `lease` in `store` on `clock`'s schedule. The clock holds
/// the claim's send time, so a claim that took long to answer leaves less time, or none: the
/// operation is then never started. At most one renewal is in flight, polled beside the
/// operation, so a slow store never stalls the operation and a stalled renewal never delays
/// the deadline.
pub(crate) async fn watch<F: Future>(
    store: &JobStore,
    lease: &impl Renew,
    mut clock: LeaseClock,
    operation: F,
    hard_stop: &CancellationToken,
    timeout: Duration,
) -> Watched<F::Output> {
    if clock.must_abandon(now()) {
        error!(lease = ?clock.lease(), "lease could not be confirmed in time after the claim: abandoning the operation before it starts, another replica may take the job over");
        return Watched::LeaseLost(LeaseLoss::ClaimedTooLate);
    }
    tokio::pin!(operation);
    let timed_out = tokio::time::sleep(timeout);
    tokio::pin!(timed_out);
    let mut renewal: Option<Renewal<'_>> = None;
    loop {
        tokio::select! {
            biased;
            output = &mut operation => return Watched::Finished(output),
            () = hard_stop.cancelled() => return Watched::Shutdown,
            () = until(clock.deadline()) => {
                error!(lease = ?clock.lease(), "lease could not be renewed in time: abandoning the operation before another replica can take the job over");
                return Watched::LeaseLost(LeaseLoss::NotConfirmed);
            }
            () = &mut timed_out => return Watched::TimedOut(timeout),
            (sent, renewed) = async {
                match renewal.as_mut() {
                    Some(pending) => pending.await,
                    None => std::future::pending().await,
                }
            }, if renewal.is_some() => {
                renewal = None;
                match renewed {
                    Ok(Some(_)) => clock.renewed(sent),
                    Ok(None) => {
                        error!("lease lost (the job was taken over or cancelled): abandoning the operation");
                        return Watched::LeaseLost(LeaseLoss::Gone);
                    }
                    Err(e) => {
                        warn!(error = %e, "heartbeat failed; will retry until the abandon deadline");
                        clock.renewal_failed(sent);
                    }
                }
            }
            () = until(clock.next_heartbeat()), if renewal.is_none() => {
                let sent = now();
                let length = clock.lease();
                renewal = Some(Box::pin(async move { (sent, lease.renew(store, length).await) }));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! Paused tokio time drives the clock; a task that keeps yielding keeps the runtime
    //! busy so time moves only when a test advances it (an idle paused runtime would jump to
    //! the next timer while the real SQLite store answers on its own thread).

    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    use tablekeeper_store::{
        connect, ClaimedJob, NewJob, Operation, StoreOptions, Trigger, DEFAULT_CALL_TIMEOUT,
    };

    use super::*;

    const LEASE: Duration = Duration::from_secs(40);

    async fn store() -> Arc<JobStore> {
        let options = StoreOptions {
            call_timeout: Some(DEFAULT_CALL_TIMEOUT),
            ..StoreOptions::default()
        };
        let store = connect("sqlite::memory:", options).await.unwrap();
        store.migrate().await.unwrap();
        store
    }

    async fn claim(store: &JobStore) -> (ClaimedJob, Instant) {
        store
            .enqueue(NewJob::new("t", Operation::Compact, Trigger::Manual))
            .await
            .unwrap();
        let sent = now();
        let claimed = store.claim("w", LEASE).await.unwrap().job.unwrap();
        (claimed, sent)
    }

    /// Keeps the runtime from idling, so paused time never auto-advances.
    fn keep_busy() -> tokio::task::JoinHandle<()> {
        tokio::spawn(async {
            loop {
                tokio::task::yield_now().await;
            }
        })
    }

    /// Lets in-flight store calls answer (they run on SQLite's own thread).
    async fn settle() {
        let started = std::time::Instant::now();
        while started.elapsed() < Duration::from_millis(30) {
            tokio::task::yield_now().await;
        }
    }

    /// An operation that never ends and records whether it was ever polled.
    async fn endless(polled: Arc<AtomicBool>) {
        polled.store(true, Ordering::SeqCst);
        std::future::pending::<()>().await
    }

    /// Watches an endless operation on the claimed job in the background; `polled` tells
    /// whether the operation ever started.
    fn spawn_watch(
        store: &Arc<JobStore>,
        claimed: &ClaimedJob,
        sent: Instant,
        polled: &Arc<AtomicBool>,
    ) -> tokio::task::JoinHandle<Watched<()>> {
        let (store, lease, polled) = (store.clone(), claimed.lease, polled.clone());
        tokio::spawn(async move {
            let clock = LeaseClock::new(sent, LEASE);
            let stop = CancellationToken::new();
            watch(&store, &lease, clock, endless(polled), &stop, LEASE * 100).await
        })
    }

    /// Advances time in steps of `step` until the watch ends or `limit` passes; returns how
    /// long after `from` it ended.
    async fn run_until_end<T: std::fmt::Debug>(
        watch: &mut tokio::task::JoinHandle<Watched<T>>,
        from: Instant,
        step: Duration,
        limit: Duration,
    ) -> Option<(Duration, Watched<T>)> {
        while now() - from <= limit {
            settle().await;
            if watch.is_finished() {
                let ended = watch.await.unwrap();
                return Some((now() - from, ended));
            }
            tokio::time::advance(step).await;
        }
        None
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn renewals_keep_the_operation_running_for_many_leases() {
        let busy = keep_busy();
        let store = store().await;
        let (claimed, sent) = claim(&store).await;
        let polled = Arc::new(AtomicBool::new(false));
        let mut watch = spawn_watch(&store, &claimed, sent, &polled);
        let ended = run_until_end(&mut watch, sent, LEASE / 8, LEASE * 4).await;
        assert!(
            ended.is_none(),
            "a renewed lease must not end the operation: {ended:?}"
        );
        assert!(polled.load(Ordering::SeqCst));
        let job = store.get_job(claimed.job.id).await.unwrap().unwrap();
        assert!(
            job.lease_expires_at.unwrap() > claimed.lease_expires_at,
            "the heartbeats moved the lease"
        );
        watch.abort();
        busy.abort();
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn an_unreachable_store_abandons_before_the_deadline_after_retrying() {
        let busy = keep_busy();
        let store = store().await;
        let (claimed, sent) = claim(&store).await;
        // every renewal from now on fails: the pool is gone
        store.close().await;
        let polled = Arc::new(AtomicBool::new(false));
        let mut watch = spawn_watch(&store, &claimed, sent, &polled);
        let step = LEASE / 40;
        let (after, ended) = run_until_end(&mut watch, sent, step, LEASE * 2)
            .await
            .expect("the operation is abandoned");
        assert!(
            matches!(ended, Watched::LeaseLost(LeaseLoss::NotConfirmed)),
            "{ended:?}"
        );
        let deadline = tablekeeper_store::lease::abandon_after(LEASE);
        assert!(
            after >= deadline,
            "abandoned at {after:?}, before the deadline {deadline:?}: renewals were not retried"
        );
        assert!(
            after <= deadline + step,
            "abandoned at {after:?}, past the deadline {deadline:?}"
        );
        assert!(polled.load(Ordering::SeqCst));
        busy.abort();
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_renewal_that_finds_the_lease_gone_abandons_at_once() {
        let busy = keep_busy();
        let store = store().await;
        let (claimed, sent) = claim(&store).await;
        // another party takes the job back (as a reaper would)
        assert!(store.release(&claimed.lease, "taken back").await.unwrap());
        let polled = Arc::new(AtomicBool::new(false));
        let mut watch = spawn_watch(&store, &claimed, sent, &polled);
        let step = LEASE / 40;
        let (after, ended) = run_until_end(&mut watch, sent, step, LEASE * 2)
            .await
            .expect("the operation is abandoned");
        assert!(
            matches!(ended, Watched::LeaseLost(LeaseLoss::Gone)),
            "{ended:?}"
        );
        let first_heartbeat = tablekeeper_store::heartbeat_interval(LEASE);
        assert!(
            after <= first_heartbeat + step,
            "abandoned at {after:?}: the first renewal, due at {first_heartbeat:?}, said the lease was gone"
        );
        busy.abort();
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn an_operation_is_never_started_after_a_slow_claim() {
        let busy = keep_busy();
        let store = store().await;
        let (claimed, sent) = claim(&store).await;
        // the claim's answer came back after the abandon deadline
        tokio::time::advance(tablekeeper_store::lease::abandon_after(LEASE)).await;
        let polled = Arc::new(AtomicBool::new(false));
        let clock = LeaseClock::new(sent, LEASE);
        let ended = watch(
            &store,
            &claimed.lease,
            clock,
            endless(polled.clone()),
            &CancellationToken::new(),
            LEASE,
        )
        .await;
        assert!(
            matches!(ended, Watched::LeaseLost(LeaseLoss::ClaimedTooLate)),
            "{ended:?}"
        );
        assert!(
            !polled.load(Ordering::SeqCst),
            "the operation must not start"
        );
        busy.abort();
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_finished_operation_and_a_shutdown_end_the_watch() {
        let busy = keep_busy();
        let store = store().await;
        let (claimed, sent) = claim(&store).await;
        let clock = LeaseClock::new(sent, LEASE);
        let stop = CancellationToken::new();
        let ended = watch(&store, &claimed.lease, clock, async { 7 }, &stop, LEASE).await;
        assert!(matches!(ended, Watched::Finished(7)), "{ended:?}");
        stop.cancel();
        let polled = Arc::new(AtomicBool::new(false));
        let ended = watch(&store, &claimed.lease, clock, endless(polled), &stop, LEASE).await;
        assert!(matches!(ended, Watched::Shutdown), "{ended:?}");
        busy.abort();
    }
}
