//! The table page's pictures, server-rendered SVG (no JavaScript, escaped by construction
//! through maud like the rest of the dashboard): files, small files and average file size
//! over time with each job marked; each operation's staleness against the threshold past
//! which the dashboard calls it stale; erasure pending against the deadline. Readable
//! without colour: series differ by line pattern and markers carry letters. Each picture is
//! followed by a plain table of the same figures (for screen readers), and every drawn mark
//! carries its figures as `data-*` attributes, so a browser test reads back what was drawn.
//!
//! The fleet pages' pictures, alike: tables of each health hour by hour (the front page), and
//! each owner's estimated cost day by day (`/costs`).
//!
//! Pure: it draws what it is given and reads nothing itself.

use chrono::{DateTime, Utc};
use maud::{html, Markup};
use tablekeeper_inventory::Operation;
use tablekeeper_store::{HealthCounts, Job, JobState, TableFigures};

use super::format::{human_secs, stamp};
use crate::costs::report::DailyUsd;
use crate::fleet::{Health, OperationView};
use crate::policy::erasure::ErasureView;

/// The drawing's size in SVG units (it scales to the page's width).
const WIDTH: f64 = 720.0;
const PANEL_HEIGHT: f64 = 150.0;
/// Room for the axis labels left and below, and the job letters above.
const LEFT: f64 = 70.0;
const RIGHT: f64 = 12.0;
const TOP: f64 = 34.0;
const BOTTOM: f64 = 22.0;

/// The letter that marks an operation's job on the time axis.
fn letter(op: Operation) -> &'static str {
    match op {
        Operation::Compact => "C",
        Operation::Zorder => "Z",
        Operation::Vacuum => "V",
        Operation::Checkpoint => "K",
        Operation::Purge => "P",
        Operation::Repair => "R",
    }
}

/// A linear map from `[lo, hi]` onto `[a, b]` (a degenerate range maps to its middle).
fn scale(value: f64, lo: f64, hi: f64, a: f64, b: f64) -> f64 {
    if hi > lo {
        a + (value - lo) / (hi - lo) * (b - a)
    } else {
        (a + b) / 2.0
    }
}

/// The figures' time span, and the finished jobs inside it, oldest first.
fn jobs_within(jobs: &[Job], from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<(DateTime<Utc>, &Job)> {
    let mut marked: Vec<(DateTime<Utc>, &Job)> = jobs
        .iter()
        .filter(|j| j.state == JobState::Succeeded)
        .filter_map(|j| Some((j.finished_at?, j)))
        .filter(|(at, _)| *at >= from && *at <= to)
        .collect();
    marked.sort_by_key(|(at, j)| (*at, j.id));
    marked
}

/// One panel: a line per series (a value per figure row), dashed by `patterns`.
struct Panel<'a> {
    title: &'a str,
    top: f64,
    series: Vec<(&'a str, &'a str, Vec<f64>)>,
    unit: fn(f64) -> String,
}

fn panel(p: &Panel<'_>, times: &[f64], t0: f64, t1: f64) -> Markup {
    let max = p
        .series
        .iter()
        .flat_map(|(_, _, v)| v.iter().copied())
        .fold(0.0_f64, f64::max)
        .max(1.0);
    let bottom = p.top + PANEL_HEIGHT;
    let y = |v: f64| scale(v, 0.0, max, bottom, p.top + 4.0);
    let x = |t: f64| scale(t, t0, t1, LEFT, WIDTH - RIGHT);
    html! {
        g.panel {
            text x=(LEFT) y=(p.top - 6.0) font-size="12" { (p.title) }
            line x1=(LEFT) y1=(bottom) x2=(WIDTH - RIGHT) y2=(bottom) stroke="#555" {}
            line x1=(LEFT) y1=(p.top) x2=(LEFT) y2=(bottom) stroke="#555" {}
            text x=(LEFT - 4.0) y=(y(max) + 4.0) font-size="11" text-anchor="end" { ((p.unit)(max)) }
            text x=(LEFT - 4.0) y=(bottom) font-size="11" text-anchor="end" { "0" }
            @for (name, dash, values) in &p.series {
                polyline fill="none" stroke="#222" stroke-width="1.5" stroke-dasharray=(dash)
                    data-series=(name)
                    points=(times.iter().zip(values).map(|(t, v)| format!("{:.1},{:.1}", x(*t), y(*v))).collect::<Vec<_>>().join(" ")) {}
            }
        }
    }
}

