//! Which columns a decoding rewrite writes without a dictionary: those whose values hardly
//! repeat in the first rows it writes ([`Sample`], [`plain_columns`]).
//!
//! A Parquet writer dictionary-encodes every column by default and gives up on a column chunk
//! once its dictionary passes the dictionary page limit (1 MiB in arrow-rs, parquet-mr and
//! deltalake alike). For a column of (nearly) unique values, ids, event keys, payloads, that
//! happens in every large row group: the values are hashed into a dictionary that is then
//! written, abandoned and followed by plain pages, which is work and bytes for nothing (11% of
//! a decoded compaction's CPU in the interner, measured; BENCHMARKS.md). Such columns are
//! written plain from the first row; every other column keeps the writer's default.
//!
//! The rule errs towards the default: a column is written plain only when at least
//! [`PLAIN_RATIO`] of the non-null values of a sample of at least [`MIN_SAMPLE_ROWS`] are
//! distinct. With a sample of [`SAMPLE_ROWS`], that takes a column of at least about 300,000
//! distinct values spread through the rows (a dictionary of 2.4 MB of 8-byte values, past
//! the limit), or one unique within the rows written, whose dictionary would only repeat the
//! values. A column sorted or clustered by value (a Z-order) shows few distinct values in its
//! first rows and keeps its dictionary. Nested columns keep the default.

use deltalake::arrow::array::{Array as _, RecordBatch};
use deltalake::arrow::datatypes::DataType;
use deltalake::datafusion::common::hash_utils::{create_hashes, RandomState};

/// Rows the sample takes before the choice is made: enough to tell a column of a few hundred
/// thousand values from a unique one (see the module docs).
pub(crate) const SAMPLE_ROWS: usize = 65_536;

/// Decoded bytes the sample holds at most, so a table of wide rows decides on fewer of them
/// (this stays inside the decoding share of the rewrite budget, `decode::MEMORY_BYTES`).
pub(crate) const SAMPLE_BYTES: usize = 16 * 1024 * 1024;

/// Fewer non-null values than this in the sample decide nothing for a column: its dictionary
/// is at most this many entries, and a choice on so few rows would be a guess.
const MIN_SAMPLE_ROWS: usize = 1_000;

/// Share of distinct values among a column's sampled non-null values from which it is written
/// plain.
const PLAIN_RATIO: f64 = 0.9;

/// The first batches a writer receives, held until they are enough to choose the encoding.
#[derive(Debug, Default)]
pub(crate) struct Sample {
    batches: Vec<RecordBatch>,
    rows: usize,
    bytes: usize,
}

impl Sample {
    /// Adds `batch`; returns whether the sample is now large enough to choose on.
    pub(crate) fn push(&mut self, batch: RecordBatch) -> bool {
        self.rows += batch.num_rows();
        self.bytes += batch.get_array_memory_size();
        self.batches.push(batch);
        self.rows >= SAMPLE_ROWS || self.bytes >= SAMPLE_BYTES
    }

    /// The batches held, in the order they came.
    pub(crate) fn into_batches(self) -> Vec<RecordBatch> {
        self.batches
    }

    /// The columns of the sample to write plain (see the module docs), by name; `except`
    /// (the partition columns, which no file holds) are never named.
    pub(crate) fn plain_columns(&self, except: &[String]) -> Vec<String> {
        plain_columns(&self.batches, except)
    }
}

/// The top-level columns of `batches` (one schema) whose non-null values are at least
/// [`PLAIN_RATIO`] distinct over at least [`MIN_SAMPLE_ROWS`] of them, except `except`.
pub(crate) fn plain_columns(batches: &[RecordBatch], except: &[String]) -> Vec<String> {
    let Some(first) = batches.first() else {
        return Vec::new();
    };
    let schema = first.schema();
    schema
        .fields()
        .iter()
        .enumerate()
        .filter(|(_, field)| {
            !except.contains(field.name()) && dictionary_applies(field.data_type())
        })
        .filter(|(index, _)| mostly_distinct(batches, *index))
        .map(|(_, field)| field.name().clone())
        .collect()
}

/// Whether the writer would dictionary-encode a column of `data_type` at all: flat values
/// other than booleans (which it never dictionary-encodes).
fn dictionary_applies(data_type: &DataType) -> bool {
    !data_type.is_nested() && !matches!(data_type, DataType::Boolean | DataType::Null)
}

