//! The Z-order key of a row: the bits of its Z-order columns interleaved, most significant bit
//! first, so that sorting rows by the key (as bytes) lays them along a Z-curve and rows close in
//! every column land in the same file.
//!
//! Owns the key and nothing else. Each column enters with the first [`PREFIX_BYTES`] bytes of
//! its arrow row encoding (the order-preserving, null-first byte form arrow's sorts use), as
//! deltalake's own `zorder_key` takes them; shorter encodings are padded with zero bytes. Unlike
//! deltalake's key (which interleaves bits least-significant first within each byte, so a
//! byte's low bits outrank its high bits), the interleave here is a true Morton order. With one
//! column the key is that column's prefix: a plain sort.

use deltalake::arrow::array::{Array, ArrayRef, AsArray};
use deltalake::arrow::datatypes::DataType;
use deltalake::arrow::error::ArrowError;
use deltalake::arrow::record_batch::RecordBatch;
use deltalake::arrow::row::{RowConverter, SortField};

/// Bytes of each column's row encoding that enter the key.
pub(crate) const PREFIX_BYTES: usize = 16;

/// Most columns one key interleaves (the interleave works in 128-bit groups). Clustering on
/// more than a handful of columns clusters on none of them usefully anyway.
pub(crate) const MAX_COLUMNS: usize = 16;

/// Builds the keys of batches for fixed columns (dotted paths reach into structs).
#[derive(Debug)]
pub(crate) struct ZKey {
    paths: Vec<Vec<String>>,
    /// `SPREAD[v]`: the bits of byte `v` spread `columns` apart, the first bit at the top of an
    /// `8 * columns`-bit field.
    spread: [u128; 256],
}

impl ZKey {
    /// A key over `columns` (1 to [`MAX_COLUMNS`] of them).
    pub(crate) fn new(columns: &[String]) -> Result<Self, ArrowError> {
        let n = columns.len();
        if n == 0 || n > MAX_COLUMNS {
            return Err(ArrowError::InvalidArgumentError(format!(
                "a Z-order key takes 1 to {MAX_COLUMNS} columns, not {n}"
            )));
        }
        let mut spread = [0u128; 256];
        for (value, slot) in spread.iter_mut().enumerate() {
            for bit in 0..8 {
                if value & (0x80 >> bit) != 0 {
                    *slot |= 1u128 << (8 * n - 1 - bit * n);
                }
            }
        }
        Ok(Self {
            paths: columns
                .iter()
                .map(|c| {
                    tablekeeper_vocab::column_path(c).map_err(ArrowError::InvalidArgumentError)
                })
                .collect::<Result<_, _>>()?,
            spread,
        })
    }

    /// Bytes of one key.
    pub(crate) fn width(&self) -> usize {
        PREFIX_BYTES * self.paths.len()
    }

    /// The keys of `batch`'s rows, [`Self::width`] bytes each, end to end.
    pub(crate) fn keys(&self, batch: &RecordBatch) -> Result<Vec<u8>, ArrowError> {
        let n = self.paths.len();
        let rows = batch.num_rows();
        let mut prefixes = Vec::with_capacity(n);
        for path in &self.paths {
            prefixes.push(prefixes_of(&column(batch, path)?)?);
        }
        if n == 1 {
            return Ok(prefixes.swap_remove(0));
        }
        let width = self.width();
        let mut out = vec![0u8; rows * width];
        for (row, key) in out.chunks_exact_mut(width).enumerate() {
            let base = row * PREFIX_BYTES;
            for byte in 0..PREFIX_BYTES {
                let group = prefixes.iter().enumerate().fold(0u128, |group, (c, p)| {
                    group | (self.spread[usize::from(p[base + byte])] >> c)
                });
                let bytes = group.to_be_bytes();
                key[byte * n..(byte + 1) * n].copy_from_slice(&bytes[16 - n..]);
            }
        }
        Ok(out)
    }
}

/// The column at `path` (top-level name, then struct fields).
fn column(batch: &RecordBatch, path: &[String]) -> Result<ArrayRef, ArrowError> {
    let missing = || {
        ArrowError::SchemaError(format!(
            "Z-order column `{}` is not in the rows read",
            path.join(".")
        ))
    };
    let (first, rest) = path.split_first().ok_or_else(missing)?;
    let mut array = batch.column_by_name(first).cloned().ok_or_else(missing)?;
    for field in rest {
        let DataType::Struct(_) = array.data_type() else {
            return Err(missing());
        };
        array = array
            .as_struct()
            .column_by_name(field)
            .cloned()
            .ok_or_else(missing)?;
    }
    Ok(array)
}

