//! Compaction racing real writers: no row may be lost or duplicated, conflicts are retried.

use std::collections::BTreeSet;
use std::num::NonZeroU64;

use tablekeeper_delta::{
    classify_delta_error, optimize, CompactOptions, DeltaError, ErrorClass, Optimize,
};
use tokio_util::sync::CancellationToken;

use crate::common::{create_table, row, rows, Row, TestTable};

const MAX_CONFLICT_RETRIES: u32 = 8;
/// A writer retries its own conflicts this often before the test gives up on it.
const WRITER_RETRIES: usize = 20;

fn compact_options() -> CompactOptions {
    tablekeeper_delta::fixtures::compact_every_small_file(2, MAX_CONFLICT_RETRIES)
}

#[tokio::test]
async fn a_stale_compaction_fails_with_a_conflict() {
    let t = create_table(false, &[]).await;
    for i in 0..4 {
        t.append(&rows(i * 10..i * 10 + 10, "2024-04-01")).await;
    }
    let stale = t.open().await;
    t.delete("id < 5").await;
    let err = stale
        .optimize()
        .with_target_size(NonZeroU64::new(64 * 1024 * 1024).unwrap())
        .await
        .expect_err("a compaction over files a delete rewrote must not commit");
    assert_eq!(classify_delta_error(&err), ErrorClass::Conflict, "{err}");
}

#[tokio::test]
async fn a_delete_from_before_a_compaction_neither_loses_nor_duplicates_rows() {
    let t = create_table(false, &[]).await;
    for i in 0..4 {
        t.append(&rows(i * 10..i * 10 + 10, "2024-04-01")).await;
    }
    let stale_deleter = t.open().await;
    optimize(
        &t.uri,
        Optimize::Compact(&compact_options()),
        &CancellationToken::new(),
    )
    .await
    .expect("compaction");
    let expected: Vec<Row> = rows(0..40, "2024-04-01")
        .into_iter()
        .filter(|r| r.0 >= 5)
        .collect();
    match stale_deleter.delete().with_predicate("id < 5").await {
        // deltalake noticed the compacted file may hold the deleted rows: the writer retries
        Err(err) => {
            assert_eq!(classify_delta_error(&err), ErrorClass::Conflict, "{err}");
            eprintln!("the stale delete conflicted and was retried: {err}");
            t.delete("id < 5").await;
        }
        Ok(_) => eprintln!("the stale delete committed over the compaction"),
    }
    assert_eq!(t.rows().await, expected);
}

async fn append_with_retries(t: &TestTable, batch: &[Row]) -> bool {
    for _ in 0..WRITER_RETRIES {
        if t.open()
            .await
            .write(vec![crate::common::batch(batch)])
            .with_save_mode(deltalake::protocol::SaveMode::Append)
            .await
            .is_ok()
        {
            return true;
        }
    }
    false
}

async fn delete_with_retries(t: &TestTable, predicate: &str) -> bool {
    for _ in 0..WRITER_RETRIES {
        match t.open().await.delete().with_predicate(predicate).await {
            Ok(_) => return true,
            Err(err) if classify_delta_error(&err) == ErrorClass::Conflict => continue,
            Err(err) => panic!("delete failed: {err}"),
        }
    }
    false
}

#[tokio::test]
async fn appends_and_deletes_during_compaction_lose_and_duplicate_nothing() {
    let t = std::sync::Arc::new(create_table(false, &[]).await);
    for i in 0..12 {
        t.append(&rows(i * 10..i * 10 + 10, "2024-05-01")).await;
    }
    let initial = t.rows().await;

    let appender = {
        let t = t.clone();
        tokio::spawn(async move {
            let mut committed: Vec<Row> = Vec::new();
            for i in 0..6 {
                let batch: Vec<Row> = (0..5)
                    .map(|j| row(10_000 + i * 10 + j, "2024-05-01"))
                    .collect();
                if append_with_retries(&t, &batch).await {
                    committed.extend(batch);
                }
            }
            committed
        })
    };
    let deleter = {
        let t = t.clone();
        tokio::spawn(async move {
            let mut committed = Vec::new();
            for k in 0..4 {
                let (lo, hi) = (k * 30, k * 30 + 7);
                if delete_with_retries(&t, &format!("id >= {lo} AND id < {hi}")).await {
                    committed.push((lo, hi));
                }
            }
            committed
        })
    };
    let compactor = {
        let t = t.clone();
        tokio::spawn(async move {
            let mut outcomes = Vec::new();
            for _ in 0..3 {
                outcomes.push(
                    optimize(
                        &t.uri,
                        Optimize::Compact(&compact_options()),
                        &CancellationToken::new(),
                    )
                    .await,
                );
            }
            outcomes
        })
    };
    let appended = appender.await.unwrap();
    let deleted = deleter.await.unwrap();
    let outcomes = compactor.await.unwrap();

    let mut conflicts = 0;
    for outcome in &outcomes {
        match outcome {
            Ok(report) => {
                assert!(report.conflicts <= MAX_CONFLICT_RETRIES);
                conflicts += report.conflicts;
            }
            Err(DeltaError::Conflict { attempts, .. }) => {
                assert_eq!(*attempts, MAX_CONFLICT_RETRIES + 1);
                conflicts += attempts;
            }
            Err(other) => panic!("compaction failed: {other}"),
        }
    }
    eprintln!("compaction met {conflicts} conflict(s)");

    let mut expected: BTreeSet<Row> = initial.into_iter().collect();
    expected.extend(appended);
    expected.retain(|r| !deleted.iter().any(|(lo, hi)| r.0 >= *lo && r.0 < *hi));
    let actual = t.rows().await;
    let unique: BTreeSet<Row> = actual.iter().cloned().collect();
    assert_eq!(unique.len(), actual.len(), "rows were duplicated");
    assert_eq!(unique, expected, "rows were lost or resurrected");
}

