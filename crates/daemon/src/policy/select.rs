//! Which due candidates a budget window admits, best value for the CPU first, and why each
//! of the others waits.
//!
//! A candidate is a (table, operation) whose need check says run. Candidates are ranked by
//! their priority:
//!
//! ```text
//! importance weight × benefit ÷ estimated CPU-seconds × (1 + hours waited ÷ AGING_HOURS)
//! ```
//!
//! (The budget simulation also tried a factor growing as staleness nears the alert threshold,
//! to run such candidates within the budget rather than outside it: it cost more small-file-
//! hours than the CPU outside the budget it saved; BENCHMARKS.md "Budget policy".)
//!
//! (weights: high 4, normal 1, low ¼; benefit in points, see [`crate::policy::estimate`]).
//! They are then admitted in rank order while the window's budgeted spend is under the
//! budget (and the owner's spend under its cap, when it has one), so a window overshoots by
//! at most the one job admitted last. The rest are deferred, each with its rank, its estimate
//! and the time the window refills.
//!
//! Four classes always run, outside the budget ([`MustRun`]): a repair of a stale write, an
//! erasure deadline at risk, an operation whose staleness passed the threshold at which the
//! shipped alert rules page its owner ([`alert_after`]), and what a person asked for. The
//! staleness class bounds the wait of the operations owners are paged for: they never
//! starve, however low their value; the others rise with their wait.
//!
//! Pure: the daemon's claims, `tablekeeper plan` and the budget simulation call [`select`]
//! with the candidates and the window they read, and get the same answer.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use tablekeeper_inventory::{Importance, Operation};

use crate::policy::estimate::Estimate;

/// Waiting this long doubles a candidate's priority (and waiting twice as long triples it).
pub(crate) const AGING_HOURS: f64 = 6.0;

/// The staleness past which the shipped alert rules page a table's owner
/// (`deploy/prometheus/alerts.yaml`: `TablekeeperCompactionStale` at 2 days,
/// `TablekeeperVacuumStale` at 8 days); the other operations have no staleness alert.
pub(crate) fn alert_after(op: Operation) -> Option<Duration> {
    const DAY: u64 = 86_400;
    match op {
        Operation::Compact => Some(Duration::from_secs(2 * DAY)),
        Operation::Vacuum => Some(Duration::from_secs(8 * DAY)),
        _ => None,
    }
}

/// The weight `maintenance.importance` gives a table's benefit.
pub(crate) fn weight(importance: Importance) -> f64 {
    match importance {
        Importance::High => 4.0,
        Importance::Normal => 1.0,
        Importance::Low => 0.25,
    }
}

/// Why a candidate runs whatever the budget says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum MustRun {
    /// A stale write left rows visible that its writer removed: correctness, not upkeep.
    Repair,
    /// Deleted rows must be physically gone by the table's erasure deadline.
    ErasureAtRisk,
    /// Its staleness passed the threshold the shipped alert rules page the owner at.
    StalenessPastAlert,
    /// A person asked for it (the API's trigger, `maintain`).
    Asked,
}

impl MustRun {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            MustRun::Repair => "repair",
            MustRun::ErasureAtRisk => "erasure_at_risk",
            MustRun::StalenessPastAlert => "staleness_past_alert",
            MustRun::Asked => "asked",
        }
    }

    fn explain(self) -> &'static str {
        match self {
            MustRun::Repair => "a stale write waits for its repair, which always runs",
            MustRun::ErasureAtRisk => "the erasure deadline is at risk: a purge for it always runs",
            MustRun::StalenessPastAlert => {
                "its staleness passed the alert threshold, so it runs whatever the budget"
            }
            MustRun::Asked => "a person asked for it",
        }
    }
}

/// One due (table, operation), as the selection needs it.
#[derive(Debug, Clone)]
pub(crate) struct Candidate<'a> {
    pub table: &'a str,
    pub owner: &'a str,
    pub operation: Operation,
    pub importance: Importance,
    pub estimate: Estimate,
    /// Since when the operation has been due (its queued job's creation).
    pub waiting_since: DateTime<Utc>,
    /// The operation's last success on the table (log or job table); its staleness counts
    /// from it, else from `waiting_since`.
    pub last_success: Option<DateTime<Utc>>,
    /// The staleness past which the owner is paged ([`alert_after`]); `None`: no alert.
    pub alert_after: Option<Duration>,
    /// Repair or erasure at risk, known to the caller.
    pub must_run: Option<MustRun>,
}

