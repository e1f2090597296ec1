//! The content guard: before a rewrite commits, the files it wrote are checked to hold what it
//! read, beside the row guard ([`crate::rewrite::guard`]), which only counts rows after the
//! commit.
//!
//! Three checks per partition a rewrite writes ([`check`]):
//!
//! - **partition values**: every added file carries exactly the `partitionValues` strings of
//!   the files it replaces, as the log spelled them (deltalake prints its own encoding of a
//!   parsed value: a binary `hello` became `\u0068\u0065…`, a timestamp lost its offset);
//! - **values**: per column, an order-independent fingerprint of the live values read (deletion
//!   vectors applied, by the rewrite scan) equals the fingerprint of the values handed to the
//!   Parquet encoder, with the same count of nulls. The fingerprint is the wrapping sum of a
//!   fixed-seed hash of every value ([`create_hashes`], DataFusion's fast hash): a multiset hash, so sorting (Z-order)
//!   and batching do not change it while a changed, lost or duplicated value does;
//! - **statistics**: the added files' `numRecords`, `nullCount`, `minValues` and `maxValues`
//!   describe the rows written: the records and null counts sum to theirs, and the smallest
//!   `minValues` and largest `maxValues` over the files are their extremes (timestamps at the
//!   millisecond Delta keeps, strings longer than 32 bytes as bounds, since writers truncate
//!   them; floats and decimals within a rounding). They are checked over all files of the
//!   partition, not file by file: the writer decides where one file ends.
//!
//! Both tallies are taken from the batches as they pass ([`Tally::add`]), never by reading the
//! written files back: a read-back would decode every file again (about as costly as the scan),
//! while hashing the batches costs a few percent (BENCHMARKS.md). The copy path
//! ([`crate::rewrite::splice`]) decodes nothing: its column chunks are the inputs' bytes, so
//! their values hold by construction (and the footer's row count is checked); what it makes up
//! is the merged statistics, checked here against the written footer's own column statistics
//! ([`Tally::of_footer`]).
//!
//! A refusal is [`DeltaError::ContentChanged`], naming the partition and the column or value
//! that differs. This module only compares; it never writes.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use deltalake::arrow::array::{Array, ArrayRef, AsArray as _, RecordBatch};
use deltalake::arrow::compute::cast;
use deltalake::arrow::datatypes::{DataType, FieldRef, Schema};
use deltalake::datafusion::common::hash_utils::{create_hashes, HashValue, RandomState};
use deltalake::datafusion::common::ScalarValue;
use deltalake::datafusion::functions_aggregate::min_max::{MaxAccumulator, MinAccumulator};
use deltalake::datafusion::logical_expr::Accumulator;
use deltalake::kernel::Add;
use deltalake::parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use deltalake::parquet::file::metadata::ParquetMetaData;
use serde_json::Value;

use crate::error::DeltaError;

/// A file's partition values as the log keys and spells them (physical names on a
/// column-mapped table).
pub(crate) type LogValues = HashMap<String, Option<String>>;

/// The hash every value is fingerprinted with: DataFusion's fast one, fixed-seeded so the
/// read and the written rows hash alike (a fingerprint never leaves the process).
const STATE: RandomState = RandomState::with_seed(0x7ab1_e4ee_9e4d_a7a5);

/// Strings up to this many bytes are kept whole in statistics (Delta's
/// `delta.dataSkippingStringPrefixLength` default is 32 characters, arrow-rs truncates at 64
/// bytes); longer ones are compared as bounds.
const WHOLE_STRING_BYTES: usize = 32;

/// Relative difference under which a float or decimal statistic equals its value: deltalake
/// writes decimals as `f64` and `f32` statistics widened to `f64`.
const ROUNDING: f64 = 1e-6;

/// What passed one way (read, or handed to the encoder) per column.
pub(crate) struct Tally {
    rows: u64,
    columns: Vec<ColumnTally>,
    /// Time spent tallying, for the guard's cost in the log (BENCHMARKS.md).
    spent: Duration,
}

impl std::fmt::Debug for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tally")
            .field("rows", &self.rows)
            .field("columns", &self.columns.len())
            .finish()
    }
}

struct ColumnTally {
    /// Position of the column in the rows.
    index: usize,
    /// Its logical name, for messages.
    name: String,
    data_type: DataType,
    nulls: u64,
    /// Wrapping sum of the values' hashes; `None` on the copy path, which decodes nothing.
    fingerprint: Option<u64>,
    min: Option<MinAccumulator>,
    max: Option<MaxAccumulator>,
}

/// Each tallied column's share of a tally's fingerprint for one batch (in the tally's column
/// order), handed on with the batch so a tally of the same arrays downstream does not hash
/// them again ([`Tally::add_known`]). Empty: nothing known.
#[derive(Debug, Clone, Default)]
pub(crate) struct Hashed(Vec<Option<u64>>);

