//! The writer rules of the features Spark 4 and Databricks turn on, met by tablekeeper's
//! rewrites: the files it writes hold the partition columns too (`materializePartitionColumns`,
//! on the kernel's reference table), a collated column gets no binary bounds (`collations`, on
//! a table written by python deltalake whose log then turns collations on as Databricks writes
//! it), and a rewrite of a table with type widening is refused naming the rule while VACUUM and
//! checkpoints run. Rows are compared through deltalake and python deltalake.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;
use tablekeeper_delta::fixtures::peers::{python_rows, run_python};
use tablekeeper_delta::fixtures::read_rows_sorted;
use tablekeeper_delta::{optimize, Optimize};
use tokio_util::sync::CancellationToken;

use crate::aged::reference_table;
use crate::common::{compact_small_files, last_adds, latest_metadata, log_lines, write_commit};

/// The column names of one Parquet file, as pyarrow reads its footer, with their field ids
/// (nested ones included, `parent.child` by name).
const FOOTER: &str = r#"
import json, os, sys
import pyarrow as pa
import pyarrow.parquet as pq
out = []
def walk(prefix, field):
    name = prefix + field.name
    out.append([name, (field.metadata or {}).get(b"PARQUET:field_id", b"").decode()])
    t = field.type
    if pa.types.is_struct(t):
        for i in range(t.num_fields):
            walk(name + ".", t.field(i))
    elif pa.types.is_list(t) or pa.types.is_large_list(t):
        walk(name + ".", t.value_field)
    elif pa.types.is_map(t):
        walk(name + ".", t.key_field)
        walk(name + ".", t.item_field)
for field in pq.read_schema(sys.argv[1]):
    walk("", field)
print(json.dumps(out))
sys.stdout.flush()
os._exit(0)
"#;

/// (column name, field id or `""`) of every column of the Parquet file at `path`, in file
/// order, nested ones after their parent.
pub(crate) fn footer(path: &Path) -> Vec<(String, String)> {
    let out = run_python(FOOTER, &[path.to_str().expect("utf-8")]).expect("pyarrow reads it");
    serde_json::from_str(out.trim()).expect("json")
}

fn columns(path: &Path) -> Vec<String> {
    footer(path).into_iter().map(|(name, _)| name).collect()
}

/// Compacts the table at `uri`, which must take `files` small files into one; that file's
/// `add`.
pub(crate) async fn compact_into_one(uri: &str, files: u64) -> Value {
    let report = optimize(
        uri,
        Optimize::Compact(&compact_small_files()),
        &CancellationToken::new(),
    )
    .await
    .unwrap_or_else(|e| panic!("compaction of {uri}: {e}"));
    assert_eq!(report.files_removed, files, "{report:?}");
    let adds = last_adds(Path::new(uri));
    assert_eq!(adds.len(), 1, "{adds:?}");
    adds.into_iter().next().expect("one add")
}

async fn both_readers(uri: &str) -> (Vec<String>, Vec<String>) {
    (
        read_rows_sorted(uri, None)
            .await
            .expect("deltalake reads it"),
        python_rows(uri, None).expect("python deltalake reads it"),
    )
}

#[tokio::test]
async fn materialized_partition_columns_stay_in_rewritten_files() {
    let dir = reference_table("partitioned_with_materialize_feature");
    let uri = dir.path().to_str().expect("utf-8").to_owned();
    // the reference's files were written before the feature was on: data columns only
    let theirs = dir
        .path()
        .join("letter=a/part-00000-a08d296a-d2c5-4a99-bea9-afcea42ba2e9.c000.snappy.parquet");
    assert_eq!(columns(&theirs), ["number", "a_float"]);
    let before = both_readers(&uri).await;
    // partition letter=a holds two files
    let add = compact_into_one(&uri, 2).await;
    assert_eq!(add["partitionValues"]["letter"], "a");
    let path = add["path"].as_str().expect("path");
    assert!(path.starts_with("letter=a/"), "{path}");
    assert_eq!(
        columns(&dir.path().join(path)),
        ["number", "a_float", "letter"],
        "the data columns, then the partition column"
    );
    assert_eq!(both_readers(&uri).await, before);
}

