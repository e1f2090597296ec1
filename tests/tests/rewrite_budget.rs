//! Rewrites of partitions larger than the replica's rewrite memory budget, through the real
//! binary: `tablekeeper maintain` with `TABLEKEEPER_REWRITE_MEMORY_BUDGET=64MiB` compacts and
//! then Z-orders a python-written table whose two partitions each hold more decoded rows than
//! the whole budget. Both finish; the Z-order sorts within the budget by spilling sorted runs
//! (its debug log says how many); python deltalake and deltalake read the same rows before and
//! after. The memory this takes is measured in BENCHMARKS.md, not here.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use tablekeeper_delta::fixtures::both_readers;
use tablekeeper_delta::fixtures::peers::{python_rows, run_python};
use tablekeeper_tests::tablekeeper;

/// Two partitions of 1,300,000 rows each, about 75 MB of decoded rows per partition, in
/// files of 100,000 rows: more than a 64 MiB budget holds, and more than a Z-order's 32 MiB
/// minimum run.
const WRITE: &str = r#"
import os, random, sys
import pyarrow as pa
from deltalake import write_deltalake
uri = sys.argv[1]
rng = random.Random(5)
for part in ["a", "b"]:
    for _ in range(13):
        n = 100_000
        data = pa.table({
            "p": pa.array([part] * n),
            "x": pa.array([rng.randrange(-10**9, 10**9) for _ in range(n)], pa.int64()),
            "payload": pa.array([rng.getrandbits(128).to_bytes(16, "big").hex() for _ in range(n)]),
        })
        write_deltalake(uri, data, mode="append", partition_by=["p"])
sys.stdout.flush()
os._exit(0)
"#;

/// Runs `operation` under a 64 MiB budget; it must succeed and remove `files_removed` files.
fn maintain(inventory: &str, operation: &str, files_removed: u64) -> String {
    let out = tablekeeper()
        .args([
            "maintain",
            "--inventory",
            inventory,
            "--table",
            "big.parts",
            "--operation",
            operation,
        ])
        .env("TABLEKEEPER_REWRITE_MEMORY_BUDGET", "64MiB")
        .env("RUST_LOG", "info,tablekeeper_delta=debug")
        .output()
        .expect("tablekeeper runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "{operation} failed: {}\n{stderr}",
        String::from_utf8_lossy(&out.stdout)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(report["report"]["files_removed"], files_removed, "{report}");
    stderr
}

#[tokio::test]
async fn partitions_larger_than_the_budget_are_compacted_and_z_ordered_within_it() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("parts").to_string_lossy().into_owned();
    run_python(WRITE, &[&uri]).expect("python writes");
    let inventory = dir.path().join("inventory.yaml");
    std::fs::write(
        &inventory,
        format!(
            "tables:\n  - name: big.parts\n    path: \"{uri}\"\n    owner: data\n    \
             layout: {{ partition_by: [p], zorder: [x] }}\n    \
             maintenance:\n      compaction: {{ target_file_size: 1GiB, min_small_files: 2 }}\n"
        ),
    )
    .unwrap();
    let inventory = inventory.to_str().unwrap();
    let before = both_readers(&uri).await.expect("both readers read it");
    assert_eq!(before.1.len(), 2_600_000);

    // 13 files per partition become one each
    maintain(inventory, "compact", 26);
    assert_eq!(python_rows(&uri, None).expect("python reads"), before.1);

    let log = maintain(inventory, "zorder", 2);
    let partitions: Vec<&str> = log
        .lines()
        .filter(|line| line.contains("partition z-ordered"))
        .collect();
    assert_eq!(partitions.len(), 2, "{log}");
    for line in partitions {
        let runs: usize = line
            .split_whitespace()
            .find_map(|field| field.strip_prefix("spilled_runs="))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no spilled_runs in {line}"));
        assert!(
            runs >= 2,
            "a partition past the budget sorts in spilled runs: {line}"
        );
    }
    assert_eq!(
        both_readers(&uri).await.expect("both readers read it"),
        before
    );
}
