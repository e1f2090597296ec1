//! The active file list of a loaded table, as plain values.
//!
//! Owns the one walk over deltalake's materialized snapshot that the probe, compaction planning,
//! the duplicate-rewrite guard and the vacuum cross-check share. The walk runs on a blocking
//! thread: a snapshot can hold millions of files. It reads the log state only, never data files.

use std::collections::{HashMap, HashSet};

use deltalake::DeltaTable;

use crate::error::DeltaError;

/// One active data file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ActiveFile {
    /// Path relative to the table root, percent-decoded.
    pub path: String,
    pub size: u64,
    pub partition_values: HashMap<String, Option<String>>,
    pub has_deletion_vector: bool,
}

/// Every active file of the table's loaded version.
pub(crate) async fn active_files(
    table: &DeltaTable,
    uri: &str,
) -> Result<Vec<ActiveFile>, DeltaError> {
    let snapshot = table
        .snapshot()
        .map_err(|err| DeltaError::delta(uri, "reading the snapshot", err))?
        .snapshot()
        .clone();
    let owned_uri = uri.to_owned();
    tokio::task::spawn_blocking(move || {
        let log_data = snapshot
            .try_log_data()
            .map_err(|err| DeltaError::delta(&owned_uri, "reading the active files", err))?;
        Ok(log_data
            .into_iter()
            .map(|file| ActiveFile {
                path: file.path().into_owned(),
                size: u64::try_from(file.size()).unwrap_or(0),
                partition_values: file.partition_values_map(),
                has_deletion_vector: file.deletion_vector_descriptor().is_some(),
            })
            .collect())
    })
    .await
    .map_err(|err| DeltaError::IncompleteLog {
        table: uri.to_owned(),
        reason: format!("snapshot walk panicked: {err}"),
    })?
}

/// The set of active paths.
pub(crate) fn paths(files: &[ActiveFile]) -> HashSet<String> {
    files.iter().map(|f| f.path.clone()).collect()
}
