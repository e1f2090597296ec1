//! Cron schedules as the inventory writes them and as the daemon's scheduler runs them.
//!
//! The inventory accepts classic 5-field cron (minute precision), 6-field cron with a
//! leading seconds field, and the nicknames `@hourly`, `@daily`, `@weekly`, `@monthly`,
//! `@yearly` (`@annually`). The daemon runs schedules through tokio-cron-scheduler 0.15.1,
//! which parses with croner 3 configured as "seconds required, day-of-month AND
//! day-of-week" (`tokio-cron-scheduler-0.15.1/src/job/mod.rs`, `Job::new_async_tz`). This
//! module parses every schedule with exactly that croner configuration, after rewriting it
//! to the 6-field form, so a schedule that validates here is one the scheduler accepts and
//! [`Schedule::next_after`] agrees with when the scheduler fires.
//!
//! One known difference remains, in the scheduler: tokio-cron-scheduler 0.15.1 captures the
//! zone's UTC offset once when a job is created (`time_offset_seconds`) and computes every
//! later tick in that fixed offset (`scheduler.rs`), so after a daylight-saving change its
//! ticks are an hour off from [`Schedule::next_after`] until the job is re-created.
//!
//! This module must never accept a schedule whose meaning differs between classic cron and
//! the scheduler: that is why restricting both day-of-month and day-of-week is refused
//! (classic cron fires when either matches, the scheduler only when both do).

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, Mutex, Weak};

use chrono::{DateTime, TimeZone, Timelike};
use croner::parser::{CronParser, Seconds};
use croner::Cron;

use crate::error::ScheduleError;

/// Nicknames and their 6-field expansion (seconds first), as croner 3.0.1 expands them in
/// `CronParser::handle_nicknames`. `@midnight` (Vixie cron) is not among them: croner does
/// not take it, so neither do we; `@daily` means the same.
const NICKNAMES: &[(&str, &str)] = &[
    ("@hourly", "0 0 * * * *"),
    ("@daily", "0 0 0 * * *"),
    ("@weekly", "0 0 0 * * 0"),
    ("@monthly", "0 0 0 1 * *"),
    ("@yearly", "0 0 0 1 1 *"),
    ("@annually", "0 0 0 1 1 *"),
];

const ACCEPTED_FORMS: &str = "write 5 fields (`minute hour day-of-month month day-of-week`, e.g. `0 2 * * *`), \
6 fields with leading seconds (`0 0 2 * * *`), or one of @hourly, @daily, @weekly, @monthly, @yearly";

/// A validated cron schedule.
///
/// Equality compares the expression as written. Cloning is a reference count: an inventory
/// of 10,000 tables holds five schedules per table, and a parsed cron expression takes
/// kilobytes in dozens of allocations (measured with heaptrack: deep copies of schedules
/// were the largest part of the daemon's peak heap).
#[derive(Clone, Debug)]
pub struct Schedule(Arc<Parsed>);

#[derive(Debug)]
struct Parsed {
    /// The expression as written in the inventory (trimmed).
    written: String,
    /// The 6-field form handed to tokio-cron-scheduler.
    six_fields: String,
    cron: Cron,
}

/// Schedules parsed so far, by expression: most tables share a handful of expressions, so
/// the whole inventory holds one parse of each. Entries die with their last schedule.
static PARSED: Mutex<BTreeMap<String, Weak<Parsed>>> = Mutex::new(BTreeMap::new());

impl Schedule {
    /// Parses and validates a schedule; the error says which forms are accepted.
    pub fn parse(expression: &str) -> Result<Schedule, ScheduleError> {
        let written = expression.trim();
        let mut parsed = PARSED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(known) = parsed.get(written).and_then(Weak::upgrade) {
            return Ok(Schedule(known));
        }
        let schedule = Self::parse_new(written)?;
        if parsed.len() >= 1024 {
            parsed.retain(|_, p| p.strong_count() > 0);
        }
        parsed.insert(written.to_owned(), Arc::downgrade(&schedule.0));
        Ok(schedule)
    }

