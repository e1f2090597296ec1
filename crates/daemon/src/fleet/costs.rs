//! What a table's probes cost, counted per table apart from its jobs (operation `probe`), and
//! the figures of a probe that a job's outcome compares (DESIGN "Cost and outcome").
//!
//! Each table has one long-lived [`Meter`] its probes run under: the tables the prober keeps
//! loaded were opened under it, so their stores count into it whenever they are read again.
//! The replica reads the meters in periods ([`ProbeMeters::take`]) to count and store them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tablekeeper_delta::cost::Meter;
use tablekeeper_delta::Probe;
use tablekeeper_vocab::{Cost, TableFigures};

/// One meter per table its probes count into, with the owner its costs go to.
#[derive(Debug, Default)]
pub(crate) struct ProbeMeters(Mutex<HashMap<String, (String, Arc<Meter>)>>);

/// What one table's probes cost in a period.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ProbeCost {
    pub table: String,
    pub owner: String,
    pub cost: Cost,
}

impl ProbeMeters {
    /// The meter `table`'s probes run under (its costs go to `owner`, the latest one named).
    pub(crate) fn of(&self, table: &str, owner: &str) -> Arc<Meter> {
        let mut meters = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let entry = meters
            .entry(table.to_owned())
            .or_insert_with(|| (owner.to_owned(), Meter::new()));
        if entry.0 != owner {
            entry.0 = owner.to_owned();
        }
        Arc::clone(&entry.1)
    }

    /// What each table's probes cost since the last call (tables that spent nothing left
    /// out); a table that left the inventory (`known` says no) is dropped once read.
    pub(crate) fn take(&self, known: impl Fn(&str) -> bool) -> Vec<ProbeCost> {
        let mut meters = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let spent = meters
            .iter()
            .map(|(table, (owner, meter))| ProbeCost {
                table: table.clone(),
                owner: owner.clone(),
                cost: meter.take(),
            })
            .filter(|spent| spent.cost != Cost::default())
            .collect();
        meters.retain(|table, _| known(table));
        spent
    }
}

/// A probe's figures as a job's outcome records them.
pub(crate) fn figures(probe: &Probe) -> TableFigures {
    let retained = probe.restore_drill.as_ref().map(|drill| {
        let r = &drill.retained_bytes;
        r.window + r.pin + r.clone
    });
    TableFigures {
        files: Some(probe.files),
        small_files: Some(probe.small_files),
        average_file_bytes: probe.size_bytes.checked_div(probe.files),
        bytes: Some(probe.size_bytes),
        commits_since_checkpoint: Some(probe.commits_since_checkpoint),
        deleted_rows: probe.deletion_vectors_enabled.then_some(probe.deleted_rows),
        retained_bytes: retained,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tablekeeper_vocab::RequestKind;

    #[test]
    fn a_period_takes_what_was_spent_and_forgets_removed_tables() {
        let meters = ProbeMeters::default();
        let a = meters.of("a", "team-a");
        meters.of("b", "team-b");
        a.count(RequestKind::Get, 3);
        let spent = meters.take(|t| t == "a");
        assert_eq!(spent.len(), 1, "b spent nothing");
        assert_eq!(spent[0].owner, "team-a");
        assert_eq!(spent[0].cost.requests.get, 3);
        assert!(
            meters.take(|_| true).is_empty(),
            "a period starts from zero"
        );
        assert!(
            Arc::ptr_eq(&a, &meters.of("a", "team-a")),
            "a kept table keeps its meter"
        );
    }
}
