//! `tablekeeper plan --inventory HEAD --base git:REF`: the pull-request view, on a real git
//! repository holding an inventory in two commits, over tables python deltalake wrote (with a
//! history spread over three weeks) and a Databricks table with deletion vectors. Each test
//! commits a base inventory, changes it as a pull request would, and reads what `plan` says
//! the change does, in JSON (the contract) and markdown (the comment).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use tablekeeper_delta::fixtures::aged::{backdate, copy_reference};
use tablekeeper_delta::fixtures::peers::run_python;
use tablekeeper_tests::run;

/// Twenty-one commits: ten appends, a full overwrite at version 10 (removing the ten files
/// the versions before it read), ten appends more, and a checkpoint at version 10.
const HISTORY: &str = r#"
import os, sys
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
uri = sys.argv[1]
def batch(i):
    return pa.table({"id": pa.array(list(range(i * 10, i * 10 + 10)), pa.int64())})
for i in range(10):
    write_deltalake(uri, batch(i), mode="append")
write_deltalake(uri, batch(10), mode="overwrite")
DeltaTable(uri).create_checkpoint()
for i in range(11, 21):
    write_deltalake(uri, batch(i), mode="append")
os._exit(0)
"#;

/// Twelve small files in one commit each.
const SMALL_FILES: &str = r#"
import os, sys
import pyarrow as pa
from deltalake import write_deltalake
for i in range(12):
    write_deltalake(sys.argv[1], pa.table({"id": pa.array([i], pa.int64())}), mode="append")
os._exit(0)
"#;

/// A git repository with an inventory folder, its tables beside it.
struct Repo {
    dir: tempfile::TempDir,
}

impl Repo {
    fn new() -> Self {
        let repo = Repo {
            dir: tempfile::tempdir().unwrap(),
        };
        std::fs::create_dir_all(repo.inventory()).unwrap();
        repo.git(&["init", "-q", "-b", "main"]);
        repo.git(&["config", "user.email", "ci@example.invalid"]);
        repo.git(&["config", "user.name", "ci"]);
        repo
    }

    fn inventory(&self) -> PathBuf {
        self.dir.path().join("inventory")
    }

    fn table(&self, name: &str) -> PathBuf {
        self.dir.path().join("lake").join(name)
    }

