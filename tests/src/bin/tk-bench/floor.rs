//! `tk-bench floor`: what the Parquet library alone needs to rewrite a decoded table, the
//! physical limit beside python deltalake and `tablekeeper maintain` in the codecs section.
//!
//! Reads every Parquet file of each `col=value` partition directory of `--dir` with arrow-rs's
//! reader (batches of 8,192 rows) and writes one file per partition with arrow-rs's
//! `ArrowWriter` under the encoding a rewrite writes (the `--codec`, default `zstd(4)`, and
//! row groups of at most 64 MiB; the columns named by `--plain` without a dictionary, as
//! tablekeeper writes a table's columns of unique values, every other column with one),
//! partitions side by side on every core. No Delta log is read
//! or written, nothing is guarded and no row is checked beyond counting: it is the decode and
//! encode a compaction cannot avoid, measured with the same arrow-rs release tablekeeper
//! links. Output goes to `<dir>/_floor/` (removed first). The table must be append-only, so
//! that every file under a partition directory is active (`scripts/bench-codecs.py` writes
//! such a table); `_delta_log` and `_floor` are skipped.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use deltalake::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use deltalake::parquet::arrow::ArrowWriter;
use deltalake::parquet::basic::Compression;
use deltalake::parquet::file::properties::WriterProperties;
use deltalake::parquet::schema::types::ColumnPath;
use serde_json::json;

use crate::util::{fresh_dir, secs};
use crate::{build_profile, Args};

/// Rows per batch read, as DataFusion's default batch size.
const BATCH_ROWS: usize = 8192;

/// The largest row group written, as a rewrite writes them.
const ROW_GROUP_BYTES: usize = 64 * 1024 * 1024;

/// One partition's input files and the file its rewrite writes.
struct Partition {
    inputs: Vec<PathBuf>,
    output: PathBuf,
}

pub async fn bench_floor(args: &Args) -> Result<serde_json::Value> {
    let dir = args.dir.as_deref().context("floor needs --dir TABLE")?;
    let codec = args.codec.clone().unwrap_or_else(|| "zstd(4)".to_owned());
    let compression = Compression::from_str(&codec).with_context(|| {
        format!("--codec {codec}: use a Parquet codec such as zstd(4), snappy, lz4_raw, gzip(6)")
    })?;
    let output_dir = fresh_dir(&dir.join("_floor"))?;
    let partitions = partitions(dir, &output_dir)?;
    let input_files: usize = partitions.iter().map(|p| p.inputs.len()).sum();
    let threads = std::thread::available_parallelism()
        .map(usize::from)
        .unwrap_or(1)
        .min(partitions.len());
    let properties = args
        .plain
        .iter()
        .fold(
            WriterProperties::builder()
                .set_compression(compression)
                .set_max_row_group_bytes(Some(ROW_GROUP_BYTES)),
            |builder, column| {
                builder.set_column_dictionary_enabled(ColumnPath::from(column.as_str()), false)
            },
        )
        .build();
    eprintln!(
        "floor: {input_files} files in {} partitions, {codec}, {threads} threads",
        partitions.len()
    );

    let started = Instant::now();
    let (rows, output_bytes) = tokio::task::spawn_blocking(move || {
        rewrite_side_by_side(&partitions, &properties, threads)
    })
    .await
    .context("the floor's rewrite thread panicked")??;
    let seconds = secs(started);
    eprintln!("floor: {rows} rows rewritten in {seconds:.3}s");

    Ok(json!({
        "build": build_profile(),
        "codec": codec,
        "plain": args.plain,
        "threads": threads,
        "input_files": input_files,
        "rows": rows,
        "seconds": seconds,
        "output_bytes": output_bytes,
        "output_dir": output_dir,
    }))
}

/// The `col=value` directories directly under `table` and their Parquet files, sorted.
fn partitions(table: &Path, output_dir: &Path) -> Result<Vec<Partition>> {
    let mut partitions = Vec::new();
    for entry in std::fs::read_dir(table).with_context(|| format!("listing {}", table.display()))? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !entry.file_type()?.is_dir() || !name.contains('=') {
            continue;
        }
        let mut inputs = Vec::new();
        for file in std::fs::read_dir(entry.path())? {
            let path = file?.path();
            if path.extension().is_some_and(|e| e == "parquet") {
                inputs.push(path);
            }
        }
        inputs.sort();
        partitions.push(Partition {
            inputs,
            output: output_dir.join(format!("{}.parquet", name.replace('=', "-"))),
        });
    }
    if partitions.is_empty() {
        bail!(
            "{} has no col=value partition directories: floor rewrites a partitioned table",
            table.display()
        );
    }
    partitions.sort_by(|a, b| a.output.cmp(&b.output));
    Ok(partitions)
}

/// Rewrites the partitions on `threads` threads, each taking the next partition not yet
/// taken; returns the rows and the bytes written in all.
fn rewrite_side_by_side(
    partitions: &[Partition],
    properties: &WriterProperties,
    threads: usize,
) -> Result<(u64, u64)> {
    let next = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| -> Result<(u64, u64)> {
                    let mut done = (0, 0);
                    while let Some(partition) = partitions.get(next.fetch_add(1, Ordering::Relaxed))
                    {
                        let (rows, bytes) = rewrite(partition, properties)?;
                        done = (done.0 + rows, done.1 + bytes);
                    }
                    Ok(done)
                })
            })
            .collect();
        workers.into_iter().try_fold((0, 0), |total, worker| {
            let (rows, bytes) = worker
                .join()
                .map_err(|_| anyhow::anyhow!("a floor rewrite thread panicked"))??;
            Ok((total.0 + rows, total.1 + bytes))
        })
    })
}

/// Decodes every input of `partition` and encodes it into one file; returns its rows and bytes.
fn rewrite(partition: &Partition, properties: &WriterProperties) -> Result<(u64, u64)> {
    let mut writer = None;
    let mut rows = 0u64;
    for input in &partition.inputs {
        let file = File::open(input).with_context(|| format!("opening {}", input.display()))?;
        let reader = ParquetRecordBatchReaderBuilder::try_new(file)
            .with_context(|| format!("reading the footer of {}", input.display()))?
            .with_batch_size(BATCH_ROWS)
            .build()?;
        for batch in reader {
            let batch = batch.with_context(|| format!("decoding {}", input.display()))?;
            let writer = match &mut writer {
                Some(writer) => writer,
                None => writer.insert(ArrowWriter::try_new(
                    File::create(&partition.output)?,
                    batch.schema(),
                    Some(properties.clone()),
                )?),
            };
            writer.write(&batch)?;
            rows += batch.num_rows() as u64;
        }
    }
    let Some(writer) = writer else {
        return Ok((0, 0));
    };
    writer.close()?;
    let bytes = std::fs::metadata(&partition.output)?.len();
    Ok((rows, bytes))
}
