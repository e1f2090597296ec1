//! Records how many tables are of each health, once an hour, for the fleet page's picture
//! (`fleet_health` in the job store). Every replica sees the same fleet (probes are shared),
//! and the store keeps the first replica's row of each hour, so any replica may record.
//! A replica that has not probed anything yet records nothing: every table `unknown` is
//! what it does not know, not what the fleet is.

use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use tablekeeper_store::HealthCounts;
use tracing::warn;

use crate::fleet::Health;
use crate::shared::Shared;

/// How far back the fleet page draws, and so how long the hours are kept.
pub(crate) const FLEET_HEALTH_SHOWN: TimeDelta = TimeDelta::days(7);

/// Records this hour's counts unless `recorded` says this replica already did.
pub(crate) async fn record(rt: &Shared, recorded: &mut Option<DateTime<Utc>>) {
    let now = Utc::now();
    let Ok(hour) = now.duration_trunc(TimeDelta::hours(1)) else {
        return;
    };
    if *recorded == Some(hour) {
        return;
    }
    let (_, ranks) = rt.fleet.ranks(now);
    if ranks.iter().all(|r| r.health == Health::Unknown) {
        return;
    }
    let mut counts = HealthCounts::new();
    for rank in &ranks {
        *counts.entry(rank.health.as_str().to_owned()).or_default() += 1;
    }
    match rt
        .store
        .record_fleet_health(hour, &counts, hour - FLEET_HEALTH_SHOWN)
        .await
    {
        Ok(_) => *recorded = Some(hour),
        Err(e) => {
            warn!(error = %e, "cannot record the fleet's health for the dashboard; the next refresh tries again");
        }
    }
}
