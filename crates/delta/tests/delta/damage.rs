//! A table whose log references data files that storage no longer holds is reported by the
//! probe and refused by every operation, untouched, until the files are back.

use std::time::Duration;

use tablekeeper_delta::{checkpoint, DeltaError, ErrorClass, OpReport, ProbeOptions, Prober};
use tokio_util::sync::CancellationToken;

use crate::common::{
    create_table, forced_checkpoint, rewriting_operations, rows, Footprint, TestTable,
};

const TARGET: u64 = 64 * 1024 * 1024;

/// Every maintenance operation: the rewriting ones and a forced checkpoint.
async fn every_operation(t: &TestTable) -> Vec<Result<OpReport, DeltaError>> {
    let mut results = rewriting_operations(t).await;
    results.push(checkpoint(&t.uri, &forced_checkpoint(), &CancellationToken::new()).await);
    results
}

#[tokio::test]
async fn a_missing_data_file_is_reported_and_the_table_is_never_maintained() {
    let t = create_table(true, &[]).await;
    for i in 0..4 {
        t.append(&rows(i * 10..i * 10 + 10, "2024-10-01")).await;
        t.append(&rows(100 + i * 10..100 + i * 10 + 10, "2024-10-02"))
            .await;
    }
    t.delete("id < 5").await;
    let prober = Prober::new();
    // the default re-lists files at most every hour while a table is intact
    let lazy = ProbeOptions::for_target(TARGET);
    prober.probe(&t.uri, &lazy).await.expect("intact table");
    let options = ProbeOptions {
        presence_every: Duration::ZERO,
        presence_idle_every: Duration::ZERO,
        ..lazy.clone()
    };

    // someone deletes a data file by hand
    let victim = t.active_paths().await.into_iter().next().expect("a file");
    let victim_path = t.path().join(&victim);
    let saved = std::fs::read(&victim_path).expect("read victim");
    std::fs::remove_file(&victim_path).expect("remove victim");
    prober
        .probe(&t.uri, &lazy)
        .await
        .expect("inside the presence interval the probe does not list again");

    let err = prober
        .probe(&t.uri, &options)
        .await
        .expect_err("damage is reported");
    match &err {
        DeltaError::MissingDataFiles { files, active, .. } => {
            assert_eq!(files, &vec![victim.clone()]);
            assert_eq!(*active, t.active_paths().await.len());
        }
        other => panic!("expected MissingDataFiles, got {other}"),
    }
    assert_eq!(err.class(), ErrorClass::Permanent);
    assert!(err.to_string().contains(&victim), "{err}");
    assert!(err.to_string().contains(&t.uri), "{err}");

    let before = Footprint::of(&t).await;
    for result in every_operation(&t).await {
        let err = result.expect_err("a damaged table is refused");
        assert!(
            matches!(err, DeltaError::MissingDataFiles { .. }),
            "expected MissingDataFiles, got {err}"
        );
    }
    assert_eq!(
        Footprint::of(&t).await,
        before,
        "a damaged table got a commit, a data file or a log file"
    );

    // the file comes back: the table is probed and maintained again, rows intact
    std::fs::write(&victim_path, saved).expect("restore victim");
    let before = t.rows().await;
    prober
        .probe(&t.uri, &options)
        .await
        .expect("repaired table");
    for result in every_operation(&t).await {
        result.expect("maintenance resumes once the table reads");
    }
    assert_eq!(t.rows().await, before);
}

/// Partition values needing escapes must not be mistaken for missing files.
#[tokio::test]
async fn partition_values_with_odd_characters_are_found_in_storage() {
    let t = create_table(true, &[]).await;
    for date in ["2024 10 01", "a%b", "ünï/cødé?&=", "x#y"] {
        t.append(&rows(0..3, date)).await;
        t.append(&rows(3..6, date)).await;
    }
    let prober = Prober::new();
    let options = ProbeOptions::for_target(TARGET);
    prober
        .probe(&t.uri, &options)
        .await
        .expect("every file is found by the listing");
    // files added after the listing are asked for one by one
    for date in ["2024 10 01", "a%b", "ünï/cødé?&=", "x#y"] {
        t.append(&rows(6..9, date)).await;
    }
    prober
        .probe(&t.uri, &options)
        .await
        .expect("every new file is found by its own request");
    let before = t.rows().await;
    for result in every_operation(&t).await {
        result.expect("maintenance of odd partition values");
    }
    assert_eq!(t.rows().await, before);
}

