//! Z-order's rewrite, in bounded memory: every file of each selected partition is read
//! ([`crate::rewrite::decode`]'s deletion-vector-aware scan), its rows sorted by their Z-order key
//! ([`crate::rewrite::zkey`]) with an external sort ([`crate::rewrite::external_sort`]) and written back in files
//! of the target size; the partitions a filter set selects are committed together as one
//! OPTIMIZE commit, as deltalake's Z-order commits them (the next Z-order is scoped by the
//! version of the last one).
//!
//! Owns the memory arithmetic and the parallelism. Partitions are rewritten as tasks of their
//! own, as many at once as the machine has cores. Each reserves, before it reads anything, what
//! its writer holds ([`crate::rewrite::decode::MEMORY_BYTES`]) and a minimum sort run
//! ([`MIN_RUN_BYTES`]); its run then grows in steps of [`GROW_BYTES`] while the rewrite budget
//! has room, up to half the budget for the partition, and spills to local disk when it has not.
//! So small partitions sort in memory side by side, and a partition larger than the budget
//! spills sorted runs instead of holding them. deltalake's Z-order (a DataFusion sort without a
//! memory pool) was measured holding about ten times its input, and with a pool its final merge
//! failed; this is why it is not used.

use std::sync::Arc;

use deltalake::arrow::record_batch::RecordBatch;
use deltalake::kernel::{Action, Add, EagerSnapshot};
use deltalake::logstore::LogStoreRef;
use deltalake::{DeltaTable, DeltaTableError};
use futures::{StreamExt, TryStreamExt};
use tokio::sync::SemaphorePermit;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

use crate::error::DeltaError;
use crate::rewrite::budget::Budget;
use crate::rewrite::content::{LogValues, Tally};
use crate::rewrite::decode::PartitionFiles;
use crate::rewrite::external_sort::{ExternalSort, RunLimit, Sorted};
use crate::rewrite::plan::RewriteSpec;
use crate::rewrite::select::OwnedFilter;
use crate::rewrite::shape::FileShape;
use crate::rewrite::zkey::ZKey;
use crate::run::cancellable;

/// The run every partition is sure of, whatever else holds the budget: below it spill files
/// multiply for nothing.
pub(crate) const MIN_RUN_BYTES: u64 = 32 * 1024 * 1024;

/// How much a run asks the budget for at a time as it grows.
const GROW_BYTES: u64 = 16 * 1024 * 1024;

/// A partition's hold on the rewrite budget: its writer's share and its sort run, grown while
/// the budget has room and given back when the partition is done.
struct Share {
    budget: &'static Budget,
    held: SemaphorePermit<'static>,
    /// What the run may hold now.
    run: u64,
    /// What the run may grow to.
    max_run: u64,
}

impl Share {
    /// Waits for a writer's share and a minimum run; the run may grow to half the budget less
    /// the writer's share.
    async fn reserve(budget: &'static Budget) -> Self {
        let max_run = (budget.bytes() / 2)
            .saturating_sub(crate::rewrite::decode::MEMORY_BYTES)
            .max(MIN_RUN_BYTES);
        let held = budget
            .reserve(crate::rewrite::decode::MEMORY_BYTES + MIN_RUN_BYTES)
            .await;
        Share {
            budget,
            held,
            run: MIN_RUN_BYTES,
            max_run,
        }
    }
}

impl RunLimit for Share {
    fn allow(&mut self, bytes: usize) -> bool {
        let bytes = u64::try_from(bytes).unwrap_or(u64::MAX);
        while bytes >= self.run {
            let more = GROW_BYTES.min(self.max_run.saturating_sub(self.run));
            if more == 0 {
                return false;
            }
            match self.budget.try_reserve(more) {
                Some(permit) => {
                    self.held.merge(permit);
                    self.run += more;
                }
                None => return false,
            }
        }
        true
    }
}

/// Batches in flight between the merge and the writer.
const WRITE_QUEUE: usize = 4;

