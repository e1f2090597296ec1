//! The inventory's shape: which keys exist where, and reading one file's tree into drafts.
//!
//! A draft holds what a file says, value by value, with locations, and nothing else: no
//! defaults, no rules that involve two keys (those are in `build.rs`) and no rules that
//! involve two files (in `load.rs`). Every problem found while reading is recorded; this
//! module must never stop at the first one.

use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono_tz::Tz;

use crate::budget::{read_budget, BudgetDraft};
use crate::compression::read_compression;
use crate::error::Problem;
use crate::keep::{read_clones, read_pins};
use crate::model::{Importance, LogStore, Operation, Pin, Reader, RewriteOwner, Topology};
use crate::schedule::Schedule;
use crate::tree::{Loc, Node, Value};
use crate::values::{self, TablePath};
use crate::walk::{
    read_bool, read_choice, read_count, read_duration, read_nonempty, read_schedule, read_size,
    read_string_list, read_timezone, Block, Ctx, Field, Keys,
};

/// Keys of a file in the list shape.
pub(crate) const FILE_KEYS: &[&str] = &["defaults", "budget", "tables"];
/// Keys of a table.
pub(crate) const TABLE_KEYS: &[&str] = &[
    "name",
    "path",
    "owner",
    "concurrency_key",
    "writers",
    "layout",
    "retention",
    "protocol",
    "readers",
    "maintenance",
];
pub(crate) const WRITERS_KEYS: &[&str] = &[
    "topology",
    "log_store",
    "commit_budget_per_hour",
    "overwrites",
    "rewrites",
];
pub(crate) const OVERWRITES_KEYS: &[&str] = &["schedule", "duration"];
pub(crate) const LAYOUT_KEYS: &[&str] = &[
    "partition_by",
    "optimize_write",
    "zorder",
    "min_average_file_size",
    "compression",
];
pub(crate) const RETENTION_KEYS: &[&str] = &[
    "deleted_file_retention",
    "log_retention",
    "allow_short_retention",
    "erasure_deadline",
    "clones",
    "pins",
];
pub(crate) const PROTOCOL_KEYS: &[&str] = &["features"];
pub(crate) const READER_KEYS: &[&str] = &["name", "engine", "version", "max_query_duration"];
/// Keys of a table's `maintenance:` block.
pub(crate) const MAINTENANCE_KEYS: &[&str] = &[
    "paused",
    "importance",
    "auto_repair",
    "timezone",
    "max_attempts",
    "timeout",
    "max_task_bytes",
    "compaction",
    "zorder",
    "vacuum",
    "checkpoint",
    "purge",
];
/// Keys of the `defaults:` block: the maintenance keys that make sense fleet-wide.
pub(crate) const DEFAULTS_KEYS: &[&str] = &[
    "importance",
    "auto_repair",
    "timezone",
    "max_attempts",
    "timeout",
    "max_task_bytes",
    "compaction",
    "zorder",
    "vacuum",
    "checkpoint",
    "purge",
];
pub(crate) const COMPACTION_KEYS: &[&str] =
    &["enabled", "schedule", "target_file_size", "min_small_files"];
pub(crate) const ZORDER_KEYS: &[&str] = &["enabled", "schedule"];
pub(crate) const VACUUM_KEYS: &[&str] = &["enabled", "schedule", "full_every"];
pub(crate) const CHECKPOINT_KEYS: &[&str] =
    &["enabled", "schedule", "max_commits_since_checkpoint"];
pub(crate) const PURGE_KEYS: &[&str] = &["enabled", "schedule"];

/// The keys of an operation's block.
pub(crate) fn operation_keys(op: Operation) -> &'static [&'static str] {
    match op {
        Operation::Compact => COMPACTION_KEYS,
        Operation::Zorder => ZORDER_KEYS,
        Operation::Vacuum => VACUUM_KEYS,
        Operation::Checkpoint => CHECKPOINT_KEYS,
        Operation::Purge => PURGE_KEYS,
        Operation::Repair => &[],
    }
}

const OPERATIONS_NOTE: &str =
    "maintenance operations are compaction, zorder, vacuum, checkpoint, purge";

