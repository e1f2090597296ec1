//! What VACUUM keeps for others: a shallow clone's files in its source (the clone in the same
//! inventory, or declared only in the source's `retention.clones`), and every file of a pinned
//! version until its pin expires. The clones' logs are shaped as Spark's `SHALLOW CLONE`
//! writes them (absolute `file:/…` paths into the source); python deltalake is the independent
//! reader of the source and of pinned versions.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use tablekeeper_delta::fixtures::peers::{python_rows, run_python};
use tablekeeper_tests::setup::{first_added_file, TWENTY_APPENDS};
use tablekeeper_tests::{maintain, maintained, maintained_with, run};

/// A shallow clone of the source's latest version, as Spark writes one: commitInfo `CLONE`,
/// the source's protocol and schema under a new table id, and one add per source file with
/// the absolute `file:/` path Spark writes for local files.
const SHALLOW_CLONE: &str = r#"
import json, os, sys, time
import pyarrow as pa
from deltalake import DeltaTable
source, clone = sys.argv[1], sys.argv[2]
dt = DeltaTable(source)
actions = [json.loads(l) for l in open(f"{source}/_delta_log/{0:020}.json")]
protocol = next(a for a in actions if "protocol" in a)
meta = next(a for a in actions if "metaData" in a)
meta["metaData"]["id"] = "5f7c1e2a-0000-4000-8000-00000000c10e"
adds = []
for add in pa.table(dt.get_add_actions(flatten=True)).to_pylist():
    adds.append({"add": {
        "path": "file:" + os.path.join(source, add["path"]),
        "partitionValues": {}, "size": add["size_bytes"],
        "modificationTime": int(time.time() * 1000), "dataChange": True,
        "stats": json.dumps({"numRecords": add["num_records"]}),
    }})
info = {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "CLONE",
        "operationParameters": {"source": source, "sourceVersion": dt.version(), "isShallow": True},
        "engineInfo": "Apache-Spark/3.5.1 Delta-Lake/3.2.0", "isBlindAppend": False}}
os.makedirs(f"{clone}/_delta_log")
with open(f"{clone}/_delta_log/{0:020}.json", "w") as f:
    for action in [info, protocol, meta] + adds:
        f.write(json.dumps(action) + "\n")
print(len(adds))
os._exit(0)
"#;

fn write(dir: &Path, name: &str, text: String) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// Every data file a clone's log names, as local paths.
fn clone_files(clone: &Path) -> Vec<PathBuf> {
    let log =
        std::fs::read_to_string(clone.join("_delta_log").join(format!("{:020}.json", 0))).unwrap();
    log.lines()
        .filter_map(|line| {
            let value: serde_json::Value = serde_json::from_str(line).unwrap();
            let path = value["add"]["path"].as_str()?;
            Some(PathBuf::from(path.strip_prefix("file:").unwrap()))
        })
        .collect()
}

struct Fixture {
    _dir: tempfile::TempDir,
    source: String,
    clone: PathBuf,
    root: PathBuf,
}

fn source_and_clone() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("silver").join("orders");
    let clone = dir.path().join("sandbox").join("orders_test");
    std::fs::create_dir_all(clone.parent().unwrap()).unwrap();
    let source_uri = source.to_str().unwrap().to_owned();
    run_python(TWENTY_APPENDS, &[&source_uri]).unwrap();
    let adds = run_python(SHALLOW_CLONE, &[&source_uri, clone.to_str().unwrap()]).unwrap();
    assert_eq!(adds.trim(), "20", "the clone references every source file");
    Fixture {
        root: dir.path().to_path_buf(),
        _dir: dir,
        source: source_uri,
        clone,
    }
}

const SOURCE_RETENTION: &str =
    "retention: { deleted_file_retention: 0s, log_retention: 0s, allow_short_retention: true";

fn assert_clone_intact(clone: &Path) {
    let files = clone_files(clone);
    assert_eq!(files.len(), 20);
    let missing: Vec<&PathBuf> = files.iter().filter(|f| !f.exists()).collect();
    assert!(missing.is_empty(), "the clone lost files: {missing:?}");
}

