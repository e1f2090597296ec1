//! Stale commits: commits that removed files which were no longer active at the version before
//! them, because a commit planned on a newer snapshot had removed them first.
//!
//! deltalake's conflict checker ignores removes marked `dataChange: false` (DESIGN.md, "Known
//! hazards"), so such a commit is not refused. Two cases matter:
//! - a data-changing commit W (a full overwrite, typically) planned before a rewrite R: W meant
//!   the rows of the files it removed gone, but their copies in R's outputs stay visible;
//! - a rewrite W (another engine's compaction, Z-order or purge, or a tablekeeper replica that
//!   committed from an old snapshot) planned before R: both W's and R's outputs hold the rows of
//!   the files they both removed, so every such row is visible twice.
//!
//! The log shows both plainly: W removes files that were not active at the version before it.
//! Owns that detection, as a pure function of the log read in version order ([`StaleWatch`]):
//! every commit is checked, whoever wrote it, against the files every earlier commit removed.
//! The probe feeds it incrementally, VACUUM and repair over a range they read themselves. A
//! repair commit of tablekeeper's names the stale commits it repaired in its marker, so whether
//! one is still pending is read from the log too. This module only reads.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tablekeeper_vocab::StaleKind;

use deltalake::DeltaTable;

use crate::error::DeltaError;
use crate::log::read::{list_log, read_commits, Commit};
use crate::open::open_table_at;
use crate::snapshot::active_files;

/// Stale writes list at most this many of their files; the rest are counted.
const SAMPLE_FILES: usize = 10;

/// A stale commit found in the log (a stale write, whatever it wrote).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StaleWrite {
    /// The stale commit.
    pub version: i64,
    pub committed_at: Option<DateTime<Utc>>,
    /// What it meant to do; `None` only in probes stored by releases that did not tell.
    #[serde(default)]
    pub kind: Option<StaleKind>,
    /// Its `commitInfo.operation` (`WRITE`, `OPTIMIZE`, `CREATE OR REPLACE TABLE`, ...).
    pub operation: Option<String>,
    /// Which engine wrote it: its `commitInfo.engineInfo`, else its `clientVersion`.
    pub engine_info: Option<String>,
    /// The commits (anyone's) that had already removed the files it removed.
    pub rewrite_versions: Vec<i64>,
    /// True when one of those was a repair commit: such a chain is not repaired automatically.
    pub over_repair: bool,
    /// Files it removed that were no longer active.
    pub files: u64,
    /// Up to ten of them.
    pub sample_files: Vec<String>,
    /// Rows of those files still visible through the earlier commits' outputs, from the log's
    /// statistics (`None` until counted, or when a writer recorded no statistics): rows the
    /// writer meant to remove, or for a stale rewrite the rows it duplicated.
    pub rows: Option<u64>,
    /// The repair commit that restored what the writer meant, once there is one.
    pub repaired_by: Option<i64>,
}

impl StaleWrite {
    /// Whether the table still shows rows the writer meant to remove.
    pub fn pending(&self) -> bool {
        self.repaired_by.is_none()
    }
}

/// A stale commit with everything repair needs: which commit had removed each of its files.
#[derive(Debug, Clone)]
pub(crate) struct Detection {
    pub summary: StaleWrite,
    /// Every stale-removed path with the commit that removed it while it was active.
    pub removed: BTreeMap<String, u64>,
    committed_ms: i64,
}

/// Which commit removed a file while it was active.
#[derive(Debug, Clone, Copy)]
struct Removal {
    version: u64,
    at_ms: i64,
    by_repair: bool,
}

/// Reads commits in version order and finds stale commits.
#[derive(Debug)]
pub(crate) struct StaleWatch {
    /// How long after a commit its removed files are watched.
    window_ms: i64,
    /// Files removed by commits inside the window and not added back since.
    removed: HashMap<String, Removal>,
    found: BTreeMap<u64, Detection>,
    newest_ms: i64,
}

/// Default watch window: twice Delta's 7-day VACUUM floor. A writer holding a snapshot longer
/// than the table's VACUUM window finds the rewrite's inputs deleted, so its stale write can be
/// detected and reported but no longer repaired exactly; twice the window still reports it.
pub const DEFAULT_STALE_WATCH: Duration = Duration::from_secs(14 * 86_400);

