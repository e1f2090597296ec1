//! Z-order's rewrite, in bounded memory: every file of each selected partition is read
//! ([`crate::decode`]'s deletion-vector-aware scan), its rows sorted by their Z-order key
//! ([`crate::zkey`]) with an external sort ([`crate::external_sort`]) and written back in files
//! of the target size; the partitions a filter set selects are committed together as one
//! OPTIMIZE commit, as deltalake's Z-order commits them (the next Z-order is scoped by the
//! version of the last one).
//!
//! Owns the memory arithmetic. A Z-order holds half the replica's rewrite budget while it runs
//! and rewrites one partition at a time; of that half, the writer takes what a decoding rewrite
//! takes ([`crate::decode::MEMORY_BYTES`]) and the sort keeps the rest as its run size, so a
//! partition larger than the budget spills sorted runs to local disk instead of holding them.
//! deltalake's Z-order (a DataFusion sort without a memory pool) was measured holding about ten
//! times its input, and with a pool its final merge failed; this is why it is not used.

use std::collections::BTreeMap;

use deltalake::arrow::record_batch::RecordBatch;
use deltalake::datafile::writer::DeltaWriter;
use deltalake::kernel::{Action, Add};
use deltalake::{DeltaTable, DeltaTableError};
use futures::StreamExt;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

use crate::error::DeltaError;
use crate::external_sort::{ExternalSort, Sorted};
use crate::log::partition_key;
use crate::rewrite::{matches, OwnedFilter, RewriteSpec};
use crate::run::cancellable;
use crate::zkey::ZKey;

/// The smallest sort run, whatever the budget: below it spill files multiply for nothing.
const MIN_RUN_BYTES: u64 = 32 * 1024 * 1024;

/// The sort's run size when a Z-order holds `share` bytes of the budget.
pub(crate) fn run_bytes(share: u64) -> u64 {
    share
        .saturating_sub(crate::decode::MEMORY_BYTES)
        .max(MIN_RUN_BYTES)
}

/// Batches in flight between the merge and the writer.
const WRITE_QUEUE: usize = 4;

/// Writes `sorted`'s rows through `writer`, encoding on another task while this one merges,
/// so the two CPU-heavy halves (merge and gather; Parquet encoding and zstd) use two cores.
/// Returns the files' `add` actions and the sort's spill figures (runs, bytes).
async fn write_sorted(
    uri: &str,
    mut sorted: Sorted,
    mut writer: DeltaWriter,
) -> Result<(Vec<Add>, usize, u64), DeltaError> {
    let (sender, mut receiver) = tokio::sync::mpsc::channel::<RecordBatch>(WRITE_QUEUE);
    let owned_uri = uri.to_owned();
    // aborted if this future is dropped (a cancelled job): no file is written after it
    let encoder = AbortOnDropHandle::new(tokio::spawn(async move {
        while let Some(batch) = receiver.recv().await {
            writer
                .write(&batch)
                .await
                .map_err(|e| DeltaError::delta(&owned_uri, "writing z-ordered files", e))?;
        }
        crate::decode::close(&owned_uri, writer).await
    }));
    while let Some(batch) = sorted
        .next_batch()
        .map_err(|e| DeltaError::delta(uri, "merging z-order sort runs", e.into()))?
    {
        if sender.send(batch).await.is_err() {
            // the encoder stopped: its result says why
            break;
        }
    }
    drop(sender);
    let adds = encoder.await.map_err(|e| {
        DeltaError::delta(
            uri,
            "writing z-ordered files",
            DeltaTableError::Generic(format!("the encoding task ended: {e}")),
        )
    })??;
    Ok((adds, sorted.runs, sorted.spilled_bytes))
}

/// Z-orders every file of the partitions `filters` select on `columns`, from `table`'s
/// snapshot, and commits them as one rewrite. Returns the table at the new version (unchanged
/// when the filters select no file).
pub(crate) async fn rewrite(
    uri: &str,
    table: &DeltaTable,
    spec: &RewriteSpec,
    columns: &[String],
    filters: &[OwnedFilter],
    cancel: &CancellationToken,
) -> Result<DeltaTable, DeltaError> {
    let step = async {
        let state = table
            .snapshot()
            .map_err(|e| DeltaError::delta(uri, "reading the snapshot", e))?;
        let snapshot = state.snapshot().clone();
        let partition_columns = snapshot.metadata().partition_columns().to_vec();
        let log_data = snapshot
            .try_log_data()
            .map_err(|e| DeltaError::delta(uri, "reading the active files", e))?;
        // partition key -> (paths, removes)
        let mut partitions: BTreeMap<String, (Vec<String>, Vec<Action>)> = BTreeMap::new();
        for file in log_data {
            let values = file.partition_values_map();
            if !matches(filters, &values) {
                continue;
            }
            let entry = partitions
                .entry(partition_key(&partition_columns, &values))
                .or_default();
            entry.0.push(file.path().into_owned());
            entry.1.push(Action::Remove(file.remove_action(false)));
        }
        if partitions.is_empty() {
            return Ok(table.clone());
        }
        let key = ZKey::new(columns).map_err(|e| DeltaError::InvalidOptions {
            table: uri.to_owned(),
            operation: spec.operation,
            reason: e.to_string(),
        })?;
        let budget = crate::budget::budget();
        let share = budget.bytes() / 2;
        let _reserved = budget.reserve(share).await;
        let run = usize::try_from(run_bytes(share)).unwrap_or(usize::MAX);
        let log_store = table.log_store();
        let mut actions = Vec::new();
        for (partition, (paths, removes)) in partitions {
            let files = paths.len();
            let (schema, mut batches) =
                crate::decode::scan_files(uri, &log_store, &snapshot, paths).await?;
            let mut sort = ExternalSort::new(&schema, key.width(), run);
            while let Some(batch) = batches.next().await {
                let batch = batch.map_err(|e| {
                    DeltaError::delta(uri, "reading the files to z-order", e.into())
                })?;
                let keys = key
                    .keys(&batch)
                    .map_err(|e| DeltaError::delta(uri, "computing z-order keys", e.into()))?;
                sort.push(batch, keys)
                    .map_err(|e| DeltaError::delta(uri, "sorting rows for z-order", e.into()))?;
            }
            drop(batches);
            let schema = sort.schema();
            let sorted = sort
                .finish()
                .map_err(|e| DeltaError::delta(uri, "sorting rows for z-order", e.into()))?;
            let writer = crate::decode::writer(&log_store, &snapshot, schema, spec.target_size);
            let (adds, runs, spilled) = write_sorted(uri, sorted, writer).await?;
            tracing::debug!(
                table = uri,
                partition = %partition,
                files_read = files,
                files_written = adds.len(),
                spilled_runs = runs,
                spilled_bytes = spilled,
                "partition z-ordered"
            );
            actions.extend(removes);
            actions.extend(adds.into_iter().map(Action::Add));
        }
        let (version, _) =
            crate::decode::commit_rewrite(uri, log_store, &snapshot, actions, spec).await?;
        let mut after = table.clone();
        after
            .update_state()
            .await
            .map_err(|e| DeltaError::delta(uri, "reloading after the z-order", e))?;
        tracing::info!(table = uri, version, "z-order committed");
        Ok(after)
    };
    cancellable(cancel, uri, spec.operation, step).await
}
