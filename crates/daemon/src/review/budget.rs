//! What a change of the inventory's `budget:` will do (`plan --base`): the budget's settings
//! before and after, and, from the jobs the store measured, how many windows of the measured
//! days spent more than the new budget (fleet-wide, and per owner cap). Under `enforce` those
//! are the windows where work would have waited; in shadow mode nothing waits and the rounds
//! record what would have. Nothing is guessed: with no measured job it says so.

use std::collections::BTreeMap;

use serde_json::Value;
use tablekeeper_inventory::{Budget, BudgetMode};

use crate::review::measured::Measured;
use crate::review::model::{BudgetChange, Consequence, Kind, Severity};
use crate::review::settings;

/// The budget's settings as flat dotted keys (`budget.cpu_seconds`, `budget.owners.<owner>`).
fn flatten(budget: Option<&Budget>) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    if let Some(value) = budget.and_then(|b| serde_json::to_value(b).ok()) {
        settings::put(&mut out, "budget".into(), value);
    }
    out
}

/// The review of `before` → `after`; `None` when the budget did not change.
pub(crate) fn review(
    before: Option<&Budget>,
    after: Option<&Budget>,
    measured: &Measured,
) -> Option<BudgetChange> {
    let changes = settings::diff_flat(&flatten(before), &flatten(after));
    if changes.is_empty() {
        return None;
    }
    Some(BudgetChange {
        settings: changes,
        consequences: consequences(before, after, measured),
    })
}

fn consequences(
    before: Option<&Budget>,
    after: Option<&Budget>,
    measured: &Measured,
) -> Vec<Consequence> {
    let Some(after) = after else {
        return vec![Consequence::new(
            Kind::Budget,
            Severity::Info,
            "the budget is removed: every due operation runs when due, whatever it costs",
        )];
    };
    let window = humantime::format_duration(after.window).to_string();
    let windows = measured.cpu_per_window(after.window, None);
    if windows.is_empty() {
        return vec![Consequence::new(
            Kind::Budget,
            Severity::Info,
            format!(
                "no job has measured its cost yet: how often {} CPU-s a {window} would bind is \
                 unknown; `report budget` shows it once jobs ran",
                after.cpu_seconds
            ),
        )];
    }
    let enforce = after.mode == BudgetMode::Enforce;
    let mut out = Vec::new();
    let (over, busiest, mean) = binding(&windows, after.cpu_seconds);
    let then = if !enforce {
        "shadow mode: nothing waits; the budget rounds record what `enforce` would defer \
         (`report budget`)"
    } else if over > 0 {
        "under `enforce`, due work past the budget waits for a later window (repairs, erasure \
         deadlines at risk, staleness past the alert threshold and requests still run)"
    } else {
        "under `enforce`, nothing measured would have waited"
    };
    // windows over the budget are a warning where work would then wait
    let severity = |over: usize| {
        if enforce && over > 0 {
            Severity::Warning
        } else {
            Severity::Info
        }
    };
    out.push(Consequence::new(
        Kind::Budget,
        severity(over),
        format!(
            "{} CPU-s a {window}: the fleet's measured jobs spent {mean:.1} CPU-s a {window} on \
             average and {busiest:.1} in the busiest; {over} of {} windows spent more; {then}",
            after.cpu_seconds,
            windows.len()
        ),
    ));
    if enforce && before.is_some_and(|b| b.mode == BudgetMode::Shadow) {
        out.push(Consequence::new(
            Kind::Budget,
            Severity::Warning,
            "shadow → enforce: what the rounds recorded as would-be deferrals now waits; read \
             `tablekeeper report budget --since 7d` before merging",
        ));
    }
    for (owner, cap) in &after.owners {
        if before.and_then(|b| b.owners.get(owner)) == Some(cap)
            && before.map(|b| b.window) == Some(after.window)
        {
            continue;
        }
        let (over, busiest, _) = binding(&measured.cpu_per_window(after.window, Some(owner)), *cap);
        out.push(Consequence::new(
            Kind::Budget,
            severity(over),
            format!(
                "owner {owner}: a cap of {cap} CPU-s a {window}; its jobs spent {busiest:.1} in \
                 the busiest window, and {over} window(s) more than the cap"
            ),
        ));
    }
    out
}