impl Hashed {
    /// The shares of `before`'s columns that `after` still holds as the very same arrays (a
    /// renamed column keeps its array; a retyped or edited one does not). `tally` names the
    /// columns' positions in the rows: one of the tallies the shares are for.
    pub(crate) fn unchanged(
        self,
        tally: &Tally,
        before: &RecordBatch,
        after: &RecordBatch,
    ) -> Hashed {
        let same = |index: usize| match (before.columns().get(index), after.columns().get(index)) {
            (Some(a), Some(b)) => std::sync::Arc::ptr_eq(a, b),
            _ => false,
        };
        Hashed(
            self.0
                .into_iter()
                .zip(&tally.columns)
                .map(|(share, column)| share.filter(|_| same(column.index)))
                .collect(),
        )
    }
}

/// Whether statistics must equal the data's extremes or only bound them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Strictness {
    /// deltalake computed them from the file just written: they are its extremes.
    Exact,
    /// Merged from the inputs' statistics (the copy path), which their writers may have
    /// rounded or truncated: they must hold every value between them.
    Bounds,
}

impl Tally {
    /// An empty tally of what is written, for the top-level columns of `schema` but `skip`
    /// (partition columns, which files do not hold: the partition values check covers them):
    /// fingerprints, nulls and the extremes the statistics are checked against.
    pub(crate) fn new(schema: &Schema, skip: &[String]) -> Tally {
        Self::of_columns(schema, skip, true)
    }

    /// An empty tally of what is read: [`Self::new`] without the extremes, which only the
    /// written rows' statistics need.
    pub(crate) fn of_reads(schema: &Schema, skip: &[String]) -> Tally {
        Self::of_columns(schema, skip, false)
    }

    fn of_columns(schema: &Schema, skip: &[String], extremes: bool) -> Tally {
        let columns = schema
            .fields()
            .iter()
            .enumerate()
            .filter(|(_, field)| !skip.contains(field.name()))
            .map(|(index, field)| {
                ColumnTally::new(index, field.name(), field.data_type(), true, extremes)
            })
            .collect();
        Tally {
            rows: 0,
            columns,
            spent: Duration::ZERO,
        }
    }

    /// The first column tallied, by name (the tests' faults edit its statistics).
    #[cfg(test)]
    pub(crate) fn first_column(&self) -> Option<&str> {
        self.columns.first().map(|c| c.name.as_str())
    }

    /// Adds `batch`'s rows (of the schema the tally was made for; names may differ, as a
    /// column-mapped table's physical batch does).
    pub(crate) fn add(&mut self, batch: &RecordBatch) -> Result<(), String> {
        self.add_known(batch, &Hashed::default()).map(drop)
    }

    /// [`Self::add`], except that a column `known` holds the fingerprint share of is not
    /// hashed again: `known` was taken of this very array by a tally of the same columns
    /// ([`Hashed::unchanged`] keeps a share only while the array is the same object, and arrow
    /// arrays are immutable). Returns the shares this batch added, for such a later tally.
    pub(crate) fn add_known(
        &mut self,
        batch: &RecordBatch,
        known: &Hashed,
    ) -> Result<Hashed, String> {
        let started = Instant::now();
        self.rows += batch.num_rows() as u64;
        let mut hashes = Vec::new();
        let mut shares = Vec::with_capacity(self.columns.len());
        for (position, column) in self.columns.iter_mut().enumerate() {
            let array = batch
                .columns()
                .get(column.index)
                .ok_or_else(|| format!("the rows lost column `{}` on the way", column.name))?;
            let known = known.0.get(position).copied().flatten();
            shares.push(column.add(array, &mut hashes, known)?);
        }
        self.spent += started.elapsed();
        Ok(Hashed(shares))
    }

    /// The rows, nulls and extremes the footer of a file records for its top-level columns
    /// (Parquet's own column statistics, converted by arrow-rs), without a fingerprint.
    pub(crate) fn of_footer(footer: &ParquetMetaData) -> Result<Tally, String> {
        let descriptor = footer.file_metadata().schema_descr();
        let schema = deltalake::parquet::arrow::parquet_to_arrow_schema(descriptor, None)
            .map_err(|e| format!("the written footer's schema: {e}"))?;
        let started = Instant::now();
        let mut tally = Tally {
            rows: u64::try_from(footer.file_metadata().num_rows()).unwrap_or(0),
            columns: Vec::new(),
            spent: Duration::ZERO,
        };
        for (index, field) in schema.fields().iter().enumerate() {
            if field.data_type().is_nested() {
                continue;
            }
            let mut column = ColumnTally::new(index, field.name(), field.data_type(), false, true);
            let converter = StatisticsConverter::try_new(field.name(), &schema, descriptor)
                .map_err(|e| format!("column `{}`: {e}", field.name()))?;
            let groups = footer.row_groups();
            let nulls = converter
                .row_group_null_counts(groups)
                .map_err(|e| format!("column `{}`: {e}", field.name()))?;
            if nulls.null_count() > 0 {
                // a chunk without a null count: nothing to compare the merged count with
                continue;
            }
            column.nulls = nulls.values().iter().sum();
            let extremes = [
                converter.row_group_mins(groups),
                converter.row_group_maxes(groups),
            ];
            let [Ok(mins), Ok(maxes)] = extremes else {
                continue;
            };
            if mins.null_count() > 0 || maxes.null_count() > 0 {
                // a chunk without statistics, or of nulls only: bound nothing
                column.min = None;
                column.max = None;
            } else {
                column.update_extremes(&mins, &maxes)?;
            }
            tally.columns.push(column);
        }
        tally.spent = started.elapsed();
        Ok(tally)
    }
}

