//! Compaction's copy path on tables python deltalake wrote: every type Delta keeps statistics
//! for, nulls, nested columns, dictionary-encoded columns and five codecs in one bin. The output
//! is read back by python deltalake (rows identical) and by pyarrow (its row groups are the
//! inputs' own, and every statistic in its `add` bounds the file's actual values exactly as the
//! inputs' did). The fallback to decoding is checked for each condition that forbids copying.

use tablekeeper_delta::fixtures::peers::{python_rows, run_python};
use tablekeeper_delta::fixtures::read_rows_sorted;
use tablekeeper_delta::{optimize, CompactOptions, Optimize};
use tokio_util::sync::CancellationToken;

/// Writes a table partitioned by `day` (two partitions), one append per codec and partition.
/// argv: uri, rows per file, variant ("plain", "evolved": the last append adds a column,
/// "decimal": a decimal column, "odd": partition values that need escaping in paths).
const WRITE: &str = r#"
import datetime, decimal, os, random, sys
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake, WriterProperties
uri, rows, variant = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rng = random.Random(7)
codecs = ["SNAPPY", "ZSTD", "GZIP", "LZ4_RAW", "UNCOMPRESSED"]
start = 0
for index, codec in enumerate(codecs):
    for day in (["2024 01 01", "a%b"] if variant == "odd" else ["2024-01-01", "2024-01-02"]):
        ids = list(range(start, start + rows))
        start += rows
        columns = {
            "id": pa.array(ids, pa.int64()),
            "day": pa.array([day] * rows, pa.string()),
            "small": pa.array([i % 100 if i % 13 else None for i in ids], pa.int8()),
            "short": pa.array([i % 30000 for i in ids], pa.int16()),
            "int": pa.array([(i * 7919) % 1000003 - 500000 for i in ids], pa.int32()),
            "f32": pa.array([i / 3 if i % 11 else None for i in ids], pa.float32()),
            "f64": pa.array([rng.random() * 1e6 - 5e5 for _ in ids], pa.float64()),
            "flag": pa.array([i % 2 == 0 for i in ids], pa.bool_()),
            "name": pa.array([("n%05d" % (i % 500)) if i % 17 else None for i in ids], pa.string()),
            "noise": pa.array([rng.getrandbits(256).to_bytes(32, "big").hex() for _ in ids], pa.string()),
            "d": pa.array([datetime.date(2020, 1, 1) + datetime.timedelta(days=i % 2000) for i in ids], pa.date32()),
            "ts": pa.array([datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
                            + datetime.timedelta(seconds=i * 37, microseconds=i % 1000) for i in ids],
                           pa.timestamp("us", tz="UTC")),
            "nested": pa.array([{"x": float(i), "y": str(i)} if i % 19 else None for i in ids],
                               pa.struct([("x", pa.float64()), ("y", pa.string())])),
            "tags": pa.array([[i, i + 1] if i % 5 else [] for i in ids], pa.list_(pa.int64())),
        }
        if variant == "decimal":
            columns["amount"] = pa.array([decimal.Decimal(i) / 100 for i in ids], pa.decimal128(18, 2))
        last = index == len(codecs) - 1
        if variant == "evolved" and last:
            columns["extra"] = pa.array([str(i) for i in ids], pa.string())
        data = pa.table(columns)
        if start == rows:
            # created first, so every file goes through the append path: python deltalake
            # names a list's element `item` in the file that creates a table, `element` after
            DeltaTable.create(uri, schema=data.schema, partition_by=["day"])
        write_deltalake(uri, data, mode="append", partition_by=["day"],
                        schema_mode="merge" if variant == "evolved" and last else None,
                        writer_properties=WriterProperties(compression=codec))
sys.stdout.flush()
os._exit(0)
"#;

