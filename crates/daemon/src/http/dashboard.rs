//! `GET /` and `GET /tables/{name}`: the server-rendered dashboard. No JavaScript; every value
//! goes through maud, which escapes by construction. The front page puts the worst tables
//! first (unreadable, failing, stale past their schedule, drifted, ...), filters by owner and
//! health, and pages, so it stays small with thousands of tables; each table has its own page
//! with every operation's decision, the erasure state, stale writes and recent jobs. Pages
//! refresh themselves every 30 seconds with a meta tag.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::response::Html;
use chrono::{DateTime, Utc};
use maud::{html, Markup};
use serde::Deserialize;
use tablekeeper_inventory::Operation;
use tablekeeper_store::{Job, JobFilter, JobState, Progress, StaleWriteRow, TableFigures};

use super::error::ApiError;
use super::format::{human_secs, opt_stamp, stamp};
use super::page::document;
use super::pictures;
use crate::fleet::{Health, OperationView, TableView};
use crate::shared::Shared;

/// Jobs listed per state section of the front page, and per table page.
const JOBS_SHOWN: i64 = 50;
/// How far back a table page draws the table's figures.
const FIGURES_SHOWN_FOR: chrono::Duration = chrono::Duration::days(7);

/// Tables per front page.
const PAGE_SIZE: usize = 50;

/// The front page's filters, from the query string as the page's own form sends it: an
/// empty value (the form's "any") is no filter.
#[derive(Debug, Default, Deserialize)]
pub struct PageQuery {
    owner: Option<String>,
    health: Option<String>,
    page: Option<String>,
}

/// [`PageQuery`] read: the owner, the health and the page (from 1) to show.
#[derive(Debug)]
struct Filters {
    owner: Option<String>,
    health: Option<Health>,
    page: Option<usize>,
}

impl PageQuery {
    fn filters(self) -> Result<Filters, ApiError> {
        let health = match self.health.as_deref().filter(|h| !h.is_empty()) {
            None => None,
            Some(h) => Some(
                Health::ALL
                    .into_iter()
                    .find(|x| x.as_str() == h)
                    .ok_or_else(|| {
                        let known: Vec<&str> = Health::ALL.iter().map(|x| x.as_str()).collect();
                        ApiError::BadRequest(format!(
                            "unknown health `{h}`: use one of {}",
                            known.join(", ")
                        ))
                    })?,
            ),
        };
        let page = match self.page.as_deref().filter(|p| !p.is_empty()) {
            None => None,
            Some(p) => Some(p.parse::<usize>().map_err(|_| {
                ApiError::BadRequest(format!("`page` must be a whole number from 1, got `{p}`"))
            })?),
        };
        Ok(Filters {
            owner: self.owner.filter(|o| !o.is_empty()),
            health,
            page,
        })
    }
}

