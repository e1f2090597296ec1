//! The table page's pictures in a real browser (headless Chromium, Debian's `chromium`): a
//! real table gets small files three times and the real daemon compacts it after each; the
//! page's SVG then carries, in its `data-*` attributes, the figures the probes recorded
//! (files rising with each batch and falling at each compaction, the last equal to the API's)
//! and a mark for each compaction; the staleness picture has a bar per operation; the fleet
//! page's health picture counts the table in its hour; the costs page's picture draws the
//! owner's cost today as the chargeback report sums it. A screenshot of the page is taken
//! (the README's is one of these: `TABLEKEEPER_SCREENSHOT=FILE` keeps it).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use tablekeeper_delta::fixtures::{write_small_files, SmallFiles};
use tablekeeper_store::testing::TestDatabase;
use tablekeeper_tests::browser::{browse, screenshot};
use tablekeeper_tests::reports::report_costs_json;
use tablekeeper_tests::setup::{daemon_env, InventoryFile, TableEntry};
use tablekeeper_tests::Daemon;

const TABLE: &str = "pictures.events";
const BATCH: SmallFiles = SmallFiles {
    partitions: 2,
    files_per_partition: 8,
    rows_per_file: 20,
    payload_bytes: 16,
};

/// The values of attribute `name` on the elements of class `class`, in document order.
fn data(dom: &str, class: &str, name: &str) -> Vec<String> {
    dom.split('<')
        .filter(|tag| tag.contains(&format!("class=\"{class}\"")))
        .filter_map(|tag| {
            let start = tag.find(&format!("{name}=\""))? + name.len() + 2;
            Some(tag[start..start + tag[start..].find('"')?].to_owned())
        })
        .collect()
}

/// The estimated dollars `tablekeeper report costs --owner fault-suite` sums since `since`.
fn owner_usd_since(database_url: &str, since: chrono::DateTime<chrono::Utc>) -> f64 {
    let since = since.to_rfc3339();
    let report = report_costs_json(database_url, &["--owner", "fault-suite", "--since", &since]);
    report["total"]["cost"]["estimated_usd"].as_f64().unwrap()
}

