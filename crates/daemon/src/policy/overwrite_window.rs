//! Overwrite windows (`writers.overwrites`): recurring times at which other writers fully
//! overwrite a table. A full overwrite planned on a snapshot older than a compaction keeps the
//! compacted copy of the old rows (DESIGN.md, known hazards), so no rewrite of tablekeeper's may
//! start or commit while a window is open: the planner defers rewrites to the window's end and
//! the executor stops a rewrite still running when the next window opens.
//!
//! Pure functions of the inventory entry and a clock value; no I/O.

use chrono::{DateTime, Duration as ChronoDuration, Utc};
use tablekeeper_inventory::TableSpec;

/// The window open at `now`, as (opened, closes), if any.
pub fn open_at(spec: &TableSpec, now: DateTime<Utc>) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
    let window = spec.writers.overwrites.as_ref()?;
    let length = ChronoDuration::from_std(window.duration).ok()?;
    // The latest opening at or before `now` that still covers it: the first opening after
    // `now - length` (strictly after, so a window closing exactly now is over).
    let from = (now - length).with_timezone(&spec.timezone);
    let opened = window.schedule.next_after(from)?.with_timezone(&Utc);
    let closes = opened + length;
    (opened <= now && now < closes).then_some((opened, closes))
}

/// When the next window opens after `now`.
pub fn next_opening(spec: &TableSpec, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let window = spec.writers.overwrites.as_ref()?;
    window
        .schedule
        .next_after(now.with_timezone(&spec.timezone))
        .map(|t| t.with_timezone(&Utc))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use tablekeeper_inventory::Inventory;

    fn spec(writers: &str) -> TableSpec {
        let yaml = format!("tables:\n  - name: t\n    path: /data/t\n    owner: o\n{writers}");
        Inventory::parse(Path::new("inv.yaml"), &yaml)
            .unwrap()
            .tables[0]
            .clone()
    }

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().unwrap()
    }

    #[test]
    fn windows_open_at_their_schedule_for_their_duration() {
        let s = spec("    writers:\n      overwrites: { schedule: \"0 1 * * *\", duration: 2h }\n");
        assert_eq!(open_at(&s, at("2026-12-01T00:59:59Z")), None);
        assert_eq!(
            open_at(&s, at("2026-12-01T01:00:00Z")),
            Some((at("2026-12-01T01:00:00Z"), at("2026-12-01T03:00:00Z")))
        );
        assert!(open_at(&s, at("2026-12-01T02:59:59Z")).is_some());
        assert_eq!(open_at(&s, at("2026-12-01T03:00:00Z")), None);
        assert_eq!(
            next_opening(&s, at("2026-12-01T03:00:00Z")),
            Some(at("2026-12-02T01:00:00Z"))
        );
    }

    #[test]
    fn tables_without_a_window_have_none() {
        let s = spec("");
        assert_eq!(open_at(&s, at("2026-12-01T01:30:00Z")), None);
        assert_eq!(next_opening(&s, at("2026-12-01T01:30:00Z")), None);
    }
}
