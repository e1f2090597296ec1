//! Rewriting chosen files by decoding them: deltalake's deletion-vector-aware scan restricted to
//! the files (`DeltaScan` with a file selection, reading through the table's schema) and its
//! Parquet writer (`DeltaWriter`, statistics computed as it writes), and the commit of such a
//! rewrite. Purge rewrites every file carrying a deletion vector this way; compaction rewrites
//! the bins its copy path ([`crate::splice`]) does not take; Z-order ([`crate::cluster`]) sorts
//! what the scan reads before writing it. Files are written as deltalake's
//! OPTIMIZE writes them (zstd level 4), in row groups of at most [`ROW_GROUP_BYTES`]. Nothing here
//! decodes Parquet or deletion vectors itself.

use std::num::NonZeroU64;
use std::sync::Arc;

use deltalake::arrow::datatypes::SchemaRef;
use deltalake::datafile::writer::{DeltaWriter, WriterConfig};
use deltalake::datafusion::execution::SendableRecordBatchStream;
use deltalake::datafusion::prelude::SessionContext;
use deltalake::delta_datafusion::{DeltaScanNext, FileSelection};
use deltalake::kernel::transaction::{CommitBuilder, CommitProperties};
use deltalake::kernel::{Action, Add, EagerSnapshot};
use deltalake::logstore::LogStoreRef;
use deltalake::protocol::DeltaOperation;
use deltalake::table::config::TablePropertiesExt as _;
use deltalake::DeltaTable;
use futures::StreamExt;

use deltalake::parquet::basic::{Compression, ZstdLevel};
use deltalake::parquet::file::properties::WriterProperties;

use crate::error::DeltaError;
use crate::rewrite::RewriteSpec;

/// The largest row group written (encoded bytes): it bounds what one rewrite holds in memory,
/// and keeps row groups the size Spark writes by default (`parquet.block.size`, 128 MiB) or
/// under.
pub(crate) const ROW_GROUP_BYTES: u64 = 64 * 1024 * 1024;

/// What one decoding rewrite is reckoned to hold, for the rewrite budget: the row group being
/// encoded, the decoded batches feeding it and the upload.
pub(crate) const MEMORY_BYTES: u64 = 2 * ROW_GROUP_BYTES;

/// Writes the live rows of `paths` (files of `snapshot`, percent-decoded as `LogicalFileView::path`) into new files of about `target_size`.
/// Returns their `add` actions, `dataChange: false`.
pub(crate) async fn rewrite_files(
    uri: &str,
    log_store: &LogStoreRef,
    snapshot: &EagerSnapshot,
    paths: Vec<String>,
    target_size: NonZeroU64,
) -> Result<Vec<Add>, DeltaError> {
    let (schema, mut batches) = scan_files(uri, log_store, snapshot, paths).await?;
    let mut writer = writer(log_store, snapshot, schema, target_size);
    while let Some(batch) = batches.next().await {
        let batch =
            batch.map_err(|e| DeltaError::delta(uri, "reading the files to rewrite", e.into()))?;
        writer
            .write(&batch)
            .await
            .map_err(|e| DeltaError::delta(uri, "writing rewritten files", e))?;
    }
    close(uri, writer).await
}

/// The live rows of `paths` (files of `snapshot`, percent-decoded as `LogicalFileView::path`),
/// read through the table's schema (partition columns included), and their schema.
pub(crate) async fn scan_files(
    uri: &str,
    log_store: &LogStoreRef,
    snapshot: &EagerSnapshot,
    paths: Vec<String>,
) -> Result<(SchemaRef, SendableRecordBatchStream), DeltaError> {
    let scan = DeltaScanNext::builder()
        .with_log_store(log_store.clone())
        .with_eager_snapshot(snapshot.clone())
        // selected as deltalake's own rewrites select them (from `add` paths), so paths that
        // needed escaping in the log match (`a%b` is `a%25b` there)
        .with_file_selection(FileSelection::from_adds(paths.into_iter().map(|path| {
            Add {
                path,
                ..Add::default()
            }
        })))
        .build()
        .await
        .map_err(|e| DeltaError::delta(uri, "planning the rewrite scan", e.into()))?;
    let context = SessionContext::new();
    let frame = context
        .read_table(Arc::new(scan))
        .map_err(|e| DeltaError::delta(uri, "planning the rewrite scan", e.into()))?;
    let schema = Arc::new(frame.schema().as_arrow().clone());
    let batches = frame
        .execute_stream()
        .await
        .map_err(|e| DeltaError::delta(uri, "scanning the files to rewrite", e.into()))?;
    Ok((schema, batches))
}

