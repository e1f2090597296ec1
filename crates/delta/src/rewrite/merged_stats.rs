//! The Delta statistics of a file copied from others ([`crate::rewrite::splice`]): merged from the inputs'
//! own `add.stats`, never recomputed.
//!
//! Owns the merge. The inputs' statistics were written by the table's writers under the table's
//! statistics settings and are what readers skip files on today, so the merge keeps exactly what
//! they offer: `numRecords` and `nullCount` add up, `minValues` is the least of the minimums and
//! `maxValues` the greatest of the maximums, compared as the column's Delta type (a timestamp as
//! an instant, not as text). A value is taken verbatim from the input that holds it, so the
//! output says what its writer said, truncation included (a truncated minimum is still a lower
//! bound). A column whose statistic is missing from one input gets none in the output, unless
//! that input's column is all null. A column type that cannot be compared exactly here (decimal,
//! binary, nested lists and maps) makes the merge refuse, and the bin is decoded instead, so
//! the copy path never writes weaker statistics than a re-encode would.

use std::cmp::Ordering;

use chrono::{DateTime, NaiveDate, NaiveDateTime};
use deltalake::kernel::{DataType, PrimitiveType, StructType};
use serde_json::{Map, Value};

/// How the statistics of a table name its columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Naming {
    /// By logical name (no column mapping).
    Logical,
    /// By `delta.columnMapping.physicalName` (column mapping `name` or `id`).
    Physical,
}

/// Merges the statistics of `inputs` (each a parsed `add.stats` object) of a table of `schema`.
/// `Err` says why the statistics cannot be merged exactly.
pub(crate) fn merge(
    inputs: &[Value],
    schema: &StructType,
    naming: Naming,
) -> Result<Value, String> {
    let mut records = 0u64;
    for stats in inputs {
        records += stats
            .get("numRecords")
            .and_then(Value::as_u64)
            .ok_or("an input's statistics carry no numRecords")?;
    }
    let mut merged = Map::new();
    merged.insert("numRecords".into(), Value::from(records));
    let section = |name: &str| -> Vec<Option<&Map<String, Value>>> {
        inputs
            .iter()
            .map(|s| s.get(name).and_then(Value::as_object))
            .collect()
    };
    let nulls = section("nullCount");
    let counts: Vec<u64> = inputs
        .iter()
        .map(|s| s.get("numRecords").and_then(Value::as_u64).unwrap_or(0))
        .collect();
    let context = Inputs {
        nulls: &nulls,
        records: &counts,
        naming,
    };
    if nulls.iter().all(Option::is_some) {
        merged.insert(
            "nullCount".into(),
            Value::Object(sum_nulls(&context, schema)),
        );
    }
    for (name, pick) in [
        ("minValues", Ordering::Less),
        ("maxValues", Ordering::Greater),
    ] {
        let values = section(name);
        if values.iter().all(Option::is_some) {
            merged.insert(
                name.into(),
                Value::Object(extreme(&context, &values, schema, pick)?),
            );
        }
    }
    let bounds: Vec<Option<bool>> = inputs
        .iter()
        .map(|s| s.get("tightBounds").and_then(Value::as_bool))
        .collect();
    if bounds.iter().any(Option::is_some) {
        merged.insert(
            "tightBounds".into(),
            Value::Bool(bounds.iter().all(|b| *b != Some(false))),
        );
    }
    Ok(Value::Object(merged))
}

/// What every level of the merge needs: the inputs' null counts and row counts, by input.
struct Inputs<'a> {
    nulls: &'a [Option<&'a Map<String, Value>>],
    records: &'a [u64],
    naming: Naming,
}

fn key(field: &deltalake::kernel::StructField, naming: Naming) -> &str {
    use deltalake::kernel::{ColumnMetadataKey, MetadataValue};
    if naming == Naming::Physical {
        if let Some(MetadataValue::String(physical)) =
            field.get_config_value(&ColumnMetadataKey::ColumnMappingPhysicalName)
        {
            return physical;
        }
    }
    field.name()
}

/// Sums the null counts every input has for a column (nested for structs).
fn sum_nulls(inputs: &Inputs<'_>, schema: &StructType) -> Map<String, Value> {
    let mut out = Map::new();
    for field in schema.fields() {
        let name = key(field, inputs.naming);
        let values: Vec<Option<&Value>> = inputs
            .nulls
            .iter()
            .map(|section| section.and_then(|s| s.get(name)))
            .collect();
        if values.iter().any(Option::is_none) {
            continue;
        }
        match field.data_type() {
            DataType::Struct(inner) => {
                let nested: Vec<Option<&Map<String, Value>>> = values
                    .iter()
                    .map(|v| v.and_then(Value::as_object))
                    .collect();
                if nested.iter().all(Option::is_some) {
                    let level = Inputs {
                        nulls: &nested,
                        records: inputs.records,
                        naming: inputs.naming,
                    };
                    out.insert(name.to_owned(), Value::Object(sum_nulls(&level, inner)));
                }
            }
            _ => {
                let counts: Option<Vec<u64>> =
                    values.iter().map(|v| v.and_then(Value::as_u64)).collect();
                if let Some(counts) = counts {
                    out.insert(name.to_owned(), Value::from(counts.iter().sum::<u64>()));
                }
            }
        }
    }
    out
}

