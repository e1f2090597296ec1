//! Reference tables written by Spark, Databricks and others (tests/data/reference), copied
//! into temp dirs with their writers' times.

pub use tablekeeper_delta::fixtures::aged::{backdate, copy_reference, log_contents};

/// A copy of the reference table `name` (tests/data/reference, written by Spark, Databricks
/// and others) in a temp dir, with its writers' times.
pub fn reference_table(name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    copy_reference(name, dir.path());
    dir
}
