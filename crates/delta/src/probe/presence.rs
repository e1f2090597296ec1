//! Damage check: does every data file the log references still exist in storage, and every
//! deletion-vector file those files read, and does every version of the log that should load
//! still load?
//!
//! Someone deleting files by hand or a bucket lifecycle rule leaves a log that points at
//! nothing; readers of the table then fail on those files. The same accidents can take a commit
//! out of the middle of the log or a part out of a checkpoint. The probe reports such a table
//! ([`DeltaError::MissingDataFiles`], [`DeltaError::DamagedLog`]) and every maintenance
//! operation refuses to touch it until it reads again: rewriting, vacuuming or cleaning up a
//! damaged table can only make the damage harder to repair.
//!
//! The full check is one recursive listing of the table root compared with the active file
//! list and with [`crate::log::integrity`]'s rules, never a read of a data file: one LIST request
//! per 1,000 objects on S3, GCS and Azure, a directory walk on local storage. Between full
//! checks, files added since the last one are asked for one by one
//! ([`ensure_files_present`]): a HEAD request each. Files the log names by absolute path (a
//! shallow clone's, under another table's root) are not this table's to check.
//!
//! A deletion vector is part of its data file: a reader of the file reads the vector too, and
//! fails when it is gone, so a missing vector file is damage like a missing data file, named
//! with the data file it belongs to. Its path is the one the protocol derives from the
//! descriptor ([`crate::log::deletion_vector`]: `u` relative to the root with its random prefix,
//! `p` absolute, `i` inline in the log and never missing).

use std::collections::HashMap;
use std::sync::Arc;

use deltalake::logstore::object_store::{GetOptions, ObjectMeta, ObjectStore};
use deltalake::{DeltaTable, ObjectStoreError, Path};
use futures::{StreamExt, TryStreamExt};

use crate::error::DeltaError;
use crate::log::integrity::ensure_log_sound;
use crate::log::path::decode_path;
use crate::log::read::last_checkpoint;
use crate::log::read::{LogListing, LOG_READ_CONCURRENCY};
use crate::log::references::is_absolute;
use crate::snapshot::ActiveFile;

/// Prefix of the transaction log inside the table root; not data files.
const LOG_PREFIX: &str = "_delta_log/";

/// What one listing of the table root found.
#[derive(Default)]
pub(crate) struct Listed {
    /// Data file paths (relative, percent-decoded), with their sizes.
    pub data: HashMap<String, u64>,
    pub log: LogListing,
}

impl Listed {
    fn add(&mut self, meta: &ObjectMeta) {
        if meta.location.as_ref().starts_with(LOG_PREFIX) {
            self.log
                .add(&meta.location, meta.last_modified.timestamp_millis());
        } else {
            self.data
                .insert(decode_path(meta.location.as_ref()), meta.size);
        }
    }
}

/// A table with at least this many active files is listed directory by directory, at the
/// same time; a smaller one in one go (one LIST request answers up to 1,000 objects, so
/// splitting it would only add requests).
const LIST_DIRECTORIES_FROM: usize = 1_000;

/// Lists every object under the table root. A large table's root level is listed first,
/// then each directory below it (partitions, `_delta_log/`) at the same time, so the listing
/// takes about as long as its largest partition's, not the sum of all.
pub(crate) async fn list_root(
    table: &DeltaTable,
    uri: &str,
    active: usize,
) -> Result<Listed, DeltaError> {
    let store = table.object_store();
    let context = "listing the table's files";
    let mut listed = Listed::default();
    if active < LIST_DIRECTORIES_FROM {
        let mut entries = store.list(None);
        while let Some(meta) = entries
            .try_next()
            .await
            .map_err(|err| DeltaError::store(uri, context, err))?
        {
            listed.add(&meta);
        }
        return Ok(listed);
    }
    let top = store
        .list_with_delimiter(None)
        .await
        .map_err(|err| DeltaError::store(uri, context, err))?;
    for meta in &top.objects {
        listed.add(meta);
    }
    // owned futures, built before the first await (see `ensure_files_present`)
    let directories: Vec<_> = top
        .common_prefixes
        .into_iter()
        .map(|prefix| {
            let (store, uri) = (Arc::clone(&store), uri.to_owned());
            async move {
                let mut part = Listed::default();
                let mut entries = store.list(Some(&prefix));
                while let Some(meta) = entries
                    .try_next()
                    .await
                    .map_err(|err| DeltaError::store(&uri, context, err))?
                {
                    part.add(&meta);
                }
                Ok::<_, DeltaError>(part)
            }
        })
        .collect();
    let mut parts = futures::stream::iter(directories).buffer_unordered(LOG_READ_CONCURRENCY);
    while let Some(part) = parts.try_next().await? {
        listed.data.extend(part.data);
        if !part.log.files.is_empty() || !part.log.commits.is_empty() {
            listed.log = part.log;
        }
    }
    Ok(listed)
}

