//! Drift: where the live table disagrees with what the inventory declares (retention
//! windows, protocol features, partitioning), or a UniForm table's Iceberg view with its Delta
//! log. Pure: compares an inventory entry with a probe.

use std::time::Duration;

use serde::Serialize;
use tablekeeper_delta::Probe;
use tablekeeper_inventory::TableSpec;
use tablekeeper_vocab::DriftKind;

/// One detected disagreement, explained.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct Drift {
    pub kind: DriftKind,
    pub detail: String,
}

/// Delta's `delta.logRetentionDuration` when a table does not set it.
const DELTA_DEFAULT_LOG_RETENTION: Duration = Duration::from_secs(30 * 86_400);

/// Compares the inventory with the live table.
pub(crate) fn drift(spec: &TableSpec, probe: &Probe) -> Vec<Drift> {
    let mut out = retention_drift(spec, probe);
    out.extend(protocol_drift(spec, probe));
    out.extend(iceberg_drift(probe));
    if spec.layout.partition_by != probe.partition_columns {
        out.push(Drift {
            kind: DriftKind::Partitioning,
            detail: format!(
                "inventory `layout.partition_by` is [{}], the table is partitioned by [{}]",
                spec.layout.partition_by.join(", "),
                probe.partition_columns.join(", ")
            ),
        });
    }
    out
}

/// The VACUUM window and the log retention: inventory, table properties and readers.
fn retention_drift(spec: &TableSpec, probe: &Probe) -> Vec<Drift> {
    let mut out = Vec::new();
    let retention = |detail: String| Drift {
        kind: DriftKind::Retention,
        detail,
    };
    let property = |key: &str| {
        probe
            .properties
            .get(key)
            .and_then(|v| tablekeeper_delta::parse_delta_interval(v).ok())
    };
    if let Some(live) = property("delta.deletedFileRetentionDuration")
        .filter(|live| *live != spec.retention.deleted_file_retention)
    {
        out.push(retention(format!(
            "inventory says deleted_file_retention {}, table property delta.deletedFileRetentionDuration says {}; VACUUM uses the longer",
            humantime::format_duration(spec.retention.deleted_file_retention),
            humantime::format_duration(live)
        )));
    }
    if let Some((reader, longest)) = spec
        .longest_reader()
        .filter(|(_, longest)| *longest > spec.retention.deleted_file_retention)
    {
        out.push(retention(format!(
            "inventory says deleted_file_retention {}, shorter than reader `{reader}`'s \
             max_query_duration {}; VACUUM keeps files for the longer, so raise \
             retention.deleted_file_retention to at least {}",
            humantime::format_duration(spec.retention.deleted_file_retention),
            humantime::format_duration(longest),
            humantime::format_duration(longest)
        )));
    }
    match property("delta.logRetentionDuration") {
        Some(live) if live != spec.retention.log_retention => out.push(retention(format!(
            "inventory says log_retention {}, table property delta.logRetentionDuration says {}; log cleanup uses the longer",
            humantime::format_duration(spec.retention.log_retention),
            humantime::format_duration(live)
        ))),
        Some(_) => {}
        // Other writers clean the log up after every commit with the table's retention, Delta's
        // 30 days when the property is absent: a longer inventory retention is not what they do.
        None if spec.retention.log_retention > DELTA_DEFAULT_LOG_RETENTION => {
            out.push(retention(format!(
                "inventory says log_retention {}, but the table sets no delta.logRetentionDuration, so \
                 other writers delete log files after Delta's default 30 days (tablekeeper keeps their \
                 history in table_commits); set the property to match",
                humantime::format_duration(spec.retention.log_retention)
            )))
        }
        None => {}
    }
    out
}