/// Four appends of a table of strings (`id`, then three string columns), written by python
/// deltalake.
const WRITE_STRINGS: &str = r#"
import os, sys
import pyarrow as pa
from deltalake import write_deltalake
for i in range(4):
    table = pa.table({
        "id": pa.array([i * 2, i * 2 + 1], pa.int32()),
        "utf8_binary_col": pa.array([f"B{i}", f"a{i}"]),
        "utf8_lcase_col": pa.array([f"B{i}", f"a{i}"]),
        "unicode_col": pa.array([None, f"ä{i}"]),
    })
    write_deltalake(sys.argv[1], table, mode="append")
sys.stdout.flush()
os._exit(0)
"#;

/// Turns on collations the way Databricks writes them (the schema and protocol of the
/// reference `collations-table`): a commit with the `collations` and `domainMetadata` writer
/// features, the `__COLLATIONS` field metadata, and the collation domain.
fn enable_collations(dir: &Path) {
    let reference = reference_table("collations-table");
    let text = std::fs::read_to_string(
        reference
            .path()
            .join("_delta_log/00000000000000000000.json"),
    )
    .expect("reference log");
    let mut metadata = None;
    let mut protocol = None;
    let mut domains = Vec::new();
    for line in text.lines() {
        let action: Value = serde_json::from_str(line).expect("json");
        if let Some(m) = action.get("metaData") {
            metadata = Some(m.clone());
        } else if action.get("protocol").is_some() {
            protocol = Some(action.clone());
        } else if action.get("domainMetadata").is_some() {
            domains.push(action.clone());
        }
    }
    let (ours, version) = latest_metadata(dir);
    let mut metadata = metadata.expect("the reference's metaData");
    // the table's own identity, the reference's schema
    metadata["id"] = ours["id"].clone();
    metadata["createdTime"] = ours["createdTime"].clone();
    let mut lines = vec![
        serde_json::json!({"commitInfo": {"timestamp": chrono::Utc::now().timestamp_millis(),
            "operation": "ALTER TABLE", "engineInfo": "Databricks-Runtime/16.4"}}),
        protocol.expect("the reference's protocol"),
        serde_json::json!({ "metaData": metadata }),
    ];
    lines.extend(domains);
    write_commit(dir, version, &lines);
}

#[tokio::test]
async fn collated_columns_get_no_binary_bounds_from_a_rewrite() {
    let dir = tempfile::tempdir().expect("temp dir");
    let uri = dir.path().to_str().expect("utf-8").to_owned();
    run_python(WRITE_STRINGS, &[&uri]).expect("python deltalake writes");
    enable_collations(dir.path());
    // python deltalake wrote binary bounds for every string column
    let written = log_lines(dir.path())
        .into_iter()
        .find_map(|(version, action)| action.get("add").filter(|_| version == 0).cloned())
        .expect("python deltalake's first file");
    let stats: Value = serde_json::from_str(written["stats"].as_str().unwrap()).unwrap();
    assert!(
        stats["minValues"].get("utf8_lcase_col").is_some(),
        "{stats}"
    );
    let before = both_readers(&uri).await;
    let add = compact_into_one(&uri, 4).await;
    let stats: Value = serde_json::from_str(add["stats"].as_str().expect("stats")).unwrap();
    let keys = |bounds: &str| -> BTreeSet<String> {
        stats[bounds]
            .as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    };
    let binary: BTreeSet<String> = ["id", "utf8_binary_col"].map(str::to_owned).into();
    assert_eq!(keys("minValues"), binary, "{stats}");
    assert_eq!(keys("maxValues"), binary, "{stats}");
    assert_eq!(
        stats["minValues"]["utf8_binary_col"], "B0",
        "binary order: {stats}"
    );
    assert_eq!(keys("nullCount").len(), 4, "null counts stay: {stats}");
    assert_eq!(stats["nullCount"]["unicode_col"], 4);
    assert_eq!(stats.get("statsWithCollation"), None);
    assert_eq!(both_readers(&uri).await, before);
}

