//! Which replica probes which table, and how a replica takes in the probes the others ran.
//!
//! Replicas sharing a job store beat in it (`replica::sharing::share_probes`); the live ones split
//! the inventory by rendezvous hashing: a table is probed by the live replica whose
//! `xxh3(replica id, table name)` is highest. Every replica computes the same owner from
//! the same live set without talking to the others, a replica joining or leaving moves only
//! its share of the tables, and a table stays with its owner (whose cached snapshot makes
//! the next probe one small listing) for as long as the set does not change. The owner
//! stores each probe in the job store; the others apply it here, so every replica exports
//! the same figures while the object store sees one replica's requests.
//!
//! A replica that cannot confirm the live set (no beat answered within the time the others
//! wait before they count it dead) probes every table itself: requests go up while the
//! store is unreachable, the figures stay its own and current.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tablekeeper_delta::Probe;
use tablekeeper_store::ProbeRow;
use tokio::time::Instant;
use tracing::warn;

use super::cadence::{ProbeIntervals, Seen};
use super::state::TableState;

/// A replica that has not beaten for this long is not live: the others take its tables.
pub(crate) const REPLICA_TTL: Duration = Duration::from_secs(20);

/// The live replicas as last confirmed by the job store.
#[derive(Debug, Clone, Default)]
pub(crate) struct Peers {
    me: String,
    /// Live replica ids, this one included.
    live: Vec<String>,
    /// After this, the set is no longer trusted (the others may count this replica dead).
    trusted_until: Option<Instant>,
}

impl Peers {
    /// Whether this replica probes `table`: it owns it, or the live set is not confirmed.
    pub(super) fn probes_here(&self, table: &str, now: Instant) -> bool {
        match self.trusted_until {
            Some(until) if now < until => owner(table, &self.live).is_none_or(|o| o == self.me),
            _ => true,
        }
    }
}

/// The replica of `live` that probes `table` (rendezvous hashing); `None` if none is live.
pub(crate) fn owner<'a>(table: &str, live: &'a [String]) -> Option<&'a str> {
    live.iter()
        .max_by_key(|replica| score(replica, table))
        .map(String::as_str)
}

/// A stable score for (replica, table): the same on every replica and every release
/// (xxh3 is a fixed algorithm; std's hashers promise neither).
fn score(replica: &str, table: &str) -> u64 {
    let mut key = Vec::with_capacity(replica.len() + table.len() + 1);
    key.extend_from_slice(replica.as_bytes());
    key.push(0);
    key.extend_from_slice(table.as_bytes());
    xxhash_rust::xxh3::xxh3_64(&key)
}

impl Peers {
    /// Records the live replicas the job store just confirmed, trusted until `trusted_until`;
    /// says whether the set changed.
    pub(super) fn confirm(&mut self, me: &str, live: Vec<String>, trusted_until: Instant) -> bool {
        let changed = self.live != live || self.trusted_until.is_none();
        *self = Peers {
            me: me.to_owned(),
            live,
            trusted_until: Some(trusted_until),
        };
        changed
    }
}

