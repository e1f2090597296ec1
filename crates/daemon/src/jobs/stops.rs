//! The two signals a draining replica gives its workers: stop claiming (the drain began: no
//! new job or task, and a split job's coordinator hands it over as soon as none of its tasks
//! runs), and stop now (`shutdown_grace` ran out: what still runs is released).

use std::time::Duration;

use tokio_util::sync::CancellationToken;

#[derive(Debug, Clone, Default)]
pub(crate) struct Stops {
    /// Fires when the drain begins.
    pub claiming: CancellationToken,
    /// Fires when the grace ran out.
    pub hard: CancellationToken,
}

impl Stops {
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
