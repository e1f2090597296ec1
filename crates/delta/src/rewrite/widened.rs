//! The rewrite scan of a table with type widening (`typeWidening`, `typeWidening-preview`),
//! which deltalake's scan refuses.
//!
//! A widened column's older files hold its older type (a `byte` column widened to `long`, a
//! `date` to `timestamp_ntz`, `decimal(10,2)` to `decimal(20,5)`): the protocol asks readers to
//! convert such values to the current type. This scan reads each file's Parquet as it is and
//! casts every column to the table's current type by arrow's cast, which converts every widening
//! the protocol allows without loss; the files tablekeeper writes from it hold the widened types.
//! Partition values come from the log, as every scan takes them.
//!
//! Owns only what deltalake's scan would otherwise do, for such tables, and refuses what it does
//! not do: files with deletion vectors (their deleted rows would come back), and on a
//! column-mapped table, struct columns (their nested fields are named physically in the files
//! and logically in the schema). Row tracking's materialized ids are refused earlier
//! ([`crate::features::maintainable`]). Files are read one after another, each in its order.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use delta_kernel::engine::arrow_conversion::TryIntoArrow as _;
use delta_kernel::schema::MetadataValue;
use deltalake::arrow::array::{new_null_array, ArrayRef, RecordBatch, StringArray};
use deltalake::arrow::compute::cast;
use deltalake::arrow::datatypes::{Schema, SchemaRef};
use deltalake::arrow::error::ArrowError;
use deltalake::datafusion::error::DataFusionError;
use deltalake::datafusion::execution::SendableRecordBatchStream;
use deltalake::datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use deltalake::kernel::EagerSnapshot;
use deltalake::logstore::LogStoreRef;
use deltalake::parquet::arrow::async_reader::ParquetRecordBatchStreamBuilder;
use deltalake::Path;
use futures::{StreamExt as _, TryStreamExt as _};

use crate::error::DeltaError;
use crate::features::protocol::TableProtocol;
use crate::rewrite::column_mapping::is_mapped;
use crate::rewrite::splice::Ranges;
use crate::snapshot::{snapshot_files, ActiveFile};

const PHYSICAL_NAME_KEY: &str = "delta.columnMapping.physicalName";

/// Whether `snapshot`'s table needs this scan: it supports type widening.
pub(crate) fn needs_widened_scan(uri: &str, snapshot: &EagerSnapshot) -> Result<bool, DeltaError> {
    let protocol = TableProtocol::of_snapshot(uri, snapshot)?;
    Ok(["typeWidening", "typeWidening-preview"]
        .iter()
        .any(|f| protocol.supports_reader_feature(f)))
}

/// One column of the rows: where it comes from.
#[derive(Debug, Clone)]
enum Source {
    /// The file's column of this name (physical, on a column-mapped table), cast to the type.
    File(String),
    /// The file's partition value of this (logical) column, from the log.
    Partition(String),
}

/// The live rows of `paths` (files of `snapshot`, percent-decoded), every column in the table's
/// current type, and their schema (the table's logical schema, partition columns included).
pub(crate) async fn scan(
    uri: &str,
    log_store: &LogStoreRef,
    snapshot: &EagerSnapshot,
    paths: Vec<String>,
) -> Result<(SchemaRef, SendableRecordBatchStream), DeltaError> {
    let unreadable = |reason: String| DeltaError::MissingFacts {
        table: uri.to_owned(),
        reason: format!("type widening: {reason}"),
    };
    let kernel_schema = snapshot.schema();
    let schema: Schema = kernel_schema
        .as_ref()
        .try_into_arrow()
        .map_err(|e| unreadable(format!("the table's schema has no arrow form: {e}")))?;
    let schema = Arc::new(schema);
    let partitions = snapshot.metadata().partition_columns().to_vec();
    let mapped = is_mapped(snapshot.metadata().configuration());
    let mut sources = Vec::with_capacity(schema.fields().len());
    for field in kernel_schema.fields() {
        if partitions.contains(field.name()) {
            sources.push(Source::Partition(field.name().clone()));
            continue;
        }
        if !mapped {
            sources.push(Source::File(field.name().clone()));
            continue;
        }
        if matches!(field.data_type(), delta_kernel::schema::DataType::Struct(_)) {
            return Err(unreadable(format!(
                "column `{}` is a struct on a column-mapped table: its fields are named \
                 physically in the files, and this scan converts top-level columns only",
                field.name()
            )));
        }
        match field.metadata().get(PHYSICAL_NAME_KEY) {
            Some(MetadataValue::String(physical)) => sources.push(Source::File(physical.clone())),
            _ => {
                return Err(unreadable(format!(
                    "column `{}` has no `{PHYSICAL_NAME_KEY}`",
                    field.name()
                )))
            }
        }
    }
    let wanted: HashSet<&str> = paths.iter().map(String::as_str).collect();
    let mut files: Vec<ActiveFile> = snapshot_files(snapshot.clone(), uri)
        .await?
        .into_iter()
        .filter(|f| wanted.contains(f.path.as_str()))
        .collect();
    if files.len() != wanted.len() {
        return Err(unreadable(format!(
            "{} of the {} files to rewrite are not active in the snapshot",
            wanted.len() - files.len(),
            wanted.len()
        )));
    }
    if let Some(file) = files.iter().find(|f| f.deletion_vector.is_some()) {
        return Err(unreadable(format!(
            "{} carries a deletion vector, which this scan does not apply",
            file.path
        )));
    }
    // in the order asked for, as deltalake's scan reads them
    let order: HashMap<&str, usize> = paths
        .iter()
        .enumerate()
        .map(|(i, p)| (p.as_str(), i))
        .collect();
    files.sort_by_key(|f| order.get(f.path.as_str()).copied());
    let store = log_store.object_store(None);
    let out_schema = Arc::clone(&schema);
    let owned_uri = uri.to_owned();
    let stream = futures::stream::iter(files)
        .then(move |file| {
            let store = Arc::clone(&store);
            let schema = Arc::clone(&out_schema);
            let sources = sources.clone();
            let uri = owned_uri.clone();
            async move {
                let path = Path::from(file.path.as_str());
                let reader = Ranges {
                    store,
                    path,
                    size: file.size,
                };
                let batches = ParquetRecordBatchStreamBuilder::new(reader)
                    .await?
                    .build()?;
                let converted = batches.map(move |batch| {
                    let batch = batch?;
                    convert(&batch, &schema, &sources, &file).map_err(|e| {
                        DataFusionError::ArrowError(
                            Box::new(ArrowError::CastError(format!("{uri}: {}: {e}", file.path))),
                            None,
                        )
                    })
                });
                Ok::<_, DataFusionError>(converted)
            }
        })
        .try_flatten();
    Ok((
        Arc::clone(&schema),
        Box::pin(RecordBatchStreamAdapter::new(schema, stream)),
    ))
}