/// An independent reader of a table with type widening, which python deltalake refuses: the
/// active files replayed from the JSON log, each read by pyarrow and cast to the column's current
/// type; the rows in the canonical form of `python_rows`. Also prints, for the file named by
/// the second argument, each column's type in the file and in the table.
const READ_WIDENED: &str = r#"
import glob, json, os, sys
import pyarrow as pa
import pyarrow.parquet as pq
root = sys.argv[1]
active, schema = {}, None
for commit in sorted(glob.glob(os.path.join(root, "_delta_log", "*.json"))):
    for line in open(commit):
        action = json.loads(line)
        if "metaData" in action:
            schema = json.loads(action["metaData"]["schemaString"])
        if "add" in action:
            active[action["add"]["path"]] = action["add"]
        if "remove" in action:
            active.pop(action["remove"]["path"], None)
PLAIN = {"byte": pa.int8(), "short": pa.int16(), "integer": pa.int32(), "long": pa.int64(),
         "float": pa.float32(), "double": pa.float64(), "string": pa.string(),
         "boolean": pa.bool_(), "date": pa.date32(), "timestamp_ntz": pa.timestamp("us"),
         "timestamp": pa.timestamp("us", tz="UTC"), "binary": pa.binary()}
def arrow_type(name):
    if name.startswith("decimal("):
        precision, scale = name[len("decimal("):-1].split(",")
        return pa.decimal128(int(precision), int(scale))
    return PLAIN[name]
types = {f["name"]: arrow_type(f["type"]) for f in schema["fields"]}
rows = []
for path in active:
    table = pq.read_table(os.path.join(root, path))
    rows += pa.table({name: table.column(name).cast(t) for name, t in types.items()}).to_pylist()
print(json.dumps(sorted(json.dumps(r, sort_keys=True, default=str) for r in rows)))
if len(sys.argv) > 2:
    file = pq.read_schema(os.path.join(root, sys.argv[2]))
    print(json.dumps([[n, str(file.field(n).type), str(t)] for n, t in types.items()]))
sys.stdout.flush()
os._exit(0)
"#;

/// The rows of the type-widened table at `uri` through [`READ_WIDENED`], and with `file`,
/// (column, type in the file, type in the table) for each column.
fn widened_rows(uri: &str, file: Option<&str>) -> (Vec<String>, Vec<(String, String, String)>) {
    let mut args = vec![uri];
    args.extend(file);
    let out = run_python(READ_WIDENED, &args).expect("pyarrow reads the table");
    let mut lines = out.lines();
    let rows = serde_json::from_str(lines.next().expect("rows")).expect("json");
    let types = lines
        .next()
        .map(|l| serde_json::from_str(l).expect("json"))
        .unwrap_or_default();
    (rows, types)
}

/// Spark 3.5's `type-widening` table: one file written before thirteen columns were widened
/// (byte → long, float → double, decimal(10,2) → decimal(20,5), date → timestamp_ntz…), one
/// after. Compaction converts the older file's values: the file it writes holds every column in
/// its current type, and an independent reader (pyarrow over the log; python deltalake and
/// deltalake refuse the feature) reads the same rows before and after.
#[tokio::test]
async fn a_type_widened_table_is_rewritten_in_its_current_types() {
    let dir = reference_table("type-widening");
    let uri = dir.path().to_str().expect("utf-8").to_owned();
    let (before, _) = widened_rows(&uri, None);
    assert_eq!(before.len(), 2, "{before:?}");
    let add = compact_into_one(&uri, 2).await;
    let (after, types) = widened_rows(&uri, add["path"].as_str());
    assert_eq!(after, before);
    assert_eq!(types.len(), 13, "{types:?}");
    for (column, in_file, in_table) in &types {
        assert_eq!(in_file, in_table, "column `{column}` in the rewritten file");
    }
    let stats: Value = serde_json::from_str(add["stats"].as_str().expect("stats")).unwrap();
    assert_eq!(stats["numRecords"], 2);
    assert_eq!(
        stats["maxValues"]["byte_long"],
        serde_json::json!(9_223_372_036_854_775_807_i64),
        "{stats}"
    );
}