/// For every active file: its row groups, codecs and `created_by`, and every statistic of its
/// `add` that does not bound the file's values (min above the true minimum, max below the true
/// maximum, a null count that differs).
const INSPECT: &str = r#"
import datetime, json, os, sys, urllib.parse
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable
uri = sys.argv[1]
table = DeltaTable(uri)
actions = pa.table(table.get_add_actions(flatten=True)).to_pylist()
files = []
for action in actions:
    # the log's paths are URI-encoded (a partition value `a%b` is the folder `a%25b`)
    path = os.path.join(uri, urllib.parse.unquote(action["path"]))
    parquet = pq.ParquetFile(path)
    meta = parquet.metadata
    data = parquet.read()
    errors = []
    for key, value in action.items():
        for kind in ("min.", "max.", "null_count."):
            if not key.startswith(kind) or value is None:
                continue
            parts = key[len(kind):].split(".")
            array = data.column(parts[0])
            for part in parts[1:]:
                array = pc.struct_field(array, part)
            if pa.types.is_string_view(array.type):
                # min/max have no kernel for string views (the Arrow schema some writers embed)
                array = array.cast(pa.string())
            if kind == "null_count.":
                actual = array.null_count
                ok = actual == value
            else:
                actual = (pc.min if kind == "min." else pc.max)(array).as_py()
                if isinstance(value, float):
                    # float32 statistics print the float's shortest decimal, not its double
                    ok = actual is not None and abs(value - actual) <= 1e-6 * max(1.0, abs(actual))
                elif isinstance(value, datetime.datetime):
                    # Delta keeps timestamp statistics to the millisecond
                    ok = actual is not None and abs(value - actual) < datetime.timedelta(milliseconds=1)
                elif isinstance(value, str):
                    # strings may be truncated: a bound on the right side is enough
                    ok = actual is not None and (value <= actual if kind == "min." else value >= actual)
                else:
                    ok = value == actual
            if not ok:
                errors.append(f"{key}: stats say {value!r}, the file holds {actual!r}")
    if action["num_records"] != meta.num_rows:
        errors.append(f"num_records {action['num_records']} != {meta.num_rows}")
    codecs = sorted({meta.row_group(g).column(c).compression
                     for g in range(meta.num_row_groups) for c in range(meta.num_columns)})
    files.append({"path": action["path"], "row_groups": meta.num_row_groups,
                  "codecs": codecs, "created_by": meta.created_by, "errors": errors,
                  "stat_keys": sum(1 for k, v in action.items()
                                   if k.startswith(("min.", "max.")) and v is not None)})
print(json.dumps(files))
sys.stdout.flush()
os._exit(0)
"#;

#[derive(Debug, serde::Deserialize)]
struct FileFacts {
    path: String,
    row_groups: usize,
    codecs: Vec<String>,
    created_by: String,
    errors: Vec<String>,
    stat_keys: usize,
}

fn inspect(uri: &str) -> Vec<FileFacts> {
    let out = run_python(INSPECT, &[uri]).expect("pyarrow inspects the table");
    serde_json::from_str(out.trim()).expect("inspection JSON")
}

const CODECS: usize = 5;

/// A table of two partitions with one file per codec in each, `rows_per_file` rows per file.
fn write_table(rows_per_file: usize, variant: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let uri = dir.path().join("t").to_string_lossy().into_owned();
    run_python(WRITE, &[&uri, &rows_per_file.to_string(), variant]).expect("python writes");
    (dir, uri)
}

async fn compact(uri: &str) -> tablekeeper_delta::OpReport {
    let options = CompactOptions {
        target_file_size: 256 * 1024 * 1024,
        min_small_files: 2,
        small_file_factor: 0.75,
        compression: Default::default(),
        dry_run: false,
        max_conflict_retries: 0,
    };
    optimize(uri, Optimize::Compact(&options), &CancellationToken::new())
        .await
        .expect("compaction")
}

/// Compacts and checks what every path must hold: the same rows for both readers, one file
/// per partition, statistics that bound each file. Returns the files after.
async fn compact_and_check(uri: &str) -> Vec<FileFacts> {
    let python_before = python_rows(uri, None).expect("python reads the table");
    let rust_before = read_rows_sorted(uri, None)
        .await
        .expect("deltalake reads the table");
    let before = inspect(uri);
    assert_eq!(before.len(), 2 * CODECS, "setup: {before:?}");
    assert!(
        before.iter().all(|f| f.errors.is_empty()),
        "setup: {before:?}"
    );

    let report = compact(uri).await;
    assert_eq!(report.files_removed, 2 * CODECS as u64, "{report:?}");
    assert_eq!(report.files_added, 2, "{report:?}");
    assert_eq!(report.commits.len(), 2, "one commit per bin: {report:?}");

    assert_eq!(python_rows(uri, None).expect("python reads"), python_before);
    assert_eq!(
        read_rows_sorted(uri, None).await.expect("deltalake reads"),
        rust_before
    );
    let after = inspect(uri);
    assert_eq!(after.len(), 2, "{after:?}");
    for file in &after {
        assert!(file.errors.is_empty(), "{}: {:?}", file.path, file.errors);
    }
    after
}

