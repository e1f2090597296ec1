//! The compaction copy path: one Parquet file written from the row groups of several others by
//! copying their encoded column chunks, never decoding a value.
//!
//! Owns reading the inputs' footers, deciding whether a bin may be copied ([`Footers::copyable`]),
//! and writing the output through the parquet crate's `append_column`, which splices an encoded
//! column chunk into a row group and rewrites its page offsets. The output keeps the inputs' row
//! groups as they are, with their column statistics, page indexes (when the inputs carry them)
//! and `created_by` (readers decide from it which of a writer's statistics to trust, and the
//! bytes are still that writer's). Bloom filters are not carried over.
//!
//! A bin is copied only when its files are the same kind of file: no deletion vectors (their
//! rows must be dropped, so they are decoded), one Parquet schema and one `created_by`, and
//! every row group at least [`MIN_COPY_ROW_GROUP_BYTES`]. Smaller row groups are decoded and
//! merged instead (`crate::rewrite::decode`), so a reader never gets a file of thousands of tiny row
//! groups, the known hazard of concatenating Parquet files. The Delta statistics of the output
//! are merged from the inputs' (`crate::rewrite::merged_stats`), and its row count comes from the footers.
//!
//! Memory is bounded by construction: input bytes are fetched in spans of at most
//! [`FETCH_SPAN_BYTES`] (a larger column chunk alone), each spliced at once, and the output
//! leaves through a multipart upload of a few parts in flight.

use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use delta_kernel::object_store::{ObjectStoreExt as _, WriteMultipart};
use deltalake::parquet::arrow::arrow_reader::ArrowReaderOptions;
use deltalake::parquet::arrow::async_reader::{AsyncFileReader, MetadataFetch};
use deltalake::parquet::column::writer::ColumnCloseResult;
use deltalake::parquet::errors::ParquetError;
use deltalake::parquet::file::metadata::{PageIndexPolicy, ParquetMetaData, ParquetMetaDataReader};
use deltalake::parquet::file::properties::WriterProperties;
use deltalake::parquet::file::reader::{ChunkReader, Length};
use deltalake::parquet::file::writer::SerializedFileWriter;
use deltalake::{ObjectStore, ObjectStoreError, Path};
use futures::future::BoxFuture;
use futures::FutureExt as _;

/// Row groups at least this large (compressed) are copied; a bin holding a smaller one is
/// decoded and its rows merged into larger row groups. 1 MiB keeps the per-row-group overhead
/// of a reader (one ranged read per column chunk, one statistics entry) small against the data,
/// while the row groups of files written by Spark, Databricks or delta-rs with default settings
/// (128 MiB blocks, or the whole file when it is smaller) qualify whenever the file is over it.
pub const MIN_COPY_ROW_GROUP_BYTES: u64 = 1024 * 1024;

/// Input bytes fetched by one request: adjacent column chunks are read together up to this size.
pub const FETCH_SPAN_BYTES: u64 = 8 * 1024 * 1024;

/// Multipart upload parts in flight per output file (object_store's parts are 5 MiB).
const PARTS_IN_FLIGHT: usize = 2;

/// One input file of a bin: where it is and what its footer says.
#[derive(Debug, Clone)]
pub(crate) struct Input {
    pub path: Path,
    pub metadata: Arc<ParquetMetaData>,
}

/// Reads the footer (and page indexes, when present) of the file at `path`.
pub(crate) async fn read_footer(
    store: Arc<dyn ObjectStore>,
    path: Path,
    size: u64,
) -> Result<Input, ParquetError> {
    let metadata = ParquetMetaDataReader::new()
        .with_page_index_policy(PageIndexPolicy::Optional)
        .load_and_finish(
            Ranges {
                store,
                path: path.clone(),
                size,
            },
            size,
        )
        .await?;
    Ok(Input {
        path,
        metadata: Arc::new(metadata),
    })
}

/// Byte ranges of one file of `size` bytes, read through the table's store: what the footer
/// reader asks for, and what the widened scan ([`crate::rewrite::widened`]) decodes.
pub(crate) struct Ranges {
    pub store: Arc<dyn ObjectStore>,
    pub path: Path,
    pub size: u64,
}