/// Table-level keys that belong one level down; users often flatten them.
const TABLE_ELSEWHERE: &[(&str, &str)] = &[
    ("topology", "write it under `writers:`"),
    ("log_store", "write it under `writers:`"),
    ("commit_budget_per_hour", "write it under `writers:`"),
    ("rewrites", "write it under `writers:`"),
    ("partition_by", "write it under `layout:`"),
    ("optimize_write", "write it under `layout:`"),
    (
        "zorder",
        "write Z-order columns under `layout:` and its schedule under `maintenance:`",
    ),
    ("deleted_file_retention", "write it under `retention:`"),
    ("log_retention", "write it under `retention:`"),
    ("allow_short_retention", "write it under `retention:`"),
    ("erasure_deadline", "write it under `retention:`"),
    ("features", "write it under `protocol:`"),
    ("paused", "write it under `maintenance:`"),
    ("importance", "write it under `maintenance:`"),
    ("timezone", "write it under `maintenance:`"),
    ("max_attempts", "write it under `maintenance:`"),
    ("timeout", "write it under `maintenance:`"),
    ("compaction", "write it under `maintenance:`"),
    ("vacuum", "write it under `maintenance:`"),
    ("checkpoint", "write it under `maintenance:`"),
    ("purge", "write it under `maintenance:`"),
    (
        "schedule",
        "schedules belong to an operation: `maintenance.<operation>.schedule`",
    ),
    (
        "tables",
        "a file holds either a `tables:` list or a single table, not both",
    ),
    (
        "defaults",
        "a file holds either `defaults:` + `tables:` or a single table, not both",
    ),
    (
        "budget",
        "the budget is fleet-wide: write it at the top of a file that holds `tables:` \
         (one file of the inventory), not inside a table",
    ),
];

const DEFAULTS_ELSEWHERE: &[(&str, &str)] = &[(
    "paused",
    "pausing is per table: write `paused: true` under a table's `maintenance:`",
)];

const OP_ELSEWHERE: &[(&str, &str)] = &[
    (
        "target_file_size",
        "only `compaction` takes `target_file_size`",
    ),
    (
        "min_small_files",
        "only `compaction` takes `min_small_files`",
    ),
    ("full_every", "only `vacuum` takes `full_every`"),
    (
        "max_commits_since_checkpoint",
        "only `checkpoint` takes `max_commits_since_checkpoint`",
    ),
    (
        "timezone",
        "write it one level up, under `maintenance:` or `defaults:`",
    ),
    (
        "timeout",
        "write it one level up, under `maintenance:` or `defaults:`",
    ),
    (
        "max_attempts",
        "write it one level up, under `maintenance:` or `defaults:`",
    ),
    (
        "importance",
        "importance is per table, not per operation: write it one level up, under \
         `maintenance:` or `defaults:`",
    ),
];

/// What one file says.
#[derive(Debug, Default)]
pub(crate) struct FileDraft {
    /// The `defaults:` block and the location of its key.
    pub defaults: Option<(Settings, Loc)>,
    /// The `budget:` block and the location of its key.
    pub budget: Option<(BudgetDraft, Loc)>,
    pub tables: Vec<TableDraft>,
}

/// Settings shared by `defaults:` and a table's `maintenance:`.
#[derive(Debug, Default)]
pub(crate) struct Settings {
    pub paused: Option<bool>,
    pub importance: Option<Importance>,
    pub auto_repair: Option<bool>,
    pub timezone: Option<Tz>,
    pub max_attempts: Option<u32>,
    pub timeout: Option<Duration>,
    pub max_task_bytes: Option<u64>,
    pub compaction: OperationDraft,
    pub zorder: OperationDraft,
    pub vacuum: OperationDraft,
    pub checkpoint: OperationDraft,
    pub purge: OperationDraft,
    /// Never read: repair has no block of its own (see `operation_mut`).
    pub repair: OperationDraft,
}

impl Settings {
    fn operation_mut(&mut self, op: Operation) -> &mut OperationDraft {
        match op {
            Operation::Compact => &mut self.compaction,
            Operation::Zorder => &mut self.zorder,
            Operation::Vacuum => &mut self.vacuum,
            Operation::Checkpoint => &mut self.checkpoint,
            Operation::Purge => &mut self.purge,
            // not a block with a schedule: `auto_repair` is a plain switch
            Operation::Repair => &mut self.repair,
        }
    }
}

