//! The pull-request view of an inventory change (`tablekeeper plan --inventory HEAD --base
//! BASE`): only the tables whose effective settings (defaults applied) changed, were added or
//! were removed, each with what the change will do (README "Reviewing inventory changes").
//!
//! `base.rs` finds the base inventory (a path, or `git:REF`); `settings.rs` compares effective
//! settings; the consequences come from `retention.rs` (versions, files and log a retention
//! change gives up or keeps), `readers.rs` (whether each declared reader can read the table's
//! features), `maintenance.rs` (runs per day, cost) and `lifecycle.rs` (a table added or
//! removed), `budget.rs` (a change of the fleet's `budget:`); `render.rs` writes text and
//! markdown, the JSON is `model.rs`'s. Only the tables
//! the change touches are read, and only their logs: nothing is written anywhere.

pub(crate) mod base;
mod budget;
mod lifecycle;
mod maintenance;
pub(crate) mod measured;
pub(crate) mod model;
mod readers;
pub(crate) mod render;
mod retention;
mod runs;
mod settings;

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use futures::StreamExt as _;
use tablekeeper_delta::Probe;
use tablekeeper_inventory::{Inventory, Operation, TableSpec};
use tokio_util::sync::CancellationToken;

use crate::config::Prices;
use crate::fleet::{Fleet, FleetOptions, ProbeFailure};
use crate::jobs::executor::{self, RunContext};
use measured::Measured;
use model::{Change, Consequence, CostChange, Review, TableChange};

/// Tables read at once (their logs only).
const READ_CONCURRENCY: usize = 8;

/// The settings that change what maintenance runs and how often.
const MAINTENANCE_KEYS: &[&str] = &[
    "compaction",
    "zorder",
    "vacuum",
    "checkpoint",
    "purge",
    "paused",
    "timezone",
    "layout",
    "writers.rewrites",
    "max_task_bytes",
    "auto_repair",
];

/// The review of `head` against `base`, and the tables that could not be read (name, why).
/// `measured`: what the tables' jobs cost, for the cost per day.
pub(crate) async fn review(
    head: &Inventory,
    base: &Inventory,
    prices: &Prices,
    measured: &Measured,
) -> Result<(Review, Vec<(String, String)>), String> {
    let now = Utc::now();
    let compatibility = readers::Compatibility::shipped()?;
    let pairs = pair(head, base);
    let probes = probe(&pairs).await;
    let mut review = Review::default();
    let mut unreadable = Vec::new();
    for (before, after) in pairs {
        let spec = after.or(before).expect("a pair has a side");
        let probe = probes.get(&spec.name);
        if let Some(Err(failure)) = probe {
            unreadable.push((spec.name.clone(), failure.message.clone()));
        }
        let (change, consequences) = match (before, after) {
            (None, Some(after)) => {
                let probed = probe.cloned().unwrap_or_else(|| Err(not_read()));
                let compaction = first_compaction(after, &probed).await;
                let mut out = lifecycle::added(after, &probed, compaction.as_ref(), now);
                out.extend(reader_consequences(
                    &compatibility,
                    None,
                    after,
                    probed.as_ref().ok(),
                ));
                (Change::Added, out)
            }
            (Some(before), None) => {
                let probed = probe.cloned().unwrap_or_else(|| Err(not_read()));
                (
                    Change::Removed,
                    lifecycle::removed(before, &probed, prices, now),
                )
            }
            (Some(before), Some(after)) => (
                Change::Changed,
                changed(
                    before,
                    after,
                    head,
                    probe,
                    &compatibility,
                    prices,
                    measured,
                    now,
                )
                .await,
            ),
            (None, None) => continue,
        };
        review.push(TableChange {
            table: spec.name.clone(),
            owner: spec.owner.clone(),
            change,
            settings: settings::diff(before, after),
            consequences,
        });
        // what the change does to each owner's cost per day, from the measured costs; an
        // owner with a table never measured has no figure (`None`), never a guess
        let sides = [
            (before, measured.table_per_day(before, before, now)),
            (after, measured.table_per_day(before, after, now)),
        ];
        for (i, (side, _)) in sides.iter().enumerate() {
            let Some(spec) = side else { continue };
            let entry = review
                .cost_per_day
                .entry(spec.owner.clone())
                .or_insert(CostChange {
                    before: Some(0.0),
                    after: Some(0.0),
                });
            let add = |sum: Option<f64>, part: Option<f64>| Some(sum? + part?);
            if i == 0 {
                entry.before = add(entry.before, sides[0].1);
            } else {
                entry.after = add(entry.after, sides[1].1);
            }
        }
    }
    review.budget = budget::review(base.budget.as_ref(), head.budget.as_ref(), measured);
    Ok((review, unreadable))
}

/// (before, after) for every table whose effective settings differ, was added or removed,
/// in the head inventory's order, then the removed ones in the base's.
fn pair<'a>(
    head: &'a Inventory,
    base: &'a Inventory,
) -> Vec<(Option<&'a TableSpec>, Option<&'a TableSpec>)> {
    let mut pairs: Vec<_> = head
        .tables
        .iter()
        .map(|after| (base.table(&after.name), Some(after)))
        .filter(|(before, after)| !settings::diff(*before, *after).is_empty())
        .collect();
    pairs.extend(
        base.tables
            .iter()
            .filter(|before| head.table(&before.name).is_none())
            .map(|before| (Some(before), None)),
    );
    pairs
}