fn bytes(v: f64) -> String {
    bytesize::ByteSize::b(v.max(0.0) as u64)
        .display()
        .iec()
        .to_string()
}

fn count(v: f64) -> String {
    format!("{v:.0}")
}

/// Files and small files (one panel) and average file size (another) over `figures`, each
/// succeeded job of `jobs` in that span a lettered line across both; then the table.
pub(super) fn files_over_time(
    figures: &[TableFigures],
    jobs: &[Job],
    now: DateTime<Utc>,
) -> Markup {
    let (Some(first), Some(_)) = (figures.first(), figures.last()) else {
        return html! { p.muted { "No figures recorded yet: the first probe adds them." } };
    };
    let (from, to) = (first.probed_at, now);
    let ts = |t: DateTime<Utc>| t.timestamp() as f64;
    let (t0, t1) = (ts(from), ts(to));
    let times: Vec<f64> = figures.iter().map(|f| ts(f.probed_at)).collect();
    let files = Panel {
        title: "files (solid) and small files (dashed)",
        top: TOP,
        series: vec![
            (
                "files",
                "none",
                figures.iter().map(|f| f.files as f64).collect(),
            ),
            (
                "small_files",
                "6 4",
                figures.iter().map(|f| f.small_files as f64).collect(),
            ),
        ],
        unit: count,
    };
    let average = Panel {
        title: "average file size",
        top: TOP + PANEL_HEIGHT + TOP + BOTTOM,
        series: vec![(
            "average_file_bytes",
            "none",
            figures
                .iter()
                .map(|f| f.average_file_bytes() as f64)
                .collect(),
        )],
        unit: bytes,
    };
    let height = average.top + PANEL_HEIGHT + BOTTOM;
    let marked = jobs_within(jobs, from, to);
    let x = |t: f64| scale(t, t0, t1, LEFT, WIDTH - RIGHT);
    html! {
        figure #files-over-time {
            svg role="img" aria-labelledby="files-over-time-title" viewBox=(format!("0 0 {WIDTH} {height}"))
                width="100%" style="max-width:720px" font-family="system-ui,sans-serif" {
                title #files-over-time-title { "Files, small files and average file size over time, with the jobs that changed them" }
                (panel(&files, &times, t0, t1))
                (panel(&average, &times, t0, t1))
                @for (f, t) in figures.iter().zip(&times) {
                    circle.figure cx=(format!("{:.1}", x(*t))) cy=(format!("{:.1}", TOP + PANEL_HEIGHT)) r="0"
                        data-at=(f.probed_at.to_rfc3339()) data-version=(f.version) data-files=(f.files)
                        data-small-files=(f.small_files) data-average-bytes=(f.average_file_bytes()) {}
                }
                @for (at, job) in &marked {
                    g.job data-job-id=(job.id.0) data-operation=(job.operation) data-at=(at.to_rfc3339()) {
                        line x1=(format!("{:.1}", x(ts(*at)))) x2=(format!("{:.1}", x(ts(*at)))) y1=(TOP - 4.0) y2=(height - BOTTOM)
                            stroke="#777" stroke-dasharray="2 3" {}
                        text x=(format!("{:.1}", x(ts(*at)))) y="12" font-size="11" text-anchor="middle" {
                            (letter(job.operation))
                        }
                    }
                }
                text x=(LEFT) y=(height - 4.0) font-size="11" { (stamp(from)) }
                text x=(WIDTH - RIGHT) y=(height - 4.0) font-size="11" text-anchor="end" { (stamp(to)) }
            }
            figcaption {
                "Jobs: C compaction, Z Z-order, V VACUUM, K checkpoint, P purge, R repair."
            }
        }
        table #figures {
            caption { "The figures drawn above, oldest first" }
            thead { tr { th { "probed at" } th { "version" } th { "files" } th { "small files" } th { "average file size" } } }
            tbody { @for f in figures {
                tr { td { (stamp(f.probed_at)) } td { (f.version) } td { (f.files) } td { (f.small_files) }
                     td { (bytes(f.average_file_bytes() as f64)) } }
            } }
        }
        table #marked-jobs {
            caption { "The jobs marked above" }
            thead { tr { th { "finished at" } th { "job" } th { "operation" } } }
            tbody { @for (at, job) in &marked {
                tr { td { (stamp(*at)) } td { (job.id.0) } td { (letter(job.operation)) " " (job.operation) } }
            } }
        }
    }
}

