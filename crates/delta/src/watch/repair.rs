//! Repair of stale commits: restoring exactly what a writer meant when its snapshot predated a
//! commit that removed the same files ([`crate::watch::stale`]).
//!
//! A stale commit W removed files F that an earlier commit had already removed. The log says
//! which inputs every rewrite turned into which outputs: a rewrite's bins never span partitions,
//! and tablekeeper commits each compaction bin on its own ([`crate::rewrite::execute`]); another
//! engine's rewrite is taken one partition at a time. One algorithm repairs every kind, undoing
//! rewrite bins; only where it starts differs:
//! - W changed data (an overwrite, a delete): it meant the rows of F gone, but they live on in
//!   the outputs of the rewrite R that removed F first. Undo R's bins that took a file of F.
//! - W is a rewrite itself (another engine's compaction, Z-order or purge from an old snapshot,
//!   or tablekeeper's own): the rows of F are in R's outputs and in W's, twice. W changed no
//!   data by intent, so undo W's bins that took a file of F.
//!
//! Undoing bins is one commit that
//! - removes the files now holding their rows: the bins' outputs, or, when a later rewrite (by
//!   anyone) consumed those outputs in turn, that rewrite's outputs (chains are followed to the
//!   active files, and every bin on the way is undone with them);
//! - adds back, unchanged (same path, statistics and modification time), every input of the
//!   undone bins that no undone bin produced, except the files stale commits removed. They are
//!   still on storage: a VACUUM keeps what versions inside its window reference, and
//!   tablekeeper's VACUUM refuses while a stale commit waits for its repair.
//!
//! Bins the stale commit did not touch are kept. Both sides are committed with `dataChange: false`:
//! the repair makes the table what its data-changing commits already declared, so streaming
//! readers have nothing new to read. The commit (operation `RESTORE`, marker operation `repair`
//! naming W) is written by the commit writer every rewrite uses ([`crate::log::commit`]: row
//! tracking, in-commit timestamps, no `metaData`; a file added back keeps its own row ids), and
//! checked like every rewrite: each file it removes was active before it, each file
//! it adds was not. When an exact repair is impossible — an output was since changed by a
//! data-changing commit, a file was first removed by a data-changing commit, an input was
//! vacuumed, a chain runs through another repair — the plan says so and nothing is written: the
//! owner restores by hand (the plan names the versions).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::time::{Duration, Instant};

use deltalake::kernel::{Add, Remove};
use deltalake::DeltaTable;
use futures::future::BoxFuture;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::error::DeltaError;
use crate::log::commit::{write_commit, CommitRules, LogCommit};
use crate::log::read::{list_log, read_commits, Commit};
use crate::open::open_table_at;
use crate::prepare::{prepare, Prepared};
use crate::probe::presence::exists;
use crate::report::{OpReport, PlannedFile, RepairPlan};
use crate::rewrite::guard::{check_commit, Rows, Verdict};
use crate::run::{cancellable, run_commits, run_marker};
use crate::snapshot::{active_set, ActiveFile};
use crate::watch::stale::{Detection, StaleWatch, DEFAULT_STALE_WATCH};
use tablekeeper_vocab::{Operation, StaleKind};

const OP: Operation = Operation::Repair;

/// Stale writes repaired in one run, at most; each is planned on the table as the previous
/// repair left it.
const MAX_REPAIRS_PER_RUN: usize = 16;

/// Options of one repair run.
#[derive(Debug, Clone)]
pub struct RepairOptions {
    /// Print the plans, change nothing.
    pub dry_run: bool,
    /// How far back stale writes are looked for (the probe's watch window).
    pub stale_watch: Duration,
}

impl Default for RepairOptions {
    fn default() -> Self {
        RepairOptions {
            dry_run: false,
            stale_watch: DEFAULT_STALE_WATCH,
        }
    }
}