/// One operation block; the operation-specific keys stay `Absent` where they do not apply.
#[derive(Debug)]
pub(crate) struct OperationDraft {
    pub enabled: Field<bool>,
    pub schedule: Option<Schedule>,
    pub target_file_size: Option<u64>,
    pub min_small_files: Option<u32>,
    pub full_every: Option<u32>,
    pub max_commits_since_checkpoint: Option<u64>,
}

impl Default for OperationDraft {
    fn default() -> Self {
        OperationDraft {
            enabled: Field::Absent,
            schedule: None,
            target_file_size: None,
            min_small_files: None,
            full_every: None,
            max_commits_since_checkpoint: None,
        }
    }
}

/// What a file says about one table.
#[derive(Debug)]
pub(crate) struct TableDraft {
    pub file: PathBuf,
    /// The table's mapping (its first key).
    pub loc: Loc,
    /// The name as written, even one that breaks the naming rule, for labelling problems.
    pub label: Option<String>,
    pub name: Field<String>,
    pub path: Field<TablePath>,
    pub owner: Field<String>,
    pub concurrency_key: Field<String>,
    pub topology: Field<Topology>,
    pub log_store: Field<LogStore>,
    pub commit_budget_per_hour: Option<u32>,
    /// `writers.overwrites`: the window, or `Invalid` when a part of it was missing or bad.
    pub overwrites: Field<(Schedule, Duration)>,
    pub rewrites: Field<RewriteOwner>,
    pub partition_by: Field<Vec<crate::walk::At<String>>>,
    pub optimize_write: Option<bool>,
    pub zorder: Field<Vec<crate::walk::At<String>>>,
    pub min_average_file_size: Option<u64>,
    pub compression: Option<tablekeeper_vocab::Compression>,
    pub deleted_file_retention: Field<Duration>,
    pub log_retention: Field<Duration>,
    pub allow_short_retention: Field<bool>,
    pub erasure_deadline: Field<Duration>,
    /// `retention.clones`, normalized, with where each was written.
    pub clones: Field<Vec<String>>,
    pub pins: Vec<Pin>,
    pub features: Vec<String>,
    pub readers: Vec<Reader>,
    pub maintenance: Settings,
}

/// Reads one file's tree. `root` is `None` for an empty document, which holds no tables.
pub(crate) fn check_file(
    file: &Path,
    root: Option<&Node>,
    problems: &mut Vec<Problem>,
) -> FileDraft {
    let mut draft = FileDraft::default();
    let Some(root) = root else {
        return draft;
    };
    let mut ctx = Ctx {
        file,
        table: None,
        problems,
    };
    let Value::Map(entries) = &root.value else {
        ctx.error(
            root.loc,
            "",
            format!(
                "expected a mapping, found {}: a file holds either `tables:` (a list of tables, with \
                 optional `defaults:`) or one table (`name:`, `path:`, `owner:`, ...)",
                root.value.kind()
            ),
        );
        return draft;
    };
    let keys: Vec<&str> = entries.iter().filter_map(|e| e.key.as_deref()).collect();
    let list_shape = keys.iter().any(|k| FILE_KEYS.contains(k))
        || (!keys.iter().any(|k| TABLE_KEYS.contains(k))
            && keys
                .iter()
                .any(|k| crate::walk::did_you_mean(k, FILE_KEYS).is_some()));
    if !list_shape {
        if let Some(table) = check_table(&mut ctx, root) {
            draft.tables.push(table);
        }
        return draft;
    }
    let Some(block) = Block::open(
        &mut ctx,
        root,
        "",
        Keys {
            known: FILE_KEYS,
            elsewhere: &[],
            note: Some("table keys go into the entries of `tables:`"),
        },
    ) else {
        return draft;
    };
    let key_loc = |key: &str, node: &Node| {
        entries
            .iter()
            .find(|e| e.key.as_deref() == Some(key))
            .map_or(node.loc, |e| e.key_loc)
    };
    if let Some(node) = block.node("defaults") {
        if let Some(settings) = check_settings(&mut ctx, node, "defaults", false) {
            draft.defaults = Some((settings, key_loc("defaults", node)));
        }
    }
    if let Some(node) = block.node("budget") {
        if let Some(budget) = read_budget(&mut ctx, node, "budget") {
            draft.budget = Some((budget, key_loc("budget", node)));
        }
    }
    if let Some(node) = block.node("tables") {
        match &node.value {
            Value::Seq(items) => {
                for (index, item) in items.iter().enumerate() {
                    if let Value::Map(_) = item.value {
                        if let Some(table) = check_table(&mut ctx, item) {
                            draft.tables.push(table);
                        }
                    } else {
                        ctx.error(
                            item.loc,
                            "tables",
                            format!(
                                "entry {} is {}: each entry of `tables` is a mapping with `name`, `path`, `owner`, ...",
                                index + 1,
                                item.value.kind()
                            ),
                        );
                    }
                }
            }
            other => ctx.error(
                node.loc,
                "tables",
                format!(
                    "expected a list of tables, found {}: write each table as a `- name: ...` entry",
                    other.kind()
                ),
            ),
        }
    }
    draft
}

