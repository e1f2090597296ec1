//! Built-in defaults: what a table gets when neither it nor the inventory's `defaults:`
//! block says otherwise. Every default lives here, with where its value comes from.
//!
//! Precedence, field by field: the table's own value, then `defaults:`, then these.
//! This module must never read input; it only states values.

use std::time::Duration;

const HOUR: u64 = 3_600;
const DAY: u64 = 24 * HOUR;

/// Schedules are read in UTC unless told otherwise: no daylight-saving gaps or repeats.
pub const TIMEZONE: chrono_tz::Tz = chrono_tz::Tz::UTC;

/// Compaction nightly at 02:00 (DESIGN.md inventory example), before the 03:00 VACUUM so a
/// VACUUM sees the files compaction just removed as candidates once they age out.
pub const COMPACTION_SCHEDULE: &str = "0 2 * * *";
/// 512 MiB: Delta's own optimized-write `binSize` default (`seeds/delta-lake-guide.txt`,
/// "File sizing, OPTIMIZE and Z-order") and the DESIGN.md example value.
pub const COMPACTION_TARGET_FILE_SIZE: u64 = 512 * 1024 * 1024;
/// `layout.min_average_file_size` defaults to the compaction target divided by this: a table
/// whose files average under a quarter of the target is slow well before it is compacted.
pub const MIN_AVERAGE_FILE_SIZE_DIVISOR: u64 = 4;
/// Fewer than 10 small files is not worth a rewrite (DESIGN.md example value).
pub const COMPACTION_MIN_SMALL_FILES: u32 = 10;

/// Z-order weekly, Sunday 04:00 (DESIGN.md example): it rewrites whole partitions, so it
/// runs rarely and after the Sunday 03:00 VACUUM.
pub const ZORDER_SCHEDULE: &str = "0 4 * * 0";

/// VACUUM weekly, Sunday 03:00 (DESIGN.md example): with a 7-day retention, weekly
/// reclaims each removed file at most a week after it became eligible.
pub const VACUUM_SCHEDULE: &str = "0 3 * * 0";
/// Every 4th VACUUM is a full directory listing: with the weekly schedule that is about
/// monthly, inside the 30-day default log retention, as Databricks requires a FULL vacuum
/// within the log retention before LITE runs (DESIGN.md, known hazards).
pub const VACUUM_FULL_EVERY: u32 = 4;

/// Checkpoint check every 30 minutes (DESIGN.md example); cheap when nothing is due.
pub const CHECKPOINT_SCHEDULE: &str = "*/30 * * * *";
/// 100 commits (DESIGN.md example value): writers checkpoint every tenth commit by default
/// (`seeds/delta-lake-guide.txt`), so 100 commits without one means the writers do not,
/// and tablekeeper steps in.
pub const CHECKPOINT_MAX_COMMITS: u64 = 100;

/// Purge daily at 05:00 (DESIGN.md example), after the night's compaction and VACUUM; it
/// runs only where files carry deletion vectors, and only when the need check says so.
pub const PURGE_SCHEDULE: &str = "0 5 * * *";

/// Three attempts per job (DESIGN.md example): a commit conflict is usually gone on retry.
pub const MAX_ATTEMPTS: u32 = 3;
/// Two hours per attempt (DESIGN.md example): a large OPTIMIZE on 2 cores takes tens of
/// minutes; longer than that means something is stuck.
pub const TIMEOUT: Duration = Duration::from_secs(2 * HOUR);

/// `maintenance.max_task_bytes`: a rewrite job's tasks read at most this much each (8 GiB,
/// minutes of one core's work, so a lost task costs little and many replicas share a job).
pub const MAX_TASK_BYTES: u64 = 8 * 1024 * 1024 * 1024;

/// Delta's default `delta.deletedFileRetentionDuration` (`interval 1 week`).
pub const DELETED_FILE_RETENTION: Duration = Duration::from_secs(7 * DAY);
/// Delta's default `delta.logRetentionDuration` (`interval 30 days`).
pub const LOG_RETENTION: Duration = Duration::from_secs(30 * DAY);
/// Delta refuses VACUUM below 168 hours unless `retentionDurationCheck` is disabled; the
/// inventory mirrors that with `allow_short_retention`.
pub const MIN_SAFE_RETENTION: Duration = Duration::from_secs(7 * DAY);

/// Stale writes are repaired automatically: the table shows rows its writer deleted until
/// they are, and the repair is exact or not done at all (DESIGN.md, known hazards).
pub const AUTO_REPAIR: bool = true;

/// Optimized writes are a writer setting; tablekeeper assumes none unless declared.
pub const OPTIMIZE_WRITE: bool = false;

/// `maintenance.importance`: a table matters as much as any other unless declared.
pub const IMPORTANCE: crate::model::Importance = crate::model::Importance::Normal;

/// `budget.window`: an hour (DESIGN.md, "Budget (contract)"), long enough for a large
/// compaction to fit inside one window, short enough that a deferral waits at most that.
pub const BUDGET_WINDOW: Duration = Duration::from_secs(HOUR);
/// The shortest `budget.window`, one minute (the floor the inventory contract sets): most
/// maintenance jobs run longer than that, and a window that ends long before the jobs it
/// admitted can no longer bound what they spend.
pub const MIN_BUDGET_WINDOW: Duration = Duration::from_secs(60);
/// `budget.mode`: shadow (DESIGN.md, "Budget (contract)"), so a new budget shows what it
/// would defer before it defers anything.
pub const BUDGET_MODE: crate::model::BudgetMode = crate::model::BudgetMode::Shadow;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::Schedule;

    #[test]
    fn builtin_schedules_are_valid() {
        for s in [
            COMPACTION_SCHEDULE,
            ZORDER_SCHEDULE,
            VACUUM_SCHEDULE,
            CHECKPOINT_SCHEDULE,
            PURGE_SCHEDULE,
        ] {
            assert!(Schedule::parse(s).is_ok(), "{s}");
        }
        assert!(DELETED_FILE_RETENTION >= MIN_SAFE_RETENTION);
        assert!(LOG_RETENTION >= DELETED_FILE_RETENTION);
    }
}
