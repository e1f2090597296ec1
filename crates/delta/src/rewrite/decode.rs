//! Rewriting chosen files of one partition by decoding them: the rewrite scan
//! ([`crate::rewrite::scan`], with row ids where row tracking keeps them,
//! [`crate::rewrite::row_ids`]), deltalake's Parquet writer (`DeltaWriter`, statistics computed
//! as it writes), and the commit of such a rewrite ([`crate::log::commit`]). Purge rewrites every file carrying a deletion vector this way; compaction rewrites
//! the bins its copy path ([`crate::rewrite::splice`]) does not take; Z-order ([`crate::rewrite::cluster`]) sorts
//! what the scan reads before writing it. Files are written in the table's
//! `layout.compression` and row groups of at most [`ROW_GROUP_BYTES`]
//! ([`crate::rewrite::shape`]). A table that materializes its partition columns
//! (`materializePartitionColumns`, IcebergCompat) gets them inside its files too, after the
//! data columns. Nothing here decodes Parquet or deletion vectors itself.

use delta_kernel::expressions::Scalar;
use deltalake::arrow::array::{RecordBatch, Scalar as ArrowScalar};
use deltalake::arrow::compute::kernels::cmp::not_distinct;
use deltalake::arrow::datatypes::SchemaRef;
use deltalake::datafile::writer::{DeltaWriter, WriterConfig};
use deltalake::datafusion::execution::SendableRecordBatchStream;
use deltalake::kernel::scalars::ScalarExt as _;
use deltalake::kernel::{Action, Add, EagerSnapshot};
use deltalake::logstore::{LogStore, LogStoreRef};
use deltalake::table::config::TablePropertiesExt as _;
use deltalake::{DeltaTable, DeltaTableError};
use futures::StreamExt;
use indexmap::IndexMap;

use crate::error::DeltaError;
use crate::features::protocol::TableProtocol;
use crate::log::commit::{write_commit, CommitRules, Landed, LogCommit};
use crate::rewrite::column_mapping::{is_mapped, PhysicalNames};
use crate::rewrite::content::{Hashed, LogValues, Strictness, Tally};
use crate::rewrite::dictionary::Sample;
use crate::rewrite::plan::RewriteSpec;
use crate::rewrite::row_ids::row_tracking;
use crate::rewrite::shape::{FileShape, ROW_GROUP_BYTES};

/// What one decoding rewrite is reckoned to hold, for the rewrite budget: the row group being
/// encoded, the decoded batches feeding it and the upload.
pub(crate) const MEMORY_BYTES: u64 = 2 * ROW_GROUP_BYTES;

/// Length of the random directory files of column-mapped tables are written under (Delta's
/// `delta.randomPrefixLength` default).
const RANDOM_PREFIX_LENGTH: usize = 2;

/// Writes the live rows of `paths` (files of one partition of `snapshot`, percent-decoded as
/// `LogicalFileView::path`, whose partition values the log spells as `values`) into new files
/// shaped as `shape` says. Returns their `add` actions, `dataChange: false`, once the content
/// guard passed them ([`crate::rewrite::content`]).
pub(crate) async fn rewrite_files(
    uri: &str,
    log_store: &LogStoreRef,
    snapshot: &EagerSnapshot,
    paths: Vec<String>,
    values: LogValues,
    shape: FileShape,
) -> Result<Vec<Add>, DeltaError> {
    let (schema, mut batches) = scan_files(uri, log_store, snapshot, paths).await?;
    let mut writer = PartitionFiles::new(uri, log_store, snapshot, schema, values, shape)?;
    let mut read = writer.tally();
    while let Some(batch) = batches.next().await {
        let batch =
            batch.map_err(|e| DeltaError::delta(uri, "reading the files to rewrite", e.into()))?;
        writer.write_read(batch, &mut read).await?;
    }
    writer.close(read).await
}

/// A tally that could not be taken: the rewrite stops before it commits.
pub(crate) fn tally_failed(uri: &str, reason: String) -> DeltaError {
    DeltaError::delta(
        uri,
        "tallying the rows of a rewrite",
        DeltaTableError::Generic(reason),
    )
}

/// The live rows of `paths` (files of `snapshot`, percent-decoded as `LogicalFileView::path`),
/// read through the table's schema (partition columns included), and their schema. On a table
/// with row tracking enabled, each row also carries its row id and row commit version in the
/// table's materialized columns ([`RowTracking`]), so the files written from them keep both.
pub(crate) async fn scan_files(
    uri: &str,
    log_store: &LogStoreRef,
    snapshot: &EagerSnapshot,
    paths: Vec<String>,
) -> Result<(SchemaRef, SendableRecordBatchStream), DeltaError> {
    match row_tracking(uri, snapshot)? {
        Some(tracking) => tracking.scan(uri, log_store, snapshot, paths).await,
        None => crate::rewrite::scan::scan(uri, log_store, snapshot, paths, false).await,
    }
}

