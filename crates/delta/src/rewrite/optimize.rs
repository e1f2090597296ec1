//! Compaction and Z-order are one operation with two kinds, as delta-rs's `OptimizeType`:
//! one conflict-retry loop, one preparation ([`crate::prepare`]), one plan step per kind
//! (`compact.rs` and `zorder.rs` say which partitions need work and what a dry run reports),
//! and one execution (`execute.rs`: a scoped rewrite per filter set, every commit guarded
//! against duplicate rewrites and recorded in the report; Z-order's own in `cluster.rs`).
//!
//! Purge (the rewrite of files carrying deletion vectors) is the third kind: its own plan and
//! its own rewrite step (`purge.rs`, because deltalake's OPTIMIZE cannot select files by their
//! deletion vectors), under the same loop, guard and report.

use std::collections::HashMap;
use std::num::NonZeroU64;
use std::time::Instant;

use futures::future::BoxFuture;
use serde_json::{json, Value};
use tablekeeper_vocab::{Compression, Operation};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::error::DeltaError;
use crate::prepare::{prepare, Prepared};
use crate::report::OpReport;
use crate::rewrite::compact::{self, CompactOptions};
use crate::rewrite::execute::{optimize_once, record_commits};
use crate::rewrite::liquid;
use crate::rewrite::plan::{Plan, Rewrite, RewriteSpec};
use crate::rewrite::purge::{self, PurgeOptions};
use crate::rewrite::select::filter_sets;
use crate::rewrite::shape::FileShape;
use crate::rewrite::zorder::{self, ZorderOptions};
use crate::run::{run_marker, ConflictRetry};
use crate::snapshot::active_set;

/// The rewriting operations, with their options.
#[derive(Debug, Clone, Copy)]
pub enum Optimize<'a> {
    /// Bin-packing of small files ([`CompactOptions`]).
    Compact(&'a CompactOptions),
    /// Clustering on columns ([`ZorderOptions`]).
    ZOrder(&'a ZorderOptions),
    /// Rewriting every file with a deletion vector ([`PurgeOptions`]).
    Purge(&'a PurgeOptions),
}

impl Optimize<'_> {
    pub(super) fn operation(self) -> Operation {
        match self {
            Optimize::Compact(_) => Operation::Compact,
            Optimize::ZOrder(_) => Operation::Zorder,
            Optimize::Purge(_) => Operation::Purge,
        }
    }

    pub(super) fn dry_run(self) -> bool {
        match self {
            Optimize::Compact(o) => o.dry_run,
            Optimize::ZOrder(o) => o.dry_run,
            Optimize::Purge(o) => o.dry_run,
        }
    }

    pub(super) fn max_conflict_retries(self) -> u32 {
        match self {
            Optimize::Compact(o) => o.max_conflict_retries,
            Optimize::ZOrder(o) => o.max_conflict_retries,
            Optimize::Purge(o) => o.max_conflict_retries,
        }
    }

    /// The encoding of the files written.
    pub(super) fn compression(self) -> Compression {
        match self {
            Optimize::Compact(o) => o.compression,
            Optimize::ZOrder(o) => o.compression,
            Optimize::Purge(o) => o.compression,
        }
    }

    /// The target file size, checked.
    pub(super) fn target(self, uri: &str) -> Result<NonZeroU64, DeltaError> {
        match self {
            Optimize::Compact(o) => compact::validate_sizing(
                uri,
                Operation::Compact,
                o.target_file_size,
                o.small_file_factor,
            ),
            Optimize::ZOrder(o) => {
                compact::validate_sizing(uri, Operation::Zorder, o.target_file_size, 1.0)
            }
            Optimize::Purge(o) => purge::target(uri, o),
        }
    }

    pub(super) async fn plan(
        self,
        uri: &str,
        prepared: &Prepared,
        cancel: &CancellationToken,
    ) -> Result<Plan, DeltaError> {
        match self {
            Optimize::Compact(o) => Ok(compact::plan(prepared, o)),
            Optimize::ZOrder(o) => zorder::plan(uri, prepared, o, cancel).await,
            Optimize::Purge(_) => Ok(purge::plan(prepared)),
        }
    }

    pub(super) fn rewrite(self) -> Rewrite {
        match self {
            Optimize::Compact(o) => Rewrite::Compact {
                small_below: compact::small_file_threshold(o.target_file_size, o.small_file_factor),
            },
            Optimize::ZOrder(o) => Rewrite::ZOrder {
                columns: o.columns.clone(),
                clustering: false,
            },
            Optimize::Purge(_) => Rewrite::Purge,
        }
    }

    /// Commit metadata: the run marker, and for Z-order Spark's `zOrderBy`, so history shows
    /// (and the probe finds) Z-order runs as Spark's.
    pub(super) fn marker(self, run_id: &str) -> HashMap<String, Value> {
        let mut marker = run_marker(run_id, self.operation());
        if let Optimize::ZOrder(o) = self {
            marker.insert(
                "operationParameters".to_owned(),
                json!({ "zOrderBy": o.columns }),
            );
        }
        marker
    }

    /// What a run of this kind rewrites (with `clustering`, a clustered table's compaction)
    /// and commits, under `run_id`'s marker.
    pub(super) fn spec(
        self,
        clustering: Option<Vec<String>>,
        target: NonZeroU64,
        run_id: &str,
    ) -> RewriteSpec {
        RewriteSpec {
            operation: self.operation(),
            rewrite: match clustering {
                Some(columns) => Rewrite::ZOrder {
                    columns,
                    clustering: true,
                },
                None => self.rewrite(),
            },
            output: FileShape {
                target_size: target,
                compression: self.compression(),
            },
            marker: self.marker(run_id),
            only: None,
        }
    }

    /// `skipped` when deltalake committed nothing for a non-empty plan.
    pub(super) fn nothing_written(self) -> &'static str {
        match self {
            Optimize::Compact(_) => "deltalake found no bins of two or more files to merge",
            Optimize::ZOrder(_) => "the z-order selected no file any more",
            Optimize::Purge(_) => "no selected file carried a deletion vector any more",
        }
    }
}

