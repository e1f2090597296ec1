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
    /// `stats.numRecords`, when the writer recorded statistics.
    pub num_records: Option<u64>,
    /// Rows the file's deletion vector marks deleted; 0 without one.
    pub deleted_rows: u64,
}

impl ActiveFile {
    /// Rows of the file still visible, when its statistics say how many it holds.
    pub fn live_rows(&self) -> Option<u64> {
        self.num_records
            .map(|rows| rows.saturating_sub(self.deleted_rows))
    }
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
            .map(|file| {
                let deletion_vector = file.deletion_vector_descriptor();
                ActiveFile {
                    path: file.path().into_owned(),
                    size: u64::try_from(file.size()).unwrap_or(0),
                    partition_values: file.partition_values_map(),
                    has_deletion_vector: deletion_vector.is_some(),
                    num_records: file.num_records().and_then(|n| u64::try_from(n).ok()),
                    deleted_rows: deletion_vector
                        .and_then(|dv| u64::try_from(dv.cardinality).ok())
                        .unwrap_or(0),
                }
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
