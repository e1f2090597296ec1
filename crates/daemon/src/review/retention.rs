//! What a change of a table's retention does (`plan --base`): the VACUUM window (the longest
//! of `deleted_file_retention` and the readers' `max_query_duration`), the log retention,
//! the pins and the declared clones, before and after.
//!
//! From the table's log (`tablekeeper_delta::preview_retention`): a shorter window names the
//! versions that stop restoring and the files and bytes the next VACUUM may then delete; a
//! shorter log retention the commits the next cleanup may delete; a longer window the bytes it
//! keeps and what they cost a month. Without the log: a declared reader whose queries outlast
//! the new `deleted_file_retention`, and a pin or declared clone the change stops keeping, are
//! blocking problems.

use std::time::Duration;

use chrono::{DateTime, Utc};
use tablekeeper_delta::{Keep, RetentionPreview, RetentionSettings};
use tablekeeper_inventory::{Inventory, PinAt, TableSpec};

use crate::config::Prices;
use crate::review::model::{Consequence, Kind, Severity};

/// The consequences of `before` → `after` on the same table; `preview` is the log's answer
/// (`None` when the retention did not move, or the table could not be read).
pub(crate) fn consequences(
    before: &TableSpec,
    after: &TableSpec,
    head: &Inventory,
    preview: Option<&RetentionPreview>,
    prices: &Prices,
    now: DateTime<Utc>,
) -> Vec<Consequence> {
    let mut out = readers_outlasting(after);
    out.extend(unkept_pins(before, after, now));
    out.extend(unkept_clones(before, after, head));
    if let Some(p) = preview {
        out.extend(from_log(p, prices));
    }
    out
}

/// Whether the change moves anything the log preview answers for.
pub(crate) fn moved(before: &TableSpec, after: &TableSpec) -> bool {
    before.vacuum_window() != after.vacuum_window()
        || before.retention.log_retention != after.retention.log_retention
        || before.retention.allow_short_retention != after.retention.allow_short_retention
        || before.retention.pins != after.retention.pins
        || before.retention.clones != after.retention.clones
}

/// The inventory's retention of `spec`, as the log preview takes it.
pub(crate) fn settings(spec: &TableSpec) -> RetentionSettings {
    RetentionSettings {
        vacuum_window: spec.vacuum_window(),
        allow_short_retention: spec.retention.allow_short_retention,
        log_retention: spec.retention.log_retention,
    }
}

/// What `spec`'s VACUUM keeps besides its window: its pins and declared clones (other
/// inventoried tables' logs are read when VACUUM runs).
pub(crate) fn keep(spec: &TableSpec) -> Keep {
    let inventory = tablekeeper_inventory::Inventory {
        tables: vec![spec.clone()],
        sources: Vec::new(),
        budget: None,
    };
    crate::policy::keep::keep_for(&inventory, spec, &[], |_| {
        crate::policy::keep::References::OwnOnly
    })
}

fn from_log(p: &RetentionPreview, prices: &Prices) -> Vec<Consequence> {
    let mut out = Vec::new();
    let when = |at: Option<DateTime<Utc>>| {
        at.map_or_else(String::new, |t| {
            format!(" ({})", t.format("%Y-%m-%d %H:%M UTC"))
        })
    };
    if p.after.version > p.before.version {
        out.push(Consequence::new(
            Kind::RetentionShortened,
            Severity::Warning,
            format!(
                "versions {}–{} stop being restorable: the oldest version time travel reaches moves from {}{} to {}{}; the next VACUUM may delete {} file(s), {}, that only they need",
                p.before.version,
                p.after.version - 1,
                p.before.version,
                when(p.before.committed_at),
                p.after.version,
                when(p.after.committed_at),
                p.vacuum_may_delete.files,
                bytes(p.vacuum_may_delete.bytes),
            ),
        ));
    }
    if p.newly_retained.files > 0 {
        out.push(Consequence::new(
            Kind::RetentionLengthened,
            Severity::Info,
            format!(
                "VACUUM keeps {} more file(s), {}, from now on: about ${:.2} a month at ${} per GB-month; the oldest version time travel reaches moves from {} to {}",
                p.newly_retained.files,
                bytes(p.newly_retained.bytes),
                prices.storage_per_month(p.newly_retained.bytes),
                prices.storage_gb_month,
                p.before.version,
                p.after.version
            ),
        ));
    }
    if let Some((first, last)) = p.log_commits_deletable {
        out.push(Consequence::new(
            Kind::RetentionShortened,
            Severity::Warning,
            format!(
                "the next log cleanup may delete commits {first}–{last} (their history stays in table_commits){}",
                p.oldest_loadable_after_cleanup
                    .map_or_else(String::new, |v| format!("; the oldest version that still loads becomes {v}"))
            ),
        ));
    }
    out
}

/// Readers whose longest queries outlast the table's `deleted_file_retention`: a query
/// started on a version could find its files gone (tablekeeper's own VACUUM keeps them for
/// the reader, another engine's VACUUM or the table's property would not).
fn readers_outlasting(after: &TableSpec) -> Vec<Consequence> {
    after
        .readers
        .iter()
        .filter_map(|r| r.max_query_duration.map(|d| (r, d)))
        .filter(|(_, d)| *d > after.retention.deleted_file_retention)
        .map(|(reader, longest)| {
            Consequence::new(
                Kind::ReaderUnprotected,
                Severity::Blocking,
                format!(
                    "reader `{}` runs queries up to {}, longer than `retention.deleted_file_retention` {}: a query started on a version could find its files deleted; raise the retention to at least {}",
                    reader.name,
                    human(longest),
                    human(after.retention.deleted_file_retention),
                    human(longest)
                ),
            )
        })
        .collect()
}

/// Pins still in force before the change that it drops: their versions stop being kept.
fn unkept_pins(before: &TableSpec, after: &TableSpec, now: DateTime<Utc>) -> Vec<Consequence> {
    before
        .retention
        .pins
        .iter()
        .filter(|p| p.until > now && !after.retention.pins.contains(p))
        .map(|pin| {
            let at = match pin.at {
                PinAt::Version(v) => format!("version {v}"),
                PinAt::Timestamp(t) => format!("the version at {}", t.to_rfc3339()),
            };
            Consequence::new(
                Kind::PinOrCloneUnprotected,
                Severity::Blocking,
                format!(
                    "the pin of {at} (`{}`, until {}) is removed while in force: the next VACUUM may delete its files and log cleanup its commits; remove it only when whoever relies on it agrees, or let it expire",
                    pin.reason,
                    pin.until.format("%Y-%m-%d")
                ),
            )
        })
        .collect()
}

/// Declared clones the change stops protecting (a clone in the inventory stays protected as
/// an inventoried table).
fn unkept_clones(before: &TableSpec, after: &TableSpec, head: &Inventory) -> Vec<Consequence> {
    before
        .retention
        .clones
        .iter()
        .filter(|c| !after.retention.clones.contains(c))
        .filter(|c| !head.tables.iter().any(|t| t.path == **c))
        .map(|clone| {
            Consequence::new(
                Kind::PinOrCloneUnprotected,
                Severity::Blocking,
                format!(
                    "the shallow clone `{clone}` is no longer declared: VACUUM stops keeping the files its versions read, so the clone breaks at the next VACUUM; keep it declared while the clone exists"
                ),
            )
        })
        .collect()
}

fn human(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

fn bytes(b: u64) -> String {
    bytesize::ByteSize(b).display().iec().to_string()
}
