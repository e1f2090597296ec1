//! Erasure tracking from the log alone: since when does storage hold rows that were deleted?
//!
//! A DELETE on a table with deletion vectors leaves the rows in the Parquet file; a DELETE
//! without them writes new files and leaves the old ones behind; a change-data file records
//! deleted rows by design. The rows are physically gone only once every such file is deleted by
//! VACUUM (seed `deletion-vectors.txt`: "a purge finishes a week after you ran it"). The
//! [`ErasureLedger`] follows the commits the prober reads and keeps, per physical file that
//! holds deleted rows, the time of the oldest deletion it holds:
//!
//! - an active file with a deletion vector: since the commit that first gave it one (a later
//!   DELETE on the same file keeps the older time);
//! - a file that left the table holding deleted rows (removed by a data-changing commit, or
//!   rewritten while it carried a deletion vector, e.g. by a purge): until a VACUUM whose
//!   retention its removal has outlived (`VACUUM START` records the retention it ran with);
//! - a change-data file (`cdc` action): since its commit, until such a VACUUM.
//!
//! Files whose deletion predates the commits still on disk are counted from the oldest commit
//! on disk (the deletion is at least that old); tombstones that only a checkpoint still lists
//! are not seen. This module reads no storage.

use std::collections::HashMap;

use serde_json::Value;

use crate::log::read::Commit;
use crate::snapshot::ActiveFile;

/// The deletions the log shows are still physically on storage.
#[derive(Debug, Default)]
pub(crate) struct ErasureLedger {
    /// Active files with a deletion vector: path → (vector id, time of the oldest deletion
    /// the file holds).
    vectors: HashMap<String, (String, i64)>,
    /// Files holding deleted rows that left the table: (oldest deletion held, removed at).
    removed: Vec<(i64, i64)>,
    /// Oldest commit read, the floor for deletions older than the log on disk.
    oldest_commit: Option<(u64, i64)>,
    /// Version and time of each deletion still tracked, to name the oldest one.
    versions: HashMap<i64, u64>,
}

/// What the ledger concluded for one probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Erasure {
    /// Time of the oldest deletion whose rows storage still holds.
    pub pending_since_ms: Option<i64>,
    /// The version of that deletion, when the commit is known.
    pub pending_version: Option<u64>,
    /// When the last file holding deleted rows left the table: VACUUM may delete them all
    /// once this is older than the retention.
    pub last_removal_ms: Option<i64>,
}

impl ErasureLedger {
    /// Applies one commit (in version order), committed at `ts`.
    pub(crate) fn absorb(&mut self, commit: &Commit, ts: i64) {
        if self.oldest_commit.is_none_or(|(v, _)| commit.version < v) {
            self.oldest_commit = Some((commit.version, ts));
        }
        if let Some(retention_ms) = vacuum_retention_ms(commit) {
            // files removed longer than the retention before this VACUUM started are gone
            let horizon = ts.saturating_sub(retention_ms);
            self.removed.retain(|(_, removed_at)| *removed_at > horizon);
            // forget the versions of deletions nothing holds any more
            let held: std::collections::HashSet<i64> = self
                .removed
                .iter()
                .map(|(since, _)| *since)
                .chain(self.vectors.values().map(|(_, since)| *since))
                .collect();
            self.versions.retain(|ts, _| held.contains(ts));
        }
        let re_added: std::collections::HashSet<&str> =
            commit.adds.iter().map(|a| a.path.as_str()).collect();
        for remove in &commit.removes {
            let held = self.vectors.remove(&remove.path).map(|(_, since)| since);
            if re_added.contains(remove.path.as_str()) {
                // the same data file with a new deletion vector: it stays on storage
                if let Some(since) = held {
                    self.vectors
                        .insert(remove.path.clone(), (String::new(), since));
                }
                continue;
            }
            let removed_at = remove.deletion_timestamp.unwrap_or(ts);
            let since = match (held, remove.deletion_vector.is_some(), remove.data_change) {
                (Some(since), _, _) => Some(since),
                // a vector the ledger did not see being set: at least as old as the log
                (None, true, _) => Some(self.floor(ts)),
                (None, false, true) => Some(removed_at),
                (None, false, false) => None,
            };
            if let Some(since) = since {
                self.removed.push((since, removed_at));
            }
        }
        for add in &commit.adds {
            let Some(dv) = &add.deletion_vector else {
                continue;
            };
            let since = match self.vectors.get(&add.path) {
                Some((_, since)) => *since,
                None => {
                    self.versions.entry(ts).or_insert(commit.version);
                    ts
                }
            };
            self.vectors
                .insert(add.path.clone(), (dv.id.clone(), since));
        }
        for _ in 0..commit.cdc_files {
            self.versions.entry(ts).or_insert(commit.version);
            self.removed.push((ts, ts));
        }
    }

    fn floor(&self, ts: i64) -> i64 {
        self.oldest_commit.map_or(ts, |(_, t)| t.min(ts))
    }

    /// The oldest deletion still on storage, given the active files of the probed version
    /// (files with a vector the ledger never saw set are as old as the oldest commit read).
    pub(crate) fn summary(&self, active: &[ActiveFile]) -> Erasure {
        let mut oldest: Option<i64> = None;
        let mut keep = |t: i64| oldest = Some(oldest.map_or(t, |o| o.min(t)));
        for file in active.iter().filter(|f| f.deletion_vector.is_some()) {
            match self.vectors.get(&file.path) {
                Some((_, since)) => keep(*since),
                None => keep(self.oldest_commit.map_or(i64::MAX, |(_, t)| t)),
            }
        }
        for (since, _) in &self.removed {
            keep(*since);
        }
        let pending_since_ms = oldest.filter(|t| *t != i64::MAX);
        Erasure {
            pending_since_ms,
            pending_version: pending_since_ms.and_then(|t| self.versions.get(&t).copied()),
            last_removal_ms: self.removed.iter().map(|(_, at)| *at).max(),
        }
    }
}

