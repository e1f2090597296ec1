//! From a table draft and the inventory's `defaults:` to a checked [`TableSpec`]: merging
//! (table, then `defaults:`, then the built-in defaults, field by field) and the rules that
//! involve several keys of one table (retention floor, Z-order vs partitions, S3
//! multi-writer commit protocol).
//!
//! Rules that compare tables with each other (unique names and paths) live in `load.rs`.
//! A spec built here is only handed out when the whole inventory had no problem at all
//! (`load.rs` decides); this module must never hide a problem to make a spec buildable.

use std::time::Duration;

use crate::check::{OperationDraft, Settings, TableDraft};
use crate::defaults;
use crate::error::Problem;
use crate::model::{
    CheckpointSpec, CompactionSpec, Layout, LogStore, OverwriteWindow, ProtocolSpec, PurgeSpec,
    Retention, RewriteOwner, SourceRef, TableSpec, Topology, VacuumSpec, Writers, ZorderSpec,
};
use crate::schedule::Schedule;
use crate::walk::{At, Ctx, Field};

/// Applies the cross-key rules, then the defaults. `None` when a required key is missing
/// or unreadable (already reported).
pub(crate) fn build_table(
    draft: &TableDraft,
    fleet: Option<&Settings>,
    problems: &mut Vec<Problem>,
) -> Option<TableSpec> {
    let mut ctx = Ctx {
        file: &draft.file,
        table: draft.label.clone(),
        problems,
    };
    let empty = Settings::default();
    let fleet = fleet.unwrap_or(&empty);
    let own = &draft.maintenance;

    check_layout(&mut ctx, draft);
    let retention = check_retention(&mut ctx, draft);
    check_writers(&mut ctx, draft);

    let name = draft.name.get()?.clone();
    let path = draft.path.get()?;
    let owner = draft.owner.get()?.clone();

    let operations = operations_of(draft, own, fleet)?;
    let target_file_size = operations.compaction.target_file_size;

    Some(TableSpec {
        concurrency_key: draft
            .concurrency_key
            .get()
            .cloned()
            .unwrap_or_else(|| format!("table:{name}")),
        name,
        path: path.normalized.clone(),
        owner,
        timezone: own
            .timezone
            .or(fleet.timezone)
            .unwrap_or(defaults::TIMEZONE),
        writers: writers_of(draft),
        layout: layout_of(draft, target_file_size),
        retention,
        protocol: ProtocolSpec {
            features: draft.features.clone(),
        },
        readers: draft.readers.clone(),
        paused: own.paused.unwrap_or(false),
        importance: own
            .importance
            .or(fleet.importance)
            .unwrap_or(defaults::IMPORTANCE),
        max_attempts: own
            .max_attempts
            .or(fleet.max_attempts)
            .unwrap_or(defaults::MAX_ATTEMPTS),
        timeout: own.timeout.or(fleet.timeout).unwrap_or(defaults::TIMEOUT),
        max_task_bytes: own
            .max_task_bytes
            .or(fleet.max_task_bytes)
            .unwrap_or(defaults::MAX_TASK_BYTES),
        compaction: operations.compaction,
        zorder: operations.zorder,
        vacuum: operations.vacuum,
        checkpoint: operations.checkpoint,
        purge: operations.purge,
        auto_repair: own
            .auto_repair
            .or(fleet.auto_repair)
            .unwrap_or(defaults::AUTO_REPAIR),
        source: SourceRef {
            file: draft.file.clone(),
            line: draft.loc.line,
            column: draft.loc.column,
        },
    })
}

/// `writers:`, defaults applied.
fn writers_of(draft: &TableDraft) -> Writers {
    Writers {
        topology: draft
            .topology
            .get()
            .copied()
            .unwrap_or(Topology::SingleWriter),
        log_store: draft.log_store.get().copied(),
        rewrites: draft
            .rewrites
            .get()
            .copied()
            .unwrap_or(RewriteOwner::Tablekeeper),
        commit_budget_per_hour: draft.commit_budget_per_hour,
        overwrites: draft
            .overwrites
            .get()
            .map(|(schedule, duration)| OverwriteWindow {
                schedule: schedule.clone(),
                duration: *duration,
            }),
    }
}

