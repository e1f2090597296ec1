//! What a running replica listens to: SIGTERM, SIGINT and a stop request end it; SIGHUP and
//! changes to the inventory's files reload the inventory ([`crate::replica::reload`]).
//!
//! A reload never holds a stop signal up: it runs raced against the signals, so SIGTERM
//! starts the drain at once even while a reload of thousands of tables is under way (the
//! reload is dropped; the replica is stopping anyway). Reloads are handled on this task so
//! the scheduler has one owner.

use std::path::Path;
use std::time::Duration;

use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use crate::replica::reload;
use crate::schedule::cron::Scheduler;
use crate::shared::Shared;

/// Quiet period after a file-change event before reloading: editors and ConfigMap updates
/// write several events for one change.
const RELOAD_DEBOUNCE: Duration = Duration::from_millis(500);

/// Why the replica stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    Sigterm,
    Sigint,
    Requested,
}

impl Stop {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Stop::Sigterm => "SIGTERM",
            Stop::Sigint => "SIGINT",
            Stop::Requested => "stop requested",
        }
    }
}

/// The stop signals, awaited together.
struct Stops {
    sigterm: Option<Signal>,
    sigint: Option<Signal>,
    stop: CancellationToken,
}

impl Stops {
    fn new(stop: CancellationToken) -> Self {
        let listen = |kind: SignalKind, name: &str| {
            signal(kind)
                .map_err(|e| warn!(signal = name, error = %e, "cannot listen for the signal"))
                .ok()
        };
        Stops {
            sigterm: listen(SignalKind::terminate(), "SIGTERM"),
            sigint: listen(SignalKind::interrupt(), "SIGINT"),
            stop,
        }
    }

    async fn next(&mut self) -> Stop {
        async fn received(signal: &mut Option<Signal>) {
            match signal {
                Some(signal) => {
                    signal.recv().await;
                }
                None => std::future::pending().await,
            }
        }
        tokio::select! {
            () = received(&mut self.sigterm) => Stop::Sigterm,
            () = received(&mut self.sigint) => Stop::Sigint,
            () = self.stop.cancelled() => Stop::Requested,
        }
    }
}

/// Answers signals and reload requests until a stop signal; returns which one.
pub(crate) async fn run(
    shared: &Shared,
    scheduler: &mut Option<Scheduler>,
    inventory_path: &Path,
    stop: CancellationToken,
) -> Stop {
    let (reload_tx, mut reload_rx) = mpsc::channel::<&'static str>(8);
    let _watcher = reload::watch_inventory(inventory_path, reload_tx);
    let mut sighup = signal(SignalKind::hangup())
        .map_err(
            |e| warn!(error = %e, "cannot listen for SIGHUP; reloads follow file changes only"),
        )
        .ok();
    let mut stops = Stops::new(stop);
    loop {
        let source = tokio::select! {
            stop = stops.next() => return stop,
            Some(()) = async { sighup.as_mut()?.recv().await } => "SIGHUP",
            Some(source) = reload_rx.recv() => {
                // debounce: swallow events arriving within the quiet period
                let quiet = async {
                    while let Ok(Some(_)) =
                        tokio::time::timeout(RELOAD_DEBOUNCE, reload_rx.recv()).await
                    {}
                };
                tokio::select! {
                    stop = stops.next() => return stop,
                    () = quiet => source,
                }
            }
        };
        tokio::select! {
            stop = stops.next() => return stop,
            () = reload::reload(shared, scheduler, inventory_path, source) => {}
        }
    }
}
