//! The need check: given a table's inventory entry and a fresh probe of its log, decide
//! whether an operation should run now, and say why in words a reviewer understands.
//!
//! Pure functions over data: no I/O, no clock (the caller passes `now`). The same
//! decisions drive the scheduler's ticks, `tablekeeper plan` and the dashboard, so what a
//! reviewer sees in a plan is what the daemon will do.

use chrono::{DateTime, Utc};
use serde::Serialize;
use tablekeeper_delta::Probe;
use tablekeeper_inventory::{LogStore, Operation, RewriteOwner, TableSpec};

use crate::policy::overwrite_window;

/// What the planner concluded for one (table, operation).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case", tag = "decision", content = "reason")]
pub(crate) enum Decision {
    /// The operation is needed now.
    Run(String),
    /// Nothing to do now (the reason says why).
    Skip(String),
    /// The operation must not run on this table; a person has to act.
    Refuse(String),
    /// Due, but an enforced budget makes it wait for a later window (the reason names the
    /// budget, the rank and when the window refills). Only a budget round says so
    /// (`jobs::budget`); [`admit`] never does.
    Deferred(String),
}

impl Decision {
    pub fn reason(&self) -> &str {
        match self {
            Decision::Run(r) | Decision::Skip(r) | Decision::Refuse(r) | Decision::Deferred(r) => r,
        }
    }
    pub fn should_run(&self) -> bool {
        matches!(self, Decision::Run(_))
    }
    pub fn label(&self) -> &'static str {
        match self {
            Decision::Run(_) => "run",
            Decision::Skip(_) => "skip",
            Decision::Refuse(_) => "refuse",
            Decision::Deferred(_) => "deferred",
        }
    }
}

/// How much need a run must show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Need {
    /// A schedule tick (or `maintain --if-needed`): the need check decides. `last_success` is
    /// the last success known to the caller (job table and log combined); the log alone
    /// misses runs that committed nothing, such as a VACUUM that found no file to delete.
    Check { last_success: Option<DateTime<Utc>> },
    /// A person asked (the API's trigger, `maintain`): runs whatever the need thresholds
    /// say, never past a safety check.
    Forced,
    /// A job already queued is about to run: pause and need were settled when it was
    /// queued (a pause since then stops new jobs, not this one); the safety gates apply.
    Queued,
}

/// The one admission gate: whether `op` may and should run on the table now, and why.
/// The scheduler's ticks, the API's triggers, `maintain`, the executor (right before it
/// runs), `tablekeeper plan` and the dashboard all ask here, so they cannot disagree.
pub(crate) fn admit(
    spec: &TableSpec,
    op: Operation,
    probe: Probed<'_>,
    need: Need,
    now: DateTime<Utc>,
) -> Decision {
    let forced = need == Need::Forced;
    let scheduled = matches!(need, Need::Check { .. });
    if spec.paused && need != Need::Queued {
        let why = "table is paused (`maintenance.paused: true` or the pause route)";
        return if forced {
            Decision::Refuse(format!(
                "{why}: resume it first (POST /api/v1/tables/{}/resume)",
                spec.name
            ))
        } else {
            Decision::Skip(why.into())
        };
    }
    if op.rewrites() && spec.writers.rewrites == RewriteOwner::External {
        // a queued job from before the inventory said so must not run either
        let why = format!(
            "another engine owns this table's rewrites (`writers.rewrites: external`): \
             tablekeeper does not {op} it; VACUUM and checkpoint still run"
        );
        return if scheduled {
            Decision::Skip(why)
        } else {
            Decision::Refuse(why)
        };
    }
    if !spec.operation_enabled(op) && need != Need::Queued {
        let why = format!("{op} is disabled for this table in the inventory");
        return if forced {
            Decision::Refuse(why)
        } else {
            Decision::Skip(why)
        };
    }
    if let Some(reason) = inventory_gate(spec) {
        return Decision::Refuse(reason);
    }
    let probe = match (probe, scheduled) {
        (Probed::Read(p), _) => p,
        (Probed::Unreadable(e), _) => {
            return Decision::Refuse(format!(
                "table is unreadable, no maintenance runs until it reads again: {e}"
            ))
        }
        (Probed::Unreachable(e), true) => {
            return Decision::Skip(format!(
                "storage did not answer the last probe, maintenance waits for it: {e}"
            ))
        }
        (Probed::NotYet, true) => return Decision::Skip("not probed yet".into()),
        // a person's request (or a queued job) waits until storage answers; the operation
        // checks the table again before it changes anything
        (Probed::Unreachable(_) | Probed::NotYet, false) => {
            return Decision::Run("asked for; the table is checked again when the job runs".into())
        }
    };
    if let Some(reason) = probe_gate(spec, op, probe) {
        return Decision::Refuse(reason);
    }
    if scheduled && probe.history_pending && op != Operation::Checkpoint {
        // the overwrite, stale-write, foreign-rewrite and erasure facts the gates above read
        // come from the history: a scheduled run must not pass them on an empty reading
        return Decision::Skip(format!(
            "the table's log is still being read for its history (first sight): {op} waits \
             for the overwrites, stale writes and rewrites by other engines it holds, seconds \
             on most tables"
        ));
    }
    let decision = match need {
        Need::Forced => Decision::Run("asked for: runs whatever the need thresholds say".into()),
        Need::Queued => Decision::Run("queued".into()),
        Need::Check { last_success } => needed(spec, op, probe, last_success, now),
    };
    match decision {
        Decision::Run(reason) if op.rewrites() => match overwrite_window::open_at(spec, now) {
            Some((_, closes)) => Decision::Run(format!(
                "{reason}; deferred until the overwrite window closes at {}",
                closes.format("%Y-%m-%d %H:%M UTC")
            )),
            None => Decision::Run(reason),
        },
        other => other,
    }
}