/// `layout:`, defaults applied (the average-size threshold from the compaction target).
fn layout_of(draft: &TableDraft, target_file_size: u64) -> Layout {
    Layout {
        // partition columns are top-level names, compared with the table's unquoted
        partition_by: names(&draft.partition_by)
            .into_iter()
            .map(|name| match tablekeeper_vocab::column_path(&name) {
                Ok(path) if path.len() == 1 => path.into_iter().collect(),
                _ => name,
            })
            .collect(),
        optimize_write: draft.optimize_write.unwrap_or(defaults::OPTIMIZE_WRITE),
        zorder: names(&draft.zorder),
        min_average_file_size: draft
            .min_average_file_size
            .unwrap_or(target_file_size / defaults::MIN_AVERAGE_FILE_SIZE_DIVISOR),
        compression: draft.compression.unwrap_or_default(),
    }
}

/// Each operation's settings: the table's own, else the inventory's `defaults:`, else the
/// built-in ones.
struct Operations {
    compaction: CompactionSpec,
    zorder: ZorderSpec,
    vacuum: VacuumSpec,
    checkpoint: CheckpointSpec,
    purge: PurgeSpec,
}

/// The operations of `draft`, merged: `None` only when a built-in schedule fails to parse.
fn operations_of(draft: &TableDraft, own: &Settings, fleet: &Settings) -> Option<Operations> {
    let has_zorder_columns = draft.zorder.get().is_some_and(|cols| !cols.is_empty());
    let zorder_enabled = match (own.zorder.enabled.get(), fleet.zorder.enabled.get()) {
        (Some(enabled), _) => *enabled,
        // A fleet-wide `enabled: true` means "wherever columns are declared".
        (None, Some(enabled)) => *enabled && has_zorder_columns,
        (None, None) => has_zorder_columns,
    };
    let builtin = |text: &str| Schedule::parse(text).ok();
    let target_file_size = own
        .compaction
        .target_file_size
        .or(fleet.compaction.target_file_size)
        .unwrap_or(defaults::COMPACTION_TARGET_FILE_SIZE);
    Some(Operations {
        compaction: CompactionSpec {
            enabled: enabled(&own.compaction, &fleet.compaction),
            schedule: schedule(&own.compaction, &fleet.compaction)
                .or_else(|| builtin(defaults::COMPACTION_SCHEDULE))?,
            target_file_size,
            min_small_files: own
                .compaction
                .min_small_files
                .or(fleet.compaction.min_small_files)
                .unwrap_or(defaults::COMPACTION_MIN_SMALL_FILES),
        },
        zorder: ZorderSpec {
            enabled: zorder_enabled,
            schedule: schedule(&own.zorder, &fleet.zorder)
                .or_else(|| builtin(defaults::ZORDER_SCHEDULE))?,
        },
        vacuum: VacuumSpec {
            enabled: enabled(&own.vacuum, &fleet.vacuum),
            schedule: schedule(&own.vacuum, &fleet.vacuum)
                .or_else(|| builtin(defaults::VACUUM_SCHEDULE))?,
            full_every: own
                .vacuum
                .full_every
                .or(fleet.vacuum.full_every)
                .unwrap_or(defaults::VACUUM_FULL_EVERY),
        },
        checkpoint: CheckpointSpec {
            enabled: enabled(&own.checkpoint, &fleet.checkpoint),
            schedule: schedule(&own.checkpoint, &fleet.checkpoint)
                .or_else(|| builtin(defaults::CHECKPOINT_SCHEDULE))?,
            max_commits_since_checkpoint: own
                .checkpoint
                .max_commits_since_checkpoint
                .or(fleet.checkpoint.max_commits_since_checkpoint)
                .unwrap_or(defaults::CHECKPOINT_MAX_COMMITS),
        },
        purge: PurgeSpec {
            enabled: enabled(&own.purge, &fleet.purge),
            schedule: schedule(&own.purge, &fleet.purge)
                .or_else(|| builtin(defaults::PURGE_SCHEDULE))?,
        },
    })
}

/// Compaction, VACUUM and checkpoints are on unless switched off.
fn enabled(own: &OperationDraft, fleet: &OperationDraft) -> bool {
    own.enabled
        .get()
        .or(fleet.enabled.get())
        .copied()
        .unwrap_or(true)
}

fn schedule(own: &OperationDraft, fleet: &OperationDraft) -> Option<Schedule> {
    own.schedule.clone().or_else(|| fleet.schedule.clone())
}

