//! A table's commit history as records that outlive the log.
//!
//! The log answers "who changed this table, when, and how much" only for as long as its JSON
//! commits are kept; log cleanup erases the rest. Owns [`CommitRecord`], the `commitInfo` of one
//! commit in the shape of the job store's `table_commits` table (DESIGN.md), built from commits
//! the probe reads anyway, so copying history costs no extra request. This module only reads.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::log::read::Commit;

/// One commit's `commitInfo`, as `table_commits` stores it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommitRecord {
    pub version: i64,
    /// Commit time: the in-commit timestamp, else `commitInfo.timestamp`, else the commit
    /// file's modification time.
    pub timestamp: DateTime<Utc>,
    pub operation: Option<String>,
    pub operation_parameters: Option<Value>,
    pub operation_metrics: Option<Value>,
    pub engine_info: Option<String>,
    pub user_name: Option<String>,
    pub is_blind_append: Option<bool>,
    /// Whether the commit only moved rows between files (a compaction, Z-order or purge, by
    /// any engine; see `Commit::is_rewrite`).
    #[serde(default)]
    pub rewrite: bool,
    /// The tablekeeper operation that wrote it; `None` for every other writer.
    #[serde(default)]
    pub tablekeeper_operation: Option<String>,
}

impl CommitRecord {
    /// The record of `commit`; `None` when the commit carries no time at all (it was not read
    /// from storage and records no `commitInfo.timestamp`).
    pub(crate) fn of(commit: &Commit) -> Option<CommitRecord> {
        let timestamp = DateTime::from_timestamp_millis(commit.committed_ms()?)?;
        let text = |key: &str| commit.info(key).and_then(Value::as_str).map(str::to_owned);
        let object = |key: &str| commit.info(key).filter(|v| !v.is_null()).cloned();
        Some(CommitRecord {
            version: i64::try_from(commit.version).unwrap_or(i64::MAX),
            timestamp,
            operation: text("operation"),
            operation_parameters: object("operationParameters"),
            operation_metrics: object("operationMetrics"),
            engine_info: text("engineInfo"),
            user_name: text("userName"),
            is_blind_append: commit.info("isBlindAppend").and_then(Value::as_bool),
            rewrite: commit.is_rewrite(),
            tablekeeper_operation: commit.marker_operation().map(str::to_owned),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_carry_commit_info_fields() {
        let text = r#"{"commitInfo":{"timestamp":1700000000000,"operation":"WRITE","operationParameters":{"mode":"Append"},"operationMetrics":{"numFiles":"1"},"engineInfo":"Apache-Spark/3.5.0 Delta-Lake/3.1.0","userName":"ana","isBlindAppend":true}}"#;
        let commit = Commit::parse(4, text.as_bytes()).expect("parses");
        let record = CommitRecord::of(&commit).expect("has a time");
        assert_eq!(record.version, 4);
        assert_eq!(record.timestamp.timestamp_millis(), 1_700_000_000_000);
        assert_eq!(record.operation.as_deref(), Some("WRITE"));
        assert_eq!(
            record.operation_parameters,
            Some(serde_json::json!({"mode": "Append"}))
        );
        assert_eq!(record.user_name.as_deref(), Some("ana"));
        assert_eq!(record.is_blind_append, Some(true));
    }

    #[test]
    fn commits_without_commit_info_use_the_file_time() {
        let mut commit = Commit::parse(0, br#"{"add":{"path":"a","size":1}}"#).expect("parses");
        assert!(CommitRecord::of(&commit).is_none());
        commit.modified_ms = Some(5_000);
        let record = CommitRecord::of(&commit).expect("file time");
        assert_eq!(record.timestamp.timestamp_millis(), 5_000);
        assert_eq!(record.operation, None);
    }
}
