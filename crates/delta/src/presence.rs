//! Damage check: does every data file the log references still exist in storage?
//!
//! Someone deleting files by hand or a bucket lifecycle rule leaves a log that points at
//! nothing; readers of the table then fail on those files. The probe reports such a table
//! ([`DeltaError::MissingDataFiles`]) and every maintenance operation refuses to touch it
//! until it reads again: rewriting or vacuuming a damaged table can only make the damage
//! harder to repair (RESTORE, or re-adding the files).
//!
//! The check is one recursive listing of the table root compared with the active file list,
//! never a read of a data file: one LIST request per 1,000 objects on S3, GCS and Azure, a
//! directory walk on local storage.

use std::collections::HashSet;

use deltalake::DeltaTable;
use futures::TryStreamExt;

use crate::error::DeltaError;
use crate::log::decode_path;
use crate::snapshot::ActiveFile;

/// Prefix of the transaction log inside the table root; not data files.
const LOG_PREFIX: &str = "_delta_log/";

/// Active files (relative, percent-decoded paths) that storage no longer holds.
pub(crate) async fn missing_files(
    table: &DeltaTable,
    uri: &str,
    files: &[ActiveFile],
) -> Result<Vec<String>, DeltaError> {
    if files.is_empty() {
        return Ok(Vec::new());
    }
    let listed: HashSet<String> = table
        .object_store()
        .list(None)
        .try_filter_map(|meta| async move {
            let raw = meta.location.as_ref();
            Ok((!raw.starts_with(LOG_PREFIX)).then(|| decode_path(raw)))
        })
        .try_collect()
        .await
        .map_err(|err| DeltaError::store(uri, "listing the table's data files", err))?;
    let mut missing: Vec<String> = files
        .iter()
        .filter(|f| !listed.contains(&f.path) && !listed.contains(&decode_path(&f.path)))
        .map(|f| f.path.clone())
        .collect();
    missing.sort();
    Ok(missing)
}

/// Fails with [`DeltaError::MissingDataFiles`] when any active file is gone from storage.
pub(crate) async fn ensure_present(
    table: &DeltaTable,
    uri: &str,
    files: &[ActiveFile],
) -> Result<(), DeltaError> {
    let missing = missing_files(table, uri, files).await?;
    if missing.is_empty() {
        Ok(())
    } else {
        Err(DeltaError::MissingDataFiles {
            table: uri.to_owned(),
            active: files.len(),
            files: missing,
        })
    }
}