fn names(field: &Field<Vec<At<String>>>) -> Vec<String> {
    field
        .get()
        .map(|items| items.iter().map(|item| item.value.clone()).collect())
        .unwrap_or_default()
}

fn check_layout(ctx: &mut Ctx<'_>, draft: &TableDraft) {
    // column lists spell names as Spark does: a name holding a dot in backticks
    let mut paths = |field: &Field<Vec<At<String>>>, key: &str| -> Vec<Vec<String>> {
        let mut paths = Vec::new();
        for column in field.get().into_iter().flatten() {
            match tablekeeper_vocab::column_path(&column.value) {
                Ok(path) => paths.push(path),
                Err(problem) => ctx.error(column.loc, key, problem),
            }
        }
        paths
    };
    let partitions = paths(&draft.partition_by, "layout.partition_by");
    paths(&draft.zorder, "layout.zorder");
    if let Some(columns) = draft.zorder.get() {
        let is_partition = |column: &At<String>| {
            tablekeeper_vocab::column_path(&column.value)
                .is_ok_and(|path| partitions.contains(&path))
        };
        for column in columns.iter().filter(|c| is_partition(c)) {
            ctx.error(
                column.loc,
                "layout.zorder",
                format!(
                    "`{}` is a partition column: every file holds a single value of it, so Z-ordering \
                     by it does nothing; remove it from `layout.zorder`",
                    column.value
                ),
            );
        }
    }
    let has_columns = draft.zorder.get().is_some_and(|cols| !cols.is_empty());
    if let Field::Set(enabled) = &draft.maintenance.zorder.enabled {
        if enabled.value && !has_columns && !draft.zorder.is_invalid() {
            ctx.error(
                enabled.loc,
                "maintenance.zorder.enabled",
                "Z-order is enabled but `layout.zorder` names no columns: add the columns to \
                 `layout.zorder` or remove `enabled: true`",
            );
        }
    }
    // A fleet-wide `defaults.zorder.enabled: true` applies only where columns exist, so it
    // is no problem for a table without columns.
}

fn check_retention(ctx: &mut Ctx<'_>, draft: &TableDraft) -> Retention {
    let deleted = draft
        .deleted_file_retention
        .get()
        .copied()
        .unwrap_or(defaults::DELETED_FILE_RETENTION);
    let log = draft
        .log_retention
        .get()
        .copied()
        .unwrap_or(defaults::LOG_RETENTION);
    let allow_short = draft.allow_short_retention.get().copied().unwrap_or(false);
    check_safety_floor(ctx, draft, allow_short);
    check_log_outlasts_files(ctx, draft, log, deleted);
    check_clones_are_others(ctx, draft);
    check_erasure_deadline(ctx, draft, deleted);
    Retention {
        deleted_file_retention: deleted,
        log_retention: log,
        allow_short_retention: allow_short,
        erasure_deadline: draft.erasure_deadline.at().map(|at| at.value),
        clones: draft.clones.get().cloned().unwrap_or_default(),
        pins: draft.pins.clone(),
    }
}

/// `deleted_file_retention` under Delta's 168h floor needs `allow_short_retention`.
fn check_safety_floor(ctx: &mut Ctx<'_>, draft: &TableDraft, allow_short: bool) {
    if let Some(at) = draft.deleted_file_retention.at() {
        if at.value < defaults::MIN_SAFE_RETENTION
            && !allow_short
            && !draft.allow_short_retention.is_invalid()
        {
            ctx.error(
                at.loc,
                "retention.deleted_file_retention",
                format!(
                    "{} is under Delta's 168h safety floor: VACUUM would delete files that running \
                     readers and time travel within the last 7 days still need; set \
                     `retention.allow_short_retention: true` or raise `deleted_file_retention` to at \
                     least 168h",
                    human(at.value)
                ),
            );
        }
    }
}