/// The table's `name:` as written, when it is a non-empty string.
fn name_of(node: &Node) -> Option<String> {
    let Value::Map(entries) = &node.value else {
        return None;
    };
    entries
        .iter()
        .find(|e| e.key.as_deref() == Some("name"))
        .and_then(|e| match &e.value.value {
            Value::Str(s) if !s.trim().is_empty() => Some(s.clone()),
            _ => None,
        })
}

/// Reads one table; `None` when the node is not a mapping (already reported).
fn check_table(file_ctx: &mut Ctx<'_>, node: &Node) -> Option<TableDraft> {
    // Label problems with the table's name as early as possible, even a name that breaks
    // the naming rule: it is what the user searches for.
    let label = name_of(node);
    let mut ctx = Ctx {
        file: file_ctx.file,
        table: label.clone(),
        problems: &mut *file_ctx.problems,
    };
    let ctx = &mut ctx;
    let block = Block::open(
        ctx,
        node,
        "",
        Keys {
            known: TABLE_KEYS,
            elsewhere: TABLE_ELSEWHERE,
            note: None,
        },
    )?;

    let name = required(
        ctx,
        &block,
        "name",
        "add a unique table name (letters, digits, `_`, `.`, `-`), e.g. `name: silver.events`",
        |ctx, node, field| {
            let name = read_nonempty(ctx, node, field)?;
            values::check_table_name(&name)
                .map_err(|m| ctx.error(node.loc, field, m))
                .ok()?;
            Some(name)
        },
    );
    let path = required(
        ctx,
        &block,
        "path",
        "add the table's location, e.g. `path: s3://bucket/silver/events` or an absolute path",
        |ctx, node, field| {
            let text = read_nonempty(ctx, node, field)?;
            values::parse_table_path(&text)
                .map_err(|m| ctx.error(node.loc, field, m))
                .ok()
        },
    );
    let owner = required(
        ctx,
        &block,
        "owner",
        "add the team alerted when maintenance fails, e.g. `owner: data-platform`",
        read_nonempty,
    );
    let concurrency_key = block.read(ctx, "concurrency_key", read_nonempty);

    let mut draft = TableDraft {
        file: ctx.file.to_path_buf(),
        loc: node.loc,
        label,
        name,
        path,
        owner,
        concurrency_key,
        topology: Field::Absent,
        log_store: Field::Absent,
        commit_budget_per_hour: None,
        overwrites: Field::Absent,
        rewrites: Field::Absent,
        partition_by: Field::Absent,
        optimize_write: None,
        zorder: Field::Absent,
        min_average_file_size: None,
        compression: None,
        deleted_file_retention: Field::Absent,
        log_retention: Field::Absent,
        allow_short_retention: Field::Absent,
        erasure_deadline: Field::Absent,
        clones: Field::Absent,
        pins: Vec::new(),
        features: Vec::new(),
        readers: Vec::new(),
        maintenance: Settings::default(),
    };

    read_writers(ctx, &block, &mut draft);
    read_layout(ctx, &block, &mut draft);
    read_retention(ctx, &block, &mut draft);
    if let Some(protocol) = sub_block(ctx, &block, "protocol", PROTOCOL_KEYS, &[]) {
        draft.features = plain_list(protocol.read(ctx, "features", read_string_list));
    }
    if let Field::Set(readers) = block.read(ctx, "readers", read_readers) {
        draft.readers = readers.value;
    }
    if let Some(node) = block.node("maintenance") {
        if let Some(settings) = check_settings(ctx, node, "maintenance", true) {
            draft.maintenance = settings;
        }
    }
    Some(draft)
}

