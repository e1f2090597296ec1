//! Liquid clustering: a table python deltalake wrote, then clustered by `id` the way Spark's
//! `ALTER TABLE … CLUSTER BY (id)` does it (protocol with `clustering` and `domainMetadata`,
//! a `delta.clustering` domain). Compaction clusters its unclustered files by `id` and marks
//! them, keeps the domain, leaves clustered files alone; a Z-order is refused naming the
//! clustering columns; both readers see the same rows throughout. Later appends are written
//! as Spark writes them, since python deltalake refuses to write a clustered table.

use std::path::Path;

use serde_json::{json, Value};
use tablekeeper_delta::fixtures::peers::{python_rows, run_python};
use tablekeeper_delta::fixtures::read_rows_sorted;
use tablekeeper_delta::{optimize, DeltaError, Optimize};
use tokio_util::sync::CancellationToken;

use crate::common::{active_adds, compact_small_files, log_lines, zorder_on};

/// `count` appends of ten rows each, ids shuffled, starting at append `start`.
const APPEND: &str = r#"
import os, random, sys
import pyarrow as pa
from deltalake import write_deltalake
path, start, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(start, start + count):
    ids = list(range(i * 10, i * 10 + 10))
    random.Random(i).shuffle(ids)
    table = pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([f"v{x}" for x in ids])})
    write_deltalake(path, table, mode="append")
sys.stdout.flush()
os._exit(0)
"#;

/// The same rows as Spark writes them into a clustered table (python deltalake refuses to
/// write one): Parquet files, and one commit adding them without a `clusteringProvider`.
const SPARK_APPEND: &str = r#"
import json, os, random, sys, time, uuid
import pyarrow as pa, pyarrow.parquet as pq
path, start, count, version = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
now = int(time.time() * 1000)
lines = [json.dumps({"commitInfo": {"timestamp": now, "operation": "WRITE",
    "operationParameters": {"mode": "Append"}, "engineInfo": "Apache-Spark/3.5.1 Delta-Lake/3.2.0"}})]
for i in range(start, start + count):
    ids = list(range(i * 10, i * 10 + 10))
    random.Random(i).shuffle(ids)
    table = pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([f"v{x}" for x in ids])})
    name = f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
    pq.write_table(table, os.path.join(path, name))
    stats = {"numRecords": 10, "minValues": {"id": min(ids), "v": min(f"v{x}" for x in ids)},
        "maxValues": {"id": max(ids), "v": max(f"v{x}" for x in ids)}, "nullCount": {"id": 0, "v": 0}}
    lines.append(json.dumps({"add": {"path": name, "partitionValues": {},
        "size": os.path.getsize(os.path.join(path, name)), "modificationTime": now,
        "dataChange": True, "stats": json.dumps(stats)}}))
with open(os.path.join(path, "_delta_log", "%020d.json" % version), "x") as log:
    log.write("\n".join(lines) + "\n")
sys.stdout.flush()
os._exit(0)
"#;

const CLUSTERING: &str = r#"{"clusteringColumns":[["id"]],"domainName":"delta.clustering"}"#;

/// Turns clustering on as Spark does: the protocol that lists the feature and the domain.
fn cluster_by_id(dir: &Path) {
    let latest = log_lines(dir).last().map(|(v, _)| *v).unwrap();
    let actions = [
        json!({"commitInfo": {"timestamp": chrono::Utc::now().timestamp_millis(),
            "operation": "CLUSTER BY", "operationParameters": {"newClusteringColumns": "id"},
            "engineInfo": "Apache-Spark/3.5.1 Delta-Lake/3.2.0"}}),
        json!({"protocol": {"minReaderVersion": 1, "minWriterVersion": 7,
            "writerFeatures": ["appendOnly", "invariants", "domainMetadata", "clustering"]}}),
        json!({"domainMetadata": {"domain": "delta.clustering", "configuration": CLUSTERING,
            "removed": false}}),
    ];
    let text: String = actions.iter().map(|a| format!("{a}\n")).collect();
    std::fs::write(
        dir.join("_delta_log")
            .join(format!("{:020}.json", latest + 1)),
        text,
    )
    .unwrap();
}

