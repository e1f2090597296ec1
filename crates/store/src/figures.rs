//! What the dashboard's pictures draw, kept over time. `table_figures`: a table's probe
//! figures (files, small files, bytes, erasure pending); the probing replica records each
//! probe, the store keeps a row only when a figure changed since the table's newest one or
//! an hour has passed since it, and drops the oldest beyond the bound the caller gives, so
//! the history of a table stays bounded however long it lives. `fleet_health`: how many
//! tables were of each health, one row an hour, the first replica's. Nothing here decides
//! anything: the rows are only read back for people.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

use crate::dialect::{args, Arg, Record};
use crate::error::StoreError;
use crate::store::{JobStore, StoreOp};

/// A row is added for unchanged figures once this long after the table's newest one, so a
/// picture of an idle table still has points across its width.
const QUIET_ROW_EVERY: Duration = Duration::hours(1);

/// One table's figures as one probe read them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TableFigures {
    pub probed_at: DateTime<Utc>,
    pub version: i64,
    pub files: i64,
    pub small_files: i64,
    pub size_bytes: i64,
    /// The oldest deletion whose rows storage still holds; `None` when none.
    pub erasure_pending_since: Option<DateTime<Utc>>,
}

impl TableFigures {
    /// The average file size in bytes; 0 for a table without files.
    pub fn average_file_bytes(&self) -> i64 {
        if self.files > 0 {
            self.size_bytes / self.files
        } else {
            0
        }
    }
}

fn figures_row(r: &Record) -> Result<TableFigures, StoreError> {
    Ok(TableFigures {
        probed_at: r.time("probed_at")?,
        version: r.int("version")?,
        files: r.int("files")?,
        small_files: r.int("small_files")?,
        size_bytes: r.int("size_bytes")?,
        erasure_pending_since: r.opt_time("erasure_pending_since")?,
    })
}

impl JobStore {
    /// Records `figures` of `table` (see the module docs for when a row is added) and keeps
    /// the table's newest `keep` rows (at least one). Whether a row was added.
    pub async fn record_figures(
        &self,
        table: &str,
        figures: &TableFigures,
        keep: u32,
    ) -> Result<bool, StoreError> {
        self.measured(StoreOp::RecordFigures, async {
            let sql = self.sql();
            let quiet_since = figures.probed_at - QUIET_ROW_EVERY;
            let added = self
                .dialect()
                .execute(
                    sql.record_figures,
                    args!(
                        table,
                        figures.probed_at,
                        figures.version,
                        figures.files,
                        figures.small_files,
                        figures.size_bytes,
                        figures.erasure_pending_since,
                        quiet_since
                    ),
                )
                .await?
                > 0;
            if added {
                let older_than = i64::from(keep.max(1) - 1);
                self.dialect()
                    .execute(sql.prune_figures, args!(table, older_than))
                    .await?;
            }
            Ok(added)
        })
        .await
    }

    /// The figures of `table` recorded at or after `since`, oldest first.
    pub async fn figures(
        &self,
        table: &str,
        since: DateTime<Utc>,
    ) -> Result<Vec<TableFigures>, StoreError> {
        self.measured(StoreOp::Figures, async {
            self.dialect()
                .fetch(self.sql().figures, args!(table, since))
                .await?
                .iter()
                .map(figures_row)
                .collect()
        })
        .await
    }
}

/// How many tables were of each health (health → tables) in one hour.
pub type HealthCounts = BTreeMap<String, i64>;

impl JobStore {
    /// Records the fleet's `counts` for the hour starting at `hour`, unless a replica already
    /// did; then deletes the hours before `keep_since`. Whether this call's row was kept.
    pub async fn record_fleet_health(
        &self,
        hour: DateTime<Utc>,
        counts: &HealthCounts,
        keep_since: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        self.measured(StoreOp::RecordFleetHealth, async {
            let sql = self.sql();
            let counts = serde_json::to_value(counts)
                .map_err(|e| StoreError::InvalidInput(format!("health counts: {e}")))?;
            let added = self
                .dialect()
                .execute(
                    sql.record_fleet_health,
                    args!(hour, Arg::Json(Some(counts))),
                )
                .await?
                > 0;
            if added {
                self.dialect()
                    .execute(sql.prune_fleet_health, args!(keep_since))
                    .await?;
            }
            Ok(added)
        })
        .await
    }

    /// The fleet's health counts of every hour from `since`, oldest first.
    pub async fn fleet_health(
        &self,
        since: DateTime<Utc>,
    ) -> Result<Vec<(DateTime<Utc>, HealthCounts)>, StoreError> {
        self.measured(StoreOp::FleetHealth, async {
            self.dialect()
                .fetch(self.sql().fleet_health, args!(since))
                .await?
                .iter()
                .map(|r| Ok((r.time("hour")?, r.json_as("counts")?)))
                .collect()
        })
        .await
    }
}
