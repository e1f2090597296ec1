//! The chargeback report (`tablekeeper report costs`) and the fleet page's cost table: the
//! costs of finished jobs and of probes over a period, summed by owner, table or operation,
//! with the monthly price of the bytes each table's history keeps (retained by the VACUUM
//! window, pins and clones, as the last restore drill sized them).
//!
//! Sums are of what the job store holds: each job's `result.cost` (priced when it ran) and
//! each table's `probe_costs` (priced here, at the report's prices). The API's rows and the
//! replicas' cost counters count the same runs (README "What maintenance costs"). What is
//! read ([`Ledger`]) is apart from how it is summed ([`Ledger::report`]), so that the fleet
//! page reads the finished jobs once for all its periods.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use chrono::{DateTime, NaiveDate, Utc};
use serde::Serialize;
use tablekeeper_store::{JobStore, OperationsFilter, ProbeCostRow, StoreError};
use tablekeeper_vocab::{Cost, PROBE_OPERATION};

use super::OperationRow;
use crate::config::Prices;

/// What the report's rows are keyed by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum By {
    Owner,
    Table,
    Operation,
}

/// One row: what the jobs (and probes) of one owner, table or operation cost.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CostRow {
    pub key: String,
    /// Finished jobs counted (probes not included).
    pub jobs: u64,
    pub cost: Cost,
    /// The monthly price of the bytes kept only for the window, pins and clones (owners and
    /// tables; null by operation).
    pub retained_bytes: Option<u64>,
    pub retained_usd_per_month: Option<f64>,
}

/// The report: its period, its rows (most expensive first) and their total.
#[derive(Debug, Clone, Serialize)]
pub struct CostReport {
    pub since: DateTime<Utc>,
    pub by: By,
    pub rows: Vec<CostRow>,
    pub total: CostRow,
}

/// Dollars per owner, a day at a time, oldest day first; every day names every owner.
pub(crate) type DailyUsd = Vec<(NaiveDate, BTreeMap<String, f64>)>;

/// Stored probes read per query.
const PROBES_PAGE: u32 = 500;

/// What the job store holds of a period's costs, before it is summed.
#[derive(Debug, Clone)]
pub(crate) struct Ledger {
    /// Finished jobs, newest first.
    pub jobs: Vec<OperationRow>,
    /// Each table's probes, a day at a time.
    pub probes: Vec<ProbeCostRow>,
    /// Bytes each table's history keeps (its last restore drill's figure).
    pub retained: BTreeMap<String, u64>,
}

impl Ledger {
    /// Reads what the job store holds since `since`. `owner_now` names a table's owner in the
    /// current inventory (for jobs whose result records none).
    pub(crate) async fn read(
        store: &JobStore,
        since: DateTime<Utc>,
        owner_now: impl Fn(&str) -> Option<String>,
    ) -> Result<Ledger, StoreError> {
        let jobs = store
            .finished_jobs(&OperationsFilter {
                since: Some(since),
                ..OperationsFilter::default()
            })
            .await?;
        Ok(Ledger {
            jobs: jobs
                .iter()
                .map(|j| OperationRow::of(j, &owner_now))
                .collect(),
            probes: store.probe_costs(since).await?,
            retained: retained(store).await?,
        })
    }

    /// The same ledger from `since` on: the jobs finished since, the probes of the days from
    /// the day of `since` on (they are kept a day at a time).
    pub(crate) fn narrowed(&self, since: DateTime<Utc>) -> Ledger {
        let first_day = since.date_naive();
        Ledger {
            jobs: self
                .jobs
                .iter()
                .filter(|row| row.finished_at.is_some_and(|at| at >= since))
                .cloned()
                .collect(),
            probes: self
                .probes
                .iter()
                .filter(|probe| probe.day.date_naive() >= first_day)
                .cloned()
                .collect(),
            retained: self.retained.clone(),
        }
    }

