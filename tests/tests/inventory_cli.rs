//! `tablekeeper validate` and `tablekeeper schema` as CI runs them on inventory pull
//! requests: the real binary, real files, exit codes 0 (valid), 1 (problems, one located
//! line each on stderr) and 2 (unusable input).

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;
use tablekeeper_tests::{repo_root, tablekeeper};

fn validate(args: &[&Path]) -> Output {
    tablekeeper()
        .arg("validate")
        .args(args)
        .current_dir(repo_root())
        .output()
        .expect("tablekeeper runs")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Asserts exit code 1 and a stderr line starting with `prefix` that contains `fragment`.
#[track_caller]
fn assert_problem(output: &Output, prefix: &str, fragment: &str) {
    let err = stderr(output);
    assert_eq!(
        output.status.code(),
        Some(1),
        "expected exit 1; stderr:\n{err}"
    );
    assert!(
        err.lines()
            .any(|l| l.starts_with(prefix) && l.contains(fragment)),
        "no stderr line starting with {prefix:?} containing {fragment:?}; stderr:\n{err}"
    );
}

fn write(dir: &Path, name: &str, lines: &[&str]) -> PathBuf {
    let path = dir.join(name);
    let mut text = lines.join("\n");
    text.push('\n');
    std::fs::write(&path, text).expect("write inventory file");
    path
}

#[test]
fn the_examples_validate_together() {
    let root = repo_root();
    let output = validate(&[
        &root.join("config/inventory.example.yaml"),
        &root.join("config/inventory.d"),
    ]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "stderr:\n{}",
        stderr(&output)
    );
    // the same with the relative paths CI uses
    let output = tablekeeper()
        .args([
            "validate",
            "config/inventory.example.yaml",
            "config/inventory.d",
        ])
        .current_dir(repo_root())
        .output()
        .expect("tablekeeper runs");
    assert_eq!(
        output.status.code(),
        Some(0),
        "stderr:\n{}",
        stderr(&output)
    );
}

#[test]
fn each_class_of_problem_exits_1_with_a_located_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let unknown_key = write(
        dir.path(),
        "unknown.yaml",
        &["name: a", "path: /data/a", "owners: x"],
    );
    assert_problem(
        &validate(&[&unknown_key]),
        &format!(
            "{}:3:1: error: table `a`: `owners`: ",
            unknown_key.display()
        ),
        "did you mean `owner`?",
    );

    let bad_cron = write(
        dir.path(),
        "cron.yaml",
        &[
            "name: b",
            "path: /data/b",
            "owner: x",
            "maintenance:",
            "  vacuum: { schedule: \"0 3 * *\" }",
        ],
    );
    assert_problem(
        &validate(&[&bad_cron]),
        &format!(
            "{}:5:23: error: table `b`: `maintenance.vacuum.schedule`: ",
            bad_cron.display()
        ),
        "fields",
    );

    let short = write(
        dir.path(),
        "short.yaml",
        &[
            "name: c",
            "path: /data/c",
            "owner: x",
            "retention:",
            "  deleted_file_retention: 1d",
        ],
    );
    assert_problem(
        &validate(&[&short]),
        &format!("{}:5:27: error: table `c`: `retention.deleted_file_retention`: ", short.display()),
        "set `retention.allow_short_retention: true` or raise `deleted_file_retention` to at least 168h",
    );

    let multi = write(
        dir.path(),
        "multi.yaml",
        &[
            "name: d",
            "path: s3://lake/d",
            "owner: x",
            "writers:",
            "  topology: multi-writer",
        ],
    );
    assert_problem(
        &validate(&[&multi]),
        &format!(
            "{}:5:13: error: table `d`: `writers.topology`: ",
            multi.display()
        ),
        "log_store",
    );

    let syntax = write(
        dir.path(),
        "syntax.yaml",
        &["name: e", "path: [/data/e", "owner: x"],
    );
    assert_problem(
        &validate(&[&syntax]),
        &format!("{}:", syntax.display()),
        "invalid YAML",
    );

    let zorder = write(
        dir.path(),
        "zorder.yaml",
        &[
            "name: f",
            "path: /data/f",
            "owner: x",
            "layout:",
            "  partition_by: [day]",
            "  zorder: [day]",
        ],
    );
    assert_problem(
        &validate(&[&zorder]),
        &format!(
            "{}:6:12: error: table `f`: `layout.zorder`: ",
            zorder.display()
        ),
        "partition column",
    );
}