/// A writer of rows of `schema` into new files of `snapshot`'s table of about `target_size`,
/// as deltalake's OPTIMIZE writes them (zstd level 4), in row groups of at most
/// [`ROW_GROUP_BYTES`], with the table's statistics columns.
pub(crate) fn writer(
    log_store: &LogStoreRef,
    snapshot: &EagerSnapshot,
    schema: SchemaRef,
    target_size: NonZeroU64,
) -> DeltaWriter {
    let properties = snapshot.table_properties();
    let properties_of_files = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(4).unwrap_or_default()))
        .set_max_row_group_bytes(Some(usize::try_from(ROW_GROUP_BYTES).unwrap_or(usize::MAX)))
        .build();
    let config = WriterConfig::new(
        schema,
        snapshot.metadata().partition_columns().to_vec(),
        Some(properties_of_files),
        Some(target_size),
        None,
        properties.num_indexed_cols(),
        properties
            .data_skipping_stats_columns
            .as_ref()
            .map(|columns| columns.iter().map(ToString::to_string).collect()),
    );
    DeltaWriter::new(log_store.object_store(None), config)
}

/// Closes `writer` and returns the `add` actions of its files, `dataChange: false`.
pub(crate) async fn close(uri: &str, writer: DeltaWriter) -> Result<Vec<Add>, DeltaError> {
    let adds = writer
        .close()
        .await
        .map_err(|e| DeltaError::delta(uri, "writing rewritten files", e))?;
    Ok(adds
        .into_iter()
        .map(|mut add| {
            add.data_change = false;
            add
        })
        .collect())
}

/// Commits `actions` (a rewrite's removes and adds) on `snapshot` as one OPTIMIZE commit
/// carrying the run's marker. deltalake rebases it over commits made since `snapshot` and fails
/// with a conflict when one of them removed a file this commit removes. Returns its version and
/// the snapshot after it.
pub(crate) async fn commit_rewrite(
    uri: &str,
    log_store: LogStoreRef,
    snapshot: &EagerSnapshot,
    actions: Vec<Action>,
    spec: &RewriteSpec,
) -> Result<(i64, EagerSnapshot), DeltaError> {
    let target_size = i64::try_from(spec.target_size.get()).unwrap_or(i64::MAX);
    let finalized = CommitBuilder::from(
        CommitProperties::default()
            .with_metadata(spec.marker.clone())
            .with_cleanup_expired_logs(Some(false)),
    )
    .with_actions(actions)
    .build(
        Some(snapshot),
        log_store,
        DeltaOperation::Optimize {
            predicate: None,
            target_size,
        },
    )
    .await
    .map_err(|e| DeltaError::delta(uri, "committing the rewrite", e))?;
    let version = i64::try_from(finalized.version()).unwrap_or(i64::MAX);
    Ok((version, finalized.snapshot().snapshot().clone()))
}

/// Commits a rewrite of `table` planned on `snapshot` (see [`commit_rewrite`]) and returns the
/// table reloaded after it; `what` names the rewrite in the log.
pub(crate) async fn commit_and_reload(
    uri: &str,
    table: &DeltaTable,
    snapshot: &EagerSnapshot,
    actions: Vec<Action>,
    spec: &RewriteSpec,
    what: &'static str,
) -> Result<DeltaTable, DeltaError> {
    let (version, _) = commit_rewrite(uri, table.log_store(), snapshot, actions, spec).await?;
    let mut after = table.clone();
    after
        .update_state()
        .await
        .map_err(|e| DeltaError::delta(uri, "reloading the table after the rewrite", e))?;
    tracing::info!(table = uri, version, "{what} committed");
    Ok(after)
}