    fn parse_new(written: &str) -> Result<Schedule, ScheduleError> {
        if written.is_empty() {
            return Err(ScheduleError(format!(
                "the schedule is empty: {ACCEPTED_FORMS}"
            )));
        }
        let six_fields = if written.starts_with('@') {
            let Some((_, expansion)) = NICKNAMES
                .iter()
                .find(|(nick, _)| nick.eq_ignore_ascii_case(written))
            else {
                let hint = if written.eq_ignore_ascii_case("@midnight") {
                    "`@midnight` is not supported: use `@daily` (the same time)".to_string()
                } else {
                    format!("unknown schedule nickname `{written}`: {ACCEPTED_FORMS}")
                };
                return Err(ScheduleError(hint));
            };
            (*expansion).to_string()
        } else {
            let fields: Vec<&str> = written.split_whitespace().collect();
            match fields.len() {
                5 => format!("0 {}", fields.join(" ")),
                6 => fields.join(" "),
                n => {
                    return Err(ScheduleError(format!(
                        "`{written}` has {n} fields: {ACCEPTED_FORMS}"
                    )))
                }
            }
        };
        let cron = scheduler_parser().parse(&six_fields).map_err(|e| {
            ScheduleError(format!(
                "`{written}` is not a valid cron schedule ({}): {ACCEPTED_FORMS}",
                lowercase_first(e.to_string().trim_end_matches('.'))
            ))
        })?;
        let fields: Vec<&str> = six_fields.split_whitespace().collect();
        if fields.get(3).is_some_and(|f| restricted(f))
            && fields.get(5).is_some_and(|f| restricted(f))
        {
            return Err(ScheduleError(format!(
                "`{written}` restricts both day-of-month and day-of-week: classic cron runs when \
                 either matches but tablekeeper's scheduler (tokio-cron-scheduler) only when both \
                 match; restrict one of them and write `*` in the other"
            )));
        }
        Ok(Schedule(Arc::new(Parsed {
            written: written.to_string(),
            six_fields,
            cron,
        })))
    }

    /// The expression as written in the inventory.
    pub fn as_str(&self) -> &str {
        &self.0.written
    }

    /// The form to hand to tokio-cron-scheduler 0.15.1 (`Job::new_async_tz`): always 6
    /// fields with leading seconds, nicknames expanded (the scheduler's parser requires
    /// seconds, so a 5-field expression gets `0 ` prefixed).
    pub fn scheduler_expression(&self) -> String {
        self.0.six_fields.clone()
    }

    /// The first time strictly after `after` at which the schedule fires, read in the
    /// timezone of `after` (pass a `DateTime<chrono_tz::Tz>` in the table's zone). `None`
    /// when the schedule never fires again (croner gives up searching, e.g. `0 0 30 2 *`).
    pub fn next_after<Z: TimeZone>(&self, after: DateTime<Z>) -> Option<DateTime<Z>> {
        self.0.cron.find_next_occurrence(&after, false).ok()
    }

    /// The latest time at or before `at` at which the schedule fires: the tick a scheduler
    /// firing at `at` (or a little late) belongs to. Every replica maps its own firing of one
    /// tick to the same instant, which makes the tick a key (one job per tick).
    pub fn tick_at_or_before<Z: TimeZone>(&self, at: DateTime<Z>) -> Option<DateTime<Z>> {
        // schedules fire on whole seconds; croner keeps the sub-second part it is given
        let at = at.with_nanosecond(0)?;
        self.0.cron.find_previous_occurrence(&at, true).ok()
    }
}

/// The croner configuration tokio-cron-scheduler 0.15.1 uses in `Job::new_async_tz`.
fn scheduler_parser() -> CronParser {
    CronParser::builder()
        .seconds(Seconds::Required)
        .dom_and_dow(true)
        .build()
}

/// A day field restricts the schedule unless it is `*` or `?` (croner reads `?` as `*`).
fn restricted(field: &str) -> bool {
    !matches!(field, "*" | "?")
}

fn lowercase_first(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

impl PartialEq for Schedule {
    fn eq(&self, other: &Self) -> bool {
        self.0.written == other.0.written
    }
}

impl Eq for Schedule {}

impl FromStr for Schedule {
    type Err = ScheduleError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Schedule::parse(s)
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.written)
    }
}