/// Features declared in `protocol.features` but not on the table, and the other way round.
fn protocol_drift(spec: &TableSpec, probe: &Probe) -> Option<Drift> {
    // Features that writer version 7 lists explicitly but older protocols implied.
    const IMPLICIT: &[&str] = &["appendOnly", "invariants"];
    let live_features: std::collections::BTreeSet<&str> = probe
        .reader_features
        .iter()
        .chain(probe.writer_features.iter())
        .map(String::as_str)
        .collect();
    let missing: Vec<&str> = spec
        .protocol
        .features
        .iter()
        .map(String::as_str)
        .filter(|f| !live_features.contains(f) && !feature_enabled_by_property(probe, f))
        .collect();
    let undeclared: Vec<&str> = live_features
        .iter()
        .copied()
        .filter(|f| !IMPLICIT.contains(f) && !spec.protocol.features.iter().any(|d| d == f))
        .collect();
    let mut parts = Vec::new();
    if !missing.is_empty() {
        parts.push(format!(
            "declared but not on the table: [{}]",
            missing.join(", ")
        ));
    }
    if !undeclared.is_empty() {
        parts.push(format!(
            "on the table but not declared in `protocol.features`: [{}]",
            undeclared.join(", ")
        ));
    }
    (!parts.is_empty()).then(|| Drift {
        kind: DriftKind::Protocol,
        detail: parts.join("; "),
    })
}

/// A UniForm table whose Iceberg metadata reflects an older Delta version than the table's, or
/// none at all. The table's writer converts after its own commits; tablekeeper's commits
/// (rewrites, VACUUM's markers) change no row but leave the Iceberg view at the version before
/// them until that writer commits again. VACUUM keeps every file the Iceberg metadata names.
fn iceberg_drift(probe: &Probe) -> Option<Drift> {
    let detail = match &probe.iceberg {
        None if probe.uniform_iceberg => format!(
            "UniForm is on (delta.universalFormat.enabledFormats names iceberg) but no Iceberg \
             metadata is under metadata/: Iceberg readers cannot read the table until its \
             writer converts it (its next commit, or REORG TABLE … UPGRADE UNIFORM), at version {}",
            probe.version
        ),
        None => return None,
        Some(view) => match view.delta_version {
            Some(converted) if i64::try_from(converted).is_ok_and(|c| c >= probe.version) => {
                return None
            }
            Some(converted) => format!(
                "the Iceberg metadata ({}) reflects Delta version {converted}, the table is at \
                 version {}: Iceberg readers see version {converted} until the table's writer \
                 commits again and converts (tablekeeper's maintenance commits change no rows; \
                 VACUUM keeps every file the Iceberg metadata names)",
                view.metadata_file, probe.version
            ),
            None => format!(
                "the Iceberg metadata ({}) does not say which Delta version it reflects (no \
                 delta-version property), the table is at version {}",
                view.metadata_file, probe.version
            ),
        },
    };
    Some(Drift {
        kind: DriftKind::IcebergMetadata,
        detail,
    })
}

/// Legacy (pre-table-features) protocols turn some features on by table property.
fn feature_enabled_by_property(probe: &Probe, feature: &str) -> bool {
    let key = match feature {
        "changeDataFeed" => "delta.enableChangeDataFeed",
        "deletionVectors" => "delta.enableDeletionVectors",
        "appendOnly" => "delta.appendOnly",
        _ => return false,
    };
    probe
        .properties
        .get(key)
        .is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::planner::tests::{probe, spec};

    fn iceberg(probe: &Probe) -> Vec<String> {
        iceberg_drift(probe).map(|d| d.detail).into_iter().collect()
    }

    #[test]
    fn an_iceberg_view_behind_the_log_drifts_until_the_converter_catches_up() {
        let view = |converted: Option<u64>| {
            serde_json::json!({
                "metadata_file": "metadata/00003-a.metadata.json",
                "delta_version": converted,
            })
        };
        let behind = probe(serde_json::json!({"iceberg": view(Some(8))}));
        let drifted = drift(&spec(""), &behind);
        let found: Vec<_> = drifted
            .iter()
            .filter(|d| d.kind == DriftKind::IcebergMetadata)
            .collect();
        assert_eq!(found.len(), 1, "{drifted:?}");
        assert!(
            found[0].detail.contains("reflects Delta version 8")
                && found[0].detail.contains("at version 10"),
            "{}",
            found[0].detail
        );
        assert!(iceberg(&probe(serde_json::json!({"iceberg": view(Some(10))}))).is_empty());
        assert_eq!(
            iceberg(&probe(serde_json::json!({"iceberg": view(None)}))).len(),
            1
        );
        // UniForm on and no Iceberg metadata yet; a table without UniForm never drifts so
        assert_eq!(
            iceberg(&probe(serde_json::json!({"uniform_iceberg": true}))).len(),
            1
        );
        assert!(iceberg(&probe(serde_json::json!({}))).is_empty());
    }
}
