//! DESIGN.md hazard 1, measured: two compactions started from one snapshot, run directly
//! against deltalake, and what the duplicate-rewrite guard says about each commit.

use std::num::NonZeroU64;

use tablekeeper_delta::{verify_rewrite_commit, DeltaError};

use crate::common::{create_table, rows};

#[tokio::test]
async fn two_compactions_from_one_snapshot_and_the_guard() {
    let t = create_table(false, &[]).await;
    for i in 0..6 {
        t.append(&rows(i * 10..i * 10 + 10, "2024-03-01")).await;
    }
    let expected = t.rows().await;
    let version = t.version().await;
    // two handles loaded at the same version, as two replicas would hold them
    let first = t.open().await;
    let second = t.open().await;
    assert_eq!(first.version(), second.version());
    let target = NonZeroU64::new(64 * 1024 * 1024).unwrap();

    first
        .optimize()
        .with_target_size(target)
        .await
        .expect("first compaction");
    verify_rewrite_commit(&t.uri, version as i64 + 1)
        .await
        .expect("the first commit removed only active files");

    match second.optimize().with_target_size(target).await {
        Ok(_) => {
            // deltalake 1.1.x: the conflict checker ignores dataChange=false removes, so the
            // second OPTIMIZE commits too and every row now exists twice
            let after = t.rows().await;
            assert_eq!(after.len(), 2 * expected.len(), "rows were duplicated");
            let err = verify_rewrite_commit(&t.uri, version as i64 + 2)
                .await
                .expect_err("the guard flags the second commit");
            match &err {
                DeltaError::DuplicateRewrite {
                    version: v, files, ..
                } => {
                    assert_eq!(*v, version as i64 + 2);
                    assert_eq!(files.len(), 6, "all six input files were already removed");
                }
                other => panic!("unexpected {other:?}"),
            }
            assert_eq!(err.class(), tablekeeper_delta::ErrorClass::Permanent);
            assert!(
                err.to_string()
                    .contains(&format!("version {}", version + 1)),
                "{err}"
            );
        }
        Err(err) => {
            // a fixed deltalake refuses the second commit: the table keeps its rows once
            eprintln!("deltalake now detects concurrent compactions: {err}");
            assert_eq!(t.rows().await, expected);
            assert_eq!(t.version().await, version + 1);
        }
    }
}