impl AsyncFileReader for Ranges {
    fn get_bytes(
        &mut self,
        range: std::ops::Range<u64>,
    ) -> BoxFuture<'_, deltalake::parquet::errors::Result<Bytes>> {
        self.fetch(range)
    }

    fn get_metadata<'a>(
        &'a mut self,
        _options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, deltalake::parquet::errors::Result<Arc<ParquetMetaData>>> {
        async move {
            let ranges = Ranges {
                store: Arc::clone(&self.store),
                path: self.path.clone(),
                size: self.size,
            };
            let metadata = ParquetMetaDataReader::new()
                .load_and_finish(ranges, self.size)
                .await?;
            Ok(Arc::new(metadata))
        }
        .boxed()
    }
}

impl MetadataFetch for Ranges {
    fn fetch(
        &mut self,
        range: std::ops::Range<u64>,
    ) -> BoxFuture<'_, deltalake::parquet::errors::Result<Bytes>> {
        async move {
            self.store
                .get_range(&self.path, range)
                .await
                .map_err(|e| ParquetError::External(Box::new(e)))
        }
        .boxed()
    }
}

/// Rows in a file, from its footer.
pub(crate) fn rows(input: &Input) -> u64 {
    u64::try_from(input.metadata.file_metadata().num_rows()).unwrap_or(0)
}

/// Why the inputs of a bin cannot be copied, or `None` when they can (footers only: the
/// caller checks deletion vectors and statistics).
pub(crate) fn not_copyable(inputs: &[Input]) -> Option<String> {
    let first = inputs.first()?;
    let schema = first.metadata.file_metadata().schema_descr().root_schema();
    let created_by = first.metadata.file_metadata().created_by();
    for input in inputs {
        let file = input.metadata.file_metadata();
        if file.schema_descr().root_schema() != schema {
            return Some(format!(
                "{} has another Parquet schema than {}",
                input.path, first.path
            ));
        }
        if file.created_by() != created_by {
            return Some(format!(
                "{} was written by {:?}, {} by {:?}",
                input.path,
                file.created_by(),
                first.path,
                created_by
            ));
        }
        if input.metadata.row_groups().is_empty() {
            return Some(format!("{} holds no row group", input.path));
        }
        if let Some(small) =
            input.metadata.row_groups().iter().find(|rg| {
                u64::try_from(rg.compressed_size()).unwrap_or(0) < MIN_COPY_ROW_GROUP_BYTES
            })
        {
            return Some(format!(
                "{} has a row group of {} bytes, under the {MIN_COPY_ROW_GROUP_BYTES} copied",
                input.path,
                small.compressed_size()
            ));
        }
    }
    None
}

/// The output file's bytes between the parquet writer and the upload: the writer appends, the
/// upload drains after every spliced chunk.
#[derive(Debug, Clone, Default)]
struct Pending(Arc<Mutex<Vec<u8>>>);

impl Pending {
    fn take(&self) -> Vec<u8> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

impl std::io::Write for Pending {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A fetched span of an input file, addressed by offsets in the whole file, as the parquet
/// writer reads a column chunk.
struct Span {
    start: u64,
    bytes: Bytes,
}

impl Length for Span {
    fn len(&self) -> u64 {
        self.start + self.bytes.len() as u64
    }
}

impl ChunkReader for Span {
    type T = bytes::buf::Reader<Bytes>;

    fn get_read(&self, start: u64) -> deltalake::parquet::errors::Result<Self::T> {
        use bytes::Buf as _;
        let offset = start
            .checked_sub(self.start)
            .and_then(|o| usize::try_from(o).ok())
            .filter(|o| *o <= self.bytes.len())
            .ok_or_else(|| {
                ParquetError::General(format!("offset {start} is outside the fetched span"))
            })?;
        Ok(self.bytes.slice(offset..).reader())
    }