/// What refuses every operation on a table from its inventory entry alone.
fn inventory_gate(spec: &TableSpec) -> Option<String> {
    // Checkpoints are refused too: their expired-log cleanup deletes log files the
    // DynamoDB log store's entries may still point at.
    (spec.writers.log_store == Some(LogStore::Dynamodb)).then(|| {
        "the table's writers use the DynamoDB log store, which deltalake 1.x no longer speaks; \
         commits from tablekeeper (S3 conditional put) mixed with DynamoDB-locked commits can \
         lose commits. Run this maintenance from the engine that owns the lock, or migrate the \
         writers to conditional put and set `writers.log_store: conditional-put`"
            .to_string()
    })
}

/// What refuses `op` on a table from what its log shows, whoever asks.
fn probe_gate(spec: &TableSpec, op: Operation, probe: &Probe) -> Option<String> {
    let protocol = probe.protocol();
    if let Err(e) = tablekeeper_delta::check_maintainable(&protocol, op) {
        return Some(e.to_string());
    }
    if op == Operation::Zorder && protocol.clustered() {
        return Some(
            "the table uses liquid clustering: the clustering columns of its `delta.clustering` \
             domain are its layout, so `layout.zorder` does not apply to it; remove \
             `layout.zorder` (compaction clusters the table's new files by its clustering \
             columns; `tablekeeper maintain zorder` names them)"
                .into(),
        );
    }
    if op.rewrites()
        && spec.writers.overwrites.is_none()
        && !probe.history.recent_overwrites.is_empty()
    {
        return Some(overwrites_refusal(probe));
    }
    if op == Operation::Vacuum || op.rewrites() {
        let pending: Vec<i64> = probe.pending_stale_writes().map(|w| w.version).collect();
        if !pending.is_empty() {
            let why = if op == Operation::Vacuum {
                "which adds back files a VACUUM could delete"
            } else {
                "and a rewrite now would fold the rows it must take out into new files"
            };
            return Some(format!(
                "stale commit(s) at version(s) {pending:?} wait for their repair, {why}; {op} \
                 runs again once they are repaired"
            ));
        }
    }
    None
}