impl ColumnTally {
    fn new(
        index: usize,
        name: &str,
        data_type: &DataType,
        fingerprint: bool,
        extremes: bool,
    ) -> ColumnTally {
        let ordered = extremes && comparable(data_type);
        ColumnTally {
            index,
            name: name.to_owned(),
            data_type: data_type.clone(),
            nulls: 0,
            fingerprint: fingerprint.then_some(0),
            min: ordered
                .then(|| MinAccumulator::try_new(data_type).ok())
                .flatten(),
            max: ordered
                .then(|| MaxAccumulator::try_new(data_type).ok())
                .flatten(),
        }
    }

    /// Tallies `array`; `known` is its values' hash sum when already taken. Returns the sum
    /// added to the fingerprint (`None` when this tally keeps none).
    fn add(
        &mut self,
        array: &ArrayRef,
        hashes: &mut Vec<u64>,
        known: Option<u64>,
    ) -> Result<Option<u64>, String> {
        self.nulls += array.logical_null_count() as u64;
        let mut share = None;
        if let Some(sum) = self.fingerprint.as_mut() {
            let added = match known {
                Some(added) => added,
                None => {
                    hashes.clear();
                    hashes.resize(array.len(), 0);
                    hash_values(array, hashes)
                        .map_err(|e| format!("fingerprinting column `{}`: {e}", self.name))?;
                    hashes.iter().fold(0u64, |acc, h| acc.wrapping_add(*h))
                }
            };
            *sum = sum.wrapping_add(added);
            share = Some(added);
        }
        self.update_extremes(array, array)?;
        Ok(share)
    }

    fn update_extremes(&mut self, mins: &ArrayRef, maxes: &ArrayRef) -> Result<(), String> {
        let failed = |e: deltalake::datafusion::error::DataFusionError| {
            format!("the extremes of column `{}`: {e}", self.name)
        };
        if let Some(min) = self.min.as_mut() {
            min.update_batch(std::slice::from_ref(mins))
                .map_err(failed)?;
        }
        if let Some(max) = self.max.as_mut() {
            max.update_batch(std::slice::from_ref(maxes))
                .map_err(failed)?;
        }
        Ok(())
    }

    /// The smallest and largest value, `None` for columns of nulls only or not compared.
    fn extremes(&mut self) -> Option<(ScalarValue, ScalarValue)> {
        let min = self.min.as_mut()?.evaluate().ok()?;
        let max = self.max.as_mut()?.evaluate().ok()?;
        (!min.is_null() && !max.is_null()).then_some((min, max))
    }
}

/// Each value's hash into `hashes` (nulls left 0), as DataFusion hashes a plain array's values.
/// DataFusion hashes a string or binary view by its 16-byte view; the scan reads views and
/// Z-order's sort hands plain arrays to the writer, so views are hashed here by their values,
/// exactly as `create_hashes` hashes a plain array's (`HashValue::hash_one`).
fn hash_values(array: &ArrayRef, hashes: &mut [u64]) -> Result<(), String> {
    fn each<'a, T: HashValue + ?Sized + 'a>(
        valid: impl Fn(usize) -> bool,
        value: impl Fn(usize) -> &'a T,
        hashes: &mut [u64],
    ) {
        for (i, hash) in hashes.iter_mut().enumerate() {
            if valid(i) {
                *hash = value(i).hash_one(&STATE);
            }
        }
    }
    match array.data_type() {
        DataType::Utf8View => {
            let strings = array.as_string_view();
            each(|i| strings.is_valid(i), |i| strings.value(i), hashes);
        }
        DataType::BinaryView => {
            let bytes = array.as_binary_view();
            each(|i| bytes.is_valid(i), |i| bytes.value(i), hashes);
        }
        _ => match without_views(array.data_type()) {
            // views nested in a struct, list or map: hashed by value too, so a column read as
            // views and written plain (Z-order's sort) fingerprints the same
            Some(plain) => {
                let plain = cast(array, &plain).map_err(|e| e.to_string())?;
                create_hashes([&plain], &STATE, hashes).map_err(|e| e.to_string())?;
            }
            None => {
                create_hashes([array], &STATE, hashes).map_err(|e| e.to_string())?;
            }
        },
    }
    Ok(())
}