/// Finds the pending stale writes of `table_uri` and repairs each exactly (or only plans, with
/// `dry_run`). The report lists every plan in `repairs`; a plan that cannot be exact is refused
/// and fails the run after the others were repaired.
///
/// The future is boxed here, once, so callers can spawn it without proving `Send` themselves.
pub fn repair<'a>(
    table_uri: &'a str,
    options: &'a RepairOptions,
    cancel: &'a CancellationToken,
) -> BoxFuture<'a, Result<OpReport, DeltaError>> {
    Box::pin(crate::run::unwound(
        table_uri,
        OP,
        run(table_uri, options, cancel),
    ))
}

async fn run(
    table_uri: &str,
    options: &RepairOptions,
    cancel: &CancellationToken,
) -> Result<OpReport, DeltaError> {
    let started = Instant::now();
    let uri = table_uri;
    let run_id = Uuid::new_v4().to_string();
    let mut report: Option<OpReport> = None;
    let mut done: BTreeSet<i64> = BTreeSet::new();
    for _ in 0..MAX_REPAIRS_PER_RUN {
        let Prepared {
            table,
            version,
            files,
            ..
        } = prepare(uri, OP, cancel).await?;
        let report = report.get_or_insert_with(|| {
            OpReport::new(
                OP,
                uri,
                i64::try_from(version).unwrap_or(i64::MAX),
                options.dry_run,
            )
        });
        let lineage = cancellable(
            cancel,
            uri,
            OP,
            Lineage::read(&table, uri, version, options),
        )
        .await?;
        let Some(detection) = lineage
            .watch
            .detections()
            .find(|d| d.summary.pending() && !done.contains(&d.summary.version))
            .cloned()
        else {
            break;
        };
        done.insert(detection.summary.version);
        let (mut plan, adds) = cancellable(
            cancel,
            uri,
            OP,
            plan_repair(&table, uri, &lineage, &detection, &files),
        )
        .await?;
        if plan.refused.is_none() && !options.dry_run {
            let commit = cancellable(
                cancel,
                uri,
                OP,
                commit_repair(&table, uri, &run_id, &plan, adds, &files),
            )
            .await?;
            plan.committed_version = Some(i64::try_from(commit.version).unwrap_or(i64::MAX));
            report
                .commits
                .push(i64::try_from(commit.version).unwrap_or(i64::MAX));
            report.version_after = report.commits.last().copied();
            report.files_removed += plan.remove.len() as u64;
            report.files_added += plan.re_add.len() as u64;
            report.bytes_removed += plan.remove.iter().map(|f| f.size).sum::<u64>();
            report.bytes_added += plan.re_add.iter().map(|f| f.size).sum::<u64>();
            tracing::info!(
                table = uri,
                stale_write = plan.stale_write,
                version = commit.version,
                removed = plan.remove.len(),
                re_added = plan.re_add.len(),
                stale_rows = ?plan.stale_rows,
                "repaired a stale write"
            );
        }
        report.repairs.push(plan);
        if options.dry_run {
            // planning the next one needs this one committed; show the rest as found
            continue;
        }
    }
    let mut report = report.ok_or_else(|| DeltaError::Internal {
        table: uri.to_owned(),
        reason: "repair finished without reading the table".into(),
    })?;
    if report.repairs.is_empty() {
        report.skipped = Some("no stale write is waiting for a repair".into());
    }
    if let Some(refused) = report.repairs.iter().find(|p| p.refused.is_some()) {
        if !options.dry_run {
            return Err(DeltaError::RepairRefused {
                table: uri.to_owned(),
                stale_write: refused.stale_write,
                reason: refused.refused.clone().unwrap_or_default(),
            });
        }
    }
    Ok(report.finish(started))
}

/// A bin of a rewrite: the commit and the partition it rewrote. Bins never span partitions; a
/// tablekeeper compaction commits each bin on its own, a Z-order rewrites each partition as one
/// bin in one commit ([`crate::rewrite::execute`]); another engine's commit of several bins in
/// one partition counts as one bin here, which undoes more files but the same rows.
type Bin = (u64, String);

