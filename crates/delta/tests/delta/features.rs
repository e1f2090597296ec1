//! The table features real tables carry, on the reference tables written by Databricks,
//! Spark and Delta Live Tables: every operation either maintains the table (rows identical
//! through deltalake and python deltalake, every version that loaded still loads) or refuses
//! it untouched with a message naming the feature (or the part of the log it cannot read). The expected outcome per table is the
//! README's "Table features" table.

use std::time::Duration;

use tablekeeper_delta::{
    checkpoint, optimize, vacuum, CheckpointOptions, CompactOptions, DeltaError, LogCleanup,
    OpReport, Optimize, PurgeOptions, VacuumMode, VacuumOptions,
};
use tokio_util::sync::CancellationToken;

use crate::aged::{log_contents, reference_table};
use crate::common::{compact_small_files, expired_orphan, probe_once, zorder_on};

const TEN_YEARS: Duration = Duration::from_secs(3650 * 86_400);

/// The first column of the table's schema that is not a partition column: what a Z-order of
/// any table can sort on.
async fn zorder_column(uri: &str) -> String {
    let table = tablekeeper_delta::open_table(uri)
        .await
        .expect("table loads");
    let snapshot = table.snapshot().expect("snapshot");
    let partitions = snapshot.metadata().partition_columns().to_vec();
    snapshot
        .schema()
        .fields()
        .map(|f| f.name().clone())
        .find(|name| !partitions.contains(name))
        .expect("a data column")
}

async fn every_operation(uri: &str) -> Vec<(&'static str, Result<OpReport, DeltaError>)> {
    let cancel = CancellationToken::new();
    let target = 64 * 1024 * 1024;
    let column = zorder_column(uri).await;
    vec![
        (
            "compact",
            optimize(
                uri,
                Optimize::Compact(&CompactOptions {
                    target_file_size: target,
                    min_small_files: 2,
                    small_file_factor: 1.0,
                    compression: Default::default(),
                    dry_run: false,
                    max_conflict_retries: 0,
                }),
                &cancel,
            )
            .await,
        ),
        (
            "zorder",
            optimize(uri, Optimize::ZOrder(&zorder_on(&[&column])), &cancel).await,
        ),
        (
            "purge",
            optimize(
                uri,
                Optimize::Purge(&PurgeOptions {
                    target_file_size: target,
                    compression: Default::default(),
                    dry_run: false,
                    max_conflict_retries: 0,
                }),
                &cancel,
            )
            .await,
        ),
        (
            "vacuum",
            vacuum(
                uri,
                &VacuumOptions {
                    inventory_retention: TEN_YEARS,
                    allow_short_retention: false,
                    mode: VacuumMode::Full,
                    dry_run: false,
                    stale_watch: tablekeeper_delta::DEFAULT_STALE_WATCH,
                    keep: Default::default(),
                },
                &cancel,
            )
            .await,
        ),
        (
            "checkpoint",
            checkpoint(
                uri,
                &CheckpointOptions {
                    max_commits_since_checkpoint: 1,
                    log_retention: TEN_YEARS,
                    force: true,
                    log_cleanup: LogCleanup::Unrecorded,
                    pins: Vec::new(),
                },
                &cancel,
            )
            .await,
        ),
    ]
}

