//! The inputs an attempt needs beyond the inventory: the Z-order scope (from the last
//! Z-order in the log), full or lite VACUUM (from the table's earlier VACUUMs in the job
//! table), which commits the checkpoint may clean up (those already in `table_commits`), what
//! VACUUM and log cleanup keep for others (pins and referrers), and whether a person asked.
//!
//! It reads the job store and the fleet; it never runs or records anything.

use serde::Deserialize;
use tablekeeper_delta::{LogCleanup, VacuumMode};
use tablekeeper_inventory::{Operation, TableSpec};
use tablekeeper_store::{JobFilter, JobState, JobStore, Trigger};
use tracing::warn;

use crate::jobs::executor::RunContext;
use crate::shared::Shared;

/// What a VACUUM job records beside its report, read back by the next VACUUM to tell when
/// the last full one ran.
#[derive(Debug, Deserialize)]
struct VacuumRecord {
    mode: Option<VacuumMode>,
}

/// The inputs of an attempt of `op` on the table; an error when what VACUUM or log cleanup
/// must keep cannot be known (the pins in the job store cannot be read): the attempt then
/// fails and is retried, it never runs without them.
pub(crate) async fn inputs(
    rt: &Shared,
    spec: &TableSpec,
    op: Operation,
    trigger: Trigger,
) -> Result<RunContext, String> {
    // Z-order scope: partitions that received files since the last Z-order found in the log
    // (a Z-order by another engine counts too).
    let mut ctx = RunContext {
        zorder_since_version: rt
            .fleet
            .with_state(&spec.name, |s| {
                s.probe.as_ref().and_then(|p| p.history.last_zorder_version)
            })
            .flatten(),
        forced: trigger == Trigger::Manual,
        ..RunContext::default()
    };
    match op {
        Operation::Checkpoint => ctx.log_cleanup = log_cleanup(rt, spec).await,
        Operation::Vacuum => ctx.vacuum_mode = vacuum_mode(&rt.store, spec).await,
        Operation::Compact | Operation::Zorder | Operation::Purge | Operation::Repair => {}
    }
    if matches!(op, Operation::Checkpoint | Operation::Vacuum) {
        ctx.keep = keep(rt, spec).await?;
    }
    Ok(ctx)
}

/// The pins (inventory and API) and the referrers of the table, from the fleet's probes.
async fn keep(rt: &Shared, spec: &TableSpec) -> Result<tablekeeper_delta::Keep, String> {
    let pins = rt.store.pins(Some(&spec.name)).await.map_err(|e| {
        format!(
            "cannot read the table's pins from the job store, so nothing may be deleted now: {e}"
        )
    })?;
    Ok(rt.fleet.keep_for(spec, &pins))
}

/// Only commits already in `table_commits` may leave the log; if the store cannot say which
/// those are, nothing is deleted this time.
async fn log_cleanup(rt: &Shared, spec: &TableSpec) -> LogCleanup {
    match rt.store.recorded_range(&spec.name).await {
        Ok(range) => LogCleanup::Recorded(
            range.and_then(|(from, to)| Some((u64::try_from(from).ok()?, u64::try_from(to).ok()?))),
        ),
        Err(e) => {
            warn!(error = %e, "cannot read which commits are recorded; the checkpoint deletes no log file this time");
            LogCleanup::Off
        }
    }
}

/// Full when none of the table's last `full_every - 1` VACUUMs was: every Nth run lists the
/// directory (and reclaims orphans of failed rewrites), the others read the log only. Reads
/// the table's VACUUM jobs alone: on a table compacted every few minutes, its other jobs
/// would push every VACUUM out of any window of recent jobs.
pub(crate) async fn vacuum_mode(store: &JobStore, spec: &TableSpec) -> VacuumMode {
    if spec.vacuum.full_every <= 1 {
        return VacuumMode::Full;
    }
    let filter = JobFilter {
        table: Some(spec.name.clone()),
        state: Some(JobState::Succeeded),
        operation: Some(Operation::Vacuum),
        limit: i64::from(spec.vacuum.full_every - 1),
    };
    let recent = match store.list_jobs(&filter).await {
        Ok(jobs) => jobs,
        Err(e) => {
            warn!(error = %e, "cannot read earlier VACUUMs; this one lists the directory");
            return VacuumMode::Full;
        }
    };
    let recent_full = recent
        .iter()
        .filter_map(|j| j.result.clone())
        .filter_map(|r| serde_json::from_value::<VacuumRecord>(r).ok())
        .any(|r| r.mode == Some(VacuumMode::Full));
    if recent_full {
        VacuumMode::Lite
    } else {
        VacuumMode::Full
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tablekeeper_store::{NewJob, StoreOptions};
    use tablekeeper_vocab::Trigger;

    use super::*;

    async fn succeed(store: &JobStore, op: Operation, result: serde_json::Value) {
        store
            .enqueue(NewJob::new("t", op, Trigger::Manual))
            .await
            .unwrap();
        let claimed = store
            .claim("w", Duration::from_secs(60))
            .await
            .unwrap()
            .job
            .expect("a job to claim");
        assert!(store.complete(&claimed.lease, result).await.unwrap());
    }

    /// A table compacted every few minutes runs hundreds of compactions between two VACUUMs:
    /// the policy still finds the last full VACUUM.
    #[tokio::test]
    async fn the_vacuum_policy_reads_vacuums_past_any_number_of_other_jobs() {
        let store = tablekeeper_store::connect("sqlite::memory:", StoreOptions::default())
            .await
            .unwrap();
        store.migrate().await.unwrap();
        let spec = crate::policy::planner::tests::spec(
            "    maintenance:\n      vacuum: { full_every: 4 }\n",
        );
        succeed(
            &store,
            Operation::Vacuum,
            serde_json::json!({"mode": "full"}),
        )
        .await;
        for _ in 0..250 {
            succeed(&store, Operation::Compact, serde_json::json!({})).await;
        }
        assert_eq!(vacuum_mode(&store, &spec).await, VacuumMode::Lite);
        for _ in 0..3 {
            succeed(
                &store,
                Operation::Vacuum,
                serde_json::json!({"mode": "lite"}),
            )
            .await;
        }
        assert_eq!(
            vacuum_mode(&store, &spec).await,
            VacuumMode::Full,
            "the fourth VACUUM after a full one lists the directory"
        );
    }
}
