//! `tablekeeper plan`: for each table, its health, drift and what would run now and why.
//! Reads only table logs; changes nothing. The command a reviewer runs on an inventory
//! pull request, and the same planner the daemon's schedule ticks use. A table it cannot
//! read (bad credentials, wrong path, damaged log) fails the check with exit 3, unless
//! `--allow-unreadable` (a CI job without storage access).
//!
//! With a `budget:` in the inventory, the due operations are ranked as a budget round ranks
//! queued jobs (`jobs::budget::decide`) in a window nothing has spent from yet: under
//! `enforce` the ones past the budget show as `deferred`, in shadow mode as `would_defer`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use chrono::Utc;
use serde_json::json;

use crate::cli::OutputFormat;
use crate::config::DaemonConfig;
use crate::fleet::{Fleet, FleetOptions, TableView};

pub async fn run(
    config: Option<PathBuf>,
    inventory: Option<PathBuf>,
    format: OutputFormat,
    allow_unreadable: bool,
) -> ExitCode {
    let path = match (inventory, config) {
        (Some(p), _) => {
            if let Err(code) = super::apply_storage_options_from_env() {
                return code;
            }
            p
        }
        (None, config) => match DaemonConfig::load(config.as_deref()) {
            Ok(c) => match c.inventory {
                Some(p) => {
                    crate::config::apply_storage_options(&c.storage_options);
                    p
                }
                None => {
                    eprintln!("error: no inventory: pass --inventory PATH or set `inventory` in the config");
                    return ExitCode::from(super::EXIT_UNUSABLE);
                }
            },
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(super::EXIT_UNUSABLE);
            }
        },
    };
    let inventory = match super::load_inventory_or_report(&path) {
        Ok(inv) => inv,
        Err(code) => return code,
    };
    // each table is probed once: nothing gains from keeping it loaded afterwards
    let fleet = Arc::new(Fleet::new(inventory, FleetOptions::probe_once()));
    crate::schedule::probes::probe_all_fleet(&fleet).await;
    let now = Utc::now();
    let mut views = fleet.views(now);
    apply_budget(&fleet, &mut views, now);
    match format {
        OutputFormat::Json => {
            let out = json!({ "generated_at": Utc::now(), "tables": views });
            match serde_json::to_string_pretty(&out) {
                Ok(text) => println!("{text}"),
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::FAILURE;
                }
            }
        }
        OutputFormat::Text => print!("{}", render_text(&views)),
        OutputFormat::Markdown => {
            eprintln!("error: `--format markdown` is the pull-request view: pass `--base BASE` with `--inventory`");
            return ExitCode::from(super::EXIT_UNUSABLE);
        }
    }
    // a table plan could not read for any reason fails the check: a pull request must not
    // pass on tables nobody could look at
    let unreadable: Vec<&TableView> = views.iter().filter(|v| v.probe_error.is_some()).collect();
    if unreadable.is_empty() || allow_unreadable {
        return ExitCode::SUCCESS;
    }
    for v in &unreadable {
        eprintln!(
            "error: table `{}` ({}) cannot be read: {}",
            v.name,
            v.path,
            v.probe_error.as_deref().unwrap_or_default()
        );
    }
    eprintln!(
        "{} table(s) cannot be read; pass --allow-unreadable where storage is out of reach on purpose",
        unreadable.len()
    );
    ExitCode::from(super::EXIT_UNREADABLE)
}

/// Ranks the due operations of `views` against the inventory's budget, as a budget round in a
/// fresh window would, and marks the ones it defers.
fn apply_budget(fleet: &Fleet, views: &mut [TableView], now: chrono::DateTime<Utc>) {
    use crate::jobs::budget::{self, JobEstimate};
    use crate::policy::planner::Decision;
    use tablekeeper_store::{JobId, QueuedJob, Trigger, WindowSpend};

    let inventory = fleet.inventory();
    let Some(budget) = &inventory.budget else {
        return;
    };
    let mut due: Vec<(usize, usize)> = Vec::new();
    let mut queued: Vec<QueuedJob> = Vec::new();
    for (t, view) in views.iter().enumerate() {
        let Some(spec) = inventory.table(&view.name) else {
            continue;
        };
        for (o, op) in view.operations.iter().enumerate() {
            if !op.decision.should_run() {
                continue;
            }
            let estimate = op
                .estimate
                .zip(view.probe.as_deref())
                .map(|(estimate, probe)| {
                    JobEstimate::new(spec, op.operation, estimate, probe, now)
                });
            queued.push(QueuedJob {
                id: JobId(i64::try_from(queued.len()).unwrap_or(i64::MAX)),
                table_name: view.name.clone(),
                operation: op.operation,
                trigger: Trigger::Schedule,
                created_at: now,
                estimate: estimate.and_then(|e| serde_json::to_value(e).ok()),
            });
            due.push((t, o));
        }
    }
    let last_success = |table: &str, op| fleet.last_success(table, op);
    let (verdicts, _) = budget::decide(
        &inventory,
        budget,
        &queued,
        &WindowSpend::default(),
        last_success,
        now,
    );
    for verdict in verdicts.verdicts {
        let Some(&(t, o)) = usize::try_from(verdict.id).ok().and_then(|i| due.get(i)) else {
            continue;
        };
        if verdict.reason.is_none() {
            continue;
        }
        let op = &mut views[t].operations[o];
        match budget.mode {
            tablekeeper_inventory::BudgetMode::Enforce => {
                op.decision = Decision::Deferred(verdict.note);
            }
            tablekeeper_inventory::BudgetMode::Shadow => op.would_defer = Some(verdict.note),
        }
    }
}

