//! A rewrite split into tasks that any replica may run: [`plan_tasks`] cuts one job's
//! compaction, Z-order or purge, at one table version, into [`TaskInput`]s of at most
//! `max_task_bytes` input each; [`run_task`] rewrites one task's files and commits them on
//! their own, or commits nothing when they are no longer all active ([`TaskRun::Replan`]).
//!
//! The units: a compaction task is a run of one partition's bins, packed exactly as the rewrite
//! packs them ([`crate::rewrite::bins::pack`]), so the task's files make the same bins when it
//! runs; a Z-order (and a clustered table's compaction) task is one partition, whose files must
//! be sorted together to share one order, whatever its size (split by key ranges, every task
//! would read and remove every file of the partition, so no task could commit alone; a
//! partition over the limit is sorted on one worker by the external sort, in bounded memory,
//! `crate::rewrite::external_sort`); a purge task is a run of one partition's files carrying
//! deletion vectors. Which files a kind takes is
//! [`crate::rewrite::plan::Rewrite::takes`], the rule the rewrite itself selects by.
//!
//! Running a task is the scoped rewrite every job runs ([`optimize_once`], then the guard in
//! [`record_commits`]), limited to the task's files by [`RewriteSpec::only`]. A commit that
//! loses its race to a writer that removed one of its inputs is a conflict
//! (`log/commit.rs`), which here means re-plan, never retry the same files.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::error::{is_commit_conflict, DeltaError};
use crate::prepare::prepare;
use crate::report::OpReport;
use crate::rewrite::bins::pack;
use crate::rewrite::execute::{optimize_once, record_commits};
use crate::rewrite::optimize::{clustering_of, planned, Optimize};
use crate::rewrite::plan::{PartitionScope, Plan, Rewrite, RewriteSpec};
use crate::rewrite::select::{filter_sets, planned_snapshot, select_files};
use crate::snapshot::active_set;

/// One task: files of one partition, rewritten and committed together.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskInput {
    /// The partition's key (`col=value/...`; empty on an unpartitioned table).
    pub partition: String,
    /// Its values in partition-column order (logical names; `None` is the null partition).
    pub values: Vec<(String, Option<String>)>,
    /// The active files the task rewrites, as the log names them.
    pub files: Vec<String>,
    /// Their size in bytes.
    pub bytes: u64,
}

/// A job's rewrite, planned as tasks at one version.
#[derive(Debug, Clone, Default)]
pub struct TaskPlan {
    /// The version planned on.
    pub version: i64,
    pub tasks: Vec<TaskInput>,
    /// Why there is nothing to rewrite, when there is nothing.
    pub nothing: Option<String>,
}

impl TaskPlan {
    /// Whether the job should run as tasks: more than one.
    pub fn splits(&self) -> bool {
        self.tasks.len() > 1
    }
}

/// How a task ended.
#[derive(Debug)]
pub enum TaskRun {
    /// Committed (or found nothing left to rewrite); what the log says it did.
    Committed(Box<OpReport>),
    /// Some input was no longer active: nothing was committed, and why.
    Replan(String),
}

/// Plans `kind` on the table at `uri` as tasks of at most `max_task_bytes` input each.
pub async fn plan_tasks(
    uri: &str,
    kind: Optimize<'_>,
    max_task_bytes: u64,
    cancel: &CancellationToken,
) -> Result<TaskPlan, DeltaError> {
    let planning = plan_all(uri, kind, max_task_bytes, cancel);
    crate::run::unwound(uri, kind.operation(), planning).await
}

async fn plan_all(
    uri: &str,
    kind: Optimize<'_>,
    max_task_bytes: u64,
    cancel: &CancellationToken,
) -> Result<TaskPlan, DeltaError> {
    let target = kind.target(uri)?;
    let prepared = prepare(uri, kind.operation(), cancel).await?;
    let version = i64::try_from(prepared.version).unwrap_or(i64::MAX);
    let (clustering, plan) = planned(uri, kind, &prepared, cancel).await?;
    let scopes = match plan {
        Plan::Nothing(reason) => {
            return Ok(TaskPlan {
                version,
                nothing: Some(reason),
                ..TaskPlan::default()
            })
        }
        Plan::Rewrite { scopes, .. } => scopes,
    };
    let spec = kind.spec(clustering, target, "");
    let snapshot = planned_snapshot(uri, &prepared.table)?;
    let scopes: BTreeMap<String, PartitionScope> =
        scopes.into_iter().map(|s| (s.key.clone(), s)).collect();
    let by_partition = select_files(uri, &snapshot, &[], |file, _| {
        spec.takes(file).then(|| {
            (
                file.path().into_owned(),
                u64::try_from(file.size()).unwrap_or(0),
            )
        })
    })?;
    let mut tasks = Vec::new();
    for (key, files) in by_partition {
        let Some(scope) = scopes.get(&key) else {
            continue;
        };
        let groups = match &spec.rewrite {
            Rewrite::Compact { .. } => {
                group(pack(files, |(_, size)| *size, target.get()), max_task_bytes)
            }
            Rewrite::ZOrder { .. } => {
                let bytes: u64 = files.iter().map(|(_, size)| size).sum();
                if bytes > max_task_bytes {
                    tracing::info!(
                        table = uri,
                        partition = %key,
                        bytes,
                        max_task_bytes,
                        "partition over the task limit z-ordered as one task (its files sort together; the external sort bounds its memory)"
                    );
                }
                vec![files]
            }
            Rewrite::Purge => group(files.into_iter().map(|f| vec![f]).collect(), max_task_bytes),
        };
        tasks.extend(groups.into_iter().map(|files| TaskInput {
            partition: key.clone(),
            values: scope.values.clone(),
            bytes: files.iter().map(|(_, size)| size).sum(),
            files: files.into_iter().map(|(path, _)| path).collect(),
        }));
    }
    let nothing = tasks.is_empty().then(|| kind.nothing_written().to_owned());
    Ok(TaskPlan {
        version,
        tasks,
        nothing,
    })
}