/// `data_type` with every string and binary view inside it made a plain string or binary;
/// `None` when it holds none.
fn without_views(data_type: &DataType) -> Option<DataType> {
    let field = |f: &FieldRef| -> Option<FieldRef> {
        without_views(f.data_type()).map(|t| Arc::new(f.as_ref().clone().with_data_type(t)))
    };
    match data_type {
        DataType::Utf8View => Some(DataType::Utf8),
        DataType::BinaryView => Some(DataType::Binary),
        DataType::Struct(fields) => {
            let mapped: Vec<Option<FieldRef>> = fields.iter().map(field).collect();
            mapped.iter().any(Option::is_some).then(|| {
                DataType::Struct(
                    fields
                        .iter()
                        .zip(mapped)
                        .map(|(f, m)| m.unwrap_or_else(|| Arc::clone(f)))
                        .collect(),
                )
            })
        }
        DataType::List(f) => field(f).map(DataType::List),
        DataType::LargeList(f) => field(f).map(DataType::LargeList),
        DataType::FixedSizeList(f, n) => field(f).map(|f| DataType::FixedSizeList(f, *n)),
        DataType::Map(f, sorted) => field(f).map(|f| DataType::Map(f, *sorted)),
        _ => None,
    }
}

/// Types whose statistics are compared: those Delta keeps `minValues`/`maxValues` for.
fn comparable(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::Boolean
            | DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::Float32
            | DataType::Float64
            | DataType::Decimal128(_, _)
            | DataType::Date32
            | DataType::Timestamp(_, _)
            | DataType::Utf8
            | DataType::LargeUtf8
            | DataType::Utf8View
    )
}

/// The partition values every input of one rewritten partition shares; fails naming the
/// column when two inputs spell a value differently (they were grouped as one partition).
pub(crate) fn shared_values<'a>(
    uri: &str,
    mut inputs: impl Iterator<Item = &'a LogValues>,
) -> Result<LogValues, DeltaError> {
    let Some(first) = inputs.next() else {
        return Ok(LogValues::new());
    };
    for other in inputs {
        if let Some(what) = values_differ(first, other) {
            return Err(refused(uri, first, format!("the inputs disagree: {what}")));
        }
    }
    Ok(first.clone())
}

/// How two partition value maps differ, naming the first column that does.
fn values_differ(expected: &LogValues, found: &LogValues) -> Option<String> {
    let mut columns: Vec<&String> = expected.keys().chain(found.keys()).collect();
    columns.sort();
    columns.dedup();
    columns.into_iter().find_map(|column| {
        let (a, b) = (expected.get(column), found.get(column));
        (a != b).then(|| {
            format!(
                "partition value of `{column}` is {} in the log, {} in the added file",
                show(a),
                show(b)
            )
        })
    })
}

fn show(value: Option<&Option<String>>) -> String {
    match value {
        None => "absent".into(),
        Some(None) => "null".into(),
        Some(Some(v)) => format!("{v:?}"),
    }
}

/// A partition's values as `col=value` pairs, for messages.
pub(crate) fn label(values: &LogValues) -> String {
    if values.is_empty() {
        return "(unpartitioned)".into();
    }
    let mut pairs: Vec<String> = values
        .iter()
        .map(|(k, v)| format!("{k}={}", v.as_deref().unwrap_or("null")))
        .collect();
    pairs.sort();
    format!("`{}`", pairs.join("/"))
}

fn refused(uri: &str, values: &LogValues, what: String) -> DeltaError {
    let partition = label(values);
    tracing::error!(table = uri, partition = %partition, what = %what, "content guard refused a rewrite");
    DeltaError::ContentChanged {
        table: uri.to_owned(),
        partition,
        what,
    }
}

/// The content guard of one rewritten partition: `adds` (the files written) against the
/// partition's values in the log, the rows `read` (none on the copy path) and the rows
/// `written`. `stats_key` gives the name a column's statistics are keyed by (its physical
/// name on a column-mapped table).
pub(crate) fn check(
    uri: &str,
    values: &LogValues,
    read: Option<Tally>,
    mut written: Tally,
    adds: &[Add],
    strictness: Strictness,
    stats_key: &dyn Fn(&str) -> String,
) -> Result<(), DeltaError> {
    let started = Instant::now();
    let tallied = read.as_ref().map_or(Duration::ZERO, |r| r.spent) + written.spent;
    for add in adds {
        if let Some(what) = values_differ(values, &add.partition_values) {
            return Err(refused(uri, values, format!("{what} {}", add.path)));
        }
    }
    if let Some(read) = read {
        compare_values(&read, &written).map_err(|what| refused(uri, values, what))?;
    }
    let stats = adds
        .iter()
        .map(|add| {
            add.stats
                .as_deref()
                .and_then(|s| serde_json::from_str::<Value>(s).ok())
                .ok_or_else(|| format!("added file {} has no readable statistics", add.path))
        })
        .collect::<Result<Vec<Value>, String>>()
        .map_err(|what| refused(uri, values, what))?;
    compare_statistics(&mut written, &stats, strictness, stats_key)
        .map_err(|what| refused(uri, values, what))?;
    tracing::debug!(
        table = uri,
        partition = %label(values),
        files = adds.len(),
        rows = written.rows,
        tally_ms = tallied.as_secs_f64() * 1e3,
        check_ms = started.elapsed().as_secs_f64() * 1e3,
        "content guard passed"
    );
    Ok(())
}