/// Between listings, a probe asks for the files added since the last one: a new file gone
/// from storage is reported by the first probe that sees its commit.
#[tokio::test]
async fn a_new_file_missing_from_storage_is_reported_by_the_next_probe() {
    let t = create_table(true, &[]).await;
    t.append(&rows(0..10, "2024-10-01")).await;
    let prober = Prober::new();
    let options = ProbeOptions::for_target(TARGET);
    prober.probe(&t.uri, &options).await.expect("intact table");

    let old = t.active_paths().await;
    t.append(&rows(10..20, "2024-10-02")).await;
    let new = t
        .active_paths()
        .await
        .difference(&old)
        .next()
        .cloned()
        .expect("the append added a file");
    let new_path = t.path().join(&new);
    let saved = std::fs::read(&new_path).expect("read the new file");
    std::fs::remove_file(&new_path).expect("remove the new file");

    match prober.probe(&t.uri, &options).await {
        Err(DeltaError::MissingDataFiles { files, .. }) => assert_eq!(files, vec![new.clone()]),
        other => panic!("expected MissingDataFiles naming {new}, got {other:?}"),
    }
    // the file comes back: the next probe lists the table and finds it whole
    std::fs::write(&new_path, saved).expect("restore the new file");
    let probe = prober.probe(&t.uri, &options).await.expect("whole again");
    assert_eq!(probe.files, 2);
}

/// The daemon's first probe of a table lists it beside the probe: the probe answers at once,
/// saying the check is pending, and a file missing from the start is reported by the first
/// probe after the listing ends, then by every probe (each lists again) until it is back.
#[tokio::test]
async fn a_first_check_beside_the_probe_reports_a_missing_file_at_the_next_probe() {
    let t = create_table(true, &[]).await;
    for i in 0..3 {
        t.append(&rows(i * 10..i * 10 + 10, "2024-10-01")).await;
    }
    let victim = t.active_paths().await.into_iter().next().expect("a file");
    let victim_path = t.path().join(&victim);
    let saved = std::fs::read(&victim_path).expect("read victim");
    std::fs::remove_file(&victim_path).expect("remove victim");

    let prober = Prober::new();
    let options = ProbeOptions {
        first_sight_beside: true,
        ..ProbeOptions::for_target(TARGET)
    };
    let first = prober
        .probe(&t.uri, &options)
        .await
        .expect("the first probe does not wait for the listing");
    assert!(first.damage_check_pending, "{first:?}");
    assert_eq!(first.files, 3);

    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let err = loop {
        match prober.probe(&t.uri, &options).await {
            Ok(probe) => {
                assert!(
                    probe.damage_check_pending,
                    "intact only while pending: {probe:?}"
                );
                assert!(
                    std::time::Instant::now() < deadline,
                    "the check never ended"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(err) => break err,
        }
    };
    assert!(
        matches!(&err, DeltaError::MissingDataFiles { files, .. } if files == &vec![victim.clone()]),
        "expected MissingDataFiles naming {victim}, got {err}"
    );
    // still damaged: every probe lists again, inside the probe
    let again = prober.probe(&t.uri, &options).await.expect_err("damaged");
    assert!(
        matches!(again, DeltaError::MissingDataFiles { .. }),
        "{again}"
    );

    std::fs::write(&victim_path, saved).expect("restore victim");
    let healed = prober.probe(&t.uri, &options).await.expect("intact again");
    assert!(!healed.damage_check_pending);
}
