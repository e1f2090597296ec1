//! A UniForm table maintained by the real binary: Delta's reference `icebergCompatV2` table
//! (Spark 3.5 / Delta 3.3) with Iceberg metadata written by pyiceberg the way UniForm lays it
//! out. `tablekeeper maintain` compacts it and runs a full VACUUM with no retention; pyiceberg
//! still reads the Iceberg snapshot's rows, and `tablekeeper plan` reports the Iceberg view
//! behind the Delta log (drift `iceberg_metadata`).

use tablekeeper_delta::fixtures::aged::copy_reference;
use tablekeeper_delta::fixtures::iceberg::{iceberg_rows, make_iceberg_view};
use tablekeeper_delta::fixtures::peers::python_rows;
use tablekeeper_tests::setup::InventoryFile;
use tablekeeper_tests::{maintained, run};

#[test]
fn maintenance_of_a_uniform_table_keeps_its_iceberg_view_readable_and_reports_it_behind() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("uniform");
    copy_reference("table-with-icebegCompatV2Enabled", &table);
    let uri = table.to_str().unwrap().to_owned();
    let metadata = make_iceberg_view(&table).expect("pyiceberg writes the Iceberg view");
    let iceberg_before = iceberg_rows(&metadata).expect("pyiceberg reads it");
    let delta_before = python_rows(&uri, None).expect("python deltalake");
    assert_eq!(iceberg_before, delta_before);
    let inventory = InventoryFile::one(
        dir.path(),
        "gold.uniform",
        &table,
        "    retention: { deleted_file_retention: 0s, log_retention: 3650d, allow_short_retention: true }\n    \
         maintenance:\n      compaction: { min_small_files: 2 }\n",
    );

    let plan = run(&["plan", "--inventory", inventory.path.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&plan.stdout);
    assert!(
        !text.contains("iceberg_metadata"),
        "in step at first: {text}"
    );

    let compacted = maintained(&inventory.path, "gold.uniform", "compact");
    assert_eq!(compacted["report"]["files_removed"], 2, "{compacted}");
    let vacuumed = maintained(&inventory.path, "gold.uniform", "vacuum");
    let kept: Vec<&str> = vacuumed["report"]["kept"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|k| k["reason"].as_str())
        .collect();
    assert_eq!(kept, ["iceberg"], "{vacuumed}");
    assert_eq!(
        iceberg_rows(&metadata).expect("pyiceberg reads the same snapshot"),
        iceberg_before
    );
    assert_eq!(
        python_rows(&uri, None).expect("python deltalake"),
        delta_before
    );

    let plan = run(&["plan", "--inventory", inventory.path.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&plan.stdout);
    assert!(
        text.contains("drift (iceberg_metadata)") && text.contains("reflects Delta version 0"),
        "{text}"
    );
}