pub async fn page(
    State(rt): State<Arc<Shared>>,
    query: Result<Query<PageQuery>, QueryRejection>,
) -> Result<Html<String>, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    let query = query.filters()?;
    let now = Utc::now();
    // every table is ranked (health, staleness) to sort, filter and count; views, which
    // cost a cron evaluation per operation, are built for the shown page only
    let (inventory, ranks) = rt.fleet.ranks(now);
    let tables = &inventory.tables;
    let owners: BTreeSet<&str> = tables.iter().map(|t| t.owner.as_str()).collect();
    let mut by_health: BTreeMap<Health, usize> = BTreeMap::new();
    for r in &ranks {
        *by_health.entry(r.health).or_default() += 1;
    }
    let fleet_size = tables.len();
    let mut matching: Vec<usize> = (0..tables.len())
        .filter(|&i| {
            query.owner.as_ref().is_none_or(|o| &tables[i].owner == o)
                && query.health.is_none_or(|h| ranks[i].health == h)
        })
        .collect();
    matching.sort_by(|&a, &b| {
        let key = |i: usize| {
            (
                ranks[i].health,
                std::cmp::Reverse(ranks[i].worst_staleness),
                &tables[i].name,
            )
        };
        key(a).cmp(&key(b))
    });
    let pages = matching.len().div_ceil(PAGE_SIZE).max(1);
    let page = query.page.unwrap_or(1).clamp(1, pages);
    let shown: Vec<TableView> = matching
        .iter()
        .skip((page - 1) * PAGE_SIZE)
        .take(PAGE_SIZE)
        .filter_map(|&i| rt.fleet.view(&tables[i].name, now))
        .collect();
    let (running, queued, mut store_error) = jobs(&rt, None).await;
    let since = now - crate::replica::fleet_health::FLEET_HEALTH_SHOWN;
    let fleet_health = rt.store.fleet_health(since).await.unwrap_or_else(|e| {
        store_error = store_error.take().or(Some(e.to_string()));
        Vec::new()
    });

    let body = html! {
        header {
            h1 { "tablekeeper" }
            p {
                "replica " code { (rt.config.replica_id) } " · " (fleet_size) " tables · "
                (running.len()) " running · " (queued.len()) " queued · " (stamp(now))
            }
        }
        @if let Some(e) = &store_error { p.bad { "job store unreachable: " (e) } }
        (filters(&query, &owners, &by_health, fleet_size))
        h2 { "Tables" }
        p.pages {
            "page " (page) " of " (pages) " · " (matching.len()) " matching, worst first"
            @if page > 1 { " · " a rel="prev" href=(link(query.owner.as_deref(), query.health, page - 1)) { "previous" } }
            @if page < pages { " · " a rel="next" href=(link(query.owner.as_deref(), query.health, page + 1)) { "next" } }
        }
        table #tables {
            thead { tr {
                th { "table" } th { "owner" } th { "health" }
                @for op in Operation::SCHEDULED { th { (op) " staleness" } }
                th { "files / small" } th { "size" } th { "drift" } th { "note" }
            } }
            tbody { @for v in &shown { (table_row(v)) } }
        }
        h2 { "Health over the last 7 days" }
        (pictures::fleet_health(&fleet_health))
        (job_table("Running jobs", &running))
        (job_table("Queued jobs", &queued))
    };
    Ok(Html(document("tablekeeper", body).into_string()))
}

/// The front page's health counts (each a link to the tables of that health) and its owner
/// and health filter form.
fn filters(
    query: &Filters,
    owners: &BTreeSet<&str>,
    by_health: &BTreeMap<Health, usize>,
    fleet_size: usize,
) -> Markup {
    html! {
        nav.health {
            a href="/" { "all (" (fleet_size) ")" }
            @for (health, count) in by_health {
                " · " a.(class(*health)) href=(link(query.owner.as_deref(), Some(*health), 1)) {
                    (health.as_str()) " (" (count) ")"
                }
            }
        }
        form method="get" action="/" {
            label { "owner " select name="owner" {
                option value="" { "any" }
                @for owner in owners {
                    option value=(owner) selected[query.owner.as_deref() == Some(*owner)] { (owner) }
                }
            } }
            " "
            label { "health " select name="health" {
                option value="" { "any" }
                @for health in Health::ALL {
                    option value=(health.as_str()) selected[query.health == Some(health)] { (health.as_str()) }
                }
            } }
            " " button type="submit" { "filter" }
        }
    }
}

