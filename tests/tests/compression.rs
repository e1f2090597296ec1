//! `layout.compression` reaches every file tablekeeper re-encodes, through the real binary
//! (`tablekeeper maintain`): a compaction of files python deltalake wrote (snappy, one small row
//! group each, so every bin is decoded) writes the table's codec, a Z-order writes it, and a
//! purge of the deletion vectors Databricks wrote writes it. pyarrow reads each new file's
//! column chunks; rows read the same through deltalake and python deltalake before and after.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use tablekeeper_delta::fixtures::aged::copy_reference;
use tablekeeper_delta::fixtures::peers::run_python;
use tablekeeper_tests::chunks::{chunks_of_new_files, column_chunks};

/// Three partitions of four appends of 2,000 rows, python deltalake's default writer settings.
const WRITE: &str = r#"
import os, sys
import pyarrow as pa
from deltalake import write_deltalake
uri = sys.argv[1]
for commit in range(4):
    for day in ("2026-01-01", "2026-01-02", "2026-01-03"):
        start = commit * 100_000 + int(day[-1]) * 10_000
        ids = list(range(start, start + 2_000))
        data = pa.table({
            "id": pa.array(ids, pa.int64()),
            "day": pa.array([day] * len(ids), pa.string()),
            "user_id": pa.array([(i * 7919) % 5000 for i in ids], pa.int64()),
            "name": pa.array(["user-%05d" % (i % 3000) for i in ids], pa.string()),
        })
        write_deltalake(uri, data, mode="append", partition_by=["day"])
sys.stdout.flush()
os._exit(0)
"#;

/// Every active file's path and the codecs of its column chunks, as pyarrow reads them.
fn codecs(uri: &str) -> BTreeMap<String, Vec<String>> {
    column_chunks(uri)
        .into_iter()
        .map(|(path, chunks)| {
            let codecs: BTreeSet<String> = chunks.into_iter().map(|c| c.compression).collect();
            (path, codecs.into_iter().collect())
        })
        .collect()
}

/// Runs `operation` on `table` with `layout` and returns the codecs of the files it added.
async fn maintain_with_layout(
    dir: &Path,
    table: &Path,
    layout: &str,
    operation: &str,
) -> BTreeSet<Vec<String>> {
    let extra = format!("    layout: {layout}\n");
    chunks_of_new_files(dir, table, &extra, operation)
        .await
        .into_iter()
        .map(|chunks| {
            let codecs: BTreeSet<String> = chunks.into_iter().map(|c| c.compression).collect();
            codecs.into_iter().collect()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_and_zorder_write_the_inventorys_codec() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("t");
    run_python(WRITE, &[table.to_str().unwrap()]).expect("python writes the table");
    let written = codecs(table.to_str().unwrap());
    assert_eq!(written.len(), 12, "{written:?}");
    assert!(
        written.values().all(|c| c == &["SNAPPY"]),
        "python deltalake's default: {written:?}"
    );

    let compacted = maintain_with_layout(
        dir.path(),
        &table,
        "{ compression: { codec: gzip, level: 9 } }",
        "compact",
    )
    .await;
    assert_eq!(compacted, BTreeSet::from([vec!["GZIP".to_owned()]]));

    let zordered = maintain_with_layout(
        dir.path(),
        &table,
        "{ zorder: [user_id], compression: lz4 }",
        "zorder",
    )
    .await;
    // pyarrow names Parquet's LZ4_RAW `LZ4` (and the deprecated Hadoop framing `LZ4_HADOOP`)
    assert_eq!(zordered, BTreeSet::from([vec!["LZ4".to_owned()]]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_of_databricks_deletion_vectors_writes_the_inventorys_codec() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("t");
    copy_reference("table-with-dv-small", &table);
    let purged = maintain_with_layout(dir.path(), &table, "{ compression: brotli }", "purge").await;
    assert_eq!(purged, BTreeSet::from([vec!["BROTLI".to_owned()]]));
}