/// (table, operations expected to be refused, what their refusal names)
const EXPECTED: &[(&str, &[&str], &str)] = &[
    // rewritten by tablekeeper under physical names
    ("table_with_column_mapping", &[], ""),
    // tablekeeper's commits keep identity high-water marks and in-commit timestamps
    ("checkpoint-v2-table", &[], ""),
    ("cdc_ict_table", &[], ""),
    // Databricks Runtime 13.2 names the clustering feature `liquid` (its preview name); row
    // tracking is enabled: rows move with their ids materialized. Its layout is its
    // clustering: compaction clusters it, a Z-order is refused
    (
        "table_with_liquid_clustering",
        &["zorder"],
        "liquid clustering",
    ),
    // its first `metaData` has no `schemaString`: the kernel cannot replay the log from there,
    // so VACUUM (which loads the versions it must check) and checkpoint fail, changing nothing
    (
        "delta-live-table",
        &["vacuum", "checkpoint"],
        "schemaString",
    ),
    ("table_with_edge_timestamps", &[], ""),
    // UniForm (icebergCompatV2, column mapping by id, arrays and maps with nested field ids):
    // rewritten with the partition values and field ids Iceberg readers need
    ("table-with-icebegCompatV2Enabled", &[], ""),
    // `typeWidening-preview`: files of the older types, converted by tablekeeper's own scan
    // (neither reader here reads the table: `feature_rules.rs` checks it with pyarrow)
    ("type-widening", &[], ""),
    // `collations` (no data files: nothing to rewrite) and `materializePartitionColumns`
    ("collations-table", &[], ""),
    ("partitioned_with_materialize_feature", &[], ""),
];

#[tokio::test]
async fn reference_tables_are_maintained_or_refused_naming_the_feature() {
    let mut seen = Vec::new();
    for (name, refused, feature) in EXPECTED {
        let dir = reference_table(name);
        let uri = dir.path().to_str().expect("utf-8").to_owned();
        let rust_before = tablekeeper_delta::fixtures::read_rows_sorted(&uri, None).await;
        let python_before = tablekeeper_delta::fixtures::peers::python_rows(&uri, None);
        let log_before = log_contents(dir.path());
        for (op, result) in every_operation(&uri).await {
            match result {
                Ok(_) => seen.push(format!("{name} {op} ok")),
                Err(err) if refused.contains(&op) => {
                    let message = err.to_string();
                    seen.push(format!("{name} {op} refused: {message}"));
                    assert!(refused.contains(&op), "{name}: {op} refused: {message}");
                    assert!(message.contains(feature), "{name}: {op}: {message}");
                }
                Err(err) => panic!("{name}: {op} failed: {err}"),
            }
        }
        for op in *refused {
            assert!(
                seen.iter()
                    .any(|s| s.starts_with(&format!("{name} {op} refused"))),
                "{name}: {op} was expected to be refused: {seen:#?}"
            );
        }
        let log_after = log_contents(dir.path());
        assert!(
            log_before.keys().all(|k| log_after.contains_key(k)),
            "{name}: log files deleted"
        );
        if let Ok(rows) = rust_before {
            assert_eq!(
                tablekeeper_delta::fixtures::read_rows_sorted(&uri, None)
                    .await
                    .expect("deltalake reads it"),
                rows,
                "{name}: rows (deltalake)"
            );
        }
        if let Ok(rows) = python_before {
            assert_eq!(
                tablekeeper_delta::fixtures::peers::python_rows(&uri, None).expect("python"),
                rows,
                "{name}: rows (python deltalake)"
            );
        }
    }
    eprintln!("{}", seen.join("\n"));
}

