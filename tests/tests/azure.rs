//! The Azure path end to end, on Azurite (Azure Blob Storage's emulator): python deltalake
//! writes an `az://` table; the real binary compacts, repairs a stale overwrite python commits
//! from an old snapshot, Z-orders, checkpoints and vacuums it, with the rows read back by
//! python deltalake and deltalake after each step. A wrong account key makes the table
//! `unreadable` (Azure's 403), not `unknown`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use tablekeeper_delta::fixtures::azurite::AzureServer;
use tablekeeper_delta::fixtures::peers::{python_rows, run_python};
use tablekeeper_delta::fixtures::read_rows_sorted;
use tablekeeper_tests::{maintained, tablekeeper};

/// Python deltalake: `append N FROM` appends N commits of ten ids from FROM; `overwrite V`
/// overwrites with ids 1000..1005 from the table as it was at version V. Prints the version.
const WRITER: &str = r#"
import os, sys
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
path, action = sys.argv[1], sys.argv[2]
ids = lambda lo, hi: pa.table({"id": pa.array(list(range(lo, hi)), pa.int64())})
if action == "append":
    n, start = int(sys.argv[3]), int(sys.argv[4])
    for i in range(n):
        write_deltalake(path, ids(start + i * 10, start + i * 10 + 10), mode="append")
else:
    write_deltalake(DeltaTable(path, version=int(sys.argv[3])), ids(1000, 1005), mode="overwrite")
print(DeltaTable(path).version(), flush=True)
os._exit(0)
"#;

fn python(uri: &str, args: &[&str]) -> u64 {
    let mut all = vec![uri];
    all.extend_from_slice(args);
    run_python(WRITER, &all).unwrap().trim().parse().unwrap()
}

/// Both readers see exactly `expected` ids.
async fn assert_ids(uri: &str, expected: &[i64], context: &str) {
    let ids = |lines: Vec<String>| -> Vec<i64> {
        let mut ids: Vec<i64> = lines
            .iter()
            .map(|l| {
                let row: serde_json::Value = serde_json::from_str(l).unwrap();
                row["id"]
                    .as_i64()
                    .unwrap_or_else(|| l.trim().parse().unwrap())
            })
            .collect();
        ids.sort_unstable();
        ids
    };
    assert_eq!(
        ids(python_rows(uri, None).unwrap()),
        expected,
        "python deltalake, {context}"
    );
    assert_eq!(
        ids(read_rows_sorted(uri, None).await.unwrap()),
        expected,
        "deltalake, {context}"
    );
}

#[tokio::test]
async fn maintenance_on_azure_blob_storage_keeps_every_row() {
    AzureServer::shared().expect("Azurite");
    let dir = tempfile::tempdir().unwrap();
    let uri = format!("az://lake/events-{}", uuid::Uuid::new_v4());
    let inventory = dir.path().join("inventory.yaml");
    std::fs::write(
        &inventory,
        format!(
            "tables:\n  - name: az.events\n    path: \"{uri}\"\n    owner: data-platform\n    writers:\n      overwrites: {{ schedule: \"0 0 1 1 *\", duration: 1m }}\n    layout: {{ zorder: [id] }}\n    retention: {{ deleted_file_retention: 0s, allow_short_retention: true }}\n    maintenance:\n      compaction: {{ min_small_files: 2 }}\n"
        ),
    )
    .unwrap();

    let snapshot = python(&uri, &["append", "10", "0"]);
    let compacted = maintained(&inventory, "az.events", "compact");
    assert!(
        !compacted["report"]["commits"]
            .as_array()
            .unwrap()
            .is_empty(),
        "{compacted}"
    );
    assert_ids(&uri, &(0..100).collect::<Vec<_>>(), "after compaction").await;

    // a writer from before the compaction overwrites: the hazard, then its exact repair (its
    // overwrites are declared, in a window that is not open now, so rewrites go on after)
    python(&uri, &["overwrite", &snapshot.to_string()]);
    assert_eq!(
        python_rows(&uri, None).unwrap().len(),
        105,
        "the stale rows are visible"
    );
    let repaired = maintained(&inventory, "az.events", "repair");
    assert!(
        repaired["report"]["repairs"][0]["committed_version"].is_i64(),
        "{repaired}"
    );
    let mut expected: Vec<i64> = (1000..1005).collect();
    assert_ids(&uri, &expected, "after the repair").await;

    python(&uri, &["append", "3", "2000"]);
    expected.extend(2000..2030);
    maintained(&inventory, "az.events", "zorder");
    assert_ids(&uri, &expected, "after Z-order").await;
    maintained(&inventory, "az.events", "checkpoint");
    // no window (declared 0s): every file the rewrites and the repair removed goes
    let vacuumed = maintained(&inventory, "az.events", "vacuum");
    assert!(
        vacuumed["report"]["files_removed"].as_u64().unwrap() > 0,
        "{vacuumed}"
    );
    assert_ids(&uri, &expected, "after checkpoint and VACUUM").await;
}

#[test]
fn a_wrong_account_key_makes_an_azure_table_unreadable() {
    AzureServer::shared().expect("Azurite");
    let dir = tempfile::tempdir().unwrap();
    let uri = format!("az://lake/keyed-{}", uuid::Uuid::new_v4());
    python(&uri, &["append", "1", "0"]);
    let inventory = dir.path().join("inventory.yaml");
    std::fs::write(
        &inventory,
        format!("tables:\n  - name: az.keyed\n    path: \"{uri}\"\n    owner: o\n"),
    )
    .unwrap();
    let out = tablekeeper()
        .args(["plan", "--inventory", inventory.to_str().unwrap()])
        // a rotated key: base64, the right length, not the account's
        .env(
            "AZURE_STORAGE_ACCOUNT_KEY",
            "d3Jvbmd3cm9uZ3dyb25nd3Jvbmd3cm9uZ3dyb25nd3Jvbmd3cm9uZ3dyb25nd3Jvbmd3cm9uZ3dyb25nd3Jvbmc=",
        )
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("health: unreadable"), "{stdout}");
    assert!(stdout.contains("403"), "the store's own words: {stdout}");
}
