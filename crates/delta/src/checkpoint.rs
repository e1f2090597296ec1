//! Checkpoints and expired-log cleanup, followed by a canary read.
//!
//! Owns writing a checkpoint once enough commits piled up since the last one (readers replay
//! every JSON commit after the newest checkpoint, so snapshot cost grows with that count),
//! deleting log files past the log retention, and proving afterwards that a fresh reader still
//! opens the table to the same file set. Log cleanup erases history (`DESCRIBE HISTORY`, time
//! travel) older than the retention; the effective log retention is the longer of the
//! inventory's and the table's `delta.logRetentionDuration`, and a table that switched
//! `delta.enableExpiredLogCleanup` off is left alone. This module never touches data files.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use chrono::Utc;
use deltalake::checkpoints::{cleanup_expired_logs_for, create_checkpoint};
use deltalake::logstore::object_store::{GetOptions, ObjectStore};
use deltalake::{ObjectStoreError, Path};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::error::DeltaError;
use crate::maintainable::{check_maintainable, TableProtocol};
use crate::open::{open_table, open_table_at};
use crate::presence::ensure_present;
use crate::report::{MaintenanceOp, OpReport};
use crate::retention::{
    effective_log_retention, EXPIRED_LOG_CLEANUP_PROPERTY, LOG_RETENTION_PROPERTY,
};
use crate::run::cancellable;
use crate::snapshot::{active_files, paths};

const OP: MaintenanceOp = MaintenanceOp::Checkpoint;

/// Options of one checkpoint run.
#[derive(Debug, Clone)]
pub struct CheckpointOptions {
    /// Write a checkpoint once this many commits followed the last one.
    pub max_commits_since_checkpoint: u64,
    /// The inventory's `retention.log_retention`.
    pub log_retention: Duration,
    /// Write a checkpoint even below the threshold.
    pub force: bool,
}

/// The `_last_checkpoint` hint: the newest checkpoint's version and when it was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LastCheckpoint {
    pub version: u64,
    pub written_at_ms: i64,
}

/// Reads `_delta_log/_last_checkpoint`; `None` when the table never had a checkpoint.
pub(crate) async fn last_checkpoint(
    store: &dyn ObjectStore,
    uri: &str,
) -> Result<Option<LastCheckpoint>, DeltaError> {
    let path = Path::from("_delta_log/_last_checkpoint");
    let result = match store.get_opts(&path, GetOptions::new()).await {
        Ok(result) => result,
        Err(ObjectStoreError::NotFound { .. }) => return Ok(None),
        Err(err) => return Err(DeltaError::store(uri, "reading _last_checkpoint", err)),
    };
    let written_at_ms = result.meta.last_modified.timestamp_millis();
    let bytes = result
        .bytes()
        .await
        .map_err(|err| DeltaError::store(uri, "reading _last_checkpoint", err))?;
    // a malformed hint is not fatal for readers (they list the log instead); treat it as absent
    let version = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .and_then(|v| v.get("version").and_then(Value::as_u64));
    Ok(version.map(|version| LastCheckpoint {
        version,
        written_at_ms,
    }))
}

/// Commits after the newest checkpoint (all commits when there is none).
pub(crate) fn commits_since(version: u64, checkpoint: Option<LastCheckpoint>) -> u64 {
    match checkpoint {
        Some(cp) => version.saturating_sub(cp.version),
        None => version + 1,
    }
}