/// What `kind` rewrites of the prepared table: on a clustered table compaction clusters its
/// new files by the clustering columns (returned), otherwise the kind's own plan.
pub(super) async fn planned(
    uri: &str,
    kind: Optimize<'_>,
    prepared: &Prepared,
    cancel: &CancellationToken,
) -> Result<(Option<Vec<String>>, Plan), DeltaError> {
    let clustering = clustering_of(uri, kind, &prepared.table).await?;
    let plan = match &clustering {
        Some(_) => liquid::plan(uri, prepared)?,
        None => kind.plan(uri, prepared, cancel).await?,
    };
    Ok((clustering, plan))
}

/// The clustering columns a compaction of a clustered table clusters by; `None` for every
/// other table and kind.
pub(super) async fn clustering_of(
    uri: &str,
    kind: Optimize<'_>,
    table: &deltalake::DeltaTable,
) -> Result<Option<Vec<String>>, DeltaError> {
    match kind {
        Optimize::Compact(_) => liquid::clustering_columns(uri, table).await,
        _ => Ok(None),
    }
}

/// Rewrites `table_uri` as `kind` says: compaction bin-packs the partitions holding at least
/// `min_small_files` small files; Z-order clusters the partitions with data added since the
/// last Z-order. Lost commit races are retried up to the options' limit.
///
/// Cancellation drops the running OPTIMIZE before it commits; see the crate docs. The future is
/// boxed here, once, so callers can spawn it without proving `Send` themselves.
pub fn optimize<'a>(
    table_uri: &'a str,
    kind: Optimize<'a>,
    cancel: &'a CancellationToken,
) -> BoxFuture<'a, Result<OpReport, DeltaError>> {
    Box::pin(crate::run::unwound(
        table_uri,
        kind.operation(),
        run(table_uri, kind, cancel),
    ))
}

async fn run(
    uri: &str,
    kind: Optimize<'_>,
    cancel: &CancellationToken,
) -> Result<OpReport, DeltaError> {
    let started = Instant::now();
    let op = kind.operation();
    let target = kind.target(uri)?;
    let run_id = Uuid::new_v4().to_string();
    let mut retry = ConflictRetry::new(kind.max_conflict_retries());
    let mut report: Option<OpReport> = None;
    loop {
        match attempt(uri, kind, target, &run_id, &mut report, cancel).await {
            Ok(()) => break,
            Err(err) => retry.after_failure(err, cancel, uri, op).await?,
        }
    }
    let mut report = report.ok_or_else(|| DeltaError::Internal {
        table: uri.to_owned(),
        reason: format!("{op} finished without reading the table"),
    })?;
    report.conflicts += retry.conflicts;
    Ok(report.finish(started))
}

/// One attempt: prepare, plan, then rewrite scope by scope. The report carries over between
/// attempts, so commits of an attempt that later lost a race stay counted.
async fn attempt(
    uri: &str,
    kind: Optimize<'_>,
    target: NonZeroU64,
    run_id: &str,
    report: &mut Option<OpReport>,
    cancel: &CancellationToken,
) -> Result<(), DeltaError> {
    let op = kind.operation();
    let prepared = prepare(uri, op, cancel).await?;
    let version = prepared.version;
    let report = report.get_or_insert_with(|| {
        OpReport::new(
            op,
            uri,
            i64::try_from(version).unwrap_or(i64::MAX),
            kind.dry_run(),
        )
    });
    let (clustering, plan) = planned(uri, kind, &prepared, cancel).await?;
    let (scopes, files, bytes) = match plan {
        Plan::Nothing(reason) => {
            if report.commits.is_empty() {
                report.skipped = Some(reason);
            }
            return Ok(());
        }
        Plan::Rewrite {
            scopes,
            files,
            bytes,
        } => (scopes, files, bytes),
    };
    if kind.dry_run() {
        report.files_removed = files;
        report.bytes_removed = bytes;
        report.partitions_touched = scopes.iter().map(|s| s.key.clone()).collect();
        return Ok(());
    }

    tracing::info!(table = uri, version, partitions = scopes.len(), operation = %op, "rewriting");
    let Prepared {
        table,
        protocol,
        files: active,
        ..
    } = prepared;
    let mut known = Some((version, active_set(&active)));
    drop(active);
    let spec = kind.spec(clustering, target, run_id);
    let mut current = table;
    for filters in filter_sets(&protocol.partition_columns, &scopes) {
        let base_version = crate::open::loaded_version(uri, &current)?;
        let known_at_base = known.take().filter(|(v, _)| *v == base_version);
        current = optimize_once(uri, &current, &spec, &filters, cancel).await?;
        known = record_commits(
            uri,
            &current,
            base_version,
            run_id,
            known_at_base,
            &protocol.partition_columns,
            report,
        )
        .await?;
    }
    report.skipped = report
        .commits
        .is_empty()
        .then(|| kind.nothing_written().to_owned());
    Ok(())
}