/// The table's `writers:` block into `draft`.
fn read_writers(ctx: &mut Ctx<'_>, block: &Block<'_>, draft: &mut TableDraft) {
    if let Some(writers) = sub_block(ctx, block, "writers", WRITERS_KEYS, &[]) {
        draft.topology = writers.read(ctx, "topology", |ctx, node, field| {
            read_choice(
                ctx,
                node,
                field,
                &[
                    ("single-writer", Topology::SingleWriter),
                    ("multi-writer", Topology::MultiWriter),
                ],
            )
        });
        draft.log_store = writers.read(ctx, "log_store", |ctx, node, field| {
            read_choice(
                ctx,
                node,
                field,
                &[
                    ("conditional-put", LogStore::ConditionalPut),
                    ("dynamodb", LogStore::Dynamodb),
                ],
            )
        });
        draft.commit_budget_per_hour = writers
            .read(ctx, "commit_budget_per_hour", |ctx, node, field| {
                read_u32(ctx, node, field, 1, "a budget of 0 commits per hour forbids every write: remove the key or set at least 1")
            })
            .get()
            .copied();
        draft.overwrites = writers.read(ctx, "overwrites", check_overwrites);
        draft.rewrites = writers.read(ctx, "rewrites", |ctx, node, field| {
            read_choice(
                ctx,
                node,
                field,
                &[
                    ("tablekeeper", RewriteOwner::Tablekeeper),
                    ("external", RewriteOwner::External),
                ],
            )
        });
    }
}

/// The table's `layout:` block into `draft`.
fn read_layout(ctx: &mut Ctx<'_>, block: &Block<'_>, draft: &mut TableDraft) {
    if let Some(layout) = sub_block(ctx, block, "layout", LAYOUT_KEYS, &[]) {
        draft.partition_by = layout.read(ctx, "partition_by", read_string_list);
        draft.optimize_write = layout.read(ctx, "optimize_write", read_bool).get().copied();
        draft.zorder = layout.read(ctx, "zorder", read_string_list);
        draft.min_average_file_size = layout
            .read(ctx, "min_average_file_size", read_size)
            .get()
            .copied();
        draft.compression = layout
            .read(ctx, "compression", read_compression)
            .get()
            .copied();
    }
}

/// The table's `retention:` block into `draft`.
fn read_retention(ctx: &mut Ctx<'_>, block: &Block<'_>, draft: &mut TableDraft) {
    if let Some(retention) = sub_block(ctx, block, "retention", RETENTION_KEYS, &[]) {
        draft.deleted_file_retention = retention.read(ctx, "deleted_file_retention", read_duration);
        draft.log_retention = retention.read(ctx, "log_retention", read_duration);
        draft.allow_short_retention = retention.read(ctx, "allow_short_retention", read_bool);
        draft.erasure_deadline = retention.read(ctx, "erasure_deadline", read_duration);
        draft.clones = retention.read(ctx, "clones", read_clones);
        if let Field::Set(pins) = retention.read(ctx, "pins", read_pins) {
            draft.pins = pins.value;
        }
    }
}

/// Reads `writers.overwrites: { schedule, duration }`; both keys are required.
fn check_overwrites(ctx: &mut Ctx<'_>, node: &Node, field: &str) -> Option<(Schedule, Duration)> {
    let block = Block::open(
        ctx,
        node,
        field,
        Keys {
            known: OVERWRITES_KEYS,
            elsewhere: &[],
            note: Some("e.g. `overwrites: { schedule: \"0 1 * * *\", duration: 2h }`"),
        },
    )?;
    let schedule = block.read(ctx, "schedule", read_schedule);
    let duration = block.read(ctx, "duration", |ctx, node, field| {
        let duration = read_duration(ctx, node, field)?;
        if duration.is_zero() {
            ctx.error(
                node.loc,
                field,
                "a window of 0 protects nothing: set how long the overwrite job runs, e.g. `2h`",
            );
            return None;
        }
        Some(duration)
    });
    for (key, value) in [
        ("schedule", matches!(schedule, Field::Absent)),
        ("duration", matches!(duration, Field::Absent)),
    ] {
        if value {
            ctx.error(
                block.loc,
                &block.field(key),
                format!(
                    "missing `{key}`: an overwrite window needs when it opens (`schedule`, cron) \
                     and how long it lasts (`duration`)"
                ),
            );
        }
    }
    Some((schedule.get()?.clone(), *duration.get()?))
}