/// How long after a rewrite its removed files are watched for stale writes, for a table whose
/// VACUUM window is `vacuum_window` (the inventory's, readers' queries included): twice that
/// window, at least the default (a writer holding a snapshot that long finds the rewrite's
/// inputs vacuumed; the stale write is still reported).
pub fn stale_watch_for(vacuum_window: Duration) -> Duration {
    DEFAULT_STALE_WATCH.max(vacuum_window.saturating_mul(2))
}

impl StaleWatch {
    pub(crate) fn new(window: Duration) -> Self {
        StaleWatch {
            window_ms: i64::try_from(window.as_millis()).unwrap_or(i64::MAX),
            removed: HashMap::new(),
            found: BTreeMap::new(),
            newest_ms: i64::MIN,
        }
    }

    /// Takes in the next commit; `at_ms` is its commit time.
    pub(crate) fn absorb(&mut self, commit: &Commit, at_ms: i64) {
        self.newest_ms = self.newest_ms.max(at_ms);
        // checked before its own removes count: every commit, tablekeeper's included (a
        // replica that committed from an old snapshot is as stale as any other writer)
        self.check(commit, at_ms);
        let by_repair = commit.marker_operation() == Some("repair");
        for remove in &commit.removes {
            // the first removal since the file was last added is the one that counts: the
            // commit that removed it while it was active
            self.removed.entry(remove.path.clone()).or_insert(Removal {
                version: commit.version,
                at_ms,
                by_repair,
            });
        }
        for repaired in commit.repaired_versions() {
            if let Some(detection) = self.found.get_mut(&repaired) {
                detection.summary.repaired_by = Some(to_i64(commit.version));
            }
        }
        // a file added again (by a repair, say) is active: removing it later is legitimate
        for add in &commit.adds {
            self.removed.remove(&add.path);
        }
    }

    fn check(&mut self, commit: &Commit, at_ms: i64) {
        let stale: BTreeMap<String, Removal> = commit
            .removes
            .iter()
            .filter_map(|r| self.removed.get(&r.path).map(|how| (r.path.clone(), *how)))
            .collect();
        if stale.is_empty() {
            return;
        }
        let kind = stale_kind(commit);
        let engine_info = commit.engine().map(str::to_owned);
        let removed_before: BTreeSet<u64> = stale.values().map(|r| r.version).collect();
        tracing::warn!(
            version = commit.version,
            kind = %kind,
            engine = engine_info.as_deref().unwrap_or("unknown"),
            files = stale.len(),
            removed_before = ?removed_before,
            "stale commit: it removed files an earlier commit had already removed"
        );
        let summary = StaleWrite {
            version: to_i64(commit.version),
            committed_at: DateTime::from_timestamp_millis(at_ms),
            kind: Some(kind),
            operation: commit.operation().map(str::to_owned),
            engine_info,
            rewrite_versions: removed_before.iter().copied().map(to_i64).collect(),
            over_repair: stale.values().any(|r| r.by_repair),
            files: stale.len() as u64,
            sample_files: stale.keys().take(SAMPLE_FILES).cloned().collect(),
            rows: None,
            repaired_by: None,
        };
        self.found.insert(
            commit.version,
            Detection {
                summary,
                removed: stale.into_iter().map(|(p, r)| (p, r.version)).collect(),
                committed_ms: at_ms,
            },
        );
    }

    /// Forgets what no longer matters as of the newest commit seen: removals older than the
    /// window, and repaired stale writes older than it. Pending ones are kept until repaired.
    pub(crate) fn prune(&mut self) {
        let horizon = self.newest_ms.saturating_sub(self.window_ms);
        self.removed.retain(|_, r| r.at_ms >= horizon);
        self.found
            .retain(|_, d| d.summary.pending() || d.committed_ms >= horizon);
    }

    /// Every stale write found and not yet pruned, oldest first.
    pub(crate) fn detections(&self) -> impl Iterator<Item = &Detection> {
        self.found.values()
    }

    pub(crate) fn detection_mut(&mut self, version: u64) -> Option<&mut Detection> {
        self.found.get_mut(&version)
    }

    /// Summaries of [`Self::detections`].
    pub(crate) fn summaries(&self) -> Vec<StaleWrite> {
        self.found.values().map(|d| d.summary.clone()).collect()
    }
}