/// Joins consecutive units (bins, or single files) into tasks of at most `max_bytes`; a unit
/// over the limit on its own is a task of its own.
fn group(units: Vec<Vec<(String, u64)>>, max_bytes: u64) -> Vec<Vec<(String, u64)>> {
    let mut tasks: Vec<Vec<(String, u64)>> = Vec::new();
    let mut bytes = 0u64;
    for unit in units {
        let size: u64 = unit.iter().map(|(_, s)| s).sum();
        match tasks.last_mut() {
            Some(last) if bytes + size <= max_bytes => {
                last.extend(unit);
                bytes += size;
            }
            _ => {
                tasks.push(unit);
                bytes = size;
            }
        }
    }
    tasks
}

/// Rewrites the files of `input` as `kind` says and commits them, from the table's latest
/// version. Commits nothing and answers [`TaskRun::Replan`] when one of the files is no longer
/// active, before or (a lost race) while committing.
pub async fn run_task(
    uri: &str,
    kind: Optimize<'_>,
    input: &TaskInput,
    cancel: &CancellationToken,
) -> Result<TaskRun, DeltaError> {
    crate::run::unwound(uri, kind.operation(), run_one(uri, kind, input, cancel)).await
}

async fn run_one(
    uri: &str,
    kind: Optimize<'_>,
    input: &TaskInput,
    cancel: &CancellationToken,
) -> Result<TaskRun, DeltaError> {
    let started = Instant::now();
    let op = kind.operation();
    let target = kind.target(uri)?;
    let prepared = prepare(uri, op, cancel).await?;
    let version = prepared.version;
    let active = active_set(&prepared.files);
    let gone = input
        .files
        .iter()
        .filter(|f| !active.contains_key(f.as_str()))
        .count();
    if gone > 0 {
        return Ok(TaskRun::Replan(format!(
            "{gone} of the task's {} files were no longer active at version {version} (another \
             writer rewrote or removed them): nothing was committed",
            input.files.len()
        )));
    }
    let clustering = clustering_of(uri, kind, &prepared.table).await?;
    let run_id = Uuid::new_v4().to_string();
    let mut spec: RewriteSpec = kind.spec(clustering, target, &run_id);
    spec.only = Some(Arc::new(
        input.files.iter().cloned().collect::<BTreeSet<_>>(),
    ));
    let scope = PartitionScope {
        key: input.partition.clone(),
        values: input.values.clone(),
    };
    let partition_columns = prepared.protocol.partition_columns.clone();
    let mut report = OpReport::new(op, uri, i64::try_from(version).unwrap_or(i64::MAX), false);
    let mut current = prepared.table;
    let mut known = Some((version, active));
    for filters in filter_sets(&partition_columns, &[scope]) {
        let base_version = crate::open::loaded_version(uri, &current)?;
        let known_at_base = known.take().filter(|(v, _)| *v == base_version);
        current = match optimize_once(uri, &current, &spec, &filters, cancel).await {
            Err(DeltaError::Delta { source, .. }) if is_commit_conflict(&source) => {
                return Ok(TaskRun::Replan(format!(
                    "another writer committed first and changed what the task read: {source}; \
                     nothing of this task was committed"
                )))
            }
            result => result?,
        };
        known = record_commits(
            uri,
            &current,
            base_version,
            &run_id,
            known_at_base,
            &partition_columns,
            &mut report,
        )
        .await?;
    }
    report.skipped = report
        .commits
        .is_empty()
        .then(|| kind.nothing_written().to_owned());
    Ok(TaskRun::Committed(Box::new(report.finish(started))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn units(sizes: &[&[u64]]) -> Vec<Vec<(String, u64)>> {
        sizes
            .iter()
            .map(|unit| unit.iter().map(|s| (format!("{s}"), *s)).collect())
            .collect()
    }

    fn sizes(tasks: &[Vec<(String, u64)>]) -> Vec<Vec<u64>> {
        tasks
            .iter()
            .map(|t| t.iter().map(|(_, s)| *s).collect())
            .collect()
    }

    #[test]
    fn units_join_up_to_the_limit_and_a_large_one_stands_alone() {
        let tasks = group(units(&[&[10, 20], &[30], &[50], &[200], &[5]]), 100);
        assert_eq!(
            sizes(&tasks),
            vec![vec![10, 20, 30], vec![50], vec![200], vec![5]]
        );
        assert!(group(Vec::new(), 100).is_empty());
    }
}