/// Reads the logs of every table a pair names (its latest spec), a few at a time.
async fn probe(
    pairs: &[(Option<&TableSpec>, Option<&TableSpec>)],
) -> BTreeMap<String, Result<Probe, ProbeFailure>> {
    let tables: Vec<TableSpec> = pairs
        .iter()
        .filter_map(|(before, after)| after.or(*before).cloned())
        .collect();
    let fleet = Fleet::new(
        Inventory {
            tables: tables.clone(),
            sources: Vec::new(),
            budget: None,
        },
        FleetOptions::probe_once(),
    );
    futures::stream::iter(&tables)
        .map(|spec| {
            let fleet = &fleet;
            async move { (spec.name.clone(), fleet.probe(spec).await) }
        })
        .buffer_unordered(READ_CONCURRENCY)
        .collect()
        .await
}

/// The consequences of changing `before` into `after`.
#[allow(clippy::too_many_arguments)] // the change, its context, and what it is priced with
async fn changed(
    before: &TableSpec,
    after: &TableSpec,
    head: &Inventory,
    probe: Option<&Result<Probe, ProbeFailure>>,
    compatibility: &readers::Compatibility,
    prices: &Prices,
    measured: &Measured,
    now: DateTime<Utc>,
) -> Vec<Consequence> {
    let probe = probe.and_then(|p| p.as_ref().ok());
    let changes = settings::diff(Some(before), Some(after));
    let preview = match (retention::moved(before, after), probe) {
        (true, Some(_)) => tablekeeper_delta::preview_retention(
            &after.path,
            &retention::settings(before),
            &retention::settings(after),
            &retention::keep(after),
            now,
        )
        .await
        .map_err(|e| tracing::warn!(table = %after.name, error = %e, "cannot preview the retention change"))
        .ok(),
        _ => None,
    };
    let mut out = retention::consequences(before, after, head, preview.as_ref(), prices, now);
    if settings::touches(&changes, &["protocol", "readers"]) {
        out.extend(reader_consequences(
            compatibility,
            Some(before),
            after,
            probe,
        ));
    }
    if settings::touches(&changes, MAINTENANCE_KEYS) {
        out.extend(maintenance::consequences(before, after, measured, now));
    }
    if probe.is_none() {
        out.push(Consequence::new(
            model::Kind::Unreadable,
            model::Severity::Warning,
            "the table's log cannot be read: what the change does to its versions, files and readers is not known",
        ));
    }
    out
}

/// What the declared readers of `after` cannot read of the table's features (live, and
/// declared in `protocol.features`), less what they could not read before the change already.
fn reader_consequences(
    compatibility: &readers::Compatibility,
    before: Option<&TableSpec>,
    after: &TableSpec,
    probe: Option<&Probe>,
) -> Vec<Consequence> {
    let check = |spec: &TableSpec| -> Vec<Consequence> {
        let features = table_features(spec, probe);
        spec.readers
            .iter()
            .flat_map(|r| compatibility.check(r, &features))
            .collect()
    };
    let known = before.map(check).unwrap_or_default();
    check(after)
        .into_iter()
        .filter(|c| !known.contains(c))
        .collect()
}

/// The features a table has, or will have once `spec.protocol.features` is in: its protocol's
/// features, those older protocols turn on by property, and those the inventory declares.
fn table_features(spec: &TableSpec, probe: Option<&Probe>) -> BTreeSet<String> {
    let mut features: BTreeSet<String> = spec.protocol.features.iter().cloned().collect();
    if let Some(p) = probe {
        if p.min_reader_version >= 3 {
            features.insert(readers::TABLE_FEATURES.into());
        }
        features.extend(p.reader_features.iter().cloned());
        features.extend(p.writer_features.iter().cloned());
        let on = |key: &str| {
            p.properties
                .get(key)
                .is_some_and(|v| v.eq_ignore_ascii_case("true"))
        };
        if on("delta.enableDeletionVectors") {
            features.insert("deletionVectors".into());
        }
        if p.properties
            .get(crate::review::readers::COLUMN_MAPPING_MODE)
            .is_some_and(|m| m != "none")
        {
            features.insert("columnMapping".into());
        }
    }
    features
}

/// What the new table's first scheduled compaction would rewrite: the job's own plan, dry.
async fn first_compaction(
    spec: &TableSpec,
    probe: &Result<Probe, ProbeFailure>,
) -> Option<Result<tablekeeper_delta::OpReport, executor::ExecError>> {
    if probe.is_err() || !spec.operation_enabled(Operation::Compact) {
        return None;
    }
    let ctx = RunContext {
        dry_run: true,
        ..RunContext::default()
    };
    Some(executor::run(spec, Operation::Compact, ctx, CancellationToken::new()).await)
}

fn not_read() -> ProbeFailure {
    ProbeFailure {
        kind: tablekeeper_vocab::ProbeFailureKind::Transient,
        message: "not read".into(),
    }
}
