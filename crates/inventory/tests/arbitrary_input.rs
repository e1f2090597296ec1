//! Arbitrary and mangled input: loading never panics and never fails without saying where.
//! Either the text is a valid inventory, or every problem points at a real line and column
//! of the file with a message.

use std::path::Path;

use proptest::prelude::*;
use tablekeeper_inventory::{Inventory, LoadError};

const VALID: &str = "defaults:
  timezone: UTC
  compaction: { schedule: \"0 2 * * *\", target_file_size: 512MiB }
budget: { window: 1h, cpu_seconds: 3600, owners: { data-platform: 600 }, mode: shadow }
tables:
  - name: silver.events
    path: s3://lake/silver/events
    owner: data-platform
    writers: { topology: multi-writer, log_store: conditional-put }
    layout:
      partition_by: [event_date]
      zorder: [eventType]
    retention:
      deleted_file_retention: 7d
      log_retention: interval 30 days
    maintenance:
      importance: high
      compaction: { enabled: true, schedule: \"0 */6 * * *\" }
      vacuum: { full_every: 2 }
";

fn check(text: &str) -> Result<(), TestCaseError> {
    match Inventory::parse(Path::new("p.yaml"), text) {
        Ok(_) => Ok(()),
        Err(LoadError::Invalid(problems)) => {
            prop_assert!(!problems.is_empty());
            let last_line = text.lines().count() + 2;
            for p in &problems {
                prop_assert!(p.line >= 1 && p.line <= last_line, "line out of range: {p}");
                prop_assert!(p.column >= 1, "column out of range: {p}");
                prop_assert_eq!(p.file.as_path(), Path::new("p.yaml"));
                prop_assert!(!p.message.is_empty(), "empty message: {p:?}");
                prop_assert!(!p.to_string().contains('\n'), "a problem spans lines: {p}");
            }
            Ok(())
        }
        Err(other) => Err(TestCaseError::fail(format!("unexpected error: {other}"))),
    }
}

/// One edit of the valid inventory: replace the byte range `start..start+len` (clamped to
/// char boundaries) with `insert`.
fn mangle(base: &str, start: usize, len: usize, insert: &str) -> String {
    let mut start = start % (base.len() + 1);
    while !base.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = (start + len).min(base.len());
    while !base.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{}{}", &base[..start], insert, &base[end..])
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn yaml_like_text(text in "[a-z_:\\-\\[\\]{}#&*!|>'\" \n\t0-9.,@/?%~]{0,300}") {
        check(&text)?;
    }

    #[test]
    fn any_unicode_text(text in "\\PC{0,200}") {
        check(&text)?;
    }

    #[test]
    fn mangled_valid_inventory(
        edits in proptest::collection::vec(
            (0usize..600, 0usize..8, "[a-z_:\\-\\[\\]{}#&*\" \n0-9.@]{0,6}"),
            1..4,
        )
    ) {
        let mut text = VALID.to_string();
        for (start, len, insert) in &edits {
            text = mangle(&text, *start, *len, insert);
        }
        check(&text)?;
    }
}

#[test]
fn the_unmangled_base_is_valid() {
    let inventory = Inventory::parse(Path::new("p.yaml"), VALID).expect("valid base");
    assert_eq!(inventory.tables.len(), 1);
}