/// Who made and consumed each file, from the rewrite commits on disk, whoever wrote them.
#[derive(Debug)]
struct Lineage {
    watch: StaleWatch,
    /// Bin → (inputs, outputs).
    bins: BTreeMap<Bin, (Vec<String>, Vec<String>)>,
    /// File → the bins that removed it, in version order (more than one when a stale rewrite
    /// removed it again).
    consumed_by: HashMap<String, Vec<Bin>>,
    /// File → the bin that produced it.
    produced_by: HashMap<String, Bin>,
    /// File → a commit that removed it and is not a rewrite (it changed data).
    removed_by_other: HashMap<String, u64>,
}

/// A partition's identity, from an action's partition values.
fn partition_of(values: &std::collections::HashMap<String, Option<String>>) -> String {
    let sorted: BTreeMap<&String, &Option<String>> = values.iter().collect();
    format!("{sorted:?}")
}

impl Lineage {
    async fn read(
        table: &DeltaTable,
        uri: &str,
        latest: u64,
        options: &RepairOptions,
    ) -> Result<Lineage, DeltaError> {
        let listing = list_log(table.object_store().as_ref(), uri).await?;
        let versions: Vec<u64> = listing.commits.range(..=latest).map(|(v, _)| *v).collect();
        let mut lineage = Lineage {
            watch: StaleWatch::new(options.stale_watch),
            bins: BTreeMap::new(),
            consumed_by: HashMap::new(),
            produced_by: HashMap::new(),
            removed_by_other: HashMap::new(),
        };
        for (_, commit) in read_commits(table.log_store().as_ref(), uri, versions).await? {
            if let Some(commit) = commit {
                lineage.absorb(&commit);
            }
        }
        lineage.watch.prune();
        Ok(lineage)
    }

    fn absorb(&mut self, commit: &Commit) {
        if let Some(at) = commit.committed_ms() {
            self.watch.absorb(commit, at);
        }
        if commit.is_rewrite() {
            for remove in &commit.removes {
                let bin = (commit.version, partition_of(&remove.partition_values));
                self.consumed_by
                    .entry(remove.path.clone())
                    .or_default()
                    .push(bin.clone());
                self.bins
                    .entry(bin)
                    .or_default()
                    .0
                    .push(remove.path.clone());
            }
            for add in &commit.adds {
                let bin = (commit.version, partition_of(&add.partition_values));
                self.produced_by.insert(add.path.clone(), bin.clone());
                self.bins.entry(bin).or_default().1.push(add.path.clone());
            }
        } else {
            for remove in &commit.removes {
                self.removed_by_other
                    .insert(remove.path.clone(), commit.version);
            }
        }
    }

    /// The bin of the commit at `version` that removed `path`.
    fn consumer(&self, path: &str, version: u64) -> Option<&Bin> {
        self.consumed_by.get(path)?.iter().find(|b| b.0 == version)
    }

    /// The first bin after `version` that removed `path` (the rewrite that took a file produced
    /// at `version`).
    fn first_consumer_after(&self, path: &str, version: u64) -> Option<&Bin> {
        self.consumed_by.get(path)?.iter().find(|b| b.0 > version)
    }
}

