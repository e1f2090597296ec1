//! Reloading the inventory (SIGHUP, or a change to its files): a valid one replaces the
//! fleet's tables and the schedules; an invalid one keeps the last good inventory running and
//! is counted in `tablekeeper_inventory_reload_failures_total`.
//!
//! A reload probes nothing itself: the tables it adds start due, and the refresher's next
//! probe round (within seconds) probes them, a few at a time, like any other due table. So a
//! pull request that adds a thousand tables neither holds up the replica's signals nor
//! probes them one after another here.

use std::path::Path;

use tablekeeper_inventory::{Inventory, LoadError};
use tokio::sync::mpsc;
use tracing::{info, warn};

use crate::schedule::cron::Scheduler;
use crate::shared::Shared;

/// Reloads the inventory at `path` (and, on a replica that plans, its schedules).
pub(crate) async fn reload(
    shared: &Shared,
    scheduler: &mut Option<Scheduler>,
    path: &Path,
    source: &str,
) {
    // parsing a large inventory is seconds of CPU: off the async threads
    let loaded = tokio::task::spawn_blocking({
        let path = path.to_path_buf();
        move || Inventory::load(&path)
    })
    .await;
    let inventory = match loaded {
        Ok(Ok(inventory)) => inventory,
        Ok(Err(e)) => return rejected(shared, source, &e),
        Err(e) => {
            shared.metrics.count_inventory_reload_failure();
            warn!(source, error = %e, "inventory reload failed: keeping the last good inventory");
            return;
        }
    };
    let change = shared.fleet.replace_inventory(inventory);
    crate::metrics::publish::inventory(&shared.metrics, &shared.fleet, &change);
    let tables = shared.fleet.inventory().tables.len();
    let Some(scheduler) = scheduler.as_mut() else {
        info!(source, tables, "inventory reloaded");
        return;
    };
    let (scheduled, schedules_removed) = scheduler.sync(&shared.fleet.inventory()).await;
    info!(
        source,
        tables,
        tables_added = change.added.len(),
        tables_removed = change.removed.len(),
        scheduled,
        schedules_removed,
        "inventory reloaded"
    );
}

fn rejected(shared: &Shared, source: &str, e: &LoadError) {
    shared.metrics.count_inventory_reload_failure();
    match e {
        LoadError::Invalid(problems) => {
            for p in problems {
                warn!(problem = %p, "inventory problem");
            }
            warn!(
                source,
                problems = problems.len(),
                "inventory reload rejected: keeping the last good inventory"
            );
        }
        other => {
            warn!(source, error = %other, "inventory reload failed: keeping the last good inventory")
        }
    }
}

/// Watches the inventory (its directory, so atomic renames and Kubernetes ConfigMap
/// symlink swaps are seen) and sends a reload request on every change.
pub(crate) fn watch_inventory(
    path: &Path,
    tx: mpsc::Sender<&'static str>,
) -> Option<notify::RecommendedWatcher> {
    use notify::{RecursiveMode, Watcher};
    let dir = if path.is_dir() {
        path.to_path_buf()
    } else {
        path.parent()?.to_path_buf()
    };
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if let Ok(event) = event {
            // Only inventory files (and Kubernetes' `..data` symlink swap) matter; the
            // SQLite store or logs may live in the same folder and change constantly.
            let relevant = event.paths.iter().any(|p| {
                let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
                name.starts_with("..") || name.ends_with(".yaml") || name.ends_with(".yml")
            });
            if relevant && !event.kind.is_access() {
                let _ = tx.try_send("file change");
            }
        }
    })
    .map_err(|e| warn!(error = %e, "cannot watch the inventory; reload with SIGHUP"))
    .ok()?;
    if let Err(e) = watcher.watch(&dir, RecursiveMode::NonRecursive) {
        warn!(path = %dir.display(), error = %e, "cannot watch the inventory; reload with SIGHUP");
        return None;
    }
    Some(watcher)
}
