//! Row ids through a rewrite of a table with row tracking enabled (`delta.enableRowTracking`).
//!
//! Every row of such a table has a stable row id and a row commit version: the value of the
//! table's materialized columns (`delta.rowTracking.materializedRowIdColumnName`,
//! `…materializedRowCommitVersionColumnName`) in its file where a writer stored one, else the
//! file's `baseRowId` plus the row's position in the file, and the file's
//! `defaultRowCommitVersion`. A rewrite moves rows into new files, so it must carry both
//! values along: [`RowTracking::scan`] reads the files to rewrite one after another, in file
//! order, and adds both columns to each row read (computed from the file's footer, its
//! materialized columns and its deletion vector), so the new files hold them materialized and
//! every row keeps its id. The rows are checked against the file's live row count, so a scan
//! that skipped or reordered rows fails the rewrite instead of renumbering them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use deltalake::arrow::array::{Array, ArrayRef, AsArray, Int64Array, RecordBatch};
use deltalake::arrow::compute::cast;
use deltalake::arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef};
use deltalake::datafusion::error::DataFusionError;
use deltalake::datafusion::execution::SendableRecordBatchStream;
use deltalake::datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use deltalake::kernel::EagerSnapshot;
use deltalake::logstore::LogStoreRef;
#[allow(deprecated)]
use deltalake::parquet::arrow::async_reader::{
    ParquetObjectReader, ParquetRecordBatchStreamBuilder,
};
use deltalake::parquet::arrow::ProjectionMask;
use deltalake::{DeltaTableError, Path};
use futures::{StreamExt, TryStreamExt};

use crate::error::DeltaError;

const ENABLED_PROPERTY: &str = "delta.enableRowTracking";
const ROW_ID_COLUMN_PROPERTY: &str = "delta.rowTracking.materializedRowIdColumnName";
const COMMIT_VERSION_COLUMN_PROPERTY: &str =
    "delta.rowTracking.materializedRowCommitVersionColumnName";

/// The materialized row-tracking columns of a table with row tracking enabled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RowTracking {
    pub row_id_column: String,
    pub commit_version_column: String,
}

/// The table's materialized row-tracking columns when row tracking is enabled.
pub(crate) fn row_tracking(
    uri: &str,
    snapshot: &EagerSnapshot,
) -> Result<Option<RowTracking>, DeltaError> {
    RowTracking::of(snapshot.metadata().configuration()).map_err(|reason| {
        DeltaError::MalformedLog {
            table: uri.to_owned(),
            reason,
        }
    })
}

/// What one file to rewrite contributes to its rows' ids.
#[derive(Debug, Clone)]
struct TrackedFile {
    path: String,
    object_path: Path,
    size: u64,
    base_row_id: Option<i64>,
    default_row_commit_version: Option<i64>,
    deletion_vector: Option<deltalake::kernel::DeletionVectorDescriptor>,
}

impl RowTracking {
    /// The table's materialized columns when row tracking is enabled; `Err` names the
    /// property an enabled table lacks.
    pub(crate) fn of(properties: &HashMap<String, String>) -> Result<Option<RowTracking>, String> {
        if !properties
            .get(ENABLED_PROPERTY)
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
        {
            return Ok(None);
        }
        let column = |key: &str| {
            properties
                .get(key)
                .cloned()
                .ok_or_else(|| format!("row tracking is enabled but `{key}` is not set"))
        };
        Ok(Some(RowTracking {
            row_id_column: column(ROW_ID_COLUMN_PROPERTY)?,
            commit_version_column: column(COMMIT_VERSION_COLUMN_PROPERTY)?,
        }))
    }

    /// The materialized columns' names.
    pub(crate) fn columns(&self) -> [String; 2] {
        [
            self.row_id_column.clone(),
            self.commit_version_column.clone(),
        ]
    }

    /// `scan` (the rewrite scan of one file, logical columns) followed by the two
    /// materialized columns; the scan's schema with them.
    fn schema(&self, scan: &Schema) -> SchemaRef {
        let mut fields: Vec<Field> = scan.fields().iter().map(|f| f.as_ref().clone()).collect();
        fields.push(Field::new(&self.row_id_column, DataType::Int64, true));
        fields.push(Field::new(
            &self.commit_version_column,
            DataType::Int64,
            true,
        ));
        Arc::new(Schema::new(fields))
    }