/// Plans the repair of one stale write on the table as it is now; returns the plan and the add
/// actions of the files it adds back (empty when refused).
async fn plan_repair(
    table: &DeltaTable,
    uri: &str,
    lineage: &Lineage,
    detection: &Detection,
    files: &[ActiveFile],
) -> Result<(RepairPlan, Vec<Add>), DeltaError> {
    let w = detection.summary.version;
    let mut plan = RepairPlan {
        stale_write: w,
        rewrites: Vec::new(),
        remove: Vec::new(),
        re_add: Vec::new(),
        rows_removed: None,
        rows_re_added: None,
        stale_rows: None,
        refused: None,
        committed_version: None,
    };
    let active: HashMap<&str, &ActiveFile> = files.iter().map(|f| (f.path.as_str(), f)).collect();
    let undo = match undo_bins(lineage, detection, &active) {
        Ok(undo) => undo,
        Err(refusal) => {
            plan.refused = Some(refusal);
            return Ok((plan, Vec::new()));
        }
    };
    plan.rewrites = undo
        .bins
        .iter()
        .map(|b| i64::try_from(b.0).unwrap_or(i64::MAX))
        .collect::<BTreeSet<i64>>()
        .into_iter()
        .collect();
    if let Some(refusal) = unrestorable(table, uri, &undo.re_add, &active, w).await? {
        plan.refused = Some(refusal);
        return Ok((plan, Vec::new()));
    }

    for target in &undo.targets {
        if let Some(file) = active.get(target.as_str()) {
            plan.remove.push(PlannedFile {
                path: target.clone(),
                size: file.size,
                rows: file.live_rows(),
            });
        }
    }
    let adds = original_adds(uri, lineage, &undo.re_add).await?;
    for add in adds.values() {
        let file = PlannedFile {
            path: add.path.clone(),
            size: u64::try_from(add.size).unwrap_or(0),
            rows: add_rows(add),
        };
        plan.re_add.push(file);
    }
    let sum = |files: &[PlannedFile]| -> Option<u64> { files.iter().map(|f| f.rows).sum() };
    plan.rows_removed = sum(&plan.remove);
    plan.rows_re_added = sum(&plan.re_add);
    plan.stale_rows = plan
        .rows_removed
        .zip(plan.rows_re_added)
        .map(|(removed, re_added)| removed.saturating_sub(re_added));
    Ok((plan, adds.into_values().collect()))
}

/// What undoing a stale write takes: the bins undone, the active files holding their rows
/// (removed by the repair) and the inputs added back.
#[derive(Debug)]
struct Undo {
    bins: BTreeSet<Bin>,
    targets: BTreeSet<String>,
    re_add: BTreeSet<String>,
}

/// The bins to undo for `detection` and what that removes and adds back, from the log alone; or
/// why no exact repair exists (the refusal, naming the versions to restore by hand).
fn undo_bins(
    lineage: &Lineage,
    detection: &Detection,
    active: &HashMap<&str, &ActiveFile>,
) -> Result<Undo, String> {
    let w = detection.summary.version;
    if detection.summary.over_repair {
        return Err(format!(
            "version {w} removed files a repair commit had already replaced ({:?}); restore the \
             table by hand from its history",
            detection.summary.rewrite_versions
        ));
    }
    let mut bins = starting_bins(lineage, detection)?;
    let targets = follow_to_active(lineage, &mut bins, active, w)?;

    // add back every input of the undone bins that none of them produced, minus what stale
    // commits removed (their rows are meant gone, or live on elsewhere)
    let excluded: HashSet<&String> = lineage
        .watch
        .detections()
        .flat_map(|d| d.removed.keys())
        .collect();
    let undone_bins: Vec<&(Vec<String>, Vec<String>)> =
        bins.iter().filter_map(|b| lineage.bins.get(b)).collect();
    let produced: HashSet<&String> = undone_bins.iter().flat_map(|(_, out)| out).collect();
    let re_add: BTreeSet<String> = undone_bins
        .iter()
        .flat_map(|(inputs, _)| inputs)
        .filter(|input| !produced.contains(input) && !excluded.contains(input))
        .cloned()
        .collect();
    Ok(Undo {
        bins,
        targets,
        re_add,
    })
}

/// Where undoing starts: for a stale rewrite its own bins that took a stale-removed file, for a
/// stale data write the rewrite bins that had taken them while they were active.
fn starting_bins(lineage: &Lineage, detection: &Detection) -> Result<BTreeSet<Bin>, String> {
    let w = detection.summary.version;
    let own = detection.summary.kind == Some(StaleKind::Rewrite);
    let stale_version = u64::try_from(w).unwrap_or(0);
    let mut undone = BTreeSet::new();
    for (path, first) in &detection.removed {
        let by = if own { stale_version } else { *first };
        let Some(bin) = lineage.consumer(path, by) else {
            return Err(format!(
                "`{path}` was first removed by version {first}, which changed data (it is no \
                 rewrite): an exact repair is not possible; restore the table to version {} and \
                 replay the later writes by hand",
                w - 1
            ));
        };
        undone.insert(bin.clone());
    }
    Ok(undone)
}

