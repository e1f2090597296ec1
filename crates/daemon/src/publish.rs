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
        for op in Operation::SCHEDULED {
            if !spec.operation_enabled(op) {
                continue;
            }
            if !crate::erasure::applies(op, state.probe.as_deref()) {
                metrics.hide_operation(name, op);
                continue;
            }
            metrics.set_operation(
                name,
                op,
                OperationFigures {
                    last_success: fleet::last_success(state, op),
                    staleness: fleet::staleness(state, op, now),
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
        pending: crate::erasure::erasure_pending(probe, now),
    };
    let asked = spec.retention.erasure_deadline.is_some()
        || crate::erasure::uses_deletion_vectors(probe)
        || figures != ErasureFigures::default();
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
        commits_per_hour: probe.history.commits_per_hour,
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
