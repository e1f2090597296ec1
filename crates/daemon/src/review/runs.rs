//! How often a table's operation runs by its schedule: the one count the review's
//! maintenance, lifecycle and cost consequences share.

use chrono::{DateTime, Duration as ChronoDuration, Utc};
use tablekeeper_inventory::{Operation, TableSpec};

/// The days over which runs per day are counted (a weekly schedule shows as 1/7).
const DAYS: i64 = 7;

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
