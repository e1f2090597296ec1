//! The two signals a draining replica gives its workers: stop claiming (the drain began: no
//! new job or task, and a split job's coordinator hands it over as soon as none of its tasks
//! runs), and stop now (`shutdown_grace` ran out: what still runs is released).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

#[derive(Debug, Clone, Default)]
pub(crate) struct Stops {
    /// Fires when the drain begins.
    pub claiming: CancellationToken,
    /// Fires when the grace ran out.
    pub hard: CancellationToken,
    /// Held while the drain begins and says so, and while a start is checked and said: the
    /// log never shows a start after the drain's line, even when the two are a microsecond
    /// apart.
    gate: Arc<Mutex<()>>,
}

impl Stops {
    /// Begins the drain: claiming stops, then `announce` logs it.
    pub(crate) fn begin_drain(&self, announce: impl FnOnce()) {
        let _order = self.gate.lock().unwrap_or_else(|e| e.into_inner());
        self.claiming.cancel();
        announce();
    }

    /// Starts something claimed unless the drain began: `announce` logs the start, and
    /// `false` says the drain began first (give it back unstarted).
    pub(crate) fn start(&self, announce: impl FnOnce()) -> bool {
        let _order = self.gate.lock().unwrap_or_else(|e| e.into_inner());
        if self.claiming.is_cancelled() {
            return false;
        }
        announce();
        true
    }

    /// Sleeps `wait`, or less if the drain begins meanwhile (an idle wait must not outlast it).
    pub(crate) async fn nap(&self, wait: Duration) {
        if self.claiming.is_cancelled() {
            tokio::select! {
                () = self.hard.cancelled() => {}
                () = tokio::time::sleep(wait) => {}
            }
        } else {
            tokio::select! {
                () = self.claiming.cancelled() => {}
                () = tokio::time::sleep(wait) => {}
            }
        }
    }
}