    fn get_bytes(&self, start: u64, length: usize) -> deltalake::parquet::errors::Result<Bytes> {
        let offset = usize::try_from(start.saturating_sub(self.start)).unwrap_or(usize::MAX);
        if start < self.start || offset.saturating_add(length) > self.bytes.len() {
            return Err(ParquetError::General(format!(
                "bytes {start}..+{length} are outside the fetched span"
            )));
        }
        Ok(self.bytes.slice(offset..offset + length))
    }
}

/// Column chunk byte ranges of one row group, grouped into fetch spans: `(start, end, columns)`.
fn spans(metadata: &ParquetMetaData, row_group: usize) -> Vec<(u64, u64, Vec<usize>)> {
    let mut spans: Vec<(u64, u64, Vec<usize>)> = Vec::new();
    for (index, column) in metadata.row_group(row_group).columns().iter().enumerate() {
        let (start, length) = column.byte_range();
        let end = start + length;
        match spans.last_mut() {
            Some(last) if last.1 == start && end - last.0 <= FETCH_SPAN_BYTES => {
                last.1 = end;
                last.2.push(index);
            }
            _ => spans.push((start, end, vec![index])),
        }
    }
    spans
}

/// Writes `inputs`' row groups, in order, as one Parquet file at `output`. Returns the file's
/// size and its footer.
pub(crate) async fn write(
    store: &Arc<dyn ObjectStore>,
    inputs: &[Input],
    output: &Path,
) -> Result<(u64, ParquetMetaData), deltalake::DeltaTableError> {
    let Some(first) = inputs.first() else {
        return Err(deltalake::DeltaTableError::generic(
            "a copied file needs at least one input",
        ));
    };
    let file_metadata = first.metadata.file_metadata();
    let mut properties = WriterProperties::builder();
    if let Some(created_by) = file_metadata.created_by() {
        properties = properties.set_created_by(created_by.to_owned());
    }
    let same_key_values = inputs.iter().all(|i| {
        i.metadata.file_metadata().key_value_metadata() == file_metadata.key_value_metadata()
    });
    if same_key_values {
        properties = properties.set_key_value_metadata(file_metadata.key_value_metadata().cloned());
    }
    let pending = Pending::default();
    let mut writer = SerializedFileWriter::new(
        pending.clone(),
        file_metadata.schema_descr().root_schema_ptr(),
        Arc::new(properties.build()),
    )?;
    let mut upload = WriteMultipart::new(store.put_multipart(output).await?);
    match splice(store, inputs, &mut writer, &pending, &mut upload).await {
        Ok(size) => {
            let footer = writer.close()?;
            let size = size + send(&mut upload, &pending).await?;
            upload.finish().await?;
            Ok((size, footer))
        }
        Err(err) => {
            // nothing was committed: leave no partial upload behind
            if let Err(abort) = upload.abort().await {
                tracing::warn!(file = %output, error = %abort, "could not abort the upload of a copied file");
            }
            Err(err)
        }
    }
}

/// Splices every row group of `inputs` into `writer`, streaming the bytes to `upload`.
/// Returns the bytes sent.
async fn splice(
    store: &Arc<dyn ObjectStore>,
    inputs: &[Input],
    writer: &mut SerializedFileWriter<Pending>,
    pending: &Pending,
    upload: &mut WriteMultipart,
) -> Result<u64, deltalake::DeltaTableError> {
    let mut size = 0u64;
    for input in inputs {
        let metadata = &input.metadata;
        for row_group in 0..metadata.num_row_groups() {
            let group_metadata = metadata.row_group(row_group);
            let rows = u64::try_from(group_metadata.num_rows()).unwrap_or(0);
            let mut group = writer.next_row_group()?;
            for (start, end, columns) in spans(metadata, row_group) {
                let bytes = store.get_range(&input.path, start..end).await?;
                let span = Span { start, bytes };
                for column in columns {
                    let chunk = group_metadata.column(column);
                    let close = ColumnCloseResult {
                        bytes_written: u64::try_from(chunk.compressed_size()).unwrap_or(0),
                        rows_written: rows,
                        metadata: chunk.clone(),
                        bloom_filter: None,
                        column_index: metadata
                            .column_index()
                            .and_then(|index| index.get(row_group)?.get(column).cloned()),
                        offset_index: metadata
                            .offset_index()
                            .and_then(|index| index.get(row_group)?.get(column).cloned()),
                    };
                    group.append_column(&span, close)?;
                }
                size += send(upload, pending).await?;
            }
            group.close()?;
        }
    }
    Ok(size)
}

/// Hands the writer's pending bytes to the upload, waiting while too many parts are in flight.
async fn send(upload: &mut WriteMultipart, pending: &Pending) -> Result<u64, ObjectStoreError> {
    let bytes = pending.take();
    upload.wait_for_capacity(PARTS_IN_FLIGHT).await?;
    upload.write(&bytes);
    Ok(bytes.len() as u64)
}
