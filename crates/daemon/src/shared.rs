//! What the parts of one replica share: its configuration, the job store, the fleet state,
//! the metrics, the tasks it started and the signal that it is shutting down. Plain data plus
//! handles; behaviour lives in the modules that use it.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tablekeeper_store::{AttemptOutcome, JobStore};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::DaemonConfig;
use crate::fleet::Fleet;
use crate::metrics::Metrics;

#[derive(Debug)]
pub struct Shared {
    pub config: DaemonConfig,
    pub store: Arc<JobStore>,
    pub fleet: Arc<Fleet>,
    pub metrics: Metrics,
    /// The admin bearer token, if one is configured (read once at start).
    pub admin_token: Option<crate::config::AdminToken>,
    /// Cleared at shutdown: mutating HTTP routes answer 503 from then on.
    accepting_mutations: AtomicBool,
    /// Everything the replica starts in the background: workers, loops, schedule ticks,
    /// probe rounds. Shutdown waits for all of it, so no table load is cut off mid-way when
    /// the async runtime stops (deltalake's kernel blocks threads on tasks of that runtime).
    pub tasks: TaskTracker,
    /// Fires when the replica shuts down: nothing new starts after it (no tick, no probe).
    pub shutdown: CancellationToken,
    /// Tables whose job attempt just ended, with how the last one ended: the replica
    /// refreshes what the attempt changed (`replica::after_jobs`).
    finished: Mutex<BTreeMap<String, AttemptOutcome>>,
    finished_signal: Notify,
}

impl Shared {
    pub fn new(
        config: DaemonConfig,
        store: Arc<JobStore>,
        fleet: Arc<Fleet>,
        metrics: Metrics,
    ) -> Self {
        let admin_token = config.admin_token.clone();
        Self {
            config,
            store,
            fleet,
            metrics,
            admin_token,
            accepting_mutations: AtomicBool::new(true),
            tasks: TaskTracker::new(),
            shutdown: CancellationToken::new(),
            finished: Mutex::default(),
            finished_signal: Notify::new(),
        }
    }

    /// Says that an attempt of a job on `table` ended as `outcome`. A success stays recorded
    /// until the replica takes it, whatever ends after it.
    pub fn job_finished(&self, table: &str, outcome: AttemptOutcome) {
        let mut finished = self.finished.lock().unwrap_or_else(|e| e.into_inner());
        let entry = finished.entry(table.to_owned()).or_insert(outcome);
        if *entry != AttemptOutcome::Succeeded {
            *entry = outcome;
        }
        drop(finished);
        self.finished_signal.notify_one();
    }

    /// Waits until an attempt ended since the last call, then takes every table whose attempt
    /// ended, with how its last attempt ended (succeeded if any did).
    pub async fn finished_jobs(&self) -> BTreeMap<String, AttemptOutcome> {
        loop {
            let taken =
                std::mem::take(&mut *self.finished.lock().unwrap_or_else(|e| e.into_inner()));
            if !taken.is_empty() {
                return taken;
            }
            self.finished_signal.notified().await;
        }
    }

    /// Runs `task` in the background, tracked: shutdown waits for it.
    pub fn spawn<F>(&self, task: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.tasks.spawn(task)
    }

    /// True once shutdown began: start nothing new.
    pub fn stopping(&self) -> bool {
        self.shutdown.is_cancelled()
    }

    pub fn accepting_mutations(&self) -> bool {
        self.accepting_mutations.load(Ordering::SeqCst)
    }

    pub fn stop_accepting_mutations(&self) {
        self.accepting_mutations.store(false, Ordering::SeqCst);
    }
}
