//! `tablekeeper run`: assembles a replica — job store, fleet state, cron schedules,
//! workers, reaper, refresher, probe sharing, inventory reloads and HTTP — and drains it on
//! SIGTERM/SIGINT. A `role: worker` replica assembles only the workers, the reaper, the
//! read side of probe sharing (VACUUM's referrers come from the others' probes), the job and
//! task counts, and health/metrics HTTP: no schedules, no probes, no dashboard.
//!
//! Shutdown order: mutating routes refuse (and `/readyz` turns 503), workers stop
//! claiming, the scheduler stops, running jobs get `shutdown_grace` to finish, the rest
//! are released for other replicas; then nothing new starts (no tick, no probe), the
//! background loops and HTTP stop, every task the replica started is awaited (a table load
//! in flight finishes: cutting it off would crash deltalake's blocking threads), and the
//! job store's pool closes; exit 0.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use tablekeeper_inventory::Inventory;
use tokio::net::TcpListener;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use crate::config::{DaemonConfig, Role};
use crate::fleet::{Fleet, FleetOptions, InventoryChange, ProbeIntervals};
use crate::metrics::Metrics;
use crate::runtime::Runtime;
use crate::scheduler::Scheduler;
use crate::{background, http, worker};

/// Quiet period after a file-change event before reloading: editors and ConfigMap
/// updates write several events for one change.
const RELOAD_DEBOUNCE: Duration = Duration::from_millis(500);
/// After the grace period ends, how long released jobs get to write their release.
const RELEASE_WAIT: Duration = Duration::from_secs(10);
/// How long shutdown waits for probes and ticks already in flight: a table load takes
/// seconds even on a slow object store, and bounded store calls (`store_timeout`) end on
/// their own.
const TASK_DRAIN: Duration = Duration::from_secs(60);

