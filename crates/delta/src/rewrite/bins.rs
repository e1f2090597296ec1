//! Compaction of the partitions one filter set selects: bin-packing their small files and
//! rewriting each bin as one commit, by copying column chunks when the bin qualifies
//! ([`crate::rewrite::splice`]) and by decoding otherwise ([`crate::rewrite::decode`]).
//!
//! Owns the bins and what runs them. Bins are packed as deltalake's OPTIMIZE packs them: per
//! partition, the small files in log order, contiguous, up to the target size; a bin of one file
//! is left alone. Each bin commits on its own (removes and adds, `dataChange: false`, the run's
//! marker) so the log says which inputs became which outputs, and the rewrite guard checks
//! every commit afterwards ([`crate::rewrite::execute::record_commits`]). Bins run in parallel up to the
//! cores, and only while their estimated memory fits in the replica's rewrite budget
//! ([`crate::rewrite::budget`]).

use std::collections::HashMap;
use std::sync::Arc;

use deltalake::kernel::{Action, Add, EagerSnapshot};
use deltalake::logstore::LogStoreRef;
use deltalake::{DeltaTable, ObjectStore, Path};
use futures::{StreamExt, TryStreamExt};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;
use uuid::Uuid;

use crate::error::DeltaError;
use crate::log::commit::CommitRules;
use crate::rewrite::content::{check, shared_values, LogValues, Strictness, Tally};
use crate::rewrite::decode::{commit_rewrite, rewrite_files, tally_failed};
use crate::rewrite::merged_stats::{self, Naming};
use crate::rewrite::plan::RewriteSpec;
use crate::rewrite::select::OwnedFilter;
use crate::rewrite::splice::{self, Input};
use crate::run::cancellable;

/// Footers read at once while deciding how a bin is rewritten.
const FOOTERS_AT_ONCE: usize = 16;

/// What a copied bin holds in memory besides its largest column chunk: a fetch span, the
/// upload's parts in flight and the one being filled.
const COPY_OVERHEAD_BYTES: u64 = splice::FETCH_SPAN_BYTES + 4 * 5 * 1024 * 1024;

/// One small file of a bin, as the log describes it.
#[derive(Debug, Clone)]
struct BinFile {
    path: String,
    object_path: Path,
    size: u64,
    stats: Option<String>,
    has_deletion_vector: bool,
    partition_values: HashMap<String, Option<String>>,
    remove: Action,
}

/// A bin: small files of one partition, in log order.
#[derive(Debug)]
struct Bin {
    partition: String,
    files: Vec<BinFile>,
}

impl Bin {
    fn bytes(&self) -> u64 {
        self.files.iter().map(|f| f.size).sum()
    }
}

/// Packs files (already in log order) into bins of at most `target` bytes, as deltalake's
/// OPTIMIZE packs them: contiguous, a file that does not fit starts the next bin. Bins of one
/// file are dropped, as rewriting a file alone compacts nothing. The planning of a job's tasks
/// packs with this too, so a task's files make the same bins when the task runs.
pub(crate) fn pack<T>(files: Vec<T>, size: impl Fn(&T) -> u64, target: u64) -> Vec<Vec<T>> {
    let mut bins: Vec<Vec<T>> = Vec::new();
    let mut current: Vec<T> = Vec::new();
    let mut bytes = 0u64;
    for file in files {
        let file_size = size(&file);
        if !current.is_empty() && bytes + file_size > target {
            bins.push(std::mem::take(&mut current));
            bytes = 0;
        }
        bytes += file_size;
        current.push(file);
    }
    if !current.is_empty() {
        bins.push(current);
    }
    bins.retain(|bin| bin.len() > 1);
    bins
}