/// Stale writes still waiting for their repair among the commits of the last `window` (by
/// commit file time), read from the log of `table` up to its loaded version.
pub(crate) async fn pending_stale_writes(
    table: &DeltaTable,
    uri: &str,
    window: Duration,
    now_ms: i64,
) -> Result<Vec<i64>, DeltaError> {
    let latest = crate::open::loaded_version(uri, table)?;
    let since = now_ms.saturating_sub(i64::try_from(window.as_millis()).unwrap_or(i64::MAX));
    let listing = list_log(table.object_store().as_ref(), uri).await?;
    let versions: Vec<u64> = listing
        .commits
        .range(..=latest)
        .filter(|(_, modified)| **modified >= since)
        .map(|(v, _)| *v)
        .collect();
    let mut watch = StaleWatch::new(window);
    for (_, commit) in read_commits(table.log_store().as_ref(), uri, versions).await? {
        if let Some(commit) = commit {
            if let Some(at) = commit.committed_ms() {
                watch.absorb(&commit, at);
            }
        }
    }
    Ok(watch
        .detections()
        .filter(|d| d.summary.pending())
        .map(|d| d.summary.version)
        .collect())
}

/// Rows of a stale write's files, read from the version before each rewrite that had removed
/// them: `numRecords` minus deletion-vector cardinality. These are the rows the writer meant to
/// remove that stay visible through the rewrite's outputs. `None` when a writer recorded no
/// statistics for one of them.
pub(crate) async fn count_stale_rows(
    uri: &str,
    detection: &Detection,
) -> Result<Option<u64>, DeltaError> {
    let mut by_rewrite: BTreeMap<u64, Vec<&str>> = BTreeMap::new();
    for (path, rewrite) in &detection.removed {
        by_rewrite.entry(*rewrite).or_default().push(path);
    }
    let mut total = 0u64;
    for (rewrite, paths) in by_rewrite {
        let Some(before) = rewrite.checked_sub(1) else {
            return Ok(None);
        };
        let table = open_table_at(uri, before).await?;
        let files = active_files(&table, uri).await?;
        let rows: HashMap<&str, Option<u64>> = files
            .iter()
            .map(|f| (f.path.as_str(), f.live_rows()))
            .collect();
        for path in paths {
            match rows.get(path).copied().flatten() {
                Some(n) => total += n,
                None => return Ok(None),
            }
        }
    }
    Ok(Some(total))
}

