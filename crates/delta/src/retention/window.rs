//! Deciding how long removed files and old log entries must be kept.
//!
//! Owns the parsing of Delta's interval properties and the "longest wins" rule of DESIGN.md
//! ("Retention and VACUUM safety"): effective VACUUM retention is the longest of the inventory's
//! `deleted_file_retention`, the table's `delta.deletedFileRetentionDuration`, and 168h unless
//! short retention is allowed. A disagreement is drift: reported, never resolved. This module
//! must never shorten a retention the table itself asks for.

use std::time::Duration;

use crate::error::DeltaError;
use crate::report::RetentionDrift;

/// Table property holding the VACUUM retention.
pub const DELETED_FILE_RETENTION_PROPERTY: &str = "delta.deletedFileRetentionDuration";
/// Table property holding the log retention.
pub const LOG_RETENTION_PROPERTY: &str = "delta.logRetentionDuration";
/// Table property switching expired-log cleanup off.
pub const EXPIRED_LOG_CLEANUP_PROPERTY: &str = "delta.enableExpiredLogCleanup";

/// Delta's own safety floor for VACUUM: `spark.databricks.delta.retentionDurationCheck` refuses
/// anything below 168 hours (7 days), and so does tablekeeper unless short retention is allowed.
pub const RETENTION_FLOOR: Duration = Duration::from_secs(168 * 3600);

const SECS_PER_MINUTE: u64 = 60;
const SECS_PER_HOUR: u64 = 3600;
const SECS_PER_DAY: u64 = 86_400;
const SECS_PER_WEEK: u64 = 604_800;

/// Parses a Delta interval property value.
///
/// Accepts Spark's calendar-interval spellings as tables carry them: `interval 7 days`,
/// `7 days` (Databricks' documentation writes it without `interval`), `interval 1 week`,
/// `interval 1 day 12 hours`, units from milliseconds to weeks, singular or plural, any case.
/// Months and years are refused: their length is not fixed.
pub fn parse_delta_interval(value: &str) -> Result<Duration, String> {
    let lowered = value.trim().to_ascii_lowercase();
    let mut tokens = lowered.split_whitespace().peekable();
    if tokens.peek() == Some(&"interval") {
        tokens.next();
    }
    let mut total = Duration::ZERO;
    let mut pairs = 0;
    while let Some(number) = tokens.next() {
        let number: u64 = number
            .parse()
            .map_err(|_| format!("`{number}` is not a whole non-negative number"))?;
        let unit = tokens
            .next()
            .ok_or_else(|| format!("`{number}` has no unit (expected e.g. `7 days`)"))?;
        let part = match unit.trim_end_matches('s') {
            "millisecond" => Duration::from_millis(number),
            "second" => Duration::from_secs(number),
            "minute" => Duration::from_secs(number.saturating_mul(SECS_PER_MINUTE)),
            "hour" => Duration::from_secs(number.saturating_mul(SECS_PER_HOUR)),
            "day" => Duration::from_secs(number.saturating_mul(SECS_PER_DAY)),
            "week" => Duration::from_secs(number.saturating_mul(SECS_PER_WEEK)),
            other => return Err(format!("unsupported interval unit `{other}`")),
        };
        total = total.saturating_add(part);
        pairs += 1;
    }
    if pairs == 0 {
        return Err("empty interval".into());
    }
    Ok(total)
}

/// Parses a table property if the table sets it.
fn property_duration(
    table: &str,
    key: &str,
    value: Option<&str>,
) -> Result<Option<Duration>, DeltaError> {
    value
        .map(|v| {
            parse_delta_interval(v).map_err(|reason| DeltaError::BadTableProperty {
                table: table.to_owned(),
                key: key.to_owned(),
                value: v.to_owned(),
                reason,
            })
        })
        .transpose()
}

fn drift(inventory: Duration, property: Option<Duration>) -> Option<RetentionDrift> {
    property
        .filter(|p| *p != inventory)
        .map(|p| RetentionDrift {
            inventory_secs: inventory.as_secs(),
            table_secs: p.as_secs(),
        })
}