/// Operations of the commits after `after`, oldest first, read from the log files.
async fn operations_after(t: &TestTable, after: u64) -> Vec<(u64, String)> {
    let last = t.version().await;
    (after + 1..=last)
        .map(|version| {
            let file = t.path().join(format!("_delta_log/{version:020}.json"));
            let text = std::fs::read_to_string(&file).expect("commit file");
            let operation = text
                .lines()
                .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
                .find_map(|action| {
                    action["commitInfo"]["operation"]
                        .as_str()
                        .map(str::to_owned)
                })
                .unwrap_or_default();
            (version, operation)
        })
        .collect()
}

/// Another writer appends between compaction's read and its commits (one commit per bin, so
/// there are several chances): deltalake rebases ours onto the later version, and every such
/// rebase is a conflict in the report, the figure `tablekeeper_commit_conflicts_total` counts.
/// The appender runs on a thread of its own beside the bins' (as another engine would), so its
/// commits can fall between two of compaction's.
#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn a_commit_rebased_behind_another_writer_counts_as_a_conflict() {
    const ROUNDS: usize = 10;
    const ROWS_PER_FILE: usize = 5_000;
    let mut interleaved_rounds = 0;
    for round in 0..ROUNDS {
        let t = std::sync::Arc::new(create_table(true, &[]).await);
        let dates: Vec<String> = (1..=6).map(|d| format!("2024-06-{d:02}")).collect();
        // files of a few thousand rows, so each bin takes long enough to decode and encode
        // that the appender's commits can land between two bins'
        for (d, date) in dates.iter().enumerate() {
            for f in 0..6 {
                let start = ((d * 6 + f) * ROWS_PER_FILE) as i64;
                t.append(&rows(start..start + ROWS_PER_FILE as i64, date))
                    .await;
            }
        }
        let before = t.version().await;
        let initial = t.rows().await;

        let stop = CancellationToken::new();
        let appender = {
            let (t, stop) = (t.clone(), stop.clone());
            tokio::spawn(async move {
                let mut committed: Vec<Row> = Vec::new();
                let mut i = 0;
                while !stop.is_cancelled() {
                    let batch = vec![row(1_000_000 + i, "2099-01-01")];
                    if append_with_retries(&t, &batch).await {
                        committed.extend(batch);
                    }
                    i += 1;
                }
                committed
            })
        };
        let report = optimize(
            &t.uri,
            Optimize::Compact(&compact_options()),
            &CancellationToken::new(),
        )
        .await
        .expect("compaction");
        stop.cancel();
        let appended = appender.await.unwrap();

        // every optimize commit with a write between it and our previous optimize commit was
        // planned on a version another writer then took
        let commits = operations_after(&t, before).await;
        let ours: Vec<usize> = (0..commits.len())
            .filter(|&i| commits[i].1 == "OPTIMIZE")
            .collect();
        assert_eq!(ours.len(), 6, "one commit per partition bin: {commits:?}");
        let rebased_between = ours.windows(2).filter(|w| w[1] > w[0] + 1).count() as u32;
        assert!(
            report.conflicts >= rebased_between,
            "round {round}: {rebased_between} commit(s) landed behind another writer's, \
             the report counted {}: {commits:?}",
            report.conflicts
        );
        if rebased_between > 0 {
            interleaved_rounds += 1;
        }

        let mut expected: BTreeSet<Row> = initial.into_iter().collect();
        expected.extend(appended);
        let actual = t.rows().await;
        assert_eq!(actual.len(), expected.len(), "rows were duplicated or lost");
        assert_eq!(actual.into_iter().collect::<BTreeSet<_>>(), expected);
        if interleaved_rounds >= 2 {
            return;
        }
    }
    panic!(
        "the appender never committed between two compaction commits in {ROUNDS} rounds \
         ({interleaved_rounds} did): the test proved nothing"
    );
}