impl Candidate<'_> {
    /// How long the operation has not succeeded at `now`.
    fn staleness(&self, now: DateTime<Utc>) -> f64 {
        let since = self.last_success.unwrap_or(self.waiting_since);
        (now - since).num_milliseconds().max(0) as f64 / 1000.0
    }

    /// The class that makes it run outside the budget at `now`, if any.
    pub(crate) fn must_run_at(&self, now: DateTime<Utc>) -> Option<MustRun> {
        self.must_run.or_else(|| {
            self.alert_after
                .is_some_and(|limit| self.staleness(now) >= limit.as_secs_f64())
                .then_some(MustRun::StalenessPastAlert)
        })
    }

    /// Its priority at `now` (see the module doc).
    pub(crate) fn priority(&self, now: DateTime<Utc>) -> f64 {
        let hours = (now - self.waiting_since).num_seconds().max(0) as f64 / 3600.0;
        let cpu = self.estimate.cost.cpu_seconds.max(0.01);
        weight(self.importance) * self.estimate.benefit.max(0.0) / cpu * (1.0 + hours / AGING_HOURS)
    }
}

/// The budget window a selection spends from.
#[derive(Debug, Clone)]
pub(crate) struct Window<'a> {
    /// When the budget refills.
    pub end: DateTime<Utc>,
    /// Fleet-wide CPU-seconds for budgeted work in the window.
    pub limit: f64,
    /// Budgeted CPU-seconds already spent by the jobs started in the window (measured for
    /// finished jobs, estimated for running ones), all replicas together.
    pub spent: f64,
    /// Caps per owner, inside the fleet budget.
    pub owner_caps: &'a BTreeMap<String, f64>,
    /// What each owner's budgeted jobs started in the window spent.
    pub owner_spent: BTreeMap<String, f64>,
}

/// Why a candidate waits: the bounded `reason` label of `tablekeeper_deferred`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum DeferReason {
    /// The fleet's budget for the window is spent.
    Budget,
    /// The owner's cap for the window is spent.
    OwnerBudget,
}

impl DeferReason {
    pub(crate) const ALL: [DeferReason; 2] = [DeferReason::Budget, DeferReason::OwnerBudget];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            DeferReason::Budget => "budget",
            DeferReason::OwnerBudget => "owner_budget",
        }
    }
}

/// The selection's answer for one candidate.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Verdict {
    /// Runs: within the budget (`rank` among the budgeted candidates), or outside it.
    Admit { rank: Option<usize> },
    /// Runs outside the budget, for this reason.
    MustRun(MustRun),
    /// Waits for the next window.
    Defer { reason: DeferReason, rank: usize },
}

/// The verdict for every candidate (in the candidates' order), and how many were ranked.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Selection {
    pub verdicts: Vec<Verdict>,
    /// Candidates ranked against the budget (all but the must-runs).
    pub ranked: usize,
    /// Budgeted CPU-seconds the admitted candidates add to the window (estimated).
    pub admitted_cpu: f64,
}