/// Follows each undone bin's outputs to the active files holding their rows, undoing every bin
/// on the way (a later rewrite that consumed an output); returns those active files.
fn follow_to_active(
    lineage: &Lineage,
    undone: &mut BTreeSet<Bin>,
    active: &HashMap<&str, &ActiveFile>,
    w: i64,
) -> Result<BTreeSet<String>, String> {
    let mut queue: Vec<Bin> = undone.iter().cloned().collect();
    let mut targets: BTreeSet<String> = BTreeSet::new();
    while let Some(bin) = queue.pop() {
        let Some((_, outputs)) = lineage.bins.get(&bin) else {
            continue;
        };
        for output in outputs {
            if active.contains_key(output.as_str()) {
                targets.insert(output.clone());
            } else if let Some(next) = lineage.first_consumer_after(output, bin.0) {
                if undone.insert(next.clone()) {
                    queue.push(next.clone());
                }
            } else {
                let by = lineage
                    .removed_by_other
                    .get(output)
                    .map_or("a commit no longer on disk".to_owned(), |v| {
                        format!("version {v}")
                    });
                return Err(format!(
                    "`{output}`, written by rewrite {} with rows of the stale-removed files, was \
                     since removed by {by}, which changed data: an exact repair is not possible; \
                     restore the table to version {} and replay the later writes by hand",
                    bin.0,
                    w - 1
                ));
            }
        }
    }
    Ok(targets)
}

/// Why the files to add back cannot be: one is active already, or storage lost some (a VACUUM
/// deleted them); `None` when all can be added back as they were.
async fn unrestorable(
    table: &DeltaTable,
    uri: &str,
    re_add: &BTreeSet<String>,
    active: &HashMap<&str, &ActiveFile>,
    w: i64,
) -> Result<Option<String>, DeltaError> {
    if let Some(active_leaf) = re_add.iter().find(|p| active.contains_key(p.as_str())) {
        return Ok(Some(format!(
            "`{active_leaf}` would be added back but is active already; the table changed in a \
             way this repair does not understand: restore by hand"
        )));
    }
    let store = table.object_store();
    let mut gone = Vec::new();
    for leaf in re_add {
        if !exists(store.as_ref(), uri, leaf, "checking a file to add back").await? {
            gone.push(leaf.clone());
        }
    }
    Ok((!gone.is_empty()).then(|| {
        format!(
            "{} file(s) to add back are no longer on storage (first: `{}`; a VACUUM deleted \
             them): the rows of the untouched inputs cannot be restored exactly; restore the \
             table to version {} by hand",
            gone.len(),
            gone[0],
            w - 1
        )
    }))
}

/// Rows of an add action: `numRecords` minus its deletion vector's cardinality.
fn add_rows(add: &Add) -> Option<u64> {
    let stats: serde_json::Value = serde_json::from_str(add.stats.as_deref()?).ok()?;
    let rows = stats.get("numRecords")?.as_u64()?;
    let deleted = add
        .deletion_vector
        .as_ref()
        .and_then(|dv| u64::try_from(dv.cardinality).ok())
        .unwrap_or(0);
    Some(rows.saturating_sub(deleted))
}

/// The add actions of `paths` as they were before the bins that consumed them, from the
/// snapshots of the versions before those bins.
async fn original_adds(
    uri: &str,
    lineage: &Lineage,
    paths: &BTreeSet<String>,
) -> Result<BTreeMap<String, Add>, DeltaError> {
    let mut by_version: BTreeMap<u64, HashSet<&str>> = BTreeMap::new();
    for path in paths {
        let bin = lineage
            .consumed_by
            .get(path)
            .and_then(|bins| bins.first())
            .map(|bin| bin.0)
            .ok_or_else(|| DeltaError::Internal {
                table: uri.to_owned(),
                reason: format!("no rewrite in the log consumed `{path}`"),
            })?;
        by_version
            .entry(bin.saturating_sub(1))
            .or_default()
            .insert(path);
    }
    let mut adds = BTreeMap::new();
    for (version, wanted) in by_version {
        let table = open_table_at(uri, version).await?;
        let snapshot = table
            .snapshot()
            .map_err(|err| DeltaError::delta(uri, "reading the snapshot", err))?
            .snapshot()
            .clone();
        let log_data = snapshot
            .try_log_data()
            .map_err(|err| DeltaError::delta(uri, "reading the active files", err))?;
        for file in log_data {
            let path = file.path().into_owned();
            if wanted.contains(path.as_str()) {
                #[allow(deprecated)] // the one public way to get a file's full add action
                let mut add = file.add_action();
                add.data_change = false;
                adds.insert(path, add);
            }
        }
        for path in wanted {
            if !adds.contains_key(path) {
                return Err(DeltaError::MalformedLog {
                    table: uri.to_owned(),
                    reason: format!("`{path}` is not active at version {version}"),
                });
            }
        }
    }
    Ok(adds)
}

