//! One schedule tick of (table, operation): probe the table, ask the planner, enqueue when
//! the operation is needed. Every replica fires the same ticks; the job table keeps one job
//! per tick.

use chrono::{DateTime, Utc};
use tablekeeper_inventory::Operation;
use tablekeeper_store::Trigger;
use tablekeeper_vocab::ProbeFailureKind;
use tracing::{info, warn};

use crate::policy::planner::{self, Decision, Need, Probed};
use crate::shared::Shared;

/// One schedule tick of (table, operation), fired at `fired`: probe, decide, enqueue when
/// needed. Never panics, never blocks other tables: every failure is logged and counted.
pub(crate) async fn tick(rt: &Shared, table: &str, op: Operation, fired: DateTime<Utc>) {
    if rt.stopping() {
        return;
    }
    let Some(spec) = rt.fleet.spec(table) else {
        return; // removed by a reload since the tick was scheduled
    };
    // Every replica fires the same tick: they all name it by its scheduled time, and the job
    // table keeps one job per tick.
    let tick = spec
        .schedule(op)
        .and_then(|s| s.tick_at_or_before(fired.with_timezone(&spec.timezone)))
        .map(|t| t.with_timezone(&Utc));
    let probe = crate::schedule::record::probe(rt, &spec).await;
    let last_success = rt.fleet.last_success(table, op);
    let probed = match &probe {
        Ok(p) => Probed::Read(p),
        Err(f) if f.kind == ProbeFailureKind::Transient => Probed::Unreachable(&f.message),
        Err(f) => Probed::Unreadable(&f.message),
    };
    let decision = planner::admit(&spec, op, probed, Need::Check { last_success }, Utc::now());
    match &decision {
        Decision::Run(reason) => {
            match crate::jobs::enqueue::enqueue(rt, &spec, op, Trigger::Schedule, tick).await {
                Ok((job_id, created)) => {
                    info!(table = %table, operation = %op, job_id = job_id.0, created, reason = %reason, "scheduled tick: maintenance needed")
                }
                Err(e) => {
                    warn!(table = %table, operation = %op, error = %e, "scheduled tick: could not enqueue")
                }
            }
        }
        Decision::Skip(reason) | Decision::Deferred(reason) => {
            info!(table = %table, operation = %op, reason = %reason, "scheduled tick: nothing to do")
        }
        Decision::Refuse(reason) => {
            warn!(table = %table, operation = %op, reason = %reason, "scheduled tick: refused")
        }
    }
}
