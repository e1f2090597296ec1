//! Parsers for the typed scalar values of the inventory: durations, sizes, timezones,
//! instants, table names and table paths.
//!
//! Each parser takes the text as written and returns either the value or a message that
//! says what is wrong and how to write it instead; locating the message is the caller's
//! job. This module must never guess: a duration without a unit, a month (no fixed
//! length) or a relative table path is an error, not a default.

use std::time::Duration;

use chrono_tz::Tz;

/// Examples appended to duration errors.
const DURATION_FORMS: &str = "write e.g. `30m`, `168h`, `7d`, `2w` or Delta's `interval 7 days`";

/// Examples appended to size errors.
const SIZE_FORMS: &str = "write e.g. `128MB`, `512MiB`, `1GiB` or a number of bytes";

/// The URL schemes deltalake 1.x opens with the `s3`, `gcs` and `azure` features, plus
/// `file://`; kept in the order the DESIGN contract lists them.
const SCHEMES: &[&str] = &["file", "s3", "gs", "az", "abfss"];

const PATH_FORMS: &str =
    "write an absolute path (`/data/lake/events`) or a URL starting with file://, s3://, gs://, az:// or abfss://";

/// How a date without a time is read as an instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DateAs {
    /// Midnight at its start, UTC (as `TIMESTAMP AS OF '2027-03-01'` reads it).
    Start,
    /// The end of that day, UTC: `until: 2027-03-01` holds through that date.
    End,
}

/// Parses an instant: RFC 3339 (`2027-03-01T12:00:00Z`) or a date (`2027-03-01`), read as
/// `date_as` says.
pub(crate) fn parse_instant(
    text: &str,
    date_as: DateAs,
) -> Result<chrono::DateTime<chrono::Utc>, String> {
    let text = text.trim();
    if let Ok(at) = chrono::DateTime::parse_from_rfc3339(text) {
        return Ok(at.with_timezone(&chrono::Utc));
    }
    let date = chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d").map_err(|_| {
        format!(
            "`{text}` is not a date or an RFC 3339 instant: write e.g. `2027-03-01` or \
             `2027-03-01T12:00:00Z`"
        )
    })?;
    let midnight = date.and_time(chrono::NaiveTime::MIN).and_utc();
    Ok(match date_as {
        DateAs::Start => midnight,
        DateAs::End => midnight + chrono::Duration::days(1),
    })
}

/// Parses a duration: humantime (`30m`, `168h`, `7d`, `2w`, `1h 30m`) or Delta's interval
/// form (`interval 7 days`, `interval 1 week`, `interval 12 hours`).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err(format!("the duration is empty: {DURATION_FORMS}"));
    }
    let lower = text.to_ascii_lowercase();
    if let Some(rest) = lower.strip_prefix("interval") {
        if rest.starts_with(char::is_whitespace) {
            return parse_interval(text, rest);
        }
    }
    if text.bytes().all(|b| b.is_ascii_digit()) && text != "0" {
        return Err(format!("`{text}` has no unit: {DURATION_FORMS}"));
    }
    if let Some(unit) = calendar_unit(text) {
        return Err(format!(
            "`{text}` uses `{unit}`, which has no fixed length: write days or weeks instead (`30d`, `4w`)"
        ));
    }
    humantime::parse_duration(text)
        .map_err(|e| format!("`{text}` is not a duration ({e}): {DURATION_FORMS}"))
}

/// The first month or year unit in a humantime-style duration, if any.
fn calendar_unit(text: &str) -> Option<&str> {
    text.split(|c: char| !c.is_alphabetic())
        .filter(|unit| !unit.is_empty())
        .find(|unit| {
            matches!(
                *unit,
                "M" | "month" | "months" | "y" | "yr" | "yrs" | "year" | "years"
            )
        })
}

