//! What each table's maintenance measured to cost, from the job store's finished jobs over
//! the last [`WINDOW_DAYS`] days (when the review can reach a job store): the ground under
//! `plan --base`'s cost per day. Nothing is guessed: an operation without a measured job has
//! no estimate, and says so.
//!
//! An operation's cost per day is what its jobs cost per day over the window, so runs the
//! need check skipped cost nothing. A schedule change scales it by the scheduled runs per day
//! after over before; an operation with no scheduled run before (its jobs were manual) keeps
//! that cost and adds its measured cost per run times its scheduled runs after (an upper
//! bound: the need check may skip some).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use tablekeeper_inventory::{Operation, TableSpec};
use tablekeeper_store::JobState;

use crate::costs::OperationRow;
use crate::review::runs::runs_per_day;

/// The days of finished jobs the estimates read.
pub(crate) const WINDOW_DAYS: i64 = 30;

/// One operation of one table over the window.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Spent {
    runs: u64,
    usd: f64,
}

/// Measured costs per (table, operation).
#[derive(Debug, Default)]
pub(crate) struct Measured {
    spent: BTreeMap<(String, Operation), Spent>,
    /// Days the window covers (at least one).
    days: f64,
    /// Every finished job with a cost: when it started, its owner, its CPU-seconds (what a
    /// budget window spends).
    jobs: Vec<(DateTime<Utc>, Option<String>, f64)>,
    /// The window's end.
    now: DateTime<Utc>,
}

impl Measured {
    /// Nothing measured (no job store to read).
    pub(crate) fn none() -> Self {
        Measured::default()
    }

    /// From finished jobs of the window ending `now`: succeeded ones with a cost.
    pub(crate) fn from_rows(rows: &[OperationRow], now: DateTime<Utc>) -> Self {
        let mut spent: BTreeMap<(String, Operation), Spent> = BTreeMap::new();
        let mut first = now;
        let jobs = rows
            .iter()
            .filter_map(|r| {
                let cost = r.cost?;
                let at = r.started_at.or(r.finished_at)?;
                Some((at, r.owner.clone(), cost.cpu_seconds))
            })
            .collect();
        for row in rows.iter().filter(|r| r.state == JobState::Succeeded) {
            let Some(cost) = row.cost else { continue };
            let entry = spent.entry((row.table.clone(), row.operation)).or_default();
            entry.runs += 1;
            entry.usd += cost.estimated_usd;
            first = first.min(row.finished_at.unwrap_or(now));
        }
        let days = ((now - first).num_seconds() as f64 / 86_400.0).clamp(1.0, WINDOW_DAYS as f64);
        Measured {
            spent,
            days,
            jobs,
            now,
        }
    }

    /// The CPU-seconds the measured jobs (of `owner`, or all) spent in each `window` (aligned
    /// as budget windows are, to multiples of its length since the epoch) from the first
    /// measured job's to now's, windows without a job included; empty when nothing was
    /// measured.
    pub(crate) fn cpu_per_window(
        &self,
        window: std::time::Duration,
        owner: Option<&str>,
    ) -> Vec<f64> {
        let Some(first) = self.jobs.iter().map(|(at, ..)| *at).min() else {
            return Vec::new();
        };
        let now = self.now;
        let seconds = window.as_secs().max(1) as i64;
        let index = |at: DateTime<Utc>| at.timestamp().div_euclid(seconds);
        let (first, last) = (index(first), index(now.max(first)));
        let mut spent = vec![0.0; usize::try_from(last - first + 1).unwrap_or(1)];
        for (at, job_owner, cpu) in &self.jobs {
            if owner.is_some_and(|o| job_owner.as_deref() != Some(o)) {
                continue;
            }
            if let Some(slot) = usize::try_from(index(*at) - first)
                .ok()
                .and_then(|k| spent.get_mut(k))
            {
                *slot += cpu;
            }
        }
        spent
    }

    /// What `op` on a table costs per day once its settings go from `before` to `after`
    /// (either may be absent: a table added or removed); `None` when not measured.
    pub(crate) fn per_day(
        &self,
        op: Operation,
        before: Option<&TableSpec>,
        after: Option<&TableSpec>,
        now: DateTime<Utc>,
    ) -> Option<f64> {
        let Some(after) = after else {
            return Some(0.0);
        };
        let spent = self.spent.get(&(after.name.clone(), op)).copied()?;
        let scheduled_after = runs_per_day(after, op, now);
        let measured = spent.usd / self.days;
        let scheduled_before = before.map_or(0.0, |b| runs_per_day(b, op, now));
        Some(if scheduled_before > 0.0 {
            measured * scheduled_after / scheduled_before
        } else {
            // what ran was asked for by hand: it goes on, and the schedule adds its runs
            measured + spent.usd / spent.runs.max(1) as f64 * scheduled_after
        })
    }

    /// A table's cost per day over its scheduled operations, `None` when one that runs was
    /// never measured.
    pub(crate) fn table_per_day(
        &self,
        before: Option<&TableSpec>,
        after: Option<&TableSpec>,
        now: DateTime<Utc>,
    ) -> Option<f64> {
        let spec = after.or(before)?;
        let mut sum = 0.0;
        for op in Operation::SCHEDULED {
            let runs = after.map_or(0.0, |a| runs_per_day(a, op, now));
            if runs == 0.0 && !self.spent.contains_key(&(spec.name.clone(), op)) {
                continue;
            }
            sum += self.per_day(op, before, after, now)?;
        }
        Some(sum)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(
        table: &str,
        op: Operation,
        usd: f64,
        days_ago: i64,
        now: DateTime<Utc>,
    ) -> OperationRow {
        OperationRow {
            job_id: tablekeeper_store::JobId(1),
            table: table.into(),
            owner: Some("o".into()),
            operation: op,
            trigger: tablekeeper_store::Trigger::Schedule,
            state: JobState::Succeeded,
            started_at: None,
            finished_at: Some(now - chrono::Duration::days(days_ago)),
            cost: Some(tablekeeper_vocab::Cost {
                estimated_usd: usd,
                ..Default::default()
            }),
            outcome: None,
            estimate: None,
        }
    }

    #[test]
    fn cost_per_day_is_what_was_spent_per_day_scaled_by_the_schedule() {
        let now = Utc::now();
        let spec = |cron: &str| {
            crate::policy::planner::tests::spec(&format!(
                "    maintenance:\n      compaction: {{ schedule: \"{cron}\" }}\n"
            ))
        };
        // ten compactions over ten days: $1 a day
        let rows: Vec<_> = (0..10)
            .map(|d| row(&spec("0 * * * *").name, Operation::Compact, 1.0, d, now))
            .collect();
        let measured = Measured::from_rows(&rows, now);
        let hourly = spec("0 * * * *");
        let twice_hourly = spec("0,30 * * * *");
        let same = measured
            .per_day(Operation::Compact, Some(&hourly), Some(&hourly), now)
            .unwrap();
        assert!((same - 10.0 / 9.0).abs() < 0.2, "{same}");
        let doubled = measured
            .per_day(Operation::Compact, Some(&hourly), Some(&twice_hourly), now)
            .unwrap();
        assert!(
            (doubled - 2.0 * same).abs() < 1e-9,
            "{doubled} against {same}"
        );
        assert_eq!(
            measured.per_day(Operation::Vacuum, Some(&hourly), Some(&hourly), now),
            None
        );
        assert_eq!(
            measured.per_day(Operation::Compact, Some(&hourly), None, now),
            Some(0.0)
        );
        assert!(Measured::none()
            .table_per_day(Some(&hourly), Some(&hourly), now)
            .is_none());
    }
}