/// The values read equal the values written, column by column.
fn compare_values(read: &Tally, written: &Tally) -> Result<(), String> {
    if read.rows != written.rows {
        return Err(format!(
            "{} rows were read and {} written",
            read.rows, written.rows
        ));
    }
    if read.columns.len() != written.columns.len() {
        return Err(format!(
            "{} columns were read and {} written",
            read.columns.len(),
            written.columns.len()
        ));
    }
    for (r, w) in read.columns.iter().zip(&written.columns) {
        if r.nulls != w.nulls {
            return Err(format!(
                "column `{}` held {} nulls when read and {} when written",
                r.name, r.nulls, w.nulls
            ));
        }
        if r.fingerprint != w.fingerprint {
            return Err(format!(
                "column `{}` holds other values than were read (fingerprint {:016x} read, \
                 {:016x} written)",
                r.name,
                r.fingerprint.unwrap_or(0),
                w.fingerprint.unwrap_or(0)
            ));
        }
    }
    Ok(())
}

/// The files' statistics describe the rows written (see the module docs).
fn compare_statistics(
    written: &mut Tally,
    stats: &[Value],
    strictness: Strictness,
    stats_key: &dyn Fn(&str) -> String,
) -> Result<(), String> {
    let records: Option<u64> = stats
        .iter()
        .map(|s| s.get("numRecords").and_then(Value::as_u64))
        .sum();
    if records != Some(written.rows) {
        return Err(format!(
            "the added files' numRecords sum to {}, {} rows were written",
            records.map_or_else(|| "nothing (one lacks it)".into(), |r| r.to_string()),
            written.rows
        ));
    }
    for column in &mut written.columns {
        if column.data_type.is_nested() {
            // Delta keeps a nested column's statistics per leaf field: its fingerprint covers it
            continue;
        }
        let key = stats_key(&column.name);
        let entries = |kind: &str| -> Vec<&Value> {
            stats
                .iter()
                .filter_map(|s| s.get(kind).and_then(|m| m.get(&key)))
                .collect()
        };
        let nulls = entries("nullCount");
        if nulls.len() == stats.len() {
            let sum: Option<u64> = nulls.iter().map(|v| v.as_u64()).sum();
            if sum != Some(column.nulls) {
                return Err(format!(
                    "column `{}`: the added files' nullCount sums to {}, the rows written hold \
                     {} nulls",
                    column.name,
                    sum.map_or_else(|| "an unreadable count".into(), |s| s.to_string()),
                    column.nulls
                ));
            }
        }
        let Some((min, max)) = column.extremes() else {
            continue;
        };
        let (mins, maxes) = (entries("minValues"), entries("maxValues"));
        let data_type = column.data_type.clone();
        let name = column.name.as_str();
        let ends = [
            (
                mins,
                min,
                std::cmp::Ordering::Less,
                "smallest minValues",
                "start at",
            ),
            (
                maxes,
                max,
                std::cmp::Ordering::Greater,
                "largest maxValues",
                "end at",
            ),
        ];
        for (stats, actual, towards, which, rows) in ends {
            let stat = extreme(&stats, &data_type, towards)
                .map_err(|e| format!("column `{name}`: {which} {e}"))?;
            if let Some(stat) = stat {
                describe(&stat, &actual, strictness, towards).map_err(|how| {
                    format!(
                        "column `{name}`: the added files' {which} is {stat}, the rows written \
                         {rows} {actual} ({how})"
                    )
                })?;
            }
        }
    }
    Ok(())
}

/// The extreme (`Less`: smallest, `Greater`: largest) of statistics values, read as
/// `data_type`; `None` when there are none.
fn extreme(
    values: &[&Value],
    data_type: &DataType,
    towards: std::cmp::Ordering,
) -> Result<Option<ScalarValue>, String> {
    let mut best: Option<ScalarValue> = None;
    for value in values {
        let text = match value {
            // floats and decimals are compared as `f64`, as deltalake writes them
            Value::Number(n) if approximate(data_type) => {
                let scalar = ScalarValue::Float64(n.as_f64());
                if best
                    .as_ref()
                    .is_none_or(|b| order(&scalar, b) == Some(towards))
                {
                    best = Some(scalar);
                }
                continue;
            }
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            Value::Null => continue,
            other => return Err(format!("holds {other}, not a value")),
        };
        let scalar = ScalarValue::try_from_string(text.clone(), data_type)
            .map_err(|e| format!("holds {text:?}, unreadable as {data_type}: {e}"))?;
        if best
            .as_ref()
            .is_none_or(|b| order(&scalar, b) == Some(towards))
        {
            best = Some(scalar);
        }
    }
    Ok(best)
}

