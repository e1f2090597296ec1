//! The active file list of a loaded table, as plain values.
//!
//! Owns the one walk over deltalake's materialized snapshot that the probe, compaction planning,
//! the duplicate-rewrite guard and the vacuum cross-check share. The walk runs on a blocking
//! thread: a snapshot can hold millions of files. It reads the log state only, never data files.

use std::collections::{HashMap, HashSet};

use deltalake::DeltaTable;

use crate::error::DeltaError;
use crate::log::deletion_vector::DeletionVector;
use crate::log::read::FileAction;

/// One active data file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ActiveFile {
    /// Path relative to the table root, percent-decoded.
    pub path: String,
    pub size: u64,
    /// Keyed by logical column names (the log keys a column-mapped table's by physical names).
    pub partition_values: HashMap<String, Option<String>>,
    /// `stats.numRecords`, when the writer recorded statistics.
    pub num_records: Option<u64>,
    /// The rows deleted from it without rewriting it, when any.
    pub deletion_vector: Option<DeletionVector>,
}

impl ActiveFile {
    /// Rows of the file still visible, when its statistics say how many it holds.
    pub fn live_rows(&self) -> Option<u64> {
        self.num_records
            .map(|rows| rows.saturating_sub(self.deleted_rows()))
    }

    /// Rows its deletion vector marks deleted; 0 without one.
    pub fn deleted_rows(&self) -> u64 {
        self.deletion_vector.as_ref().map_or(0, |dv| dv.cardinality)
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
    let names = crate::rewrite::column_mapping::partition_names(&snapshot);
    tokio::task::spawn_blocking(move || {
        let log_data = snapshot
            .try_log_data()
            .map_err(|err| DeltaError::delta(&owned_uri, "reading the active files", err))?;
        Ok(log_data
            .into_iter()
            .map(|file| ActiveFile {
                path: file.path().into_owned(),
                size: u64::try_from(file.size()).unwrap_or(0),
                partition_values: crate::rewrite::column_mapping::logical_values(
                    file.partition_values_map(),
                    &names,
                ),
                num_records: file.num_records().and_then(|n| u64::try_from(n).ok()),
                deletion_vector: file
                    .deletion_vector_descriptor()
                    .map(DeletionVector::from_descriptor),
            })
            .collect())
    })
    .await
    .map_err(|err| DeltaError::IncompleteLog {
        table: uri.to_owned(),
        reason: format!("snapshot walk panicked: {err}"),
    })?
}

/// The highest row id an active file of `snapshot` holds by its `baseRowId` (row tracking),
/// or `None` when no file carries one.
pub(crate) fn max_row_id(
    uri: &str,
    snapshot: &deltalake::kernel::EagerSnapshot,
) -> Result<Option<i64>, DeltaError> {
    let log_data = snapshot
        .try_log_data()
        .map_err(|err| DeltaError::delta(uri, "reading the active files", err))?;
    Ok(log_data
        .into_iter()
        .filter_map(|file| {
            #[allow(deprecated)] // the only public way to a file's `baseRowId`
            let base = file.add_action().base_row_id?;
            let rows = i64::try_from(file.num_records().unwrap_or(0)).unwrap_or(i64::MAX);
            Some(base.saturating_add(rows) - 1)
        })
        .max())
}

/// What the rewrite guard tracks of an active file: its deletion vector (the protocol
/// identifies a logical file by path and deletion vector) and the rows still visible in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LogicalFile {
    pub deletion_vector_id: Option<String>,
    pub live_rows: Option<u64>,
}

/// Active files by path, as the guard tracks them.
pub(crate) type ActiveSet = HashMap<String, LogicalFile>;

impl From<&ActiveFile> for LogicalFile {
    fn from(file: &ActiveFile) -> Self {
        LogicalFile {
            deletion_vector_id: file.deletion_vector.as_ref().map(|dv| dv.id.clone()),
            live_rows: file.live_rows(),
        }
    }
}

impl From<&FileAction> for LogicalFile {
    fn from(action: &FileAction) -> Self {
        LogicalFile {
            deletion_vector_id: action.deletion_vector.as_ref().map(|dv| dv.id.clone()),
            live_rows: action.live_rows(),
        }
    }
}

/// The active set of a file list.
pub(crate) fn active_set(files: &[ActiveFile]) -> ActiveSet {
    files
        .iter()
        .map(|f| (f.path.clone(), LogicalFile::from(f)))
        .collect()
}

/// Applies a commit's removes, then its adds, to an active set.
pub(crate) fn apply(set: &mut ActiveSet, removes: &[FileAction], adds: &[FileAction]) {
    for removed in removes {
        set.remove(&removed.path);
    }
    set.extend(adds.iter().map(|a| (a.path.clone(), LogicalFile::from(a))));
}

/// The files on storage the active files need: their data files and the files holding their
/// deletion vectors (relative to the table root, or absolute URLs for `p` descriptors).
pub(crate) fn needed_files(files: &[ActiveFile]) -> HashSet<String> {
    let mut needed = paths(files);
    needed.extend(
        files
            .iter()
            .filter_map(|f| f.deletion_vector.as_ref()?.file.clone()),
    );
    needed
}

/// The set of active paths.
pub(crate) fn paths(files: &[ActiveFile]) -> HashSet<String> {
    files.iter().map(|f| f.path.clone()).collect()
}