#[test]
fn duplicates_across_files_name_both_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let first = write(
        dir.path(),
        "a.yaml",
        &["name: events", "path: s3://lake/events", "owner: x"],
    );
    let second = write(
        dir.path(),
        "b.yaml",
        &["name: events", "path: s3://lake/events/", "owner: y"],
    );
    let output = validate(&[dir.path()]);
    assert_problem(
        &output,
        &format!("{}:1:7: error: table `events`: `name`: ", second.display()),
        &format!("{}:1:7", first.display()),
    );
    assert_problem(
        &output,
        &format!("{}:2:7: error: table `events`: `path`: ", second.display()),
        &format!("{}:2:7", first.display()),
    );
}

#[test]
fn every_problem_of_a_file_is_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = write(
        dir.path(),
        "many.yaml",
        &[
            "tables:",
            "  - name: a",
            "    path: relative/a",
            "    owner: x",
            "  - name: b",
            "    path: /data/b",
            "    ownr: y",
        ],
    );
    let output = validate(&[&file]);
    let shown = file.display().to_string();
    assert_problem(
        &output,
        &format!("{shown}:3:11: error: table `a`: `path`: "),
        "relative",
    );
    assert_problem(
        &output,
        &format!("{shown}:5:5: error: table `b`: `owner`: "),
        "missing",
    );
    assert_problem(
        &output,
        &format!("{shown}:7:5: error: table `b`: `ownr`: "),
        "did you mean",
    );
}

#[test]
fn unusable_input_exits_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    let output = validate(&[&dir.path().join("does-not-exist.yaml")]);
    assert_eq!(
        output.status.code(),
        Some(2),
        "stderr:\n{}",
        stderr(&output)
    );
    assert!(
        stderr(&output).contains("does-not-exist.yaml"),
        "{}",
        stderr(&output)
    );

    let empty = dir.path().join("empty-dir");
    std::fs::create_dir(&empty).expect("mkdir");
    let output = validate(&[&empty]);
    assert_eq!(
        output.status.code(),
        Some(2),
        "stderr:\n{}",
        stderr(&output)
    );
}

#[test]
fn schema_is_json_that_validates_every_example() {
    let output = tablekeeper()
        .arg("schema")
        .output()
        .expect("tablekeeper runs");
    assert_eq!(
        output.status.code(),
        Some(0),
        "stderr:\n{}",
        stderr(&output)
    );
    let schema: Value = serde_json::from_slice(&output.stdout).expect("schema output is JSON");
    let validator = jsonschema::validator_for(&schema).expect("a valid JSON Schema");

    let config = repo_root().join("config");
    let mut files = vec![config.join("inventory.example.yaml")];
    let mut dir: Vec<PathBuf> = std::fs::read_dir(config.join("inventory.d"))
        .expect("config/inventory.d")
        .map(|e| e.expect("entry").path())
        .collect();
    dir.sort();
    files.extend(dir);
    assert!(files.len() >= 4, "{files:?}");
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read example");
        let instance: Value = serde_saphyr::from_str(&text).expect("example is YAML");
        let errors: Vec<String> = validator
            .iter_errors(&instance)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{}: {errors:#?}", file.display());
    }

    let bad: Value =
        serde_json::from_str(r#"{"name": "a", "path": "/a", "owners": "x"}"#).expect("json");
    assert!(
        !validator.is_valid(&bad),
        "the schema must reject unknown keys"
    );
}

/// `plan` on an inventory pull request: a table that cannot be read (here: its path holds no
/// Delta table, as after a typo or without credentials) fails the check, named, unless CI
/// has no storage access on purpose.
#[test]
fn plan_fails_when_a_table_cannot_be_read() {
    let dir = tempfile::tempdir().expect("temp dir");
    let missing = dir.path().join("not-a-table");
    let healthy = dir.path().join("healthy");
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime
        .block_on(tablekeeper_delta::fixtures::write_small_files(
            healthy.to_str().expect("utf-8"),
            &tablekeeper_delta::fixtures::SmallFiles {
                partitions: 0,
                files_per_partition: 2,
                rows_per_file: 5,
                payload_bytes: 4,
            },
        ))
        .expect("table");
    let inventory = write(
        dir.path(),
        "inventory.yaml",
        &[
            "tables:",
            "  - name: ok.table",
            &format!("    path: \"{}\"", healthy.display()),
            "    owner: o",
            "  - name: typo.table",
            &format!("    path: \"{}\"", missing.display()),
            "    owner: o",
        ],
    );
    let plan = |extra: &[&str]| {
        tablekeeper()
            .arg("plan")
            .arg("--inventory")
            .arg(&inventory)
            .args(extra)
            .output()
            .expect("tablekeeper runs")
    };
    let out = plan(&[]);
    assert_eq!(out.status.code(), Some(3), "stderr:\n{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("table `typo.table`"), "{err}");
    assert!(!err.contains("table `ok.table`"), "{err}");
    let out = plan(&["--allow-unreadable"]);
    assert_eq!(out.status.code(), Some(0), "stderr:\n{}", stderr(&out));
}