    /// Only what `owner` is charged: its jobs, its tables' probes and retained bytes.
    pub(crate) fn of_owner(
        self,
        owner: &str,
        owner_now: impl Fn(&str) -> Option<String>,
    ) -> Ledger {
        Ledger {
            jobs: self
                .jobs
                .into_iter()
                .filter(|row| row.owner.as_deref() == Some(owner))
                .collect(),
            probes: self
                .probes
                .into_iter()
                .filter(|probe| probe.owner == owner)
                .collect(),
            retained: self
                .retained
                .into_iter()
                .filter(|(table, _)| owner_now(table).as_deref() == Some(owner))
                .collect(),
        }
    }

    /// Each owner's estimated dollars per day (UTC), every day from `since` to `until`
    /// (days without cost are 0): the jobs by the day they finished, the probes by the day
    /// they ran, priced at `prices`.
    pub(crate) fn daily_usd_by_owner(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        prices: &Prices,
    ) -> DailyUsd {
        let first = since.date_naive();
        let last = until.date_naive().max(first);
        let mut days: BTreeMap<NaiveDate, BTreeMap<String, f64>> = first
            .iter_days()
            .take_while(|day| *day <= last)
            .map(|day| (day, BTreeMap::new()))
            .collect();
        let mut add = |day: NaiveDate, owner: &str, usd: f64| {
            if let Some(owners) = days.get_mut(&day) {
                *owners.entry(owner.to_owned()).or_default() += usd;
            }
        };
        for row in &self.jobs {
            if let (Some(at), Some(cost)) = (row.finished_at, &row.cost) {
                add(
                    at.date_naive(),
                    row.owner.as_deref().unwrap_or("(no owner)"),
                    cost.estimated_usd,
                );
            }
        }
        for probe in &self.probes {
            add(
                probe.day.date_naive(),
                &probe.owner,
                prices.usd(&probe.cost),
            );
        }
        let owners: std::collections::BTreeSet<String> =
            days.values().flat_map(|o| o.keys().cloned()).collect();
        for owners_of_day in days.values_mut() {
            for owner in &owners {
                owners_of_day.entry(owner.clone()).or_default();
            }
        }
        days.into_iter().collect()
    }

    /// Sums the ledger by `by` at `prices` (probes and retained bytes are priced here), most
    /// expensive first, and their total.
    pub(crate) fn report(
        &self,
        since: DateTime<Utc>,
        by: By,
        prices: &Prices,
        owner_now: impl Fn(&str) -> Option<String>,
    ) -> CostReport {
        let mut sums: BTreeMap<String, CostRow> = BTreeMap::new();
        let unowned = || "(no owner)".to_owned();
        for row in &self.jobs {
            let key = match by {
                By::Owner => row.owner.clone().unwrap_or_else(unowned),
                By::Table => row.table.clone(),
                By::Operation => row.operation.as_str().to_owned(),
            };
            let sum = sums.entry(key).or_default();
            sum.jobs += 1;
            if let Some(cost) = &row.cost {
                sum.cost = sum.cost.plus(cost);
            }
        }
        for probe in &self.probes {
            let key = match by {
                By::Owner => probe.owner.clone(),
                By::Table => probe.table.clone(),
                By::Operation => PROBE_OPERATION.to_owned(),
            };
            let sum = sums.entry(key).or_default();
            sum.cost = sum.cost.plus(&prices.priced(probe.cost));
        }
        if by != By::Operation {
            for (table, bytes) in &self.retained {
                let key = match by {
                    By::Owner => owner_now(table).unwrap_or_else(unowned),
                    _ => table.clone(),
                };
                let sum = sums.entry(key).or_default();
                *sum.retained_bytes.get_or_insert(0) += bytes;
            }
        }
        let mut rows: Vec<CostRow> = sums
            .into_iter()
            .map(|(key, mut row)| {
                row.key = key;
                row.retained_usd_per_month =
                    row.retained_bytes.map(|b| prices.storage_per_month(b));
                row
            })
            .collect();
        rows.sort_by(|a, b| {
            b.cost
                .estimated_usd
                .total_cmp(&a.cost.estimated_usd)
                .then_with(|| a.key.cmp(&b.key))
        });
        let total = rows.iter().fold(
            CostRow {
                key: "total".into(),
                ..CostRow::default()
            },
            |mut total, row| {
                total.jobs += row.jobs;
                total.cost = total.cost.plus(&row.cost);
                if let Some(bytes) = row.retained_bytes {
                    *total.retained_bytes.get_or_insert(0) += bytes;
                }
                total
            },
        );
        let total = CostRow {
            retained_usd_per_month: total.retained_bytes.map(|b| prices.storage_per_month(b)),
            ..total
        };
        CostReport {
            since,
            by,
            rows,
            total,
        }
    }
}

