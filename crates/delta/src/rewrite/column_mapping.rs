//! Physical column names for the files of column-mapped tables (`delta.columnMapping.mode`
//! `name` or `id`).
//!
//! A column-mapped table names its columns twice: readers and the inventory see logical names,
//! data files hold physical ones (`col-5f4…`), each with the column's field id, and statistics
//! and partition values are keyed by physical names. The rewrite scan reads logical columns;
//! [`PhysicalNames`] turns what it read into what a file of the table must hold before the
//! writer sees it: every column (nested struct fields too) under its physical name with its
//! field id as the Parquet `field_id`, the data unchanged. A rename or a drop changes only the
//! logical schema, so files written before and after either hold the same physical names.
//! The log keys partition values by physical names too; [`partition_names`] and
//! [`logical_values`] give them the logical names plans and filters use.

use std::collections::HashMap;
use std::sync::Arc;

use delta_kernel::schema::{DataType as KernelType, MetadataValue, StructField, StructType};
use deltalake::arrow::array::{make_array, Array, ArrayRef, RecordBatch};
use deltalake::arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef};
use deltalake::arrow::error::ArrowError;
use deltalake::kernel::EagerSnapshot;
use deltalake::parquet::arrow::PARQUET_FIELD_ID_META_KEY;

/// Table property naming the column mapping mode.
pub(crate) const MODE_PROPERTY: &str = "delta.columnMapping.mode";
const PHYSICAL_NAME_KEY: &str = "delta.columnMapping.physicalName";
const ID_KEY: &str = "delta.columnMapping.id";
/// Field ids of the array elements and map keys and values inside a column (IcebergCompatV2):
/// keyed `<physical name>.element`, `<physical name>.key.element`… The protocol names the key
/// `parquet.field.nested.ids`; Spark writes `delta.columnMapping.nested.ids`.
const NESTED_ID_KEYS: &[&str] = &["delta.columnMapping.nested.ids", "parquet.field.nested.ids"];

/// Whether a table with these properties maps its columns.
pub(crate) fn is_mapped(properties: &HashMap<String, String>) -> bool {
    properties
        .get(MODE_PROPERTY)
        .is_some_and(|mode| !mode.eq_ignore_ascii_case("none"))
}

/// The logical names of a column-mapped table's partition columns by their physical names
/// (the keys of `partitionValues` in its log); empty for a table that does not map columns.
pub(crate) fn partition_names(snapshot: &EagerSnapshot) -> HashMap<String, String> {
    let metadata = snapshot.metadata();
    if !is_mapped(metadata.configuration()) {
        return HashMap::new();
    }
    let partitions = metadata.partition_columns();
    logical_names(snapshot.schema().as_ref())
        .into_iter()
        .filter(|(_, logical)| partitions.contains(logical))
        .collect()
}

/// The logical names of `schema`'s top-level columns by their physical names (empty when no
/// column carries one).
pub(crate) fn logical_names(schema: &StructType) -> HashMap<String, String> {
    schema
        .fields()
        .filter_map(|field| match field.metadata().get(PHYSICAL_NAME_KEY) {
            Some(MetadataValue::String(physical)) => Some((physical.clone(), field.name().clone())),
            _ => None,
        })
        .collect()
}

/// `values` (a file's `partitionValues`) keyed by logical names under `names` (from
/// [`partition_names`]); unchanged when `names` is empty.
pub(crate) fn logical_values(
    values: HashMap<String, Option<String>>,
    names: &HashMap<String, String>,
) -> HashMap<String, Option<String>> {
    if names.is_empty() {
        return values;
    }
    values
        .into_iter()
        .map(|(key, value)| (names.get(&key).cloned().unwrap_or(key), value))
        .collect()
}

/// The physical schema of a column-mapped table's files, and the top-level names it maps.
#[derive(Debug, Clone)]
pub(crate) struct PhysicalNames {
    schema: SchemaRef,
    physical: HashMap<String, String>,
}

impl PhysicalNames {
    /// The physical form of `logical` (the rewrite scan's schema) under `table` (the table's
    /// logical schema, with its column mapping metadata); the columns named in `unmapped`
    /// (row tracking's materialized columns, already physical) stay as they are. Fails naming
    /// the column that carries no physical name or id.
    pub(crate) fn new(
        logical: &Schema,
        table: &StructType,
        unmapped: &[String],
    ) -> Result<PhysicalNames, String> {
        let mut physical = HashMap::new();
        let mut fields = Vec::with_capacity(logical.fields().len());
        for field in logical.fields() {
            if unmapped.contains(field.name()) {
                fields.push(field.as_ref().clone());
                continue;
            }
            let kernel = table
                .field(field.name())
                .ok_or_else(|| format!("column `{}` is not in the table's schema", field.name()))?;
            let mapped = physical_field(field, kernel)?;
            physical.insert(field.name().clone(), mapped.name().clone());
            fields.push(mapped);
        }
        Ok(PhysicalNames {
            schema: Arc::new(Schema::new_with_metadata(
                fields,
                logical.metadata().clone(),
            )),
            physical,
        })
    }

