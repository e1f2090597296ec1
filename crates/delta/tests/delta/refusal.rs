use std::time::Duration;

use tablekeeper_delta::{
    checkpoint, CheckpointOptions, DeltaError, ErrorClass, ProbeOptions, Prober,
};
use tokio_util::sync::CancellationToken;

use crate::common::{create_table, rewriting_operations, rows, Footprint};

/// deltalake 1.1.2 creates deletion-vector tables itself: the `delta.enableDeletionVectors`
/// property at create time upgrades the protocol to reader 3 / writer 7 with the
/// `deletionVectors` feature, so no hand-written log is needed.
#[tokio::test]
async fn a_deletion_vector_table_is_refused_and_left_untouched() {
    let t = create_table(true, &[("delta.enableDeletionVectors", "true")]).await;
    for i in 0..4 {
        t.append(&rows(i * 10..i * 10 + 10, "2024-10-01")).await;
    }
    let probe = Prober::new()
        .probe(&t.uri, &ProbeOptions::for_target(64 * 1024 * 1024))
        .await
        .expect("probing is always allowed");
    assert!(probe.deletion_vectors_enabled);
    let declared = |features: &[String]| features.iter().any(|f| f == "deletionVectors");
    assert!(
        declared(&probe.reader_features) || declared(&probe.writer_features),
        "{probe:?}"
    );

    let before = Footprint::of(&t).await;
    let results = rewriting_operations(&t).await;
    for result in results {
        let err = result.expect_err("refused");
        assert!(
            matches!(err, DeltaError::UnsupportedProtocol { .. }),
            "{err}"
        );
        assert_eq!(err.class(), ErrorClass::Permanent);
        let message = err.to_string();
        assert!(message.contains("deletion vectors"), "{message}");
        assert!(message.contains(&t.uri), "{message}");
    }
    assert_eq!(Footprint::of(&t).await, before, "the refused table changed");

    // checkpoints carry deletion vector descriptors through log replay and stay allowed
    checkpoint(
        &t.uri,
        &CheckpointOptions {
            max_commits_since_checkpoint: 1,
            log_retention: Duration::from_secs(30 * 86_400),
            force: false,
            log_cleanup: tablekeeper_delta::LogCleanup::Unrecorded,
        },
        &CancellationToken::new(),
    )
    .await
    .expect("checkpoint of a deletion-vector table");
}