pub async fn run(config_path: Option<&Path>) -> ExitCode {
    let config = match DaemonConfig::load(config_path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(super::EXIT_UNUSABLE);
        }
    };
    match serve(config, CancellationToken::new()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            error!(error = %format!("{e:#}"), "tablekeeper stopped");
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Runs a replica until SIGTERM/SIGINT or `stop` fires.
pub async fn serve(config: DaemonConfig, stop: CancellationToken) -> anyhow::Result<()> {
    super::apply_storage_options(&config.storage_options);
    if !tablekeeper_delta::set_rewrite_memory_budget(config.rewrite_memory_budget) {
        tracing::warn!(
            bytes = config.rewrite_memory_budget,
            "the rewrite memory budget was fixed earlier in this process; this one is ignored"
        );
    }
    let Some(inventory_path) = config.inventory.clone() else {
        anyhow::bail!(
            "no inventory configured: set `inventory` in the config file or TABLEKEEPER_INVENTORY"
        );
    };
    let inventory = match Inventory::load(&inventory_path) {
        Ok(inv) => inv,
        Err(e) => {
            super::report_load_error(&e);
            anyhow::bail!("inventory {} is not usable", inventory_path.display());
        }
    };
    let metrics = Metrics::new()?;
    let store = tablekeeper_store::connect(
        &config.database_url,
        tablekeeper_store::StoreOptions {
            call_timeout: Some(config.store_timeout),
            observer: Some(Arc::new(metrics.clone())),
            ..tablekeeper_store::StoreOptions::default()
        },
    )
    .await
    .map_err(|e| {
        anyhow::anyhow!(
            "cannot open the job store {}: {e}",
            super::migrate::redact(&config.database_url)
        )
    })?;
    store
        .migrate()
        .await
        .map_err(|e| anyhow::anyhow!("job store migration failed: {e}"))?;

    let fleet = Arc::new(Fleet::new(
        inventory,
        FleetOptions {
            intervals: ProbeIntervals {
                active: config.probe_interval,
                max: config.max_probe_interval,
            },
            loaded_snapshots: config.loaded_snapshots,
            clock: crate::fleet::Clock::default(),
            restore_drill_every: config.restore_drill_every,
            first_sight_beside: true,
        },
    ));
    crate::publish::inventory(&metrics, &fleet, &InventoryChange::default());
    let rt = Arc::new(Runtime::new(
        config.clone(),
        store,
        Arc::clone(&fleet),
        metrics,
    ));
    if rt.admin_token.is_none() {
        warn!(variable = %config.admin_token_env, "no admin token configured: mutating API routes answer 403");
    }

    let listener = TcpListener::bind(config.listen).await.map_err(|e| {
        anyhow::anyhow!(
            "cannot listen on {}: {e} (set `listen` to a free address)",
            config.listen
        )
    })?;
    let http_stop = CancellationToken::new();
    let http_task = {
        let app = http::router(Arc::clone(&rt));
        let http_stop = http_stop.clone();
        tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move { http_stop.cancelled().await })
                .await
        })
    };

    // a worker schedules nothing and probes nothing: it runs the jobs the others queue
    let planning = config.role == Role::All;
    let mut scheduler = if planning {
        Some(Scheduler::start(Arc::clone(&rt)).await?)
    } else {
        None
    };
    let scheduled = match scheduler.as_mut() {
        Some(scheduler) => scheduler.sync(&fleet.inventory()).await.0,
        None => 0,
    };
    info!(
        replica = %config.replica_id,
        role = config.role.as_str(),
        listen = %config.listen,
        tables = fleet.inventory().tables.len(),
        scheduled,
        workers = config.workers,
        store = %super::migrate::redact(&config.database_url),
        "tablekeeper started"
    );

    // who else probes, and what they last saw, before this replica's first probe round
    let mut sharing = background::Sharing::default();
    sharing.pass(&rt).await;
    let background_stop = rt.shutdown.clone();
    let reaper = rt.spawn(background::reaper(Arc::clone(&rt), background_stop.clone()));
    let refresher = if planning {
        rt.spawn(background::refresher(
            Arc::clone(&rt),
            background_stop.clone(),
        ))
    } else {
        rt.spawn(background::count_refresher(
            Arc::clone(&rt),
            background_stop.clone(),
        ))
    };
    let sharing = rt.spawn(background::share_probes(
        Arc::clone(&rt),
        background_stop.clone(),
        sharing,
    ));

    let stop_claiming = CancellationToken::new();
    let hard_stop = CancellationToken::new();
    let workers = rt.spawn(worker::run_pool(
        Arc::clone(&rt),
        config.workers,
        stop_claiming.clone(),
        hard_stop.clone(),
    ));

    // Reload requests from SIGHUP and from file changes, handled on this task so the
    // scheduler has one owner.
    let (reload_tx, mut reload_rx) = mpsc::channel::<&'static str>(8);
    let _watcher = watch_inventory(&inventory_path, reload_tx.clone());
    let mut sighup = signal(SignalKind::hangup())?;
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut sigint = signal(SignalKind::interrupt())?;

    let reason = loop {
        tokio::select! {
            _ = sigterm.recv() => break "SIGTERM",
            _ = sigint.recv() => break "SIGINT",
            () = stop.cancelled() => break "stop requested",
            _ = sighup.recv() => reload(&rt, &mut scheduler, &inventory_path, "SIGHUP").await,
            Some(source) = reload_rx.recv() => {
                // Debounce: swallow events arriving within the quiet period.
                while let Ok(Some(_)) = tokio::time::timeout(RELOAD_DEBOUNCE, reload_rx.recv()).await {}
                reload(&rt, &mut scheduler, &inventory_path, source).await;
            }
        }
    };

    info!(signal = reason, grace = ?config.shutdown_grace, "shutting down: no new jobs, draining running ones");
    rt.stop_accepting_mutations();
    stop_claiming.cancel();
    if let Some(scheduler) = scheduler.take() {
        scheduler.shutdown().await;
    }
    let workers_abort = workers.abort_handle();
    tokio::pin!(workers);
    let drained = tokio::time::timeout(config.shutdown_grace, &mut workers)
        .await
        .is_ok();
    if !drained {
        warn!("shutdown grace ran out: releasing running jobs to other replicas");
        hard_stop.cancel();
        if tokio::time::timeout(RELEASE_WAIT, &mut workers)
            .await
            .is_err()
        {
            workers_abort.abort();
        }
    }
    // nothing new starts from here: no tick, no probe round, no loop iteration
    rt.shutdown.cancel();
    let _ = reaper.await;
    let _ = refresher.await;
    let _ = sharing.await;
    // the others take this replica's tables over now rather than when it ages out
    if let Err(e) = rt.store.leave_replica(&rt.config.replica_id).await {
        warn!(error = %e, "cannot leave the live replicas; the others take its tables over once it ages out");
    }
    http_stop.cancel();
    match http_task.await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => warn!(error = %e, "http server stopped with an error"),
        Err(e) => warn!(error = %e, "http task failed"),
    }
    rt.tasks.close();
    if tokio::time::timeout(TASK_DRAIN, rt.tasks.wait())
        .await
        .is_err()
    {
        warn!(
            tasks = rt.tasks.len(),
            "probes still running after the drain period; exiting without them"
        );
    }
    rt.store.close().await;
    info!("tablekeeper stopped");
    Ok(())
}

/// Reloads the inventory (and, on a replica that plans, its schedules and the new tables'
/// first probes); an invalid one keeps the last good inventory running.
async fn reload(rt: &Runtime, scheduler: &mut Option<Scheduler>, path: &Path, source: &str) {
    match Inventory::load(path) {
        Ok(inventory) => {
            let change = rt.fleet.replace_inventory(inventory);
            crate::publish::inventory(&rt.metrics, &rt.fleet, &change);
            let Some(scheduler) = scheduler.as_mut() else {
                info!(
                    source,
                    tables = rt.fleet.inventory().tables.len(),
                    "inventory reloaded"
                );
                return;
            };
            let (scheduled, schedules_removed) = scheduler.sync(&rt.fleet.inventory()).await;
            info!(
                source,
                tables = rt.fleet.inventory().tables.len(),
                tables_added = change.added.len(),
                tables_removed = change.removed.len(),
                scheduled,
                schedules_removed,
                "inventory reloaded"
            );
            for name in change.added {
                if let Some(spec) = rt.fleet.spec(&name) {
                    let _ = crate::recorder::probe(rt, &spec).await;
                }
            }
        }
        Err(e) => {
            rt.metrics.count_inventory_reload_failure();
            match &e {
                tablekeeper_inventory::LoadError::Invalid(problems) => {
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
    }
}

/// Watches the inventory (its directory, so atomic renames and Kubernetes ConfigMap
/// symlink swaps are seen) and sends a reload request on every change.
fn watch_inventory(
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
