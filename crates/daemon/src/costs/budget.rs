//! `tablekeeper report budget`: the budget's windows as the job store recorded them, one row
//! each (its budget and mode, what the jobs started in it spent within the budget, how many
//! ran, how many candidates waited or in shadow mode would have, and the longest wait), with
//! the totals, and how far the jobs' estimated CPU was from what they measured, per
//! operation. In shadow mode it compares what ran with what `enforce` would have held back.

use std::fmt::Write as _;

use chrono::{DateTime, Utc};
use serde::Serialize;
use tablekeeper_inventory::Operation;
use tablekeeper_store::BudgetWindowRow;

use super::report::csv_cell;
use crate::policy::estimate::EstimateError;

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct BudgetReport {
    pub since: DateTime<Utc>,
    pub windows: Vec<BudgetWindowRow>,
    pub total: Totals,
    /// Per operation: the finished jobs that carried an estimate, and the typical factor
    /// between their estimated and measured CPU.
    pub estimates: Vec<EstimateRow>,
}

/// How well one operation's CPU was estimated.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct EstimateRow {
    pub operation: Operation,
    pub jobs: u64,
    pub estimated_cpu_seconds: f64,
    pub measured_cpu_seconds: f64,
    /// exp(mean |ln(measured ÷ estimated)|): 1.0 is exact, 2.0 typically off by two.
    pub error_factor: Option<f64>,
}

/// Sums over the windows.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Totals {
    pub windows: usize,
    pub limit_cpu_seconds: f64,
    pub spent_cpu_seconds: f64,
    pub runs: i64,
    /// Deferrals in enforced windows.
    pub deferrals: i64,
    /// Would-be deferrals in shadow windows.
    pub would_defer: i64,
    /// Windows whose spend passed their budget.
    pub windows_over_budget: usize,
    pub longest_wait_seconds: Option<i64>,
}

const COLUMNS: [&str; 8] = [
    "window",
    "mode",
    "budget cpu s",
    "spent cpu s",
    "runs",
    "deferred",
    "longest wait",
    "over budget",
];

impl BudgetReport {
    pub fn new(
        since: DateTime<Utc>,
        windows: Vec<BudgetWindowRow>,
        estimates: &[(Operation, f64, f64)],
    ) -> Self {
        let mut total = Totals {
            windows: windows.len(),
            ..Totals::default()
        };
        for w in &windows {
            total.limit_cpu_seconds += w.limit_cpu_seconds;
            total.spent_cpu_seconds += w.spent_cpu_seconds;
            total.runs += w.runs;
            total.would_defer += w.would_defer;
            total.deferrals += w.deferrals;
            total.windows_over_budget += usize::from(w.spent_cpu_seconds > w.limit_cpu_seconds);
            total.longest_wait_seconds = total.longest_wait_seconds.max(w.longest_wait_seconds);
        }
        let estimates = Operation::ALL
            .into_iter()
            .filter_map(|op| {
                let mut error = EstimateError::default();
                let (mut estimated, mut measured) = (0.0, 0.0);
                for (_, e, m) in estimates.iter().filter(|(o, _, _)| *o == op) {
                    error.record(*e, *m);
                    estimated += e;
                    measured += m;
                }
                (error.jobs > 0).then(|| EstimateRow {
                    operation: op,
                    jobs: error.jobs,
                    estimated_cpu_seconds: estimated,
                    measured_cpu_seconds: measured,
                    error_factor: error.factor(),
                })
            })
            .collect();
        BudgetReport {
            since,
            windows,
            total,
            estimates,
        }
    }

    fn estimates_text(&self) -> String {
        let mut out = String::new();
        for e in &self.estimates {
            let _ = writeln!(
                out,
                "estimates: {} over {} job(s): {:.1} CPU-s estimated, {:.1} measured, typically off by ×{:.2}",
                e.operation.as_str(),
                e.jobs,
                e.estimated_cpu_seconds,
                e.measured_cpu_seconds,
                e.error_factor.unwrap_or(1.0)
            );
        }
        out
    }

    fn rows(&self) -> Vec<[String; 8]> {
        self.windows
            .iter()
            .map(|w| {
                [
                    format!(
                        "{} – {}",
                        w.window_start.format("%Y-%m-%d %H:%M"),
                        w.window_end.format("%H:%M UTC")
                    ),
                    w.mode.clone(),
                    format!("{:.1}", w.limit_cpu_seconds),
                    format!("{:.1}", w.spent_cpu_seconds),
                    w.runs.to_string(),
                    match (w.deferrals, w.would_defer) {
                        (d, 0) => d.to_string(),
                        (0, s) => format!("{s} (would be)"),
                        (d, s) => format!("{d}, {s} (would be)"),
                    },
                    wait(w.longest_wait_seconds),
                    if w.spent_cpu_seconds > w.limit_cpu_seconds {
                        format!("+{:.1}", w.spent_cpu_seconds - w.limit_cpu_seconds)
                    } else {
                        String::new()
                    },
                ]
            })
            .collect()
    }