/// Ranks `candidates` and admits them into `window` (see the module doc).
pub(crate) fn select(
    candidates: &[Candidate<'_>],
    window: &Window<'_>,
    now: DateTime<Utc>,
) -> Selection {
    let mut verdicts: Vec<Option<Verdict>> = vec![None; candidates.len()];
    let mut ranked: Vec<(usize, f64)> = Vec::new();
    for (i, c) in candidates.iter().enumerate() {
        match c.must_run_at(now) {
            Some(class) => verdicts[i] = Some(Verdict::MustRun(class)),
            None => ranked.push((i, c.priority(now))),
        }
    }
    // best priority first; ties: the longest waiting, then by name, so every replica agrees
    ranked.sort_by(|(a, pa), (b, pb)| {
        pb.total_cmp(pa)
            .then(
                candidates[*a]
                    .waiting_since
                    .cmp(&candidates[*b].waiting_since),
            )
            .then(candidates[*a].table.cmp(candidates[*b].table))
            .then(candidates[*a].operation.cmp(&candidates[*b].operation))
    });
    let mut spent = window.spent;
    let mut owner_spent = window.owner_spent.clone();
    let mut admitted_cpu = 0.0;
    for (position, (i, _)) in ranked.iter().enumerate() {
        let c = &candidates[*i];
        let rank = position + 1;
        let owner_used = owner_spent.get(c.owner).copied().unwrap_or(0.0);
        let owner_open = window
            .owner_caps
            .get(c.owner)
            .is_none_or(|cap| owner_used < *cap);
        verdicts[*i] = Some(if spent >= window.limit {
            Verdict::Defer {
                reason: DeferReason::Budget,
                rank,
            }
        } else if !owner_open {
            Verdict::Defer {
                reason: DeferReason::OwnerBudget,
                rank,
            }
        } else {
            let cpu = c.estimate.cost.cpu_seconds;
            spent += cpu;
            admitted_cpu += cpu;
            *owner_spent.entry(c.owner.to_string()).or_default() += cpu;
            Verdict::Admit { rank: Some(rank) }
        });
    }
    Selection {
        verdicts: verdicts
            .into_iter()
            .map(|v| v.unwrap_or(Verdict::Admit { rank: None }))
            .collect(),
        ranked: ranked.len(),
        admitted_cpu,
    }
}

/// A verdict in words, for `plan`, the API and the dashboard, e.g. `budget (rank 312 of 900;
/// est. 40 CPU-s for 12 small files removed; window refills 14:00 UTC)`.
pub(crate) fn explain(
    verdict: &Verdict,
    candidate: &Candidate<'_>,
    selection: &Selection,
    window: &Window<'_>,
) -> String {
    let est = &candidate.estimate;
    let what = format!(
        "est. {:.1} CPU-s for {:.0} point(s) of benefit",
        est.cost.cpu_seconds, est.benefit
    );
    match verdict {
        Verdict::Admit { rank: Some(rank) } => format!(
            "within the budget (rank {rank} of {}; {what})",
            selection.ranked
        ),
        Verdict::Admit { rank: None } => format!("runs ({what})"),
        Verdict::MustRun(class) => format!("outside the budget: {} ({what})", class.explain()),
        Verdict::Defer { reason, rank } => {
            let whose = match reason {
                DeferReason::Budget => format!("budget ({:.0} CPU-s a window spent)", window.limit),
                DeferReason::OwnerBudget => format!(
                    "owner_budget (`{}`'s {:.0} CPU-s a window spent)",
                    candidate.owner,
                    window
                        .owner_caps
                        .get(candidate.owner)
                        .copied()
                        .unwrap_or(0.0)
                ),
            };
            format!(
                "deferred: {whose}; rank {rank} of {}; {what}; window refills {}",
                selection.ranked,
                window.end.format("%Y-%m-%d %H:%M UTC")
            )
        }
    }
}

/// The window of length `length` holding `now`: windows are aligned on the Unix epoch, so
/// every replica computes the same one.
pub(crate) fn window_at(now: DateTime<Utc>, length: Duration) -> (DateTime<Utc>, DateTime<Utc>) {
    let len = i64::try_from(length.as_secs()).unwrap_or(i64::MAX).max(1);
    let start = now.timestamp().div_euclid(len) * len;
    let start = DateTime::from_timestamp(start, 0).unwrap_or(now);
    (start, start + chrono::Duration::seconds(len))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::estimate::EstimatedCost;

    fn now() -> DateTime<Utc> {
        "2026-11-29T12:00:00Z".parse().unwrap()
    }

    /// The must-run staleness class pages nobody sooner or later than the shipped rules do:
    /// each operation's threshold is read back from `deploy/prometheus/alerts.yaml`.
    #[test]
    fn alert_after_is_the_shipped_alert_rules_threshold() {
        let rules: serde_json::Value =
            serde_saphyr::from_str(include_str!("../../../../deploy/prometheus/alerts.yaml"))
                .unwrap();
        let mut shipped = BTreeMap::new();
        for rule in rules["groups"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|g| g["rules"].as_array().unwrap())
        {
            let expr = rule["expr"].as_str().unwrap_or_default();
            for op in Operation::ALL {
                let series = format!(
                    "tablekeeper_staleness_seconds{{operation=\"{}\"}}",
                    op.as_str()
                );
                if !expr.contains(&series) {
                    continue;
                }
                let (_, threshold) = expr.rsplit_once("> ").unwrap();
                let days: u64 = threshold
                    .trim()
                    .strip_suffix("* 86400")
                    .unwrap_or_else(|| panic!("{op}: a threshold in days: {threshold}"))
                    .trim()
                    .parse()
                    .unwrap();
                shipped.insert(op, Duration::from_secs(days * 86_400));
            }
        }
        assert!(!shipped.is_empty(), "no staleness rule found");
        for op in Operation::ALL {
            assert_eq!(alert_after(op), shipped.get(&op).copied(), "{op}");
        }
    }

    fn candidate(table: &'static str, cpu: f64, benefit: f64) -> Candidate<'static> {
        Candidate {
            table,
            owner: "o",
            operation: Operation::Compact,
            importance: Importance::Normal,
            estimate: Estimate {
                cost: EstimatedCost {
                    cpu_seconds: cpu,
                    ..EstimatedCost::default()
                },
                benefit,
            },
            waiting_since: now(),
            last_success: None,
            alert_after: Some(Duration::from_secs(3 * 3600)),
            must_run: None,
        }
    }

    fn window(limit: f64, caps: &BTreeMap<String, f64>) -> Window<'_> {
        let (_, end) = window_at(now(), Duration::from_secs(3600));
        Window {
            end,
            limit,
            spent: 0.0,
            owner_caps: caps,
            owner_spent: BTreeMap::new(),
        }
    }

    #[test]
    fn best_benefit_per_cpu_first_and_the_rest_deferred_with_their_rank() {
        let caps = BTreeMap::new();
        let cs = [
            candidate("cheap_small", 1.0, 5.0),  // 5 a CPU-s
            candidate("dear_large", 10.0, 20.0), // 2 a CPU-s
            candidate("cheap_large", 2.0, 40.0), // 20 a CPU-s
        ];
        let w = window(3.0, &caps);
        let s = select(&cs, &w, now());
        assert_eq!(s.verdicts[2], Verdict::Admit { rank: Some(1) });
        assert_eq!(s.verdicts[0], Verdict::Admit { rank: Some(2) });
        assert_eq!(
            s.verdicts[1],
            Verdict::Defer {
                reason: DeferReason::Budget,
                rank: 3
            }
        );
        let text = explain(&s.verdicts[1], &cs[1], &s, &w);
        assert!(
            text.starts_with("deferred: budget")
                && text.contains("rank 3 of 3")
                && text.contains("window refills 2026-11-29 13:00 UTC"),
            "{text}"
        );
    }

    #[test]
    fn a_window_overshoots_by_at_most_the_last_job_admitted() {
        let caps = BTreeMap::new();
        let cs = [candidate("a", 2.0, 10.0), candidate("b", 50.0, 100.0)];
        let mut w = window(3.0, &caps);
        w.spent = 2.5;
        let s = select(&cs, &w, now());
        // "a" is admitted (2.5 < 3) and takes the window over; "b" waits
        assert_eq!(s.verdicts[0], Verdict::Admit { rank: Some(1) });
        assert!(matches!(s.verdicts[1], Verdict::Defer { .. }));
        // a job larger than the whole budget still runs in a fresh window
        w.spent = 0.0;
        let s = select(&cs[1..], &w, now());
        assert_eq!(s.verdicts[0], Verdict::Admit { rank: Some(1) });
    }

    #[test]
    fn owner_caps_defer_only_that_owner() {
        let caps = BTreeMap::from([("finance".to_string(), 1.0)]);
        let mut a = candidate("fin_a", 1.0, 100.0);
        a.owner = "finance";
        let mut b = candidate("fin_b", 1.0, 90.0);
        b.owner = "finance";
        let c = candidate("other", 1.0, 10.0);
        let cs = [a, b, c];
        let w = window(100.0, &caps);
        let s = select(&cs, &w, now());
        assert_eq!(s.verdicts[0], Verdict::Admit { rank: Some(1) });
        assert_eq!(
            s.verdicts[1],
            Verdict::Defer {
                reason: DeferReason::OwnerBudget,
                rank: 2
            }
        );
        assert_eq!(s.verdicts[2], Verdict::Admit { rank: Some(3) });
    }

    #[test]
    fn must_runs_run_outside_a_spent_budget_and_waiting_ends_in_one() {
        let caps = BTreeMap::new();
        let mut repair = candidate("r", 100.0, 1.0);
        repair.must_run = Some(MustRun::Repair);
        let mut old = candidate("old", 100.0, 0.001);
        old.waiting_since = now() - chrono::Duration::hours(3);
        let mut w = window(10.0, &caps);
        w.spent = 10.0;
        let cs = [repair, old, candidate("new", 1.0, 1000.0)];
        let s = select(&cs, &w, now());
        assert_eq!(s.verdicts[0], Verdict::MustRun(MustRun::Repair));
        assert_eq!(s.verdicts[1], Verdict::MustRun(MustRun::StalenessPastAlert));
        assert!(matches!(s.verdicts[2], Verdict::Defer { rank: 1, .. }));
        assert_eq!(s.ranked, 1);
    }

    #[test]
    fn importance_and_waiting_raise_priority() {
        let mut low = candidate("low", 1.0, 10.0);
        low.importance = Importance::Low;
        let mut high = candidate("high", 1.0, 10.0);
        high.importance = Importance::High;
        assert_eq!(high.priority(now()), 16.0 * low.priority(now()));
        let mut waited = candidate("waited", 1.0, 10.0);
        waited.alert_after = None;
        waited.waiting_since = now() - chrono::Duration::hours(6);
        let mut base = candidate("x", 1.0, 10.0);
        base.alert_after = None;
        assert_eq!(waited.priority(now()), 2.0 * base.priority(now()));
    }

    #[test]
    fn windows_align_on_the_epoch() {
        let (s, e) = window_at(
            "2026-11-29T12:34:56Z".parse().unwrap(),
            Duration::from_secs(3600),
        );
        assert_eq!(s, "2026-11-29T12:00:00Z".parse::<DateTime<Utc>>().unwrap());
        assert_eq!(e, "2026-11-29T13:00:00Z".parse::<DateTime<Utc>>().unwrap());
    }
}