pub async fn table_page(
    State(rt): State<Arc<Shared>>,
    Path(name): Path<String>,
) -> Result<Html<String>, ApiError> {
    let now = Utc::now();
    let mut v = rt
        .fleet
        .view(&name, now)
        .ok_or_else(|| ApiError::NotFound(format!("no table `{name}` in the inventory")))?;
    let (recent, _, mut store_error) = jobs(&rt, Some(&name)).await;
    match rt.store.stale_writes(Some(&name)).await {
        Ok(rows) => v.stale_writes = rows,
        Err(e) => store_error = store_error.or(Some(e.to_string())),
    }
    let progress = running_progress(&rt, &recent).await;
    let costs = super::cost_pages::table_costs(&rt, &name).await;
    let figures = rt
        .store
        .figures(&name, now - FIGURES_SHOWN_FOR)
        .await
        .unwrap_or_else(|e| {
            store_error = store_error.take().or(Some(e.to_string()));
            Vec::new()
        });
    let body = html! {
        header {
            p { a href="/" { "← all tables" } }
            h1 { (v.name) }
            p { code { (v.path) } " · owner " (v.owner) " · concurrency key " code { (v.concurrency_key) } }
        }
        @if let Some(e) = &store_error { p.bad { "job store unreachable: " (e) } }
        p {
            "health " span.(class(v.health)) { (v.health.as_str()) }
            @if v.paused { " (paused)" }
        }
        @if !v.health_reasons.is_empty() { ul.reasons { @for r in &v.health_reasons { li { (r) } } } }
        @if let Some(e) = &v.probe_error { p.bad { "probe: " (e) } }
        @if let Some(p) = &v.probe {
            p {
                "version " (p.version) " · " (p.files) " files (" (p.small_files) " small) · "
                (bytesize::ByteSize::b(p.size_bytes).display().iec()) " · "
                (p.commits_since_checkpoint) " commits since checkpoint · "
                (p.history.commits_per_hour) " commits in the last hour"
            }
        }
        (table_pictures(&v, &figures, &recent, now))
        (operations_table(&v.operations))
        @if !v.drift.is_empty() {
            h2 { "Drift" }
            ul { @for d in &v.drift { li { (d.kind.as_str()) ": " (d.detail) } } }
        }
        @if !v.expired_pins.is_empty() {
            h2 { "Expired pins" }
            ul.warn { @for pin in &v.expired_pins { li { (pin) } } }
        }
        @if let Some(drill) = v.probe.as_deref().and_then(|p| p.restore_drill.as_ref()) {
            (restore_drill(drill))
        }
        @if let Some(summary) = v.erasure.as_ref().and_then(|e| e.summary.as_deref()) {
            h2 { "Erasure" }
            p.(if v.erasure.as_ref().is_some_and(|e| e.overdue) { "bad" } else { "" }) { (summary) }
        }
        (foreign_rewrites(&v))
        (stale_writes(&v.stale_writes))
        (running(&progress))
        (costs)
        (job_table("Recent jobs", &recent))
    };
    Ok(Html(
        document(&format!("{} · tablekeeper", v.name), body).into_string(),
    ))
}

/// The table page's operations: schedule, next run, last success, staleness, failures and
/// what the planner would decide now (with the budget's verdict and the estimate).
fn operations_table(operations: &[OperationView]) -> Markup {
    html! {
        h2 { "Operations" }
        table #operations {
            thead { tr {
                th { "operation" } th { "schedule" } th { "next run" } th { "last success" }
                th { "staleness" } th { "failures" } th { "decision now" }
            } }
            tbody { @for o in operations {
                tr.(if o.consecutive_failures > 0 { "bad" } else if o.stale { "warn" } else { "" }) {
                    td { (o.operation) }
                    @if o.enabled {
                        td { code { (o.schedule) } }
                        td { (opt_stamp(o.next_run)) }
                        td { (opt_stamp(o.last_success)) }
                        td { (o.staleness_seconds.map(human_secs).unwrap_or_else(|| "unknown".into())) }
                        td {
                            (o.consecutive_failures)
                            @if let (Some(at), Some(msg)) = (o.last_failure_at, &o.last_failure) {
                                br; small { (stamp(at)) ": " (msg) }
                            }
                        }
                        td {
                            (o.decision.label()) ": " (o.decision.reason())
                            @if let Some(would) = &o.would_defer {
                                br; small.would-defer { (would) }
                            }
                            @if let Some(e) = &o.estimate {
                                br; small.estimate {
                                    (format!(
                                        "estimate: {:.1} CPU-s, {} requests, {} read; benefit {:.0}",
                                        e.cost.cpu_seconds,
                                        e.cost.requests,
                                        bytesize::ByteSize::b(e.cost.bytes),
                                        e.benefit
                                    ))
                                }
                            }
                        }
                    } @else {
                        td.muted colspan="6" { "disabled" }
                    }
                }
            } }
        }
    }
}