/// Compacts the small files (those `spec` takes) of the partitions `filters` select,
/// from `table`'s snapshot. Returns the table refreshed after the bins' commits.
pub(crate) async fn compact(
    uri: &str,
    table: &DeltaTable,
    spec: &RewriteSpec,
    filters: &[OwnedFilter],
    cancel: &CancellationToken,
) -> Result<DeltaTable, DeltaError> {
    let snapshot = crate::rewrite::select::planned_snapshot(uri, table)?;
    let by_partition =
        crate::rewrite::select::select_files(uri, &snapshot, filters, |file, values| {
            let size = u64::try_from(file.size()).unwrap_or(u64::MAX);
            spec.takes(file).then(|| BinFile {
                path: file.path().into_owned(),
                object_path: file.object_store_path(),
                partition_values: values,
                size,
                stats: file.stats(),
                has_deletion_vector: file.deletion_vector_descriptor().is_some(),
                remove: crate::rewrite::select::remove_of(file),
            })
        })?;
    let target = spec.output.target_size.get();
    let bins: Vec<Bin> = by_partition
        .into_iter()
        .flat_map(|(partition, files)| {
            pack(files, |f| f.size, target)
                .into_iter()
                .map(move |files| Bin {
                    partition: partition.clone(),
                    files,
                })
        })
        .collect();
    if bins.is_empty() {
        return Ok(table.clone());
    }
    let rules = CommitRules::of(uri, table.log_store().as_ref(), &snapshot).await?;
    let context = Arc::new(BinContext::new(uri, table, snapshot, spec, rules));
    let parallel = std::thread::available_parallelism().map_or(1, usize::from);
    // each bin on a task of its own, so bins decode and encode on separate cores (futures
    // polled by one task share its thread: a 3-bin compaction ran 1.07-1.33x deltalake's
    // OPTIMIZE so, and faster once spawned; BENCHMARKS.md); aborted when this future is
    // dropped (a cancelled job), as the bins' futures were. Collected first: a stream over a
    // closure's futures is not provably `Send` here
    let runs: Vec<_> = bins
        .into_iter()
        .map(|bin| {
            let context = Arc::clone(&context);
            async move {
                let run =
                    AbortOnDropHandle::new(tokio::spawn(async move { context.run(bin).await }));
                run.await.map_err(|e| {
                    DeltaError::delta(
                        uri,
                        "compacting a bin",
                        deltalake::DeltaTableError::Generic(format!("the bin's task ended: {e}")),
                    )
                })?
            }
        })
        .collect();
    let runs = futures::stream::iter(runs)
        .buffer_unordered(parallel)
        .try_collect::<Vec<()>>();
    cancellable(cancel, uri, spec.operation, runs).await?;
    let mut after = table.clone();
    after
        .update_state()
        .await
        .map_err(|e| DeltaError::delta(uri, "reloading after the compaction", e))?;
    Ok(after)
}

/// What every bin of one run shares.
struct BinContext {
    uri: String,
    log_store: LogStoreRef,
    store: Arc<dyn ObjectStore>,
    /// The snapshot the bins were planned and are read on.
    snapshot: EagerSnapshot,
    /// The version the last bin committed (the next commit's base) and what the table's
    /// features ask of that commit.
    committed: tokio::sync::Mutex<(u64, CommitRules)>,
    spec: RewriteSpec,
    naming: Naming,
}

impl BinContext {
    fn new(
        uri: &str,
        table: &DeltaTable,
        snapshot: EagerSnapshot,
        spec: &RewriteSpec,
        rules: CommitRules,
    ) -> Self {
        let log_store = table.log_store();
        let naming =
            if crate::rewrite::column_mapping::is_mapped(snapshot.metadata().configuration()) {
                Naming::Physical
            } else {
                Naming::Logical
            };
        BinContext {
            uri: uri.to_owned(),
            store: log_store.object_store(None),
            log_store,
            committed: tokio::sync::Mutex::new((snapshot.version(), rules)),
            snapshot,
            spec: spec.clone(),
            naming,
        }
    }

