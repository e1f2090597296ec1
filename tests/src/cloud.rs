//! The object-store path end to end, one scenario for every emulated cloud (Azurite, GCS):
//! python deltalake writes a table at a cloud URI; the real binary compacts it, repairs a
//! stale overwrite python commits from an old snapshot, Z-orders, checkpoints and vacuums
//! it, with the rows read back by python deltalake and deltalake after each step. And the
//! refusal: `plan` with a credential the store refuses says `unreadable` and exits 3.

use std::path::Path;

use tablekeeper_delta::fixtures::peers::{python_rows, run_python};
use tablekeeper_delta::fixtures::read_rows_sorted;

use crate::{maintained, tablekeeper};

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

/// Runs [`WRITER`] on `uri`; the table's version after it.
pub fn python(uri: &str, args: &[&str]) -> u64 {
    let mut all = vec![uri];
    all.extend_from_slice(args);
    let out = run_python(WRITER, &all).unwrap_or_else(|e| panic!("python deltalake on {uri}: {e}"));
    out.trim()
        .parse()
        .unwrap_or_else(|e| panic!("python deltalake printed {out:?}: {e}"))
}

/// Both readers see exactly `expected` ids.
pub async fn assert_ids(uri: &str, expected: &[i64], context: &str) {
    let ids = |lines: Vec<String>| -> Vec<i64> {
        let mut ids: Vec<i64> = lines
            .iter()
            .map(|l| {
                let row: serde_json::Value =
                    serde_json::from_str(l).unwrap_or(serde_json::Value::Null);
                row["id"].as_i64().unwrap_or_else(|| {
                    l.trim()
                        .parse()
                        .unwrap_or_else(|e| panic!("row {l:?}: {e}"))
                })
            })
            .collect();
        ids.sort_unstable();
        ids
    };
    let python = python_rows(uri, None).unwrap_or_else(|e| panic!("python deltalake: {e}"));
    assert_eq!(ids(python), expected, "python deltalake, {context}");
    let rust = read_rows_sorted(uri, None)
        .await
        .unwrap_or_else(|e| panic!("deltalake: {e}"));
    assert_eq!(ids(rust), expected, "deltalake, {context}");
}

/// The whole maintenance sequence on the table at `uri`, inventoried as `table` in an
/// inventory written under `dir`.
pub async fn maintenance_keeps_every_row(dir: &Path, uri: &str, table: &str) {
    let inventory = dir.join("inventory.yaml");
    std::fs::write(
        &inventory,
        format!(
            "tables:\n  - name: {table}\n    path: \"{uri}\"\n    owner: data-platform\n    writers:\n      overwrites: {{ schedule: \"0 0 1 1 *\", duration: 1m }}\n    layout: {{ zorder: [id] }}\n    retention: {{ deleted_file_retention: 0s, allow_short_retention: true }}\n    maintenance:\n      compaction: {{ min_small_files: 2 }}\n"
        ),
    )
    .unwrap_or_else(|e| panic!("{}: {e}", inventory.display()));

    let snapshot = python(uri, &["append", "10", "0"]);
    let compacted = maintained(&inventory, table, "compact");
    assert!(
        compacted["report"]["commits"]
            .as_array()
            .is_some_and(|c| !c.is_empty()),
        "{compacted}"
    );
    assert_ids(uri, &(0..100).collect::<Vec<_>>(), "after compaction").await;
    // what it cost, counted on this store as on S3 (README "What maintenance costs")
    counted(&compacted, &["get", "put", "list"]);
    assert!(
        compacted["cost"]["bytes_read"].as_u64() > Some(0)
            && compacted["cost"]["bytes_written"].as_u64() > Some(0),
        "{compacted}"
    );

    // a writer from before the compaction overwrites: the hazard, then its exact repair (its
    // overwrites are declared, in a window that is not open now, so rewrites go on after)
    python(uri, &["overwrite", &snapshot.to_string()]);
    let stale = python_rows(uri, None).unwrap_or_else(|e| panic!("python deltalake: {e}"));
    assert_eq!(stale.len(), 105, "the stale rows are visible");
    let repaired = maintained(&inventory, table, "repair");
    assert!(
        repaired["report"]["repairs"][0]["committed_version"].is_i64(),
        "{repaired}"
    );
    let mut expected: Vec<i64> = (1000..1005).collect();
    assert_ids(uri, &expected, "after the repair").await;

    python(uri, &["append", "3", "2000"]);
    expected.extend(2000..2030);
    maintained(&inventory, table, "zorder");
    assert_ids(uri, &expected, "after Z-order").await;
    maintained(&inventory, table, "checkpoint");
    // no window (declared 0s): every file the rewrites and the repair removed goes
    let vacuumed = maintained(&inventory, table, "vacuum");
    assert!(
        vacuumed["report"]["files_removed"]
            .as_u64()
            .is_some_and(|n| n > 0),
        "{vacuumed}"
    );
    assert_ids(uri, &expected, "after checkpoint and VACUUM").await;
    counted(&vacuumed, &["list", "delete"]);
}

/// `maintained`'s output counts requests of each of `kinds`.
fn counted(maintained: &serde_json::Value, kinds: &[&str]) {
    for kind in kinds {
        assert!(
            maintained["cost"]["requests"][kind].as_u64() > Some(0),
            "no `{kind}` request counted: {maintained}"
        );
    }
}

/// `tablekeeper plan` of the table at `uri` with `env` (a credential the store refuses):
/// exit 3, the table `unreadable`. Its stdout, for the store's own words.
pub fn plan_is_unreadable(dir: &Path, uri: &str, table: &str, env: &[(&str, &str)]) -> String {
    let inventory = dir.join("inventory.yaml");
    std::fs::write(
        &inventory,
        format!("tables:\n  - name: {table}\n    path: \"{uri}\"\n    owner: o\n"),
    )
    .unwrap_or_else(|e| panic!("{}: {e}", inventory.display()));
    let mut plan = tablekeeper();
    plan.arg("plan").arg("--inventory").arg(&inventory);
    for (key, value) in env {
        plan.env(key, value);
    }
    let out = plan
        .output()
        .unwrap_or_else(|e| panic!("tablekeeper plan: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.code(),
        Some(3),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("health: unreadable"), "{stdout}");
    stdout
}