/// Checkpoints `table_uri` when due (or forced), cleans up expired log files, then reloads the
/// table from storage and fails loudly if it does not read back the same.
pub async fn checkpoint(
    table_uri: &str,
    options: &CheckpointOptions,
    cancel: &CancellationToken,
) -> Result<OpReport, DeltaError> {
    let started = Instant::now();
    let uri = table_uri;
    let table = cancellable(cancel, uri, OP, open_table(uri)).await?;
    let version = table.version().unwrap_or(0);
    let mut report = OpReport::new(OP, uri, i64::try_from(version).unwrap_or(i64::MAX), false);
    let protocol = TableProtocol::of(uri, &table)?;
    check_maintainable(&protocol, OP)?;
    // a damaged table gets no checkpoint: it would carry the dangling references forward
    let files = active_files(&table, uri).await?;
    cancellable(cancel, uri, OP, ensure_present(&table, uri, &files)).await?;
    drop(files);
    let store = table.object_store();

    let previous = last_checkpoint(store.as_ref(), uri).await?;
    let pending = commits_since(version, previous);
    report.checkpoint_version = previous.map(|cp| i64::try_from(cp.version).unwrap_or(i64::MAX));
    let due =
        pending > 0 && (options.force || pending >= options.max_commits_since_checkpoint.max(1));
    let mut skipped = Vec::new();
    if due {
        tracing::info!(table = uri, version, pending, "writing checkpoint");
        cancellable(cancel, uri, OP, async {
            create_checkpoint(&table, None)
                .await
                .map_err(|err| DeltaError::delta(uri, "writing the checkpoint", err))
        })
        .await?;
        report.checkpoint_version = Some(i64::try_from(version).unwrap_or(i64::MAX));
    } else {
        skipped.push(format!(
            "{pending} commit(s) since the last checkpoint, threshold {}",
            options.max_commits_since_checkpoint
        ));
    }

    let cleanup_disabled = protocol
        .properties
        .get(EXPIRED_LOG_CLEANUP_PROPERTY)
        .is_some_and(|v| v.eq_ignore_ascii_case("false"));
    if cleanup_disabled {
        skipped.push(format!(
            "log cleanup is disabled by `{EXPIRED_LOG_CLEANUP_PROPERTY}`"
        ));
    } else {
        let (log_retention, drift) = effective_log_retention(
            uri,
            options.log_retention,
            protocol
                .properties
                .get(LOG_RETENTION_PROPERTY)
                .map(String::as_str),
        )?;
        report.retention_used_secs = Some(log_retention.as_secs());
        report.retention_drift = drift;
        let cutoff_ms = Utc::now()
            .timestamp_millis()
            .saturating_sub(i64::try_from(log_retention.as_millis()).unwrap_or(i64::MAX));
        let log_store = table.log_store();
        let deleted = cancellable(cancel, uri, OP, async {
            cleanup_expired_logs_for(version, log_store.as_ref(), cutoff_ms, None)
                .await
                .map_err(|err| DeltaError::delta(uri, "cleaning up expired logs", err))
        })
        .await?;
        report.log_files_deleted = Some(deleted as u64);
        if deleted == 0 {
            skipped.push("no log files past the log retention".into());
        }
    }

    let expected = paths(&active_files(&table, uri).await?);
    cancellable(cancel, uri, OP, canary(uri, version, &expected)).await?;
    if !due && report.log_files_deleted.unwrap_or(0) == 0 {
        report.skipped = Some(skipped.join("; "));
    }
    Ok(report.finish(started))
}

/// Loads the table fresh from storage, at `version` (through the new checkpoint) and at its
/// latest version, and compares the file set at `version` with what the writer saw.
async fn canary(uri: &str, version: u64, expected: &HashSet<String>) -> Result<(), DeltaError> {
    let fail = |reason: String| DeltaError::CheckpointCanary {
        table: uri.to_owned(),
        version: i64::try_from(version).unwrap_or(i64::MAX),
        reason,
    };
    let fresh = open_table_at(uri, version).await.map_err(|err| {
        fail(format!(
            "the table does not load at version {version}: {err}"
        ))
    })?;
    let found = paths(
        &active_files(&fresh, uri)
            .await
            .map_err(|err| fail(err.to_string()))?,
    );
    if &found != expected {
        let missing = expected.difference(&found).count();
        let extra = found.difference(expected).count();
        return Err(fail(format!(
            "a fresh load sees {} files where the writer saw {} ({missing} missing, {extra} unexpected)",
            found.len(),
            expected.len()
        )));
    }
    open_table(uri)
        .await
        .map_err(|err| fail(format!("the latest version does not load: {err}")))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commits_since_counts_from_the_checkpoint() {
        let cp = LastCheckpoint {
            version: 10,
            written_at_ms: 0,
        };
        assert_eq!(commits_since(15, Some(cp)), 5);
        assert_eq!(commits_since(10, Some(cp)), 0);
        assert_eq!(commits_since(4, None), 5);
    }
}
