//! Commits that carry no file actions, written by tablekeeper itself: VACUUM's `VACUUM START`
//! and `VACUUM END`.
//!
//! deltalake 1.1's commit path refuses every table whose protocol lists a writer feature it
//! does not know (identity columns, row tracking, liquid clustering, domain metadata,
//! in-commit timestamps), although a commit without actions changes nothing those features
//! govern. The protocol still asks two things of every commit, and this module meets them:
//! with in-commit timestamps on (`delta.enableInCommitTimestamps`), `commitInfo` is the first
//! action and carries an `inCommitTimestamp` strictly greater than the previous commit's; and
//! the commit lands only as the next version (the log store's put-if-absent), retried at the
//! version after when another writer took it. This module never writes add, remove, metadata
//! or protocol actions.

use std::collections::HashMap;

use bytes::Bytes;
use deltalake::kernel::transaction::TransactionError;
use deltalake::logstore::object_store::ObjectStore;
use deltalake::logstore::{CommitOrBytes, LogStore};
use deltalake::Path;
use serde_json::{json, Map, Value};
use uuid::Uuid;

use crate::error::DeltaError;
use crate::log::read::read_commit;

/// Table property that turns in-commit timestamps on.
pub(crate) const IN_COMMIT_TIMESTAMPS_PROPERTY: &str = "delta.enableInCommitTimestamps";

/// Versions tried after the first before giving up: each lost race means another writer
/// committed in between, which a busy table does a few times at most.
const MAX_RACES: u32 = 16;

/// One commit without file actions.
#[derive(Debug, Clone)]
pub(crate) struct InfoCommit {
    /// `operation`, as Delta names it (`VACUUM START`).
    pub operation: &'static str,
    /// `operationParameters`; values are strings, as Delta writes them.
    pub parameters: Map<String, Value>,
    /// `operationMetrics`; values are strings, as Delta writes them.
    pub metrics: Map<String, Value>,
    /// Extra top-level `commitInfo` keys (tablekeeper's run marker).
    pub metadata: HashMap<String, Value>,
    /// Whether the table records in-commit timestamps.
    pub in_commit_timestamps: bool,
}

/// Where a commit landed, and how many versions other writers took first (each a commit
/// conflict, counted like deltalake's rebases).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Landed {
    pub version: u64,
    pub races_lost: u32,
}

/// Writes `commit` as the version after `after` (or the first free one after it).
pub(crate) async fn commit_info_only(
    log_store: &dyn LogStore,
    uri: &str,
    after: u64,
    commit: &InfoCommit,
) -> Result<Landed, DeltaError> {
    let mut version = after + 1;
    for races_lost in 0..=MAX_RACES {
        let bytes = line(log_store, uri, version, commit).await?;
        let entry = if ["LakeFSLogStore", "DefaultLogStore"].contains(&log_store.name().as_str()) {
            CommitOrBytes::LogBytes(bytes)
        } else {
            // stores without put-if-absent commit by copying a temporary file into place
            let tmp = Path::from_iter([
                "_delta_log",
                &format!("_commit_{}.json.tmp", Uuid::new_v4()),
            ]);
            log_store
                .object_store(None)
                .put_opts(&tmp, bytes.into(), Default::default())
                .await
                .map_err(|err| DeltaError::store(uri, "writing a commit", err))?;
            CommitOrBytes::TmpCommit(tmp)
        };
        match log_store
            .write_commit_entry(version, entry.clone(), Uuid::new_v4())
            .await
        {
            Ok(()) => {
                return Ok(Landed {
                    version,
                    races_lost,
                })
            }
            Err(TransactionError::VersionAlreadyExists(_)) => {
                let _ = log_store
                    .abort_commit_entry(version, entry, Uuid::new_v4())
                    .await;
                tracing::info!(
                    table = uri,
                    version,
                    operation = commit.operation,
                    "another writer committed this version first; committing at the next"
                );
                version += 1;
            }
            Err(err) => {
                return Err(DeltaError::delta(
                    uri,
                    "writing a commit",
                    deltalake::DeltaTableError::from(err),
                ))
            }
        }
    }
    Err(DeltaError::Conflict {
        table: uri.to_owned(),
        operation: tablekeeper_vocab::Operation::Vacuum,
        attempts: MAX_RACES,
        source: Box::new(deltalake::DeltaTableError::VersionAlreadyExists(
            version - 1,
        )),
    })
}

/// The commit's one line: `commitInfo`, with the in-commit timestamp when the table keeps
/// them (the previous commit's plus one at least).
async fn line(
    log_store: &dyn LogStore,
    uri: &str,
    version: u64,
    commit: &InfoCommit,
) -> Result<Bytes, DeltaError> {
    let now = chrono::Utc::now().timestamp_millis();
    let mut info = Map::new();
    if commit.in_commit_timestamps {
        let previous = match version.checked_sub(1) {
            Some(v) => read_commit(log_store, uri, v)
                .await?
                .and_then(|c| c.info("inCommitTimestamp").and_then(Value::as_i64)),
            None => None,
        };
        let ict = previous.map_or(now, |p| now.max(p + 1));
        info.insert("inCommitTimestamp".into(), json!(ict));
    }
    info.insert("timestamp".into(), json!(now));
    info.insert("operation".into(), json!(commit.operation));
    info.insert(
        "operationParameters".into(),
        Value::Object(commit.parameters.clone()),
    );
    info.insert(
        "operationMetrics".into(),
        Value::Object(commit.metrics.clone()),
    );
    info.insert(
        "engineInfo".into(),
        json!(format!("tablekeeper/{}", env!("CARGO_PKG_VERSION"))),
    );
    for (key, value) in &commit.metadata {
        info.insert(key.clone(), value.clone());
    }
    let mut text = serde_json::to_string(&json!({ "commitInfo": info })).map_err(|err| {
        DeltaError::IncompleteLog {
            table: uri.to_owned(),
            reason: format!("a commit does not serialize: {err}"),
        }
    })?;
    text.push('\n');
    Ok(Bytes::from(text))
}
