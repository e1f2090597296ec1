//! `tablekeeper maintain` runs a rewrite the daemon would split as the same tasks, side by
//! side up to the cores, with its progress on stderr (plain lines here: stderr is not a terminal), and the
//! report names each task; rows read the same through deltalake and python deltalake. A
//! Z-order partition over `maintenance.max_task_bytes` runs as one task (its files sort
//! together; the external sort bounds its memory).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use tablekeeper_delta::fixtures::{both_readers, write_small_files, SmallFiles};
use tablekeeper_tests::maintain;
use tablekeeper_tests::setup::{InventoryFile, TableEntry};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maintain_runs_a_split_rewrite_as_tasks_and_shows_its_progress() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("t");
    let uri = table.to_str().unwrap().to_owned();
    let spec = SmallFiles {
        partitions: 3,
        files_per_partition: 4,
        rows_per_file: 500,
        payload_bytes: 16,
    };
    write_small_files(&uri, &spec).await.unwrap();
    let (rust_before, python_before) = both_readers(&uri).await.unwrap();
    let inventory = InventoryFile::write(
        dir.path(),
        "",
        &[TableEntry {
            name: "t",
            path: &table,
            extra: "    layout: { zorder: [user_id] }\n",
        }],
    )
    .unwrap();

    let out = maintain(&inventory.path, "t", "compact");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("progress: 0 of 3 tasks"), "{stderr}");
    assert!(stderr.contains("progress: 3 of 3 tasks"), "{stderr}");
    let result: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let tasks = result["report"]["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 3, "{result:#}");
    assert!(
        tasks.iter().all(|t| t["state"] == "succeeded"),
        "{result:#}"
    );
    assert_eq!(result["report"]["files_removed"], 12, "{result:#}");
    assert_eq!(
        result["report"]["commits"].as_array().unwrap().len(),
        3,
        "{result:#}"
    );
    let (rust_after, python_after) = both_readers(&uri).await.unwrap();
    assert!(rust_after == rust_before, "deltalake reads other rows");
    assert!(
        python_after == python_before,
        "python deltalake reads other rows"
    );

    // every partition over the task limit: each is Z-ordered as one task all the same
    let inventory = InventoryFile::write(
        dir.path(),
        "",
        &[TableEntry {
            name: "t",
            path: &table,
            extra: "    layout: { zorder: [user_id] }\n    maintenance: { max_task_bytes: 1KiB }\n",
        }],
    )
    .unwrap();
    let out = maintain(&inventory.path, "t", "zorder");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let result: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let tasks = result["report"]["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 3, "one task per partition: {result:#}");
    assert!(
        tasks
            .iter()
            .all(|t| t["state"] == "succeeded" && t["files"] == 1),
        "each partition's one compacted file z-ordered: {result:#}"
    );
    let (rust_after, python_after) = both_readers(&uri).await.unwrap();
    assert!(rust_after == rust_before, "the Z-order changed rows");
    assert!(python_after == python_before, "the Z-order changed rows");
}