    /// The live rows of `paths` (files of `snapshot`), file after file in file order, each
    /// with its row id and row commit version in the materialized columns.
    pub(crate) async fn scan(
        &self,
        uri: &str,
        log_store: &LogStoreRef,
        snapshot: &EagerSnapshot,
        paths: Vec<String>,
    ) -> Result<(SchemaRef, SendableRecordBatchStream), DeltaError> {
        let wanted: std::collections::HashSet<&String> = paths.iter().collect();
        let mut files: HashMap<String, TrackedFile> = HashMap::new();
        for file in snapshot
            .try_log_data()
            .map_err(|e| DeltaError::delta(uri, "reading the active files", e))?
        {
            let path = file.path().into_owned();
            if !wanted.contains(&path) {
                continue;
            }
            #[allow(deprecated)] // the only public way to a file's row-tracking fields
            let add = file.add_action();
            files.insert(
                path.clone(),
                TrackedFile {
                    path,
                    object_path: file.object_store_path(),
                    size: u64::try_from(file.size()).unwrap_or(0),
                    base_row_id: add.base_row_id,
                    default_row_commit_version: add.default_row_commit_version,
                    deletion_vector: file.deletion_vector_descriptor(),
                },
            );
        }
        let mut ordered = Vec::with_capacity(paths.len());
        for path in &paths {
            let file = files.remove(path).ok_or_else(|| DeltaError::TableMoved {
                table: uri.to_owned(),
                reason: format!("file {path} to rewrite is not active any more"),
            })?;
            ordered.push(file);
        }
        // the schema of the scan, from the first file's (every file reads through the table's)
        let Some(first) = ordered.first() else {
            return Err(DeltaError::Internal {
                table: uri.to_owned(),
                reason: "a rewrite of no file".into(),
            });
        };
        let (scan_schema, _) =
            crate::rewrite::scan::scan(uri, log_store, snapshot, vec![first.path.clone()], true)
                .await?;
        let schema = self.schema(&scan_schema);
        let context = Arc::new(FileScans {
            uri: uri.to_owned(),
            log_store: log_store.clone(),
            snapshot: snapshot.clone(),
            tracking: self.clone(),
            schema: Arc::clone(&schema),
        });
        let stream = futures::stream::iter(ordered)
            .then(move |file| {
                let context = Arc::clone(&context);
                async move { context.rows_of(file).await }
            })
            .try_flatten();
        Ok((
            Arc::clone(&schema),
            Box::pin(RecordBatchStreamAdapter::new(schema, stream)),
        ))
    }
}

/// What the scan of each file needs.
struct FileScans {
    uri: String,
    log_store: LogStoreRef,
    snapshot: EagerSnapshot,
    tracking: RowTracking,
    schema: SchemaRef,
}