/// Compaction (which finds no partition of two small files there), Z-order and VACUUM on a
/// table with in-commit timestamps (Delta 4.3's `cdc_ict_table`): deltalake's commit path
/// refuses the table, tablekeeper's own commits carry
/// `commitInfo` first with an `inCommitTimestamp` above every earlier one, the probe's
/// staleness reads it, and both readers see the same rows.
#[tokio::test]
async fn tablekeeper_commits_carry_increasing_in_commit_timestamps() {
    let dir = reference_table("cdc_ict_table");
    let uri = dir.path().to_str().expect("utf-8").to_owned();
    let cancel = CancellationToken::new();
    let compacted = optimize(&uri, Optimize::Compact(&compact_small_files()), &cancel)
        .await
        .expect("compaction of an in-commit-timestamp table");
    let zordered = optimize(&uri, Optimize::ZOrder(&zorder_on(&["name"])), &cancel)
        .await
        .expect("z-order of an in-commit-timestamp table");
    assert!(zordered.files_removed >= 1, "{zordered:?}");
    let python_before =
        tablekeeper_delta::fixtures::peers::python_rows(&uri, None).expect("python");
    let rust_before = tablekeeper_delta::fixtures::read_rows_sorted(&uri, None)
        .await
        .expect("deltalake");
    // the orphan of a failed rewrite, long expired
    let orphan = expired_orphan(
        dir.path(),
        "part-00000-0rphan00-0000-0000-0000-000000000000-c000.snappy.parquet",
    );
    let report = vacuum(
        &uri,
        &VacuumOptions {
            inventory_retention: std::time::Duration::from_secs(7 * 86_400),
            allow_short_retention: false,
            mode: VacuumMode::Full,
            dry_run: false,
            stale_watch: tablekeeper_delta::DEFAULT_STALE_WATCH,
            keep: Default::default(),
        },
        &CancellationToken::new(),
    )
    .await
    .expect("vacuum of an in-commit-timestamp table");
    // the orphan, and the files only versions long past the window referenced
    assert!(
        report
            .would_delete_paths
            .iter()
            .any(|p| p.contains("0rphan00")),
        "{report:?}"
    );
    assert_eq!(
        Some(report.files_removed),
        report.would_delete_files,
        "{report:?}"
    );
    assert!(!orphan.exists());
    assert_eq!(report.commits.len(), 2, "VACUUM START and END: {report:?}");
    let ours = compacted.commits.len() + zordered.commits.len() + 2;

    let mut versions: Vec<(u64, std::path::PathBuf)> =
        std::fs::read_dir(dir.path().join("_delta_log"))
            .expect("log")
            .filter_map(|e| {
                let path = e.ok()?.path();
                let v = path
                    .file_name()?
                    .to_str()?
                    .strip_suffix(".json")?
                    .parse()
                    .ok()?;
                Some((v, path))
            })
            .collect();
    versions.sort();
    // the reference table's own timestamps are not in order (its commit 0 says 2026, commit
    // 1 says 2023); each of tablekeeper's must exceed the one before it, and every earlier one
    let icts: Vec<i64> = versions
        .iter()
        .map(|(version, path)| {
            let text = std::fs::read_to_string(path).expect("commit");
            let first: serde_json::Value =
                serde_json::from_str(text.lines().next().expect("a line")).expect("json");
            first["commitInfo"]["inCommitTimestamp"]
                .as_i64()
                .unwrap_or_else(|| {
                    panic!("commit {version}: commitInfo first, with its timestamp: {first}")
                })
        })
        .collect();
    let (earlier, ours) = icts.split_at(icts.len() - ours);
    let newest_earlier = earlier.iter().copied().max().expect("earlier commits");
    assert!(
        ours[0] > newest_earlier && ours.windows(2).all(|w| w[1] > w[0]),
        "in-commit timestamps {ours:?} after {earlier:?}"
    );
    // staleness and history read the in-commit timestamp, not the file's time
    let probe = probe_once(&uri).await;
    assert_eq!(
        probe.history.last_commit_at.map(|t| t.timestamp_millis()),
        ours.last().copied(),
        "{probe:?}"
    );
    let last: Vec<String> = versions[versions.len() - 2..]
        .iter()
        .map(|(_, p)| {
            let text = std::fs::read_to_string(p).expect("commit");
            let v: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
            v["commitInfo"]["operation"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert_eq!(last, ["VACUUM START", "VACUUM END"]);
    assert_eq!(
        tablekeeper_delta::fixtures::peers::python_rows(&uri, None).expect("python"),
        python_before
    );
    assert_eq!(
        tablekeeper_delta::fixtures::read_rows_sorted(&uri, None)
            .await
            .expect("deltalake"),
        rust_before
    );
}
