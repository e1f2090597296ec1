//! The frame every dashboard page is drawn in: the document, its style, its footer links.

use maud::{html, Markup, PreEscaped, DOCTYPE};

/// A whole page titled `title` around `body`; it refreshes itself every 30 seconds.
pub(super) fn document(title: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta http-equiv="refresh" content="30";
                title { (title) }
                style { (PreEscaped(STYLE)) }
            }
            body {
                (body)
                footer {
                    "JSON: " a href="/api/v1/tables" { "/api/v1/tables" } " · "
                    a href="/api/v1/jobs" { "/api/v1/jobs" } " · " a href="/metrics" { "/metrics" }
                }
            }
        }
    }
}

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:1.5rem;color:#222}\
table{border-collapse:collapse;width:100%;margin-bottom:1.5rem}\
th,td{border-bottom:1px solid #ddd;padding:.3rem .5rem;text-align:left;vertical-align:top}\
th{background:#f5f5f5}.ok{color:#17692b}.warn{background:#fff6d6}.bad{background:#fde2e1;color:#8a1111}\
.muted{color:#888}small{color:#666}code{background:#f2f2f2;padding:0 .2rem}\
nav,form,.pages{margin:.5rem 0}progress{width:20rem;vertical-align:middle}";