/// Writes the repair commit through tablekeeper's one commit writer ([`write_commit`], which
/// meets row tracking and in-commit timestamps: a file added back keeps its own row ids) and
/// checks it: every removed file active before it, no added file.
async fn commit_repair(
    table: &DeltaTable,
    uri: &str,
    run_id: &str,
    plan: &RepairPlan,
    adds: Vec<Add>,
    files: &[ActiveFile],
) -> Result<Commit, DeltaError> {
    let base = crate::open::loaded_version(uri, table)?;
    let snapshot = table
        .snapshot()
        .map_err(|err| DeltaError::delta(uri, "reading the snapshot", err))?
        .snapshot();
    let removing: HashSet<&str> = plan.remove.iter().map(|f| f.path.as_str()).collect();
    let log_data = snapshot
        .try_log_data()
        .map_err(|err| DeltaError::delta(uri, "reading the active files", err))?;
    let removes: Vec<Remove> = log_data
        .into_iter()
        .filter(|file| removing.contains(file.path().as_ref()))
        .map(|file| crate::rewrite::select::remove_keeping_row_ids(&file))
        .collect();

    let mut marker = run_marker(run_id, OP);
    if let Some(tk) = marker
        .get_mut(crate::log::read::MARKER_KEY)
        .and_then(|v| v.as_object_mut())
    {
        tk.insert("repairs".into(), json!([plan.stale_write]));
        tk.insert("rewrites".into(), json!(plan.rewrites));
    }
    let mut parameters = serde_json::Map::new();
    parameters.insert(
        "tablekeeperRepairOf".into(),
        json!(plan.stale_write.to_string()),
    );
    let commit = LogCommit {
        operation: "RESTORE",
        parameters,
        metrics: serde_json::Map::new(),
        metadata: marker,
        removes,
        adds: Vec::new(),
        restores: adds,
    };
    let log_store = table.log_store();
    let rules = CommitRules::of(uri, log_store.as_ref(), snapshot).await?;
    let landed = write_commit(log_store.as_ref(), uri, OP, base, &commit, &rules).await?;
    let commits = run_commits(table.log_store().as_ref(), uri, base, run_id).await?;
    let commit = commits
        .into_iter()
        .find(|c| c.version == landed.version)
        .ok_or_else(|| DeltaError::IncompleteLog {
            table: uri.to_owned(),
            reason: format!(
                "the repair committed version {} but the commit cannot be read back",
                landed.version
            ),
        })?;
    let before = (landed.version == base + 1).then(|| (base, active_set(files)));
    let known = before.as_ref().map(|(v, s)| (*v, s));
    match check_commit(uri, &commit, known, Rows::Changed).await? {
        Verdict::Clean => {}
        Verdict::Unverified(reason) => {
            tracing::warn!(table = uri, %reason, "repair commit unchecked")
        }
    }
    if let Some((_, active_before)) = &before {
        let doubled: Vec<String> = commit
            .adds
            .iter()
            .filter(|a| active_before.contains_key(&a.path))
            .map(|a| a.path.clone())
            .collect();
        if !doubled.is_empty() {
            return Err(DeltaError::DuplicateRewrite {
                table: uri.to_owned(),
                version: i64::try_from(commit.version).unwrap_or(i64::MAX),
                files: doubled,
            });
        }
    }
    Ok(commit)
}