impl FileScans {
    /// `file`'s live rows with their ids, as a stream of batches.
    async fn rows_of(
        &self,
        file: TrackedFile,
    ) -> Result<
        futures::stream::BoxStream<'static, Result<RecordBatch, DataFusionError>>,
        DataFusionError,
    > {
        let external = |e: DeltaError| DataFusionError::External(Box::new(e));
        let (ids, versions) = self.ids_of(&file).await.map_err(external)?;
        let (_, batches) = crate::rewrite::scan::scan(
            &self.uri,
            &self.log_store,
            &self.snapshot,
            vec![file.path.clone()],
            true,
        )
        .await
        .map_err(external)?;
        let schema = Arc::clone(&self.schema);
        let total = ids.len();
        let read = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&read);
        let miscount = {
            let (uri, path) = (self.uri.clone(), file.path.clone());
            move |read: usize| {
                DataFusionError::External(Box::new(DeltaError::MissingFacts {
                    table: uri.clone(),
                    reason: format!(
                        "file {path} read {read} rows but holds {total} live rows: its row ids \
                         cannot be carried over; nothing was committed"
                    ),
                }))
            }
        };
        let too_many = miscount.clone();
        let rows = batches.map(move |batch| {
            let batch = batch?;
            let rows = batch.num_rows();
            let offset = counted.fetch_add(rows, Ordering::Relaxed);
            if offset + rows > total {
                return Err(too_many(offset + rows));
            }
            let mut columns = batch.columns().to_vec();
            columns.push(Arc::new(ids.slice(offset, rows)) as ArrayRef);
            columns.push(Arc::new(versions.slice(offset, rows)) as ArrayRef);
            Ok(Some(RecordBatch::try_new(Arc::clone(&schema), columns)?))
        });
        // once the file is read, a count short of its live rows fails the rewrite too
        let check = futures::stream::once(async move {
            let read = read.load(Ordering::Relaxed);
            if read == total {
                Ok(None)
            } else {
                Err(miscount(read))
            }
        });
        Ok(rows
            .chain(check)
            .try_filter_map(|batch| futures::future::ready(Ok(batch)))
            .boxed())
    }

    /// The row ids and row commit versions of `file`'s live rows, in file order: the
    /// materialized values where the file holds them, else `baseRowId` + position and
    /// `defaultRowCommitVersion`.
    async fn ids_of(&self, file: &TrackedFile) -> Result<(Int64Array, Int64Array), DeltaError> {
        let uri = self.uri.as_str();
        let missing = |what: &str| DeltaError::MissingFacts {
            table: uri.to_owned(),
            reason: format!(
                "file {} has no {what}, which a table with row tracking enabled needs to keep its \
                 rows' ids; nothing was rewritten",
                file.path
            ),
        };
        let base = file.base_row_id.ok_or_else(|| missing("baseRowId"))?;
        let default_version = file
            .default_row_commit_version
            .ok_or_else(|| missing("defaultRowCommitVersion"))?;
        let read_err = |e: deltalake::parquet::errors::ParquetError| {
            DeltaError::delta(
                uri,
                "reading materialized row ids",
                DeltaTableError::from(e),
            )
        };
        // deprecated for readers that want their I/O on another runtime; this one reads one
        // file's footer and at most two columns on the rewrite's own
        #[allow(deprecated)]
        let reader =
            ParquetObjectReader::new(self.log_store.object_store(None), file.object_path.clone())
                .with_file_size(file.size);
        let builder = ParquetRecordBatchStreamBuilder::new(reader)
            .await
            .map_err(read_err)?;
        let rows = usize::try_from(builder.metadata().file_metadata().num_rows()).unwrap_or(0);
        let file_schema = Arc::clone(builder.schema());
        let materialized: Vec<usize> = self
            .tracking
            .columns()
            .iter()
            .filter_map(|name| file_schema.index_of(name).ok())
            .collect();
        let mut ids: Vec<Option<i64>> = vec![None; rows];
        let mut versions: Vec<Option<i64>> = vec![None; rows];
        if !materialized.is_empty() {
            let mask = ProjectionMask::roots(builder.parquet_schema(), materialized);
            let mut batches = builder.with_projection(mask).build().map_err(read_err)?;
            let mut at = 0usize;
            while let Some(batch) = batches.try_next().await.map_err(read_err)? {
                for (column, into) in [
                    (&self.tracking.row_id_column, &mut ids),
                    (&self.tracking.commit_version_column, &mut versions),
                ] {
                    if let Some(values) = batch.column_by_name(column) {
                        let values = cast(values, &DataType::Int64).map_err(|e| {
                            DeltaError::delta(uri, "reading materialized row ids", e.into())
                        })?;
                        let values = values.as_primitive::<Int64Type>();
                        for i in 0..values.len() {
                            if let Some(slot) = into.get_mut(at + i) {
                                *slot = values.is_valid(i).then(|| values.value(i));
                            }
                        }
                    }
                }
                at += batch.num_rows();
            }
        }
        let deleted = match &file.deletion_vector {
            Some(descriptor) => self.deleted_rows(descriptor).await?,
            None => Default::default(),
        };
        let (mut live_ids, mut live_versions) = (Vec::new(), Vec::new());
        for index in 0..rows {
            if deleted.contains(&u64::try_from(index).unwrap_or(u64::MAX)) {
                continue;
            }
            let position = i64::try_from(index).unwrap_or(i64::MAX);
            live_ids.push(ids[index].unwrap_or(base + position));
            live_versions.push(versions[index].unwrap_or(default_version));
        }
        Ok((Int64Array::from(live_ids), Int64Array::from(live_versions)))
    }

    /// The row positions `descriptor` marks deleted, read by the Delta kernel.
    async fn deleted_rows(
        &self,
        descriptor: &deltalake::kernel::DeletionVectorDescriptor,
    ) -> Result<std::collections::HashSet<u64>, DeltaError> {
        let uri = self.uri.clone();
        let unreadable = |reason: String| DeltaError::MalformedLog {
            table: uri.clone(),
            reason: format!("a deletion vector cannot be read: {reason}"),
        };
        use delta_kernel::actions::deletion_vector::{
            DeletionVectorDescriptor as KernelDescriptor, DeletionVectorStorageType,
        };
        let storage_type = match descriptor.storage_type {
            deltalake::kernel::StorageType::UuidRelativePath => {
                DeletionVectorStorageType::PersistedRelative
            }
            deltalake::kernel::StorageType::Inline => DeletionVectorStorageType::Inline,
            deltalake::kernel::StorageType::AbsolutePath => {
                DeletionVectorStorageType::PersistedAbsolute
            }
        };
        let kernel = KernelDescriptor {
            storage_type,
            path_or_inline_dv: descriptor.path_or_inline_dv.clone(),
            offset: descriptor.offset,
            size_in_bytes: descriptor.size_in_bytes,
            cardinality: descriptor.cardinality,
        };
        let engine = self.log_store.engine(None);
        let root = crate::log::domain::table_root(self.log_store.as_ref());
        let rows = tokio::task::spawn_blocking(move || {
            kernel.row_indexes(engine.storage_handler(), &root)
        })
        .await
        .map_err(|e| unreadable(e.to_string()))?
        .map_err(|e| unreadable(e.to_string()))?;
        Ok(rows.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enabled_row_tracking_names_its_columns() {
        let props = |pairs: &[(&str, &str)]| -> HashMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        assert_eq!(RowTracking::of(&props(&[])), Ok(None));
        assert_eq!(
            RowTracking::of(&props(&[
                (ENABLED_PROPERTY, "true"),
                (ROW_ID_COLUMN_PROPERTY, "_row-id-col-1"),
                (COMMIT_VERSION_COLUMN_PROPERTY, "_row-commit-version-col-1"),
            ])),
            Ok(Some(RowTracking {
                row_id_column: "_row-id-col-1".into(),
                commit_version_column: "_row-commit-version-col-1".into(),
            }))
        );
        let err = RowTracking::of(&props(&[(ENABLED_PROPERTY, "true")])).unwrap_err();
        assert!(err.contains(ROW_ID_COLUMN_PROPERTY), "{err}");
    }
}