fn approximate(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::Float32 | DataType::Float64 | DataType::Decimal128(_, _)
    )
}

/// A statistic in the unit it is compared in: timestamps at milliseconds (the precision
/// Delta's statistics keep), floats and decimals as `f64`, strings whole, the rest as they are.
enum Comparable {
    Exact(ScalarValue),
    Number(f64),
    Text(String),
}

fn comparable_of(value: &ScalarValue) -> Comparable {
    let millis =
        |v: Option<i64>, per_milli: i64| ScalarValue::Int64(v.map(|v| v.div_euclid(per_milli)));
    match value {
        ScalarValue::TimestampSecond(v, _) => ScalarValue::Int64(v.map(|v| v * 1000)).into(),
        ScalarValue::TimestampMillisecond(v, _) => millis(*v, 1).into(),
        ScalarValue::TimestampMicrosecond(v, _) => millis(*v, 1_000).into(),
        ScalarValue::TimestampNanosecond(v, _) => millis(*v, 1_000_000).into(),
        ScalarValue::Float32(Some(v)) => Comparable::Number(f64::from(*v)),
        ScalarValue::Float64(Some(v)) => Comparable::Number(*v),
        #[allow(clippy::cast_precision_loss)] // compared within ROUNDING
        ScalarValue::Decimal128(Some(v), _, scale) => {
            Comparable::Number(*v as f64 / 10f64.powi(i32::from(*scale)))
        }
        ScalarValue::Utf8(Some(s))
        | ScalarValue::LargeUtf8(Some(s))
        | ScalarValue::Utf8View(Some(s)) => Comparable::Text(s.clone()),
        other => Comparable::Exact(other.clone()),
    }
}

impl From<ScalarValue> for Comparable {
    fn from(value: ScalarValue) -> Self {
        Comparable::Exact(value)
    }
}

fn order(a: &ScalarValue, b: &ScalarValue) -> Option<std::cmp::Ordering> {
    match (comparable_of(a), comparable_of(b)) {
        (Comparable::Exact(a), Comparable::Exact(b)) => a.partial_cmp(&b),
        (Comparable::Number(a), Comparable::Number(b)) => a.partial_cmp(&b),
        (Comparable::Text(a), Comparable::Text(b)) => Some(a.cmp(&b)),
        _ => None,
    }
}

/// Whether `stat` describes the data's extreme `actual` (`towards` says which: the minimum is
/// `Less`); the reason when it does not.
fn describe(
    stat: &ScalarValue,
    actual: &ScalarValue,
    strictness: Strictness,
    towards: std::cmp::Ordering,
) -> Result<(), &'static str> {
    match (comparable_of(stat), comparable_of(actual)) {
        (Comparable::Number(s), Comparable::Number(a)) => {
            if s.is_nan() || a.is_nan() {
                return Ok(());
            }
            let close = (s - a).abs() <= ROUNDING * s.abs().max(a.abs()).max(1.0);
            let bounds = close || (s - a).partial_cmp(&0.0) == Some(towards);
            match strictness {
                Strictness::Exact if close => Ok(()),
                Strictness::Bounds if bounds => Ok(()),
                Strictness::Exact => Err("not the value"),
                Strictness::Bounds => Err("does not bound the values"),
            }
        }
        (Comparable::Text(s), Comparable::Text(a)) => {
            let whole = a.len() <= WHOLE_STRING_BYTES && s.len() <= WHOLE_STRING_BYTES;
            let bounds = s == a || s.cmp(&a) == towards;
            if strictness == Strictness::Exact && whole && s != a {
                Err("not the value")
            } else if bounds {
                Ok(())
            } else {
                Err("does not bound the values")
            }
        }
        (Comparable::Exact(s), Comparable::Exact(a)) => {
            let ordering = s.partial_cmp(&a);
            match (strictness, ordering) {
                (_, Some(std::cmp::Ordering::Equal)) => Ok(()),
                (Strictness::Bounds, Some(o)) if o == towards => Ok(()),
                (Strictness::Exact, _) => Err("not the value"),
                (Strictness::Bounds, _) => Err("does not bound the values"),
            }
        }
        _ => Err("of another type than the column"),
    }
}

/// Faults the tests inject between what a rewrite read and what it commits, to see the guard
/// refuse each (the guard itself runs as in production).
#[cfg(test)]
pub(crate) mod fault {
    use std::cell::Cell;

