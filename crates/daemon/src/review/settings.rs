//! A table's effective settings as flat dotted keys (`retention.log_retention`,
//! `compaction.schedule`, ...), with every default applied, and the difference between two
//! inventories' settings of one table. Lists are compared whole (`layout.zorder`, `readers`,
//! `retention.pins`). Where a table is declared (`source`) is no setting.

use std::collections::BTreeMap;

use serde_json::Value;
use tablekeeper_inventory::TableSpec;

use crate::review::model::SettingChange;

/// Every effective setting of `spec`, by dotted key.
pub(crate) fn flatten(spec: &TableSpec) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    if let Ok(Value::Object(fields)) = serde_json::to_value(spec) {
        for (key, value) in fields {
            if key != "source" {
                put(&mut out, key, value);
            }
        }
    }
    out
}

/// `value` as flat dotted keys under `key`.
pub(crate) fn put(out: &mut BTreeMap<String, Value>, key: String, value: Value) {
    match value {
        Value::Object(fields) => {
            for (k, v) in fields {
                put(out, format!("{key}.{k}"), v);
            }
        }
        other => {
            out.insert(key, other);
        }
    }
}

/// The settings that differ between `before` and `after` (either may be absent: a table
/// added or removed), in key order.
pub(crate) fn diff(before: Option<&TableSpec>, after: Option<&TableSpec>) -> Vec<SettingChange> {
    diff_flat(
        &before.map(flatten).unwrap_or_default(),
        &after.map(flatten).unwrap_or_default(),
    )
}

/// The keys whose values differ between two flat settings maps, in key order.
pub(crate) fn diff_flat(
    before: &BTreeMap<String, Value>,
    after: &BTreeMap<String, Value>,
) -> Vec<SettingChange> {
    let keys: std::collections::BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    keys.into_iter()
        .filter_map(|key| {
            let (b, a) = (before.get(key), after.get(key));
            (b != a).then(|| SettingChange {
                key: key.clone(),
                before: b.cloned().unwrap_or(Value::Null),
                after: a.cloned().unwrap_or(Value::Null),
            })
        })
        .collect()
}

/// Whether any changed key starts with one of `prefixes`.
pub(crate) fn touches(changes: &[SettingChange], prefixes: &[&str]) -> bool {
    changes.iter().any(|c| {
        prefixes
            .iter()
            .any(|p| c.key == *p || c.key.starts_with(&format!("{p}.")))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(extra: &str) -> TableSpec {
        let yaml = format!("tables:\n  - name: t\n    path: /data/t\n    owner: o\n{extra}");
        tablekeeper_inventory::Inventory::parse(std::path::Path::new("i.yaml"), &yaml)
            .unwrap()
            .tables[0]
            .clone()
    }

    #[test]
    fn only_effective_differences_are_listed_defaults_applied() {
        let plain = spec("");
        // the default written out changes nothing
        let explicit = spec("    retention: { deleted_file_retention: 7d }\n");
        assert!(diff(Some(&plain), Some(&explicit)).is_empty());
        let shorter_log = spec("    retention: { log_retention: 10d }\n");
        let changes = diff(Some(&plain), Some(&shorter_log));
        assert_eq!(changes.len(), 1, "{changes:?}");
        assert_eq!(changes[0].key, "retention.log_retention");
        assert!(touches(&changes, &["retention"]));
        assert!(!touches(&changes, &["compaction"]));
        let added = diff(None, Some(&plain));
        assert!(added.iter().any(|c| c.key == "path" && c.before.is_null()));
        assert!(added.iter().all(|c| !c.key.starts_with("source")));
    }
}
