//! What `plan --base` reports (DESIGN.md "CLI", the pull-request view): the tables whose
//! effective settings changed, were added or were removed, each with its setting changes and
//! their consequences; the count of blocking problems; the estimated cost per day per owner.
//! These types are the JSON contract; `render.rs` turns them into text and markdown.

use std::collections::BTreeMap;

use serde::Serialize;

/// The whole review.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Review {
    pub tables: Vec<TableChange>,
    /// Consequences of severity `blocking`, over every table.
    pub blocking: usize,
    /// Estimated maintenance cost per day in USD, per owner, before and after the change;
    /// `null` where nothing was measured yet.
    pub cost_per_day: BTreeMap<String, CostChange>,
    /// The fleet's `budget:`, when the change touches it; `null` otherwise.
    pub budget: Option<BudgetChange>,
}

/// A change of the inventory's `budget:`: its settings (`budget.window`, `budget.cpu_seconds`,
/// `budget.mode`, `budget.owners.<owner>`) and what the change will do.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct BudgetChange {
    pub settings: Vec<SettingChange>,
    pub consequences: Vec<Consequence>,
}

impl Review {
    /// Adds `table` and counts its blocking consequences.
    pub(crate) fn push(&mut self, table: TableChange) {
        self.blocking += table
            .consequences
            .iter()
            .filter(|c| c.severity == Severity::Blocking)
            .count();
        self.tables.push(table);
    }
}

/// One table the change touches.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct TableChange {
    pub table: String,
    pub owner: String,
    pub change: Change,
    pub settings: Vec<SettingChange>,
    pub consequences: Vec<Consequence>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Change {
    Added,
    Removed,
    Changed,
}

impl Change {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Change::Added => "added",
            Change::Removed => "removed",
            Change::Changed => "changed",
        }
    }
}

/// One effective setting (defaults applied), by its dotted key, before and after; `null` on
/// the side where it is absent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct SettingChange {
    pub key: String,
    pub before: serde_json::Value,
    pub after: serde_json::Value,
}

/// What a change will do, and how much it matters.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Consequence {
    pub kind: Kind,
    pub severity: Severity,
    pub message: String,
}

impl Consequence {
    pub(crate) fn new(kind: Kind, severity: Severity, message: impl Into<String>) -> Self {
        Consequence {
            kind,
            severity,
            message: message.into(),
        }
    }
}

/// How much a consequence matters: `blocking` stops the merge (exit 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Severity {
    Blocking,
    Warning,
    Info,
}

impl Severity {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Severity::Blocking => "blocking",
            Severity::Warning => "warning",
            Severity::Info => "info",
        }
    }
}

/// The kinds of consequence, a closed set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Kind {
    /// Versions stop restoring, files become deletable, log commits become deletable.
    RetentionShortened,
    /// More is kept on storage, at a price per month.
    RetentionLengthened,
    /// A declared reader's queries outlast the new VACUUM window.
    ReaderUnprotected,
    /// A pin or a declared clone loses what protected it.
    PinOrCloneUnprotected,
    /// A declared reader cannot read the table's features.
    ReaderIncompatible,
    /// A reader's engine or version is not in the compatibility table.
    ReaderUnknown,
    /// Schedules, thresholds or layout changed: what runs, how often, at what cost.
    Maintenance,
    /// A new table: what maintenance does first.
    FirstMaintenance,
    /// An operation that will be refused on the table.
    Refusal,
    /// A removed table: what stops.
    Stops,
    /// The table's log cannot be read: the consequences that need it are unknown.
    Unreadable,
    /// The fleet's budget: how often the measured maintenance passed it, and what then waits.
    Budget,
}

/// Estimated cost per day, in USD.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub(crate) struct CostChange {
    pub before: Option<f64>,
    pub after: Option<f64>,
}