fn vacuum_keeps_what_the_clone_references(inventory: &Path, clone_name: &str, f: &Fixture) {
    let before = python_rows(&f.source, None).unwrap();
    let compacted = maintained(inventory, "silver.orders", "compact");
    assert_eq!(compacted["report"]["files_removed"], 20, "{compacted}");

    let dry = maintained_with(inventory, "silver.orders", "vacuum", &["--dry-run"]);
    let kept = &dry["report"]["kept"];
    assert_eq!(kept[0]["reason"], "clone", "{dry}");
    assert_eq!(
        kept[0]["by"], clone_name,
        "the dry run names the clone: {dry}"
    );
    assert_eq!(kept[0]["files"], 20, "{dry}");
    assert_eq!(dry["report"]["kept_listed_files"], 20, "{dry}");
    assert_eq!(dry["report"]["would_delete_files"], 0, "{dry}");

    let vacuumed = maintained(inventory, "silver.orders", "vacuum");
    assert_eq!(vacuumed["report"]["files_removed"], 0, "{vacuumed}");
    assert_eq!(
        vacuumed["report"]["kept"][0]["by"], clone_name,
        "{vacuumed}"
    );
    assert_clone_intact(&f.clone);
    assert_eq!(python_rows(&f.source, None).unwrap(), before, "no row lost");

    // the clone's log cannot be read: nothing is deleted, and the clone is named
    let commit = f.clone.join("_delta_log").join(format!("{:020}.json", 0));
    let text = std::fs::read_to_string(&commit).unwrap();
    std::fs::write(&commit, "{not json").unwrap();
    let refused = maintain(inventory, "silver.orders", "vacuum");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "must refuse: {stderr}");
    assert!(
        stderr.contains(clone_name) && stderr.contains("nothing was deleted"),
        "{stderr}"
    );
    std::fs::write(&commit, text).unwrap();
    assert_clone_intact(&f.clone);
}

#[test]
fn vacuum_of_a_source_keeps_its_inventoried_shallow_clones_files() {
    let f = source_and_clone();
    let inventory = write(
        &f.root,
        "inventory.yaml",
        format!(
            "tables:\n  - name: silver.orders\n    path: \"{}\"\n    owner: o\n    {SOURCE_RETENTION} }}\n    maintenance:\n      compaction: {{ min_small_files: 2 }}\n  - name: sandbox.orders_test\n    path: \"{}\"\n    owner: o\n",
            f.source,
            f.clone.display()
        ),
    );
    vacuum_keeps_what_the_clone_references(&inventory, "sandbox.orders_test", &f);
}

#[test]
fn vacuum_of_a_source_keeps_the_files_of_a_declared_clone() {
    let f = source_and_clone();
    let clone = f.clone.display().to_string();
    let inventory = write(
        &f.root,
        "inventory.yaml",
        format!(
            "tables:\n  - name: silver.orders\n    path: \"{}\"\n    owner: o\n    {SOURCE_RETENTION}, clones: [\"{clone}\"] }}\n    maintenance:\n      compaction: {{ min_small_files: 2 }}\n",
            f.source
        ),
    );
    vacuum_keeps_what_the_clone_references(&inventory, &clone, &f);
}

fn pinned_inventory(dir: &Path, uri: &str, until: &str) -> PathBuf {
    write(
        dir,
        &format!("inventory-{until}.yaml"),
        format!(
            "tables:\n  - name: t\n    path: \"{uri}\"\n    owner: o\n    {SOURCE_RETENTION},\n      pins: [{{ version: 4, until: \"{until}\", reason: \"model run 88\" }}] }}\n    maintenance:\n      compaction: {{ min_small_files: 2 }}\n"
        ),
    )
}