/// The least (`pick = Less`) or greatest (`Greater`) value of each column over the inputs.
fn extreme(
    inputs: &Inputs<'_>,
    values: &[Option<&Map<String, Value>>],
    schema: &StructType,
    pick: Ordering,
) -> Result<Map<String, Value>, String> {
    let mut out = Map::new();
    'fields: for field in schema.fields() {
        let name = key(field, inputs.naming);
        let mut best: Option<&Value> = None;
        let mut nested_values = Vec::new();
        let mut nested_nulls = Vec::new();
        for (index, section) in values.iter().enumerate() {
            let value = section.and_then(|s| s.get(name)).filter(|v| !v.is_null());
            let nulls = inputs.nulls[index].and_then(|n| n.get(name));
            let Some(value) = value else {
                // no bound from this input: fine only when its column holds nulls alone
                if all_null(nulls, inputs.records[index]) {
                    continue;
                }
                continue 'fields;
            };
            if let DataType::Struct(_) = field.data_type() {
                nested_values.push(value.as_object());
                nested_nulls.push(nulls.and_then(Value::as_object));
                continue;
            }
            best = match best {
                None => Some(value),
                Some(current) => match compare(field.data_type(), value, current) {
                    Some(order) if order == pick => Some(value),
                    Some(_) => Some(current),
                    None => {
                        return Err(format!(
                            "the statistics of column `{}` cannot be compared exactly ({value} and {current})",
                            field.name()
                        ))
                    }
                },
            };
        }
        match field.data_type() {
            DataType::Struct(inner) => {
                if nested_values.iter().all(Option::is_some) && !nested_values.is_empty() {
                    let records: Vec<u64> = values
                        .iter()
                        .enumerate()
                        .filter(|(_, s)| s.and_then(|s| s.get(name)).is_some_and(|v| !v.is_null()))
                        .map(|(index, _)| inputs.records[index])
                        .collect();
                    let level = Inputs {
                        nulls: &nested_nulls,
                        records: &records,
                        naming: inputs.naming,
                    };
                    let nested = extreme(&level, &nested_values, inner, pick)?;
                    out.insert(name.to_owned(), Value::Object(nested));
                }
            }
            data_type => {
                if let Some(best) = best {
                    if !comparable(data_type) {
                        return Err(format!(
                            "column `{}` of type {data_type} has statistics this merge does not compare",
                            field.name()
                        ));
                    }
                    out.insert(name.to_owned(), best.clone());
                }
            }
        }
    }
    Ok(out)
}

/// Whether a column's null count says it holds nothing but nulls.
fn all_null(nulls: Option<&Value>, records: u64) -> bool {
    nulls.and_then(Value::as_u64) == Some(records)
}

fn comparable(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::Primitive(
            PrimitiveType::Byte
                | PrimitiveType::Short
                | PrimitiveType::Integer
                | PrimitiveType::Long
                | PrimitiveType::Float
                | PrimitiveType::Double
                | PrimitiveType::String
                | PrimitiveType::Boolean
                | PrimitiveType::Date
                | PrimitiveType::Timestamp
                | PrimitiveType::TimestampNtz
        )
    )
}

/// Orders two statistics values of a column of `data_type`; `None` when they cannot be ordered
/// exactly (an unexpected JSON type, an unparsable date, a type not handled here).
fn compare(data_type: &DataType, a: &Value, b: &Value) -> Option<Ordering> {
    let DataType::Primitive(primitive) = data_type else {
        return None;
    };
    match primitive {
        PrimitiveType::Byte
        | PrimitiveType::Short
        | PrimitiveType::Integer
        | PrimitiveType::Long => Some(a.as_i64()?.cmp(&b.as_i64()?)),
        PrimitiveType::Float | PrimitiveType::Double => a.as_f64()?.partial_cmp(&b.as_f64()?),
        // Delta and Spark order strings by their UTF-8 bytes, as `str` does
        PrimitiveType::String => Some(a.as_str()?.cmp(b.as_str()?)),
        PrimitiveType::Boolean => Some(a.as_bool()?.cmp(&b.as_bool()?)),
        PrimitiveType::Date => Some(date(a)?.cmp(&date(b)?)),
        PrimitiveType::Timestamp => Some(instant(a)?.cmp(&instant(b)?)),
        PrimitiveType::TimestampNtz => Some(local(a)?.cmp(&local(b)?)),
        _ => None,
    }
}