/// New files of one partition: deltalake's Parquet writer, in the table's `layout.compression`
/// (zstd level 4 by default, as deltalake's OPTIMIZE writes), in row groups of at most
/// [`ROW_GROUP_BYTES`], with the table's statistics columns.
/// On a column-mapped table the rows are written under their physical names and field ids
/// ([`PhysicalNames`]), statistics and partition values keyed by physical names, in files under
/// a random prefix instead of Hive-style directories (as Delta writes such tables). Row
/// tracking's materialized columns are written under their own names.
///
/// The writer is handed the partition's values once, from the first row, instead of splitting
/// every batch by them as `DeltaWriter::write` does (a hash-map entry per row and a copy of every
/// column: 18% of a Z-order's CPU in `memcmp` and 10% in copies, measured). Each batch is checked
/// to hold that partition only, so rows of another partition fail the rewrite instead of moving.
///
/// The first rows are held back ([`Sample`]) until they show which columns hardly repeat a
/// value; those are written without a dictionary ([`crate::rewrite::dictionary`]), the rest
/// with the writer's default.
///
/// Every added file carries the partition values of the files rewritten as the log spells
/// them, never deltalake's printing of the parsed values. What is handed to the encoder is
/// tallied ([`Tally`]) and, on closing, checked by the content guard against what the caller
/// read ([`crate::rewrite::content::check`]).
pub(crate) struct PartitionFiles {
    uri: String,
    /// Always present but while its properties are swapped once the sample chose them.
    writer: Option<DeltaWriter>,
    shape: FileShape,
    /// The first rows, until the encoding is chosen from them.
    sample: Option<Sample>,
    /// What the read tally already hashed of each batch in `sample`, in its order.
    sample_hashed: Vec<Hashed>,
    /// The partition columns, as the rows name them (logical names).
    partition_columns: Vec<String>,
    /// The partition's values keyed as the log keys them, from the first row written.
    values: Option<IndexMap<String, Scalar>>,
    /// Physical names, on a column-mapped table.
    mapping: Option<PhysicalNames>,
    /// The schema of the rows (logical names), for tallies of the same columns.
    schema: SchemaRef,
    /// The inputs' partition values as the log spells them: what every added file carries.
    log_values: LogValues,
    /// What was handed to the encoder.
    written: Tally,
    /// Where the table materializes its partition columns into its files
    /// (`materializePartitionColumns`, IcebergCompat): the order of the columns in a file,
    /// partition columns last, as IcebergCompatV1 places them.
    materialized: Option<Vec<usize>>,
}

impl PartitionFiles {
    /// A writer of rows of `schema` (partition columns included, logical names) into new files
    /// of `snapshot`'s table shaped as `shape` says.
    pub(crate) fn new(
        uri: &str,
        log_store: &LogStoreRef,
        snapshot: &EagerSnapshot,
        schema: SchemaRef,
        log_values: LogValues,
        shape: FileShape,
    ) -> Result<Self, DeltaError> {
        let properties = snapshot.table_properties();
        let properties_of_files = shape.writer_properties();
        let partition_columns = snapshot.metadata().partition_columns().to_vec();
        let unmapped = row_tracking(uri, snapshot)?
            .map(|tracking| tracking.columns().to_vec())
            .unwrap_or_default();
        let mapping = if is_mapped(snapshot.metadata().configuration()) {
            Some(
                PhysicalNames::new(&schema, snapshot.schema().as_ref(), &unmapped).map_err(
                    |reason| DeltaError::MalformedLog {
                        table: uri.to_owned(),
                        reason: format!("the table maps its columns, but {reason}"),
                    },
                )?,
            )
        } else {
            None
        };
        let physical =
            |name: &str| -> String { mapping.as_ref().map_or(name, |m| m.name(name)).to_owned() };
        let written = Tally::new(&schema, &partition_columns);
        let file_schema = mapping
            .as_ref()
            .map_or_else(|| schema.clone(), PhysicalNames::schema);
        let materialized = (!partition_columns.is_empty()
            && TableProtocol::of_snapshot(uri, snapshot)?.materializes_partition_columns())
        .then(|| partition_columns_last(&file_schema, &partition_columns, &physical));
        let (file_schema, stripped) = match &materialized {
            Some(order) => (
                std::sync::Arc::new(file_schema.project(order).map_err(|e| {
                    DeltaError::delta(uri, "writing rewritten files", DeltaTableError::from(e))
                })?),
                Vec::new(),
            ),
            None => (
                file_schema,
                partition_columns.iter().map(|c| physical(c)).collect(),
            ),
        };
        let config = WriterConfig::new(
            file_schema,
            stripped,
            Some(properties_of_files),
            Some(shape.target_size),
            None,
            properties.num_indexed_cols(),
            properties
                .data_skipping_stats_columns
                .as_ref()
                .map(|columns| columns.iter().map(|c| physical(&c.to_string())).collect()),
        )
        .with_random_prefix_length(mapping.is_some().then_some(RANDOM_PREFIX_LENGTH));
        Ok(PartitionFiles {
            uri: uri.to_owned(),
            writer: Some(DeltaWriter::new(log_store.object_store(None), config)),
            shape,
            sample: Some(Sample::default()),
            sample_hashed: Vec::new(),
            partition_columns,
            values: None,
            mapping,
            schema,
            log_values,
            written,
            materialized,
        })
    }