/// `batch` (as the file holds it) in the table's `schema`: each column cast to its current
/// type, partition columns from the log, columns the file predates null.
fn convert(
    batch: &RecordBatch,
    schema: &SchemaRef,
    sources: &[Source],
    file: &ActiveFile,
) -> Result<RecordBatch, ArrowError> {
    let rows = batch.num_rows();
    let columns = schema
        .fields()
        .iter()
        .zip(sources)
        .map(|(field, source)| -> Result<ArrayRef, ArrowError> {
            match source {
                Source::File(name) => match batch.column_by_name(name) {
                    Some(column) if column.data_type() == field.data_type() => {
                        Ok(Arc::clone(column))
                    }
                    Some(column) => cast(column, field.data_type()),
                    None => Ok(new_null_array(field.data_type(), rows)),
                },
                Source::Partition(name) => match file.partition_values.get(name) {
                    Some(Some(value)) => cast(
                        &StringArray::from(vec![value.as_str(); rows]),
                        field.data_type(),
                    ),
                    _ => Ok(new_null_array(field.data_type(), rows)),
                },
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    RecordBatch::try_new(Arc::clone(schema), columns)
}

#[cfg(test)]
mod tests {
    use super::*;
    use deltalake::arrow::array::{AsArray as _, Date32Array, Decimal128Array, Int8Array};
    use deltalake::arrow::datatypes::{DataType, Field, Int64Type, TimeUnit};

    /// The widenings of the reference `type-widening` table, converted without loss.
    #[test]
    fn older_types_convert_to_the_widened_ones() {
        let file = ActiveFile {
            path: "f.parquet".into(),
            size: 1,
            partition_values: HashMap::new(),
            num_records: Some(1),
            deletion_vector: None,
        };
        let old = RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("byte_long", DataType::Int8, true),
                Field::new("date_ntz", DataType::Date32, true),
                Field::new("dec", DataType::Decimal128(10, 2), true),
            ])),
            vec![
                Arc::new(Int8Array::from(vec![Some(-7)])),
                Arc::new(Date32Array::from(vec![Some(19_975)])),
                Arc::new(
                    Decimal128Array::from(vec![Some(12_345)])
                        .with_precision_and_scale(10, 2)
                        .unwrap(),
                ),
            ],
        )
        .unwrap();
        let schema: SchemaRef = Arc::new(Schema::new(vec![
            Field::new("byte_long", DataType::Int64, true),
            Field::new(
                "date_ntz",
                DataType::Timestamp(TimeUnit::Microsecond, None),
                true,
            ),
            Field::new("dec", DataType::Decimal128(20, 5), true),
            Field::new("added_later", DataType::Utf8, true),
        ]));
        let sources: Vec<Source> = ["byte_long", "date_ntz", "dec", "added_later"]
            .map(|n| Source::File(n.to_owned()))
            .to_vec();
        let new = convert(&old, &schema, &sources, &file).unwrap();
        assert_eq!(new.column(0).as_primitive::<Int64Type>().value(0), -7);
        assert_eq!(
            new.column(1)
                .as_primitive::<deltalake::arrow::datatypes::TimestampMicrosecondType>()
                .value(0),
            19_975 * 86_400 * 1_000_000
        );
        assert_eq!(
            new.column(2)
                .as_primitive::<deltalake::arrow::datatypes::Decimal128Type>()
                .value(0),
            12_345_000
        );
        assert_eq!(new.column(3).null_count(), 1);
    }
}
