use tablekeeper_delta::{
    optimize, DeltaError, ErrorClass, Optimize, ProbeOptions, Prober, ZorderOptions,
};
use tokio_util::sync::CancellationToken;

use crate::common::{count_in_partition, create_table, rows};

const TARGET: u64 = 64 * 1024 * 1024;

fn options(columns: &[&str], since_version: Option<i64>) -> ZorderOptions {
    ZorderOptions {
        columns: columns.iter().map(|c| (*c).to_owned()).collect(),
        target_file_size: TARGET,
        since_version,
        compression: Default::default(),
        dry_run: false,
        max_conflict_retries: 2,
    }
}

#[tokio::test]
async fn zorder_rewrites_all_partitions_then_only_those_with_new_data() {
    let t = create_table(true, &[]).await;
    for date in ["2024-09-01", "2024-09-02", "2024-09-03"] {
        for i in 0..3 {
            t.append(&rows(i * 10..i * 10 + 10, date)).await;
        }
    }
    t.delete("id = 3").await;
    let history = t.rows_by_version().await;
    let rows_before = t.rows().await;
    let cancel = CancellationToken::new();

    let first = optimize(
        &t.uri,
        Optimize::ZOrder(&options(&["event_type", "value"], None)),
        &cancel,
    )
    .await
    .expect("zorder");
    assert_eq!(first.partitions_touched.len(), 3);
    assert_eq!(first.commits.len(), 1);
    assert_eq!(t.active_paths().await.len(), 3);
    assert_eq!(t.rows().await, rows_before);
    for (version, expected) in history {
        assert_eq!(
            t.rows_at(version).await,
            expected,
            "time travel to {version}"
        );
    }
    let probe = Prober::new()
        .probe(&t.uri, &ProbeOptions::for_target(TARGET))
        .await
        .expect("probe");
    assert_eq!(probe.history.last_zorder_version, first.version_after);

    // nothing new since the last z-order
    let idle = optimize(
        &t.uri,
        Optimize::ZOrder(&options(&["event_type"], probe.history.last_zorder_version)),
        &cancel,
    )
    .await
    .expect("idle zorder");
    assert!(idle.skipped.is_some(), "{idle:?}");
    assert!(idle.commits.is_empty());

    t.append(&rows(500..510, "2024-09-02")).await;
    t.append(&rows(510..520, "2024-09-02")).await;
    let before = t.active_paths().await;
    let rows_before = t.rows().await;
    let scoped = optimize(
        &t.uri,
        Optimize::ZOrder(&options(&["event_type"], probe.history.last_zorder_version)),
        &cancel,
    )
    .await
    .expect("scoped zorder");
    assert_eq!(
        scoped.partitions_touched,
        vec!["event_date=2024-09-02".to_owned()]
    );
    assert_eq!(scoped.files_removed, 3);
    let after = t.active_paths().await;
    assert_eq!(count_in_partition(&after, "2024-09-02"), 1);
    for date in ["2024-09-01", "2024-09-03"] {
        let prefix = format!("event_date={date}/");
        let part = |s: &std::collections::BTreeSet<String>| -> Vec<String> {
            s.iter()
                .filter(|p| p.starts_with(&prefix))
                .cloned()
                .collect()
        };
        assert_eq!(part(&before), part(&after), "{date} was rewritten");
    }
    assert_eq!(t.rows().await, rows_before);
}

#[tokio::test]
async fn partition_and_unknown_columns_are_refused() {
    let t = create_table(true, &[]).await;
    t.append(&rows(0..10, "2024-09-01")).await;
    let version = t.version().await;
    let cancel = CancellationToken::new();
    let err = optimize(
        &t.uri,
        Optimize::ZOrder(&options(&["event_date"], None)),
        &cancel,
    )
    .await
    .expect_err("partition column");
    assert!(matches!(err, DeltaError::InvalidOptions { .. }), "{err}");
    assert_eq!(err.class(), ErrorClass::Permanent);
    assert!(err.to_string().contains("partition column"), "{err}");
    let err = optimize(&t.uri, Optimize::ZOrder(&options(&["nope"], None)), &cancel)
        .await
        .expect_err("unknown column");
    assert!(err.to_string().contains("nope"), "{err}");
    assert_eq!(t.version().await, version);
}

/// Writes an unpartitioned table of eight appends of 5,000 rows: `x` (random, some nulls), `y`
/// and a payload. argv: uri.
const WRITE_UNSORTED: &str = r#"
import os, random, sys
import pyarrow as pa
from deltalake import write_deltalake
uri = sys.argv[1]
rng = random.Random(11)
for part in range(8):
    xs = [rng.randrange(-10**9, 10**9) if rng.random() > 0.02 else None for _ in range(5000)]
    data = pa.table({
        "x": pa.array(xs, pa.int64()),
        "y": pa.array([f"y{rng.randrange(1000):04d}" for _ in xs], pa.string()),
        "payload": pa.array([rng.getrandbits(128).to_bytes(16, "big").hex() for _ in xs]),
    })
    write_deltalake(uri, data, mode="append")
sys.stdout.flush()
os._exit(0)
"#;

/// Per active file, its `x` values in file order, as python deltalake lists the files.
const X_BY_FILE: &str = r#"
import json, os, sys
import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable
uri = sys.argv[1]
paths = pa.table(DeltaTable(uri).get_add_actions(flatten=True)).column("path").to_pylist()
print(json.dumps([pq.read_table(os.path.join(uri, p), columns=["x"]).column("x").to_pylist()
                  for p in paths]))
sys.stdout.flush()
os._exit(0)
"#;

#[tokio::test]
async fn zorder_on_one_column_sorts_rows_across_files_and_keeps_every_row() {
    use tablekeeper_delta::fixtures::both_readers;
    use tablekeeper_delta::fixtures::peers::run_python;

    let dir = tempfile::tempdir().expect("temp dir");
    let uri = dir.path().join("t").to_string_lossy().into_owned();
    run_python(WRITE_UNSORTED, &[&uri]).expect("python writes");
    let before = both_readers(&uri).await.expect("both readers read it");

    let mut small_files = options(&["x"], None);
    small_files.target_file_size = 256 * 1024;
    let report = optimize(
        &uri,
        Optimize::ZOrder(&small_files),
        &CancellationToken::new(),
    )
    .await
    .expect("zorder");
    assert_eq!(report.files_removed, 8, "{report:?}");
    assert!(report.files_added >= 2, "{report:?}");
    assert_eq!(report.commits.len(), 1, "{report:?}");
    assert_eq!(
        both_readers(&uri).await.expect("both readers read it"),
        before
    );

    // each file sorted (nulls first), and the files' ranges follow each other
    let files: Vec<Vec<Option<i64>>> =
        serde_json::from_str(run_python(X_BY_FILE, &[&uri]).expect("python lists").trim())
            .expect("json");
    let mut ranges = Vec::new();
    for values in &files {
        assert!(
            values.windows(2).all(|w| w[0] <= w[1]),
            "a z-ordered file is not sorted on its only column"
        );
        ranges.push((values[0], values[values.len() - 1]));
    }
    ranges.sort();
    for pair in ranges.windows(2) {
        assert!(pair[0].1 <= pair[1].0, "file ranges overlap: {ranges:?}");
    }
}