/// Rewrites other engines committed to the table, and who owns its rewrites.
fn foreign_rewrites(v: &TableView) -> Markup {
    html! {
        @if let Some(p) = v.probe.as_deref().filter(|p| !p.history.recent_foreign_rewrites.is_empty()) {
            h2 { "Rewrites by other engines" }
            p.(if v.rewrites_owned { "warn" } else { "" }) {
                @if v.rewrites_owned {
                    "Only one engine may rewrite a table: stop the other job, or declare `writers.rewrites: external`."
                } @else {
                    "Another engine owns this table's rewrites (`writers.rewrites: external`)."
                }
                @if let Some(f) = &v.foreign_rewrites { " " (f.rewrites) " recorded in all." }
            }
            ul { @for c in &p.history.recent_foreign_rewrites {
                li {
                    "version " (c.version) " " (c.operation.as_deref().unwrap_or("unknown operation"))
                    " by " (c.engine_info.as_deref().unwrap_or("an unknown engine"))
                    @if let Some(at) = c.committed_at { " at " (at.format("%Y-%m-%d %H:%M UTC")) }
                }
            } }
        }
    }
}

/// The stale writes found in the table's log and whether each was repaired.
fn stale_writes(writes: &[StaleWriteRow]) -> Markup {
    html! {
        @if !writes.is_empty() {
            h2 { "Stale writes" }
            ul { @for w in writes {
                li {
                    "version " (w.version)
                    @if let Some(kind) = w.kind { " (" (kind.as_str()) ")" }
                    " by " (w.engine_info.as_deref().unwrap_or("an unknown engine"))
                    " (" (w.files) " file(s)"
                    @if let Some(rows) = w.rows { ", " (rows) " rows" }
                    "): "
                    @match w.repaired_by { Some(r) => { "repaired by version " (r) }, None => { "waits for repair" } }
                }
            } }
        }
    }
}

/// The split jobs running on the table, with their tasks' progress.
fn running(progress: &[(Job, Progress)]) -> Markup {
    html! {
        @if !progress.is_empty() {
            h2 { "Running" }
            @for (job, p) in progress {
                p.running {
                    "job " (job.id.0) " " (job.operation) ": "
                    progress value=(p.bytes_done) max=(p.bytes_total.max(1)) {
                        (p.tasks_done) "/" (p.tasks_total)
                    }
                    " " (p.tasks_done) " of " (p.tasks_total) " tasks, "
                    (bytesize::ByteSize::b(p.bytes_done).display().iec()) " of "
                    (bytesize::ByteSize::b(p.bytes_total).display().iec())
                    @if p.tasks_running > 0 { " · " (p.tasks_running) " running" }
                    @if p.tasks_failed > 0 { span.bad { " · " (p.tasks_failed) " failed" } }
                }
            }
        }
    }
}

/// The table page's pictures: files over time with the jobs, staleness, erasure pending.
fn table_pictures(
    v: &TableView,
    figures: &[TableFigures],
    jobs: &[Job],
    now: DateTime<Utc>,
) -> Markup {
    html! {
        h2 { "Files over time" }
        (pictures::files_over_time(figures, jobs, now))
        h2 { "Staleness" }
        (pictures::staleness(&v.operations))
        @if let Some(e) = v.erasure.as_ref().filter(|e| e.deadline_seconds.is_some() || e.pending_seconds > 0) {
            h2 { "Erasure pending" }
            (pictures::erasure(e))
        }
    }
}