#[test]
fn a_pinned_version_stays_loadable_until_its_pin_expires() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("t").to_str().unwrap().to_owned();
    run_python(TWENTY_APPENDS, &[&uri]).unwrap();
    let pinned_rows = python_rows(&uri, Some(4)).unwrap();
    assert_eq!(pinned_rows.len(), 50);
    let latest_rows = python_rows(&uri, None).unwrap();

    let pinned = pinned_inventory(dir.path(), &uri, "2999-01-01");
    for round in 0..2 {
        maintained(&pinned, "t", "compact");
        let vacuumed = maintained(&pinned, "t", "vacuum");
        let kept = &vacuumed["report"]["kept"][0];
        assert_eq!(kept["reason"], "pin", "{vacuumed}");
        assert_eq!(kept["by"], "version 4 (model run 88)", "{vacuumed}");
        assert_eq!(kept["files"], 5, "version 4 has five files: {vacuumed}");
        if round == 0 {
            assert_eq!(
                vacuumed["report"]["files_removed"], 15,
                "the fifteen files only later versions had: {vacuumed}"
            );
        }
        maintained_with(&pinned, "t", "checkpoint", &["--cleanup-log"]);
        assert_eq!(
            python_rows(&uri, Some(4)).unwrap(),
            pinned_rows,
            "round {round}"
        );
        assert_eq!(
            python_rows(&uri, None).unwrap(),
            latest_rows,
            "round {round}"
        );
    }

    let expired = pinned_inventory(dir.path(), &uri, "2001-01-01");
    let vacuumed = maintained(&expired, "t", "vacuum");
    assert_eq!(
        vacuumed["report"]["files_removed"], 5,
        "the expired pin's files are reclaimed: {vacuumed}"
    );
    let warnings = vacuumed["report"]["warnings"].to_string();
    assert!(warnings.contains("expired"), "{vacuumed}");
    let plan = run(&["plan", "--inventory", expired.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&plan.stdout);
    assert!(
        text.contains("pin of version 4 (model run 88) expired 2001-01-02 00:00 UTC"),
        "plan reports the expired pin: {text}"
    );
    assert_eq!(python_rows(&uri, None).unwrap(), latest_rows, "no row lost");
    assert!(
        python_rows(&uri, Some(4)).is_err(),
        "version 4 is gone with its pin"
    );
}

