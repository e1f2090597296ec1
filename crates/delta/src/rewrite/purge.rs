//! Purge: REORG TABLE … APPLY (PURGE). Rewrites every active file that carries a deletion
//! vector, whatever its size, so the rows its vector marks deleted leave the live files; the
//! old files (and their vectors) stay on storage until VACUUM deletes them after the retention.
//!
//! Owns choosing the files (from the log: every file with a deletion vector, by partition) and
//! rewriting them. deltalake's OPTIMIZE cannot do it: it skips files over the target size and
//! never rewrites a file alone in its bin. The rewrite is built from deltalake's own parts
//! instead ([`crate::rewrite::decode`]: its deletion-vector-aware scan and its writer), committing
//! removes (carrying their vectors) and adds as one `dataChange: false` rewrite per partition
//! set, marked with the run and checked by the rewrite guard ([`crate::rewrite::guard`]: the added rows
//! must equal the removed rows minus their vectors').

use std::collections::BTreeMap;
use std::num::NonZeroU64;

use deltalake::kernel::Action;
use deltalake::DeltaTable;
use tablekeeper_vocab::Compression;
use tokio_util::sync::CancellationToken;

use crate::error::DeltaError;
use crate::log::read::{ordered_partition_values, partition_key};
use crate::prepare::Prepared;
use crate::rewrite::plan::Plan;
use crate::rewrite::plan::{PartitionScope, RewriteSpec};
use crate::rewrite::select::OwnedFilter;
use crate::run::cancellable;

/// Options of one purge run.
#[derive(Debug, Clone)]
pub struct PurgeOptions {
    /// Size of the files written, in bytes.
    pub target_file_size: u64,
    /// The encoding of the files written (`layout.compression`).
    pub compression: Compression,
    /// Plan and report, change nothing.
    pub dry_run: bool,
    /// Commit conflicts to retry before giving up with [`DeltaError::Conflict`].
    pub max_conflict_retries: u32,
}

/// The partitions holding files with deletion vectors, and what rewriting them would read.
pub(crate) fn plan(prepared: &Prepared) -> Plan {
    let columns = &prepared.protocol.partition_columns;
    let mut scopes: BTreeMap<String, PartitionScope> = BTreeMap::new();
    let (mut files, mut bytes, mut rows) = (0u64, 0u64, 0u64);
    for file in prepared
        .files
        .iter()
        .filter(|f| f.deletion_vector.is_some())
    {
        let key = partition_key(columns, &file.partition_values);
        scopes.entry(key.clone()).or_insert_with(|| PartitionScope {
            key,
            values: ordered_partition_values(columns, &file.partition_values),
        });
        files += 1;
        bytes += file.size;
        rows += file.deleted_rows();
    }
    if files == 0 {
        return Plan::Nothing("no active file carries a deletion vector".into());
    }
    tracing::debug!(table = %prepared.protocol.table, files, deleted_rows = rows, "purge planned");
    Plan::Rewrite {
        scopes: scopes.into_values().collect(),
        files,
        bytes,
    }
}

/// Rewrites the files with deletion vectors in the partitions `filters` select, from `table`'s
/// snapshot, and commits them as one rewrite. Returns the table at the new version (or
/// unchanged when no selected file carries a vector any more).
pub(crate) async fn rewrite(
    uri: &str,
    table: &DeltaTable,
    spec: &RewriteSpec,
    filters: &[OwnedFilter],
    cancel: &CancellationToken,
) -> Result<DeltaTable, DeltaError> {
    let step = async {
        let snapshot = crate::rewrite::select::planned_snapshot(uri, table)?;
        let partitions =
            crate::rewrite::select::select_files(uri, &snapshot, filters, |file, values| {
                spec.takes(file).then(|| {
                    (
                        file.path().into_owned(),
                        crate::rewrite::select::remove_of(file),
                        values,
                    )
                })
            })?;
        if partitions.is_empty() {
            return Ok(table.clone());
        }
        let _reserved = crate::rewrite::budget::budget()
            .reserve(crate::rewrite::decode::MEMORY_BYTES)
            .await;
        let log_store = table.log_store();
        let mut actions = Vec::new();
        for files in partitions.into_values() {
            let values =
                crate::rewrite::content::shared_values(uri, files.iter().map(|(_, _, v)| v))?;
            let (paths, removes): (Vec<String>, Vec<Action>) = files
                .into_iter()
                .map(|(path, remove, _)| (path, remove))
                .unzip();
            let adds = crate::rewrite::decode::rewrite_files(
                uri,
                &log_store,
                &snapshot,
                paths,
                values,
                spec.output,
            )
            .await?;
            actions.extend(removes);
            actions.extend(adds.into_iter().map(Action::Add));
        }
        crate::rewrite::decode::commit_and_reload(uri, table, &snapshot, actions, spec, "purge")
            .await
    };
    cancellable(cancel, uri, spec.operation, step).await
}

/// The purge's target size, checked.
pub(crate) fn target(uri: &str, options: &PurgeOptions) -> Result<NonZeroU64, DeltaError> {
    crate::rewrite::compact::validate_sizing(
        uri,
        tablekeeper_vocab::Operation::Purge,
        options.target_file_size,
        1.0,
    )
}
