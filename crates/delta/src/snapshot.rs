//! The active file list of a loaded table, as plain values.
//!
//! Owns the one walk over deltalake's materialized snapshot that the probe, compaction planning,
//! the duplicate-rewrite guard and the vacuum cross-check share. The walk runs on a blocking
//! thread: a snapshot can hold millions of files. It reads the log state only, never data files.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

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
    snapshot_files(snapshot, uri).await
}

/// Every active file of `snapshot`.
pub(crate) async fn snapshot_files(
    snapshot: deltalake::kernel::EagerSnapshot,
    uri: &str,
) -> Result<Vec<ActiveFile>, DeltaError> {
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
    .map_err(|err| DeltaError::Internal {
        table: uri.to_owned(),
        reason: format!("snapshot walk panicked: {err}"),
    })?
}

/// The active files of one version, kept up to date commit by commit: a re-probe applies the
/// commits it reads instead of walking the snapshot again.
#[derive(Debug, Default)]
pub(crate) struct LiveFiles {
    /// Shared with a damage check running beside the probes ([`LiveFiles::shared`]); a commit
    /// applied meanwhile copies them first.
    files: Arc<Vec<ActiveFile>>,
    /// Position of each file in `files`, by path; built when the first commit is applied
    /// (a cold probe does not wait for it, and a table that never moves never needs it).
    index: Option<HashMap<String, usize>>,
}

/// `index`, built from `files` if it is not yet.
fn built<'i>(
    index: &'i mut Option<HashMap<String, usize>>,
    files: &[ActiveFile],
) -> &'i mut HashMap<String, usize> {
    index.get_or_insert_with(|| {
        files
            .iter()
            .enumerate()
            .map(|(i, f)| (f.path.clone(), i))
            .collect()
    })
}

impl LiveFiles {
    pub(crate) fn new(files: Vec<ActiveFile>) -> Self {
        LiveFiles {
            files: Arc::new(files),
            index: None,
        }
    }

    pub(crate) fn as_slice(&self) -> &[ActiveFile] {
        &self.files
    }

    /// The files as they are now, for a task that outlives the borrow.
    pub(crate) fn shared(&self) -> Arc<Vec<ActiveFile>> {
        Arc::clone(&self.files)
    }

    /// Applies a commit's removes, then its adds (the protocol's reconciliation: a file is
    /// its path; a new deletion vector is a remove and an add of the same path). Partition
    /// values are keyed by logical names through `names` (physical → logical, empty when the
    /// table does not map its columns).
    pub(crate) fn apply(
        &mut self,
        removes: &[FileAction],
        adds: &[FileAction],
        names: &HashMap<String, String>,
    ) {
        for removed in removes {
            self.remove(&removed.path);
        }
        for added in adds {
            let file = ActiveFile {
                path: added.path.clone(),
                size: added.size.unwrap_or(0),
                partition_values: crate::rewrite::column_mapping::logical_values(
                    added.partition_values.clone(),
                    names,
                ),
                num_records: added.num_records,
                deletion_vector: added.deletion_vector.clone(),
            };
            let index = built(&mut self.index, &self.files);
            let files = Arc::make_mut(&mut self.files);
            match index.get(&file.path) {
                Some(&i) => files[i] = file,
                None => {
                    index.insert(file.path.clone(), files.len());
                    files.push(file);
                }
            }
        }
    }

    fn remove(&mut self, path: &str) {
        let index = built(&mut self.index, &self.files);
        let Some(i) = index.remove(path) else {
            return;
        };
        let files = Arc::make_mut(&mut self.files);
        files.swap_remove(i);
        if let Some(moved) = files.get(i) {
            index.insert(moved.path.clone(), i);
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::read::Commit;

    fn commit(lines: &[&str]) -> Commit {
        Commit::parse(1, lines.join("\n").as_bytes()).expect("parses")
    }

    fn paths(live: &LiveFiles) -> Vec<(String, u64)> {
        let mut paths: Vec<(String, u64)> = live
            .as_slice()
            .iter()
            .map(|f| (f.path.clone(), f.size))
            .collect();
        paths.sort();
        paths
    }

    #[test]
    fn commits_apply_removes_then_adds_by_path() {
        let mut live = LiveFiles::default();
        let adds = commit(&[
            r#"{"add":{"path":"a","size":1,"partitionValues":{},"dataChange":true}}"#,
            r#"{"add":{"path":"b","size":2,"partitionValues":{},"dataChange":true}}"#,
            r#"{"add":{"path":"c","size":3,"partitionValues":{},"dataChange":true}}"#,
        ]);
        live.apply(&adds.removes, &adds.adds, &HashMap::new());
        // a removed file in the middle: the one moved into its place stays findable
        let rewrite = commit(&[
            r#"{"remove":{"path":"a","dataChange":false}}"#,
            r#"{"add":{"path":"d","size":4,"partitionValues":{},"dataChange":false}}"#,
        ]);
        live.apply(&rewrite.removes, &rewrite.adds, &HashMap::new());
        // a new deletion vector is a remove and an add of one path
        let dv = commit(&[
            r#"{"remove":{"path":"c","dataChange":true}}"#,
            r#"{"add":{"path":"c","size":30,"partitionValues":{},"dataChange":true}}"#,
        ]);
        live.apply(&dv.removes, &dv.adds, &HashMap::new());
        let gone = commit(&[r#"{"remove":{"path":"c","dataChange":true}}"#]);
        live.apply(&gone.removes, &gone.adds, &HashMap::new());
        assert_eq!(paths(&live), vec![("b".to_owned(), 2), ("d".to_owned(), 4)]);
        // removing what is not there changes nothing
        live.apply(&gone.removes, &gone.adds, &HashMap::new());
        assert_eq!(live.as_slice().len(), 2);
    }

    #[test]
    fn partition_values_are_keyed_by_logical_names() {
        let mut live = LiveFiles::default();
        let add = commit(&[
            r#"{"add":{"path":"p","size":1,"partitionValues":{"col-5f1a":"x"},"dataChange":true}}"#,
        ]);
        let names = HashMap::from([("col-5f1a".to_owned(), "day".to_owned())]);
        live.apply(&add.removes, &add.adds, &names);
        assert_eq!(
            live.as_slice()[0].partition_values,
            HashMap::from([("day".to_owned(), Some("x".to_owned()))])
        );
    }
}