/// Reads a required key: absent or null is a problem at the table's mapping.
fn required<'n, T>(
    ctx: &mut Ctx<'_>,
    block: &Block<'n>,
    key: &str,
    how: &str,
    read: impl FnOnce(&mut Ctx<'_>, &'n Node, &str) -> Option<T>,
) -> Field<T> {
    let field = block.read(ctx, key, read);
    if matches!(field, Field::Absent) {
        ctx.error(
            block.loc,
            key,
            format!("missing required key `{key}`: {how}"),
        );
    }
    field
}

fn sub_block<'n>(
    ctx: &mut Ctx<'_>,
    parent: &Block<'n>,
    key: &str,
    known: &'static [&'static str],
    elsewhere: &'static [(&'static str, &'static str)],
) -> Option<Block<'n>> {
    let node = parent.node(key)?;
    Block::open(
        ctx,
        node,
        &parent.field(key),
        Keys {
            known,
            elsewhere,
            note: None,
        },
    )
}

/// `readers:`: a list of names (`spark-4.0-platform-image`) or of
/// `{ name, engine, version, max_query_duration }` mappings, each name once.
fn read_readers(ctx: &mut Ctx<'_>, node: &Node, field: &str) -> Option<Vec<Reader>> {
    let Value::Seq(items) = &node.value else {
        ctx.error(
            node.loc,
            field,
            format!(
                "expected a list of reader names or `{{ name, max_query_duration }}` \
                 mappings, found {}",
                node.value.kind()
            ),
        );
        return None;
    };
    let mut readers: Vec<Reader> = Vec::new();
    let mut ok = true;
    for (i, item) in items.iter().enumerate() {
        let path = format!("{field}[{i}]");
        let reader = match &item.value {
            Value::Map(_) => {
                let Some(block) = Block::open(
                    ctx,
                    item,
                    &path,
                    Keys {
                        known: READER_KEYS,
                        elsewhere: &[],
                        note: Some(
                            "e.g. `{ name: trino-prod, engine: trino, version: \"476\", max_query_duration: 12h }`",
                        ),
                    },
                ) else {
                    ok = false;
                    continue;
                };
                let name = block.read(ctx, "name", read_nonempty);
                let engine = block.read(ctx, "engine", read_nonempty);
                let version = block.read(ctx, "version", read_nonempty);
                let max_query_duration = block.read(ctx, "max_query_duration", read_duration);
                let Field::Set(name) = name else {
                    if matches!(name, Field::Absent) {
                        ctx.error(
                            item.loc,
                            &block.field("name"),
                            "missing required key `name`: say which reader this is",
                        );
                    }
                    ok = false;
                    continue;
                };
                if matches!(max_query_duration, Field::Invalid)
                    || matches!(engine, Field::Invalid)
                    || matches!(version, Field::Invalid)
                {
                    ok = false;
                }
                Reader {
                    name: name.value,
                    engine: engine.get().cloned(),
                    version: version.get().cloned(),
                    max_query_duration: max_query_duration.get().copied(),
                }
            }
            _ => match read_nonempty(ctx, item, &path) {
                Some(name) => Reader {
                    name,
                    engine: None,
                    version: None,
                    max_query_duration: None,
                },
                None => {
                    ok = false;
                    continue;
                }
            },
        };
        if readers.iter().any(|r| r.name == reader.name) {
            ctx.error(
                item.loc,
                &path,
                format!("reader `{}` is listed twice: keep one", reader.name),
            );
            ok = false;
            continue;
        }
        readers.push(reader);
    }
    ok.then_some(readers)
}

fn plain_list(field: Field<Vec<crate::walk::At<String>>>) -> Vec<String> {
    match field {
        Field::Set(at) => at.value.into_iter().map(|item| item.value).collect(),
        Field::Absent | Field::Invalid => Vec::new(),
    }
}

fn read_u32(ctx: &mut Ctx<'_>, node: &Node, field: &str, min: u32, why_min: &str) -> Option<u32> {
    read_count(ctx, node, field, min.into(), u32::MAX.into(), why_min)
        .and_then(|n| u32::try_from(n).ok())
}

