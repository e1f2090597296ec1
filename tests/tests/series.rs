//! Which series a table has (README "Metrics": which series exist when), through the real
//! binary: a healthy table that nothing has happened to yet exports exactly the series its
//! alerts and dashboard panels read, and a table removed from the inventory (hot reload)
//! loses every series labelled with it. A count, not a timing: `/metrics` grows with the
//! fleet, so each series per table is one more per table for every replica's scrape.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::time::Duration;

use tablekeeper_delta::fixtures::SmallFiles;
use tablekeeper_store::testing::TestDatabase;
use tablekeeper_tests::jobs::wait_until;
use tablekeeper_tests::setup::{daemon_env, serial, small_file_table, InventoryFile, TableEntry};
use tablekeeper_tests::Daemon;

/// Schedules that do not come due during the test: nothing runs, the tables stay idle.
const DEFAULTS: &str = "  compaction: { schedule: \"0 0 1 1 *\" }
  vacuum: { schedule: \"0 0 1 1 *\" }
  checkpoint: { schedule: \"0 0 1 1 *\" }
  purge: { schedule: \"0 0 1 1 *\" }
";

/// The series of `table` in a `/metrics` text, without their values.
fn series_of(metrics: &str, table: &str) -> BTreeSet<String> {
    let label = format!("table=\"{table}\"");
    metrics
        .lines()
        .filter(|l| !l.starts_with('#') && l.contains(&label))
        .map(|l| {
            l.rsplit_once(' ')
                .map_or(l, |(series, _)| series)
                .to_owned()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_table_has_only_the_series_rules_read_and_a_removed_table_none() {
    let _serial = serial().await;
    let db = TestDatabase::create().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kept = dir.path().join("kept");
    let gone = dir.path().join("gone");
    for path in [&kept, &gone] {
        small_file_table(
            path,
            &SmallFiles {
                partitions: 0,
                files_per_partition: 3,
                ..SmallFiles::default()
            },
        )
        .await
        .unwrap();
    }
    let both = [
        TableEntry {
            name: "s.kept",
            path: &kept,
            extra: "",
        },
        TableEntry {
            name: "s.gone",
            path: &gone,
            extra: "",
        },
    ];
    let inv = InventoryFile::write(dir.path(), DEFAULTS, &both).unwrap();
    let daemon = Daemon::start(
        "r1",
        dir.path(),
        &daemon_env(&db.url, &inv.path, Duration::from_secs(10), 1),
    )
    .unwrap();
    daemon.wait_ready(Duration::from_secs(60)).await.unwrap();
    // the first probe publishes the file figures; staleness, which needs the table's creation
    // time from its history, comes with the probe that takes the history read beside it
    wait_until(
        Duration::from_secs(60),
        "both tables probed, history read",
        || async {
            let m = daemon.metrics().await.unwrap_or_default();
            ["s.kept", "s.gone"].iter().all(|t| {
                let series = series_of(&m, t);
                ["tablekeeper_table_files{", "tablekeeper_staleness_seconds{"]
                    .iter()
                    .all(|name| series.iter().any(|s| s.starts_with(name)))
            })
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}; log:\n{}", daemon.log()));

    let m = daemon.metrics().await.unwrap();
    let expected: BTreeSet<String> = [
        r#"tablekeeper_table_info{owner="fault-suite",table="s.kept"}"#,
        r#"tablekeeper_staleness_seconds{operation="compact",table="s.kept"}"#,
        r#"tablekeeper_staleness_seconds{operation="vacuum",table="s.kept"}"#,
        r#"tablekeeper_staleness_seconds{operation="checkpoint",table="s.kept"}"#,
        r#"tablekeeper_table_files{table="s.kept"}"#,
        r#"tablekeeper_table_size_bytes{table="s.kept"}"#,
        r#"tablekeeper_table_small_files{table="s.kept"}"#,
        r#"tablekeeper_table_version{table="s.kept"}"#,
        r#"tablekeeper_table_commits_since_checkpoint{table="s.kept"}"#,
        r#"tablekeeper_table_commits_per_hour{table="s.kept"}"#,
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    let found = series_of(&m, "s.kept");
    assert_eq!(
        found,
        expected,
        "a healthy idle table: {} series, expected {}",
        found.len(),
        expected.len()
    );
    assert_eq!(series_of(&m, "s.gone").len(), expected.len());

    // hot reload without s.gone: every series labelled with it goes, s.kept keeps its own
    InventoryFile::write(dir.path(), DEFAULTS, &both[..1]).unwrap();
    daemon.signal("HUP").unwrap();
    wait_until(Duration::from_secs(30), "s.gone's series to go", || async {
        let m = daemon.metrics().await.unwrap_or_default();
        series_of(&m, "s.gone").is_empty()
    })
    .await
    .unwrap_or_else(|e| panic!("{e}; log:\n{}", daemon.log()));
    let m = daemon.metrics().await.unwrap();
    assert_eq!(series_of(&m, "s.kept"), expected);
    drop(daemon);
    db.drop_db().await.unwrap();
}