/// The retention a `VACUUM START` ran with (`specifiedRetentionMillis`, else
/// `defaultRetentionMillis`), as Spark and deltalake record it.
fn vacuum_retention_ms(commit: &Commit) -> Option<i64> {
    if commit.operation() != Some("VACUUM START") {
        return None;
    }
    let params = commit.info("operationParameters")?;
    let number = |key: &str| match params.get(key)? {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    };
    number("specifiedRetentionMillis").or_else(|| number("defaultRetentionMillis"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::deletion_vector::DeletionVector;
    use crate::log::read::FileAction;

    const DAY: i64 = 86_400_000;

    fn action(path: &str, dv: Option<&str>, data_change: bool, ts: i64) -> FileAction {
        FileAction {
            path: path.to_owned(),
            size: Some(1),
            partition_values: Default::default(),
            data_change,
            deletion_timestamp: Some(ts),
            num_records: Some(10),
            deletion_vector: dv.map(|id| DeletionVector {
                id: id.to_owned(),
                cardinality: 1,
                file: None,
            }),
        }
    }

    fn commit(version: u64, removes: Vec<FileAction>, adds: Vec<FileAction>) -> Commit {
        Commit {
            version,
            removes,
            adds,
            ..Commit::default()
        }
    }

    fn vacuum(version: u64, retention_ms: i64) -> Commit {
        let info = serde_json::json!({
            "operation": "VACUUM START",
            "operationParameters": {"specifiedRetentionMillis": retention_ms},
        });
        Commit {
            version,
            commit_info: info.as_object().cloned(),
            ..Commit::default()
        }
    }

    fn active(path: &str, dv: bool) -> ActiveFile {
        ActiveFile {
            path: path.to_owned(),
            size: 1,
            partition_values: Default::default(),
            num_records: Some(10),
            deletion_vector: dv.then(|| DeletionVector {
                id: "x".into(),
                cardinality: 1,
                file: None,
            }),
        }
    }

    #[test]
    fn a_soft_delete_is_pending_until_purged_and_vacuumed() {
        let mut ledger = ErasureLedger::default();
        ledger.absorb(&commit(0, vec![], vec![action("a", None, true, 0)]), 0);
        assert_eq!(ledger.summary(&[active("a", false)]).pending_since_ms, None);
        // DELETE with a deletion vector at day 1, another on the same file at day 2
        ledger.absorb(
            &commit(
                1,
                vec![action("a", None, true, DAY)],
                vec![action("a", Some("u1"), true, DAY)],
            ),
            DAY,
        );
        ledger.absorb(
            &commit(
                2,
                vec![action("a", Some("u1"), true, 2 * DAY)],
                vec![action("a", Some("u2"), true, 2 * DAY)],
            ),
            2 * DAY,
        );
        let pending = ledger.summary(&[active("a", true)]);
        assert_eq!(pending.pending_since_ms, Some(DAY));
        assert_eq!(pending.pending_version, Some(1));
        // purge at day 3: the old file still holds the rows until VACUUM deletes it
        ledger.absorb(
            &commit(
                3,
                vec![action("a", Some("u2"), false, 3 * DAY)],
                vec![action("b", None, false, 3 * DAY)],
            ),
            3 * DAY,
        );
        let after_purge = [active("b", false)];
        assert_eq!(ledger.summary(&after_purge).pending_since_ms, Some(DAY));
        // a VACUUM before the removal aged past its 7-day retention deletes nothing
        ledger.absorb(&vacuum(4, 7 * DAY), 5 * DAY);
        assert_eq!(ledger.summary(&after_purge).pending_since_ms, Some(DAY));
        ledger.absorb(&vacuum(5, 7 * DAY), 10 * DAY + 1);
        assert_eq!(ledger.summary(&after_purge).pending_since_ms, None);
    }

    #[test]
    fn rewrites_of_clean_files_hold_nothing_and_data_changing_removes_do() {
        let mut ledger = ErasureLedger::default();
        ledger.absorb(&commit(0, vec![], vec![action("a", None, true, 0)]), 0);
        // compaction of a file without deletion vector: all rows copied
        ledger.absorb(
            &commit(
                1,
                vec![action("a", None, false, DAY)],
                vec![action("b", None, false, DAY)],
            ),
            DAY,
        );
        assert_eq!(ledger.summary(&[active("b", false)]).pending_since_ms, None);
        // a copy-on-write DELETE removes `b` with a data change
        ledger.absorb(
            &commit(
                2,
                vec![action("b", None, true, 2 * DAY)],
                vec![action("c", None, true, 2 * DAY)],
            ),
            2 * DAY,
        );
        assert_eq!(
            ledger.summary(&[active("c", false)]).pending_since_ms,
            Some(2 * DAY)
        );
    }

    #[test]
    fn change_data_files_and_vectors_older_than_the_log_count() {
        let mut ledger = ErasureLedger::default();
        let mut cdc = commit(7, vec![], vec![]);
        cdc.cdc_files = 1;
        ledger.absorb(&cdc, 3 * DAY);
        assert_eq!(ledger.summary(&[]).pending_since_ms, Some(3 * DAY));
        // an active file whose vector was set before the oldest commit read
        let mut fresh = ErasureLedger::default();
        fresh.absorb(&commit(9, vec![], vec![]), 4 * DAY);
        assert_eq!(
            fresh.summary(&[active("old", true)]).pending_since_ms,
            Some(4 * DAY)
        );
    }
}