    fn summary(&self) -> String {
        let t = &self.total;
        format!(
            "{} window(s): {:.1} of {:.1} budgeted CPU-s spent, {} job(s) ran, {} deferred, {} \
             would have been deferred in shadow mode, longest wait {}, {} window(s) over budget",
            t.windows,
            t.spent_cpu_seconds,
            t.limit_cpu_seconds,
            t.runs,
            t.deferrals,
            t.would_defer,
            wait(t.longest_wait_seconds),
            t.windows_over_budget
        )
    }

    pub fn text(&self) -> String {
        let mut out = format!(
            "maintenance budget since {}\n",
            self.since.format("%Y-%m-%d %H:%M UTC")
        );
        let rows = self.rows();
        let widths: Vec<usize> = (0..COLUMNS.len())
            .map(|i| {
                rows.iter()
                    .map(|r| r[i].chars().count())
                    .chain(std::iter::once(COLUMNS[i].len()))
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |cells: Vec<&str>| -> String {
            cells
                .iter()
                .zip(&widths)
                .map(|(c, w)| format!("{c:<w$}"))
                .collect::<Vec<_>>()
                .join("  ")
                .trim_end()
                .to_string()
        };
        let _ = writeln!(out, "{}", line(COLUMNS.to_vec()));
        for r in &rows {
            let _ = writeln!(out, "{}", line(r.iter().map(String::as_str).collect()));
        }
        let _ = writeln!(out, "{}", self.summary());
        out.push_str(&self.estimates_text());
        out
    }

    pub fn csv(&self) -> String {
        let mut out = COLUMNS.join(",");
        out.push('\n');
        for r in self.rows() {
            let cells: Vec<String> = r.iter().map(|c| csv_cell(c)).collect();
            out.push_str(&cells.join(","));
            out.push('\n');
        }
        out
    }

    pub fn markdown(&self) -> String {
        let mut out = format!(
            "### Maintenance budget since {}\n\n| {} |\n|{}|\n",
            self.since.format("%Y-%m-%d %H:%M UTC"),
            COLUMNS.join(" | "),
            COLUMNS.iter().map(|_| "---").collect::<Vec<_>>().join("|")
        );
        for r in self.rows() {
            let _ = writeln!(out, "| {} |", r.join(" | "));
        }
        let _ = writeln!(out, "\n{}", self.summary());
        out.push_str(&self.estimates_text());
        out
    }
}

fn wait(seconds: Option<i64>) -> String {
    seconds.map_or_else(
        || "–".into(),
        |s| {
            humantime::format_duration(std::time::Duration::from_secs(s.max(0).unsigned_abs()))
                .to_string()
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(
        start: &str,
        mode: &str,
        limit: f64,
        spent: f64,
        deferrals: i64,
        wait: Option<i64>,
    ) -> BudgetWindowRow {
        let start: DateTime<Utc> = start.parse().unwrap();
        BudgetWindowRow {
            window_start: start,
            window_end: start + chrono::Duration::hours(1),
            mode: mode.into(),
            limit_cpu_seconds: limit,
            spent_cpu_seconds: spent,
            runs: 3,
            deferrals: if mode == "shadow" { 0 } else { deferrals },
            would_defer: if mode == "shadow" { deferrals } else { 0 },
            longest_wait_seconds: wait,
        }
    }

    #[test]
    fn totals_separate_deferrals_from_would_be_ones() {
        let r = BudgetReport::new(
            "2026-11-29T00:00:00Z".parse().unwrap(),
            vec![
                row("2026-11-29T10:00:00Z", "shadow", 10.0, 14.0, 4, Some(5400)),
                row("2026-11-29T11:00:00Z", "enforce", 10.0, 9.5, 2, Some(600)),
            ],
            &[
                (Operation::Compact, 1.0, 2.0),
                (Operation::Compact, 4.0, 2.0),
            ],
        );
        assert_eq!(r.total.would_defer, 4);
        assert_eq!(r.total.deferrals, 2);
        assert_eq!(r.total.windows_over_budget, 1);
        assert_eq!(r.total.longest_wait_seconds, Some(5400));
        let text = r.text();
        assert!(text.contains("4 (would be)"), "{text}");
        assert!(text.contains("+4.0"), "{text}");
        assert!(text.contains("longest wait 1h 30m"), "{text}");
        assert_eq!(r.csv().lines().count(), 3);
        assert_eq!(r.estimates.len(), 1);
        assert!((r.estimates[0].error_factor.unwrap() - 2.0).abs() < 1e-9);
        assert!(text.contains("compact over 2 job(s)"), "{text}");
    }
}