/// Active files (relative, percent-decoded paths) and the deletion-vector files they read
/// missing from `data`: a data file by its path, a vector as `VECTOR (the deletion vector of
/// DATA FILE)`.
fn missing_files(data: &HashMap<String, u64>, root: &str, files: &[ActiveFile]) -> Vec<String> {
    let listed = |path: &str| data.contains_key(path) || data.contains_key(&decode_path(path));
    let mut missing: Vec<String> = files
        .iter()
        .flat_map(|f| needed_files(root, f).into_iter())
        .filter(|(path, _)| !listed(path))
        .map(|(_, named)| named)
        .collect();
    missing.sort();
    missing
}

/// The files under this table's root (`root`, its URL with a trailing `/`) that reading
/// `file` needs, each relative to the root with how a damage report names it: the data file
/// itself, and its deletion vector's file (a `p` descriptor's absolute path when it lies under
/// the root). Other absolute paths name another table's files (a shallow clone's): not under
/// this root, not checked here.
fn needed_files(root: &str, file: &ActiveFile) -> Vec<(String, String)> {
    let mut needed = Vec::with_capacity(2);
    if !is_absolute(&file.path) {
        needed.push((file.path.clone(), file.path.clone()));
    }
    let vector = file
        .deletion_vector
        .as_ref()
        .and_then(|dv| dv.file.as_deref());
    let relative = vector.and_then(|path| {
        if is_absolute(path) {
            path.strip_prefix(root).map(decode_path)
        } else {
            Some(path.to_owned())
        }
    });
    if let (Some(vector), Some(relative)) = (vector, relative) {
        needed.push((
            relative,
            format!("{vector} (the deletion vector of {})", file.path),
        ));
    }
    needed
}

/// The table's root URL with a trailing `/`, as absolute paths under it begin.
fn root_of(table: &DeltaTable) -> String {
    let root = table.table_url().as_str();
    if root.ends_with('/') {
        root.to_owned()
    } else {
        format!("{root}/")
    }
}

/// Fails with [`DeltaError::MissingDataFiles`] when any active file is gone from storage, and
/// with [`DeltaError::DamagedLog`] when the log has gaps.
pub(crate) async fn ensure_present(
    table: &DeltaTable,
    uri: &str,
    files: &[ActiveFile],
) -> Result<(), DeltaError> {
    let listed = list_root(table, uri, files.len()).await?;
    let missing = missing_files(&listed.data, &root_of(table), files);
    if !missing.is_empty() {
        return Err(DeltaError::MissingDataFiles {
            table: uri.to_owned(),
            active: files.len(),
            files: missing,
        });
    }
    let latest = crate::open::loaded_version(uri, table)?;
    let hint = last_checkpoint(table.object_store().as_ref(), uri)
        .await?
        .map(|cp| cp.version);
    ensure_log_sound(uri, &listed.log, latest, hint)
}

/// Fails with [`DeltaError::MissingDataFiles`] when any of `added` (active files the last
/// full check did not see) is gone from storage: one HEAD request per file, so a probe of a
/// table that gained a few files since its last listing stays a few small requests.
pub(crate) async fn ensure_files_present(
    table: &DeltaTable,
    uri: &str,
    added: &[&ActiveFile],
    active: usize,
) -> Result<(), DeltaError> {
    // owned futures, built before the first await: a closure or a borrow held across it
    // makes the probe's future not `Send` for every lifetime (rust-lang/rust#100013)
    let root = root_of(table);
    let checks: Vec<_> = added
        .iter()
        .flat_map(|file| needed_files(&root, file).into_iter())
        .map(|(path, named)| {
            let (store, uri) = (table.object_store(), uri.to_owned());
            async move {
                let present =
                    exists(store.as_ref(), &uri, &path, "checking new data files").await?;
                Ok::<_, DeltaError>((named, present))
            }
        })
        .collect();
    let found: Vec<(String, bool)> = futures::stream::iter(checks)
        .buffer_unordered(LOG_READ_CONCURRENCY)
        .try_collect()
        .await?;
    let mut missing: Vec<String> = found
        .into_iter()
        .filter(|(_, present)| !present)
        .map(|(path, _)| path)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    missing.sort();
    Err(DeltaError::MissingDataFiles {
        table: uri.to_owned(),
        active,
        files: missing,
    })
}