    /// Rewrites and commits one bin, holding its share of the memory budget while it runs.
    async fn run(&self, bin: Bin) -> Result<(), DeltaError> {
        let uri = self.uri.as_str();
        // the values every file added carries, as the log spells them
        let values = shared_values(uri, bin.files.iter().map(|f| &f.partition_values))?;
        let decision = self.decide(&bin).await?;
        let estimate = match &decision {
            Rewrite::Copy { inputs, .. } => {
                let largest_chunk = inputs
                    .iter()
                    .flat_map(|i| i.metadata.row_groups().iter().flat_map(|rg| rg.columns()))
                    .map(|c| u64::try_from(c.compressed_size()).unwrap_or(0))
                    .max()
                    .unwrap_or(0);
                COPY_OVERHEAD_BYTES + largest_chunk
            }
            Rewrite::Decode(_) => crate::rewrite::decode::MEMORY_BYTES,
        };
        let _reserved = crate::rewrite::budget::budget().reserve(estimate).await;
        let (mut actions, how) = match decision {
            Rewrite::Copy { inputs, stats } => {
                let add = self.copy(&bin, &inputs, stats, values).await?;
                (vec![Action::Add(add)], "copied column chunks".to_owned())
            }
            Rewrite::Decode(reason) => {
                let paths = bin.files.iter().map(|f| f.path.clone()).collect();
                let adds = rewrite_files(
                    uri,
                    &self.log_store,
                    &self.snapshot,
                    paths,
                    values,
                    self.spec.output,
                )
                .await?;
                (
                    adds.into_iter().map(Action::Add).collect(),
                    format!("decoded: {reason}"),
                )
            }
        };
        let files = bin.files.len();
        let bytes = bin.bytes();
        actions.splice(0..0, bin.files.into_iter().map(|f| f.remove));
        // bins are written in parallel and committed one after another, each on the version
        // the previous one left, as deltalake's OPTIMIZE does
        let version = {
            let mut committed = self.committed.lock().await;
            let (base, rules) = &mut *committed;
            let landed = commit_rewrite(
                uri,
                self.log_store.as_ref(),
                *base,
                rules,
                actions,
                &self.spec,
            )
            .await?;
            *base = landed.version;
            rules.row_id_high_water_mark = landed.row_id_high_water_mark;
            landed.version
        };
        tracing::info!(
            table = uri,
            partition = bin.partition,
            files,
            bytes,
            version,
            how,
            "compaction bin committed"
        );
        Ok(())
    }

    /// Whether `bin` is copied or decoded, and what copying it needs.
    async fn decide(&self, bin: &Bin) -> Result<Rewrite, DeltaError> {
        if bin.files.iter().any(|f| f.has_deletion_vector) {
            return Ok(Rewrite::Decode("a file carries a deletion vector".into()));
        }
        if crate::rewrite::widened::needs_widened_scan(&self.uri, &self.snapshot)? {
            return Ok(Rewrite::Decode(
                "type widening: files of older types are converted to the current ones".into(),
            ));
        }
        if crate::rewrite::row_ids::row_tracking(&self.uri, &self.snapshot)?.is_some() {
            return Ok(Rewrite::Decode(
                "row tracking: the rows' ids are written into the new file".into(),
            ));
        }
        // a file under the copy threshold holds only row groups under it: no footer to read
        if let Some(small) = bin
            .files
            .iter()
            .find(|f| f.size < splice::MIN_COPY_ROW_GROUP_BYTES)
        {
            return Ok(Rewrite::Decode(format!(
                "{} has {} bytes, so its row groups are under the {} copied",
                small.path,
                small.size,
                splice::MIN_COPY_ROW_GROUP_BYTES
            )));
        }
        let mut parsed = Vec::with_capacity(bin.files.len());
        for file in &bin.files {
            match file.stats.as_deref().map(serde_json::from_str::<Value>) {
                Some(Ok(stats)) => parsed.push(stats),
                _ => {
                    return Ok(Rewrite::Decode(format!(
                        "{} has no readable statistics",
                        file.path
                    )))
                }
            }
        }
        let stats = match merged_stats::merge(&parsed, self.snapshot.schema().as_ref(), self.naming)
        {
            Ok(stats) => stats,
            Err(reason) => return Ok(Rewrite::Decode(reason)),
        };
        let reads: Vec<_> = bin
            .files
            .iter()
            .map(|file| {
                splice::read_footer(Arc::clone(&self.store), file.object_path.clone(), file.size)
            })
            .collect();
        let inputs: Vec<Input> = futures::stream::iter(reads)
            .buffered(FOOTERS_AT_ONCE)
            .try_collect()
            .await
            .map_err(|e| DeltaError::delta(&self.uri, "reading Parquet footers", e.into()))?;
        if let Some(reason) = splice::not_copyable(&inputs) {
            return Ok(Rewrite::Decode(reason));
        }
        for (input, stats) in inputs.iter().zip(&parsed) {
            if stats.get("numRecords").and_then(Value::as_u64) != Some(splice::rows(input)) {
                return Ok(Rewrite::Decode(format!(
                    "the statistics of {} count other rows than its footer",
                    input.path
                )));
            }
        }
        Ok(Rewrite::Copy { inputs, stats })
    }