/// Why a table with recent full overwrites by other writers and no declared overwrite window
/// gets no rewrite.
fn overwrites_refusal(probe: &Probe) -> String {
    let versions: Vec<String> = probe
        .history
        .recent_overwrites
        .iter()
        .map(|o| {
            let when = o
                .committed_at
                .map(|t| format!(" at {}", t.format("%Y-%m-%d %H:%M UTC")))
                .unwrap_or_default();
            let who = o
                .engine_info
                .as_deref()
                .map(|e| format!(" by {e}"))
                .unwrap_or_default();
            format!("version {}{when}{who}", o.version)
        })
        .collect();
    format!(
        "other writers fully overwrote this table recently ({}): an overwrite planned on a \
         snapshot older than a compaction keeps the compacted copy of the old rows, so \
         tablekeeper does not rewrite it; declare when the overwrites run with \
         `writers.overwrites: {{ schedule: \"0 1 * * *\", duration: 2h }}` and rewrites will stay \
         out of those windows",
        versions.join(", ")
    )
}

/// What the newest probe of a table found.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Probed<'a> {
    /// The table's log, as read.
    Read(&'a Probe),
    /// Storage did not answer (timeout, connection error, 5xx, throttling): maintenance
    /// waits for it, nothing is refused.
    Unreachable(&'a str),
    /// The table cannot be read: missing log or files, damaged log, unsupported protocol,
    /// access denied. Nothing runs until it reads again.
    Unreadable(&'a str),
    /// No probe at hand yet (the replica just started, or the caller reads no log).
    NotYet,
}

/// When a job of `op` may start at the earliest: the end of the overwrite window open at
/// `now` for rewrites, else `None` (now).
pub(crate) fn not_before(
    spec: &TableSpec,
    op: Operation,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    if !op.rewrites() {
        return None;
    }
    overwrite_window::open_at(spec, now).map(|(_, closes)| closes)
}

/// The need check alone (gates already passed).
fn needed(
    spec: &TableSpec,
    op: Operation,
    probe: &Probe,
    last_success: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Decision {
    match op {
        Operation::Compact => {
            let min = u64::from(spec.compaction.min_small_files);
            let qualifying: Vec<(&String, &u64)> = compactable_partitions(spec, probe).collect();
            if qualifying.is_empty() {
                let worst = probe
                    .small_files_by_partition
                    .values()
                    .max()
                    .copied()
                    .unwrap_or(0);
                Decision::Skip(format!(
                    "no partition has {min} or more small files (most in one partition: {worst})"
                ))
            } else {
                let files: u64 = qualifying.iter().map(|(_, n)| **n).sum();
                Decision::Run(format!(
                    "{} partition(s) have {min} or more small files ({files} small files to bin-pack)",
                    qualifying.len()
                ))
            }
        }
        Operation::Zorder => match (probe.history.last_zorder_at, probe.history.last_commit_at) {
            (None, _) => Decision::Run(format!(
                "table was never Z-ordered on [{}]",
                spec.layout.zorder.join(", ")
            )),
            (Some(z), Some(c)) if c > z => Decision::Run(format!(
                "new commits since the last Z-order at {}",
                z.to_rfc3339()
            )),
            (Some(z), _) => Decision::Skip(format!(
                "no commits since the last Z-order at {}",
                z.to_rfc3339()
            )),
        },
        Operation::Vacuum => match (
            probe.history.last_vacuum_at.max(last_success),
            probe.history.last_commit_at,
        ) {
            (None, _) => Decision::Run("table was never vacuumed".into()),
            (Some(v), Some(c)) if c > v => Decision::Run(format!(
                "commits since the last VACUUM at {} may have left files past retention",
                v.to_rfc3339()
            )),
            (Some(v), _) => {
                let _ = now;
                Decision::Skip(format!(
                    "no commits since the last VACUUM at {}",
                    v.to_rfc3339()
                ))
            }
        },
        Operation::Repair => {
            let mut pending = probe.pending_stale_writes().peekable();
            match pending.peek() {
                None => Decision::Skip("no stale write waits for a repair".into()),
                Some(w) if w.over_repair => Decision::Refuse(format!(
                    "the stale write at version {} removed files a repair commit had replaced: \
                     repair it by hand from the table's history",
                    w.version
                )),
                Some(_) => {
                    let versions: Vec<i64> = pending.map(|w| w.version).collect();
                    Decision::Run(format!(
                        "stale commit(s) at version(s) {versions:?} left rows visible that their \
                         writer removed, or rows of a rewrite visible twice"
                    ))
                }
            }
        }
        Operation::Purge => purge_needed(spec, probe, now),
        Operation::Checkpoint => {
            let threshold = spec.checkpoint.max_commits_since_checkpoint;
            if probe.commits_since_checkpoint >= threshold {
                Decision::Run(format!(
                    "{} commits since the last checkpoint (threshold {threshold})",
                    probe.commits_since_checkpoint
                ))
            } else {
                Decision::Skip(format!(
                    "{} commits since the last checkpoint, under the threshold of {threshold}",
                    probe.commits_since_checkpoint
                ))
            }
        }
    }
}

/// Soft-deleted rows are purged once they are this share of the rows in the files holding
/// them: readers read and filter every deleted row until then, and below it the rewrite costs
/// more than it saves. An erasure deadline at risk purges whatever the share.
/// The partitions a scheduled compaction would rewrite, with their small files: those with at
/// least `compaction.min_small_files` of them.
pub(crate) fn compactable_partitions<'a>(
    spec: &TableSpec,
    probe: &'a Probe,
) -> impl Iterator<Item = (&'a String, &'a u64)> {
    let min = u64::from(spec.compaction.min_small_files);
    probe
        .small_files_by_partition
        .iter()
        .filter(move |(_, n)| **n >= min)
}

pub(crate) const PURGE_MIN_DELETED_SHARE: f64 = 0.05;

fn purge_needed(spec: &TableSpec, probe: &Probe, now: DateTime<Utc>) -> Decision {
    if probe.files_with_deletion_vectors == 0 {
        return Decision::Skip("no active file carries a deletion vector".into());
    }
    let deleted = probe.deleted_rows;
    let rows = probe
        .rows_in_files_with_deletion_vectors
        .max(deleted)
        .max(1);
    if crate::policy::erasure::deadline_at_risk(spec, probe, now) {
        return Decision::Run(format!(
            "{deleted} soft-deleted row(s) must be physically gone within the erasure deadline \
             ({}): the purge must run now so VACUUM can delete the old files after the {} \
             retention",
            humantime::format_duration(spec.retention.erasure_deadline.unwrap_or_default()),
            humantime::format_duration(spec.vacuum_window())
        ));
    }
    let share = deleted as f64 / rows as f64;
    let percent = share * 100.0;
    if share >= PURGE_MIN_DELETED_SHARE {
        Decision::Run(format!(
            "{deleted} soft-deleted row(s) in {} file(s) with deletion vectors ({percent:.1}% of \
             their rows, threshold {:.0}%)",
            probe.files_with_deletion_vectors,
            PURGE_MIN_DELETED_SHARE * 100.0
        ))
    } else {
        Decision::Skip(format!(
            "{deleted} soft-deleted row(s) are {percent:.1}% of the rows in files with deletion \
             vectors, under the {:.0}% threshold, and no erasure deadline is at risk",
            PURGE_MIN_DELETED_SHARE * 100.0
        ))
    }
}

/// When an operation last succeeded on a table according to the Delta log (so work done
/// by other engines counts). Compaction counts any OPTIMIZE, Z-order included, because
/// both leave the table compacted.
pub(crate) fn last_success_from_log(probe: &Probe, op: Operation) -> Option<DateTime<Utc>> {
    match op {
        Operation::Compact => probe
            .history
            .last_optimize_at
            .max(probe.history.last_zorder_at),
        Operation::Zorder => probe.history.last_zorder_at,
        Operation::Vacuum => probe.history.last_vacuum_at,
        Operation::Checkpoint => probe.last_checkpoint_at,
        // a purge commits as OPTIMIZE: the job table alone knows when one ran
        Operation::Purge | Operation::Repair => None,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::path::Path;
    use tablekeeper_inventory::Inventory;

    /// Table `t` at `/data/t`, partitioned by `day`, Z-ordered by `user_id`, plus `extra`.
    pub(crate) fn spec(extra: &str) -> TableSpec {
        let yaml = format!(
            "tables:\n  - name: t\n    path: /data/t\n    owner: o\n    layout:\n      partition_by: [day]\n      zorder: [user_id]\n{extra}"
        );
        let inv = Inventory::parse(Path::new("inv.yaml"), &yaml).unwrap();
        inv.tables[0].clone()
    }

    /// A probe of `t` with 30 small files, fields replaced by `patch`.
    pub(crate) fn probe(patch: serde_json::Value) -> Probe {
        let mut base = serde_json::json!({
            "table": "/data/t", "version": 10, "probed_at": "2026-11-29T12:00:00Z",
            "created_at": "2026-11-01T00:00:00Z", "history_from_version": 0,
            "last_commit_at": "2026-11-29T11:00:00Z", "files": 30, "size_bytes": 3000,
            "small_files": 30, "small_file_threshold_bytes": 100,
            "small_files_by_partition": {"day=1": 12, "day=2": 3},
            "commits_since_checkpoint": 5, "last_checkpoint_version": 5,
            "last_checkpoint_at": null, "commits_per_hour": 2, "last_optimize_at": null,
            "last_zorder_at": null, "last_zorder_version": null, "last_vacuum_at": null,
            "properties": {}, "min_reader_version": 1, "min_writer_version": 2,
            "reader_features": [], "writer_features": [], "partition_columns": ["day"],
            "deletion_vectors_enabled": false
        });
        if let (Some(b), Some(p)) = (base.as_object_mut(), patch.as_object()) {
            for (k, v) in p {
                b.insert(k.clone(), v.clone());
            }
        }
        serde_json::from_value(base).unwrap()
    }

    /// The probes' clock: 2026-11-29 12:00 UTC.
    pub(crate) fn now() -> DateTime<Utc> {
        "2026-11-29T12:00:00Z".parse().unwrap()
    }

    /// A schedule tick's question.
    fn decide(
        spec: &TableSpec,
        op: Operation,
        probe: Probed<'_>,
        last_success: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> Decision {
        admit(spec, op, probe, Need::Check { last_success }, now)
    }

    #[test]
    fn compaction_runs_only_when_a_partition_has_enough_small_files() {
        let s = spec("");
        let p = probe(serde_json::json!({}));
        assert!(decide(&s, Operation::Compact, Probed::Read(&p), None, now()).should_run());
        let p = probe(serde_json::json!({"small_files_by_partition": {"day=1": 9, "day=2": 9}}));
        let d = decide(&s, Operation::Compact, Probed::Read(&p), None, now());
        assert!(!d.should_run(), "{d:?}");
        assert!(d.reason().contains("most in one partition: 9"), "{d:?}");
    }

    #[test]
    fn checkpoint_follows_the_commit_threshold() {
        let s = spec("    maintenance:\n      checkpoint: { max_commits_since_checkpoint: 5 }\n");
        assert!(decide(
            &s,
            Operation::Checkpoint,
            Probed::Read(&probe(serde_json::json!({}))),
            None,
            now()
        )
        .should_run());
        let p = probe(serde_json::json!({"commits_since_checkpoint": 4}));
        assert!(!decide(&s, Operation::Checkpoint, Probed::Read(&p), None, now()).should_run());
    }

    #[test]
    fn vacuum_counts_job_table_successes_the_log_cannot_show() {
        let s = spec("");
        let p = probe(serde_json::json!({}));
        assert!(decide(&s, Operation::Vacuum, Probed::Read(&p), None, now()).should_run());
        let after_last_commit: DateTime<Utc> = "2026-11-29T11:30:00Z".parse().unwrap();
        let d = decide(
            &s,
            Operation::Vacuum,
            Probed::Read(&p),
            Some(after_last_commit),
            now(),
        );
        assert!(!d.should_run(), "{d:?}");
    }

    #[test]
    fn paused_unreadable_and_unsafe_tables_never_run() {
        let p = probe(serde_json::json!({}));
        let paused = spec("    maintenance:\n      paused: true\n");
        assert!(!decide(&paused, Operation::Compact, Probed::Read(&p), None, now()).should_run());
        let s = spec("");
        let d = decide(
            &s,
            Operation::Compact,
            Probed::Unreadable("missing file part-1.parquet"),
            None,
            now(),
        );
        assert!(matches!(d, Decision::Refuse(_)), "{d:?}");
        let d = decide(
            &s,
            Operation::Compact,
            Probed::Unreachable("timed out"),
            None,
            now(),
        );
        assert!(
            matches!(d, Decision::Skip(_)),
            "transient trouble defers: {d:?}"
        );
        let unknown = probe(serde_json::json!({
            "min_reader_version": 3, "min_writer_version": 7,
            "writer_features": ["aFutureWriterFeature"]
        }));
        let d = decide(&s, Operation::Compact, Probed::Read(&unknown), None, now());
        assert!(matches!(d, Decision::Refuse(_)), "{d:?}");
        // a clustered table's layout is its clustering: Z-order refused, compaction runs
        let clustered = probe(serde_json::json!({
            "min_reader_version": 1, "min_writer_version": 7,
            "writer_features": ["domainMetadata", "clustering"]
        }));
        let d = decide(&s, Operation::Zorder, Probed::Read(&clustered), None, now());
        assert!(
            matches!(&d, Decision::Refuse(r) if r.contains("liquid clustering") && r.contains("layout.zorder")),
            "{d:?}"
        );
        let d = decide(
            &s,
            Operation::Compact,
            Probed::Read(&clustered),
            None,
            now(),
        );
        assert!(!matches!(d, Decision::Refuse(_)), "{d:?}");
    }

    fn with_deletion_vectors(deleted: u64, rows: u64, pending_since: &str) -> Probe {
        probe(serde_json::json!({
            "deletion_vectors_enabled": true, "min_reader_version": 3, "min_writer_version": 7,
            "reader_features": ["deletionVectors"], "writer_features": ["deletionVectors"],
            "files_with_deletion_vectors": 2, "rows_in_files_with_deletion_vectors": rows,
            "deleted_rows": deleted, "erasure_pending_since": pending_since
        }))
    }

    #[test]
    fn purge_runs_when_deleted_rows_pile_up_or_the_erasure_deadline_is_near() {
        let s = spec("");
        let purge =
            |s: &TableSpec, p: &Probe| decide(s, Operation::Purge, Probed::Read(p), None, now());
        let clean = probe(serde_json::json!({}));
        assert!(
            matches!(purge(&s, &clean), Decision::Skip(r) if r.contains("no active file carries"))
        );
        let few = with_deletion_vectors(4, 1000, "2026-11-28T12:00:00Z");
        assert!(matches!(purge(&s, &few), Decision::Skip(r) if r.contains("0.4%")));
        let many = with_deletion_vectors(60, 1000, "2026-11-28T12:00:00Z");
        assert!(matches!(purge(&s, &many), Decision::Run(r) if r.contains("6.0%")));
        // a 10-day deadline with the 7-day retention: a deletion two days old leaves no room
        let deadline = spec("    retention:\n      erasure_deadline: 10d\n");
        let d = purge(
            &deadline,
            &with_deletion_vectors(4, 1000, "2026-11-27T12:00:00Z"),
        );
        assert!(
            matches!(&d, Decision::Run(r) if r.contains("erasure deadline")),
            "{d:?}"
        );
        let d = purge(
            &deadline,
            &with_deletion_vectors(4, 1000, "2026-11-29T11:00:00Z"),
        );
        assert!(
            matches!(d, Decision::Skip(_)),
            "a fresh deletion can wait: {d:?}"
        );
    }

    fn stale_write(version: i64, repaired_by: Option<i64>) -> serde_json::Value {
        serde_json::json!({
            "version": version, "committed_at": "2026-11-29T10:00:00Z", "operation": "WRITE",
            "engine_info": "delta-rs:py-1.6.6", "rewrite_versions": [version - 1],
            "over_repair": false, "files": 10, "sample_files": ["a.parquet"], "rows": 100,
            "repaired_by": repaired_by
        })
    }

    #[test]
    fn a_pending_stale_write_needs_a_repair_and_holds_vacuum_back() {
        let s = spec("");
        let quiet = probe(serde_json::json!({}));
        assert!(!decide(&s, Operation::Repair, Probed::Read(&quiet), None, now()).should_run());
        let pending = probe(serde_json::json!({"stale_writes": [stale_write(12, None)]}));
        let d = decide(&s, Operation::Repair, Probed::Read(&pending), None, now());
        assert!(d.should_run(), "{d:?}");
        assert!(d.reason().contains("[12]"), "{d:?}");
        let d = decide(&s, Operation::Vacuum, Probed::Read(&pending), None, now());
        assert!(matches!(d, Decision::Refuse(_)), "{d:?}");
        assert!(d.reason().contains("repair"), "{d:?}");
        // a rewrite would fold the rows the repair takes out into new files
        let d = decide(&s, Operation::Compact, Probed::Read(&pending), None, now());
        assert!(matches!(d, Decision::Refuse(_)), "{d:?}");
        let repaired = probe(serde_json::json!({"stale_writes": [stale_write(12, Some(14))]}));
        assert!(!decide(&s, Operation::Repair, Probed::Read(&repaired), None, now()).should_run());
        assert!(decide(&s, Operation::Vacuum, Probed::Read(&repaired), None, now()).should_run());
        let off = spec("    maintenance:\n      auto_repair: false\n");
        let d = decide(&off, Operation::Repair, Probed::Read(&pending), None, now());
        assert!(!d.should_run(), "{d:?}");
    }

    #[test]
    fn an_external_rewriter_stops_rewrites_but_not_vacuum_or_checkpoints() {
        let s = spec("    writers: { rewrites: external }\n");
        let read = probe(serde_json::json!({}));
        for op in [Operation::Compact, Operation::Zorder, Operation::Purge] {
            let d = decide(&s, op, Probed::Read(&read), None, now());
            assert!(matches!(d, Decision::Skip(_)), "{op}: {d:?}");
            assert!(d.reason().contains("writers.rewrites: external"), "{d:?}");
            let forced = admit(&s, op, Probed::Read(&read), Need::Forced, now());
            assert!(matches!(forced, Decision::Refuse(_)), "{op}: {forced:?}");
            let queued = admit(&s, op, Probed::Read(&read), Need::Queued, now());
            assert!(matches!(queued, Decision::Refuse(_)), "{op}: {queued:?}");
        }
        let forced = admit(
            &s,
            Operation::Vacuum,
            Probed::Read(&read),
            Need::Forced,
            now(),
        );
        assert!(forced.should_run(), "{forced:?}");
        let forced = admit(
            &s,
            Operation::Checkpoint,
            Probed::Read(&read),
            Need::Forced,
            now(),
        );
        assert!(forced.should_run(), "{forced:?}");
    }

    fn overwrites() -> serde_json::Value {
        serde_json::json!({"recent_overwrites": [{
            "version": 9, "committed_at": "2026-11-29T01:10:00Z", "operation": "WRITE",
            "engine_info": "Apache-Spark/3.5.0 Delta-Lake/3.1.0"
        }]})
    }

    #[test]
    fn recent_full_overwrites_without_a_window_refuse_rewrites_naming_the_commits() {
        let s = spec("");
        let p = probe(overwrites());
        for op in [Operation::Compact, Operation::Zorder] {
            let d = decide(&s, op, Probed::Read(&p), None, now());
            assert!(matches!(d, Decision::Refuse(_)), "{op}: {d:?}");
            assert!(
                d.reason()
                    .contains("version 9 at 2026-11-29 01:10 UTC by Apache-Spark"),
                "{d:?}"
            );
            assert!(d.reason().contains("writers.overwrites"), "{d:?}");
        }
        // VACUUM and checkpoints do not rewrite data
        assert!(decide(&s, Operation::Vacuum, Probed::Read(&p), None, now()).should_run());
    }

    #[test]
    fn a_declared_window_lets_rewrites_run_outside_it_and_defers_them_inside() {
        let s = spec("    writers:\n      overwrites: { schedule: \"0 1 * * *\", duration: 2h }\n");
        let p = probe(overwrites());
        let outside = decide(&s, Operation::Compact, Probed::Read(&p), None, now());
        assert!(outside.should_run(), "{outside:?}");
        assert_eq!(not_before(&s, Operation::Compact, now()), None);
        let inside: DateTime<Utc> = "2026-11-29T01:30:00Z".parse().unwrap();
        let d = decide(&s, Operation::Compact, Probed::Read(&p), None, inside);
        assert!(d.should_run(), "{d:?}");
        assert!(
            d.reason()
                .contains("deferred until the overwrite window closes at 2026-11-29 03:00 UTC"),
            "{d:?}"
        );
        assert_eq!(
            not_before(&s, Operation::Compact, inside),
            Some("2026-11-29T03:00:00Z".parse().unwrap())
        );
        assert_eq!(
            not_before(&s, Operation::Vacuum, inside),
            None,
            "only rewrites wait"
        );
    }

    #[test]
    fn dynamodb_writers_refuse_every_operation() {
        let yaml = "tables:\n  - name: t\n    path: s3://lake/t\n    owner: o\n    writers:\n      topology: multi-writer\n      log_store: dynamodb\n";
        let inv = Inventory::parse(Path::new("inv.yaml"), yaml).unwrap();
        for op in Operation::ALL {
            let d = admit(&inv.tables[0], op, Probed::NotYet, Need::Forced, now());
            assert!(matches!(d, Decision::Refuse(_)), "{op}: {d:?}");
        }
    }

    #[test]
    fn a_probe_still_reading_the_history_holds_every_scheduled_operation_but_checkpoints() {
        let s = spec("    maintenance:\n      checkpoint: { max_commits_since_checkpoint: 5 }\n");
        // every operation's need shows: small files, never Z-ordered or vacuumed, 6% deleted
        let read = with_deletion_vectors(60, 1000, "2026-11-28T12:00:00Z");
        let mut pending = read.clone();
        pending.history_pending = true;
        for op in [
            Operation::Compact,
            Operation::Zorder,
            Operation::Vacuum,
            Operation::Purge,
        ] {
            let d = decide(&s, op, Probed::Read(&pending), None, now());
            assert!(
                matches!(&d, Decision::Skip(r) if r.contains("still being read for its history")),
                "{op}: {d:?}"
            );
            let d = decide(&s, op, Probed::Read(&read), None, now());
            assert!(d.should_run(), "{op} once the history is read: {d:?}");
        }
        let d = decide(
            &s,
            Operation::Checkpoint,
            Probed::Read(&pending),
            None,
            now(),
        );
        assert!(d.should_run(), "{d:?}");
        // a person asking is not held: the operation checks the table itself when it runs
        let forced = Need::Forced;
        let d = admit(
            &s,
            Operation::Compact,
            Probed::Read(&pending),
            forced,
            now(),
        );
        assert!(d.should_run(), "{d:?}");
    }

    #[test]
    fn a_person_asking_skips_the_need_check_never_a_safety_check() {
        let s = spec("    maintenance:\n      checkpoint: { max_commits_since_checkpoint: 100 }\n");
        let few = probe(serde_json::json!({"commits_since_checkpoint": 1}));
        assert!(!decide(&s, Operation::Checkpoint, Probed::Read(&few), None, now()).should_run());
        let forced = admit(
            &s,
            Operation::Checkpoint,
            Probed::Read(&few),
            Need::Forced,
            now(),
        );
        assert!(forced.should_run(), "{forced:?}");
        // storage trouble or no probe yet: the request waits in the queue
        for probed in [Probed::Unreachable("timed out"), Probed::NotYet] {
            assert!(admit(&s, Operation::Compact, probed, Need::Forced, now()).should_run());
        }
        let d = admit(
            &s,
            Operation::Compact,
            Probed::Read(&probe(overwrites())),
            Need::Forced,
            now(),
        );
        assert!(matches!(d, Decision::Refuse(_)), "{d:?}");
        let d = admit(
            &s,
            Operation::Compact,
            Probed::Unreadable("gone"),
            Need::Forced,
            now(),
        );
        assert!(matches!(d, Decision::Refuse(_)), "{d:?}");
        let paused = spec("    maintenance:\n      paused: true\n");
        let d = admit(
            &paused,
            Operation::Compact,
            Probed::Read(&few),
            Need::Forced,
            now(),
        );
        assert!(d.reason().contains("resume it first"), "{d:?}");
        let off = spec("    maintenance:\n      vacuum: { enabled: false }\n");
        let d = admit(
            &off,
            Operation::Vacuum,
            Probed::Read(&few),
            Need::Forced,
            now(),
        );
        assert!(matches!(d, Decision::Refuse(_)), "{d:?}");
    }
}