/// Takes in probes stored in the job store (by other replicas, or by this one before it
/// restarted): each one newer than what this replica knows of its table replaces it, as if
/// this replica had run it (figures, error, and the table's probing rhythm, so a table that
/// moves here is probed when it is due, not at once). While the stored probe's history read
/// is still running, the history this replica knew stands (`Probe::fill_history_from`).
/// `clock` is the probe clock's now. Returns how many were applied.
pub(super) fn apply_shared(
    tables: &mut BTreeMap<String, TableState>,
    rows: &[ProbeRow],
    now: DateTime<Utc>,
    clock: Instant,
    intervals: ProbeIntervals,
) -> usize {
    let mut applied = 0;
    for row in rows {
        let Some(state) = tables.get_mut(&row.table_name) else {
            continue;
        };
        if state.probed_at.is_some_and(|at| at >= row.probed_at) {
            continue;
        }
        let probe = match row.probe.clone().map(serde_json::from_value::<Probe>) {
            Some(Ok(probe)) => Some(probe),
            Some(Err(e)) => {
                // a newer release's probe this one cannot read: its own probes go on
                warn!(table = %row.table_name, replica = %row.replica_id, error = %e, "cannot read a probe another replica stored; ignoring it");
                continue;
            }
            None => None,
        };
        let seen = match (&state.probe, &probe) {
            (Some(old), Some(new)) if old.version == new.version && row.error.is_none() => {
                Seen::Unchanged
            }
            _ => Seen::Moved,
        };
        let age = (now - row.probed_at).to_std().unwrap_or_default();
        let probed = clock.checked_sub(age).unwrap_or(clock);
        state.cadence = state.cadence.after_probe(seen, probed, intervals);
        if let Some(mut probe) = probe {
            if let Some(known) = &state.probe {
                probe.fill_history_from(known);
            }
            state.probe = Some(Arc::new(probe));
        }
        state.probe_error.clone_from(&row.error);
        state.probe_error_kind = row.error_kind;
        state.probed_at = Some(row.probed_at);
        applied += 1;
    }
    applied
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replicas(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("replica-{i}")).collect()
    }

    #[test]
    fn every_replica_gets_a_fair_share_and_a_departure_moves_only_its_own() {
        let tables: Vec<String> = (0..3000).map(|i| format!("sales.t{i}")).collect();
        let three = replicas(3);
        let mut per_replica = std::collections::BTreeMap::<&str, usize>::new();
        for t in &tables {
            *per_replica.entry(owner(t, &three).unwrap()).or_default() += 1;
        }
        assert_eq!(per_replica.len(), 3);
        for (replica, count) in &per_replica {
            assert!(
                (800..=1200).contains(count),
                "{replica} owns {count} of 3000 tables"
            );
        }
        // replica-1 leaves: its tables spread over the others, nobody else's move
        let two: Vec<String> = vec![three[0].clone(), three[2].clone()];
        for t in &tables {
            let before = owner(t, &three).unwrap();
            let after = owner(t, &two).unwrap();
            if before != "replica-1" {
                assert_eq!(before, after, "{t} moved although its owner stayed");
            }
        }
    }

    #[test]
    fn the_owner_does_not_depend_on_the_order_of_the_live_set() {
        let mut live = replicas(4);
        let owners: Vec<_> = (0..50)
            .map(|i| owner(&format!("t{i}"), &live).unwrap().to_owned())
            .collect();
        live.reverse();
        for (i, expected) in owners.iter().enumerate() {
            assert_eq!(owner(&format!("t{i}"), &live).unwrap(), expected);
        }
        assert_eq!(owner("t", &[]), None);
    }

    #[test]
    fn an_unconfirmed_live_set_means_probing_everything() {
        let now = Instant::now();
        let unknown = Peers::default();
        assert!(unknown.probes_here("t", now));
        let live = replicas(2);
        let other = live
            .iter()
            .find(|r| owner("t", &live) != Some(r.as_str()))
            .unwrap()
            .clone();
        let peers = Peers {
            me: other,
            live,
            trusted_until: Some(now + REPLICA_TTL),
        };
        assert!(!peers.probes_here("t", now), "another replica owns it");
        assert!(
            peers.probes_here("t", now + REPLICA_TTL),
            "once the set is no longer confirmed, probe it here too"
        );
    }

    fn row(table: &str, probed_at: DateTime<Utc>, probe: serde_json::Value) -> ProbeRow {
        ProbeRow {
            table_name: table.to_owned(),
            replica_id: "replica-1".to_owned(),
            probed_at,
            probe: Some(serde_json::to_value(crate::policy::planner::tests::probe(probe)).unwrap()),
            error: None,
            error_kind: None,
            updated_at: probed_at,
        }
    }

    #[test]
    fn a_stored_probe_still_reading_its_history_keeps_the_history_known_here() {
        let intervals = ProbeIntervals {
            active: Duration::from_secs(60),
            max: Duration::from_secs(600),
        };
        let at =
            |s: i64| DateTime::<Utc>::UNIX_EPOCH + chrono::Duration::seconds(1_800_000_000 + s);
        let mut tables = BTreeMap::from([("t".to_owned(), TableState::default())]);
        let complete =
            serde_json::json!({"version": 10, "last_optimize_at": "2026-11-28T00:00:00Z"});
        let pending = serde_json::json!({"version": 12, "history_pending": true, "created_at": null,
            "last_commit_at": null, "history_from_version": null, "commits_per_hour": 0});
        let clock = Instant::now();
        assert_eq!(
            apply_shared(
                &mut tables,
                &[row("t", at(0), complete)],
                at(0),
                clock,
                intervals
            ),
            1
        );
        // two probes in a row while the table's history read runs (on another replica, or on
        // this one after a restart): both show the table's own snapshot and the history known
        for (n, probed_at) in [at(5), at(10)].into_iter().enumerate() {
            let applied = apply_shared(
                &mut tables,
                &[row("t", probed_at, pending.clone())],
                probed_at,
                clock,
                intervals,
            );
            assert_eq!(applied, 1);
            let probe = tables["t"].probe.as_deref().unwrap();
            assert!(probe.history_pending);
            assert_eq!(probe.version, 12, "probe {n}: its own figures");
            assert_eq!(
                probe.history.created_at.map(|t| t.to_rfc3339()).as_deref(),
                Some("2026-11-01T00:00:00+00:00"),
                "probe {n}: the history known stands"
            );
            assert_eq!(
                probe
                    .history
                    .last_optimize_at
                    .map(|t| t.to_rfc3339())
                    .as_deref(),
                Some("2026-11-28T00:00:00+00:00"),
                "probe {n}: the history known stands"
            );
        }
    }
}
