//! What a change of a table's maintenance settings does (`plan --base`): for each operation,
//! how often it runs per day before and after (from its schedule, enabled or not, paused or
//! not), and its estimated CPU, requests and cost per day. Until jobs record what they cost
//! (job `cost`), the estimate says "not measured yet" rather than guess.

use chrono::{DateTime, Duration as ChronoDuration, Utc};
use tablekeeper_inventory::{Operation, TableSpec};

use crate::review::model::{Consequence, Kind, Severity};

/// The days over which runs per day are counted (a weekly schedule shows as 1/7).
const DAYS: i64 = 7;

/// One consequence per operation whose runs per day changed, and the settings that
/// changed without changing the runs (thresholds, layout) as one line.
pub(crate) fn consequences(
    before: &TableSpec,
    after: &TableSpec,
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
                "{op}: {} → {}{}{}; estimated CPU, requests and cost per day: not measured yet",
                per_day(was),
                per_day(will),
                if before.schedule(op).map(|s| s.as_str()) != after.schedule(op).map(|s| s.as_str())
                {
                    format!(", schedule{} →{}", schedule(before), schedule(after))
                } else {
                    String::new()
                },
                paused_note(before, after, op)
            ),
        ));
    }
    out
}

/// Scheduled runs per day of `op` on `spec`: none when paused or disabled.
pub(crate) fn runs_per_day(spec: &TableSpec, op: Operation, now: DateTime<Utc>) -> f64 {
    if spec.paused || !spec.operation_enabled(op) {
        return 0.0;
    }
    let Some(schedule) = spec.schedule(op) else {
        return 0.0;
    };
    let end = now + ChronoDuration::days(DAYS);
    let mut at = now.with_timezone(&spec.timezone);
    let mut runs = 0u32;
    // a schedule firing every second would count forever: a run a minute is the cap
    while let Some(next) = schedule.next_after(at) {
        if next.with_timezone(&Utc) > end || runs > 60 * 24 * DAYS as u32 {
            break;
        }
        runs += 1;
        at = next;
    }
    f64::from(runs) / DAYS as f64
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