/// Whether the file at `path` (relative to the table root, percent-decoded) exists: one HEAD.
pub(crate) async fn exists(
    store: &dyn ObjectStore,
    uri: &str,
    path: &str,
    context: &'static str,
) -> Result<bool, DeltaError> {
    let location = Path::parse(path).unwrap_or_else(|_| Path::from(path));
    match store
        .get_opts(&location, GetOptions::new().with_head(true))
        .await
    {
        Ok(_) => Ok(true),
        Err(ObjectStoreError::NotFound { .. }) => Ok(false),
        Err(err) => Err(DeltaError::store(uri, context, err)),
    }
}

/// Explains a table that failed to load: when its log is damaged, the damage (naming the gap)
/// instead of the loader's error; otherwise the error as it was.
pub(crate) async fn explain_load_failure(uri: &str, err: DeltaError) -> DeltaError {
    if matches!(
        err,
        DeltaError::NotADeltaTable { .. } | DeltaError::InvalidUri { .. }
    ) {
        return err;
    }
    let Ok(log_store) = crate::open::unguarded_log_store(uri) else {
        return err;
    };
    let store = log_store.object_store(None);
    let Ok(listing) = crate::log::read::list_log(store.as_ref(), uri).await else {
        return err;
    };
    let Some(latest) = listing.commits.keys().next_back().copied() else {
        return err;
    };
    let hint = last_checkpoint(store.as_ref(), uri)
        .await
        .ok()
        .flatten()
        .map(|cp| cp.version);
    match ensure_log_sound(uri, &listing, latest, hint) {
        Ok(()) => err,
        Err(damaged) => damaged,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{write_small_files, SmallFiles};

    fn file(path: &str, vector: Option<&str>) -> ActiveFile {
        ActiveFile {
            path: path.to_owned(),
            size: 1,
            partition_values: HashMap::new(),
            num_records: Some(1),
            deletion_vector: vector.map(|file| crate::log::deletion_vector::DeletionVector {
                id: format!("u{file}"),
                cardinality: 1,
                file: Some(file.to_owned()),
            }),
        }
    }

    #[test]
    fn a_missing_deletion_vector_is_damage_named_with_its_data_file() {
        let data: HashMap<String, u64> = [
            ("a.parquet", 1),
            ("b.parquet", 1),
            ("ab/deletion_vector_1.bin", 1),
        ]
        .into_iter()
        .map(|(p, s)| (p.to_owned(), s))
        .collect();
        let root = "file:///lake/t/";
        let files = [
            file("a.parquet", Some("ab/deletion_vector_1.bin")),
            file("b.parquet", Some("deletion_vector_2.bin")),
            // a `p` descriptor under the root, and one under another table's
            file("a.parquet", Some("file:///lake/t/deletion_vector_3.bin")),
            file(
                "a.parquet",
                Some("file:///lake/other/deletion_vector_4.bin"),
            ),
            // inline vectors have no file
            file("b.parquet", None),
        ];
        assert_eq!(
            missing_files(&data, root, &files),
            vec![
                "deletion_vector_2.bin (the deletion vector of b.parquet)".to_owned(),
                "file:///lake/t/deletion_vector_3.bin (the deletion vector of a.parquet)"
                    .to_owned(),
            ]
        );
    }

    /// The directory-by-directory listing of a large table finds what the one-go listing of
    /// a small one finds.
    #[tokio::test]
    async fn both_listings_find_the_same_files() {
        let dir = tempfile::tempdir().unwrap();
        let uri = dir.path().join("t").to_str().unwrap().to_owned();
        let spec = SmallFiles {
            partitions: 3,
            files_per_partition: 2,
            rows_per_file: 5,
            payload_bytes: 8,
        };
        write_small_files(&uri, &spec).await.unwrap();
        // a file at the root level too
        std::fs::write(dir.path().join("t/stray.parquet"), b"x").unwrap();
        let table = crate::open::open_table(&uri).await.unwrap();

        let whole = list_root(&table, &uri, 0).await.unwrap();
        let by_directory = list_root(&table, &uri, usize::MAX).await.unwrap();
        assert_eq!(by_directory.data, whole.data);
        assert_eq!(whole.data.len(), 3 * 2 + 1, "{:?}", whole.data);
        assert_eq!(by_directory.log.commits, whole.log.commits);
        assert_eq!(by_directory.log.files.len(), whole.log.files.len());
        assert!(!whole.log.commits.is_empty());
    }
}