/// Reads `defaults:` (`table_level` false) or a table's `maintenance:` (true).
fn check_settings(
    ctx: &mut Ctx<'_>,
    node: &Node,
    path: &str,
    table_level: bool,
) -> Option<Settings> {
    let block = Block::open(
        ctx,
        node,
        path,
        Keys {
            known: if table_level {
                MAINTENANCE_KEYS
            } else {
                DEFAULTS_KEYS
            },
            elsewhere: if table_level { &[] } else { DEFAULTS_ELSEWHERE },
            note: Some(OPERATIONS_NOTE),
        },
    )?;
    let mut settings = Settings {
        paused: block.read(ctx, "paused", read_bool).get().copied(),
        importance: block
            .read(ctx, "importance", |ctx, node, field| {
                read_choice(ctx, node, field, &Importance::ALL.map(|i| (i.as_str(), i)))
            })
            .get()
            .copied(),
        auto_repair: block.read(ctx, "auto_repair", read_bool).get().copied(),
        timezone: block.read(ctx, "timezone", read_timezone).get().copied(),
        max_attempts: block
            .read(ctx, "max_attempts", |ctx, node, field| {
                read_u32(
                    ctx,
                    node,
                    field,
                    1,
                    "a job needs at least one attempt: set `max_attempts` to 1 or more",
                )
            })
            .get()
            .copied(),
        timeout: block
            .read(ctx, "timeout", |ctx, node, field| {
                let timeout = read_duration(ctx, node, field)?;
                if timeout.is_zero() {
                    ctx.error(
                        node.loc,
                        field,
                        "a zero timeout stops every job at once: set e.g. `2h`",
                    );
                    return None;
                }
                Some(timeout)
            })
            .get()
            .copied(),
        max_task_bytes: block
            .read(
                ctx,
                "max_task_bytes",
                nonzero_size("a task of 0 bytes holds no file: write e.g. `8GiB` (the default)"),
            )
            .get()
            .copied(),
        ..Settings::default()
    };
    for op in Operation::SCHEDULED {
        read_operation(ctx, &block, op, &mut settings);
    }
    Some(settings)
}

/// A size of more than 0 bytes; `message` says what to write instead of 0.
fn nonzero_size(message: &'static str) -> impl Fn(&mut Ctx<'_>, &Node, &str) -> Option<u64> {
    move |ctx, node, field| {
        let size = read_size(ctx, node, field)?;
        if size == 0 {
            ctx.error(node.loc, field, message);
            return None;
        }
        Some(size)
    }
}

/// One operation's block (`compaction:`, `vacuum:`, ...) of `defaults:` or `maintenance:`.
fn read_operation(ctx: &mut Ctx<'_>, block: &Block<'_>, op: Operation, settings: &mut Settings) {
    let key = op.inventory_key();
    let Some(node) = block.node(key) else {
        return;
    };
    let Some(op_block) = Block::open(
        ctx,
        node,
        &block.field(key),
        Keys {
            known: operation_keys(op),
            elsewhere: OP_ELSEWHERE,
            note: None,
        },
    ) else {
        return;
    };
    let draft = settings.operation_mut(op);
    draft.enabled = op_block.read(ctx, "enabled", read_bool);
    draft.schedule = op_block.read(ctx, "schedule", read_schedule).get().cloned();
    let at_least_one = |message: &'static str| {
        move |ctx: &mut Ctx<'_>, node: &Node, field: &str| read_u32(ctx, node, field, 1, message)
    };
    match op {
        Operation::Compact => {
            draft.target_file_size = op_block
                .read(
                    ctx,
                    "target_file_size",
                    nonzero_size(
                        "a target file size of 0 bytes is meaningless: write e.g. `512MiB`",
                    ),
                )
                .get()
                .copied();
            draft.min_small_files = op_block
                .read(ctx, "min_small_files", at_least_one("compaction needs at least one small file to rewrite: set `min_small_files` to 1 or more (default 10)"))
                .get()
                .copied();
        }
        Operation::Vacuum => {
            draft.full_every = op_block
                .read(
                    ctx,
                    "full_every",
                    at_least_one(
                        "`full_every: 1` makes every VACUUM a full listing; 0 has no meaning",
                    ),
                )
                .get()
                .copied();
        }
        Operation::Checkpoint => {
            draft.max_commits_since_checkpoint = op_block
                .read(ctx, "max_commits_since_checkpoint", |ctx, node, field| {
                    read_count(
                        ctx,
                        node,
                        field,
                        1,
                        u64::MAX,
                        "set at least 1 commit (default 100)",
                    )
                })
                .get()
                .copied();
        }
        Operation::Zorder | Operation::Purge | Operation::Repair => {}
    }
}
