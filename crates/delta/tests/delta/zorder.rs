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
    assert_eq!(probe.last_zorder_version, first.version_after);

    // nothing new since the last z-order
    let idle = optimize(
        &t.uri,
        Optimize::ZOrder(&options(&["event_type"], probe.last_zorder_version)),
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
        Optimize::ZOrder(&options(&["event_type"], probe.last_zorder_version)),
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