fn clustering_domains(dir: &Path) -> Vec<Value> {
    log_lines(dir)
        .into_iter()
        .filter_map(|(_, a)| a.get("domainMetadata").cloned())
        .filter(|d| d["domain"] == "delta.clustering")
        .collect()
}

/// The ids of one Parquet file in file order, as pyarrow reads it.
const IDS: &str = r#"
import json, os, sys
import pyarrow.parquet as pq
print(json.dumps(pq.read_table(sys.argv[1]).column("id").to_pylist()))
sys.stdout.flush()
os._exit(0)
"#;

#[tokio::test]
async fn compaction_clusters_a_clustered_table_by_its_clustering_columns() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().to_str().unwrap().to_owned();
    run_python(APPEND, &[&uri, "0", "6"]).expect("python writes");
    cluster_by_id(dir.path());
    let python_before = python_rows(&uri, None).expect("python reads");
    let rust_before = read_rows_sorted(&uri, None).await.expect("deltalake reads");
    let cancel = CancellationToken::new();

    let report = optimize(&uri, Optimize::Compact(&compact_small_files()), &cancel)
        .await
        .expect("compaction of a clustered table");
    assert_eq!(report.files_removed, 6, "{report:?}");
    let adds = active_adds(dir.path());
    assert_eq!(adds.len(), 1, "{adds:?}");
    assert_eq!(adds[0]["clusteringProvider"], "tablekeeper", "{}", adds[0]);
    let file = dir.path().join(adds[0]["path"].as_str().unwrap());
    let ids: Vec<i64> =
        serde_json::from_str(run_python(IDS, &[file.to_str().unwrap()]).unwrap().trim()).unwrap();
    assert_eq!(ids, (0..60).collect::<Vec<_>>(), "clustered by id");
    assert_eq!(
        clustering_domains(dir.path()),
        vec![json!({"domain": "delta.clustering", "configuration": CLUSTERING, "removed": false})],
        "the clustering domain is kept as it was"
    );
    assert_eq!(python_rows(&uri, None).unwrap(), python_before);
    assert_eq!(read_rows_sorted(&uri, None).await.unwrap(), rust_before);

    // the clustering columns are the layout: a Z-order is refused, naming them
    let err = optimize(&uri, Optimize::ZOrder(&zorder_on(&["v"])), &cancel)
        .await
        .expect_err("z-order of a clustered table");
    assert!(
        matches!(err, DeltaError::InvalidOptions { .. }) && err.to_string().contains("[\"id\"]"),
        "{err}"
    );

    // new appends: only they are clustered, the clustered file stays
    let next = log_lines(dir.path()).last().map(|(v, _)| v + 1).unwrap();
    run_python(SPARK_APPEND, &[&uri, "6", "2", &next.to_string()]).expect("appends");
    let clustered = adds[0]["path"].clone();
    let python_before = python_rows(&uri, None).unwrap();
    let report = optimize(&uri, Optimize::Compact(&compact_small_files()), &cancel)
        .await
        .expect("second compaction");
    assert_eq!(report.files_removed, 2, "{report:?}");
    let adds = active_adds(dir.path());
    assert!(adds.iter().any(|a| a["path"] == clustered), "{adds:?}");
    assert!(
        adds.iter()
            .all(|a| a["clusteringProvider"] == "tablekeeper"),
        "{adds:?}"
    );
    let again = optimize(&uri, Optimize::Compact(&compact_small_files()), &cancel)
        .await
        .expect("nothing left to cluster");
    assert!(again.commits.is_empty(), "{again:?}");
    assert_eq!(python_rows(&uri, None).unwrap(), python_before);
    assert_eq!(clustering_domains(dir.path()).len(), 1);
}
