//! Small-file-heavy Delta tables and an independent row reader, for the quickstart demo,
//! the end-to-end tests and the benchmarks.
//!
//! Writing goes through deltalake's ordinary writer, exactly like a streaming job that
//! commits small batches; reading goes through deltalake's DataFusion scan of the active
//! files, which does not share code with the maintenance operations it is used to check.
//! Nothing here is used by maintenance itself.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use deltalake::arrow::array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use deltalake::arrow::datatypes::{DataType, Field, Schema};
use deltalake::arrow::util::display::{ArrayFormatter, FormatOptions};
use deltalake::protocol::SaveMode;
use deltalake::DeltaTable;
use futures::TryStreamExt;

use crate::error::DeltaError;

/// Wraps any error met while writing or reading fixture data.
fn fixture_err(uri: &str, context: &'static str, err: impl std::fmt::Display) -> DeltaError {
    DeltaError::delta(
        uri,
        context,
        deltalake::DeltaTableError::Generic(err.to_string()),
    )
}
use crate::open::{open_table, table_url};

/// Shape of a batch of small files.
#[derive(Debug, Clone)]
pub struct SmallFiles {
    /// Partitions (distinct `day` values); 0 writes an unpartitioned table.
    pub partitions: u32,
    /// Commits to make; each writes one file per partition.
    pub files_per_partition: u32,
    /// Rows in each file.
    pub rows_per_file: u32,
    /// Bytes of filler text per row, to make files bigger without more rows.
    pub payload_bytes: usize,
}

impl Default for SmallFiles {
    fn default() -> Self {
        Self {
            partitions: 2,
            files_per_partition: 10,
            rows_per_file: 100,
            payload_bytes: 16,
        }
    }
}

/// Ids stay unique across calls in one process so duplicated rows are detectable.
static NEXT_ID: AtomicI64 = AtomicI64::new(0);

fn next_ids(n: u32) -> i64 {
    // Seed from the clock once so ids also differ between processes writing one table.
    if NEXT_ID.load(Ordering::Relaxed) == 0 {
        let seed = chrono::Utc::now().timestamp_micros().rem_euclid(1 << 40) << 16;
        let _ = NEXT_ID.compare_exchange(0, seed, Ordering::Relaxed, Ordering::Relaxed);
    }
    NEXT_ID.fetch_add(i64::from(n), Ordering::Relaxed)
}

/// The fixture tables' schema: `id`, `day` (the partition column when partitioned),
/// `user_id`, `amount`, `payload`. Other writers of fixture tables build batches with it.
pub fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("day", DataType::Utf8, false),
        Field::new("user_id", DataType::Int64, false),
        Field::new("amount", DataType::Float64, false),
        Field::new("payload", DataType::Utf8, false),
    ]))
}

fn batch(spec: &SmallFiles) -> Result<RecordBatch, DeltaError> {
    let parts = spec.partitions.max(1);
    let rows = spec.rows_per_file * parts;
    let first = next_ids(rows);
    let ids: Vec<i64> = (0..i64::from(rows)).map(|i| first + i).collect();
    let days: Vec<String> = (0..rows)
        .map(|i| format!("2026-01-{:02}", (i % parts) + 1))
        .collect();
    let users: Vec<i64> = ids
        .iter()
        .map(|id| id.wrapping_mul(7919).rem_euclid(1000))
        .collect();
    let amounts: Vec<f64> = ids.iter().map(|id| (id % 10_000) as f64 / 100.0).collect();
    let payload = "x".repeat(spec.payload_bytes);
    let payloads: Vec<String> = ids.iter().map(|id| format!("{id}:{payload}")).collect();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(ids)),
        Arc::new(StringArray::from(days)),
        Arc::new(Int64Array::from(users)),
        Arc::new(Float64Array::from(amounts)),
        Arc::new(StringArray::from(payloads)),
    ];
    RecordBatch::try_new(schema(), columns)
        .map_err(|e| fixture_err("fixture", "building a fixture batch", e))
}

/// Appends `files_per_partition` commits of small files to the table at `uri`, creating
/// it (partitioned by `day` when `partitions > 0`) if it does not exist. Returns the
/// number of rows written.
pub async fn write_small_files(uri: &str, spec: &SmallFiles) -> Result<u64, DeltaError> {
    if uri.starts_with('/') {
        std::fs::create_dir_all(uri)
            .map_err(|e| fixture_err(uri, "creating the table folder", e))?;
    }
    let url = table_url(uri)?;
    let mut written = 0u64;
    for _ in 0..spec.files_per_partition {
        let table = DeltaTable::try_from_url(url.clone())
            .await
            .map_err(|e| DeltaError::delta(uri, "opening the table to append", e))?;
        let b = batch(spec)?;
        written += b.num_rows() as u64;
        let mut write = table.write(vec![b]).with_save_mode(SaveMode::Append);
        if spec.partitions > 0 {
            write = write.with_partition_columns(["day"]);
        }
        write
            .await
            .map_err(|e| DeltaError::delta(uri, "appending fixture rows", e))?;
    }
    Ok(written)
}

/// Every row of the table (at `version`, or the latest), each rendered as one line, sorted:
/// two reads compare equal exactly when the tables hold the same multiset of rows.
pub async fn read_rows_sorted(uri: &str, version: Option<u64>) -> Result<Vec<String>, DeltaError> {
    let table = match version {
        Some(v) => crate::open::open_table_at(uri, v).await?,
        None => open_table(uri).await?,
    };
    let (_, stream) = table
        .scan_table()
        .await
        .map_err(|e| DeltaError::delta(uri, "scanning the table", e))?;
    let batches: Vec<RecordBatch> = stream
        .try_collect()
        .await
        .map_err(|e| fixture_err(uri, "reading rows", e))?;
    let options = FormatOptions::default();
    let mut rows = Vec::new();
    for b in &batches {
        // Columns by name so a scan that reorders partition columns compares equal.
        let mut names: Vec<&str> = b
            .schema_ref()
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        names.sort_unstable();
        let formatters = names
            .iter()
            .map(|n| {
                let col = b.column_by_name(n).ok_or_else(|| {
                    fixture_err(uri, "reading rows", format!("column {n} vanished"))
                })?;
                ArrayFormatter::try_new(col.as_ref(), &options)
                    .map_err(|e| fixture_err(uri, "formatting rows", e))
            })
            .collect::<Result<Vec<_>, _>>()?;
        for row in 0..b.num_rows() {
            let line: Vec<String> = formatters
                .iter()
                .map(|f| f.value(row).to_string())
                .collect();
            rows.push(line.join("|"));
        }
    }
    rows.sort_unstable();
    Ok(rows)
}

/// Number of active data files in the latest version, from the log.
pub async fn active_files(uri: &str) -> Result<usize, DeltaError> {
    let table = open_table(uri).await?;
    let files: Vec<String> = table
        .get_file_uris()
        .map_err(|e| DeltaError::delta(uri, "listing active files", e))?
        .collect();
    Ok(files.len())
}
