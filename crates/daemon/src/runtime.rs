//! The state one replica shares between its scheduler, workers, background loops and
//! HTTP handlers. Plain data plus handles; behaviour lives in the modules that use it.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tablekeeper_store::JobStore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::DaemonConfig;
use crate::fleet::Fleet;
use crate::metrics::Metrics;

#[derive(Debug)]
pub struct Runtime {
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
}

impl Runtime {
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