    /// The files' schema.
    pub(crate) fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    /// The physical name of top-level column `logical` (itself when it is not mapped).
    pub(crate) fn name<'a>(&'a self, logical: &'a str) -> &'a str {
        self.physical.get(logical).map_or(logical, String::as_str)
    }

    /// `batch` (rows of the logical schema) under the physical schema; no value is copied.
    pub(crate) fn batch(&self, batch: &RecordBatch) -> Result<RecordBatch, ArrowError> {
        let columns = batch
            .columns()
            .iter()
            .zip(self.schema.fields())
            .map(|(column, field)| retype(column, field.data_type()))
            .collect::<Result<Vec<_>, _>>()?;
        RecordBatch::try_new(Arc::clone(&self.schema), columns)
    }
}

/// `field` under its physical name and field id, nested struct fields likewise.
fn physical_field(field: &Field, kernel: &StructField) -> Result<Field, String> {
    let name = match kernel.metadata().get(PHYSICAL_NAME_KEY) {
        Some(MetadataValue::String(name)) => name.clone(),
        _ => {
            return Err(format!(
                "column `{}` has no `{PHYSICAL_NAME_KEY}` in the table's schema",
                kernel.name()
            ))
        }
    };
    let id = match kernel.metadata().get(ID_KEY) {
        Some(MetadataValue::Number(id)) => *id,
        _ => {
            return Err(format!(
                "column `{}` has no `{ID_KEY}` in the table's schema",
                kernel.name()
            ))
        }
    };
    let nested = NESTED_ID_KEYS
        .iter()
        .find_map(|key| match kernel.metadata().get(*key) {
            Some(MetadataValue::Other(serde_json::Value::Object(ids))) => Some(ids),
            _ => None,
        });
    let data_type = physical_type(
        field.data_type(),
        kernel.data_type(),
        &Nested {
            ids: nested,
            path: name.clone(),
        },
    )?;
    Ok(
        Field::new(name, data_type, field.is_nullable()).with_metadata(HashMap::from([(
            PARQUET_FIELD_ID_META_KEY.to_owned(),
            id.to_string(),
        )])),
    )
}

/// Where a type sits inside its column, for the nested field ids of its elements, keys and
/// values.
struct Nested<'a> {
    ids: Option<&'a serde_json::Map<String, serde_json::Value>>,
    /// `<physical name>[.element|.key|.value]…`
    path: String,
}

impl Nested<'_> {
    /// The element, key or value (`part`) inside this type, and `field` (its arrow field)
    /// with the field id recorded for it, when one is.
    fn child(&self, part: &str, field: Field) -> (Nested<'_>, Field) {
        let path = format!("{}.{part}", self.path);
        let field = match self
            .ids
            .and_then(|ids| ids.get(&path))
            .and_then(serde_json::Value::as_i64)
        {
            Some(id) => {
                let mut metadata = field.metadata().clone();
                metadata.insert(PARQUET_FIELD_ID_META_KEY.to_owned(), id.to_string());
                field.with_metadata(metadata)
            }
            None => field,
        };
        (
            Nested {
                ids: self.ids,
                path,
            },
            field,
        )
    }
}

/// `arrow` with every struct field inside it mapped by `kernel` (the same type, logically), and
/// the elements, keys and values given their nested field ids.
fn physical_type(
    arrow: &DataType,
    kernel: &KernelType,
    at: &Nested<'_>,
) -> Result<DataType, String> {
    Ok(match (arrow, kernel) {
        (DataType::Struct(fields), KernelType::Struct(st)) => {
            let mapped = fields
                .iter()
                .map(|f| {
                    let k = st.field(f.name()).ok_or_else(|| {
                        format!("nested field `{}` is not in the schema", f.name())
                    })?;
                    physical_field(f, k)
                })
                .collect::<Result<Vec<_>, _>>()?;
            DataType::Struct(Fields::from(mapped))
        }
        (DataType::List(element), KernelType::Array(array)) => {
            let (inner, field) = at.child("element", element.as_ref().clone());
            let data_type = physical_type(element.data_type(), array.element_type(), &inner)?;
            DataType::List(Arc::new(field.with_data_type(data_type)))
        }
        (DataType::LargeList(element), KernelType::Array(array)) => {
            let (inner, field) = at.child("element", element.as_ref().clone());
            let data_type = physical_type(element.data_type(), array.element_type(), &inner)?;
            DataType::LargeList(Arc::new(field.with_data_type(data_type)))
        }
        (DataType::Map(entries, sorted), KernelType::Map(mt)) => {
            let DataType::Struct(kv) = entries.data_type() else {
                return Ok(arrow.clone());
            };
            let (Some(key), Some(value)) = (kv.first(), kv.get(1)) else {
                return Ok(arrow.clone());
            };
            let (key_at, key_field) = at.child("key", key.as_ref().clone());
            let (value_at, value_field) = at.child("value", value.as_ref().clone());
            let kv = Fields::from(vec![
                key_field.with_data_type(physical_type(key.data_type(), mt.key_type(), &key_at)?),
                value_field.with_data_type(physical_type(
                    value.data_type(),
                    mt.value_type(),
                    &value_at,
                )?),
            ]);
            DataType::Map(
                Arc::new(
                    entries
                        .as_ref()
                        .clone()
                        .with_data_type(DataType::Struct(kv)),
                ),
                *sorted,
            )
        }
        _ => arrow.clone(),
    })
}