/// Whether column `index` of `batches` holds at least [`MIN_SAMPLE_ROWS`] non-null values, at
/// least [`PLAIN_RATIO`] of them distinct. Values are counted by their 64-bit hashes
/// (DataFusion's, for every arrow type): a collision can only make a column look less
/// distinct, which keeps the default. A column it cannot hash keeps the default too.
fn mostly_distinct(batches: &[RecordBatch], index: usize) -> bool {
    let columns: Vec<_> = batches.iter().map(|b| b.column(index)).collect();
    let non_null: usize = columns.iter().map(|c| c.len() - c.null_count()).sum();
    if non_null < MIN_SAMPLE_ROWS {
        return false;
    }
    let state = RandomState::with_seed(0);
    let mut hashes = Vec::with_capacity(non_null);
    let mut buffer = Vec::new();
    for column in columns {
        buffer.clear();
        buffer.resize(column.len(), 0);
        if create_hashes([column.as_ref()], &state, &mut buffer).is_err() {
            return false;
        }
        hashes.extend(
            buffer
                .iter()
                .enumerate()
                .filter(|(row, _)| column.is_valid(*row))
                .map(|(_, hash)| *hash),
        );
    }
    hashes.sort_unstable();
    hashes.dedup();
    hashes.len() as f64 >= PLAIN_RATIO * non_null as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::sync::Arc;

    use deltalake::arrow::array::{ArrayRef, Int64Array, ListArray, StringArray};
    use deltalake::arrow::datatypes::{Field, Int64Type, Schema};

    fn batch(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
        let fields: Vec<Field> = columns
            .iter()
            .map(|(name, array)| Field::new(*name, array.data_type().clone(), true))
            .collect();
        RecordBatch::try_new(
            Arc::new(Schema::new(fields)),
            columns.into_iter().map(|(_, a)| a).collect(),
        )
        .unwrap()
    }

    fn ints(values: impl Iterator<Item = i64>) -> ArrayRef {
        Arc::new(values.collect::<Int64Array>())
    }

    #[test]
    fn unique_columns_are_written_plain_and_repeating_ones_keep_their_dictionary() {
        let rows = 5_000;
        let sample = batch(vec![
            ("id", ints(0..rows)),
            ("user_id", ints((0..rows).map(|i| i * 7919 % 1_000))),
            (
                "day",
                Arc::new(StringArray::from(vec!["2026-01-01"; 5_000])),
            ),
            (
                "payload",
                Arc::new(StringArray::from_iter_values(
                    (0..rows).map(|i| format!("{i}:xxxx")),
                )),
            ),
            // nearly unique: 95% distinct
            (
                "key",
                ints((0..rows).map(|i| if i % 20 == 0 { 0 } else { i })),
            ),
            // half distinct
            ("half", ints((0..rows).map(|i| i / 2))),
        ]);
        assert_eq!(
            plain_columns(&[sample], &["day".to_owned()]),
            ["id", "payload", "key"]
        );
    }

    #[test]
    fn the_sample_counts_across_batches_and_nulls_are_not_values() {
        // unique within each batch, but the second repeats the first: half distinct
        let first = batch(vec![("v", ints(0..2_000))]);
        let second = batch(vec![("v", ints(0..2_000))]);
        assert!(plain_columns(&[first.clone(), second], &[]).is_empty());
        // 1,500 unique values and 3,000 nulls: what there is repeats nothing
        let sparse: ArrayRef = Arc::new(
            (0..4_500)
                .map(|i| (i % 3 == 0).then_some(i))
                .collect::<Int64Array>(),
        );
        assert_eq!(plain_columns(&[batch(vec![("v", sparse)])], &[]), ["v"]);
        // too few values to decide on keep the default
        assert!(plain_columns(&[batch(vec![("v", ints(0..999))])], &[]).is_empty());
        assert!(plain_columns(&[], &[]).is_empty());
        assert_eq!(plain_columns(&[first], &[]), ["v"]);
    }

    #[test]
    fn nested_columns_keep_the_default() {
        let lists: ArrayRef = Arc::new(ListArray::from_iter_primitive::<Int64Type, _, _>(
            (0..2_000).map(|i| Some(vec![Some(i)])),
        ));
        assert!(plain_columns(&[batch(vec![("l", lists)])], &[]).is_empty());
    }

    #[test]
    fn the_sample_is_full_at_its_rows_or_its_bytes() {
        let mut sample = Sample::default();
        assert!(!sample.push(batch(vec![("v", ints(0..1_000))])));
        assert!(sample.push(batch(vec![(
            "v",
            ints(0..i64::try_from(SAMPLE_ROWS).unwrap())
        )])));
        let mut wide = Sample::default();
        let long = "x".repeat(SAMPLE_BYTES);
        assert!(wide.push(batch(vec![(
            "v",
            Arc::new(StringArray::from(vec![long.as_str()]))
        )])));
        assert_eq!(wide.into_batches().len(), 1);
    }
}
