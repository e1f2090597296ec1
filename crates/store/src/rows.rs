//! Conversions between stored values and model values that both backends share.
//! Must never panic on what it reads: the job table is edited by people too.

use std::str::FromStr;
use std::time::Duration;

use crate::error::StoreError;

/// Parses a closed-set column (`state`, `trigger`, `outcome`); an unknown value is
/// `Corrupt`, naming the column.
pub(crate) fn parse_stored<T: FromStr>(value: &str, column: &str) -> Result<T, StoreError> {
    value
        .parse()
        .map_err(|_| StoreError::Corrupt(format!("`{column}` holds unknown value `{value}`")))
}

/// A duration as whole microseconds (Postgres timestamp precision).
pub(crate) fn micros(duration: Duration, what: &str) -> Result<i64, StoreError> {
    i64::try_from(duration.as_micros())
        .map_err(|_| StoreError::InvalidInput(format!("`{what}` of {duration:?} is too long")))
}

/// How many times a call retries after losing a race with another replica before it
/// gives up with `Contention`. Each retry means a competing transaction committed, so
/// a handful suffices; the bound only keeps a pathological loop finite.
pub(crate) const MAX_RACE_RETRIES: usize = 8;

/// Upper bound of key waits one claim reports: enough for metrics, bounded so a backlog
/// of blocked jobs cannot make each claim read the whole queue.
pub(crate) const MAX_KEY_WAITS: i64 = 100;

/// Upper bound of expired jobs one `reap_expired` call handles; the next call takes the
/// rest.
pub(crate) const MAX_REAP_BATCH: i64 = 100;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::JobState;

    #[test]
    fn unknown_stored_values_are_corrupt_not_panics() {
        let err = parse_stored::<JobState>("paused", "jobs.state").unwrap_err();
        assert!(matches!(err, StoreError::Corrupt(_)));
        assert!(err
            .to_string()
            .contains("`jobs.state` holds unknown value `paused`"));
    }

    #[test]
    fn micros_refuses_absurd_durations() {
        assert_eq!(
            micros(Duration::from_millis(1500), "lease").unwrap(),
            1_500_000
        );
        assert!(micros(Duration::MAX, "lease").is_err());
    }
}