/// One horizontal bar per enabled operation: its staleness, and a mark at the threshold past
/// which the dashboard calls it stale (the operation's schedule period times three). Then
/// the table.
pub(super) fn staleness(operations: &[OperationView]) -> Markup {
    let shown: Vec<&OperationView> = operations
        .iter()
        .filter(|o| o.enabled && o.applies)
        .collect();
    let row_height = 26.0;
    let height = TOP + row_height * shown.len() as f64 + BOTTOM;
    let max = shown
        .iter()
        .flat_map(|o| {
            [
                o.staleness_seconds.unwrap_or(0),
                o.stale_after_seconds.unwrap_or(0),
            ]
        })
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let x = |s: i64| scale(s as f64, 0.0, max, LEFT + 40.0, WIDTH - RIGHT);
    html! {
        figure #staleness {
            svg role="img" aria-labelledby="staleness-title" viewBox=(format!("0 0 {WIDTH} {height}"))
                width="100%" style="max-width:720px" font-family="system-ui,sans-serif" {
                title #staleness-title { "Staleness of each operation against the threshold past which it is stale" }
                @for (i, o) in shown.iter().enumerate() {
                    @let top = TOP + row_height * i as f64;
                    g.operation data-operation=(o.operation)
                        data-staleness-seconds=(o.staleness_seconds.map(|s| s.to_string()).unwrap_or_default())
                        data-stale-after-seconds=(o.stale_after_seconds.map(|s| s.to_string()).unwrap_or_default())
                        data-stale=(o.stale) {
                        text x=(LEFT + 36.0) y=(top + 15.0) font-size="12" text-anchor="end" { (o.operation) }
                        rect x=(LEFT + 40.0) y=(top + 4.0) height="14"
                            width=(format!("{:.1}", x(o.staleness_seconds.unwrap_or(0)) - (LEFT + 40.0)))
                            fill=(if o.stale { "#8a1111" } else { "#6b7b8c" }) {}
                        @if let Some(limit) = o.stale_after_seconds {
                            line x1=(format!("{:.1}", x(limit))) x2=(format!("{:.1}", x(limit))) y1=(top) y2=(top + 22.0)
                                stroke="#000" stroke-width="2" {}
                        }
                        @if o.stale { text x=(WIDTH - RIGHT) y=(top + 15.0) font-size="12" text-anchor="end" { "STALE" } }
                    }
                }
            }
            figcaption { "Bars: time since the last success. The black mark: stale after three schedule periods." }
        }
        table #staleness-figures {
            caption { "Staleness per operation" }
            thead { tr { th { "operation" } th { "staleness" } th { "stale after" } th { "stale" } } }
            tbody { @for o in &shown {
                tr { td { (o.operation) } td { (o.staleness_seconds.map(human_secs).unwrap_or_else(|| "unknown".into())) }
                     td { (o.stale_after_seconds.map(human_secs).unwrap_or_else(|| "–".into())) }
                     td { (if o.stale { "yes" } else { "no" }) } }
            } }
        }
    }
}