    /// An empty tally of the columns this writer tallies, for what the caller reads.
    pub(crate) fn tally(&self) -> Tally {
        Tally::of_reads(&self.schema, &self.partition_columns)
    }

    /// Writes `batch`'s rows, which must all belong to the partition of the first row written.
    pub(crate) async fn write(&mut self, batch: RecordBatch) -> Result<(), DeltaError> {
        self.write_hashed(batch, Hashed::default()).await
    }

    /// Writes rows as they were read, tallying them into `read` (from [`Self::tally`]) first.
    /// The columns that reach the encoder as the very arrays read are hashed once, for both
    /// tallies; the rest (renamed nested columns, anything edited on the way) twice.
    pub(crate) async fn write_read(
        &mut self,
        batch: RecordBatch,
        read: &mut Tally,
    ) -> Result<(), DeltaError> {
        let hashed = read
            .add_known(&batch, &Hashed::default())
            .map_err(|e| tally_failed(&self.uri, e))?;
        self.write_hashed(batch, hashed).await
    }

    async fn write_hashed(&mut self, batch: RecordBatch, hashed: Hashed) -> Result<(), DeltaError> {
        let uri = self.uri.as_str();
        let written = |e| DeltaError::delta(uri, "writing rewritten files", e);
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let read = batch.clone();
        #[cfg(test)]
        let batch = crate::rewrite::content::fault::batch(batch);
        if !self.partition_columns.is_empty() {
            ensure_one_partition(&batch, &self.partition_columns).map_err(written)?;
        }
        let values = match &mut self.values {
            Some(values) => values.clone(),
            slot @ None => {
                let mut values =
                    first_row_values(&batch, &self.partition_columns).map_err(written)?;
                if let Some(mapping) = &self.mapping {
                    values = values
                        .into_iter()
                        .map(|(name, value)| (mapping.name(&name).to_owned(), value))
                        .collect();
                }
                slot.insert(values).clone()
            }
        };
        let batch = match &self.mapping {
            Some(mapping) => mapping
                .batch(&batch)
                .map_err(|e| written(DeltaTableError::from(e)))?,
            None => batch,
        };
        let hashed = hashed.unchanged(&self.written, &read, &batch);
        drop(read);
        match &mut self.sample {
            Some(sample) => {
                self.sample_hashed.push(hashed);
                if sample.push(batch) {
                    self.end_sample(&values).await?;
                }
                Ok(())
            }
            None => self.encode(batch, &values, &hashed).await,
        }
    }

    /// Chooses the encoding from the sample and writes the rows it held.
    async fn end_sample(&mut self, values: &IndexMap<String, Scalar>) -> Result<(), DeltaError> {
        let Some(sample) = self.sample.take() else {
            return Ok(());
        };
        let partition_columns: Vec<String> = self
            .partition_columns
            .iter()
            .map(|c| {
                self.mapping
                    .as_ref()
                    .map_or(c.as_str(), |m| m.name(c))
                    .to_owned()
            })
            .collect();
        let plain = sample.plain_columns(&partition_columns);
        if !plain.is_empty() {
            tracing::debug!(table = self.uri, columns = ?plain, "written without a dictionary: their values hardly repeat");
            let properties = self.shape.writer_properties_plain(&plain);
            self.writer = self
                .writer
                .take()
                .map(|writer| writer.with_writer_properties(properties));
        }
        let hashed = std::mem::take(&mut self.sample_hashed);
        for (batch, hashed) in sample.into_batches().into_iter().zip(hashed) {
            self.encode(batch, values, &hashed).await?;
        }
        Ok(())
    }