async fn succeeded_compactions(daemon: &Daemon) -> usize {
    let url = format!(
        "{}/api/v1/jobs?table={TABLE}&state=succeeded&limit=100",
        daemon.base_url
    );
    let jobs: serde_json::Value = reqwest::get(url).await.unwrap().json().await.unwrap();
    jobs["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["operation"] == "compact")
        .count()
}

/// Adds a batch of small files and waits until the daemon has compacted them.
async fn batch_then_compaction(daemon: &Daemon, path: &Path, compactions: usize) {
    write_small_files(path.to_str().unwrap(), &BATCH)
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while succeeded_compactions(daemon).await < compactions {
        assert!(
            std::time::Instant::now() < deadline,
            "compaction {compactions} did not happen; log:\n{}",
            daemon.log()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    compacted_state_probed(daemon).await;
}

/// Waits until a probe has seen the table compacted (one file a partition): its figures
/// are then recorded.
async fn compacted_state_probed(daemon: &Daemon) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let view = daemon.table_view(TABLE).await.unwrap();
        if view["probe"]["files"].as_u64() == Some(u64::from(BATCH.partitions)) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no probe saw the compaction: {view}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_table_page_draws_the_figures_of_real_compactions() {
    let db = TestDatabase::create().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events");
    // the first batch is written while no daemon runs: the first figures show it whole
    write_small_files(path.to_str().unwrap(), &BATCH)
        .await
        .unwrap();
    let defaults = "  compaction: { schedule: \"*/2 * * * * *\", min_small_files: 4 }\n";
    let inventory = InventoryFile::write(
        dir.path(),
        defaults,
        &[TableEntry {
            name: TABLE,
            path: &path,
            extra: "    layout: { partition_by: [day] }\n",
        }],
    )
    .unwrap();
    let env = daemon_env(&db.url, &inventory.path, Duration::from_secs(10), 1);
    let daemon = Daemon::start("pictures", dir.path(), &env).unwrap();
    daemon.wait_ready(Duration::from_secs(60)).await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while succeeded_compactions(&daemon).await < 1 {
        assert!(std::time::Instant::now() < deadline, "{}", daemon.log());
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    compacted_state_probed(&daemon).await;
    batch_then_compaction(&daemon, &path, 2).await;
    batch_then_compaction(&daemon, &path, 3).await;

    let url = format!("{}/tables/{TABLE}", daemon.base_url);
    let dom = browse(&url);
    let files: Vec<i64> = data(&dom, "figure", "data-files")
        .iter()
        .map(|v| v.parse().unwrap())
        .collect();
    let operations = data(&dom, "job", "data-operation");
    let compactions = operations.iter().filter(|o| *o == "compact").count();
    assert!(compactions >= 3, "three compactions marked: {operations:?}");
    // the first figures hold the whole first batch; each compaction brings the count down to
    // one file a partition, so the drawn figures fall at least three times
    let batch = i64::from(BATCH.partitions * BATCH.files_per_partition);
    assert!(files.first().is_some_and(|f| *f >= batch), "{files:?}");
    let falls = files.windows(2).filter(|w| w[1] < w[0]).count();
    assert!(falls >= 3, "the figures fall at each compaction: {files:?}");
    let view = daemon.table_view(TABLE).await.unwrap();
    assert_eq!(
        files.last().copied(),
        view["probe"]["files"].as_i64(),
        "the last figure drawn is the table's: {files:?}"
    );
    let small: Vec<String> = data(&dom, "figure", "data-small-files");
    assert_eq!(small.len(), files.len(), "every figure has its small files");
    for table in ["figures", "marked-jobs", "staleness-figures"] {
        assert!(
            dom.contains(&format!("<table id=\"{table}\">")),
            "the plain table {table}"
        );
    }
    let staleness = data(&dom, "operation", "data-operation");
    assert!(staleness.contains(&"compact".to_owned()), "{staleness:?}");
    assert!(!dom.contains("<script"), "no JavaScript");

    // the fleet page: this hour's row counts the one table under one health
    let front = browse(&format!("{}/", daemon.base_url));
    let hours = data(&front, "hour", "data-hour");
    let last = hours.iter().max().expect("an hour recorded").clone();
    let tables: i64 = hours
        .iter()
        .zip(data(&front, "hour", "data-tables"))
        .filter(|(hour, _)| **hour == last)
        .map(|(_, tables)| tables.parse::<i64>().unwrap())
        .sum();
    assert_eq!(tables, 1, "one table, one health, in the last hour");
    assert!(front.contains("<table id=\"fleet-health-figures\">"));

    // the costs page: today's figure for the table's owner is what the chargeback report
    // sums for today (read before and after the page, as probes' costs may land between)
    let today = chrono::Utc::now()
        .date_naive()
        .and_hms_opt(0, 0, 0)
        .unwrap()
        .and_utc();
    let before = owner_usd_since(&db.url, today);
    let costs = browse(&format!("{}/costs", daemon.base_url));
    let after = owner_usd_since(&db.url, today);
    let drawn: Vec<(String, String, f64)> = data(&costs, "day", "data-day")
        .into_iter()
        .zip(data(&costs, "day", "data-owner"))
        .zip(data(&costs, "day", "data-usd"))
        .map(|((day, owner), usd)| (day, owner, usd.parse().unwrap()))
        .collect();
    let (_, _, usd) = drawn
        .iter()
        .find(|(day, owner, _)| *day == today.date_naive().to_string() && owner == "fault-suite")
        .unwrap_or_else(|| panic!("no figure for today's owner: {drawn:?}"));
    assert!(
        *usd > 0.0 && *usd >= before - 1e-6 && *usd <= after + 1e-6,
        "drawn {usd}, the report {before} then {after}"
    );
    assert_eq!(drawn.len(), 30, "thirty days of the one owner: {drawn:?}");
    assert!(costs.contains("<table id=\"cost-by-owner-figures\">"));

    let shot = dir.path().join("table-page.png");
    screenshot(&url, &shot);
    let png = std::fs::read(&shot).unwrap();
    assert!(png.starts_with(b"\x89PNG"), "a PNG screenshot");
    if let Some(keep) = std::env::var_os("TABLEKEEPER_SCREENSHOT") {
        std::fs::copy(&shot, keep).unwrap();
    }
    drop(daemon);
    db.drop_db().await.unwrap();
}
