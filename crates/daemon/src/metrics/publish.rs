//! Publishes what the replica knows to the metrics: an inventory change becomes series
//! created or removed, each table's state becomes its gauges.
//!
//! The one place where fleet state turns into numbers; data flows fleet → publish →
//! metrics, never back. It decides nothing: the figures are the fleet's (`fleet::state`,
//! `fleet::drift`), computed the same way the API and the dashboard compute them.

use chrono::{DateTime, Utc};
use tablekeeper_delta::Probe;
use tablekeeper_inventory::{Operation, TableSpec};

use crate::fleet::{self, Fleet, InventoryChange};
use crate::metrics::{ErasureFigures, Metrics, OperationFigures, RetainedFigures, TableFigures};

/// Series for a new inventory: removed tables lose all of theirs, every table gets its
/// starting values (operations the inventory disabled lose theirs).
pub(crate) fn inventory(metrics: &Metrics, fleet: &Fleet, change: &InventoryChange) {
    for spec in &change.removed {
        metrics.forget_table(&spec.name);
    }
    let inventory = fleet.inventory();
    for spec in &inventory.tables {
        metrics.table_added(spec);
    }
    metrics.set_inventory_size(inventory.tables.len());
}

/// Staleness, last success, failure streaks, size and drift gauges of one table.
pub(crate) fn table(metrics: &Metrics, fleet: &Fleet, spec: &TableSpec, now: DateTime<Utc>) {
    // under the fleet's read lock, nothing cloned: this runs for every table every few
    // seconds
    fleet.with_state(&spec.name, |state| {
        let name = spec.name.as_str();
        if let Some(probe) = &state.probe {
            metrics.set_table_figures(name, figures(spec, probe, now));
            let drifted: Vec<_> = fleet::drift(spec, probe).iter().map(|d| d.kind).collect();
            metrics.set_drift(name, &drifted);
        }
        // the log's part of a last success is the history's: unknown until it is read (the
        // series keep what they showed, or wait for their first figure)
        let history_known = state.probe.as_deref().is_none_or(Probe::history_known);
        for op in Operation::SCHEDULED {
            if !spec.operation_enabled(op) {
                continue;
            }
            if !crate::policy::erasure::applies(op, state.probe.as_deref()) {
                metrics.hide_operation(name, op);
                continue;
            }
            metrics.set_operation(
                name,
                op,
                OperationFigures {
                    last_success: history_known
                        .then(|| fleet::last_success(state, op))
                        .flatten(),
                    staleness: history_known
                        .then(|| fleet::staleness(state, op, now))
                        .flatten(),
                    consecutive_failures: state.consecutive_failures.get(&op).copied().unwrap_or(0),
                },
            );
        }
    });
}

/// Every table's gauges (staleness grows with time, not with probes).
pub(crate) fn all(metrics: &Metrics, fleet: &Fleet, now: DateTime<Utc>) {
    for spec in &fleet.inventory().tables {
        table(metrics, fleet, spec, now);
    }
}

/// The erasure gauges exist where erasure is a question: the table declares a deadline,
/// uses deletion vectors, or storage still holds deleted rows.
fn erasure_figures(spec: &TableSpec, probe: &Probe, now: DateTime<Utc>) -> Option<ErasureFigures> {
    let figures = ErasureFigures {
        deleted_rows: probe.deleted_rows,
        pending: probe
            .history_known()
            .then(|| crate::policy::erasure::erasure_pending(probe, now)),
    };
    let still_on_storage =
        figures.deleted_rows > 0 || figures.pending.is_some_and(|p| !p.is_zero());
    let asked = spec.retention.erasure_deadline.is_some()
        || crate::policy::erasure::uses_deletion_vectors(probe)
        || still_on_storage;
    asked.then_some(figures)
}