/// The oldest deletion still on storage, against `retention.erasure_deadline`; then the table.
pub(super) fn erasure(e: &ErasureView) -> Markup {
    let deadline = e.deadline_seconds.and_then(|d| i64::try_from(d).ok());
    let max = e.pending_seconds.max(deadline.unwrap_or(0)).max(1) as f64;
    let x = |s: i64| scale(s as f64, 0.0, max, LEFT, WIDTH - RIGHT);
    let height = TOP + 26.0 + BOTTOM;
    html! {
        figure #erasure {
            svg role="img" aria-labelledby="erasure-title" viewBox=(format!("0 0 {WIDTH} {height}"))
                width="100%" style="max-width:720px" font-family="system-ui,sans-serif" {
                title #erasure-title { "How long the oldest deletion has waited on storage, against the erasure deadline" }
                g.erasure data-pending-seconds=(e.pending_seconds)
                    data-deadline-seconds=(deadline.map(|d| d.to_string()).unwrap_or_default())
                    data-overdue=(e.overdue) data-deleted-rows=(e.deleted_rows) {
                    rect x=(LEFT) y=(TOP + 4.0) height="14" width=(format!("{:.1}", x(e.pending_seconds) - LEFT))
                        fill=(if e.overdue { "#8a1111" } else { "#6b7b8c" }) {}
                    @if let Some(d) = deadline {
                        line x1=(format!("{:.1}", x(d))) x2=(format!("{:.1}", x(d))) y1=(TOP) y2=(TOP + 22.0) stroke="#000" stroke-width="2" {}
                        text x=(format!("{:.1}", x(d))) y=(TOP - 6.0) font-size="11" text-anchor="end" { "deadline " (human_secs(d)) }
                    }
                    text x=(LEFT) y=(height - 4.0) font-size="11" {
                        "pending " (human_secs(e.pending_seconds)) @if e.overdue { " — OVERDUE" }
                    }
                }
            }
        }
        table #erasure-figures {
            caption { "Erasure pending" }
            thead { tr { th { "deleted rows in live files" } th { "pending since" } th { "pending for" } th { "deadline" } th { "due at" } th { "overdue" } } }
            tbody { tr {
                td { (e.deleted_rows) }
                td { (e.pending_since.map(stamp).unwrap_or_else(|| "–".into())) }
                td { (human_secs(e.pending_seconds)) }
                td { (deadline.map(human_secs).unwrap_or_else(|| "none".into())) }
                td { (e.due_at.map(stamp).unwrap_or_else(|| "–".into())) }
                td { (if e.overdue { "yes" } else { "no" }) }
            } }
        }
    }
}

/// The fleet page's picture: one strip per health (worst first), the tables of that health
/// each recorded hour; then the table of the same counts.
pub(super) fn fleet_health(hours: &[(DateTime<Utc>, HealthCounts)]) -> Markup {
    let (Some((first, _)), Some((last, _))) = (hours.first(), hours.last()) else {
        return html! { p.muted { "No hour recorded yet: the first is recorded once the tables are probed." } };
    };
    let strip = 34.0;
    let height = TOP + strip * Health::ALL.len() as f64 + BOTTOM;
    let ts = |t: &DateTime<Utc>| t.timestamp() as f64;
    let (t0, t1) = (ts(first), ts(last));
    let x = |t: &DateTime<Utc>| scale(ts(t), t0, t1, LEFT + 40.0, WIDTH - RIGHT);
    let tables = |c: &HealthCounts, h: Health| c.get(h.as_str()).copied().unwrap_or(0);
    let max = hours
        .iter()
        .flat_map(|(_, c)| c.values().copied())
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    html! {
        figure #fleet-health {
            svg role="img" aria-labelledby="fleet-health-title" viewBox=(format!("0 0 {WIDTH} {height}"))
                width="100%" style="max-width:720px" font-family="system-ui,sans-serif" {
                title #fleet-health-title { "Tables of each health, hour by hour" }
                @for (i, health) in Health::ALL.into_iter().enumerate() {
                    @let bottom = TOP + strip * (i as f64 + 1.0) - 6.0;
                    @let y = |n: i64| scale(n as f64, 0.0, max, bottom, bottom - strip + 10.0);
                    g.health data-health=(health.as_str()) {
                        text x=(LEFT + 36.0) y=(bottom) font-size="12" text-anchor="end" { (health.as_str()) }
                        line x1=(LEFT + 40.0) y1=(bottom) x2=(WIDTH - RIGHT) y2=(bottom) stroke="#bbb" {}
                        polyline fill="none" stroke="#222" stroke-width="1.5"
                            points=(hours.iter().map(|(h, c)| format!("{:.1},{:.1}", x(h), y(tables(c, health)))).collect::<Vec<_>>().join(" ")) {}
                        @for (h, c) in hours {
                            circle.hour cx=(format!("{:.1}", x(h))) cy=(format!("{:.1}", y(tables(c, health)))) r="2"
                                data-hour=(h.to_rfc3339()) data-health=(health.as_str()) data-tables=(tables(c, health)) {}
                        }
                    }
                }
                text x=(LEFT + 40.0) y=(height - 4.0) font-size="11" { (stamp(*first)) }
                text x=(WIDTH - RIGHT) y=(height - 4.0) font-size="11" text-anchor="end" { (stamp(*last)) }
            }
        }
        table #fleet-health-figures {
            caption { "Tables of each health, hour by hour" }
            thead { tr { th { "hour" } @for h in Health::ALL { th { (h.as_str()) } } } }
            tbody { @for (hour, c) in hours {
                tr { td { (stamp(*hour)) } @for h in Health::ALL { td { (tables(c, h)) } } }
            } }
        }
    }
}