/// The VACUUM retention to apply, and the drift between inventory and table, if any.
///
/// `table_property` is the raw `delta.deletedFileRetentionDuration` value when the table sets
/// it; an unset property takes no part (so `allow_short_retention` can go below 7 days on a
/// table that never asked for more). An inventory retention under [`RETENTION_FLOOR`] without
/// `allow_short_retention` is refused rather than silently raised: the inventory is wrong.
pub fn effective_retention(
    table: &str,
    inventory: Duration,
    table_property: Option<&str>,
    allow_short_retention: bool,
) -> Result<(Duration, Option<RetentionDrift>), DeltaError> {
    if inventory < RETENTION_FLOOR && !allow_short_retention {
        return Err(DeltaError::RetentionTooShort {
            table: table.to_owned(),
            requested_hours: inventory.as_secs() / SECS_PER_HOUR,
        });
    }
    let property = property_duration(table, DELETED_FILE_RETENTION_PROPERTY, table_property)?;
    let floor = if allow_short_retention {
        Duration::ZERO
    } else {
        RETENTION_FLOOR
    };
    let effective = inventory.max(property.unwrap_or(Duration::ZERO)).max(floor);
    Ok((effective, drift(inventory, property)))
}

/// The log retention to apply: the longer of the inventory's and the table's
/// `delta.logRetentionDuration` (when set), and the drift between them.
pub fn effective_log_retention(
    table: &str,
    inventory: Duration,
    table_property: Option<&str>,
) -> Result<(Duration, Option<RetentionDrift>), DeltaError> {
    let property = property_duration(table, LOG_RETENTION_PROPERTY, table_property)?;
    let effective = inventory.max(property.unwrap_or(Duration::ZERO));
    Ok((effective, drift(inventory, property)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: Duration = Duration::from_secs(SECS_PER_DAY);

    #[test]
    fn parses_delta_interval_spellings() {
        assert_eq!(parse_delta_interval("interval 7 days"), Ok(7 * DAY));
        assert_eq!(parse_delta_interval("7 days"), Ok(7 * DAY));
        assert_eq!(parse_delta_interval("interval 1 weeks"), Ok(7 * DAY));
        assert_eq!(parse_delta_interval("INTERVAL 1 WEEK"), Ok(7 * DAY));
        assert_eq!(
            parse_delta_interval("interval 1 day 12 hours"),
            Ok(DAY + Duration::from_secs(12 * 3600))
        );
        assert_eq!(
            parse_delta_interval("interval 500 milliseconds"),
            Ok(Duration::from_millis(500))
        );
        assert!(parse_delta_interval("interval 1 month").is_err());
        assert!(parse_delta_interval("interval -1 days").is_err());
        assert!(parse_delta_interval("seven days").is_err());
        assert!(parse_delta_interval("interval").is_err());
        assert!(parse_delta_interval("interval 7").is_err());
    }

    #[test]
    fn longest_retention_wins_and_drift_is_reported() {
        let (eff, drift) =
            effective_retention("/t", 8 * DAY, Some("interval 30 days"), false).expect("ok");
        assert_eq!(eff, 30 * DAY);
        assert_eq!(
            drift,
            Some(RetentionDrift {
                inventory_secs: (8 * DAY).as_secs(),
                table_secs: (30 * DAY).as_secs()
            })
        );
        let (eff, drift) = effective_retention("/t", 14 * DAY, None, false).expect("ok");
        assert_eq!(eff, 14 * DAY);
        assert_eq!(drift, None);
        let (eff, _) =
            effective_retention("/t", 14 * DAY, Some("interval 1 days"), false).expect("ok");
        assert_eq!(eff, 14 * DAY);
    }

    #[test]
    fn short_retention_needs_the_flag() {
        let err =
            effective_retention("/t", Duration::from_secs(3600), None, false).expect_err("refused");
        assert!(matches!(
            err,
            DeltaError::RetentionTooShort {
                requested_hours: 1,
                ..
            }
        ));
        let (eff, _) = effective_retention("/t", Duration::ZERO, None, true).expect("allowed");
        assert_eq!(eff, Duration::ZERO);
        // the table's own longer retention still wins over an allowed short inventory value
        let (eff, _) = effective_retention("/t", Duration::ZERO, Some("interval 2 days"), true)
            .expect("allowed");
        assert_eq!(eff, 2 * DAY);
    }

    #[test]
    fn unparsable_property_refuses() {
        let err = effective_retention("/t", 8 * DAY, Some("forever"), false).expect_err("bad");
        assert!(matches!(err, DeltaError::BadTableProperty { .. }));
        assert!(err.to_string().contains(DELETED_FILE_RETENTION_PROPERTY));
    }

    #[test]
    fn log_retention_takes_the_longer() {
        let (eff, drift) =
            effective_log_retention("/t", 30 * DAY, Some("interval 90 days")).expect("ok");
        assert_eq!(eff, 90 * DAY);
        assert!(drift.is_some());
        let (eff, drift) = effective_log_retention("/t", 30 * DAY, None).expect("ok");
        assert_eq!(eff, 30 * DAY);
        assert!(drift.is_none());
    }
}
