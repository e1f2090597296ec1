//! `GET /`: the server-rendered dashboard. One HTML page, no JavaScript: every table with
//! its health, staleness per operation, drift, last failure, and the running and queued
//! jobs. It refreshes itself every 30 seconds with a meta tag.

use std::fmt::Write as _;
use std::sync::Arc;

use axum::extract::State;
use axum::response::Html;
use chrono::Utc;
use tablekeeper_store::{JobFilter, JobState};

use crate::fleet::{Health, TableView};
use crate::runtime::Runtime;

/// Jobs listed per state section of the page.
const JOBS_SHOWN: i64 = 50;

pub async fn page(State(rt): State<Arc<Runtime>>) -> Html<String> {
    let now = Utc::now();
    let views = rt.fleet.views(now);
    let mut running = Vec::new();
    let mut queued = Vec::new();
    let mut store_error = None;
    for (state, out) in [
        (JobState::Running, &mut running),
        (JobState::Queued, &mut queued),
    ] {
        match rt
            .store
            .list_jobs(&JobFilter {
                table: None,
                state: Some(state),
                limit: JOBS_SHOWN,
            })
            .await
        {
            Ok(jobs) => *out = jobs,
            Err(e) => store_error = Some(e.to_string()),
        }
    }

    let mut h = String::with_capacity(16 * 1024);
    h.push_str(HEAD);
    let _ = write!(
        h,
        "<header><h1>tablekeeper</h1><p>replica <code>{}</code> · {} tables · {} running · {} queued · {}</p></header>",
        esc(&rt.config.replica_id),
        views.len(),
        running.len(),
        queued.len(),
        now.format("%Y-%m-%d %H:%M:%S UTC")
    );
    if let Some(e) = store_error {
        let _ = write!(h, "<p class=bad>job store unreachable: {}</p>", esc(&e));
    }

    h.push_str("<h2>Tables</h2><table><thead><tr><th>table</th><th>owner</th><th>health</th>");
    for op in tablekeeper_inventory::Operation::SCHEDULED {
        let _ = write!(h, "<th>{op} staleness</th>");
    }
    h.push_str("<th>files / small</th><th>size</th><th>drift</th><th>last failure</th></tr></thead><tbody>");
    for v in &views {
        table_row(&mut h, v);
    }
    h.push_str("</tbody></table>");

    for (title, jobs) in [("Running jobs", &running), ("Queued jobs", &queued)] {
        let _ = write!(h, "<h2>{title}</h2>");
        if jobs.is_empty() {
            h.push_str("<p class=muted>none</p>");
            continue;
        }
        h.push_str("<table><thead><tr><th>id</th><th>table</th><th>operation</th><th>trigger</th><th>attempt</th><th>worker</th><th>run at / started</th></tr></thead><tbody>");
        for j in jobs.iter() {
            let when = j.started_at.unwrap_or(j.run_at);
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}/{}</td><td>{}</td><td>{}</td></tr>",
                j.id,
                esc(&j.table_name),
                j.operation.as_str(),
                j.trigger.as_str(),
                j.attempt,
                j.max_attempts,
                esc(j.worker_id.as_deref().unwrap_or("")),
                when.format("%Y-%m-%d %H:%M:%S")
            );
        }
        h.push_str("</tbody></table>");
    }
    h.push_str("<footer>JSON: <a href=\"/api/v1/tables\">/api/v1/tables</a> · <a href=\"/api/v1/jobs\">/api/v1/jobs</a> · <a href=\"/metrics\">/metrics</a></footer></body></html>");
    Html(h)
}

