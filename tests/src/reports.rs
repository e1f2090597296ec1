//! `tablekeeper report costs` as the tests run it: the real binary against a test's job store.

use std::process::Command;

/// `tablekeeper report costs --database-url DATABASE_URL ARGS...`: what it printed. Panics
/// with its standard error when it fails.
pub fn report_costs(database_url: &str, args: &[&str]) -> String {
    let out = Command::new(crate::bin_path())
        .args(["report", "costs", "--database-url", database_url])
        .args(args)
        .output()
        .expect("tablekeeper runs");
    assert!(
        out.status.success(),
        "report costs {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("the report is UTF-8")
}

/// [`report_costs`] with `--format json`, parsed.
pub fn report_costs_json(database_url: &str, args: &[&str]) -> serde_json::Value {
    let mut args = args.to_vec();
    args.extend(["--format", "json"]);
    serde_json::from_str(&report_costs(database_url, &args)).expect("the report is JSON")
}