/// Delta's `CalendarInterval` spelling as used in `delta.deletedFileRetentionDuration`:
/// `interval` followed by one or more `<integer> <unit>` pairs.
fn parse_interval(text: &str, rest: &str) -> Result<Duration, String> {
    let tokens: Vec<&str> = rest.split_whitespace().collect();
    if tokens.is_empty() || !tokens.len().is_multiple_of(2) {
        return Err(format!(
            "`{text}` is not a Delta interval: write `interval <number> <unit>`, e.g. `interval 7 days`"
        ));
    }
    let mut total = Duration::ZERO;
    for pair in tokens.chunks(2) {
        let amount: u64 = pair[0].parse().map_err(|_| {
            format!(
                "`{}` in `{text}` is not a whole number: write e.g. `interval 7 days`",
                pair[0]
            )
        })?;
        let unit_secs: u64 = match pair[1].trim_end_matches('s') {
            "week" => 7 * 86_400,
            "day" => 86_400,
            "hour" => 3_600,
            "minute" => 60,
            "second" => 1,
            "month" | "year" => {
                return Err(format!(
                    "`{text}` uses {}, which have no fixed length: write days or weeks (`interval 30 days`)",
                    pair[1]
                ))
            }
            _ => {
                return Err(format!(
                    "unknown unit `{}` in `{text}`: use weeks, days, hours, minutes or seconds",
                    pair[1]
                ))
            }
        };
        let secs = amount
            .checked_mul(unit_secs)
            .ok_or_else(|| format!("`{text}` is too long"))?;
        total = total
            .checked_add(Duration::from_secs(secs))
            .ok_or_else(|| format!("`{text}` is too long"))?;
    }
    Ok(total)
}

/// Parses a size written as text: `128MB` (10^6), `512MiB` (2^20), `1GiB`, `1 GB`, or a
/// plain number of bytes.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    if !text.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(format!("`{text}` is not a size: {SIZE_FORMS}"));
    }
    text.parse::<bytesize::ByteSize>()
        .map(|size| size.as_u64())
        .map_err(|_| format!("`{text}` is not a size: {SIZE_FORMS}"))
}

/// Parses an IANA timezone name; the error suggests the closest name.
pub fn parse_timezone(text: &str) -> Result<Tz, String> {
    let text = text.trim();
    if let Ok(tz) = text.parse::<Tz>() {
        return Ok(tz);
    }
    let hint = chrono_tz::TZ_VARIANTS
        .iter()
        .map(|tz| tz.name())
        .map(|name| {
            (
                strsim::jaro_winkler(&name.to_lowercase(), &text.to_lowercase()),
                name,
            )
        })
        .filter(|(score, _)| *score > 0.85)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, name)| format!("did you mean `{name}`? "))
        .unwrap_or_default();
    Err(format!(
        "`{text}` is not an IANA timezone name: {hint}write e.g. `UTC`, `Europe/Berlin` or `America/New_York`"
    ))
}

/// Checks a table name against `[A-Za-z0-9_.-]+`: it appears in metric labels, job rows and
/// log fields, so it must be a plain token.
pub fn check_table_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("the table name is empty: use letters, digits, `_`, `.` and `-`".to_string());
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')))
    {
        return Err(format!(
            "`{name}` contains {bad:?}: table names may only use letters, digits, `_`, `.` and `-`"
        ));
    }
    Ok(())
}

/// A table location, checked and normalized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TablePath {
    /// As written, with the scheme lowercased and trailing slashes removed.
    pub normalized: String,
    /// The identity used to find two entries for one table: `file:///x` and `/x` are the
    /// same, so are `s3://b/t/` and `s3://b/t`, and `/a//b/./c` and `/a/b/c`.
    pub identity: String,
    /// The URL scheme (`s3`, `gs`, ...), `None` for a plain absolute path.
    pub scheme: Option<String>,
}

