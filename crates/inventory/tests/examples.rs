//! The example inventories in `config/` are valid, validate together (as the CI acceptance
//! check runs them), and match the JSON Schema; the schema describes its keys and rejects
//! what the validator rejects outright.

use std::path::{Path, PathBuf};

use serde_json::Value;
use tablekeeper_inventory::{json_schema, Inventory, Operation};

fn config_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config")
}

fn example_files() -> Vec<PathBuf> {
    let mut files = vec![config_dir().join("inventory.example.yaml")];
    let mut dir: Vec<PathBuf> = std::fs::read_dir(config_dir().join("inventory.d"))
        .expect("config/inventory.d exists")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .collect();
    dir.sort();
    assert_eq!(dir.len(), 3, "config/inventory.d holds three example files");
    files.extend(dir);
    files
}

fn yaml_to_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).expect("read example");
    serde_saphyr::from_str::<Value>(&text).expect("example is YAML")
}

#[test]
fn examples_are_valid_together_and_alone() {
    let both = Inventory::load_paths(&[
        config_dir().join("inventory.example.yaml"),
        config_dir().join("inventory.d"),
    ])
    .unwrap_or_else(|e| panic!("examples must validate together:\n{e}"));
    assert_eq!(both.tables.len(), 8);
    assert_eq!(both.sources.len(), 4);
    let example =
        Inventory::load(&config_dir().join("inventory.example.yaml")).expect("example alone");
    let events = example
        .table("silver.events")
        .expect("the DESIGN example table");
    assert_eq!(events.path, "s3://acme-lake-prod/silver/events");
    assert!(events.operation_enabled(Operation::Zorder));
    assert_eq!(events.compaction.schedule.as_str(), "0 */6 * * *");
    assert!(
        example
            .table("silver.sessions")
            .expect("paused table")
            .paused
    );
    Inventory::load(&config_dir().join("inventory.d")).expect("inventory.d alone");
}

#[test]
fn schema_validates_every_example_file() {
    let schema = json_schema();
    let validator = jsonschema::validator_for(&schema).expect("the schema is a valid JSON Schema");
    for file in example_files() {
        let instance = yaml_to_json(&file);
        let errors: Vec<String> = validator
            .iter_errors(&instance)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{}: {errors:#?}", file.display());
    }
}

#[test]
fn schema_rejects_unknown_keys_and_bad_shapes() {
    let schema = json_schema();
    let validator = jsonschema::validator_for(&schema).expect("valid schema");
    let bad = [
        r#"{"name": "a", "path": "/a", "owners": "x"}"#,
        r#"{"name": "a", "path": "relative", "owner": "x"}"#,
        r#"{"name": "a b", "path": "/a", "owner": "x"}"#,
        r#"{"tables": [{"name": "a", "path": "/a"}]}"#,
        r#"{"tables": [], "tabels": []}"#,
        r#"{"name": "a", "path": "/a", "owner": "x", "writers": {"topology": "many"}}"#,
        r#"{"name": "a", "path": "/a", "owner": "x", "maintenance": {"compcation": {}}}"#,
        r#"{"name": "a", "path": "/a", "owner": "x", "maintenance": {"max_attempts": 0}}"#,
        r#"{"name": "a", "path": "/a", "owner": "x", "layout": {"zorder": "x"}}"#,
        r#"{"name": "a", "path": "/a", "owner": "x", "retention": {"log_retention": "thirty"}}"#,
        r#"{"defaults": {"paused": true}}"#,
        r#"{"name": "a", "path": "/a", "owner": "x", "maintenance": {"importance": "urgent"}}"#,
        r#"{"defaults": {"importance": 1}}"#,
        r#"{"tables": [], "budget": {"window": "1h"}}"#,
        r#"{"tables": [], "budget": {"cpu_seconds": 0}}"#,
        r#"{"tables": [], "budget": {"cpu_seconds": "3600"}}"#,
        r#"{"tables": [], "budget": {"cpu_seconds": 60, "owners": {"finance": -1}}}"#,
        r#"{"tables": [], "budget": {"cpu_seconds": 60, "mode": "enforced"}}"#,
        r#"{"tables": [], "budget": {"cpu_seconds": 60, "cpu_second": 60}}"#,
        r#"{"name": "a", "path": "/a", "owner": "x", "budget": {"cpu_seconds": 60}}"#,
    ];
    for text in bad {
        let instance: Value = serde_json::from_str(text).expect("test json");
        assert!(!validator.is_valid(&instance), "schema accepted {text}");
    }
    let good = [
        r#"{"name": "a", "path": "/a", "owner": "x"}"#,
        r#"{"name": "a", "path": "/a", "owner": "x", "maintenance": {"importance": "high"}}"#,
        r#"{"defaults": {"importance": "low"}, "budget": {"cpu_seconds": 0.5}}"#,
        r#"{"tables": [], "budget": {"window": "1h", "cpu_seconds": 3600, "owners": {"finance": 600}, "mode": "enforce"}}"#,
    ];
    for text in good {
        let instance: Value = serde_json::from_str(text).expect("test json");
        assert!(validator.is_valid(&instance), "schema rejected {text}");
    }
    assert!(validator.is_valid(&Value::Null), "an empty file is valid");
}

#[test]
fn schema_describes_its_keys() {
    let schema = json_schema();
    let defs = schema["$defs"].as_object().expect("$defs");
    for (def, key) in [
        ("TableEntry", "name"),
        ("TableEntry", "path"),
        ("TableEntry", "maintenance"),
        ("RetentionEntry", "deleted_file_retention"),
        ("WritersEntry", "log_store"),
        ("CompactionEntry", "target_file_size"),
        ("VacuumEntry", "full_every"),
        ("DefaultsEntry", "timezone"),
        ("WritersEntry", "overwrites"),
        ("OverwritesEntry", "duration"),
        ("MaintenanceEntry", "auto_repair"),
        ("DefaultsEntry", "auto_repair"),
        ("TablesFile", "budget"),
        ("BudgetEntry", "window"),
        ("BudgetEntry", "cpu_seconds"),
        ("BudgetEntry", "owners"),
        ("BudgetEntry", "mode"),
        ("MaintenanceEntry", "importance"),
        ("DefaultsEntry", "importance"),
    ] {
        let property = &defs[def]["properties"][key];
        let description = property["description"].as_str().unwrap_or_default();
        assert!(
            !description.is_empty(),
            "{def}.{key} has no description: {property}"
        );
    }
    assert!(schema["title"]
        .as_str()
        .is_some_and(|t| t.contains("inventory")));
}