/// `tablekeeper plan --format json`: the table's view, as the API shows it.
fn planned(inventory: &Path, table: &str) -> serde_json::Value {
    let out = run(&[
        "plan",
        "--format",
        "json",
        "--inventory",
        inventory.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let views: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    views["tables"]
        .as_array()
        .and_then(|tables| tables.iter().find(|t| t["name"] == table))
        .cloned()
        .unwrap_or_else(|| panic!("no `{table}` in {views}"))
}

#[test]
fn the_restore_drill_names_a_pinned_versions_missing_file() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("t").to_str().unwrap().to_owned();
    run_python(TWENTY_APPENDS, &[&uri]).unwrap();
    let pinned = pinned_inventory(dir.path(), &uri, "2999-01-01");
    maintained(&pinned, "t", "compact");
    maintained(&pinned, "t", "vacuum");

    let view = planned(&pinned, "t");
    let drill = &view["probe"]["restore_drill"];
    let pin = drill["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["reason"] == "pin")
        .unwrap_or_else(|| panic!("{drill}"));
    assert_eq!(pin["version"], 4, "{drill}");
    assert_eq!(pin["restorable"], true, "{drill}");
    assert!(
        drill["retained_bytes"]["pin"].as_u64().unwrap() > 0,
        "version 4's five files are kept only for the pin: {drill}"
    );
    assert_eq!(
        drill["retained_bytes"]["window"], 0,
        "a 0s window keeps nothing: {drill}"
    );

    // version 0's file (one of version 4's five), deleted by hand: none is active any more
    let active = python_rows(&uri, None).unwrap();
    let victim = first_added_file(Path::new(&uri)).unwrap();
    std::fs::remove_file(Path::new(&uri).join(&victim)).unwrap();

    let view = planned(&pinned, "t");
    let drill = &view["probe"]["restore_drill"];
    let pin = drill["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["reason"] == "pin")
        .unwrap();
    assert_eq!(pin["restorable"], false, "{drill}");
    assert_eq!(pin["missing_count"], 1, "{drill}");
    assert_eq!(
        pin["missing_files"][0],
        victim.as_str(),
        "the file is named: {drill}"
    );
    let window = drill["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["reason"] == "window")
        .unwrap();
    assert_eq!(
        window["restorable"], true,
        "the current version is intact: {drill}"
    );
    assert_eq!(
        python_rows(&uri, None).unwrap(),
        active,
        "the latest version still reads"
    );
}

/// An inventoried table with no Delta log at its path (a pull request ahead of the table's
/// first write, a table dropped) can reference nothing: it never blocks another table's
/// VACUUM, which warns about it. A table whose log exists but cannot be read still refuses a
/// `maintain` without a job store (nothing tells whether it is a shallow clone); with the job
/// store, whose stored probes say it references only its own files, it is not even read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_that_cannot_reference_the_source_never_blocks_its_vacuum() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("silver").join("orders");
    let broken = dir.path().join("bronze").join("broken");
    let source_uri = source.to_str().unwrap().to_owned();
    run_python(TWENTY_APPENDS, &[&source_uri]).unwrap();
    run_python(TWENTY_APPENDS, &[broken.to_str().unwrap()]).unwrap();
    let before = python_rows(&source_uri, None).unwrap();
    let inventory = write(
        dir.path(),
        "inventory.yaml",
        format!(
            "tables:\n  - name: silver.orders\n    path: \"{source_uri}\"\n    owner: o\n    {SOURCE_RETENTION} }}\n    maintenance:\n      compaction: {{ min_small_files: 2 }}\n  - name: bronze.missing\n    path: \"{}\"\n    owner: o\n  - name: bronze.broken\n    path: \"{}\"\n    owner: o\n",
            dir.path().join("bronze").join("missing").display(),
            broken.display()
        ),
    );
    maintained(&inventory, "silver.orders", "compact");

    // the missing table: warned about, not blocking
    let vacuumed = maintained(&inventory, "silver.orders", "vacuum");
    assert!(
        vacuumed["report"]["files_removed"].as_u64() >= Some(20),
        "the twenty compacted files deleted: {vacuumed}"
    );
    let warnings = vacuumed["report"]["warnings"].to_string();
    assert!(
        warnings.contains("bronze.missing") && warnings.contains("no Delta log"),
        "{vacuumed}"
    );
    assert_eq!(
        python_rows(&source_uri, None).unwrap(),
        before,
        "no row lost"
    );

    // a replica probes the fleet and stores what it saw: bronze.broken references only its own
    // files
    let db = tablekeeper_store::testing::TestDatabase::create()
        .await
        .unwrap();
    let mut daemon = tablekeeper_tests::Daemon::start(
        "prober",
        dir.path(),
        &[
            ("TABLEKEEPER_DATABASE_URL", db.url.clone()),
            ("TABLEKEEPER_INVENTORY", inventory.display().to_string()),
            ("TABLEKEEPER_PROBE_INTERVAL", "1s".into()),
        ],
    )
    .unwrap();
    daemon.wait_ready(Duration::from_secs(60)).await.unwrap();
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    tablekeeper_tests::jobs::wait_until(Duration::from_secs(60), "bronze.broken's probe", || async {
        tablekeeper_tests::jobs::count(
            &pool,
            "SELECT count(*) FROM table_probes WHERE table_name = 'bronze.broken' AND probe IS NOT NULL",
        )
        .await
            == 1
    })
    .await
    .unwrap();
    daemon.signal("TERM").unwrap();
    assert_eq!(daemon.wait_exit(Duration::from_secs(60)).unwrap(), Some(0));
    pool.close().await;

    // then its log breaks
    let commit = broken.join("_delta_log").join(format!("{:020}.json", 19));
    std::fs::write(&commit, "{not json").unwrap();
    run_python(TWENTY_APPENDS, &[&source_uri]).unwrap();
    maintained(&inventory, "silver.orders", "compact");
    let refused = maintain(&inventory, "silver.orders", "vacuum");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && stderr.contains("bronze.broken"),
        "without a job store a table that cannot be read may be a clone: {stderr}"
    );
    let with_store = tablekeeper_tests::tablekeeper()
        .args([
            "maintain",
            "--inventory",
            inventory.to_str().unwrap(),
            "--table",
            "silver.orders",
            "--operation",
            "vacuum",
        ])
        .env("TABLEKEEPER_DATABASE_URL", &db.url)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&with_store.stderr);
    assert!(with_store.status.success(), "{stderr}");
    let vacuumed: serde_json::Value = serde_json::from_slice(&with_store.stdout).unwrap();
    assert!(
        vacuumed["report"]["files_removed"].as_u64() >= Some(20),
        "{vacuumed}"
    );
    assert!(
        !vacuumed["report"]["warnings"]
            .to_string()
            .contains("bronze.broken"),
        "known to reference only its own files, it is not read: {vacuumed}"
    );
    assert_eq!(
        python_rows(&source_uri, None).unwrap().len(),
        before.len() * 2,
        "no row lost"
    );
    db.drop_db().await.unwrap();
}