    /// Hands `batch` (physical names, one partition's rows) to the Parquet writer, tallying
    /// it but for the columns `hashed` already fingerprinted.
    async fn encode(
        &mut self,
        batch: RecordBatch,
        values: &IndexMap<String, Scalar>,
        hashed: &Hashed,
    ) -> Result<(), DeltaError> {
        let uri = self.uri.as_str();
        let written = |e| DeltaError::delta(uri, "writing rewritten files", e);
        let Some(writer) = self.writer.as_mut() else {
            return Err(written(DeltaTableError::Generic(
                "the rewrite's writer is gone (a tablekeeper bug: please report it)".into(),
            )));
        };
        self.written
            .add_known(&batch, hashed)
            .map_err(|e| tally_failed(uri, e))?;
        let batch = match &self.materialized {
            Some(order) => batch
                .project(order)
                .map_err(|e| written(DeltaTableError::from(e)))?,
            None => batch,
        };
        if self.partition_columns.is_empty() {
            return writer.write(&batch).await.map_err(written);
        }
        writer.write_partition(batch, values).await.map_err(written)
    }

    /// Closes the files and returns their `add` actions, `dataChange: false`, carrying the
    /// inputs' partition values as the log spells them, once the content guard found they hold
    /// the rows `read` (the live rows of the inputs, as the caller read them).
    pub(crate) async fn close(mut self, read: Tally) -> Result<Vec<Add>, DeltaError> {
        if let Some(values) = self.values.clone() {
            self.end_sample(&values).await?;
        }
        let Some(writer) = self.writer.take() else {
            return Ok(Vec::new());
        };
        let mut adds = writer
            .close()
            .await
            .map_err(|e| DeltaError::delta(&self.uri, "writing rewritten files", e))?;
        for add in &mut adds {
            add.data_change = false;
            add.partition_values.clone_from(&self.log_values);
        }
        let mapping = self.mapping;
        let stats_key =
            |name: &str| -> String { mapping.as_ref().map_or(name, |m| m.name(name)).to_owned() };
        #[cfg(test)]
        crate::rewrite::content::fault::adds(
            &mut adds,
            &self
                .written
                .first_column()
                .map(&stats_key)
                .unwrap_or_default(),
        );
        crate::rewrite::content::check(
            &self.uri,
            &self.log_values,
            Some(read),
            self.written,
            &adds,
            Strictness::Exact,
            &stats_key,
        )?;
        Ok(adds)
    }
}

/// The column order of a file that holds its partition columns too: the data columns as the
/// schema orders them, then the partition columns (physical names under `physical`).
fn partition_columns_last(
    schema: &SchemaRef,
    partition_columns: &[String],
    physical: &dyn Fn(&str) -> String,
) -> Vec<usize> {
    let partitions: Vec<String> = partition_columns.iter().map(|c| physical(c)).collect();
    let (data, last): (Vec<usize>, Vec<usize>) =
        (0..schema.fields().len()).partition(|&i| !partitions.contains(schema.field(i).name()));
    let mut last = last;
    last.sort_by_key(|&i| partitions.iter().position(|p| p == schema.field(i).name()));
    data.into_iter().chain(last).collect()
}

/// The partition values of `batch`'s first row, as deltalake's writer reads them.
fn first_row_values(
    batch: &RecordBatch,
    partition_columns: &[String],
) -> Result<IndexMap<String, Scalar>, DeltaTableError> {
    partition_columns
        .iter()
        .map(|name| {
            let column = batch.column_by_name(name).ok_or_else(|| {
                DeltaTableError::Generic(format!("partition column {name} missing from the rows"))
            })?;
            let value = Scalar::from_array(column.as_ref(), 0).ok_or_else(|| {
                DeltaTableError::Generic(format!("partition column {name}: unreadable value"))
            })?;
            Ok((name.clone(), value))
        })
        .collect()
}

/// Fails unless every row of `batch` has its first row's partition values.
fn ensure_one_partition(
    batch: &RecordBatch,
    partition_columns: &[String],
) -> Result<(), DeltaTableError> {
    for name in partition_columns {
        let Some(column) = batch.column_by_name(name) else {
            return Err(DeltaTableError::Generic(format!(
                "partition column {name} missing from the rows"
            )));
        };
        let first = ArrowScalar::new(column.slice(0, 1));
        let same = not_distinct(column, &first)?;
        if same.true_count() != batch.num_rows() {
            return Err(DeltaTableError::Generic(format!(
                "rows of several partitions (column {name}) reached one partition's writer; \
                 nothing was committed (a tablekeeper bug: please report it)"
            )));
        }
    }
    Ok(())
}

