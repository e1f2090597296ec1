//! How the dashboard's pages write times and durations.

use chrono::{DateTime, Utc};

pub(super) fn stamp(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

pub(super) fn opt_stamp(t: Option<DateTime<Utc>>) -> String {
    t.map(stamp).unwrap_or_else(|| "–".into())
}

pub(super) fn human_secs(s: i64) -> String {
    let s = s.max(0);
    match s {
        0..=119 => format!("{s}s"),
        120..=7199 => format!("{}m", s / 60),
        7200..=172_799 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_durations() {
        assert_eq!(human_secs(5), "5s");
        assert_eq!(human_secs(600), "10m");
        assert_eq!(human_secs(3 * 3600), "3h");
        assert_eq!(human_secs(3 * 86_400), "3d");
    }
}