/// Bytes each table keeps only for its window, pins and clones, from the last restore drill
/// any replica stored.
async fn retained(store: &JobStore) -> Result<BTreeMap<String, u64>, StoreError> {
    let mut retained = BTreeMap::new();
    let (mut after, mut after_table) = (None, None::<String>);
    loop {
        let rows = store
            .probes_since(after, after_table.as_deref(), None, PROBES_PAGE)
            .await?;
        for row in &rows {
            let bytes = row
                .probe
                .as_ref()
                .and_then(|p| p.pointer("/restore_drill/retained_bytes"))
                .map(|r| {
                    ["window", "pin", "clone"]
                        .iter()
                        .filter_map(|k| r.get(k).and_then(serde_json::Value::as_u64))
                        .sum::<u64>()
                });
            if let Some(bytes) = bytes {
                retained.insert(row.table_name.clone(), bytes);
            }
        }
        match rows.last() {
            Some(last) if rows.len() == PROBES_PAGE as usize => {
                (after, after_table) = (Some(last.updated_at), Some(last.table_name.clone()));
            }
            _ => break,
        }
    }
    Ok(retained)
}

/// The columns every format writes, in order.
const COLUMNS: [&str; 14] = [
    "key",
    "jobs",
    "cpu_seconds",
    "wall_seconds",
    "get",
    "put",
    "list",
    "head",
    "delete",
    "bytes_read",
    "bytes_written",
    "estimated_usd",
    "retained_bytes",
    "retained_usd_per_month",
];

fn cells(row: &CostRow) -> [String; 14] {
    let c = &row.cost;
    let r = &c.requests;
    [
        row.key.clone(),
        row.jobs.to_string(),
        format!("{:.3}", c.cpu_seconds),
        format!("{:.3}", c.wall_seconds),
        r.get.to_string(),
        r.put.to_string(),
        r.list.to_string(),
        r.head.to_string(),
        r.delete.to_string(),
        c.bytes_read.to_string(),
        c.bytes_written.to_string(),
        format!("{:.6}", c.estimated_usd),
        row.retained_bytes
            .map(|b| b.to_string())
            .unwrap_or_default(),
        row.retained_usd_per_month
            .map(|u| format!("{u:.6}"))
            .unwrap_or_default(),
    ]
}

impl CostReport {
    pub fn csv(&self) -> String {
        let mut out = COLUMNS.join(",");
        out.push('\n');
        for row in self.rows.iter().chain(std::iter::once(&self.total)) {
            let line: Vec<String> = cells(row).iter().map(|c| csv_cell(c)).collect();
            out.push_str(&line.join(","));
            out.push('\n');
        }
        out
    }

    pub fn markdown(&self) -> String {
        let mut out = format!(
            "### Maintenance costs since {} by {}\n\n| {} |\n|{}|\n",
            self.since.format("%Y-%m-%d %H:%M UTC"),
            self.by_name(),
            COLUMNS.join(" | "),
            COLUMNS.iter().map(|_| "---").collect::<Vec<_>>().join("|")
        );
        for row in self.rows.iter().chain(std::iter::once(&self.total)) {
            let line: Vec<String> = cells(row).iter().map(|c| c.replace('|', "\\|")).collect();
            let _ = writeln!(out, "| {} |", line.join(" | "));
        }
        out
    }

