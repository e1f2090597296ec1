//! Which [`Meter`] the work running on a thread belongs to, and the CPU that thread spends
//! on it.
//!
//! Two ways to be current, never mixed on one thread:
//! - **a whole thread** ([`enter_thread`], [`leave_thread`]): a runtime that runs one job
//!   sets its meter when each of its threads starts, and adds the thread's CPU clock when it
//!   stops. Everything the thread ran counts, whoever spawned it: DataFusion's and the
//!   kernel's tasks, blocking reads, the Parquet encoder.
//! - **per poll** ([`Metered`]): work sharing a runtime with other work (probes) is wrapped,
//!   and each poll on the thread's CPU clock counts. Tasks it spawns through [`spawn`] are
//!   wrapped alike; tasks a library spawns on its own are not, so a probe's CPU is a lower
//!   bound (README "What maintenance costs" says by how much).
//!
//! The thread CPU clock is `CLOCK_THREAD_CPUTIME_ID` (user and system time of the calling
//! thread, nanosecond resolution on Linux), read through `cpu-time`.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use cpu_time::ThreadTime;

use super::Meter;

thread_local! {
    static CURRENT: RefCell<Option<Arc<Meter>>> = const { RefCell::new(None) };
    /// The thread's CPU already counts as a whole ([`enter_thread`]), or a [`Metered`] poll
    /// further up this thread's stack is timing it: polls must not count it again.
    static TIMED: Cell<bool> = const { Cell::new(false) };
}

/// The meter the work running on this thread belongs to, if any.
pub fn current() -> Option<Arc<Meter>> {
    CURRENT.with(|current| current.borrow().clone())
}

/// Makes `meter` current for the rest of this thread's life and counts the thread's CPU into
/// it when [`leave_thread`] runs: for the thread-start hook of a runtime that runs one job.
pub fn enter_thread(meter: Arc<Meter>) {
    CURRENT.with(|current| *current.borrow_mut() = Some(meter));
    TIMED.with(|timed| timed.set(true));
}

/// Adds this thread's CPU time (since it started) to its meter: for the thread-stop hook.
pub fn leave_thread() {
    let Some(meter) = CURRENT.with(|current| current.borrow_mut().take()) else {
        return;
    };
    if let Ok(spent) = ThreadTime::try_now().map(|t| t.as_duration()) {
        meter.add_cpu(spent);
    }
}

/// A future whose polls run with `meter` current and count their CPU into it (unless the
/// thread's CPU counts as a whole already).
#[must_use = "futures do nothing unless polled"]
pub struct Metered<F> {
    inner: Pin<Box<F>>,
    meter: Arc<Meter>,
}

impl<F> std::fmt::Debug for Metered<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metered")
            .field("meter", &self.meter)
            .finish()
    }
}

impl<F: Future> Metered<F> {
    pub fn new(meter: Arc<Meter>, inner: F) -> Self {
        Metered {
            inner: Box::pin(inner),
            meter,
        }
    }
}

impl<F: Future> Future for Metered<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        let outer = CURRENT.with(|current| current.replace(Some(Arc::clone(&this.meter))));
        let timing = !TIMED.with(|timed| timed.replace(true));
        let started = timing.then(ThreadTime::try_now).and_then(Result::ok);
        let polled = this.inner.as_mut().poll(cx);
        if let Some(started) = started {
            if let Ok(now) = ThreadTime::try_now() {
                this.meter
                    .add_cpu(now.as_duration().saturating_sub(started.as_duration()));
            }
        }
        if timing {
            TIMED.with(|timed| timed.set(false));
        }
        CURRENT.with(|current| *current.borrow_mut() = outer);
        polled
    }
}

/// `tokio::spawn`, the task metered as the spawning work is ([`current`]).
pub fn spawn<F>(task: F) -> tokio::task::JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    match current() {
        Some(meter) => tokio::spawn(Metered::new(meter, task)),
        None => tokio::spawn(task),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Computes until this thread has used `for_` of CPU (by its own clock, so a busy
    /// machine that preempts it changes nothing but how long it takes).
    fn spin(for_: Duration) {
        let started = ThreadTime::now();
        while started.elapsed() < for_ {
            std::hint::spin_loop();
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn polls_count_their_cpu_and_spawned_tasks_count_too() {
        let meter = Meter::new();
        Metered::new(Arc::clone(&meter), async {
            spin(Duration::from_millis(100));
            let child = spawn(async {
                assert!(current().is_some(), "the child runs metered");
                spin(Duration::from_millis(100));
            });
            tokio::task::yield_now().await;
            child.await.unwrap();
        })
        .await;
        let cpu = meter.cost(Duration::ZERO).cpu_seconds;
        assert!((0.2..0.4).contains(&cpu), "counted {cpu} s of 0.2 s spun");
        assert!(
            current().is_none(),
            "the meter is current only while polled"
        );
    }

    #[test]
    fn nested_polls_count_once() {
        let meter = Meter::new();
        let inner = Metered::new(Arc::clone(&meter), async {
            spin(Duration::from_millis(50))
        });
        futures::executor::block_on(Metered::new(Arc::clone(&meter), inner));
        let cpu = meter.cost(Duration::ZERO).cpu_seconds;
        assert!(
            (0.05..0.09).contains(&cpu),
            "counted {cpu} s of 0.05 s spun"
        );
    }

    #[test]
    fn a_whole_thread_counts_when_it_leaves() {
        let meter = Meter::new();
        let counted = Arc::clone(&meter);
        std::thread::spawn(move || {
            enter_thread(counted);
            spin(Duration::from_millis(50));
            // a metered poll on such a thread adds nothing of its own
            let inner = Metered::new(current().unwrap(), async {
                spin(Duration::from_millis(20))
            });
            futures::executor::block_on(inner);
            leave_thread();
        })
        .join()
        .unwrap();
        let cpu = meter.cost(Duration::ZERO).cpu_seconds;
        assert!(
            (0.07..0.12).contains(&cpu),
            "counted {cpu} s of 0.07 s spun"
        );
    }
}
