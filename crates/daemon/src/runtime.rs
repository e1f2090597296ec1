//! The state one replica shares between its scheduler, workers, background loops and
//! HTTP handlers. Plain data plus handles; behaviour lives in the modules that use it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tablekeeper_store::JobStore;

use crate::config::DaemonConfig;
use crate::fleet::Fleet;
use crate::metrics::Metrics;

#[derive(Debug)]
pub struct Runtime {
    pub config: DaemonConfig,
    pub store: Arc<dyn JobStore>,
    pub fleet: Arc<Fleet>,
    pub metrics: Metrics,
    /// The admin bearer token, if one is configured (read once at start).
    pub admin_token: Option<crate::config::AdminToken>,
    /// Cleared at shutdown: mutating HTTP routes answer 503 from then on.
    accepting_mutations: AtomicBool,
}

impl Runtime {
    pub fn new(
        config: DaemonConfig,
        store: Arc<dyn JobStore>,
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
        }
    }

    pub fn accepting_mutations(&self) -> bool {
        self.accepting_mutations.load(Ordering::SeqCst)
    }

    pub fn stop_accepting_mutations(&self) {
        self.accepting_mutations.store(false, Ordering::SeqCst);
    }
}