    /// Writes the bin's files as one by copying their column chunks; returns its `add`, once
    /// the content guard found its merged statistics describe the written footer's chunks
    /// (the chunks themselves are the inputs' bytes: their values hold by construction).
    async fn copy(
        &self,
        bin: &Bin,
        inputs: &[Input],
        stats: Value,
        values: LogValues,
    ) -> Result<Add, DeltaError> {
        let uri = self.uri.as_str();
        let first = &bin.files[0];
        let directory = first.path.rsplit_once('/').map(|(dir, _)| dir);
        let name = format!("part-00000-{}-c000.parquet", Uuid::new_v4());
        let relative = match directory {
            Some(dir) => format!("{dir}/{name}"),
            None => name,
        };
        // the object path a reader of the log derives from the add's (decoded) path, as
        // `LogicalFileView::object_store_path` does; the add records that path's encoding
        let output = Path::parse(&relative).unwrap_or_else(|_| Path::from(relative.as_str()));
        let (size, footer) = splice::write(&self.store, inputs, &output)
            .await
            .map_err(|e| DeltaError::delta(uri, "writing a copied file", e))?;
        let expected: u64 = inputs.iter().map(splice::rows).sum();
        let written = u64::try_from(footer.file_metadata().num_rows()).unwrap_or(0);
        if written != expected {
            return Err(DeltaError::delta(
                uri,
                "checking a copied file",
                deltalake::DeltaTableError::generic(format!(
                    "the copied file {output} holds {written} rows, its inputs {expected}; \
                     nothing was committed and the file is unreferenced (VACUUM removes it)"
                )),
            ));
        }
        let written = Tally::of_footer(&footer).map_err(|e| tally_failed(uri, e))?;
        let adds = [Add {
            path: output.to_string(),
            partition_values: values.clone(),
            size: i64::try_from(size).unwrap_or(i64::MAX),
            modification_time: chrono::Utc::now().timestamp_millis(),
            data_change: false,
            stats: Some(stats.to_string()),
            tags: None,
            deletion_vector: None,
            base_row_id: None,
            default_row_commit_version: None,
            clustering_provider: None,
        }];
        #[cfg(test)]
        let adds = {
            let mut adds = adds;
            crate::rewrite::content::fault::adds(
                &mut adds,
                written.first_column().unwrap_or_default(),
            );
            adds
        };
        // the footer and the merged statistics both name columns as the file does
        check(
            uri,
            &values,
            None,
            written,
            &adds,
            Strictness::Bounds,
            &str::to_owned,
        )?;
        let [add] = adds;
        Ok(add)
    }
}

/// How one bin is rewritten.
enum Rewrite {
    Copy { inputs: Vec<Input>, stats: Value },
    Decode(String),
}

#[cfg(test)]
mod tests {
    use super::*;
    use deltalake::kernel::Remove;

    fn file(size: u64) -> BinFile {
        BinFile {
            path: format!("{size}.parquet"),
            object_path: Path::from(format!("{size}.parquet")),
            size,
            stats: None,
            has_deletion_vector: false,
            partition_values: HashMap::new(),
            remove: Action::Remove(Remove {
                path: format!("{size}.parquet"),
                data_change: false,
                deletion_timestamp: None,
                extended_file_metadata: None,
                partition_values: None,
                size: None,
                tags: None,
                deletion_vector: None,
                base_row_id: None,
                default_row_commit_version: None,
            }),
        }
    }

    fn sizes(bins: &[Vec<BinFile>]) -> Vec<Vec<u64>> {
        bins.iter()
            .map(|b| b.iter().map(|f| f.size).collect())
            .collect()
    }

    #[test]
    fn bins_are_contiguous_up_to_the_target_and_never_single() {
        let files = [40, 50, 30, 90, 10, 5].map(file).to_vec();
        assert_eq!(
            sizes(&pack(files, |f| f.size, 100)),
            vec![vec![40, 50], vec![90, 10],]
        );
        let files = [60, 60, 60].map(file).to_vec();
        assert!(pack(files, |f| f.size, 100).is_empty());
    }
}