/// The log must be kept at least as long as the files: time travel needs both.
fn check_log_outlasts_files(
    ctx: &mut Ctx<'_>,
    draft: &TableDraft,
    log: Duration,
    deleted: Duration,
) {
    if log < deleted
        && !draft.log_retention.is_invalid()
        && !draft.deleted_file_retention.is_invalid()
    {
        // Point at whichever of the two the table wrote; the log window when both.
        let (loc, field) = match (draft.log_retention.at(), draft.deleted_file_retention.at()) {
            (Some(at), _) => (at.loc, "retention.log_retention"),
            (None, Some(at)) => (at.loc, "retention.deleted_file_retention"),
            (None, None) => (draft.loc, "retention"),
        };
        ctx.error(
            loc,
            field,
            format!(
                "`log_retention` ({}) is shorter than `deleted_file_retention` ({}): time travel needs \
                 a version's log entries as well as its files, so versions older than {} could not \
                 be read although VACUUM keeps their files; raise `log_retention` to at least {}",
                human(log),
                human(deleted),
                human(log),
                human(deleted)
            ),
        );
    }
}

/// `retention.clones` lists other tables, never the table itself.
fn check_clones_are_others(ctx: &mut Ctx<'_>, draft: &TableDraft) {
    if let (Some(path), Some(clones)) = (draft.path.get(), draft.clones.at()) {
        if clones.value.contains(&path.normalized) {
            ctx.error(
                clones.loc,
                "retention.clones",
                format!(
                    "`{}` is this table's own path: list the clones' paths, not the source's",
                    path.normalized
                ),
            );
        }
    }
}

/// An erasure deadline must outlast what VACUUM keeps: the retention and the longest reader.
fn check_erasure_deadline(ctx: &mut Ctx<'_>, draft: &TableDraft, deleted: Duration) {
    // VACUUM waits for the longest reader's queries too (`TableSpec::vacuum_window`)
    if let Some(reader) = draft
        .readers
        .iter()
        .filter(|r| r.max_query_duration.is_some_and(|d| d > deleted))
        .max_by_key(|r| r.max_query_duration)
    {
        let window = reader.max_query_duration.unwrap_or_default();
        if let Some(at) = draft.erasure_deadline.at().filter(|at| at.value <= window) {
            ctx.error(
                at.loc,
                "retention.erasure_deadline",
                format!(
                    "an erasure deadline of {} is not longer than reader `{}`'s \
                     max_query_duration ({}): VACUUM keeps deleted rows' files that long for \
                     its queries, so they cannot be gone in time; raise `erasure_deadline` \
                     above {}",
                    human(at.value),
                    reader.name,
                    human(window),
                    human(window)
                ),
            );
        }
    }
    if let Some(at) = draft.erasure_deadline.at() {
        if at.value <= deleted && !draft.deleted_file_retention.is_invalid() {
            ctx.error(
                at.loc,
                "retention.erasure_deadline",
                format!(
                    "an erasure deadline of {} is not longer than `deleted_file_retention` ({}): \
                     deleted rows stay in files VACUUM may only delete after that retention, so \
                     they cannot be gone in time; raise `erasure_deadline` above {} (a day more \
                     leaves room for the purge) or shorten `deleted_file_retention`",
                    human(at.value),
                    human(deleted),
                    human(deleted)
                ),
            );
        }
    }
}

fn check_writers(ctx: &mut Ctx<'_>, draft: &TableDraft) {
    let Some(path) = draft.path.get() else {
        return;
    };
    let on_s3 = path.scheme.as_deref() == Some("s3");
    if let Some(topology) = draft.topology.at() {
        if topology.value == Topology::MultiWriter
            && on_s3
            && matches!(draft.log_store, Field::Absent)
        {
            ctx.error(
                topology.loc,
                "writers.topology",
                "a multi-writer s3:// table must declare `writers.log_store`: deltalake 1.x (and so \
                 tablekeeper) commits with S3 conditional put, Spark's S3DynamoDBLogStore locks through \
                 DynamoDB, and writers mixing the two protocols can lose commits; set \
                 `writers.log_store: conditional-put` if every writer uses S3 conditional writes, or \
                 `dynamodb` if any uses S3DynamoDBLogStore (tablekeeper will then refuse to commit to \
                 this table)",
            );
        }
    }
    if let Some(store) = draft.log_store.at() {
        if !on_s3 {
            ctx.error(
                store.loc,
                "writers.log_store",
                format!(
                    "`log_store: {}` only applies to s3:// tables (other stores have atomic \
                     put-if-absent): remove it",
                    match store.value {
                        LogStore::ConditionalPut => "conditional-put",
                        LogStore::Dynamodb => "dynamodb",
                    }
                ),
            );
        }
    }
}

fn human(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}
