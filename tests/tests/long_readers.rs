//! Long readers: a reader declared with `max_query_duration` widens VACUUM's window past a
//! shorter `deleted_file_retention`, so the files its queries may still read stay; the
//! shorter declared retention is reported as `retention` drift. Without the reader the same
//! VACUUM deletes them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use tablekeeper_delta::fixtures::peers::{python_rows, run_python};
use tablekeeper_tests::{maintained, run};

const APPENDS: &str = r#"
import os, sys
import pyarrow as pa
from deltalake import write_deltalake
for i in range(10):
    write_deltalake(sys.argv[1], pa.table({"id": pa.array(list(range(i * 10, i * 10 + 10)), pa.int64())}), mode="append")
os._exit(0)
"#;

fn inventory(dir: &Path, uri: &str, readers: &str) -> std::path::PathBuf {
    let path = dir.join(format!("inventory-{}.yaml", readers.len()));
    std::fs::write(
        &path,
        format!(
            "tables:\n  - name: t\n    path: \"{uri}\"\n    owner: o\n    retention: {{ deleted_file_retention: 0s, allow_short_retention: true }}\n    readers: {readers}\n    maintenance:\n      compaction: {{ min_small_files: 2 }}\n"
        ),
    )
    .unwrap();
    path
}

#[test]
fn vacuum_keeps_what_the_longest_reader_may_still_read() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("t").to_str().unwrap().to_owned();
    run_python(APPENDS, &[&uri]).unwrap();
    let long = inventory(
        dir.path(),
        &uri,
        "[spark, { name: trino-prod, max_query_duration: 1h }]",
    );
    maintained(&long, "t", "compact");
    let before = python_rows(&uri, None).unwrap();

    let kept = maintained(&long, "t", "vacuum");
    assert_eq!(
        kept["report"]["files_removed"], 0,
        "trino-prod's queries may still read them: {kept}"
    );
    assert_eq!(
        kept["report"]["retention_used_secs"].as_u64(),
        Some(3600),
        "the window is the reader's hour: {kept}"
    );
    let plan = run(&["plan", "--inventory", long.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&plan.stdout);
    assert!(
        text.contains("drift (retention)") && text.contains("reader `trino-prod`"),
        "{text}"
    );

    let short = inventory(dir.path(), &uri, "[spark]");
    let deleted = maintained(&short, "t", "vacuum");
    assert_eq!(
        deleted["report"]["files_removed"], 10,
        "without the reader: {deleted}"
    );
    assert_eq!(python_rows(&uri, None).unwrap(), before, "no row lost");
}