/// (windows over `limit`, the busiest window's spend, the mean spend) of `windows`.
fn binding(windows: &[f64], limit: f64) -> (usize, f64, f64) {
    let over = windows.iter().filter(|&&w| w > limit).count();
    let busiest = windows.iter().copied().fold(0.0, f64::max);
    let mean = windows.iter().sum::<f64>() / windows.len().max(1) as f64;
    (over, busiest, mean)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{DateTime, Duration, Utc};
    use std::path::Path;
    use tablekeeper_inventory::{Inventory, Operation};
    use tablekeeper_store::{JobId, JobState, Trigger};

    use crate::costs::OperationRow;

    fn now() -> DateTime<Utc> {
        "2026-12-07T12:00:00Z".parse().unwrap()
    }

    fn budget(yaml: &str) -> Budget {
        let inventory = Inventory::parse(
            Path::new("inventory.yaml"),
            &format!("budget: {yaml}\ntables:\n  - {{ name: a, path: /d/a, owner: o }}\n"),
        )
        .unwrap();
        inventory.budget.unwrap()
    }

    /// A job of `cpu` CPU-seconds started `hours_ago`.
    fn job(hours_ago: i64, cpu: f64) -> OperationRow {
        OperationRow {
            job_id: JobId(1),
            table: "a".into(),
            owner: Some("o".into()),
            operation: Operation::Compact,
            trigger: Trigger::Schedule,
            state: JobState::Succeeded,
            started_at: Some(now() - Duration::hours(hours_ago)),
            finished_at: Some(now() - Duration::hours(hours_ago) + Duration::minutes(1)),
            cost: Some(tablekeeper_vocab::Cost {
                cpu_seconds: cpu,
                ..Default::default()
            }),
            outcome: None,
            estimate: None,
        }
    }

    #[test]
    fn an_unchanged_budget_is_no_change() {
        let b = budget("{ cpu_seconds: 10 }");
        assert_eq!(review(Some(&b), Some(&b), &Measured::none()), None);
    }

    #[test]
    fn enforcing_says_how_many_measured_windows_would_have_waited() {
        // two days measured: one hour spent 30 CPU-s, another 5, the rest nothing
        let measured = Measured::from_rows(&[job(47, 1.0), job(30, 30.0), job(2, 5.0)], now());
        let before = budget("{ cpu_seconds: 10, mode: shadow }");
        let after = budget("{ cpu_seconds: 10, mode: enforce, owners: { o: 4 } }");
        let change = review(Some(&before), Some(&after), &measured).unwrap();
        let keys: Vec<&str> = change.settings.iter().map(|s| s.key.as_str()).collect();
        assert_eq!(keys, ["budget.mode", "budget.owners.o"]);
        let messages: Vec<&str> = change
            .consequences
            .iter()
            .map(|c| c.message.as_str())
            .collect();
        assert!(
            messages[0].starts_with("10 CPU-s a 1h: ")
                && messages[0].contains("30.0 in the busiest; 1 of 48 windows spent more;"),
            "{messages:?}"
        );
        assert_eq!(change.consequences[0].severity, Severity::Warning);
        assert!(messages[1].starts_with("shadow → enforce"), "{messages:?}");
        assert!(
            messages[2].contains("owner o: a cap of 4 CPU-s a 1h")
                && messages[2].contains("2 window(s) more than the cap"),
            "{messages:?}"
        );
    }

    #[test]
    fn shadow_mode_and_no_measurements_say_so_without_a_warning() {
        let after = budget("{ cpu_seconds: 10 }");
        let none = review(None, Some(&after), &Measured::none()).unwrap();
        assert!(none.consequences[0]
            .message
            .starts_with("no job has measured"));
        let measured = Measured::from_rows(&[job(3, 30.0)], now());
        let shadow = review(None, Some(&after), &measured).unwrap();
        assert_eq!(shadow.consequences.len(), 1);
        assert_eq!(shadow.consequences[0].severity, Severity::Info);
        assert!(shadow.consequences[0]
            .message
            .contains("shadow mode: nothing waits"));
        let removed = review(Some(&after), None, &measured).unwrap();
        assert!(removed.consequences[0]
            .message
            .starts_with("the budget is removed"));
    }
}