fn table_row(h: &mut String, v: &TableView) {
    let class = match v.health {
        Health::Healthy => "ok",
        Health::Paused | Health::Unknown => "muted",
        Health::Drifted | Health::Stale => "warn",
        Health::Failing | Health::Unreadable => "bad",
    };
    let _ = write!(
        h,
        "<tr><td><a href=\"/api/v1/tables/{0}\">{0}</a> <small>(<a href=\"/api/v1/tables/{0}/history\">history</a>)</small><br><small>{1}</small></td><td>{2}</td><td class={3} title=\"{4}\">{5}</td>",
        esc(&v.name),
        esc(&v.path),
        esc(&v.owner),
        class,
        esc(&v.health_reasons.join("; ")),
        v.health.as_str()
    );
    for o in &v.operations {
        if !o.enabled {
            h.push_str("<td class=muted>disabled</td>");
            continue;
        }
        let text = o
            .staleness_seconds
            .map(human_secs)
            .unwrap_or_else(|| "unknown".into());
        let cls = if o.consecutive_failures > 0 {
            "bad"
        } else if o.stale {
            "warn"
        } else {
            ""
        };
        let _ = write!(
            h,
            "<td class=\"{cls}\" title=\"next run {}; {}\">{}</td>",
            o.next_run.map(|t| t.to_rfc3339()).unwrap_or_default(),
            esc(o.decision.reason()),
            esc(&text)
        );
    }
    match &v.probe {
        Some(p) => {
            let _ = write!(
                h,
                "<td>{} / {}</td><td>{}</td>",
                p.files,
                p.small_files,
                bytesize::ByteSize::b(p.size_bytes).display().iec()
            );
        }
        None => h.push_str("<td class=muted>–</td><td class=muted>–</td>"),
    }
    let drift = v
        .drift
        .iter()
        .map(|d| {
            format!(
                "<span title=\"{}\">{}</span>",
                esc(&d.detail),
                d.kind.as_str()
            )
        })
        .collect::<Vec<_>>()
        .join(" ");
    let _ = write!(
        h,
        "<td class=\"{}\">{}</td>",
        if drift.is_empty() { "" } else { "warn" },
        drift
    );
    let stale = v
        .stale_writes
        .iter()
        .filter(|w| w.repaired_by.is_none())
        .map(|w| {
            format!(
                "stale write at version {} ({} file(s){}) waits for repair",
                w.version,
                w.files,
                w.rows.map(|r| format!(", {r} rows")).unwrap_or_default()
            )
        })
        .next();
    let failure = stale
        .or_else(|| {
            v.operations
                .iter()
                .filter_map(|o| Some((o.last_failure_at?, o.operation, o.last_failure.as_deref()?)))
                .max_by_key(|(at, _, _)| *at)
                .map(|(at, op, msg)| format!("{op} at {}: {}", at.format("%Y-%m-%d %H:%M"), msg))
        })
        .or_else(|| v.probe_error.clone())
        .unwrap_or_default();
    let erasure = v
        .erasure
        .as_ref()
        .and_then(|e| e.summary.as_deref())
        .map(|s| format!("<br>{}", esc(s)))
        .unwrap_or_default();
    let _ = write!(h, "<td><small>{}{erasure}</small></td></tr>", esc(&failure));
}

fn human_secs(s: i64) -> String {
    let s = s.max(0);
    match s {
        0..=119 => format!("{s}s"),
        120..=7199 => format!("{}m", s / 60),
        7200..=172_799 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

/// Escapes text for HTML element content and attribute values.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const HEAD: &str = r#"<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta http-equiv="refresh" content="30"><title>tablekeeper</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:1.5rem;color:#222}
table{border-collapse:collapse;width:100%;margin-bottom:1.5rem}
th,td{border-bottom:1px solid #ddd;padding:.3rem .5rem;text-align:left;vertical-align:top}
th{background:#f5f5f5}.ok{color:#17692b}.warn{background:#fff6d6}.bad{background:#fde2e1;color:#8a1111}
.muted{color:#888}small{color:#666}code{background:#f2f2f2;padding:0 .2rem}
</style></head><body>"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup() {
        assert_eq!(
            esc("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }

    #[test]
    fn human_durations() {
        assert_eq!(human_secs(5), "5s");
        assert_eq!(human_secs(600), "10m");
        assert_eq!(human_secs(3 * 3600), "3h");
        assert_eq!(human_secs(3 * 86_400), "3d");
    }
}
