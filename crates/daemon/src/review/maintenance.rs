//! What a change of a table's maintenance settings does (`plan --base`): for each operation,
//! how often it runs per day before and after (from its schedule, enabled or not, paused or
//! not), and its cost per day from what its jobs measured ([`Measured`]); without a job store
//! to read, or without a measured job of it, the estimate says "not measured yet" rather
//! than guess.

use chrono::{DateTime, Utc};
use tablekeeper_inventory::{Operation, TableSpec};

use crate::review::measured::Measured;
use crate::review::model::{Consequence, Kind, Severity};
use crate::review::runs::runs_per_day;

/// One consequence per operation whose runs per day changed, and the settings that
/// changed without changing the runs (thresholds, layout) as one line.
pub(crate) fn consequences(
    before: &TableSpec,
    after: &TableSpec,
    measured: &Measured,
    now: DateTime<Utc>,
) -> Vec<Consequence> {
    let mut out = Vec::new();
    for op in Operation::SCHEDULED {
        let (was, will) = (runs_per_day(before, op, now), runs_per_day(after, op, now));
        if was == will {
            continue;
        }
        let schedule = |spec: &TableSpec| {
            spec.schedule(op)
                .map_or_else(String::new, |s| format!(" (`{}`)", s.as_str()))
        };
        out.push(Consequence::new(
            Kind::Maintenance,
            Severity::Info,
            format!(
                "{op}: {} → {}{}{}; {}",
                per_day(was),
                per_day(will),
                if before.schedule(op).map(|s| s.as_str()) != after.schedule(op).map(|s| s.as_str())
                {
                    format!(", schedule{} →{}", schedule(before), schedule(after))
                } else {
                    String::new()
                },
                paused_note(before, after, op),
                cost(measured, op, before, after, now)
            ),
        ));
    }
    out
}

/// The cost per day of `op` before and after, as measured.
fn cost(
    measured: &Measured,
    op: Operation,
    before: &TableSpec,
    after: &TableSpec,
    now: DateTime<Utc>,
) -> String {
    match (
        measured.per_day(op, Some(before), Some(before), now),
        measured.per_day(op, Some(before), Some(after), now),
    ) {
        (Some(was), Some(will)) => format!(
            "estimated cost per day ${was:.4} → ${will:.4} (from its jobs' measured costs over the last {} days)",
            crate::review::measured::WINDOW_DAYS
        ),
        _ => "estimated cost per day: not measured yet (no job of it in the job store)".into(),
    }
}

fn per_day(runs: f64) -> String {
    if runs == 0.0 {
        "never".into()
    } else if runs >= 1.0 {
        format!("{runs:.0} run(s) a day")
    } else {
        format!("1 run every {:.0} days", 1.0 / runs)
    }
}

fn paused_note(before: &TableSpec, after: &TableSpec, op: Operation) -> &'static str {
    match (
        before.paused || !before.operation_enabled(op),
        after.paused || !after.operation_enabled(op),
    ) {
        (false, true) => " (paused or disabled)",
        (true, false) => " (resumed or enabled)",
        _ => "",
    }
}