/// Owners drawn a strip each on the cost picture; the rest share one.
const OWNER_STRIPS: usize = 8;

/// The costs page's picture: one strip per owner (most expensive first; past
/// [`OWNER_STRIPS`] the rest share one), its estimated dollars day by day on one scale for
/// all; then the table of the same figures.
pub(super) fn cost_by_owner(days: &DailyUsd) -> Markup {
    let (Some((first, _)), Some((last, _))) = (days.first(), days.last()) else {
        return html! { p.muted { "No cost recorded yet." } };
    };
    let mut totals: Vec<(&str, f64)> = Vec::new();
    for (_, owners) in days {
        for (owner, usd) in owners {
            match totals.iter_mut().find(|(o, _)| o == owner) {
                Some((_, total)) => *total += usd,
                None => totals.push((owner, *usd)),
            }
        }
    }
    totals.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    let drawn: Vec<&str> = totals.iter().take(OWNER_STRIPS).map(|(o, _)| *o).collect();
    let others = totals.len() > OWNER_STRIPS;
    let strip_names: Vec<String> = drawn
        .iter()
        .map(|o| (*o).to_owned())
        .chain(others.then(|| "(other owners)".to_owned()))
        .collect();
    let usd_of = |owners: &std::collections::BTreeMap<String, f64>, strip: usize| -> f64 {
        if strip < drawn.len() {
            owners.get(drawn[strip]).copied().unwrap_or(0.0)
        } else {
            owners
                .iter()
                .filter(|(o, _)| !drawn.contains(&o.as_str()))
                .map(|(_, u)| u)
                .sum()
        }
    };
    let max = days
        .iter()
        .flat_map(|(_, owners)| (0..strip_names.len()).map(move |s| (owners, s)))
        .map(|(owners, s)| usd_of(owners, s))
        .fold(0.0_f64, f64::max);
    let max = if max > 0.0 { max } else { 1.0 };
    let strip = 34.0;
    let height = TOP + strip * strip_names.len().max(1) as f64 + BOTTOM;
    let ordinal = |d: &chrono::NaiveDate| f64::from(chrono::Datelike::num_days_from_ce(d));
    let (d0, d1) = (ordinal(first), ordinal(last));
    let left = LEFT + 70.0;
    let x = |d: &chrono::NaiveDate| scale(ordinal(d), d0, d1, left, WIDTH - RIGHT);
    html! {
        figure #cost-by-owner {
            svg role="img" aria-labelledby="cost-by-owner-title" viewBox=(format!("0 0 {WIDTH} {height}"))
                width="100%" style="max-width:720px" font-family="system-ui,sans-serif" {
                title #cost-by-owner-title { "Estimated maintenance cost per owner, day by day (USD)" }
                text x=(left) y=(TOP - 14.0) font-size="11" { "one scale for all: the highest day is " (format!("${max:.4}")) }
                @for (i, name) in strip_names.iter().enumerate() {
                    @let bottom = TOP + strip * (i as f64 + 1.0) - 6.0;
                    @let y = |usd: f64| scale(usd, 0.0, max, bottom, bottom - strip + 10.0);
                    g.owner data-owner=(name) {
                        text x=(left - 4.0) y=(bottom) font-size="12" text-anchor="end" { (name) }
                        line x1=(left) y1=(bottom) x2=(WIDTH - RIGHT) y2=(bottom) stroke="#bbb" {}
                        polyline fill="none" stroke="#222" stroke-width="1.5"
                            points=(days.iter().map(|(d, o)| format!("{:.1},{:.1}", x(d), y(usd_of(o, i)))).collect::<Vec<_>>().join(" ")) {}
                        @for (day, owners) in days {
                            circle.day cx=(format!("{:.1}", x(day))) cy=(format!("{:.1}", y(usd_of(owners, i)))) r="2"
                                data-day=(day.to_string()) data-owner=(name) data-usd=(format!("{:.6}", usd_of(owners, i))) {}
                        }
                    }
                }
                text x=(left) y=(height - 4.0) font-size="11" { (first.to_string()) }
                text x=(WIDTH - RIGHT) y=(height - 4.0) font-size="11" text-anchor="end" { (last.to_string()) }
            }
        }
        table #cost-by-owner-figures {
            caption { "Estimated maintenance cost per owner, day by day (USD)" }
            thead { tr { th { "day" } @for name in &strip_names { th { (name) } } } }
            tbody { @for (day, owners) in days {
                tr { td { (day.to_string()) } @for i in 0..strip_names.len() { td { (format!("{:.6}", usd_of(owners, i))) } } }
            } }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_maps_ranges_and_centres_a_point() {
        assert_eq!(scale(5.0, 0.0, 10.0, 0.0, 100.0), 50.0);
        assert_eq!(scale(0.0, 0.0, 10.0, 100.0, 0.0), 100.0);
        assert_eq!(scale(3.0, 3.0, 3.0, 0.0, 100.0), 50.0);
    }

    #[test]
    fn each_owner_has_a_strip_and_every_day_its_figure() {
        let day = |d: u32| chrono::NaiveDate::from_ymd_opt(2026, 12, d).unwrap_or_default();
        let owners = |a: f64, b: f64| {
            std::collections::BTreeMap::from([("data-eng".to_owned(), a), ("<ml>".to_owned(), b)])
        };
        let days: DailyUsd = vec![(day(1), owners(0.5, 0.0)), (day(2), owners(0.25, 2.0))];
        let out = cost_by_owner(&days).into_string();
        assert!(
            out.contains(r#"data-day="2026-12-02" data-owner="&lt;ml&gt;" data-usd="2.000000""#),
            "{out}"
        );
        assert!(
            out.contains(r#"data-day="2026-12-01" data-owner="data-eng" data-usd="0.500000""#),
            "{out}"
        );
        // the most expensive owner's strip comes first
        assert!(
            out.find("data-owner=\"&lt;ml&gt;\"") < out.find("data-owner=\"data-eng\""),
            "{out}"
        );
        assert!(out.contains("<td>0.250000</td>"), "{out}");
        for element in ["line", "polyline", "circle", "text", "g"] {
            assert_eq!(
                out.matches(&format!("<{element} ")).count(),
                out.matches(&format!("</{element}>")).count(),
                "every <{element}> is closed: {out}"
            );
        }
    }

    #[test]
    fn every_operation_has_its_own_letter() {
        let letters: std::collections::BTreeSet<&str> = Operation::ALL.map(letter).into();
        assert_eq!(letters.len(), Operation::ALL.len());
    }

    #[test]
    fn the_figures_drawn_are_in_the_data_and_the_table() {
        let at = |m: i64| DateTime::from_timestamp(1_700_000_000 + m * 60, 0).unwrap_or_default();
        let figures: Vec<TableFigures> = [(0, 40, 38), (10, 4, 2)]
            .map(|(m, files, small)| TableFigures {
                probed_at: at(m),
                version: m,
                files,
                small_files: small,
                size_bytes: files * 1000,
                erasure_pending_since: None,
            })
            .to_vec();
        let out = files_over_time(&figures, &[], at(20)).into_string();
        assert!(
            out.contains(r#"data-files="40" data-small-files="38" data-average-bytes="1000""#),
            "{out}"
        );
        assert!(
            out.contains(r#"data-files="4" data-small-files="2""#),
            "{out}"
        );
        assert!(out.contains("<td>38</td>"), "{out}");
        assert!(!out.contains("<script"), "{out}");
        // inside HTML, an SVG element left open swallows every element after it
        for element in ["line", "polyline", "circle", "text", "g"] {
            assert_eq!(
                out.matches(&format!("<{element} ")).count(),
                out.matches(&format!("</{element}>")).count(),
                "every <{element}> is closed: {out}"
            );
        }
    }
}