    /// One fault, taken by the first rewrite that meets it on this thread.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(crate) enum Fault {
        /// The first row's values replace the last row's in the batch handed to the encoder.
        ChangedValue,
        /// An added file's first partition value gets a character more.
        ChangedPartitionValue,
        /// An added file's `minValues` of its first column is made larger than the column's.
        WrongMin,
        /// An added file's `nullCount` of its first column is one more.
        WrongNullCount,
    }

    thread_local! {
        static FAULT: Cell<Option<Fault>> = const { Cell::new(None) };
    }

    pub(crate) fn inject(fault: Fault) {
        FAULT.with(|f| f.set(Some(fault)));
    }

    /// The injected fault when it is `kind`, taken.
    pub(crate) fn take(kind: Fault) -> bool {
        FAULT.with(|f| {
            let hit = f.get() == Some(kind);
            if hit {
                f.set(None);
            }
            hit
        })
    }

    /// Applies an injected batch fault.
    pub(crate) fn batch(
        batch: deltalake::arrow::array::RecordBatch,
    ) -> deltalake::arrow::array::RecordBatch {
        if batch.num_rows() < 2 || !take(Fault::ChangedValue) {
            return batch;
        }
        let n = batch.num_rows();
        deltalake::arrow::compute::concat_batches(
            &batch.schema(),
            &[batch.slice(0, 1), batch.slice(0, n - 1)],
        )
        .expect("same schema")
    }

    /// Applies an injected fault to the files written.
    pub(crate) fn adds(adds: &mut [deltalake::kernel::Add], first_column: &str) {
        let Some(add) = adds.first_mut() else {
            return;
        };
        if take(Fault::ChangedPartitionValue) {
            if let Some(value) = add.partition_values.values_mut().flatten().next() {
                value.push('x');
            }
        }
        let edit = |add: &mut deltalake::kernel::Add, f: &dyn Fn(&mut serde_json::Value)| {
            let mut stats: serde_json::Value =
                serde_json::from_str(add.stats.as_deref().unwrap_or("{}")).expect("stats");
            f(&mut stats);
            add.stats = Some(stats.to_string());
        };
        if take(Fault::WrongMin) {
            edit(add, &|s| {
                if let Some(max) = s["maxValues"].get(first_column).cloned() {
                    s["minValues"][first_column] = max;
                    // a value above the column's every value
                    if let Some(n) = s["minValues"][first_column].as_i64() {
                        s["minValues"][first_column] = (n + 1).into();
                    }
                }
            });
        }
        if take(Fault::WrongNullCount) {
            edit(add, &|s| {
                let n = s["nullCount"][first_column].as_u64().unwrap_or(0);
                s["nullCount"][first_column] = (n + 1).into();
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use deltalake::arrow::array::{Int64Array, StringArray, TimestampMicrosecondArray};
    use deltalake::arrow::datatypes::{Field, TimeUnit};

    fn batch(ids: Vec<Option<i64>>, names: Vec<Option<&str>>) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("name", DataType::Utf8, true),
            Field::new("day", DataType::Utf8, true),
        ]));
        let days = vec![Some("d"); ids.len()];
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(ids)),
                Arc::new(StringArray::from(names)),
                Arc::new(StringArray::from(days)),
            ],
        )
        .unwrap()
    }

    fn tally(batches: &[RecordBatch]) -> Tally {
        let mut tally = Tally::new(&batches[0].schema(), &["day".to_owned()]);
        for b in batches {
            tally.add(b).unwrap();
        }
        tally
    }

    fn add(values: &[(&str, Option<&str>)], stats: Value) -> Add {
        Add {
            path: "f.parquet".into(),
            partition_values: values
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.map(str::to_owned)))
                .collect(),
            stats: Some(stats.to_string()),
            ..Add::default()
        }
    }

    /// Three rows: ids 1, null, 2; names a, b, c.
    fn rows() -> Tally {
        tally(&[batch(
            vec![Some(1), None, Some(2)],
            vec![Some("a"), Some("b"), Some("c")],
        )])
    }

    fn good_stats() -> Value {
        serde_json::json!({
            "numRecords": 3,
            "nullCount": {"id": 1, "name": 0},
            "minValues": {"id": 1, "name": "a"},
            "maxValues": {"id": 2, "name": "c"},
        })
    }

    fn values() -> LogValues {
        [("day".to_owned(), Some("d".to_owned()))].into()
    }

    fn run(read: Tally, written: Tally, adds: &[Add]) -> Result<(), DeltaError> {
        check(
            "/t",
            &values(),
            Some(read),
            written,
            adds,
            Strictness::Exact,
            &|c| c.to_owned(),
        )
    }

    /// A struct column of strings, read as views (the scan) and written plain (Z-order's
    /// sort), sorted the other way round and with its one null struct's masked child changed.
    #[test]
    fn views_inside_a_struct_fingerprint_as_their_values() {
        use deltalake::arrow::array::{StringViewArray, StructArray};
        use deltalake::arrow::buffer::NullBuffer;
        let nested = |strings: ArrayRef, rows: usize| -> RecordBatch {
            let field = Field::new("aa", strings.data_type().clone(), true);
            let nulls = NullBuffer::from((0..rows).map(|i| i != 1).collect::<Vec<_>>());
            let column = StructArray::new(vec![field].into(), vec![strings], Some(nulls));
            let schema = Schema::new(vec![Field::new("s", column.data_type().clone(), true)]);
            RecordBatch::try_new(Arc::new(schema), vec![Arc::new(column)]).unwrap()
        };
        let fingerprint = |batch: RecordBatch| -> Option<u64> {
            let mut tally = Tally::new(&batch.schema(), &[]);
            tally.add(&batch).unwrap();
            tally.columns[0].fingerprint
        };
        let read = nested(
            Arc::new(StringViewArray::from(vec![
                Some("x"),
                Some("masked"),
                Some("a string longer than twelve bytes"),
            ])),
            3,
        );
        let written = nested(
            Arc::new(StringArray::from(vec![
                Some("a string longer than twelve bytes"),
                None,
                Some("x"),
            ])),
            3,
        );
        assert_eq!(fingerprint(read), fingerprint(written));
        let changed = nested(
            Arc::new(StringArray::from(vec![Some("y"), None, Some("x")])),
            3,
        );
        assert_ne!(
            fingerprint(nested(
                Arc::new(StringViewArray::from(vec![Some("x"), None, Some("z")])),
                3
            )),
            fingerprint(changed)
        );
    }

    #[test]
    fn the_same_rows_in_another_order_and_batching_pass() {
        let read = rows();
        let written = tally(&[
            batch(vec![Some(2)], vec![Some("c")]),
            batch(vec![None, Some(1)], vec![Some("b"), Some("a")]),
        ]);
        run(read, written, &[add(&[("day", Some("d"))], good_stats())]).expect("clean");
    }

    #[test]
    fn a_changed_value_is_refused_naming_its_column() {
        let read = rows();
        let written = tally(&[batch(
            vec![Some(1), None, Some(2)],
            vec![Some("a"), Some("a"), Some("c")],
        )]);
        let err = run(read, written, &[add(&[("day", Some("d"))], good_stats())]).unwrap_err();
        assert!(
            matches!(&err, DeltaError::ContentChanged { what, .. } if what.contains("column `name`")),
            "{err}"
        );
    }

    #[test]
    fn a_changed_partition_value_is_refused_naming_both_spellings() {
        let printed = add(&[("day", Some("\\u0064"))], good_stats());
        let err = run(rows(), rows(), &[printed]).unwrap_err().to_string();
        assert!(
            err.contains("`day`") && err.contains("\"d\"") && err.contains("\\\\u0064"),
            "{err}"
        );
        let nulled = add(&[("day", None)], good_stats());
        let err = run(rows(), rows(), &[nulled]).unwrap_err().to_string();
        assert!(err.contains("null in the added file"), "{err}");
    }

    #[test]
    fn wrong_statistics_are_refused_naming_the_column() {
        for (edit, expect) in [
            (
                ("minValues", "id", serde_json::json!(0)),
                "smallest minValues",
            ),
            (
                ("maxValues", "name", serde_json::json!("b")),
                "largest maxValues",
            ),
            (("nullCount", "id", serde_json::json!(0)), "nullCount"),
            (("nullCount", "name", serde_json::json!(1)), "nullCount"),
        ] {
            let mut stats = good_stats();
            stats[edit.0][edit.1] = edit.2.clone();
            let err = run(rows(), rows(), &[add(&[("day", Some("d"))], stats)])
                .unwrap_err()
                .to_string();
            assert!(
                err.contains(expect) && err.contains(&format!("`{}`", edit.1)),
                "{edit:?}: {err}"
            );
        }
        let mut stats = good_stats();
        stats["numRecords"] = 4.into();
        let err = run(rows(), rows(), &[add(&[("day", Some("d"))], stats)]).unwrap_err();
        assert!(err.to_string().contains("numRecords"), "{err}");
    }

    #[test]
    fn timestamps_compare_at_milliseconds_and_bounds_allow_truncation() {
        let schema = Arc::new(Schema::new(vec![Field::new(
            "t",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            false,
        )]));
        let rows = RecordBatch::try_new(
            schema,
            vec![Arc::new(
                TimestampMicrosecondArray::from(vec![1_000_999, 5_000_001]).with_timezone("UTC"),
            )],
        )
        .unwrap();
        let tallied = || {
            let mut written = Tally::new(&rows.schema(), &[]);
            written.add(&rows).unwrap();
            written
        };
        let stats = serde_json::json!({
            "numRecords": 2, "nullCount": {"t": 0},
            "minValues": {"t": "1970-01-01T00:00:01.000Z"},
            "maxValues": {"t": "1970-01-01T01:00:05.000+01:00"},
        });
        compare_statistics(&mut tallied(), &[stats], Strictness::Exact, &|c| {
            c.to_owned()
        })
        .expect("millisecond statistics describe microsecond values");
        let too_high = serde_json::json!({
            "numRecords": 2, "nullCount": {"t": 0},
            "minValues": {"t": "1970-01-01T00:00:02.000Z"},
            "maxValues": {"t": "1970-01-01T00:00:05.000Z"},
        });
        let err = compare_statistics(&mut tallied(), &[too_high], Strictness::Bounds, &|c| {
            c.to_owned()
        })
        .unwrap_err();
        assert!(err.contains("does not bound"), "{err}");
    }
}