fn figures(spec: &TableSpec, probe: &Probe, now: DateTime<Utc>) -> TableFigures {
    TableFigures {
        erasure: erasure_figures(spec, probe, now),
        files: probe.files,
        size_bytes: probe.size_bytes,
        small_files: probe.small_files,
        version: probe.version,
        commits_since_checkpoint: probe.commits_since_checkpoint,
        commits_per_hour: probe
            .history_known()
            .then_some(probe.history.commits_per_hour),
        average_file_size_low: average_file_size_low(spec, probe),
        unrestorable_versions: probe
            .restore_drill
            .as_ref()
            .map_or(0, |d| d.unrestorable() as u64),
        retained_bytes: probe
            .restore_drill
            .as_ref()
            .map(|d| RetainedFigures {
                window: d.retained_bytes.window,
                pin: d.retained_bytes.pin,
                clone: d.retained_bytes.clone,
            })
            .unwrap_or_default(),
    }
}

/// Whether the table's average active file size is under `layout.min_average_file_size` and
/// compaction could raise it: some partition holds `compaction.min_small_files` small files or
/// more (what a scheduled compaction rewrites). A table whose partitions are simply small, or
/// a dimension table of a few small files, is left alone: nothing would make it better, so an
/// alert on it could only be silenced.
fn average_file_size_low(spec: &TableSpec, probe: &Probe) -> bool {
    probe.files > 0
        && probe.size_bytes / probe.files < spec.layout.min_average_file_size
        && crate::policy::planner::compactable_partitions(spec, probe)
            .next()
            .is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::planner::tests::{probe, spec};

    #[test]
    fn history_figures_wait_for_the_history() {
        let spec = spec("    retention: { erasure_deadline: 30d }\n");
        let now = crate::policy::planner::tests::now();
        // deleted rows wait in files with deletion vectors; the first history read still runs
        let pending = probe(serde_json::json!({
            "history_pending": true, "deleted_rows": 40, "files_with_deletion_vectors": 2,
            "commits_per_hour": 0, "erasure_pending_since": null
        }));
        let figures = figures(&spec, &pending, now);
        let erasure = figures
            .erasure
            .expect("erasure is a question on this table");
        assert_eq!(erasure.deleted_rows, 40, "the snapshot's figure is known");
        assert_eq!(
            erasure.pending, None,
            "not 0: nothing is known of when rows were deleted"
        );
        assert_eq!(figures.commits_per_hour, None);

        let read = probe(serde_json::json!({
            "deleted_rows": 40, "files_with_deletion_vectors": 2, "commits_per_hour": 3,
            "erasure_pending_since": "2026-11-28T12:00:00Z"
        }));
        let figures = super::figures(&spec, &read, now);
        assert_eq!(
            figures.erasure.and_then(|e| e.pending),
            Some(std::time::Duration::from_secs(86_400))
        );
        assert_eq!(figures.commits_per_hour, Some(3));
    }

    #[test]
    fn the_average_file_size_is_low_only_where_compaction_could_raise_it() {
        // 30 files of 100 bytes, min_small_files 10 (default), min average 128 MiB
        let spec = spec("");
        let many_small = probe(serde_json::json!({"small_files_by_partition": {"day=1": 12}}));
        assert!(average_file_size_low(&spec, &many_small));
        // compacted daily partitions: one small file each, nothing left to merge
        let small_partitions = probe(serde_json::json!({
            "small_files_by_partition": {"day=1": 1, "day=2": 1, "day=3": 1}
        }));
        assert!(!average_file_size_low(&spec, &small_partitions));
        // a dimension table of three small files
        let dimension = probe(serde_json::json!({
            "files": 3, "size_bytes": 300, "small_files": 3,
            "small_files_by_partition": {"": 3}
        }));
        assert!(!average_file_size_low(&spec, &dimension));
        // large files: nothing low
        let large = probe(serde_json::json!({
            "files": 30, "size_bytes": 30u64 << 30, "small_files_by_partition": {"day=1": 12}
        }));
        assert!(!average_file_size_low(&spec, &large));
    }
}
