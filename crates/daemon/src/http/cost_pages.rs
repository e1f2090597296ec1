//! The dashboard's cost views: a table's last jobs with what each cost and what it did
//! (on the table page), and `GET /costs`, the fleet's costs by owner and by operation over the
//! last 1, 7 and 30 days, with the monthly price of the bytes each owner's history keeps, and
//! each owner's cost day by day as a picture. The sums are the chargeback report's
//! ([`crate::costs::report`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::State;
use axum::response::Html;
use chrono::{Duration, Utc};
use maud::{html, Markup};
use tablekeeper_store::OperationsFilter;
use tablekeeper_vocab::TableFigures;

use super::error::ApiError;
use super::format::opt_stamp;
use crate::costs::report::{By, CostReport, Ledger};
use crate::costs::OperationRow;
use crate::shared::Shared;

/// Jobs listed with their costs on a table page.
const TABLE_COST_ROWS: u32 = 20;

/// The periods the fleet page sums over, in days.
const PERIODS: [i64; 3] = [1, 7, LONGEST];
const LONGEST: i64 = 30;

/// A table's last finished jobs with cost and effect, for its page.
pub(super) async fn table_costs(rt: &Shared, table: &str) -> Markup {
    let jobs = rt
        .store
        .finished_jobs(&OperationsFilter {
            table: Some(table.to_owned()),
            limit: Some(TABLE_COST_ROWS),
            ..OperationsFilter::default()
        })
        .await;
    let rows: Vec<OperationRow> = match &jobs {
        Ok(jobs) => jobs
            .iter()
            .map(|j| OperationRow::of(j, |t| rt.fleet.spec(t).map(|s| s.owner)))
            .collect(),
        Err(_) => Vec::new(),
    };
    html! {
        h2 { "What its jobs cost and did" }
        @if let Err(e) = &jobs { p.bad { "job store unreachable: " (e) } }
        @if rows.is_empty() {
            p.muted { "no finished job yet" }
        } @else {
            table #costs {
                thead { tr {
                    th { "finished" } th { "operation" } th { "state" } th { "CPU s" } th { "requests" }
                    th { "read" } th { "written" } th { "USD" } th { "files" } th { "small files" }
                    th { "average file" }
                } }
                tbody { @for r in &rows { (cost_row(r)) } }
            }
        }
    }
}

fn cost_row(r: &OperationRow) -> Markup {
    let (before, after) = r
        .outcome
        .map_or((TableFigures::default(), TableFigures::default()), |o| {
            (o.before, o.after)
        });
    html! {
        tr {
            td { (opt_stamp(r.finished_at)) }
            td { (r.operation) }
            td { (r.state.as_str()) }
            @if let Some(c) = &r.cost {
                td { (format!("{:.2}", c.cpu_seconds)) }
                td { (c.requests.total()) }
                td { (bytes(c.bytes_read)) }
                td { (bytes(c.bytes_written)) }
                td { (format!("{:.5}", c.estimated_usd)) }
            } @else {
                td.muted colspan="5" { "not recorded" }
            }
            td { (change(before.files, after.files, |n| n.to_string())) }
            td { (change(before.small_files, after.small_files, |n| n.to_string())) }
            td { (change(before.average_file_bytes, after.average_file_bytes, bytes)) }
        }
    }
}

/// `before → after`, or what is known of them.
fn change(before: Option<u64>, after: Option<u64>, show: impl Fn(u64) -> String) -> String {
    match (before, after) {
        (Some(b), Some(a)) => format!("{} → {}", show(b), show(a)),
        (None, Some(a)) => format!("→ {}", show(a)),
        (Some(b), None) => format!("{} →", show(b)),
        (None, None) => String::new(),
    }
}

fn bytes(n: u64) -> String {
    bytesize::ByteSize::b(n).display().iec().to_string()
}

/// `GET /costs`: the fleet's maintenance costs by owner and by operation, per period.
pub async fn fleet_costs(State(rt): State<Arc<Shared>>) -> Result<Html<String>, ApiError> {
    let now = Utc::now();
    let owner_now = |t: &str| rt.fleet.spec(t).map(|s| s.owner);
    // read once, for the longest period
    let ledger = Ledger::read(&rt.store, now - Duration::days(LONGEST), owner_now).await?;
    let daily =
        ledger.daily_usd_by_owner(now - Duration::days(LONGEST - 1), now, &rt.config.prices);
    let mut by_owner = Vec::new();
    let mut by_operation = Vec::new();
    for days in PERIODS {
        let since = now - Duration::days(days);
        let period = ledger.narrowed(since);
        let prices = &rt.config.prices;
        by_owner.push(period.report(since, By::Owner, prices, owner_now));
        by_operation.push(period.report(since, By::Operation, prices, owner_now));
    }
    let body = html! {
        header {
            p { a href="/" { "← all tables" } }
            h1 { "What maintenance costs" }
            p.muted {
                "Measured CPU and object-store requests of finished jobs and of probes, at the \
                 configured prices; `tablekeeper report costs` prints the same sums."
            }
        }
        h2 { "By owner, day by day (last " (LONGEST) " days)" }
        (super::pictures::cost_by_owner(&daily))
        (period_table("By owner", "owner", &by_owner, true))
        (period_table("By operation", "operation", &by_operation, false))
    };
    Ok(Html(
        super::page::document("costs · tablekeeper", body).into_string(),
    ))
}

/// One row per key, the USD of each period beside each other.
fn period_table(title: &str, key: &str, reports: &[CostReport], retained: bool) -> Markup {
    let mut keys: BTreeMap<&str, Vec<Option<f64>>> = BTreeMap::new();
    for (i, report) in reports.iter().enumerate() {
        for row in &report.rows {
            keys.entry(row.key.as_str())
                .or_insert_with(|| vec![None; reports.len()])[i] = Some(row.cost.estimated_usd);
        }
    }
    let kept: BTreeMap<&str, f64> = reports
        .last()
        .map(|r| {
            r.rows
                .iter()
                .filter_map(|row| row.retained_usd_per_month.map(|u| (row.key.as_str(), u)))
                .collect()
        })
        .unwrap_or_default();
    html! {
        h2 { (title) }
        @if keys.is_empty() {
            p.muted { "nothing measured yet" }
        } @else {
            table {
                thead { tr {
                    th { (key) }
                    @for days in PERIODS { th { "USD, last " (days) (if days == 1 { " day" } else { " days" }) } }
                    @if retained { th { "history kept, USD a month" } }
                } }
                tbody { @for (k, usd) in &keys {
                    tr {
                        td { (k) }
                        @for u in usd { td { (u.map(|u| format!("{u:.4}")).unwrap_or_default()) } }
                        @if retained { td { (kept.get(k).map(|u| format!("{u:.4}")).unwrap_or_default()) } }
                    }
                } }
            }
        }
    }
}