fn date(value: &Value) -> Option<NaiveDate> {
    NaiveDate::parse_from_str(value.as_str()?, "%Y-%m-%d").ok()
}

fn instant(value: &Value) -> Option<DateTime<chrono::FixedOffset>> {
    DateTime::parse_from_rfc3339(value.as_str()?).ok()
}

fn local(value: &Value) -> Option<NaiveDateTime> {
    let text = value.as_str()?;
    let text = text.strip_suffix('Z').unwrap_or(text);
    NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S%.f")
        .or_else(|_| NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f"))
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use deltalake::kernel::StructField;
    use serde_json::json;

    fn schema() -> StructType {
        StructType::try_new(vec![
            StructField::new("id", DataType::LONG, false),
            StructField::new("name", DataType::STRING, true),
            StructField::new("at", DataType::TIMESTAMP, true),
            StructField::new(
                "nested",
                DataType::Struct(Box::new(
                    StructType::try_new(vec![StructField::new("x", DataType::DOUBLE, true)])
                        .expect("schema"),
                )),
                true,
            ),
        ])
        .expect("schema")
    }

    #[test]
    fn bounds_widen_counts_add_and_values_are_taken_verbatim() {
        let a = json!({"numRecords": 3, "nullCount": {"id": 0, "name": 1, "at": 0, "nested": {"x": 0}},
            "minValues": {"id": 5, "name": "b", "at": "2024-01-01T00:00:00Z", "nested": {"x": 1.5}},
            "maxValues": {"id": 9, "name": "d", "at": "2024-01-01T00:00:00.500Z", "nested": {"x": 2.0}}});
        let b = json!({"numRecords": 2, "nullCount": {"id": 0, "name": 0, "at": 0, "nested": {"x": 1}},
            "minValues": {"id": -1, "name": "c", "at": "2023-12-31T23:00:00.000Z", "nested": {"x": 0.5}},
            "maxValues": {"id": 7, "name": "e", "at": "2024-01-01T00:00:00.000Z", "nested": {"x": 0.5}}});
        let merged = merge(&[a, b], &schema(), Naming::Logical).expect("mergeable");
        assert_eq!(
            merged,
            json!({"numRecords": 5,
                "nullCount": {"id": 0, "name": 1, "at": 0, "nested": {"x": 1}},
                "minValues": {"id": -1, "name": "b", "at": "2023-12-31T23:00:00.000Z", "nested": {"x": 0.5}},
                "maxValues": {"id": 9, "name": "e", "at": "2024-01-01T00:00:00.500Z", "nested": {"x": 2.0}}})
        );
    }

    #[test]
    fn a_bound_missing_from_one_input_is_dropped_unless_its_column_is_all_null() {
        let a = json!({"numRecords": 2, "nullCount": {"id": 0, "name": 2},
            "minValues": {"id": 1}, "maxValues": {"id": 2}});
        let b = json!({"numRecords": 2, "nullCount": {"id": 0, "name": 0},
            "minValues": {"id": 3, "name": "x"}, "maxValues": {"id": 4, "name": "y"}});
        let merged = merge(&[a.clone(), b], &schema(), Naming::Logical).expect("mergeable");
        assert_eq!(merged["minValues"], json!({"id": 1, "name": "x"}));
        let c = json!({"numRecords": 2, "nullCount": {"id": 0, "name": 1},
            "minValues": {"id": 3}, "maxValues": {"id": 4}});
        let merged = merge(&[a, c], &schema(), Naming::Logical).expect("mergeable");
        assert_eq!(merged["maxValues"], json!({"id": 4}));
        assert_eq!(merged["nullCount"], json!({"id": 0, "name": 3}));
    }

    #[test]
    fn statistics_that_cannot_be_compared_refuse_the_merge() {
        let decimal = StructType::try_new(vec![StructField::new(
            "amount",
            DataType::decimal(38, 2).expect("decimal"),
            true,
        )])
        .expect("schema");
        let a =
            json!({"numRecords": 1, "minValues": {"amount": 1.5}, "maxValues": {"amount": 1.5}});
        assert!(merge(&[a.clone(), a.clone()], &decimal, Naming::Logical).is_err());
        let no_records = json!({"minValues": {}});
        assert!(merge(&[a, no_records], &decimal, Naming::Logical).is_err());
    }
}
