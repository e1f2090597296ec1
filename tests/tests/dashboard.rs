//! The dashboard with a thousand tables, loaded by a real browser (headless Chromium, Debian's
//! `chromium` package): the worst tables come first, the page shows 50 of them with paging,
//! the owner and health filters narrow it, each table has its own page, and the front page
//! stays small. Structure only; render times are benchmarks, not tests.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use tablekeeper_delta::fixtures::{write_small_files, SmallFiles};
use tablekeeper_store::testing::TestDatabase;
use tablekeeper_tests::browser::browse;
use tablekeeper_tests::setup::daemon_env;
use tablekeeper_tests::Daemon;

const TABLES: usize = 1000;
const REAL: usize = 20;

/// The body rows of the table with `id`.
fn rows<'a>(dom: &'a str, id: &str) -> Vec<&'a str> {
    let start = dom
        .find(&format!("<table id=\"{id}\">"))
        .unwrap_or_else(|| panic!("no table #{id} in:\n{dom}"));
    let table = &dom[start..];
    let table = &table[..table.find("</table>").unwrap()];
    let body = &table[table.find("<tbody>").unwrap()..];
    body.split("<tr").skip(1).collect()
}

fn owner(i: usize) -> String {
    format!("team-{}", i % 10)
}

#[tokio::test]
async fn a_thousand_tables_page_worst_first_with_filters() {
    let dir = tempfile::tempdir().unwrap();
    let mut yaml = String::from(
        "defaults:\n  compaction: { enabled: false }\n  vacuum: { enabled: false }\n  purge: { enabled: false }\ntables:\n",
    );
    for i in 0..TABLES {
        let path = dir.path().join(format!("t{i:04}"));
        if i < REAL {
            write_small_files(
                path.to_str().unwrap(),
                &SmallFiles {
                    partitions: 0,
                    files_per_partition: 1,
                    rows_per_file: 10,
                    payload_bytes: 8,
                },
            )
            .await
            .unwrap();
        }
        yaml.push_str(&format!(
            "  - name: t{i:04}\n    path: \"{}\"\n    owner: {}\n",
            path.display(),
            owner(i)
        ));
    }
    let inventory = dir.path().join("inventory.yaml");
    std::fs::write(&inventory, yaml).unwrap();
    let db = TestDatabase::create().await.unwrap();
    let env = daemon_env(&db.url, &inventory, Duration::from_secs(10), 1);
    let daemon = Daemon::start("r1", dir.path(), &env).unwrap();
    daemon.wait_ready(Duration::from_secs(120)).await.unwrap();
    let base = daemon.base_url.clone();
    wait_probed(&base, &daemon).await;

    let front = browse(&format!("{base}/"));
    assert!(front.contains("1000 tables"), "{front}");
    assert!(front.contains("page 1 of 20"), "{front}");
    assert!(front.contains("rel=\"next\""), "{front}");
    let first_page = rows(&front, "tables");
    assert_eq!(first_page.len(), 50);
    assert!(
        first_page.iter().all(|r| r.contains(">unreadable")),
        "the unreadable tables come first"
    );

    // the last page holds the readable ones
    let last = browse(&format!("{base}/?page=20"));
    assert!(last.contains("page 20 of 20") && last.contains("rel=\"prev\""));
    let last_rows = rows(&last, "tables");
    assert_eq!(last_rows.len(), 50);
    let readable = last_rows
        .iter()
        .filter(|r| !r.contains(">unreadable"))
        .count();
    assert_eq!(readable, REAL, "{last}");

    let team3 = browse(&format!("{base}/?owner=team-3&health=unreadable"));
    assert!(team3.contains("98 matching"), "{team3}");
    assert!(rows(&team3, "tables")
        .iter()
        .all(|r| r.contains("<td>team-3</td>")));
    assert!(
        team3.contains("<option value=\"team-3\" selected"),
        "the filter form keeps the choice"
    );

    let table = browse(&format!("{base}/tables/t0005"));
    assert!(table.contains("<h1>t0005</h1>"), "{table}");
    assert_eq!(rows(&table, "operations").len(), 5);
    let broken = browse(&format!("{base}/tables/t0500"));
    assert!(broken.contains("unreadable"), "{broken}");

    let raw = reqwest::get(format!("{base}/"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(raw.len() < 300 * 1024, "front page is {} bytes", raw.len());
    let missing = reqwest::get(format!("{base}/tables/nope")).await.unwrap();
    assert_eq!(missing.status().as_u16(), 404);
}

/// Waits until every table has been probed once.
async fn wait_probed(base: &str, daemon: &Daemon) {
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let body: serde_json::Value = reqwest::get(format!("{base}/api/v1/tables"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let probed = body["tables"]
            .as_array()
            .map(|t| t.iter().filter(|v| !v["probed_at"].is_null()).count())
            .unwrap_or(0);
        if probed == TABLES {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{probed} of {TABLES} tables probed; log:\n{}",
            daemon.log()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
