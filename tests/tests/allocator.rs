//! The binary's allocator: jemalloc with the options `crates/daemon/src/main.rs` exports (the
//! idle-RSS figures in BENCHMARKS.md depend on them), overridden by `_RJEM_MALLOC_CONF` (README
//! "Running it"). jemalloc's `confirm_conf` prints each option as it sets it, source by source.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use tablekeeper_tests::bin_path;

#[test]
fn the_binary_runs_jemalloc_with_its_options_and_the_environment_overrides_them() {
    let output = Command::new(bin_path())
        .arg("schema")
        .env("_RJEM_MALLOC_CONF", "narenas:8,confirm_conf:true")
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let said = String::from_utf8_lossy(&output.stderr);
    let set = |option: &str| {
        said.find(&format!("-- Set conf value: {option}\n"))
            .unwrap_or_else(|| panic!("jemalloc did not set `{option}`:\n{said}"))
    };
    // the binary's own options, read before the environment's
    let compiled = set("narenas:2");
    set("background_thread:true");
    set("dirty_decay_ms:1000");
    set("muzzy_decay_ms:0");
    let overridden = set("narenas:8");
    assert!(compiled < overridden, "{said}");
}