    pub fn text(&self) -> String {
        let mut out = format!(
            "maintenance costs since {} by {} (estimated at the configured prices)\n",
            self.since.format("%Y-%m-%d %H:%M UTC"),
            self.by_name()
        );
        let width = self
            .rows
            .iter()
            .map(|r| r.key.len())
            .max()
            .unwrap_or(5)
            .max(5);
        let _ = writeln!(
            out,
            "{:width$}  {:>6}  {:>10}  {:>10}  {:>10}  {:>12}  {:>12}  {:>12}",
            self.by_name(),
            "jobs",
            "cpu s",
            "requests",
            "GB read",
            "GB written",
            "USD",
            "kept USD/mo"
        );
        for row in self.rows.iter().chain(std::iter::once(&self.total)) {
            let c = &row.cost;
            let _ = writeln!(
                out,
                "{:width$}  {:>6}  {:>10.1}  {:>10}  {:>10.3}  {:>12.3}  {:>12.4}  {:>12}",
                row.key,
                row.jobs,
                c.cpu_seconds,
                c.requests.total(),
                c.bytes_read as f64 / 1e9,
                c.bytes_written as f64 / 1e9,
                c.estimated_usd,
                row.retained_usd_per_month
                    .map(|u| format!("{u:.4}"))
                    .unwrap_or_else(|| "-".into()),
            );
        }
        out
    }

    fn by_name(&self) -> &'static str {
        match self.by {
            By::Owner => "owner",
            By::Table => "table",
            By::Operation => "operation",
        }
    }
}

pub(super) fn csv_cell(cell: &str) -> String {
    if cell.contains([',', '"', '\n']) {
        format!("\"{}\"", cell.replace('"', "\"\""))
    } else {
        cell.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: i64, table: &str, owner: &str, days_ago: i64, cpu: f64) -> OperationRow {
        OperationRow {
            job_id: tablekeeper_store::JobId(id),
            table: table.into(),
            owner: Some(owner.into()),
            operation: tablekeeper_inventory::Operation::Compact,
            trigger: tablekeeper_store::Trigger::Manual,
            state: tablekeeper_store::JobState::Failed,
            started_at: None,
            finished_at: Some(now() - chrono::Duration::days(days_ago)),
            cost: Some(Cost {
                cpu_seconds: cpu,
                ..Cost::default()
            }),
            outcome: None,
            estimate: None,
        }
    }

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-12-07T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    fn ledger() -> Ledger {
        Ledger {
            jobs: vec![
                job(3, "a", "red", 0, 1.0),
                job(2, "b", "blue", 3, 2.0),
                job(1, "a", "red", 20, 4.0),
            ],
            probes: vec![ProbeCostRow {
                table: "b".into(),
                owner: "blue".into(),
                day: now() - chrono::Duration::days(10),
                cost: Cost {
                    cpu_seconds: 0.5,
                    ..Cost::default()
                },
            }],
            retained: BTreeMap::from([("a".to_owned(), 10), ("b".to_owned(), 20)]),
        }
    }

    fn owner_now(table: &str) -> Option<String> {
        Some(if table == "a" { "red" } else { "blue" }.to_owned())
    }

    #[test]
    fn a_narrower_period_sums_only_the_jobs_it_holds() {
        let since = now() - chrono::Duration::days(7);
        let week = ledger().narrowed(since);
        let report = week.report(since, By::Owner, &Prices::default(), owner_now);
        let cpu: Vec<_> = report
            .rows
            .iter()
            .map(|r| (r.key.as_str(), r.jobs, r.cost.cpu_seconds))
            .collect();
        assert!(cpu.contains(&("red", 1, 1.0)), "{cpu:?}");
        assert!(cpu.contains(&("blue", 1, 2.0)), "{cpu:?}");
        assert_eq!(report.total.jobs, 2);
        assert_eq!(report.total.retained_bytes, Some(30));
    }

    #[test]
    fn one_owners_report_holds_its_jobs_probes_and_retained_bytes_only() {
        let blue = ledger().of_owner("blue", owner_now);
        let report = blue.report(now(), By::Table, &Prices::default(), owner_now);
        assert_eq!(report.rows.len(), 1);
        assert_eq!(report.rows[0].key, "b");
        assert_eq!(report.rows[0].jobs, 1);
        assert_eq!(report.rows[0].cost.cpu_seconds, 2.5);
        assert_eq!(report.rows[0].retained_bytes, Some(20));
    }

    #[test]
    fn csv_quotes_what_would_split_a_cell() {
        assert_eq!(csv_cell("team a"), "team a");
        assert_eq!(csv_cell("a,b"), "\"a,b\"");
        assert_eq!(csv_cell("say \"x\""), "\"say \"\"x\"\"\"");
    }
}