/// The first [`PREFIX_BYTES`] of each row's encoding, zero-padded, end to end.
fn prefixes_of(array: &ArrayRef) -> Result<Vec<u8>, ArrowError> {
    let converter = RowConverter::new(vec![SortField::new(array.data_type().clone())])?;
    let rows = converter.convert_columns(std::slice::from_ref(array))?;
    let mut out = vec![0u8; array.len() * PREFIX_BYTES];
    for (row, slot) in rows.iter().zip(out.chunks_exact_mut(PREFIX_BYTES)) {
        let bytes = row.as_ref();
        let len = bytes.len().min(PREFIX_BYTES);
        slot[..len].copy_from_slice(&bytes[..len]);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use deltalake::arrow::array::{Int32Array, StringArray, StructArray};
    use deltalake::arrow::datatypes::{Field, Schema};

    use super::*;

    fn batch(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
        let fields: Vec<Field> = columns
            .iter()
            .map(|(name, a)| Field::new(*name, a.data_type().clone(), true))
            .collect();
        RecordBatch::try_new(
            Arc::new(Schema::new(fields)),
            columns.into_iter().map(|(_, a)| a).collect(),
        )
        .unwrap()
    }

    fn sorted_by_key(key: &ZKey, batch: &RecordBatch) -> Vec<usize> {
        let keys = key.keys(batch).unwrap();
        let w = key.width();
        let mut order: Vec<usize> = (0..batch.num_rows()).collect();
        order.sort_by(|&a, &b| keys[a * w..(a + 1) * w].cmp(&keys[b * w..(b + 1) * w]));
        order
    }

    #[test]
    fn one_column_sorts_plainly_nulls_first() {
        let values: ArrayRef = Arc::new(Int32Array::from(vec![
            Some(5),
            None,
            Some(-3),
            Some(i32::MAX),
            Some(0),
        ]));
        let b = batch(vec![("x", values)]);
        let key = ZKey::new(&["x".into()]).unwrap();
        assert_eq!(key.width(), PREFIX_BYTES);
        assert_eq!(sorted_by_key(&key, &b), vec![1, 2, 4, 0, 3]);
    }

    #[test]
    fn two_columns_follow_the_morton_curve() {
        // the 4x4 grid: Morton order visits (x, y) quadrant by quadrant, x before y in each bit
        let mut xs = Vec::new();
        let mut ys = Vec::new();
        for x in 0..4 {
            for y in 0..4 {
                xs.push(x);
                ys.push(y);
            }
        }
        let b = batch(vec![
            ("x", Arc::new(Int32Array::from(xs.clone())) as ArrayRef),
            ("y", Arc::new(Int32Array::from(ys.clone())) as ArrayRef),
        ]);
        let key = ZKey::new(&["x".into(), "y".into()]).unwrap();
        let visited: Vec<(i32, i32)> = sorted_by_key(&key, &b)
            .into_iter()
            .map(|i| (xs[i], ys[i]))
            .collect();
        let morton = |x: i32, y: i32| {
            (0..2).fold(0, |acc, bit| {
                acc | (((x >> bit) & 1) << (2 * bit + 1)) | (((y >> bit) & 1) << (2 * bit))
            })
        };
        let mut expected: Vec<(i32, i32)> = visited.clone();
        expected.sort_by_key(|&(x, y)| morton(x, y));
        assert_eq!(visited, expected);
        assert_eq!(visited[..4], [(0, 0), (0, 1), (1, 0), (1, 1)]);
    }

    #[test]
    fn nested_columns_are_reached_and_missing_ones_named() {
        let inner: ArrayRef = Arc::new(StringArray::from(vec!["b", "a"]));
        let s: ArrayRef = Arc::new(StructArray::from(vec![(
            Arc::new(Field::new("name", DataType::Utf8, true)),
            inner,
        )]));
        let b = batch(vec![("s", s)]);
        let key = ZKey::new(&["s.name".into()]).unwrap();
        assert_eq!(sorted_by_key(&key, &b), vec![1, 0]);
        let err = ZKey::new(&["s.nope".into()]).unwrap().keys(&b).unwrap_err();
        assert!(err.to_string().contains("`s.nope`"), "{err}");
        assert!(ZKey::new(&[]).is_err());
    }
}