/// `array` under `to`, a type of the same layout with other field names: the buffers are
/// shared, only the type (and its children's) changes.
fn retype(array: &ArrayRef, to: &DataType) -> Result<ArrayRef, ArrowError> {
    if array.data_type() == to {
        return Ok(Arc::clone(array));
    }
    let data = array.to_data();
    let child_types: Vec<DataType> = match to {
        DataType::Struct(fields) => fields.iter().map(|f| f.data_type().clone()).collect(),
        DataType::List(f) | DataType::LargeList(f) | DataType::Map(f, _) => {
            vec![f.data_type().clone()]
        }
        _ => Vec::new(),
    };
    let children = data
        .child_data()
        .iter()
        .zip(&child_types)
        .map(|(child, ty)| retype(&make_array(child.clone()), ty).map(|a| a.to_data()))
        .collect::<Result<Vec<_>, _>>()?;
    let rebuilt = data
        .into_builder()
        .data_type(to.clone())
        .child_data(children)
        .build()?;
    Ok(make_array(rebuilt))
}

#[cfg(test)]
mod tests {
    use super::*;

    use deltalake::arrow::array::{Int64Array, StringArray, StructArray};

    fn table_schema() -> StructType {
        serde_json::from_str(
            r#"{"type":"struct","fields":[
                {"name":"id","type":"long","nullable":true,"metadata":{
                    "delta.columnMapping.id":1,"delta.columnMapping.physicalName":"col-a"}},
                {"name":"who","type":{"type":"struct","fields":[
                    {"name":"first","type":"string","nullable":true,"metadata":{
                        "delta.columnMapping.id":3,"delta.columnMapping.physicalName":"col-c"}}
                ]},"nullable":true,"metadata":{
                    "delta.columnMapping.id":2,"delta.columnMapping.physicalName":"col-b"}}
            ]}"#,
        )
        .unwrap()
    }

    #[test]
    fn columns_and_nested_fields_take_their_physical_names_and_ids() {
        let first = Field::new("first", DataType::Utf8, true);
        let logical = Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("who", DataType::Struct(vec![first.clone()].into()), true),
        ]);
        let names = PhysicalNames::new(&logical, &table_schema(), &[]).unwrap();
        assert_eq!(names.name("id"), "col-a");
        assert_eq!(names.name("who"), "col-b");
        let schema = names.schema();
        assert_eq!(schema.field(0).metadata()[PARQUET_FIELD_ID_META_KEY], "1");
        let DataType::Struct(inner) = schema.field(1).data_type() else {
            panic!("struct")
        };
        assert_eq!(inner[0].name(), "col-c");
        assert_eq!(inner[0].metadata()[PARQUET_FIELD_ID_META_KEY], "3");

        let who = StructArray::from(vec![(
            Arc::new(first),
            Arc::new(StringArray::from(vec!["ada", "alan"])) as ArrayRef,
        )]);
        let batch = RecordBatch::try_new(
            Arc::new(logical),
            vec![Arc::new(Int64Array::from(vec![1, 2])), Arc::new(who)],
        )
        .unwrap();
        let physical = names.batch(&batch).unwrap();
        assert_eq!(physical.schema(), schema);
        let who = physical
            .column(1)
            .as_any()
            .downcast_ref::<StructArray>()
            .unwrap();
        let first = who
            .column_by_name("col-c")
            .unwrap()
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        assert_eq!(first.value(1), "alan");
    }

    #[test]
    fn a_column_without_a_physical_name_is_named() {
        let schema: StructType = serde_json::from_str(
            r#"{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}}]}"#,
        )
        .unwrap();
        let logical = Schema::new(vec![Field::new("id", DataType::Int64, true)]);
        let err = PhysicalNames::new(&logical, &schema, &[]).unwrap_err();
        assert!(
            err.contains("`id`") && err.contains("physicalName"),
            "{err}"
        );
    }
}