    fn git(&self, args: &[&str]) {
        let out = Command::new("git")
            .arg("-C")
            .arg(self.dir.path())
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Writes the inventory file `name` (one table per file, as pull requests keep it).
    fn write(&self, name: &str, yaml: &str) {
        std::fs::write(self.inventory().join(name), yaml).unwrap();
    }

    fn remove(&self, name: &str) {
        std::fs::remove_file(self.inventory().join(name)).unwrap();
    }

    fn commit(&self, message: &str) {
        self.git(&["add", "-A", "inventory"]);
        self.git(&["commit", "-q", "-m", message]);
    }

    /// `plan --inventory inventory --base git:main --format FORMAT`.
    fn plan(&self, format: &str) -> Output {
        run(&[
            "plan",
            "--inventory",
            self.inventory().to_str().unwrap(),
            "--base",
            "git:main",
            "--format",
            format,
        ])
    }

    fn plan_json(&self) -> (Value, Output) {
        let out = self.plan("json");
        let json = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{e}: {}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (json, out)
    }
}

fn table_yaml(name: &str, path: &Path, extra: &str) -> String {
    format!(
        "name: {name}\npath: \"{}\"\nowner: data-platform\n{extra}",
        path.display()
    )
}

/// The consequences of `table` in a JSON review, as (kind, severity, message).
fn consequences(review: &Value, table: &str) -> Vec<(String, String, String)> {
    let entry = review["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["table"] == table)
        .unwrap_or_else(|| panic!("{table} not in the review: {review:#}"));
    entry["consequences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["kind"].as_str().unwrap().to_owned(),
                c["severity"].as_str().unwrap().to_owned(),
                c["message"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn a_shortened_retention_names_what_it_gives_up_and_blocks_for_a_longer_reader() {
    let repo = Repo::new();
    let events = repo.table("events");
    run_python(HISTORY, &[events.to_str().unwrap()]).unwrap();
    // version v was written 20 - v days ago
    backdate(&events, |v| 20 - v.min(20));
    repo.write(
        "events.yaml",
        &table_yaml(
            "py.events",
            &events,
            "retention: { deleted_file_retention: 14d, log_retention: 30d }\nreaders:\n  - { name: trino-prod, engine: trino, version: \"476\", max_query_duration: 9d }\n",
        ),
    );
    repo.commit("py.events");
    repo.write(
        "events.yaml",
        &table_yaml(
            "py.events",
            &events,
            "retention: { deleted_file_retention: 7d, log_retention: 10d }\nreaders:\n  - { name: trino-prod, engine: trino, version: \"476\", max_query_duration: 9d }\n",
        ),
    );

    let (review, out) = repo.plan_json();
    assert_eq!(out.status.code(), Some(4), "a blocking problem: {review:#}");
    assert_eq!(review["blocking"], 1, "{review:#}");
    let table = &review["tables"][0];
    assert_eq!(table["change"], "changed");
    let keys: Vec<&str> = table["settings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["key"].as_str().unwrap())
        .collect();
    assert_eq!(
        keys,
        [
            "retention.deleted_file_retention",
            "retention.log_retention"
        ],
        "only what changed"
    );
    let found = consequences(&review, "py.events");
    let text = format!("{found:#?}");
    // the window goes from 14 days (version 6) to 9 days, the reader's (version 11): the
    // versions between stop restoring, and the ten files the overwrite removed, which only
    // versions 6-9 read, may go
    let shortened = found
        .iter()
        .find(|(kind, _, m)| kind == "retention_shortened" && m.contains("stop being restorable"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(shortened.2.contains("versions 6–10"), "{text}");
    assert!(shortened.2.contains("may delete 10 file(s)"), "{text}");
    assert!(
        found.iter().any(|(k, _, m)| k == "retention_shortened"
            && m.contains("log cleanup may delete commits 0–")),
        "{text}"
    );
    let blocking: Vec<_> = found.iter().filter(|(_, s, _)| s == "blocking").collect();
    assert_eq!(blocking.len(), 1, "{text}");
    assert_eq!(blocking[0].0, "reader_unprotected");
    assert!(
        blocking[0].2.contains("trino-prod") && blocking[0].2.contains("9days"),
        "{text}"
    );

    let md = String::from_utf8(repo.plan("markdown").stdout).unwrap();
    assert!(
        md.starts_with("### tablekeeper plan: 1 table(s) changed, 1 blocking problem(s)"),
        "{md}"
    );
    assert!(
        md.contains("| `retention.deleted_file_retention` | `14days` | `7days` |"),
        "{md}"
    );
}

#[test]
fn a_new_table_shows_its_first_compaction_and_a_removed_one_what_stops() {
    let repo = Repo::new();
    let kept = repo.table("kept");
    let added = repo.table("added");
    run_python(SMALL_FILES, &[kept.to_str().unwrap()]).unwrap();
    run_python(SMALL_FILES, &[added.to_str().unwrap()]).unwrap();
    repo.write("kept.yaml", &table_yaml("py.kept", &kept, ""));
    repo.commit("py.kept");

    // nothing changed yet: nothing to say, exit 0
    let out = repo.plan("text");
    assert_eq!(out.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("no table's effective settings changed"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    repo.remove("kept.yaml");
    repo.write("added.yaml", &table_yaml("py.added", &added, ""));
    let (review, out) = repo.plan_json();
    assert_eq!(out.status.code(), Some(0), "{review:#}");
    assert_eq!(review["tables"].as_array().unwrap().len(), 2, "{review:#}");
    let new = consequences(&review, "py.added");
    let text = format!("{new:#?}");
    assert!(
        new.iter().any(|(k, _, m)| k == "first_maintenance"
            && m.contains("the first compaction rewrites 12 small file(s)")),
        "{text}"
    );
    let gone = consequences(&review, "py.kept");
    let text = format!("{gone:#?}");
    assert!(
        gone.iter()
            .any(|(k, _, m)| k == "stops" && m.contains("compact") && m.contains("vacuum")),
        "{text}"
    );
    assert!(
        gone.iter()
            .any(|(k, _, m)| k == "stops" && m.contains("VACUUM stops reclaiming")),
        "{text}"
    );
    assert_eq!(
        review["cost_per_day"]["data-platform"]["before"],
        Value::Null
    );
}

#[test]
fn deletion_vectors_block_a_reader_that_cannot_read_them_and_pass_one_that_can() {
    let repo = Repo::new();
    let plain = repo.table("plain");
    run_python(SMALL_FILES, &[plain.to_str().unwrap()]).unwrap();
    // Databricks wrote this one with deletion vectors
    let dv = repo.table("dv");
    copy_reference("table-with-dv-small", &dv);
    let readers = |version: &str| {
        format!(
            "readers:\n  - {{ name: spark-batch, engine: delta-spark, version: \"{version}\" }}\n"
        )
    };
    repo.write(
        "plain.yaml",
        &table_yaml("py.plain", &plain, &readers("2.2.0")),
    );
    repo.write("dv.yaml", &table_yaml("db.dv", &dv, &readers("3.2.0")));
    repo.commit("two tables");
    let with_deletion_vectors = |version: &str| {
        table_yaml(
            "py.plain",
            &plain,
            &format!(
                "protocol: {{ features: [deletionVectors] }}\n{}",
                readers(version)
            ),
        )
    };

    // the team turns deletion vectors on for py.plain, whose reader is Delta 2.2
    repo.write("plain.yaml", &with_deletion_vectors("2.2.0"));
    let (review, out) = repo.plan_json();
    assert_eq!(out.status.code(), Some(4), "{review:#}");
    let found = consequences(&review, "py.plain");
    let text = format!("{found:#?}");
    assert!(
        found.iter().any(|(k, s, m)| k == "reader_incompatible"
            && s == "blocking"
            && m.contains("deletionVectors")),
        "{text}"
    );

    // with a reader that reads them, the same change passes
    repo.write("plain.yaml", &with_deletion_vectors("3.2.0"));
    let (review, out) = repo.plan_json();
    assert_eq!(out.status.code(), Some(0), "{review:#}");
    assert!(
        consequences(&review, "py.plain")
            .iter()
            .all(|(_, s, _)| s != "blocking"),
        "{review:#}"
    );

    // the Databricks table already has deletion vectors: moving its reader back to Delta 2.2
    // blocks too
    repo.write("dv.yaml", &table_yaml("db.dv", &dv, &readers("2.2.0")));
    let (review, out) = repo.plan_json();
    assert_eq!(out.status.code(), Some(4), "{review:#}");
    assert!(
        consequences(&review, "db.dv")
            .iter()
            .any(|(k, _, m)| k == "reader_incompatible" && m.contains("deletionVectors")),
        "{review:#}"
    );
}
