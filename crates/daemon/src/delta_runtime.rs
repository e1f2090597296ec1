//! Where Delta work runs: maintenance operations and table probes get a tokio runtime of
//! their own, apart from the one that renews leases, answers HTTP and schedules. Probes share
//! one ([`spawn`]); each job and task runs on one of its own ([`run_metered`]), whose threads
//! count the CPU it costs.
//!
//! Tokio schedules cooperatively: a task that computes for seconds without reaching an
//! `.await` holds its worker thread, and reading or rewriting a table does exactly that
//! (log replay, Parquet decoding and encoding, DataFusion's Z-order sort). On a 2-core
//! machine one Z-order held both of the main runtime's threads, so a healthy worker's lease
//! renewals went unsent and it abandoned its own job (seen in CI as a second `lost_lease`
//! in `faults/lease_takeover`). Threads of a separate runtime are preempted by the
//! operating system instead, so the lease watch, `/metrics` and `/readyz` keep their
//! schedule however hard the Delta work computes.
//!
//! It owns no policy: what runs, and when it must stop, is the caller's. Dropping the
//! future [`spawn`] returns aborts the work at its next `.await`, as dropping the work
//! itself did before it ran here, so abandoning a lease still cancels the rewrite before it
//! can commit.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use tablekeeper_delta::cost::{scope, Meter};
use tokio_util::task::AbortOnDropHandle;

/// Name of the runtime's threads (visible in `top -H` and in panics).
const THREAD_NAME: &str = "tablekeeper-delta";

/// The process's Delta runtime, built on first use and kept for the life of the
/// process: deltalake's kernel blocks its own threads on tasks of the runtime that started
/// them, so it is never shut down under them.
fn runtime() -> Result<&'static tokio::runtime::Runtime, String> {
    static RUNTIME: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .thread_name(THREAD_NAME)
                .enable_all()
                .build()
                .map_err(|e| format!("cannot start the runtime Delta work runs on: {e}"))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Threads of a runtime that runs one job or task.
const JOB_THREAD_NAME: &str = "tablekeeper-job";

/// How long a finished job's runtime may take to stop its threads (and so count their CPU)
/// before the work's result is returned without the rest of it.
const JOB_RUNTIME_STOP: Duration = Duration::from_secs(10);

/// Runs `operation` on a runtime of its own, every thread of which counts its CPU into
/// `meter` and makes it current ([`tablekeeper_delta::cost::scope`]), so the operation's cost
/// is what its threads spent, whatever it spawned: DataFusion's and the kernel's tasks and
/// blocking reads included. The runtime stops when the operation ends (its threads' CPU is
/// counted before this returns) or when this future is dropped (the work is aborted at its
/// next `.await`, as [`spawn`]'s is).
///
/// Nothing the operation opens may outlive it: deltalake's kernel runs its reads on the
/// runtime that opened the table, which stops here. Jobs and tasks return plain reports.
pub(crate) async fn run_metered<F>(meter: Arc<Meter>, operation: F) -> Result<F::Output, Crashed>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let building = std::time::Instant::now();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(std::thread::available_parallelism().map_or(1, usize::from))
        .thread_name(JOB_THREAD_NAME)
        .on_thread_start(move || scope::enter_thread(Arc::clone(&meter)))
        .on_thread_stop(scope::leave_thread)
        .enable_all()
        .build()
        .map_err(|e| Crashed::NoRuntime(format!("cannot start a runtime for the job: {e}")))?;
    let built = building.elapsed();
    let mut stopping = StopOnDrop(Some(runtime));
    let handle = match stopping.0.as_ref() {
        Some(runtime) => AbortOnDropHandle::new(runtime.spawn(operation)),
        None => return Err(Crashed::NoRuntime("the job's runtime is gone".into())),
    };
    let joined = Running {
        handle: Some(handle),
        not_started: None,
    }
    .await;
    if let Some(runtime) = stopping.0.take() {
        // waits for the threads to stop, so their CPU is counted before the caller reads it
        let stopping = std::time::Instant::now();
        let _ =
            tokio::task::spawn_blocking(move || runtime.shutdown_timeout(JOB_RUNTIME_STOP)).await;
        // what measuring costs a job (BENCHMARKS.md "What measuring costs")
        tracing::debug!(
            start_us = built.as_micros(),
            stop_us = stopping.elapsed().as_micros(),
            "job runtime started and stopped"
        );
    }
    joined
}

/// Stops a job's runtime without waiting when its caller goes away mid-job.
struct StopOnDrop(Option<tokio::runtime::Runtime>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

/// Why spawned work produced no output.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Crashed {
    #[error("{0}")]
    NoRuntime(String),
    #[error("panicked: {0} (a tablekeeper bug: please report it with the log above)")]
    Panicked(String),
}

/// Work running on the Delta runtime; aborted when dropped.
#[must_use = "the work stops when its handle is dropped"]
pub(crate) struct Running<T> {
    handle: Option<AbortOnDropHandle<T>>,
    not_started: Option<String>,
}

/// Starts `operation` on the Delta runtime.
pub(crate) fn spawn<F>(operation: F) -> Running<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    match runtime() {
        Ok(runtime) => Running {
            handle: Some(AbortOnDropHandle::new(runtime.spawn(operation))),
            not_started: None,
        },
        Err(e) => Running {
            handle: None,
            not_started: Some(e),
        },
    }
}

impl<T> Future for Running<T> {
    type Output = Result<T, Crashed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let Some(handle) = this.handle.as_mut() else {
            let reason = this.not_started.take().unwrap_or_default();
            return Poll::Ready(Err(Crashed::NoRuntime(reason)));
        };
        Pin::new(handle).poll(cx).map(|joined| {
            joined.map_err(|e| match e.try_into_panic() {
                Ok(payload) => Crashed::Panicked(panic_message(payload.as_ref())),
                // aborted only by dropping this handle, so never observed here
                Err(e) => Crashed::Panicked(e.to_string()),
            })
        })
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".into())
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use super::*;

    /// The property this module exists for: an operation that computes without yielding
    /// does not stop the caller's runtime from keeping time.
    #[tokio::test(flavor = "current_thread")]
    async fn a_busy_operation_leaves_the_caller_runtime_free() {
        let running = spawn(async {
            let started = Instant::now();
            while started.elapsed() < Duration::from_millis(400) {
                std::hint::spin_loop();
            }
            7
        });
        let ticked = Instant::now();
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(
            ticked.elapsed() < Duration::from_millis(300),
            "the caller's timer waited for the operation"
        );
        assert_eq!(running.await.unwrap(), 7);
    }

    #[tokio::test]
    async fn dropping_the_handle_stops_the_operation_at_its_next_await() {
        let finished = Arc::new(AtomicBool::new(false));
        let running = spawn({
            let finished = finished.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(200)).await;
                finished.store(true, Ordering::SeqCst);
            }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        drop(running);
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert!(!finished.load(Ordering::SeqCst), "the operation ran on");
    }

    #[tokio::test]
    async fn a_panic_becomes_an_error() {
        let crashed = spawn(async { panic!("boom") }).await.unwrap_err();
        assert!(crashed.to_string().contains("boom"), "{crashed}");
    }
}
