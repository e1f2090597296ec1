//! Assembling a replica: the job store (migrated), the fleet state, the shared handles, HTTP,
//! the cron schedules, the background loops and the workers; then [`control`] until a signal
//! says stop, then [`shutdown::drain`].
//!
//! A `role: worker` replica assembles only the workers, the reaper, the read side of probe
//! sharing (VACUUM's referrers come from the others' probes), the job and task counts, and
//! health/metrics HTTP: no schedules, no probes, no dashboard.

use std::sync::Arc;

use tablekeeper_inventory::{Inventory, LoadError};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::config::{redact_url, DaemonConfig, Role};
use crate::fleet::{Fleet, FleetOptions, InventoryChange, ProbeIntervals};
use crate::jobs::stops::Stops;
use crate::metrics::Metrics;
use crate::replica::control;
use crate::replica::shutdown::{self, Running};
use crate::replica::{after_jobs, budget, reaper, refresher, sharing};
use crate::schedule::cron::Scheduler;
use crate::shared::Shared;
use crate::{http, jobs};

/// Why a replica could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ServeError {
    /// The inventory is missing or invalid; the problems are the caller's to print.
    #[error("inventory {path} is not usable")]
    Inventory { path: String, source: LoadError },
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

/// Runs a replica until SIGTERM/SIGINT or `stop` fires, then drains it.
pub(crate) async fn serve(config: DaemonConfig, stop: CancellationToken) -> Result<(), ServeError> {
    crate::config::apply_storage_options(&config.storage_options);
    if !tablekeeper_delta::set_log_read_cache(config.log_read_cache) {
        warn!(
            bytes = config.log_read_cache,
            "the log read cache was sized earlier in this process; this size is ignored"
        );
    }
    if !tablekeeper_delta::set_rewrite_memory_budget(config.rewrite_memory_budget) {
        warn!(
            bytes = config.rewrite_memory_budget,
            "the rewrite memory budget was fixed earlier in this process; this one is ignored"
        );
    }
    let Some(inventory_path) = config.inventory.clone() else {
        return Err(anyhow::anyhow!(
            "no inventory configured: set `inventory` in the config file or TABLEKEEPER_INVENTORY"
        )
        .into());
    };
    let inventory = Inventory::load(&inventory_path).map_err(|source| ServeError::Inventory {
        path: inventory_path.display().to_string(),
        source,
    })?;
    let shared = open(config, inventory).await?;
    let mut running = start(Arc::clone(&shared)).await?;
    let reason = control::run(&shared, &mut running.scheduler, &inventory_path, stop).await;
    shutdown::drain(&shared, running, reason).await;
    Ok(())
}

/// The job store (migrated), the fleet with its first inventory, and the handles the parts
/// of the replica share.
async fn open(config: DaemonConfig, inventory: Inventory) -> anyhow::Result<Arc<Shared>> {
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
            redact_url(&config.database_url)
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
    crate::metrics::publish::inventory(&metrics, &fleet, &InventoryChange::default());
    let shared = Arc::new(Shared::new(config, store, fleet, metrics));
    if shared.admin_token.is_none() {
        warn!(variable = %shared.config.admin_token_env, "no admin token configured: mutating API routes answer 403");
    }
    Ok(shared)
}

/// Starts HTTP, the schedules (on a replica that plans), the background loops and the
/// workers.
async fn start(shared: Arc<Shared>) -> anyhow::Result<Running> {
    let config = &shared.config;
    let listener = TcpListener::bind(config.listen).await.map_err(|e| {
        anyhow::anyhow!(
            "cannot listen on {}: {e} (set `listen` to a free address)",
            config.listen
        )
    })?;
    let http_stop = CancellationToken::new();
    let http = {
        let app = http::router(Arc::clone(&shared));
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
        Some(Scheduler::start(Arc::clone(&shared)).await?)
    } else {
        None
    };
    let scheduled = match scheduler.as_mut() {
        Some(scheduler) => scheduler.sync(&shared.fleet.inventory()).await.0,
        None => 0,
    };
    info!(
        replica = %config.replica_id,
        role = config.role.as_str(),
        listen = %config.listen,
        tables = shared.fleet.inventory().tables.len(),
        scheduled,
        workers = config.workers,
        store = %redact_url(&config.database_url),
        "tablekeeper started"
    );

    // who else probes, and what they last saw, before this replica's first probe round
    let mut probe_sharing = sharing::Sharing::default();
    probe_sharing.pass(&shared).await;
    let loops = vec![
        shared.spawn(reaper::reaper(Arc::clone(&shared))),
        if planning {
            shared.spawn(refresher::refresher(Arc::clone(&shared)))
        } else {
            shared.spawn(refresher::count_refresher(Arc::clone(&shared)))
        },
        shared.spawn(sharing::share_probes(Arc::clone(&shared), probe_sharing)),
        shared.spawn(after_jobs::after_jobs(Arc::clone(&shared))),
        shared.spawn(budget::budget_loop(Arc::clone(&shared))),
    ];
    let stops = Stops::default();
    let workers = shared.spawn(jobs::pool::run_pool(
        Arc::clone(&shared),
        config.workers,
        stops.clone(),
    ));
    Ok(Running {
        scheduler,
        http,
        http_stop,
        loops,
        workers,
        stops,
    })
}
