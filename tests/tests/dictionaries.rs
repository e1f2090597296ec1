//! The files tablekeeper re-encodes write a column of (nearly) unique values without a
//! dictionary and keep the dictionary of every column whose values repeat, through the real
//! binary (`tablekeeper maintain`): compaction of a partitioned table (run as tasks), of an
//! unpartitioned one (one bin after another) and of a column-mapped one (the choice made under
//! physical names), and Z-order, all of files python deltalake wrote with a dictionary on every
//! column. pyarrow reads each new column chunk's pages; rows read the same through deltalake and
//! python deltalake before and after.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use tablekeeper_delta::fixtures::peers::run_python;
use tablekeeper_tests::chunks::{chunks_of_new_files, column_chunks, Chunk};

/// Four appends of 20,000 rows per partition (two partitions, or one unpartitioned table of
/// 40,000 rows an append; `mapped`: partitioned, with `delta.columnMapping.mode: name`), python
/// deltalake's default writer settings: `id` and `payload` are unique, `user_id` (5,000
/// values), `name` (3,000) and `amount` (10,000) repeat.
const WRITE: &str = r#"
import os, sys
import pyarrow as pa
from deltalake import write_deltalake
uri, layout = sys.argv[1], sys.argv[2]
partitioned, mapped = layout in ("partitioned", "mapped"), layout == "mapped"
for commit in range(4):
    start = commit * 40_000
    ids = list(range(start, start + 40_000))
    data = pa.table({
        "id": pa.array(ids, pa.int64()),
        "day": pa.array(["2026-01-0%d" % (1 + i % 2) for i in ids], pa.string()),
        "user_id": pa.array([(i * 7919) % 5000 for i in ids], pa.int64()),
        "name": pa.array(["user-%05d" % (i % 3000) for i in ids], pa.string()),
        "amount": pa.array([(i % 10_000) / 100.0 for i in ids], pa.float64()),
        "payload": pa.array(["%d:%s" % (i, "x" * 16) for i in ids], pa.string()),
    })
    config = {"delta.columnMapping.mode": "name"} if mapped and commit == 0 else None
    write_deltalake(uri, data, mode="append", partition_by=["day"] if partitioned else None,
                    configuration=config)
sys.stdout.flush()
os._exit(0)
"#;

/// Each column's name in the data files (its physical name on a column-mapped table), by its
/// name in the table's schema.
const PHYSICAL: &str = r#"
import json, os, sys
from deltalake import DeltaTable
fields = DeltaTable(sys.argv[1]).schema().fields
print(json.dumps({f.name: (f.metadata or {}).get("delta.columnMapping.physicalName", f.name)
                  for f in fields}))
sys.stdout.flush()
os._exit(0)
"#;

fn physical_names(uri: &str) -> BTreeMap<String, String> {
    let names: BTreeMap<String, serde_json::Value> = serde_json::from_str(
        run_python(PHYSICAL, &[uri])
            .expect("python deltalake reads the schema")
            .trim(),
    )
    .expect("names JSON");
    names
        .into_iter()
        .map(|(name, physical)| {
            let physical = physical
                .as_str()
                .map_or(name.clone(), |p| p.trim_matches('"').to_owned());
            (name, physical)
        })
        .collect()
}

/// Runs `operation` on the table with the inventory lines `extra` (rows checked through both
/// readers) and returns, per column of the files it added, whether its chunks carry a
/// dictionary page (one answer per column across all of them).
async fn maintain(
    dir: &Path,
    table: &Path,
    extra: &str,
    operation: &str,
) -> BTreeMap<String, BTreeSet<bool>> {
    by_column(chunks_of_new_files(dir, table, extra, operation).await)
}

/// Per column of `files`, whether its chunks carry a dictionary page.
fn by_column(files: impl IntoIterator<Item = Vec<Chunk>>) -> BTreeMap<String, BTreeSet<bool>> {
    let mut columns: BTreeMap<String, BTreeSet<bool>> = BTreeMap::new();
    for chunk in files.into_iter().flatten() {
        columns
            .entry(chunk.column)
            .or_default()
            .insert(chunk.dictionary);
    }
    columns
}

fn expected() -> BTreeMap<String, BTreeSet<bool>> {
    [
        ("amount", true),
        ("id", false),
        ("name", true),
        ("payload", false),
        ("user_id", true),
    ]
    .into_iter()
    .map(|(column, dictionary)| (column.to_owned(), BTreeSet::from([dictionary])))
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn columns_of_unique_values_are_written_plain_and_the_others_keep_their_dictionary() {
    for layout in ["partitioned", "unpartitioned", "mapped"] {
        let dir = tempfile::tempdir().unwrap();
        let table = dir.path().join("t");
        run_python(WRITE, &[table.to_str().unwrap(), layout]).expect("python writes the table");
        let written = by_column(column_chunks(table.to_str().unwrap()).into_values());
        assert!(
            written
                .values()
                .all(|kinds| kinds == &BTreeSet::from([true])),
            "python deltalake writes a dictionary on every column: {written:?}"
        );
        let mut want = expected();
        if layout == "unpartitioned" {
            want.insert("day".to_owned(), BTreeSet::from([true]));
        }
        // the files name the columns physically: `col-<uuid>` on the column-mapped table
        let physical = physical_names(table.to_str().unwrap());
        if layout == "mapped" {
            assert!(physical["id"] != "id", "{physical:?}");
        }
        let want: BTreeMap<String, BTreeSet<bool>> = want
            .into_iter()
            .map(|(column, kinds)| (physical[&column].clone(), kinds))
            .collect();

        let compacted = maintain(dir.path(), &table, "", "compact").await;
        assert_eq!(compacted, want, "{layout} compaction");

        let zordered = maintain(
            dir.path(),
            &table,
            "    layout: { zorder: [user_id] }\n",
            "zorder",
        )
        .await;
        assert_eq!(zordered, want, "{layout} Z-order");
    }
}