/// Checks and normalizes a table path: absolute local path or file://, s3://, gs://,
/// az://, abfss:// URL.
pub fn parse_table_path(text: &str) -> Result<TablePath, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err(format!("the path is empty: {PATH_FORMS}"));
    }
    if let Some((scheme, rest)) = text.split_once("://") {
        let scheme = scheme.to_ascii_lowercase();
        if !SCHEMES.contains(&scheme.as_str()) {
            let hint = match scheme.as_str() {
                "s3a" | "s3n" => " (deltalake reads S3 as `s3://`)".to_string(),
                "gcs" => " (deltalake reads Google Cloud Storage as `gs://`)".to_string(),
                "abfs" | "wasb" | "wasbs" | "adl" => {
                    " (deltalake reads Azure as `az://` or `abfss://`)".to_string()
                }
                _ => String::new(),
            };
            return Err(format!(
                "scheme `{scheme}://` is not supported{hint}: {PATH_FORMS}"
            ));
        }
        if scheme == "file" {
            refuse_percent(text)?;
            if !rest.starts_with('/') {
                return Err(format!(
                    "`{text}` is not an absolute file URL: write three slashes, `file:///absolute/path`"
                ));
            }
            let local = normalize_local(rest);
            return Ok(TablePath {
                normalized: format!("file://{}", trim_trailing_slashes(rest)),
                identity: local,
                scheme: Some(scheme),
            });
        }
        let bucket = rest.split('/').next().unwrap_or_default();
        if bucket.is_empty() {
            return Err(format!(
                "`{text}` names no bucket or container: write `{scheme}://<bucket>/<table path>`"
            ));
        }
        let normalized = format!("{scheme}://{}", trim_trailing_slashes(rest));
        return Ok(TablePath {
            identity: normalized.clone(),
            normalized,
            scheme: Some(scheme),
        });
    }
    if !text.starts_with('/') {
        return Err(format!("`{text}` is a relative path: {PATH_FORMS}"));
    }
    refuse_percent(text)?;
    Ok(TablePath {
        normalized: trim_trailing_slashes(text).to_string(),
        identity: normalize_local(text),
        scheme: None,
    })
}

fn trim_trailing_slashes(path: &str) -> &str {
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() {
        "/"
    } else {
        trimmed
    }
}

/// Collapses `//` and `/./`; `..` is kept as written (resolving it would need the
/// filesystem, and symlinks make a textual resolution wrong).
/// deltalake 1.1 percent-decodes local table locations (`/data/a%41` opens `/data/aA`), so
/// a local path holding `%` would name another directory than the one written.
fn refuse_percent(text: &str) -> Result<(), String> {
    if text.contains('%') {
        return Err(format!(
            "`{text}` contains `%`: deltalake decodes percent escapes in local table paths, so \
             this would open a different directory; rename the directory without `%`"
        ));
    }
    Ok(())
}