/// Commits `actions` (a rewrite's removes and adds), planned on the table at version `base`,
/// as one OPTIMIZE commit carrying the run's marker and meeting the table's `rules`
/// ([`crate::log::commit`]): it lands after commits made since `base` unless one of them removed
/// a file this commit removes or changed the table's metadata, which fails as a conflict.
pub(crate) async fn commit_rewrite(
    uri: &str,
    log_store: &dyn LogStore,
    base: u64,
    rules: &CommitRules,
    actions: Vec<Action>,
    spec: &RewriteSpec,
) -> Result<Landed, DeltaError> {
    let mut removes = Vec::new();
    let mut adds = Vec::new();
    for action in actions {
        match action {
            Action::Remove(remove) => removes.push(remove),
            Action::Add(add) => adds.push(add),
            other => {
                return Err(DeltaError::Internal {
                    table: uri.to_owned(),
                    reason: format!(
                        "a rewrite may commit only removes and adds, not {other:?} \
                         (a tablekeeper bug: please report it); nothing was committed"
                    ),
                })
            }
        }
    }
    let parameters = serde_json::json!({
        "predicate": "[]",
        "targetSize": spec.output.target_size.get().to_string(),
    });
    let metrics = serde_json::json!({
        "numRemovedFiles": removes.len().to_string(),
        "numAddedFiles": adds.len().to_string(),
        "numRemovedBytes": removes.iter().filter_map(|r| r.size).sum::<i64>().to_string(),
        "numAddedBytes": adds.iter().map(|a| a.size).sum::<i64>().to_string(),
    });
    let object = |v: serde_json::Value| match v {
        serde_json::Value::Object(map) => map,
        _ => serde_json::Map::new(),
    };
    let commit = LogCommit {
        operation: "OPTIMIZE",
        parameters: object(parameters),
        metrics: object(metrics),
        metadata: spec.marker.clone(),
        removes,
        adds,
        restores: Vec::new(),
    };
    write_commit(log_store, uri, spec.operation, base, &commit, rules).await
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
    let log_store = table.log_store();
    let rules = CommitRules::of(uri, log_store.as_ref(), snapshot).await?;
    let base = snapshot.version();
    let landed = commit_rewrite(uri, log_store.as_ref(), base, &rules, actions, spec).await?;
    let mut after = table.clone();
    after
        .update_state()
        .await
        .map_err(|e| DeltaError::delta(uri, "reloading the table after the rewrite", e))?;
    tracing::info!(table = uri, version = landed.version, "{what} committed");
    Ok(after)
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::sync::Arc;

    use deltalake::arrow::array::{Int64Array, StringArray};
    use deltalake::arrow::datatypes::{DataType, Field, Schema};

    fn rows(days: Vec<Option<&str>>) -> RecordBatch {
        let ids: Vec<i64> = (0..days.len() as i64).collect();
        RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("id", DataType::Int64, false),
                Field::new("day", DataType::Utf8, true),
            ])),
            vec![
                Arc::new(Int64Array::from(ids)),
                Arc::new(StringArray::from(days)),
            ],
        )
        .unwrap()
    }

    #[test]
    fn rows_of_one_partition_pass_with_its_values() {
        let columns = ["day".to_owned()];
        let batch = rows(vec![Some("2026-01-01"); 3]);
        ensure_one_partition(&batch, &columns).unwrap();
        let values = first_row_values(&batch, &columns).unwrap();
        assert_eq!(values["day"], Scalar::String("2026-01-01".into()));
        // the null partition is one partition too
        ensure_one_partition(&rows(vec![None, None]), &columns).unwrap();
    }

    #[test]
    fn rows_of_two_partitions_are_refused() {
        let columns = ["day".to_owned()];
        for days in [
            vec![Some("2026-01-01"), Some("2026-01-02")],
            vec![Some("2026-01-01"), None],
            vec![None, Some("2026-01-01")],
        ] {
            let err = ensure_one_partition(&rows(days.clone()), &columns).unwrap_err();
            assert!(
                err.to_string().contains("several partitions"),
                "{days:?}: {err}"
            );
        }
        let err = ensure_one_partition(&rows(vec![Some("a")]), &["month".to_owned()]).unwrap_err();
        assert!(err.to_string().contains("missing"), "{err}");
    }
}