impl serde::Serialize for Schedule {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0.written)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;
    use chrono_tz::Tz;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn five_fields_get_a_leading_seconds_field() {
        let s = Schedule::parse("0 2 * * *").unwrap();
        assert_eq!(s.scheduler_expression(), "0 0 2 * * *");
        assert_eq!(s.as_str(), "0 2 * * *");
        assert_eq!(s.to_string(), "0 2 * * *");
    }

    #[test]
    fn a_late_firing_maps_to_its_tick() {
        let s = Schedule::parse("*/5 * * * * *").unwrap();
        let tick = at("2026-11-29T10:00:05Z");
        assert_eq!(s.tick_at_or_before(tick), Some(tick));
        assert_eq!(
            s.tick_at_or_before(at("2026-11-29T10:00:07.250Z")),
            Some(tick)
        );
        let daily = Schedule::parse("0 2 * * *").unwrap();
        assert_eq!(
            daily.tick_at_or_before(at("2026-11-29T02:00:00.004Z")),
            Some(at("2026-11-29T02:00:00Z"))
        );
    }

    #[test]
    fn six_fields_are_kept() {
        let s = Schedule::parse("30 */5 * * * *").unwrap();
        assert_eq!(s.scheduler_expression(), "30 */5 * * * *");
        let next = s.next_after(at("2026-11-29T10:00:00Z")).unwrap();
        assert_eq!(next, at("2026-11-29T10:00:30Z"));
    }

    #[test]
    fn nicknames_expand_to_six_fields() {
        for (nick, six) in [
            ("@hourly", "0 0 * * * *"),
            ("@daily", "0 0 0 * * *"),
            ("@weekly", "0 0 0 * * 0"),
            ("@monthly", "0 0 0 1 * *"),
            ("@yearly", "0 0 0 1 1 *"),
            ("@DAILY", "0 0 0 * * *"),
        ] {
            assert_eq!(
                Schedule::parse(nick).unwrap().scheduler_expression(),
                six,
                "{nick}"
            );
        }
        let err = Schedule::parse("@midnight").unwrap_err().to_string();
        assert!(err.contains("use `@daily`"), "{err}");
        let err = Schedule::parse("@nightly").unwrap_err().to_string();
        assert!(err.contains("unknown schedule nickname"), "{err}");
    }

    #[test]
    fn bad_schedules_say_which_forms_are_accepted() {
        for bad in [
            "",
            "0 2 * *",
            "0 0 2 * * * 2026",
            "61 * * * *",
            "0 25 * * *",
            "a b c d e",
        ] {
            let err = Schedule::parse(bad).unwrap_err().to_string();
            assert!(err.contains("5 fields"), "{bad}: {err}");
        }
    }

    #[test]
    fn restricting_both_day_fields_is_refused() {
        let err = Schedule::parse("0 0 1 * MON").unwrap_err().to_string();
        assert!(err.contains("both day-of-month and day-of-week"), "{err}");
        assert!(Schedule::parse("0 0 1 * *").is_ok());
        assert!(Schedule::parse("0 0 ? * MON").is_ok());
    }

    #[test]
    fn next_after_reads_the_schedule_in_the_given_zone() {
        let s = Schedule::parse("0 2 * * *").unwrap();
        let berlin: Tz = "Europe/Berlin".parse().unwrap();
        // 2026-11-29 is winter time in Berlin: UTC+1, so 02:00 local is 01:00 UTC.
        let next = s
            .next_after(at("2026-11-29T00:30:00Z").with_timezone(&berlin))
            .unwrap();
        assert_eq!(next.with_timezone(&Utc), at("2026-11-29T01:00:00Z"));
        // strictly after: a tick exactly at a firing time moves to the next day
        let again = s.next_after(next).unwrap();
        assert_eq!(again.with_timezone(&Utc), at("2026-11-30T01:00:00Z"));
    }

    #[test]
    fn every_thirty_minutes_and_weekly() {
        let s = Schedule::parse("*/30 * * * *").unwrap();
        assert_eq!(
            s.next_after(at("2026-11-29T10:05:00Z")).unwrap(),
            at("2026-11-29T10:30:00Z")
        );
        // 2026-11-29 is a Sunday; `0 3 * * 0` fires at 03:00 on Sundays
        let s = Schedule::parse("0 3 * * 0").unwrap();
        assert_eq!(
            s.next_after(at("2026-11-29T04:00:00Z")).unwrap(),
            at("2026-12-06T03:00:00Z")
        );
    }
}
