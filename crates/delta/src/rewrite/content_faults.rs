//! The content guard on real rewrites: each fault the tests can inject between what a rewrite
//! read and what it would commit ([`crate::rewrite::content::fault`]) is refused before the
//! commit, naming what differs, and leaves the table at the version it had; without a fault the
//! same rewrite commits. Compaction's decoded bins, its copied bins and Z-order each meet every
//! fault that applies to them (a copy decodes nothing, so no value can change on its way).

use tokio_util::sync::CancellationToken;

use crate::error::DeltaError;
use crate::fixtures::{write_small_files, SmallFiles};
use crate::rewrite::compact::CompactOptions;
use crate::rewrite::content::fault::{inject, Fault};
use crate::rewrite::optimize::{optimize, Optimize};
use crate::rewrite::zorder::ZorderOptions;

fn compact_options() -> CompactOptions {
    crate::fixtures::compact_every_small_file(2, 0)
}

fn zorder_options() -> ZorderOptions {
    ZorderOptions {
        columns: vec!["user_id".into()],
        target_file_size: 64 * 1024 * 1024,
        since_version: None,
        compression: Default::default(),
        dry_run: false,
        max_conflict_retries: 0,
    }
}

/// A table of one partition (`day`) of three small files, written by deltalake.
async fn table(dir: &std::path::Path) -> String {
    let uri = dir.join("t").to_str().expect("utf-8").to_owned();
    let spec = SmallFiles {
        partitions: 1,
        files_per_partition: 3,
        rows_per_file: 200,
        payload_bytes: 8,
    };
    write_small_files(&uri, &spec).await.expect("fixture");
    uri
}

/// Three appends to one partition by python deltalake, each file over the copy path's
/// threshold (a column of random hex), so compaction copies their column chunks.
const COPYABLE: &str = r#"
import os, random, sys
import pyarrow as pa
from deltalake import write_deltalake
uri = sys.argv[1]
rng = random.Random(7)
for commit in range(3):
    ids = list(range(commit * 30000, (commit + 1) * 30000))
    write_deltalake(uri, pa.table({
        "id": pa.array(ids, pa.int64()),
        "day": pa.array(["2024-01-01"] * len(ids), pa.string()),
        "noise": pa.array([rng.getrandbits(256).to_bytes(32, "big").hex() for _ in ids]),
    }), mode="append", partition_by=["day"])
sys.stdout.flush()
os._exit(0)
"#;

async fn version(uri: &str) -> u64 {
    crate::open::open_table(uri)
        .await
        .expect("opens")
        .version()
        .expect("loaded")
}

/// Runs `kind` with `fault` injected and returns the refusal's text; the table keeps its
/// version.
async fn refused(uri: &str, kind: Optimize<'_>, fault: Fault) -> String {
    let before = version(uri).await;
    inject(fault);
    let result = optimize(uri, kind, &CancellationToken::new()).await;
    assert!(
        !crate::rewrite::content::fault::take(fault),
        "{fault:?} was never met by the rewrite"
    );
    let err = match result {
        Err(err @ DeltaError::ContentChanged { .. }) => err,
        other => panic!("{fault:?}: expected a refusal, got {other:?}"),
    };
    assert_eq!(
        version(uri).await,
        before,
        "{fault:?}: something was committed"
    );
    err.to_string()
}

/// Every fault, with what its refusal names.
const FAULTS: [(Fault, &str); 4] = [
    (Fault::ChangedValue, "holds other values"),
    (Fault::ChangedPartitionValue, "partition value of `day`"),
    (Fault::WrongMin, "smallest minValues"),
    (Fault::WrongNullCount, "nullCount"),
];

/// [`refused`] for each fault, its refusal naming what `expect` says.
async fn refuses_each(uri: &str, kind: Optimize<'_>, faults: &[(Fault, &str)]) {
    for (fault, expect) in faults {
        let text = refused(uri, kind, *fault).await;
        assert!(text.contains(expect), "{fault:?}: {text}");
    }
}

#[tokio::test]
async fn every_fault_in_a_decoded_compaction_and_a_z_order_is_refused_before_the_commit() {
    let compact = compact_options();
    let zorder = zorder_options();
    // the compaction's refusals name the column (or partition value) and both sides
    let named = [
        (Fault::ChangedValue, "column `id` holds other values"),
        (
            Fault::ChangedPartitionValue,
            "partition value of `day` is \"2026-01-01\" in the log, \"2026-01-01x\"",
        ),
        (
            Fault::WrongMin,
            "column `id`: the added files' smallest minValues",
        ),
        (
            Fault::WrongNullCount,
            "column `id`: the added files' nullCount sums to 1",
        ),
    ];
    for (kind, faults) in [
        (Optimize::Compact(&compact), &named),
        (Optimize::ZOrder(&zorder), &FAULTS),
    ] {
        let dir = tempfile::tempdir().expect("temp dir");
        let uri = table(dir.path()).await;
        refuses_each(&uri, kind, faults).await;
        // and without a fault the same rewrite commits, once
        let report = optimize(&uri, kind, &CancellationToken::new())
            .await
            .expect("a clean rewrite commits");
        assert_eq!(report.commits.len(), 1, "{kind:?}: {report:?}");
    }
}

#[tokio::test]
async fn wrong_statistics_or_partition_values_of_a_copied_bin_are_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let uri = dir.path().join("t").to_str().expect("utf-8").to_owned();
    crate::fixtures::peers::run_python(COPYABLE, &[&uri]).expect("python writes the table");
    let options = compact_options();
    let kind = Optimize::Compact(&options);
    // every fault but a changed value, which has no encoder to pass on the copy path
    refuses_each(&uri, kind, &FAULTS[1..]).await;
    // no value passes an encoder on the copy path: a value fault is never met, and the
    // bin commits
    inject(Fault::ChangedValue);
    let report = optimize(&uri, kind, &CancellationToken::new())
        .await
        .expect("a clean copy commits");
    assert!(
        crate::rewrite::content::fault::take(Fault::ChangedValue),
        "the bin was decoded, not copied"
    );
    assert_eq!(report.files_added, 1, "{report:?}");
}