fn render_text(views: &[TableView]) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    for v in views {
        let _ = writeln!(out, "table {} ({}) owner {}", v.name, v.path, v.owner);
        let _ = writeln!(
            out,
            "  health: {}{}",
            v.health.as_str(),
            if v.health_reasons.is_empty() {
                String::new()
            } else {
                format!(" ({})", v.health_reasons.join("; "))
            }
        );
        if let Some(p) = &v.probe {
            let _ = writeln!(
                out,
                "  table: version {}, {} files ({} small), {} bytes, {} commits since checkpoint",
                p.version, p.files, p.small_files, p.size_bytes, p.commits_since_checkpoint
            );
        }
        if let Some(drill) = v.probe.as_ref().and_then(|p| p.restore_drill.as_ref()) {
            let r = drill.retained_bytes;
            let _ = writeln!(
                out,
                "  retained for time travel: {} bytes by the window, {} by pins, {} by clones",
                r.window, r.pin, r.clone
            );
            for owed in drill.versions.iter().filter(|o| !o.restorable) {
                let _ = writeln!(
                    out,
                    "  unrestorable: {} ({}) version {}: {}",
                    owed.owed_to,
                    owed.reason,
                    owed.version
                        .map_or_else(|| "?".to_owned(), |v| v.to_string()),
                    owed.error.clone().unwrap_or_else(|| format!(
                        "{} file(s) missing, first {}",
                        owed.missing_count,
                        owed.missing_files.join(", ")
                    ))
                );
            }
        }
        for pin in &v.expired_pins {
            let _ = writeln!(out, "  {pin}");
        }
        for d in &v.drift {
            let _ = writeln!(out, "  drift ({}): {}", d.kind.as_str(), d.detail);
        }
        if let Some(newest) = v
            .probe
            .as_ref()
            .and_then(|p| p.history.recent_foreign_rewrites.first())
        {
            let _ = writeln!(
                out,
                "  rewritten by another engine: version {} ({}) by {}{}",
                newest.version,
                newest.operation.as_deref().unwrap_or("unknown operation"),
                newest.engine_info.as_deref().unwrap_or("an unknown engine"),
                if v.rewrites_owned {
                    "; only one engine may rewrite a table: stop the other job, or declare \
                     `writers.rewrites: external`"
                } else {
                    " (`writers.rewrites: external`)"
                }
            );
        }
        if let Some(summary) = v.erasure.as_ref().and_then(|e| e.summary.as_deref()) {
            let deleted = v.erasure.as_ref().map_or(0, |e| e.deleted_rows);
            let _ = writeln!(
                out,
                "  erasure: {summary} ({deleted} soft-deleted row(s) in live files)"
            );
        }
        for o in &v.operations {
            if !o.enabled {
                let _ = writeln!(out, "  {:<10} disabled", o.operation.as_str());
                continue;
            }
            let _ = writeln!(
                out,
                "  {:<10} {:<8} {}  [schedule {}{}]{}",
                o.operation.as_str(),
                o.decision.label(),
                o.decision.reason(),
                o.schedule,
                o.next_run
                    .map(|t| format!(", next {}", t.format("%Y-%m-%d %H:%M:%S UTC")))
                    .unwrap_or_default(),
                o.estimate
                    .map(|e| format!(
                        " [est. {:.1} CPU-s, {} requests, {} bytes; benefit {:.0}]",
                        e.cost.cpu_seconds, e.cost.requests, e.cost.bytes, e.benefit
                    ))
                    .unwrap_or_default()
            );
            if let Some(would) = &o.would_defer {
                let _ = writeln!(out, "  {:<10} {would}", "");
            }
        }
        out.push('\n');
    }
    out
}
