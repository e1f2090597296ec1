//! The statistics rule of the `collations` writer feature (Delta's collated string type).
//!
//! A collation changes how strings compare, not how they are stored. Top-level `minValues` and
//! `maxValues` are binary-collation statistics: for a string column with another collation they
//! are wrong (`'B' < 'a'` in binary, not in `UTF8_LCASE`), and the protocol keeps that column's
//! bounds under `statsWithCollation`, keyed by the collation that collected them. tablekeeper
//! collects no collation's bounds, so every file it adds leaves a collated column out of
//! `minValues` and `maxValues` (its `nullCount` stays: nulls do not depend on a collation).
//!
//! Owns finding the collated columns in a table's schema ([`collated_columns`]: the RFC's
//! `collations` field metadata and the `__COLLATIONS` key Spark and Databricks write) and taking
//! their bounds out of an `add.stats` ([`withhold_bounds`]). The domain metadata a collated
//! table carries is never touched: tablekeeper writes no domain but row tracking's.

use serde_json::Value;

const BINARY_COLLATIONS: &[&str] = &["spark.UTF8_BINARY", "UTF8_BINARY"];
const COLUMN_MAPPING_PHYSICAL_NAME: &str = "delta.columnMapping.physicalName";

/// The statistics paths (physical names on a column-mapped table) of every column whose values
/// compare under a collation other than binary, in `schema` (the table's schema as the log
/// writes it).
pub(crate) fn collated_columns(schema: &Value, mapped: bool) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    walk(schema, mapped, &mut Vec::new(), &mut out);
    out
}

fn walk(struct_type: &Value, mapped: bool, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    let Some(fields) = struct_type.get("fields").and_then(Value::as_array) else {
        return;
    };
    for field in fields {
        let metadata = field.get("metadata");
        let name = mapped
            .then(|| {
                metadata
                    .and_then(|m| m.get(COLUMN_MAPPING_PHYSICAL_NAME))
                    .and_then(Value::as_str)
            })
            .flatten()
            .or_else(|| field.get("name").and_then(Value::as_str));
        let Some(name) = name else { continue };
        path.push(name.to_owned());
        if metadata.is_some_and(non_binary) {
            out.push(path.clone());
        } else if let Some(inner) = field.get("type").filter(|t| t.is_object()) {
            walk(inner, mapped, path, out);
        }
        path.pop();
    }
}

/// Whether a field's metadata names a collation other than binary, anywhere under its
/// `collations` (the RFC's) or `__COLLATIONS` (Spark's) key.
fn non_binary(metadata: &Value) -> bool {
    fn any_collation(value: &Value) -> bool {
        match value {
            Value::String(collation) => !BINARY_COLLATIONS
                .iter()
                .any(|b| collation.eq_ignore_ascii_case(b)),
            Value::Object(map) => map.values().any(any_collation),
            _ => false,
        }
    }
    ["collations", "__COLLATIONS"]
        .iter()
        .filter_map(|key| metadata.get(key))
        .any(any_collation)
}

/// `stats` (an `add.stats` JSON text) without the `minValues` and `maxValues` of `columns`;
/// unchanged (the same text) when none of them has bounds there.
pub(crate) fn withhold_bounds(stats: &str, columns: &[Vec<String>]) -> Option<String> {
    let mut parsed: Value = serde_json::from_str(stats).ok()?;
    let mut removed = false;
    for bounds in ["minValues", "maxValues"] {
        for column in columns {
            removed |= remove_path(parsed.get_mut(bounds), column);
        }
    }
    removed.then(|| parsed.to_string())
}

fn remove_path(node: Option<&mut Value>, path: &[String]) -> bool {
    let (Some(Value::Object(map)), Some((first, rest))) = (node, path.split_first()) else {
        return false;
    };
    if rest.is_empty() {
        return map.remove(first).is_some();
    }
    remove_path(map.get_mut(first), rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The schema of Databricks' `collations-table` (tests/data/reference), plus a nested one.
    fn schema() -> Value {
        serde_json::json!({"type": "struct", "fields": [
            {"name": "id", "type": "integer", "nullable": true, "metadata": {}},
            {"name": "utf8_binary_col", "type": "string", "nullable": true, "metadata": {}},
            {"name": "utf8_lcase_col", "type": "string", "nullable": true,
             "metadata": {"__COLLATIONS": {"utf8_lcase_col": "spark.UTF8_LCASE"}}},
            {"name": "unicode_col", "type": "string", "nullable": true,
             "metadata": {"__COLLATIONS": {"unicode_col": "icu.UNICODE"}}},
            {"name": "s", "type": {"type": "struct", "fields": [
                {"name": "binary", "type": "string", "nullable": true,
                 "metadata": {"collations": {"collation": "spark.UTF8_BINARY"}}},
                {"name": "german", "type": "string", "nullable": true,
                 "metadata": {"collations": {"collation": "ICU.de_DE.73"}}}
            ]}, "nullable": true, "metadata": {}}
        ]})
    }

    #[test]
    fn non_binary_collations_are_found_at_any_depth() {
        assert_eq!(
            collated_columns(&schema(), false),
            vec![
                vec!["utf8_lcase_col".to_owned()],
                vec!["unicode_col".to_owned()],
                vec!["s".to_owned(), "german".to_owned()],
            ]
        );
    }

    #[test]
    fn bounds_are_withheld_and_null_counts_kept() {
        let stats = r#"{"numRecords":2,"minValues":{"id":1,"utf8_lcase_col":"A","s":{"german":"ä","binary":"a"}},"maxValues":{"id":2,"utf8_lcase_col":"b","s":{"german":"z","binary":"b"}},"nullCount":{"id":0,"utf8_lcase_col":0,"s":{"german":0,"binary":0}}}"#;
        let out: Value = serde_json::from_str(
            &withhold_bounds(stats, &collated_columns(&schema(), false)).expect("changed"),
        )
        .unwrap();
        assert_eq!(
            out["minValues"],
            serde_json::json!({"id": 1, "s": {"binary": "a"}})
        );
        assert_eq!(
            out["maxValues"],
            serde_json::json!({"id": 2, "s": {"binary": "b"}})
        );
        assert_eq!(out["nullCount"]["utf8_lcase_col"], 0);
        assert_eq!(out["numRecords"], 2);
        assert_eq!(
            withhold_bounds(
                r#"{"numRecords":1,"minValues":{"id":1}}"#,
                &[vec!["x".into()]]
            ),
            None
        );
    }
}
