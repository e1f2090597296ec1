//! `tablekeeper demo`: the quickstart. Creates a few small-file-heavy Delta tables in a
//! local folder, writes an inventory with second-level schedules, and runs the real
//! daemon on them with the embedded SQLite store, while a writer keeps adding small
//! files so compactions keep happening. Ctrl-C stops it cleanly.
//!
//! The demo inventory uses `allow_short_retention` so VACUUM has something to do within
//! minutes; production inventories keep the 7-day floor.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use tablekeeper_delta::fixtures::{self, SmallFiles};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::config::{AdminToken, DaemonConfig};

/// How often the demo writer appends a batch of small files to `demo.events`.
const WRITER_EVERY: Duration = Duration::from_secs(20);

struct DemoTable {
    name: &'static str,
    folder: &'static str,
    partitioned: bool,
    partitions: u32,
    files_per_partition: u32,
    zorder: bool,
}

const TABLES: &[DemoTable] = &[
    DemoTable {
        name: "demo.events",
        folder: "events",
        partitioned: true,
        partitions: 3,
        files_per_partition: 12,
        zorder: false,
    },
    DemoTable {
        name: "demo.orders",
        folder: "orders",
        partitioned: false,
        partitions: 1,
        files_per_partition: 20,
        zorder: false,
    },
    DemoTable {
        name: "demo.clicks",
        folder: "clicks",
        partitioned: true,
        partitions: 2,
        files_per_partition: 10,
        zorder: true,
    },
];

pub async fn run(dir: &Path, listen: &str, duration: Option<Duration>) -> ExitCode {
    match demo(dir, listen, duration).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: demo failed: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn demo(dir: &Path, listen: &str, duration: Option<Duration>) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    let dir = std::fs::canonicalize(dir)?;
    let tables_dir = dir.join("tables");
    for t in TABLES {
        let uri = tables_dir.join(t.folder);
        let spec = small_files(t);
        let rows = fixtures::write_small_files(&uri.to_string_lossy(), &spec).await?;
        info!(table = t.name, path = %uri.display(), rows, files = t.partitions * t.files_per_partition, "demo table written");
    }
    let inventory = dir.join("inventory.yaml");
    std::fs::write(&inventory, inventory_yaml(&tables_dir))?;

    let token = format!("demo-{}", uuid::Uuid::new_v4().simple());
    let config = DaemonConfig {
        database_url: format!("sqlite://{}", dir.join("tablekeeper.db").display()),
        inventory: Some(inventory.clone()),
        listen: listen.parse().map_err(|_| {
            anyhow::anyhow!("`--listen {listen}` is not an address like 127.0.0.1:8080")
        })?,
        workers: 2,
        replica_id: "demo".into(),
        admin_token_env: crate::config::DEFAULT_ADMIN_TOKEN_ENV.into(),
        admin_token: Some(AdminToken::new(token.clone())),
        lease: Duration::from_secs(30),
        shutdown_grace: Duration::from_secs(30),
        poll_interval: Duration::from_millis(500),
        probe_interval: Duration::from_secs(5),
        // the demo's tables change every few seconds; show them within 20 s when idle
        max_probe_interval: Duration::from_secs(20),
        restore_drill_every: tablekeeper_delta::DEFAULT_DRILL_EVERY,
        loaded_snapshots: tablekeeper_delta::DEFAULT_LOADED_SNAPSHOTS,
        store_timeout: tablekeeper_store::DEFAULT_CALL_TIMEOUT,
        rewrite_memory_budget: tablekeeper_delta::DEFAULT_REWRITE_MEMORY_BUDGET,
        log_read_cache: tablekeeper_delta::DEFAULT_LOG_READ_CACHE,
        storage_options: Default::default(),
        role: crate::config::Role::All,
        prices: crate::config::Prices::default(),
    };
    let base = format!("http://{}", config.listen);
    println!("tablekeeper demo");
    println!("  tables:     {}", tables_dir.display());
    println!("  inventory:  {}", inventory.display());
    println!("  dashboard:  {base}/");
    println!("  metrics:    {base}/metrics");
    println!("  api:        {base}/api/v1/tables");
    println!("  trigger:    curl -X POST -H 'Authorization: Bearer {token}' -d '{{\"operation\":\"compact\"}}' -H 'Content-Type: application/json' {base}/api/v1/tables/demo.orders/jobs");
    println!(
        "Compactions start within seconds; watch staleness fall on the dashboard. Ctrl-C stops."
    );

    let stop = CancellationToken::new();
    if let Some(d) = duration {
        let stop = stop.clone();
        tokio::spawn(async move {
            tokio::time::sleep(d).await;
            stop.cancel();
        });
    }
    let writer = tokio::spawn(keep_writing(tables_dir.join("events"), stop.clone()));
    let result = crate::replica::serve(config, stop.clone()).await;
    stop.cancel();
    let _ = writer.await;
    result.map_err(|e| anyhow::anyhow!("{e}"))
}

fn small_files(t: &DemoTable) -> SmallFiles {
    SmallFiles {
        partitions: if t.partitioned { t.partitions } else { 0 },
        files_per_partition: t.files_per_partition,
        rows_per_file: 200,
        ..SmallFiles::default()
    }
}

/// Appends a few small files now and then so the demo never runs out of work.
async fn keep_writing(uri: PathBuf, stop: CancellationToken) {
    let spec = SmallFiles {
        partitions: 3,
        files_per_partition: 2,
        rows_per_file: 100,
        ..SmallFiles::default()
    };
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(WRITER_EVERY) => {}
        }
        if let Err(e) = fixtures::write_small_files(&uri.to_string_lossy(), &spec).await {
            warn!(error = %e, "demo writer could not append");
        }
    }
}

fn inventory_yaml(tables_dir: &Path) -> String {
    let mut out = String::from(
        "# Written by `tablekeeper demo`: second-level schedules so things happen quickly.\n\
         defaults:\n  \
           compaction: { schedule: \"*/10 * * * * *\", target_file_size: 64MiB, min_small_files: 5 }\n  \
           zorder: { schedule: \"*/30 * * * * *\" }\n  \
           vacuum: { schedule: \"*/45 * * * * *\", full_every: 2 }\n  \
           checkpoint: { schedule: \"*/15 * * * * *\", max_commits_since_checkpoint: 5 }\n  \
           max_attempts: 3\n  \
           timeout: 5m\n\
         tables:\n",
    );
    for t in TABLES {
        out.push_str(&format!(
            "  - name: {}\n    path: {}\n    owner: demo-team\n",
            t.name,
            tables_dir.join(t.folder).display()
        ));
        if t.partitioned {
            out.push_str("    layout:\n      partition_by: [day]\n");
            if t.zorder {
                out.push_str("      zorder: [user_id]\n");
            }
        }
        out.push_str(
            "    retention:\n      deleted_file_retention: 1m\n      log_retention: 1h\n      allow_short_retention: true\n",
        );
    }
    out
}
