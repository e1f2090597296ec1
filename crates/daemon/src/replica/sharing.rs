//! The loop that shares probes with the other replicas: beats in the job store (the live
//! replicas split the tables between them, `fleet::sharing`) and takes in the probes the
//! others stored. Its own loop, so a long probe round never delays a beat.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use tracing::{info, warn};

use crate::shared::Shared;

/// How often a replica beats in the job store and reads the probes the others stored:
/// well inside [`crate::fleet::REPLICA_TTL`], so one late beat does not hand its tables over.
const SHARE_EVERY: Duration = Duration::from_secs(5);

/// How far back each pass reads again, to catch a probe a slow transaction stored with an
/// earlier time than the newest already read (applying one twice changes nothing). Counted
/// back from the previous pass, not from the newest row: an idle fleet re-reads nothing.
const SHARE_OVERLAP: chrono::TimeDelta = chrono::TimeDelta::seconds(30);

/// Probes read from the store per query: a replica joining a fleet of thousands of tables
/// takes the others' probes in pages of this many (measured: one result set of ~6,700 probe
/// rows was 86 MB of a replica's peak heap).
const SHARE_PAGE: u32 = 500;

/// One replica's side of probe sharing (`fleet::sharing`): beats in the job store (the
/// live replicas split the tables between them) and takes in the probes other replicas
/// stored since its last pass. The first pass reads them all, its own included (those it
/// stored before a restart under the same `replica_id`), so a replica that starts shows every
/// table's figures and history at once, as they were, and probes only its own share when due.
#[derive(Debug, Default)]
pub(crate) struct Sharing {
    /// The newest update read so far.
    read_to: Option<chrono::DateTime<Utc>>,
    /// When the previous pass read (this replica's clock).
    last_pass: Option<chrono::DateTime<Utc>>,
    /// Whether a pass has read every stored probe to the end, this replica's own included;
    /// later passes read only the others'.
    caught_up: bool,
}

impl Sharing {
    /// Beats (unless the replica is a worker, which probes nothing and so takes no share of
    /// the tables) and reads the probes the others stored since the last pass.
    pub(crate) async fn pass(&mut self, rt: &Shared) {
        if rt.config.role == crate::config::Role::All {
            self.beat(rt).await;
        }
        self.read(rt).await;
    }

    async fn beat(&self, rt: &Shared) {
        let me = rt.config.replica_id.as_str();
        match rt.store.beat_replica(me, crate::fleet::REPLICA_TTL).await {
            Ok(live) => {
                let count = live.len();
                if rt.fleet.set_peers(me, live.clone()) {
                    info!(replicas = ?live, count, "replicas sharing the probes");
                }
            }
            Err(e) => {
                warn!(error = %e, "cannot beat in the job store; probing every table here until it answers")
            }
        }
    }

    async fn read(&mut self, rt: &Shared) {
        let me = rt.config.replica_id.as_str();
        let after = match (self.read_to, self.last_pass) {
            (Some(read_to), Some(last_pass)) => Some(read_to.min(last_pass - SHARE_OVERLAP)),
            (read_to, _) => read_to,
        };
        self.last_pass = Some(Utc::now());
        let leave_out = self.caught_up.then_some(me);
        let mut page_after: Option<String> = None;
        let mut cursor = after;
        let mut applied = 0;
        loop {
            let rows = match rt
                .store
                .probes_since(cursor, page_after.as_deref(), leave_out, SHARE_PAGE)
                .await
            {
                Ok(rows) => rows,
                Err(e) => {
                    warn!(error = %e, "cannot read the probes other replicas stored");
                    break;
                }
            };
            let Some(last) = rows.last() else {
                self.caught_up = true;
                break;
            };
            self.read_to = Some(
                self.read_to
                    .map_or(last.updated_at, |t| t.max(last.updated_at)),
            );
            cursor = Some(last.updated_at);
            page_after = Some(last.table_name.clone());
            let full = rows.len() == SHARE_PAGE as usize;
            applied += rt.fleet.apply_shared(&rows, Utc::now());
            if !full {
                self.caught_up = true;
                break;
            }
        }
        if applied > 0 {
            crate::metrics::publish::all(&rt.metrics, &rt.fleet, Utc::now());
        }
    }
}

/// Runs a [`Sharing`] pass every [`SHARE_EVERY`] (every `probe_interval` if that is
/// shorter) until the replica stops. Its own loop, so a long probe round never delays a beat.
pub(crate) async fn share_probes(rt: Arc<Shared>, mut sharing: Sharing) {
    let every = SHARE_EVERY.min(rt.config.probe_interval.max(Duration::from_millis(100)));
    let mut interval = tokio::time::interval(every);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = rt.shutdown.cancelled() => return,
            _ = interval.tick() => {}
        }
        sharing.pass(&rt).await;
    }
}