#[tokio::test]
async fn a_bin_of_large_row_groups_is_copied_with_its_codecs_and_exact_statistics() {
    // 40,000 rows of 64 random hex characters each: every file's single row group is over 1 MiB
    let (_dir, uri) = write_table(40_000, "plain");
    let before = inspect(&uri);
    let created_by = before[0].created_by.clone();
    let stat_keys = before[0].stat_keys;

    let after = compact_and_check(&uri).await;
    for file in &after {
        assert_eq!(
            file.row_groups, CODECS,
            "row groups copied, not merged: {file:?}"
        );
        assert_eq!(
            file.codecs.len(),
            CODECS,
            "each row group keeps its codec: {file:?}"
        );
        assert_eq!(file.created_by, created_by, "{file:?}");
        assert_eq!(
            file.stat_keys, stat_keys,
            "as many statistics as the inputs had: {file:?}"
        );
    }

    // data skipping on the merged statistics finds exactly the rows a scan finds
    let probe = r#"
import json, os, sys
from deltalake import DeltaTable, QueryBuilder
t = DeltaTable(sys.argv[1])
q = QueryBuilder().register("t", t)
out = [q.execute(sql).read_all().num_rows for sql in (
    "select * from t where id = 123456",
    "select * from t where ts < '2024-01-01T00:10:00Z'",
    "select * from t where name = 'n00007'",
    "select * from t where d = '2020-01-05'")]
print(json.dumps(out)); sys.stdout.flush(); os._exit(0)
"#;
    let counts: Vec<u64> =
        serde_json::from_str(run_python(probe, &[&uri]).expect("python queries").trim())
            .expect("counts");
    // ids are 0..400,000; ts advances 37 s per id; name repeats every 500 ids (minus nulls)
    assert_eq!(counts[0], 1);
    assert_eq!(counts[1], 17);
    assert!(counts[2] > 700 && counts[2] < 800, "{counts:?}");
    assert_eq!(counts[3], 200);
}

#[tokio::test]
async fn a_bin_of_small_row_groups_is_decoded_into_larger_ones() {
    // 2,000 rows per file: every row group is far under 1 MiB
    let (_dir, uri) = write_table(2_000, "plain");
    for file in compact_and_check(&uri).await {
        assert_eq!(file.row_groups, 1, "merged by decoding: {file:?}");
        assert_eq!(file.codecs, vec!["ZSTD".to_owned()], "{file:?}");
    }
}

#[tokio::test]
async fn a_bin_of_files_with_different_schemas_is_decoded() {
    let (_dir, uri) = write_table(40_000, "evolved");
    for file in compact_and_check(&uri).await {
        assert_eq!(file.row_groups, 1, "decoded: {file:?}");
    }
}

#[tokio::test]
async fn a_bin_whose_statistics_cannot_be_merged_exactly_is_decoded() {
    let (_dir, uri) = write_table(40_000, "decimal");
    for file in compact_and_check(&uri).await {
        assert_eq!(file.row_groups, 1, "decoded: {file:?}");
    }
}

#[tokio::test]
async fn copied_files_land_beside_their_inputs_when_partition_values_need_escaping() {
    let (_dir, uri) = write_table(40_000, "odd");
    let before = inspect(&uri);
    for file in compact_and_check(&uri).await {
        assert_eq!(file.row_groups, CODECS, "copied: {file:?}");
        let directory = file.path.rsplit_once('/').map(|(d, _)| d.to_owned());
        assert!(
            before
                .iter()
                .any(|input| input.path.rsplit_once('/').map(|(d, _)| d.to_owned()) == directory),
            "{} is not in one of its inputs' directories",
            file.path
        );
    }
}
