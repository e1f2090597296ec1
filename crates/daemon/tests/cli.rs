//! Command-line surface of the real binary: every contract subcommand exists, and a bad
//! daemon config fails fast with the key named. (Its presence also makes
//! `cargo test --workspace` build the binary before the end-to-end tests in `tests/` run.)

use std::process::Command;

fn tablekeeper(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tablekeeper"))
        .args(args)
        .env_remove("TABLEKEEPER_DATABASE_URL")
        .env_remove("TABLEKEEPER_INVENTORY")
        .output()
        .expect("binary runs")
}

#[test]
fn help_lists_every_contract_subcommand() {
    let out = tablekeeper(&["--help"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for sub in [
        "run", "validate", "plan", "maintain", "migrate", "schema", "demo",
    ] {
        assert!(
            text.lines().any(|l| l.trim_start().starts_with(sub)),
            "`{sub}` missing from --help:\n{text}"
        );
    }
}

#[test]
fn run_with_a_bad_config_value_names_the_key_and_exits_nonzero() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tk.yaml");
    std::fs::write(&config, "lease: soonish\n").unwrap();
    let out = tablekeeper(&["run", "--config", config.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("`lease`"), "{err}");
}

#[test]
fn run_with_an_unknown_config_key_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tk.yaml");
    std::fs::write(&config, "wokers: 2\n").unwrap();
    let out = tablekeeper(&["run", "--config", config.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("wokers"), "{err}");
}
