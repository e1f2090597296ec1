//! What probing costs the object store (DESIGN goal: at most 150 requests per idle table per
//! day for the whole fleet, whatever the replica count; a commit to an active table still
//! seen within `probe_interval`). Replicas as `tablekeeper run` assembles them share one
//! Postgres job store and probe real tables on moto's S3 server, which logs every request it
//! answers; the fleets' clock is injected and moved forward one probe interval at a time, so
//! a simulated day passes in about a minute.

use std::sync::Arc;
use std::time::Duration;

use tablekeeper_delta::fixtures::peers::S3Server;
use tablekeeper_delta::fixtures::{self, SmallFiles};
use tablekeeper_inventory::Inventory;
use tablekeeper_store::testing::TestDatabase;
use tablekeeper_store::StoreOptions;

use crate::config::DaemonConfig;
use crate::fleet::{Clock, Fleet, FleetOptions, ProbeIntervals};
use crate::metrics::Metrics;
use crate::replica::sharing::Sharing;
use crate::schedule::probes::probe_due;
use crate::shared::Shared;

const IDLE_TABLES: usize = 4;
const DAY: Duration = Duration::from_secs(86_400);
/// The default `probe_interval`; one step of simulated time.
const STEP: Duration = Duration::from_secs(60);
/// Requests one idle table may cost per day, for the whole fleet.
const BUDGET: usize = 150;
/// The active table gets a commit every step (every minute) this long.
const ACTIVE_STEPS: u64 = 30;

fn small(commits: u32) -> SmallFiles {
    SmallFiles {
        partitions: 2,
        files_per_partition: commits,
        rows_per_file: 20,
        payload_bytes: 8,
    }
}

async fn replica(
    id: &str,
    database_url: &str,
    inventory: &std::path::Path,
    clock: &Clock,
) -> Arc<Shared> {
    let env = |key: &str| match key {
        "TABLEKEEPER_DATABASE_URL" => Some(database_url.to_owned()),
        "TABLEKEEPER_REPLICA_ID" => Some(id.to_owned()),
        _ => None,
    };
    let config = DaemonConfig::load_with_env(None, env).expect("config");
    assert_eq!(
        config.probe_interval, STEP,
        "the simulation steps one probe interval"
    );
    let store = tablekeeper_store::connect(&config.database_url, StoreOptions::default())
        .await
        .expect("job store");
    store.migrate().await.expect("migrations");
    let fleet = Arc::new(Fleet::new(
        Inventory::load(inventory).expect("inventory"),
        FleetOptions {
            intervals: ProbeIntervals {
                active: config.probe_interval,
                max: config.max_probe_interval,
            },
            loaded_snapshots: config.loaded_snapshots,
            clock: clock.clone(),
            restore_drill_every: config.restore_drill_every,
            first_sight_beside: true,
        },
    ));
    let metrics = Metrics::new().expect("metrics");
    Arc::new(Shared::new(config, store, fleet, metrics))
}

/// Requests per idle table over the simulated day.
async fn simulated_day(replicas: usize) -> Vec<usize> {
    let server = S3Server::shared().expect("moto S3 server");
    let db = TestDatabase::create().await.expect("test database");
    let dir = tempfile::tempdir().expect("temp dir");
    let root = format!("probe-cost-{}", uuid::Uuid::new_v4());
    let uri = |name: &str| format!("s3://tablekeeper/{root}/{name}");
    let idle: Vec<String> = (0..IDLE_TABLES).map(|i| format!("idle{i}")).collect();
    let mut yaml = String::from("tables:\n");
    for name in idle.iter().map(String::as_str).chain(["active"]) {
        fixtures::write_small_files(&uri(name), &small(3))
            .await
            .expect("fixture table");
        yaml.push_str(&format!(
            "  - name: cost.{name}\n    path: \"{}\"\n    owner: probe-cost\n",
            uri(name)
        ));
    }
    let inventory = dir.path().join("tables.yaml");
    std::fs::write(&inventory, yaml).expect("inventory file");

    let clock = Clock::manual();
    let mut fleet = Vec::new();
    for i in 0..replicas {
        let rt = replica(&format!("r{i}"), &db.url, &inventory, &clock).await;
        fleet.push((rt, Sharing::default()));
    }
    let key = |name: &str| format!("{root}/{name}/");
    let before: Vec<usize> = idle
        .iter()
        .map(|t| server.requests(&key(t)).expect("request log").len())
        .collect();

    // versions 0..=2 were the fixture's three commits
    let mut last_commit: Option<i64> = None;
    for step in 0..DAY.as_secs() / STEP.as_secs() {
        let committed_before = last_commit;
        if step < ACTIVE_STEPS {
            fixtures::write_small_files(&uri("active"), &small(1))
                .await
                .expect("commit to the active table");
            last_commit = Some(last_commit.map_or(3, |v| v + 1));
        }
        for (rt, sharing) in &mut fleet {
            sharing.pass(rt).await;
            probe_due(rt).await;
        }
        // the previous step's commit is seen by every replica one probe interval later
        if let Some(version) = committed_before.filter(|_| step <= ACTIVE_STEPS) {
            for (rt, _) in &fleet {
                let seen = rt
                    .fleet
                    .with_state("cost.active", |s| s.probe.as_ref().map(|p| p.version))
                    .flatten();
                assert!(
                    seen >= Some(version),
                    "{}: version {version}, committed a probe interval ago, not seen (at step {step}: {seen:?})",
                    rt.config.replica_id
                );
            }
        }
        clock.advance(STEP);
    }

    // every replica exports the same figures
    for table in idle.iter().map(|t| format!("cost.{t}")) {
        let seen: Vec<_> = fleet
            .iter()
            .map(|(rt, _)| {
                rt.fleet.with_state(&table, |s| {
                    (s.probe.as_ref().map(|p| p.version), s.probed_at)
                })
            })
            .collect();
        assert!(seen.iter().all(|s| *s == seen[0]), "{table}: {seen:?}");
    }
    let costs = idle
        .iter()
        .zip(&before)
        .map(|(t, before)| server.requests(&key(t)).expect("request log").len() - before)
        .collect();
    // what the first idle table's requests were, by shape (digits folded), for the record
    let mut shapes = std::collections::BTreeMap::<String, usize>::new();
    for line in &server.requests(&key(&idle[0])).expect("request log")[before[0]..] {
        let shape: String = line
            .replace(&root, "ROOT")
            .chars()
            .map(|c| if c.is_ascii_digit() { 'N' } else { c })
            .collect();
        *shapes.entry(shape).or_default() += 1;
    }
    println!(
        "{replicas} replica(s): requests of cost.{} by shape: {shapes:#?}",
        idle[0]
    );
    for (rt, _) in fleet {
        rt.store.close().await;
    }
    db.drop_db().await.expect("drop test database");
    costs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_table_costs_at_most_150_requests_a_day_with_one_or_three_replicas() {
    for replicas in [1, 3] {
        let costs = simulated_day(replicas).await;
        println!("{replicas} replica(s): requests per idle table per simulated day: {costs:?}");
        for cost in &costs {
            assert!(
                *cost <= BUDGET,
                "{replicas} replica(s): an idle table cost {cost} requests in a day (budget {BUDGET}): {costs:?}"
            );
            assert!(*cost > 0, "the idle tables were never probed");
        }
    }
}
