//! Reference tables written by Spark, Databricks and others (tests/data/reference), copied
//! into temp dirs with their writers' times.

use std::fs;
use std::path::{Path, PathBuf};

pub use tablekeeper_delta::fixtures::aged::{backdate, log_contents, writer_times};

/// A copy of the reference table `name` (tests/data/reference, written by Spark, Databricks
/// and others) in a temp dir, with its writers' times.
pub fn reference_table(name: &str) -> tempfile::TempDir {
    let source = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/reference")
        .join(name);
    let dir = tempfile::tempdir().expect("temp dir");
    copy_dir(&source, dir.path());
    writer_times(dir.path());
    dir
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("create dir");
    for entry in fs::read_dir(from).unwrap_or_else(|e| panic!("read {}: {e}", from.display())) {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).expect("copy");
        }
    }
}