/// What time travel keeps on storage, and whether every version owed still restores.
fn restore_drill(drill: &tablekeeper_delta::RestoreDrill) -> Markup {
    html! {
        h2 { "Time travel and restore drill" }
        p {
            "Kept on storage for time travel: "
            (bytesize::ByteSize::b(drill.retained_bytes.window).display().iec()) " by the VACUUM window, "
            (bytesize::ByteSize::b(drill.retained_bytes.pin).display().iec()) " by pins, "
            (bytesize::ByteSize::b(drill.retained_bytes.clone).display().iec()) " by clones (drill of " (stamp(drill.checked_at)) ")."
        }
        table {
            thead { tr { th { "owed to" } th { "version" } th { "restorable" } th { "missing files" } } }
            tbody { @for o in &drill.versions {
                tr.(if o.restorable { "" } else { "bad" }) {
                    td { (o.owed_to) }
                    td { (o.version.map_or_else(|| "?".to_owned(), |v| v.to_string())) }
                    td { (if o.restorable { "yes" } else { "no" }) }
                    td {
                        @if let Some(e) = &o.error { (e) }
                        @else if o.missing_count > 0 {
                            (o.missing_count) ": " (o.missing_files.join(", "))
                        }
                    }
                }
            } }
        }
    }
}

/// The progress of the running jobs among `jobs` that run as tasks (`job_tasks`); a job
/// running whole on one worker has no tasks and shows none.
async fn running_progress(rt: &Shared, jobs: &[Job]) -> Vec<(Job, Progress)> {
    let mut out = Vec::new();
    for job in jobs.iter().filter(|j| j.state == JobState::Running) {
        match rt.store.tasks(job.id).await {
            Ok(tasks) if !tasks.is_empty() => out.push((job.clone(), Progress::of(&tasks))),
            Ok(_) => {}
            Err(e) => tracing::warn!(job_id = job.id.0, error = %e, "cannot read the job's tasks"),
        }
    }
    out
}

/// The running and queued jobs (of one table, when given), or the store's error.
async fn jobs(rt: &Shared, table: Option<&str>) -> (Vec<Job>, Vec<Job>, Option<String>) {
    let states: &[Option<JobState>] = match table {
        // a table page lists its recent jobs of every state
        Some(_) => &[None],
        None => &[Some(JobState::Running), Some(JobState::Queued)],
    };
    let mut lists = Vec::new();
    let mut error = None;
    for state in states {
        let filter = JobFilter {
            table: table.map(str::to_owned),
            state: *state,
            operation: None,
            limit: JOBS_SHOWN,
        };
        match rt.store.list_jobs(&filter).await {
            Ok(jobs) => lists.push(jobs),
            Err(e) => {
                error = Some(e.to_string());
                lists.push(Vec::new());
            }
        }
    }
    let mut lists = lists.into_iter();
    let first = lists.next().unwrap_or_default();
    let second = lists.next().unwrap_or_default();
    (first, second, error)
}

fn table_row(v: &TableView) -> Markup {
    let note = note(v);
    html! {
        tr {
            td {
                a href=(format!("/tables/{}", encode(&v.name))) { (v.name) }
                br; small { (v.path) }
            }
            td { (v.owner) }
            td.(class(v.health)) title=(v.health_reasons.join("; ")) {
                (v.health.as_str())
                @if let Some(reason) = v.health_reasons.first() { br; small { (reason) } }
            }
            @for o in &v.operations {
                @if !o.enabled {
                    td.muted { "disabled" }
                } @else if !o.applies {
                    td.muted title=(o.decision.reason()) { "n/a" }
                } @else {
                    td.(if o.consecutive_failures > 0 { "bad" } else if o.stale { "warn" } else { "" })
                        title=(format!("next run {}; {}", opt_stamp(o.next_run), o.decision.reason())) {
                        (o.staleness_seconds.map(human_secs).unwrap_or_else(|| "unknown".into()))
                    }
                }
            }
            @match &v.probe {
                Some(p) => {
                    td { (p.files) " / " (p.small_files) }
                    td { (bytesize::ByteSize::b(p.size_bytes).display().iec()) }
                },
                None => { td.muted { "–" } td.muted { "–" } },
            }
            td.(if v.drift.is_empty() { "" } else { "warn" }) {
                @for d in &v.drift { span title=(d.detail) { (d.kind.as_str()) } " " }
            }
            td { small {
                (note)
                @if let Some(summary) = v.erasure.as_ref().and_then(|e| e.summary.as_deref()) {
                    br; (summary)
                }
            } }
        }
    }
}