fn normalize_local(path: &str) -> String {
    let parts: Vec<&str> = path
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    format!("/{}", parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_in_humantime_form() {
        assert_eq!(parse_duration("30m").unwrap(), Duration::from_secs(30 * 60));
        assert_eq!(
            parse_duration("168h").unwrap(),
            Duration::from_secs(168 * 3600)
        );
        assert_eq!(
            parse_duration("7d").unwrap(),
            Duration::from_secs(7 * 86_400)
        );
        assert_eq!(
            parse_duration("2w").unwrap(),
            Duration::from_secs(14 * 86_400)
        );
        assert_eq!(
            parse_duration("1h 30m").unwrap(),
            Duration::from_secs(90 * 60)
        );
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
    }

    #[test]
    fn durations_in_delta_interval_form() {
        assert_eq!(
            parse_duration("interval 7 days").unwrap(),
            Duration::from_secs(7 * 86_400)
        );
        assert_eq!(
            parse_duration("interval 1 week").unwrap(),
            Duration::from_secs(7 * 86_400)
        );
        assert_eq!(
            parse_duration("interval 12 hours").unwrap(),
            Duration::from_secs(12 * 3600)
        );
        assert_eq!(
            parse_duration("INTERVAL 1 day").unwrap(),
            Duration::from_secs(86_400)
        );
        assert_eq!(
            parse_duration("interval 1 day 12 hours").unwrap(),
            Duration::from_secs(36 * 3600)
        );
    }

    #[test]
    fn bad_durations_say_how_to_write_them() {
        for bad in [
            "",
            "7",
            "seven days",
            "7x",
            "interval",
            "interval seven days",
            "interval 7",
        ] {
            let err = parse_duration(bad).unwrap_err();
            assert!(
                err.contains("interval") || err.contains("7d"),
                "{bad}: {err}"
            );
        }
        assert!(parse_duration("7").unwrap_err().contains("has no unit"));
        assert!(parse_duration("1M")
            .unwrap_err()
            .contains("no fixed length"));
        assert!(parse_duration("1y")
            .unwrap_err()
            .contains("no fixed length"));
        assert!(parse_duration("interval 1 month")
            .unwrap_err()
            .contains("no fixed length"));
        assert!(parse_duration("interval 3 fortnights")
            .unwrap_err()
            .contains("unknown unit"));
    }

    #[test]
    fn sizes_decimal_and_binary() {
        assert_eq!(parse_size("128MB").unwrap(), 128_000_000);
        assert_eq!(parse_size("512MiB").unwrap(), 512 * 1024 * 1024);
        assert_eq!(parse_size("1GiB").unwrap(), 1024 * 1024 * 1024);
        assert_eq!(parse_size("1 GB").unwrap(), 1_000_000_000);
        assert_eq!(parse_size("1048576").unwrap(), 1_048_576);
        for bad in ["", "MB", "12 parsecs", "-1MB", "big"] {
            let err = parse_size(bad).unwrap_err();
            assert!(err.contains("512MiB"), "{bad}: {err}");
        }
    }

    #[test]
    fn timezones_with_a_hint() {
        assert_eq!(parse_timezone("UTC").unwrap(), Tz::UTC);
        assert_eq!(parse_timezone("Europe/Berlin").unwrap(), Tz::Europe__Berlin);
        let err = parse_timezone("Europe/Berlinn").unwrap_err();
        assert!(err.contains("did you mean `Europe/Berlin`"), "{err}");
        let err = parse_timezone("Mars/Olympus").unwrap_err();
        assert!(err.contains("not an IANA timezone"), "{err}");
    }

    #[test]
    fn table_names() {
        assert!(check_table_name("silver.events_v2-eu").is_ok());
        assert!(check_table_name("silver events")
            .unwrap_err()
            .contains("' '"));
        assert!(check_table_name("").is_err());
        assert!(check_table_name("ümlaut").is_err());
    }

    #[test]
    fn table_paths_are_normalized() {
        let p = parse_table_path("S3://lake/silver/events/").unwrap();
        assert_eq!(p.normalized, "s3://lake/silver/events");
        assert_eq!(p.scheme.as_deref(), Some("s3"));
        let a = parse_table_path("file:///data/lake//events/").unwrap();
        let b = parse_table_path("/data/lake/./events").unwrap();
        assert_eq!(a.identity, b.identity);
        assert_eq!(a.normalized, "file:///data/lake//events");
        assert_eq!(b.normalized, "/data/lake/./events");
        assert_eq!(parse_table_path("gs://b/t").unwrap().identity, "gs://b/t");
        assert!(parse_table_path("abfss://c@acct.dfs.core.windows.net/t").is_ok());
        assert!(parse_table_path("az://container/t").is_ok());
    }

    #[test]
    fn bad_table_paths() {
        assert!(parse_table_path("data/events")
            .unwrap_err()
            .contains("relative path"));
        assert!(parse_table_path("s3a://lake/t")
            .unwrap_err()
            .contains("`s3://`"));
        assert!(parse_table_path("http://lake/t")
            .unwrap_err()
            .contains("not supported"));
        assert!(parse_table_path("s3://").unwrap_err().contains("no bucket"));
        assert!(parse_table_path("file://data/t")
            .unwrap_err()
            .contains("three slashes"));
        assert!(parse_table_path("").unwrap_err().contains("empty"));
        assert!(parse_table_path("/data/a%41").unwrap_err().contains("`%`"));
        assert!(parse_table_path("file:///data/a%20b")
            .unwrap_err()
            .contains("`%`"));
        assert!(parse_table_path("s3://lake/a%20b").is_ok());
        assert!(parse_table_path("/data/odd dir ü #1").is_ok());
    }
}