/// What a stale commit meant to do: a rewrite changed no data; a commit that only removed files
/// deleted them; anything else replaced rows.
fn stale_kind(commit: &Commit) -> StaleKind {
    if commit.is_rewrite() {
        StaleKind::Rewrite
    } else if commit.adds.is_empty() {
        StaleKind::Delete
    } else {
        StaleKind::Overwrite
    }
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commit(version: u64, lines: &[String]) -> Commit {
        Commit::parse(version, lines.join("\n").as_bytes()).expect("parses")
    }

    fn add(path: &str, data_change: bool) -> String {
        format!(
            r#"{{"add":{{"path":"{path}","size":1,"partitionValues":{{}},"dataChange":{data_change},"modificationTime":1,"stats":"{{\"numRecords\":10}}"}}}}"#
        )
    }

    fn remove(path: &str, data_change: bool) -> String {
        format!(
            r#"{{"remove":{{"path":"{path}","dataChange":{data_change},"deletionTimestamp":1}}}}"#
        )
    }

    fn info(json: &str) -> String {
        format!(r#"{{"commitInfo":{json}}}"#)
    }

    fn tk(op: &str, extra: &str) -> String {
        info(&format!(
            r#"{{"operation":"OPTIMIZE","tablekeeper":{{"runId":"r","operation":"{op}"{extra}}}}}"#
        ))
    }

    fn overwrite() -> String {
        info(
            r#"{"operation":"WRITE","operationParameters":{"mode":"Overwrite"},"engineInfo":"delta-rs:py-1.6.6"}"#,
        )
    }

    /// A watch that saw `a` and `b` written (version 0) and tablekeeper compact them into `c`
    /// (version 1, at 10 ms).
    fn compacted() -> StaleWatch {
        let mut watch = StaleWatch::new(DEFAULT_STALE_WATCH);
        watch.absorb(&commit(0, &[add("a", true), add("b", true)]), 0);
        watch.absorb(
            &commit(
                1,
                &[
                    tk("compact", ""),
                    remove("a", false),
                    remove("b", false),
                    add("c", false),
                ],
            ),
            10,
        );
        watch
    }

    #[test]
    fn an_overwrite_planned_before_a_compaction_is_stale() {
        let mut watch = compacted();
        // the writer saw a and b, not c
        watch.absorb(
            &commit(
                2,
                &[
                    overwrite(),
                    remove("a", true),
                    remove("b", true),
                    add("n", true),
                ],
            ),
            20,
        );
        let found = watch.summaries();
        assert_eq!(found.len(), 1);
        let w = &found[0];
        assert_eq!(w.version, 2);
        assert_eq!(w.rewrite_versions, vec![1]);
        assert_eq!(w.files, 2);
        assert_eq!(w.operation.as_deref(), Some("WRITE"));
        assert!(w.pending());
        // a repair naming it settles it
        watch.absorb(
            &commit(3, &[tk("repair", r#","repairs":[2]"#), remove("c", false)]),
            30,
        );
        assert_eq!(watch.summaries()[0].repaired_by, Some(3));
    }

    #[test]
    fn writers_that_saw_the_rewrite_are_not_stale() {
        let mut watch = compacted();
        // an overwrite from the new snapshot removes c, the rewrite's output
        watch.absorb(
            &commit(2, &[overwrite(), remove("c", true), add("n", true)]),
            20,
        );
        assert!(watch.summaries().is_empty());
    }

    #[test]
    fn another_engines_rewrite_of_removed_files_is_a_stale_rewrite() {
        let mut watch = compacted();
        // another engine's compaction (dataChange=false) from the snapshot before it
        watch.absorb(
            &commit(
                2,
                &[
                    info(r#"{"operation":"OPTIMIZE","clientVersion":"delta-rs.py-1.6.6"}"#),
                    remove("a", false),
                    remove("b", false),
                    add("d", false),
                ],
            ),
            20,
        );
        let found = watch.summaries();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].version, 2);
        assert_eq!(found[0].kind, Some(StaleKind::Rewrite));
        assert_eq!(found[0].engine_info.as_deref(), Some("delta-rs.py-1.6.6"));
        assert_eq!(found[0].rewrite_versions, [1]);
        assert_eq!(found[0].files, 2);
    }

    #[test]
    fn a_commit_that_only_removes_files_is_a_stale_delete() {
        let mut watch = StaleWatch::new(DEFAULT_STALE_WATCH);
        watch.absorb(
            &commit(1, &[tk("compact", ""), remove("a", false), add("c", false)]),
            10,
        );
        watch.absorb(
            &commit(2, &[info(r#"{"operation":"DELETE"}"#), remove("a", true)]),
            20,
        );
        let found = watch.summaries();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].kind, Some(StaleKind::Delete));
    }

    #[test]
    fn re_added_files_may_be_removed_again() {
        let mut watch = StaleWatch::new(DEFAULT_STALE_WATCH);
        watch.absorb(
            &commit(1, &[tk("compact", ""), remove("a", false), add("c", false)]),
            10,
        );
        watch.absorb(
            &commit(2, &[tk("repair", ""), remove("c", false), add("a", false)]),
            20,
        );
        watch.absorb(&commit(3, &[overwrite(), remove("a", true)]), 30);
        assert!(watch.summaries().is_empty());
    }

    #[test]
    fn removals_leave_the_watch_after_the_window() {
        let day = 86_400_000;
        let mut watch = StaleWatch::new(Duration::from_secs(86_400));
        watch.absorb(
            &commit(1, &[tk("compact", ""), remove("a", false), add("c", false)]),
            0,
        );
        watch.absorb(&commit(2, &[add("x", true)]), 2 * day);
        watch.prune();
        watch.absorb(&commit(3, &[overwrite(), remove("a", true)]), 2 * day);
        assert!(watch.summaries().is_empty());
    }

    #[test]
    fn full_overwrites_are_recognised() {
        assert!(commit(1, &[overwrite(), remove("a", true)]).is_full_overwrite());
        let replace_where = info(
            r#"{"operation":"WRITE","operationParameters":{"mode":"Overwrite","predicate":"d = '1'"}}"#,
        );
        assert!(!commit(1, &[replace_where]).is_full_overwrite());
        let append = info(r#"{"operation":"WRITE","operationParameters":{"mode":"Append"}}"#);
        assert!(!commit(1, &[append]).is_full_overwrite());
        let spark_cor = info(
            r#"{"operation":"CREATE OR REPLACE TABLE AS SELECT","operationParameters":{"mode":"Overwrite"}}"#,
        );
        assert!(commit(1, &[spark_cor]).is_full_overwrite());
        assert!(!commit(1, &[tk("compact", ""), remove("a", false)]).is_full_overwrite());
    }
}