/// The one thing to read first about a table: a stale write waiting for repair (as its last
/// probe found it), else its newest failure, else its probe error.
fn note(v: &TableView) -> String {
    v.probe
        .as_deref()
        .and_then(|p| p.pending_stale_writes().next())
        .map(|w| {
            format!(
                "stale {} at version {} ({} file(s){}) waits for repair",
                w.kind.map_or("write", |k| k.as_str()),
                w.version,
                w.files,
                w.rows.map(|r| format!(", {r} rows")).unwrap_or_default()
            )
        })
        .or_else(|| {
            v.operations
                .iter()
                .filter_map(|o| Some((o.last_failure_at?, o.operation, o.last_failure.as_deref()?)))
                .max_by_key(|(at, _, _)| *at)
                .map(|(at, op, msg)| format!("{op} at {}: {msg}", at.format("%Y-%m-%d %H:%M")))
        })
        .or_else(|| v.probe_error.clone())
        .unwrap_or_default()
}

fn job_table(title: &str, jobs: &[Job]) -> Markup {
    html! {
        h2 { (title) }
        @if jobs.is_empty() {
            p.muted { "none" }
        } @else {
            table {
                thead { tr {
                    th { "id" } th { "table" } th { "operation" } th { "state" } th { "trigger" }
                    th { "attempt" } th { "worker" } th { "run at / started" } th { "error" }
                } }
                tbody { @for j in jobs {
                    tr {
                        td { (j.id.0) }
                        td { a href=(format!("/tables/{}", encode(&j.table_name))) { (j.table_name) } }
                        td { (j.operation) } td { (j.state.as_str()) } td { (j.trigger.as_str()) }
                        td { (j.attempt) "/" (j.max_attempts) }
                        td { (j.worker_id.as_deref().unwrap_or("")) }
                        td { (stamp(j.started_at.unwrap_or(j.run_at))) }
                        td { small { (j.error.as_deref().unwrap_or("")) } }
                    }
                } }
            }
        }
    }
}

fn class(health: Health) -> &'static str {
    match health {
        Health::Healthy => "ok",
        Health::Paused | Health::Unknown => "muted",
        Health::Drifted | Health::Stale => "warn",
        Health::Failing | Health::Unreadable => "bad",
    }
}

/// The front page's URL for these filters.
fn link(owner: Option<&str>, health: Option<Health>, page: usize) -> String {
    let mut query = url::form_urlencoded::Serializer::new(String::new());
    if let Some(owner) = owner {
        query.append_pair("owner", owner);
    }
    if let Some(health) = health {
        query.append_pair("health", health.as_str());
    }
    if page > 1 {
        query.append_pair("page", &page.to_string());
    }
    format!("/?{}", query.finish())
}

fn encode(segment: &str) -> String {
    url::form_urlencoded::byte_serialize(segment.as_bytes()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_is_escaped_by_construction() {
        let hostile = "<script>alert('x')</script>&\"";
        let out = html! { td title=(hostile) { (hostile) } }.into_string();
        assert!(!out.contains("<script>"), "{out}");
        assert!(out.contains("&lt;script&gt;"), "{out}");
    }

    #[test]
    fn links_keep_the_filters_and_encode_them() {
        assert_eq!(link(None, None, 1), "/?");
        assert_eq!(
            link(Some("data & ml"), Some(Health::Failing), 3),
            "/?owner=data+%26+ml&health=failing&page=3"
        );
    }
}
