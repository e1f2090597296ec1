//! Fuzzes the inventory loader: any bytes either load as a valid inventory or fail with
//! problems that each point at a real line and column of the input, never a panic.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use tablekeeper_inventory::{Inventory, LoadError};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Inventory::parse(Path::new("fuzz.yaml"), text) {
        Ok(_) => {}
        Err(LoadError::Invalid(problems)) => {
            assert!(!problems.is_empty(), "invalid without a problem");
            let last_line = text.lines().count() + 2;
            for p in &problems {
                assert!(p.line >= 1 && p.line <= last_line, "line out of range: {p}");
                assert!(p.column >= 1, "column out of range: {p}");
                assert!(!p.message.is_empty(), "empty message: {p:?}");
            }
        }
        Err(other) => panic!("parse of text returned a non-validation error: {other}"),
    }
});
