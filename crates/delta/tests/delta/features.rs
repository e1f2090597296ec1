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

const TEN_YEARS: Duration = Duration::from_secs(3650 * 86_400);

async fn every_operation(uri: &str) -> Vec<(&'static str, Result<OpReport, DeltaError>)> {
    let cancel = CancellationToken::new();
    let target = 64 * 1024 * 1024;
    vec![
        (
            "compact",
            optimize(
                uri,
                Optimize::Compact(&CompactOptions {
                    target_file_size: target,
                    min_small_files: 2,
                    small_file_factor: 1.0,
                    dry_run: false,
                    max_conflict_retries: 0,
                }),
                &cancel,
            )
            .await,
        ),
        (
            "purge",
            optimize(
                uri,
                Optimize::Purge(&PurgeOptions {
                    target_file_size: target,
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
    (
        "table_with_column_mapping",
        &["compact", "purge"],
        "columnMapping",
    ),
    (
        "checkpoint-v2-table",
        &["compact", "purge", "vacuum"],
        "identityColumns",
    ),
    (
        "cdc_ict_table",
        &["compact", "purge", "vacuum"],
        "inCommitTimestamp",
    ),
    // its first `metaData` has no `schemaString`: the kernel cannot replay the log from there,
    // so VACUUM (which loads the versions it must check) and checkpoint fail, changing nothing
    (
        "delta-live-table",
        &["vacuum", "checkpoint"],
        "schemaString",
    ),
    ("table_with_edge_timestamps", &[], ""),
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
