//! Compaction: bin-packing small files, only where a partition has enough of them.
//!
//! Owns deciding which partitions qualify (at least `min_small_files` files under
//! `small_file_factor × target_file_size`, counted from the log); the rewrite of exactly those
//! runs in `optimize.rs`, so the work is proportional to what needs it. Every commit is checked
//! by the duplicate-rewrite guard. No other engine may compact a table tablekeeper maintains:
//! deltalake cannot detect a concurrent compaction (DESIGN.md).

use std::collections::BTreeMap;
use std::num::NonZeroU64;

use tablekeeper_vocab::{Compression, Operation};

use crate::error::DeltaError;
use crate::log::read::{ordered_partition_values, partition_key};
use crate::prepare::Prepared;
use crate::rewrite::plan::PartitionScope;
use crate::rewrite::plan::Plan;
use crate::snapshot::ActiveFile;

/// Default share of the target size under which a file counts as small. Spark's auto-compaction
/// treats files under half of `maxFileSize` as small; three quarters also catches the files an
/// optimized write leaves just short of target, which is where most tables sit.
pub const DEFAULT_SMALL_FILE_FACTOR: f64 = 0.75;

/// Options of one compaction run.
#[derive(Debug, Clone)]
pub struct CompactOptions {
    /// Size deltalake bins files up to, in bytes.
    pub target_file_size: u64,
    /// A partition is compacted only when it holds at least this many small files.
    pub min_small_files: u64,
    /// A file is small when its size is under `small_file_factor × target_file_size`
    /// (see [`DEFAULT_SMALL_FILE_FACTOR`]).
    pub small_file_factor: f64,
    /// The encoding of the files compaction decodes and writes (`layout.compression`); row
    /// groups it copies keep theirs.
    pub compression: Compression,
    /// Plan and report, change nothing.
    pub dry_run: bool,
    /// Commit conflicts to retry before giving up with [`DeltaError::Conflict`].
    pub max_conflict_retries: u32,
}

/// The size under which a file counts as small.
pub(crate) fn small_file_threshold(target_file_size: u64, factor: f64) -> u64 {
    // f64 holds sizes up to 2^53 bytes exactly, far beyond any file size
    (target_file_size as f64 * factor) as u64
}

pub(crate) fn validate_sizing(
    uri: &str,
    operation: Operation,
    target_file_size: u64,
    factor: f64,
) -> Result<NonZeroU64, DeltaError> {
    let invalid = |reason: String| DeltaError::InvalidOptions {
        table: uri.to_owned(),
        operation,
        reason,
    };
    if !(factor > 0.0 && factor <= 1.0) {
        return Err(invalid(format!(
            "small_file_factor {factor} must be in (0, 1]"
        )));
    }
    NonZeroU64::new(target_file_size)
        .ok_or_else(|| invalid("target_file_size must be positive".into()))
}

/// Small files per partition, for the partitions holding at least `min_small_files` of them.
pub(crate) fn qualifying_partitions(
    files: &[ActiveFile],
    partition_columns: &[String],
    threshold: u64,
    min_small_files: u64,
) -> BTreeMap<PartitionScope, (u64, u64)> {
    let mut small: BTreeMap<String, (PartitionScope, u64, u64)> = BTreeMap::new();
    for file in files.iter().filter(|f| f.size < threshold) {
        let key = partition_key(partition_columns, &file.partition_values);
        let entry = small.entry(key.clone()).or_insert_with(|| {
            (
                PartitionScope {
                    key,
                    values: ordered_partition_values(partition_columns, &file.partition_values),
                },
                0,
                0,
            )
        });
        entry.1 += 1;
        entry.2 += file.size;
    }
    small
        .into_values()
        .filter(|(_, count, _)| *count >= min_small_files)
        .map(|(scope, count, bytes)| (scope, (count, bytes)))
        .collect()
}

/// The partitions with enough small files, and what rewriting them would read.
pub(crate) fn plan(prepared: &Prepared, options: &CompactOptions) -> Plan {
    let min_small_files = options.min_small_files.max(1);
    let threshold = small_file_threshold(options.target_file_size, options.small_file_factor);
    let qualifying = qualifying_partitions(
        &prepared.files,
        &prepared.protocol.partition_columns,
        threshold,
        min_small_files,
    );
    if qualifying.is_empty() {
        return Plan::Nothing(format!(
            "no partition holds {min_small_files} or more small files (under {threshold} bytes)"
        ));
    }
    Plan::Rewrite {
        files: qualifying.values().map(|(count, _)| count).sum(),
        bytes: qualifying.values().map(|(_, bytes)| bytes).sum(),
        scopes: qualifying.into_keys().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn file(partition: Option<&str>, size: u64) -> ActiveFile {
        ActiveFile {
            path: format!("{size}.parquet"),
            size,
            partition_values: partition
                .map(|p| HashMap::from([("d".to_owned(), Some(p.to_owned()))]))
                .unwrap_or_default(),
            num_records: None,
            deletion_vector: None,
        }
    }

    #[test]
    fn only_partitions_with_enough_small_files_qualify() {
        let cols = vec!["d".to_owned()];
        let files = vec![
            file(Some("1"), 10),
            file(Some("1"), 20),
            file(Some("1"), 30),
            file(Some("2"), 10),
            file(Some("2"), 1000),
            file(Some("3"), 999),
        ];
        let q = qualifying_partitions(&files, &cols, 100, 2);
        let keys: Vec<&str> = q.keys().map(|s| s.key.as_str()).collect();
        assert_eq!(keys, vec!["d=1"]);
        assert_eq!(q.values().next(), Some(&(3, 60)));
        assert_eq!(qualifying_partitions(&files, &cols, 100, 1).len(), 2);
    }

    #[test]
    fn unpartitioned_tables_qualify_as_a_whole() {
        let files = vec![file(None, 1), file(None, 2)];
        let q = qualifying_partitions(&files, &[], 100, 2);
        assert_eq!(q.keys().next().map(|s| s.key.as_str()), Some(""));
    }

    #[test]
    fn sizing_is_validated() {
        let op = Operation::Compact;
        assert!(validate_sizing("/t", op, 0, 0.75).is_err());
        assert!(validate_sizing("/t", op, 10, 0.0).is_err());
        assert!(validate_sizing("/t", op, 10, 1.5).is_err());
        assert_eq!(small_file_threshold(1000, DEFAULT_SMALL_FILE_FACTOR), 750);
    }
}