/// Writes `sorted`'s rows through `writer`, encoding on another task while this one merges,
/// so the two CPU-heavy halves (merge and gather; Parquet encoding and zstd) use two cores.
/// Returns the files' `add` actions and the sort's spill figures (runs, bytes).
async fn write_sorted(
    uri: &str,
    mut sorted: Sorted,
    mut writer: PartitionFiles,
    read: Tally,
) -> Result<(Vec<Add>, usize, u64), DeltaError> {
    let (sender, mut receiver) = tokio::sync::mpsc::channel::<RecordBatch>(WRITE_QUEUE);
    // aborted if this future is dropped (a cancelled job): no file is written after it
    let encoder = AbortOnDropHandle::new(tokio::spawn(async move {
        while let Some(batch) = receiver.recv().await {
            writer.write(batch).await?;
        }
        writer.close(read).await
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

/// What rewriting one partition needs, owned, so it runs on a task of its own.
struct PartitionTask {
    uri: String,
    log_store: LogStoreRef,
    snapshot: EagerSnapshot,
    key: Arc<ZKey>,
    output: FileShape,
    /// The files written are the table's clustering (`clusteringProvider`).
    clustering: bool,
}

impl PartitionTask {
    /// Z-orders `files` (path, `remove` action and partition values as the log spells them,
    /// each) of `partition` into new files and returns the removes followed by the adds.
    async fn run(
        self,
        partition: String,
        files: Vec<(String, Action, LogValues)>,
    ) -> Result<Vec<Action>, DeltaError> {
        let uri = self.uri.as_str();
        let values = crate::rewrite::content::shared_values(uri, files.iter().map(|(_, _, v)| v))?;
        let (paths, mut actions): (Vec<String>, Vec<Action>) = files
            .into_iter()
            .map(|(path, remove, _)| (path, remove))
            .unzip();
        let files = paths.len();
        // held until the partition's files are written: sorted rows that fitted in memory are
        // held until then
        let mut share = Share::reserve(crate::rewrite::budget::budget()).await;
        let (schema, mut batches) =
            crate::rewrite::decode::scan_files(uri, &self.log_store, &self.snapshot, paths).await?;
        let partition_columns = self.snapshot.metadata().partition_columns().to_vec();
        let mut read = Tally::of_reads(&schema, &partition_columns);
        let mut sort = ExternalSort::new(&schema, self.key.width(), &mut share);
        while let Some(batch) = batches.next().await {
            let batch = batch
                .map_err(|e| DeltaError::delta(uri, "reading the files to z-order", e.into()))?;
            read.add(&batch)
                .map_err(|e| crate::rewrite::decode::tally_failed(uri, e))?;
            let keys = self
                .key
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
        let writer = PartitionFiles::new(
            uri,
            &self.log_store,
            &self.snapshot,
            schema,
            values,
            self.output,
        )?;
        let (adds, runs, spilled) = write_sorted(uri, sorted, writer, read).await?;
        tracing::debug!(
            table = uri,
            partition = %partition,
            files_read = files,
            files_written = adds.len(),
            spilled_runs = runs,
            spilled_bytes = spilled,
            "partition z-ordered"
        );
        let provider = self
            .clustering
            .then(|| crate::rewrite::liquid::PROVIDER.to_owned());
        actions.extend(adds.into_iter().map(|mut add| {
            add.clustering_provider.clone_from(&provider);
            Action::Add(add)
        }));
        Ok(actions)
    }
}

/// Z-orders every file of the partitions `filters` select on `columns`, from `table`'s
/// snapshot, and commits them as one rewrite. Returns the table at the new version (unchanged
/// when the filters select no file).
pub(crate) async fn rewrite(
    uri: &str,
    table: &DeltaTable,
    spec: &RewriteSpec,
    columns: &[String],
    clustering: bool,
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
        let key = Arc::new(ZKey::new(columns).map_err(|e| DeltaError::InvalidOptions {
            table: uri.to_owned(),
            operation: spec.operation,
            reason: e.to_string(),
        })?);
        let parallel = std::thread::available_parallelism()
            .map_or(1, usize::from)
            .min(partitions.len());
        let log_store = table.log_store();
        // each partition on a task of its own, so they use separate cores; aborted when this
        // future is dropped (a cancelled job), and results kept in partition order
        let tasks: Vec<_> = partitions
            .into_iter()
            .map(|(partition, files)| {
                let task = PartitionTask {
                    uri: uri.to_owned(),
                    log_store: log_store.clone(),
                    snapshot: snapshot.clone(),
                    key: Arc::clone(&key),
                    output: spec.output,
                    clustering,
                };
                async move {
                    let handle = AbortOnDropHandle::new(tokio::spawn(task.run(partition, files)));
                    handle.await.map_err(|e| {
                        DeltaError::delta(
                            uri,
                            "z-ordering a partition",
                            DeltaTableError::Generic(format!("the partition's task ended: {e}")),
                        )
                    })?
                }
            })
            .collect();
        let rewritten: Vec<Vec<Action>> = futures::stream::iter(tasks)
            .buffered(parallel)
            .try_collect()
            .await?;
        let actions = rewritten.into_iter().flatten().collect();
        crate::rewrite::decode::commit_and_reload(uri, table, &snapshot, actions, spec, "z-order")
            .await
    };
    cancellable(cancel, uri, spec.operation, step).await
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1024 * 1024;

    fn budget(mib: u64) -> &'static Budget {
        Box::leak(Box::new(Budget::new(mib * 1024 * 1024)))
    }

    #[tokio::test]
    async fn a_run_grows_while_the_budget_has_room_up_to_half_of_it() {
        let budget = budget(512);
        let mut first = Share::reserve(budget).await;
        assert!(first.allow(31 * MIB), "within the minimum run");
        assert!(first.allow(100 * MIB), "grown from the free budget");
        assert!(
            !first.allow(128 * MIB),
            "half the budget less the writer's share is the most a run holds"
        );
        // the first holds 128 + 128 MiB; a second partition gets its minimum and the rest
        let mut second = Share::reserve(budget).await;
        assert!(second.allow(127 * MIB));
        assert!(budget.try_reserve(1).is_none(), "the budget is all held");
        drop(first);
        assert!(
            budget.try_reserve(256 * 1024 * 1024).is_some(),
            "given back when done"
        );
    }

    #[tokio::test]
    async fn a_run_spills_at_its_minimum_when_the_budget_is_held_elsewhere() {
        let budget = budget(512);
        let _other = budget.reserve(512 * 1024 * 1024 - 160 * 1024 * 1024).await;
        let mut share = Share::reserve(budget).await;
        assert!(share.allow(31 * MIB));
        assert!(!share.allow(32 * MIB), "no room to grow: spill");
    }
}
