//! Who else rewrites a table: python deltalake compacts a table that tablekeeper compacted,
//! from a fresh snapshot (no race). `tablekeeper plan` names the engine and the commit, and
//! with `writers.rewrites: external` in the inventory tablekeeper leaves compaction, Z-order
//! and purge to the other engine (`plan` says why, `maintain` refuses) while VACUUM and
//! checkpoints still run.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use tablekeeper_delta::fixtures::peers::run_python;
use tablekeeper_tests::{maintain, run};

const WRITE_THEN_COMPACT: &str = r#"
import sys
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
path, compact = sys.argv[1], sys.argv[2] == "compact"
for i in range(10):
    write_deltalake(path, pa.table({"id": pa.array(list(range(i * 10, i * 10 + 10)), pa.int64())}), mode="append")
if compact:
    DeltaTable(path).optimize.compact()
print(DeltaTable(path).version())
"#;

fn inventory(dir: &Path, uri: &str, rewrites: &str) -> std::path::PathBuf {
    let path = dir.join(format!("inventory-{rewrites}.yaml"));
    std::fs::write(
        &path,
        format!(
            "tables:\n  - name: team.events\n    path: \"{uri}\"\n    owner: data-platform\n    writers: {{ rewrites: {rewrites} }}\n    maintenance:\n      compaction: {{ min_small_files: 2 }}\n"
        ),
    )
    .unwrap();
    path
}

fn plan(inventory: &Path) -> (String, serde_json::Value) {
    let text = run(&["plan", "--inventory", inventory.to_str().unwrap()]);
    assert!(
        text.status.success(),
        "{}",
        String::from_utf8_lossy(&text.stderr)
    );
    let json = run(&[
        "plan",
        "--inventory",
        inventory.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert!(
        json.status.success(),
        "{}",
        String::from_utf8_lossy(&json.stderr)
    );
    (
        String::from_utf8(text.stdout).unwrap(),
        serde_json::from_slice(&json.stdout).unwrap(),
    )
}

fn decision<'a>(plan: &'a serde_json::Value, op: &str) -> &'a serde_json::Value {
    let tables = plan
        .as_array()
        .or_else(|| plan["tables"].as_array())
        .unwrap();
    let ops = tables[0]["operations"].as_array().unwrap();
    &ops.iter().find(|o| o["operation"] == op).unwrap()["decision"]
}

#[test]
fn another_engines_compaction_is_named_and_external_rewrites_are_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("events").to_str().unwrap().to_owned();
    let version: u64 = run_python(WRITE_THEN_COMPACT, &[&uri, "compact"])
        .unwrap()
        .trim()
        .parse()
        .unwrap();

    let owned = inventory(dir.path(), &uri, "tablekeeper");
    let (text, json) = plan(&owned);
    assert!(
        text.contains(&format!(
            "rewritten by another engine: version {version} (OPTIMIZE) by delta-rs:py-"
        )),
        "{text}"
    );
    assert!(
        text.contains("only one engine may rewrite a table"),
        "{text}"
    );
    let foreign = json
        .as_array()
        .or_else(|| json["tables"].as_array())
        .unwrap()[0]["probe"]["recent_foreign_rewrites"]
        .clone();
    assert_eq!(foreign[0]["version"], version, "{foreign}");

    let external = inventory(dir.path(), &uri, "external");
    let (text, json) = plan(&external);
    for op in ["compact", "zorder", "purge"] {
        let d = decision(&json, op);
        assert_eq!(d["decision"], "skip", "{op}: {d}");
        assert!(
            d["reason"]
                .as_str()
                .unwrap()
                .contains("writers.rewrites: external"),
            "{op}: {d}"
        );
    }
    assert!(text.contains("(`writers.rewrites: external`)"), "{text}");
    let refused = maintain(&external, "team.events", "compact");
    assert_eq!(
        refused.status.code(),
        Some(1),
        "maintain refuses the rewrite"
    );
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("writers.rewrites: external"), "{stderr}");
    let checkpoint = maintain(&external, "team.events", "checkpoint");
    assert!(
        checkpoint.status.success(),
        "checkpoints still run: {}",
        String::from_utf8_lossy(&checkpoint.stderr)
    );
}
