//! Every validation rule of the inventory, through the public API: a bad inventory must
//! produce a problem at the right file, line and column, naming the table and key path,
//! with a message that says how to fix it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tablekeeper_inventory::{
    BudgetMode, Importance, Inventory, LoadError, LogStore, Operation, PinAt, Problem,
    RewriteOwner, Topology,
};

/// Joins lines with `\n`, so that line N of the inventory is `lines[N - 1]`.
fn yaml(lines: &[&str]) -> String {
    let mut text = lines.join("\n");
    text.push('\n');
    text
}

fn problems_of(text: &str) -> Vec<Problem> {
    match Inventory::parse(Path::new("inv.yaml"), text) {
        Err(LoadError::Invalid(problems)) => problems,
        Err(other) => panic!("expected problems, got {other}"),
        Ok(inv) => panic!("expected problems, got a valid inventory: {inv:#?}"),
    }
}

fn valid(text: &str) -> Inventory {
    match Inventory::parse(Path::new("inv.yaml"), text) {
        Ok(inventory) => inventory,
        Err(e) => panic!("expected a valid inventory, got:\n{e}"),
    }
}

/// Asserts that a problem exists at `line:column` for `table` and `field` whose message
/// contains `fragment`, and returns it.
#[track_caller]
fn expect(
    problems: &[Problem],
    line: usize,
    column: usize,
    table: Option<&str>,
    field: Option<&str>,
    fragment: &str,
) -> Problem {
    let found = problems.iter().find(|p| {
        p.line == line
            && p.column == column
            && p.table.as_deref() == table
            && p.field.as_deref() == field
            && p.message.contains(fragment)
    });
    match found {
        Some(p) => p.clone(),
        None => panic!(
            "no problem at {line}:{column} table {table:?} field {field:?} containing {fragment:?}; got:\n{}",
            problems.iter().map(|p| p.to_string()).collect::<Vec<_>>().join("\n")
        ),
    }
}

/// A one-table inventory with extra lines appended to the table (indented 4 spaces).
fn table_with(extra: &[&str]) -> String {
    let mut lines = vec![
        "tables:",
        "  - name: silver.events",
        "    path: s3://lake/silver/events",
        "    owner: data-platform",
    ];
    lines.extend_from_slice(extra);
    yaml(&lines)
}

const T: Option<&str> = Some("silver.events");

#[test]
fn problem_renders_in_the_contract_format() {
    let problems = problems_of(&table_with(&[
        "    retention:",
        "      deleted_file_retention: 2d",
    ]));
    let p = expect(
        &problems,
        6,
        31,
        T,
        Some("retention.deleted_file_retention"),
        "168h",
    );
    assert_eq!(
        p.to_string(),
        format!(
            "inv.yaml:6:31: error: table `silver.events`: `retention.deleted_file_retention`: {}",
            p.message
        )
    );
    assert!(
        p.message.contains(
            "set `retention.allow_short_retention: true` or raise `deleted_file_retention` to at least 168h"
        ),
        "{}",
        p.message
    );
    assert_eq!(problems.len(), 1, "{problems:#?}");
}

#[test]
fn problems_outside_a_table_have_no_table_part() {
    let problems = problems_of(&yaml(&["tabels: []"]));
    let p = expect(
        &problems,
        1,
        1,
        None,
        Some("tabels"),
        "did you mean `tables`?",
    );
    assert_eq!(
        p.to_string(),
        format!("inv.yaml:1:1: error: `tabels`: {}", p.message)
    );
}

#[test]
fn missing_required_keys() {
    let problems = problems_of(&yaml(&[
        "tables:",
        "  - name: a",
        "  - path: /data/b",
        "    owner: x",
    ]));
    expect(
        &problems,
        2,
        5,
        Some("a"),
        Some("path"),
        "missing required key `path`",
    );
    expect(
        &problems,
        2,
        5,
        Some("a"),
        Some("owner"),
        "missing required key `owner`",
    );
    expect(
        &problems,
        3,
        5,
        None,
        Some("name"),
        "missing required key `name`",
    );
    assert_eq!(problems.len(), 3, "{problems:#?}");
}

#[test]
fn null_or_empty_required_keys_are_missing() {
    let problems = problems_of(&yaml(&["name: a", "path:", "owner: ''"]));
    expect(
        &problems,
        1,
        1,
        Some("a"),
        Some("path"),
        "missing required key `path`",
    );
    expect(&problems, 3, 8, Some("a"), Some("owner"), "empty");
}

#[test]
fn table_names_must_be_plain_tokens() {
    let problems = problems_of(&yaml(&["name: silver events", "path: /data/t", "owner: x"]));
    expect(
        &problems,
        1,
        7,
        Some("silver events"),
        Some("name"),
        "may only use letters, digits",
    );
}

#[test]
fn a_name_must_be_a_string() {
    let problems = problems_of(&yaml(&["name: 2024", "path: /data/t", "owner: x"]));
    expect(&problems, 1, 7, None, Some("name"), "put it in quotes");
}

#[test]
fn duplicate_names_in_one_file() {
    let problems = problems_of(&yaml(&[
        "tables:",
        "  - name: a",
        "    path: /data/a",
        "    owner: x",
        "  - name: a",
        "    path: /data/b",
        "    owner: x",
    ]));
    let p = expect(
        &problems,
        5,
        11,
        Some("a"),
        Some("name"),
        "already used at inv.yaml:2:11",
    );
    assert!(p.message.contains("rename one"), "{}", p.message);
    assert_eq!(problems.len(), 1);
}

#[test]
fn duplicate_paths_are_compared_normalized() {
    let problems = problems_of(&yaml(&[
        "tables:",
        "  - name: a",
        "    path: s3://lake/t",
        "    owner: x",
        "  - name: b",
        "    path: S3://lake/t/",
        "    owner: x",
        "  - name: c",
        "    path: file:///data//c/",
        "    owner: x",
        "  - name: d",
        "    path: /data/./c",
        "    owner: x",
    ]));
    let p = expect(
        &problems,
        6,
        11,
        Some("b"),
        Some("path"),
        "already used by table `a` at inv.yaml:3:11",
    );
    assert!(p.message.contains("two compactions"), "{}", p.message);
    expect(
        &problems,
        12,
        11,
        Some("d"),
        Some("path"),
        "already used by table `c` at inv.yaml:9:11",
    );
    assert_eq!(problems.len(), 2, "{problems:#?}");
}

#[test]
fn paths_must_be_absolute_or_supported_urls() {
    let problems = problems_of(&yaml(&[
        "tables:",
        "  - name: a",
        "    path: data/a",
        "    owner: x",
        "  - name: b",
        "    path: s3a://lake/b",
        "    owner: x",
        "  - name: c",
        "    path: hdfs://nn/c",
        "    owner: x",
    ]));
    expect(&problems, 3, 11, Some("a"), Some("path"), "relative path");
    expect(&problems, 6, 11, Some("b"), Some("path"), "`s3://`");
    expect(
        &problems,
        9,
        11,
        Some("c"),
        Some("path"),
        "file://, s3://, gs://, az:// or abfss://",
    );
}

#[test]
fn bad_cron() {
    let problems = problems_of(&table_with(&[
        "    maintenance:",
        "      compaction: { schedule: \"0 2 * *\" }",
        "      vacuum:",
        "        schedule: \"0 0 1 * MON\"",
    ]));
    expect(
        &problems,
        6,
        31,
        T,
        Some("maintenance.compaction.schedule"),
        "has 4 fields",
    );
    expect(
        &problems,
        8,
        19,
        T,
        Some("maintenance.vacuum.schedule"),
        "both day-of-month and day-of-week",
    );
}

#[test]
fn bad_duration() {
    let problems = problems_of(&table_with(&[
        "    retention:",
        "      log_retention: 30 days please",
        "    maintenance:",
        "      timeout: 7",
    ]));
    expect(
        &problems,
        6,
        22,
        T,
        Some("retention.log_retention"),
        "interval 7 days",
    );
    expect(
        &problems,
        8,
        16,
        T,
        Some("maintenance.timeout"),
        "has no unit",
    );
}

#[test]
fn bad_size() {
    let problems = problems_of(&table_with(&[
        "    maintenance:",
        "      compaction:",
        "        target_file_size: huge",
    ]));
    expect(
        &problems,
        7,
        27,
        T,
        Some("maintenance.compaction.target_file_size"),
        "512MiB",
    );
}

#[test]
fn bad_timezone() {
    let problems = problems_of(&table_with(&[
        "    maintenance:",
        "      timezone: Europe/Berlinn",
    ]));
    expect(
        &problems,
        6,
        17,
        T,
        Some("maintenance.timezone"),
        "did you mean `Europe/Berlin`?",
    );
}

#[test]
fn short_retention_needs_allow_short_retention() {
    let problems = problems_of(&table_with(&[
        "    retention:",
        "      deleted_file_retention: 48h",
    ]));
    expect(
        &problems,
        6,
        31,
        T,
        Some("retention.deleted_file_retention"),
        "allow_short_retention: true",
    );
    let inv = valid(&table_with(&[
        "    retention:",
        "      deleted_file_retention: interval 2 days",
        "      allow_short_retention: true",
    ]));
    assert_eq!(
        inv.tables[0].retention.deleted_file_retention,
        Duration::from_secs(2 * 86_400)
    );
    assert!(inv.tables[0].retention.allow_short_retention);
}

#[test]
fn log_retention_shorter_than_file_retention() {
    let problems = problems_of(&table_with(&[
        "    retention:",
        "      deleted_file_retention: 14d",
        "      log_retention: 10d",
    ]));
    let p = expect(
        &problems,
        7,
        22,
        T,
        Some("retention.log_retention"),
        "time travel",
    );
    assert!(
        p.message
            .contains("raise `log_retention` to at least 14days"),
        "{}",
        p.message
    );
    // against the 30-day default log retention
    let problems = problems_of(&table_with(&[
        "    retention:",
        "      deleted_file_retention: 60d",
    ]));
    expect(
        &problems,
        6,
        31,
        T,
        Some("retention.deleted_file_retention"),
        "shorter than",
    );
}

#[test]
fn an_erasure_deadline_must_outlast_the_file_retention() {
    // not longer than the default 7-day file retention: VACUUM may not delete in time
    let problems = problems_of(&table_with(&[
        "    retention:",
        "      erasure_deadline: 7d",
    ]));
    let p = expect(
        &problems,
        6,
        25,
        T,
        Some("retention.erasure_deadline"),
        "is not longer than `deleted_file_retention` (7days)",
    );
    assert!(
        p.message.contains("raise `erasure_deadline` above 7days"),
        "{}",
        p.message
    );
    let problems = problems_of(&table_with(&[
        "    retention:",
        "      deleted_file_retention: 14d",
        "      log_retention: 30d",
        "      erasure_deadline: 10d",
    ]));
    expect(
        &problems,
        8,
        25,
        T,
        Some("retention.erasure_deadline"),
        "14days",
    );
    let problems = problems_of(&table_with(&[
        "    retention:",
        "      erasure_deadline: soon",
    ]));
    expect(&problems, 6, 25, T, Some("retention.erasure_deadline"), "");
    let inv = valid(&table_with(&[
        "    retention:",
        "      erasure_deadline: 30d",
    ]));
    assert_eq!(
        inv.tables[0].retention.erasure_deadline,
        Some(Duration::from_secs(30 * 86_400))
    );
    assert_eq!(
        valid(&table_with(&[])).tables[0].retention.erasure_deadline,
        None
    );
}

#[test]
fn purge_has_a_block_with_a_schedule_and_a_switch() {
    let inv = valid(&table_with(&[
        "    maintenance:",
        "      purge: { schedule: \"0 6 * * *\" }",
    ]));
    let t = &inv.tables[0];
    assert!(t.operation_enabled(Operation::Purge));
    assert_eq!(
        t.schedule(Operation::Purge)
            .map(ToString::to_string)
            .as_deref(),
        Some("0 6 * * *")
    );
    // the built-in default, and the switch
    let t = &valid(&table_with(&[])).tables[0];
    assert_eq!(
        t.schedule(Operation::Purge)
            .map(ToString::to_string)
            .as_deref(),
        Some("0 5 * * *")
    );
    let off = valid(&table_with(&[
        "    maintenance:",
        "      purge: { enabled: false }",
    ]));
    assert!(!off.tables[0].operation_enabled(Operation::Purge));
    // only its own keys
    let problems = problems_of(&table_with(&[
        "    maintenance:",
        "      purge:",
        "        full_every: 2",
    ]));
    expect(
        &problems,
        7,
        9,
        T,
        Some("maintenance.purge.full_every"),
        "only `vacuum` takes `full_every`",
    );
    let problems = problems_of(&table_with(&[
        "    maintenance:",
        "      purge: { schedule: \"61 * * * *\" }",
    ]));
    expect(&problems, 6, 26, T, Some("maintenance.purge.schedule"), "");
}

#[test]
fn zorder_must_not_name_a_partition_column() {
    let problems = problems_of(&table_with(&[
        "    layout:",
        "      partition_by: [event_date]",
        "      zorder: [eventType, event_date]",
    ]));
    expect(
        &problems,
        7,
        27,
        T,
        Some("layout.zorder"),
        "`event_date` is a partition column",
    );
    assert_eq!(problems.len(), 1);
}

#[test]
fn column_lists_take_names_quoted_in_backticks_as_spark_does() {
    let inventory = valid(&table_with(&[
        "    layout:",
        "      partition_by: [\"`event.date`\"]",
        "      zorder: [\"`id.num`\", \"payload.`a b`\"]",
    ]));
    let layout = &inventory.tables[0].layout;
    assert_eq!(layout.partition_by, ["event.date"]);
    assert_eq!(layout.zorder, ["`id.num`", "payload.`a b`"]);

    let problems = problems_of(&table_with(&[
        "    layout:",
        "      partition_by: [\"`event_date`\"]",
        "      zorder: [\"`id.num\", \"`event_date`\"]",
    ]));
    expect(
        &problems,
        7,
        16,
        T,
        Some("layout.zorder"),
        "opens a backtick it never closes",
    );
    expect(
        &problems,
        7,
        27,
        T,
        Some("layout.zorder"),
        "is a partition column",
    );
    assert_eq!(problems.len(), 2, "{problems:?}");
}

#[test]
fn zorder_enabled_without_columns() {
    let problems = problems_of(&table_with(&[
        "    maintenance:",
        "      zorder: { enabled: true }",
    ]));
    expect(
        &problems,
        6,
        26,
        T,
        Some("maintenance.zorder.enabled"),
        "names no columns",
    );
}

#[test]
fn multi_writer_s3_needs_a_log_store() {
    let problems = problems_of(&table_with(&[
        "    writers:",
        "      topology: multi-writer",
    ]));
    let p = expect(
        &problems,
        6,
        17,
        T,
        Some("writers.topology"),
        "must declare `writers.log_store`",
    );
    assert!(p.message.contains("conditional put"), "{}", p.message);
    assert!(p.message.contains("lose commits"), "{}", p.message);
    let inv = valid(&table_with(&[
        "    writers:",
        "      topology: multi-writer",
        "      log_store: conditional-put",
    ]));
    assert_eq!(inv.tables[0].writers.topology, Topology::MultiWriter);
    assert_eq!(
        inv.tables[0].writers.log_store,
        Some(LogStore::ConditionalPut)
    );
    // other stores have atomic put-if-absent: no log store needed, and none allowed
    valid(&yaml(&[
        "name: g",
        "path: gs://lake/g",
        "owner: x",
        "writers: { topology: multi-writer }",
    ]));
    let problems = problems_of(&yaml(&[
        "name: g",
        "path: gs://lake/g",
        "owner: x",
        "writers: { log_store: dynamodb }",
    ]));
    expect(
        &problems,
        4,
        23,
        Some("g"),
        Some("writers.log_store"),
        "only applies to s3://",
    );
}

#[test]
fn unknown_topology_and_log_store_values_list_the_allowed_ones() {
    let problems = problems_of(&table_with(&[
        "    writers:",
        "      topology: many-writers",
        "      log_store: zookeeper",
    ]));
    expect(
        &problems,
        6,
        17,
        T,
        Some("writers.topology"),
        "allowed values are single-writer, multi-writer",
    );
    expect(
        &problems,
        7,
        18,
        T,
        Some("writers.log_store"),
        "allowed values are conditional-put, dynamodb",
    );
}

#[test]
fn readers_may_name_their_engine_and_version() {
    let inv = valid(&table_with(&[
        "    readers: [{ name: trino-prod, engine: trino, version: \"476\" }]",
    ]));
    let reader = &inv.tables[0].readers[0];
    assert_eq!(
        (reader.engine.as_deref(), reader.version.as_deref()),
        (Some("trino"), Some("476"))
    );
    let problems = problems_of(&table_with(&[
        "    readers:",
        "      - { name: a, engine: trino, version: 476 }",
        "      - { name: b, engin: trino }",
    ]));
    expect(
        &problems,
        6,
        44,
        T,
        Some("readers[0].version"),
        "put it in quotes",
    );
    expect(
        &problems,
        7,
        20,
        T,
        Some("readers[1].engin"),
        "did you mean `engine`",
    );
}

#[test]
fn readers_may_say_how_long_their_queries_run() {
    let inv = valid(&table_with(&[
        "    readers: [spark-4.0-platform-image, { name: trino-prod, max_query_duration: 12h }]",
    ]));
    let t = &inv.tables[0];
    assert_eq!(t.readers[0].name, "spark-4.0-platform-image");
    assert_eq!(t.readers[0].max_query_duration, None);
    assert_eq!(
        t.readers[1].max_query_duration,
        Some(Duration::from_secs(12 * 3600))
    );
    assert_eq!(
        t.longest_reader(),
        Some(("trino-prod", Duration::from_secs(12 * 3600)))
    );
    assert_eq!(
        t.vacuum_window(),
        Duration::from_secs(7 * 86_400),
        "7d is longer"
    );
    let inv = valid(&table_with(&[
        "    retention: { deleted_file_retention: 1h, allow_short_retention: true }",
        "    readers: [{ name: trino-prod, max_query_duration: 12h }]",
    ]));
    assert_eq!(
        inv.tables[0].vacuum_window(),
        Duration::from_secs(12 * 3600),
        "the longest query wins over a shorter retention"
    );

    let problems = problems_of(&table_with(&[
        "    readers:",
        "      - { name: trino-prod, max_query_time: 12h }",
        "      - { max_query_duration: 2h }",
        "      - { name: a, max_query_duration: forever }",
        "      - spark",
        "      - spark",
    ]));
    expect(
        &problems,
        6,
        29,
        T,
        Some("readers[0].max_query_time"),
        "did you mean `max_query_duration`",
    );
    expect(
        &problems,
        7,
        9,
        T,
        Some("readers[1].name"),
        "missing required key `name`",
    );
    expect(
        &problems,
        8,
        40,
        T,
        Some("readers[2].max_query_duration"),
        "is not a duration",
    );
    expect(&problems, 10, 9, T, Some("readers[4]"), "listed twice");
    // deleted rows' files wait for the reader's queries too
    let problems = problems_of(&table_with(&[
        "    retention: { deleted_file_retention: 7d, erasure_deadline: 10d }",
        "    readers: [{ name: trino-prod, max_query_duration: 14d }]",
    ]));
    let p = problems
        .iter()
        .find(|p| p.field.as_deref() == Some("retention.erasure_deadline"))
        .unwrap_or_else(|| panic!("{problems:?}"));
    assert!(p.message.contains("reader `trino-prod`"), "{}", p.message);
}

#[test]
fn rewrites_name_who_compacts_the_table() {
    let inv = valid(&table_with(&["    writers: { rewrites: external }"]));
    let table = &inv.tables[0];
    assert_eq!(table.writers.rewrites, RewriteOwner::External);
    for op in [Operation::Compact, Operation::Zorder, Operation::Purge] {
        assert!(!table.operation_enabled(op), "{op} stays off");
    }
    assert!(table.operation_enabled(Operation::Vacuum));
    assert!(table.operation_enabled(Operation::Checkpoint));
    let default = valid(&table_with(&[]));
    assert_eq!(
        default.tables[0].writers.rewrites,
        RewriteOwner::Tablekeeper
    );

    let problems = problems_of(&table_with(&["    writers:", "      rewrites: spark"]));
    expect(
        &problems,
        6,
        17,
        T,
        Some("writers.rewrites"),
        "allowed values are tablekeeper, external",
    );
    let problems = problems_of(&table_with(&["    writers:", "      rewrite: external"]));
    expect(
        &problems,
        6,
        7,
        T,
        Some("writers.rewrite"),
        "did you mean `rewrites`",
    );
}

#[test]
fn unknown_operation_block_suggests_and_lists_operations() {
    let problems = problems_of(&table_with(&[
        "    maintenance:",
        "      compcation: { enabled: false }",
    ]));
    let p = expect(
        &problems,
        6,
        7,
        T,
        Some("maintenance.compcation"),
        "did you mean `compaction`?",
    );
    assert!(
        p.message.contains("compaction, zorder, vacuum, checkpoint"),
        "{}",
        p.message
    );
}

#[test]
fn unknown_keys_anywhere_with_did_you_mean() {
    let problems = problems_of(&yaml(&[
        "defaults:",
        "  vacuum: { full_evry: 2 }",
        "tables:",
        "  - name: a",
        "    path: /data/a",
        "    owners: x",
        "    retention:",
        "      colour: blue",
    ]));
    expect(
        &problems,
        2,
        13,
        None,
        Some("defaults.vacuum.full_evry"),
        "did you mean `full_every`?",
    );
    expect(
        &problems,
        6,
        5,
        Some("a"),
        Some("owners"),
        "did you mean `owner`?",
    );
    expect(
        &problems,
        4,
        5,
        Some("a"),
        Some("owner"),
        "missing required key",
    );
    expect(
        &problems,
        8,
        7,
        Some("a"),
        Some("retention.colour"),
        "allowed keys are deleted_file_retention, log_retention, allow_short_retention",
    );
}

#[test]
fn misplaced_keys_say_where_they_belong() {
    let problems = problems_of(&table_with(&[
        "    deleted_file_retention: 7d",
        "    schedule: \"@daily\"",
    ]));
    expect(
        &problems,
        5,
        5,
        T,
        Some("deleted_file_retention"),
        "under `retention:`",
    );
    expect(
        &problems,
        6,
        5,
        T,
        Some("schedule"),
        "maintenance.<operation>.schedule",
    );
}

#[test]
fn yaml_syntax_errors_are_located() {
    let problems = problems_of(&yaml(&["tables:", "  - name: [a, b", "    path: /x"]));
    assert_eq!(problems.len(), 1, "{problems:#?}");
    let p = &problems[0];
    assert!(p.message.starts_with("invalid YAML"), "{p}");
    assert!(p.line >= 2, "{p}");
    assert_eq!(p.table, None);
    assert_eq!(p.field, None);
}

#[test]
fn wrong_types() {
    let problems = problems_of(&table_with(&[
        "    layout:",
        "      partition_by: event_date",
        "      optimize_write: yes",
        "    readers: {spark: 4}",
        "    maintenance:",
        "      max_attempts: \"3\"",
        "      paused: 1",
        "      vacuum: weekly",
    ]));
    expect(
        &problems,
        6,
        21,
        T,
        Some("layout.partition_by"),
        "write `[event_date]`",
    );
    expect(
        &problems,
        7,
        23,
        T,
        Some("layout.optimize_write"),
        "expected `true` or `false`, found `yes`",
    );
    expect(
        &problems,
        8,
        14,
        T,
        Some("readers"),
        "expected a list of reader names or `{ name, max_query_duration }` mappings, found a mapping",
    );
    expect(
        &problems,
        10,
        21,
        T,
        Some("maintenance.max_attempts"),
        "without quotes",
    );
    expect(
        &problems,
        11,
        15,
        T,
        Some("maintenance.paused"),
        "expected `true` or `false`, found a number",
    );
    expect(
        &problems,
        12,
        15,
        T,
        Some("maintenance.vacuum"),
        "expected a mapping with keys enabled, schedule, full_every",
    );
}

#[test]
fn zero_counts_are_refused() {
    let problems = problems_of(&table_with(&[
        "    maintenance:",
        "      max_attempts: 0",
        "      compaction: { min_small_files: 0 }",
        "      vacuum: { full_every: 0 }",
        "      checkpoint: { max_commits_since_checkpoint: 0 }",
    ]));
    expect(
        &problems,
        6,
        21,
        T,
        Some("maintenance.max_attempts"),
        "at least one attempt",
    );
    expect(
        &problems,
        7,
        38,
        T,
        Some("maintenance.compaction.min_small_files"),
        "at least one small file",
    );
    expect(
        &problems,
        8,
        29,
        T,
        Some("maintenance.vacuum.full_every"),
        "`full_every: 1`",
    );
    expect(
        &problems,
        9,
        51,
        T,
        Some("maintenance.checkpoint.max_commits_since_checkpoint"),
        "at least 1",
    );
    assert_eq!(problems.len(), 4, "{problems:#?}");
}

#[test]
fn repeated_keys_are_reported() {
    let problems = problems_of(&yaml(&["name: a", "path: /data/a", "owner: x", "owner: y"]));
    expect(
        &problems,
        4,
        1,
        Some("a"),
        Some("owner"),
        "set twice in this mapping (first at line 3)",
    );
}

#[test]
fn several_problems_in_one_file_are_all_reported_in_order() {
    let problems = problems_of(&yaml(&[
        "tables:",
        "  - name: a",
        "    path: relative/a",
        "    owner: x",
        "    maintenance:",
        "      compaction: { schedule: never }",
        "  - name: b",
        "    path: /data/b",
        "    ownr: y",
        "    retention: { deleted_file_retention: 1d }",
    ]));
    let lines: Vec<(usize, usize)> = problems.iter().map(|p| (p.line, p.column)).collect();
    let mut sorted = lines.clone();
    sorted.sort();
    assert_eq!(lines, sorted, "problems must be sorted by line and column");
    expect(&problems, 3, 11, Some("a"), Some("path"), "relative");
    expect(
        &problems,
        6,
        31,
        Some("a"),
        Some("maintenance.compaction.schedule"),
        "1 fields",
    );
    expect(
        &problems,
        7,
        5,
        Some("b"),
        Some("owner"),
        "missing required key",
    );
    expect(
        &problems,
        9,
        5,
        Some("b"),
        Some("ownr"),
        "did you mean `owner`?",
    );
    expect(
        &problems,
        10,
        42,
        Some("b"),
        Some("retention.deleted_file_retention"),
        "168h",
    );
    assert_eq!(problems.len(), 5, "{problems:#?}");
}

#[test]
fn empty_files_hold_no_tables() {
    assert!(valid("").tables.is_empty());
    assert!(valid("# placeholder\n").tables.is_empty());
    assert!(valid("tables: []\n").tables.is_empty());
}

#[test]
fn a_file_that_is_not_a_mapping() {
    let problems = problems_of(&yaml(&["- name: a", "  path: /a", "  owner: x"]));
    expect(&problems, 1, 1, None, None, "a file holds either `tables:`");
    let problems = problems_of(&yaml(&["tables: silver.events"]));
    expect(
        &problems,
        1,
        9,
        None,
        Some("tables"),
        "expected a list of tables",
    );
}

#[test]
fn builtin_defaults_apply() {
    let inv = valid(&yaml(&["name: t", "path: /data/t", "owner: x"]));
    let t = inv.table("t").expect("table t");
    assert_eq!(t.concurrency_key, "table:t");
    assert_eq!(t.timezone, chrono_tz::Tz::UTC);
    assert_eq!(t.writers.topology, Topology::SingleWriter);
    assert!(!t.layout.optimize_write);
    assert!(!t.paused);
    assert_eq!(t.max_attempts, 3);
    assert_eq!(t.timeout, Duration::from_secs(2 * 3600));
    assert_eq!(
        t.retention.deleted_file_retention,
        Duration::from_secs(7 * 86_400)
    );
    assert_eq!(t.retention.log_retention, Duration::from_secs(30 * 86_400));
    assert!(t.compaction.enabled);
    assert_eq!(t.compaction.schedule.as_str(), "0 2 * * *");
    assert_eq!(t.compaction.target_file_size, 512 * 1024 * 1024);
    assert_eq!(t.compaction.min_small_files, 10);
    assert!(!t.zorder.enabled, "no zorder columns, no zorder");
    assert_eq!(t.zorder.schedule.as_str(), "0 4 * * 0");
    assert!(t.vacuum.enabled);
    assert_eq!(t.vacuum.schedule.as_str(), "0 3 * * 0");
    assert_eq!(t.vacuum.full_every, 4);
    assert!(t.checkpoint.enabled);
    assert_eq!(t.checkpoint.schedule.as_str(), "*/30 * * * *");
    assert_eq!(t.checkpoint.max_commits_since_checkpoint, 100);
    assert_eq!(
        (t.source.file.as_path(), t.source.line, t.source.column),
        (Path::new("inv.yaml"), 1, 1)
    );
    for op in Operation::ALL {
        assert_eq!(t.operation_enabled(op), op != Operation::Zorder);
    }
    assert_eq!(t.schedule(Operation::Compact), Some(&t.compaction.schedule));
    assert_eq!(t.schedule(Operation::Zorder), Some(&t.zorder.schedule));
    assert_eq!(t.schedule(Operation::Vacuum), Some(&t.vacuum.schedule));
    assert_eq!(
        t.schedule(Operation::Checkpoint),
        Some(&t.checkpoint.schedule)
    );
}

#[test]
fn defaults_merge_field_by_field_under_the_table() {
    let inv = valid(&yaml(&[
        "defaults:",
        "  timezone: Europe/Berlin",
        "  max_attempts: 5",
        "  timeout: 30m",
        "  compaction: { schedule: \"0 1 * * *\", target_file_size: 256MiB, min_small_files: 20 }",
        "  zorder: { schedule: \"@weekly\" }",
        "  vacuum: { enabled: false, full_every: 2 }",
        "  checkpoint: { max_commits_since_checkpoint: 50 }",
        "tables:",
        "  - name: a",
        "    path: /data/a",
        "    owner: x",
        "    layout: { zorder: [id] }",
        "    maintenance:",
        "      timezone: UTC",
        "      compaction: { schedule: \"0 */6 * * *\" }",
        "      vacuum: { enabled: true }",
        "  - name: b",
        "    path: /data/b",
        "    owner: x",
        "    concurrency_key: shared",
        "    maintenance: { paused: true, max_attempts: 1 }",
    ]));
    let a = inv.table("a").expect("a");
    assert_eq!(
        a.timezone,
        chrono_tz::Tz::UTC,
        "the table's own timezone wins"
    );
    assert_eq!(a.max_attempts, 5);
    assert_eq!(a.timeout, Duration::from_secs(30 * 60));
    assert_eq!(a.compaction.schedule.as_str(), "0 */6 * * *");
    assert_eq!(
        a.compaction.target_file_size,
        256 * 1024 * 1024,
        "merged field by field"
    );
    assert_eq!(a.compaction.min_small_files, 20);
    assert!(a.zorder.enabled, "columns declared");
    assert_eq!(a.zorder.schedule.scheduler_expression(), "0 0 0 * * 0");
    assert!(a.vacuum.enabled, "the table re-enables vacuum");
    assert_eq!(a.vacuum.full_every, 2);
    assert_eq!(a.checkpoint.max_commits_since_checkpoint, 50);
    let b = inv.table("b").expect("b");
    assert_eq!(b.timezone, chrono_tz::Tz::Europe__Berlin);
    assert_eq!(b.compaction.schedule.as_str(), "0 1 * * *");
    assert!(!b.vacuum.enabled, "vacuum off fleet-wide");
    assert!(!b.zorder.enabled);
    assert!(b.paused);
    assert_eq!(b.max_attempts, 1);
    assert_eq!(b.concurrency_key, "shared");
    assert_eq!(
        inv.tables
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>(),
        ["a", "b"]
    );
}

#[test]
fn the_design_example_is_valid() {
    let inv = valid(&yaml(&[
        "defaults:",
        "  timezone: UTC",
        "  compaction: { schedule: \"0 2 * * *\", target_file_size: 512MiB, min_small_files: 10 }",
        "  zorder:     { schedule: \"0 4 * * 0\" }",
        "  vacuum:     { schedule: \"0 3 * * 0\" }",
        "  checkpoint: { schedule: \"*/30 * * * *\", max_commits_since_checkpoint: 100 }",
        "  max_attempts: 3",
        "  timeout: 2h",
        "tables:",
        "  - name: silver.events",
        "    path: s3://lake/silver/events",
        "    owner: data-platform",
        "    concurrency_key: null",
        "    writers:",
        "      topology: single-writer",
        "      log_store: conditional-put",
        "      commit_budget_per_hour: 60",
        "    layout:",
        "      partition_by: [event_date]",
        "      optimize_write: true",
        "      zorder: [eventType]",
        "    retention:",
        "      deleted_file_retention: 7d",
        "      log_retention: 30d",
        "      allow_short_retention: false",
        "    protocol:",
        "      features: [changeDataFeed]",
        "    readers: [spark-4.0-platform-image, trino-prod]",
        "    maintenance:",
        "      paused: false",
        "      compaction: { enabled: true, schedule: \"0 */6 * * *\" }",
        "      vacuum: { enabled: true }",
    ]));
    let t = inv.table("silver.events").expect("table");
    assert_eq!(t.concurrency_key, "table:silver.events");
    assert_eq!(t.writers.commit_budget_per_hour, Some(60));
    assert_eq!(t.layout.zorder, ["eventType"]);
    assert_eq!(t.protocol.features, ["changeDataFeed"]);
    let readers: Vec<&str> = t.readers.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(readers, ["spark-4.0-platform-image", "trino-prod"]);
    assert!(t.zorder.enabled);
    assert_eq!(t.source.line, 10);
}

// ---- files and directories ----

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write test file");
    path
}

#[test]
fn directory_duplicates_across_files_name_both_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "10-a.yaml",
        &yaml(&["name: events", "path: s3://lake/events", "owner: x"]),
    );
    write(
        dir.path(),
        "20-b.yml",
        &yaml(&["name: events", "path: s3://lake/events/", "owner: y"]),
    );
    write(dir.path(), "notes.txt", "not an inventory file");
    let problems = match Inventory::load(dir.path()) {
        Err(LoadError::Invalid(problems)) => problems,
        other => panic!("expected problems, got {other:?}"),
    };
    let first = dir.path().join("10-a.yaml");
    let second = dir.path().join("20-b.yml");
    let name = problems
        .iter()
        .find(|p| p.field.as_deref() == Some("name"))
        .expect("name problem");
    assert_eq!(
        (name.file.as_path(), name.line, name.column),
        (second.as_path(), 1, 7)
    );
    assert!(
        name.message.contains(&format!("{}:1:7", first.display())),
        "{name}"
    );
    let path = problems
        .iter()
        .find(|p| p.field.as_deref() == Some("path"))
        .expect("path problem");
    assert_eq!(
        (path.file.as_path(), path.line, path.column),
        (second.as_path(), 2, 7)
    );
    assert!(
        path.message.contains(&format!("{}:2:7", first.display())),
        "{path}"
    );
    assert_eq!(problems.len(), 2);
}

#[test]
fn a_second_defaults_block_names_both_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = write(
        dir.path(),
        "a.yaml",
        &yaml(&["defaults: { max_attempts: 2 }", "tables: []"]),
    );
    let b = write(
        dir.path(),
        "b.yaml",
        &yaml(&["tables: []", "defaults:", "  timeout: 1h"]),
    );
    let problems = match Inventory::load_paths(&[a.clone(), b.clone()]) {
        Err(LoadError::Invalid(problems)) => problems,
        other => panic!("expected problems, got {other:?}"),
    };
    assert_eq!(problems.len(), 1, "{problems:#?}");
    let p = &problems[0];
    assert_eq!((p.file.as_path(), p.line, p.column), (b.as_path(), 2, 1));
    assert_eq!(p.field.as_deref(), Some("defaults"));
    assert!(p.message.contains(&format!("{}:1:1", a.display())), "{p}");
}

#[test]
fn defaults_in_one_file_apply_to_tables_in_every_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "a.yaml",
        &yaml(&["name: first", "path: /data/first", "owner: x"]),
    );
    write(
        dir.path(),
        "b.yaml",
        &yaml(&["defaults: { max_attempts: 7 }"]),
    );
    let inv = Inventory::load(dir.path()).expect("valid");
    assert_eq!(inv.table("first").expect("first").max_attempts, 7);
    assert_eq!(
        inv.sources,
        [dir.path().join("a.yaml"), dir.path().join("b.yaml")]
    );
}

#[test]
fn the_same_file_named_twice_is_read_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = write(
        dir.path(),
        "a.yaml",
        &yaml(&["name: t", "path: /data/t", "owner: x"]),
    );
    let inv = Inventory::load_paths(&[a, dir.path().to_path_buf()]).expect("valid");
    assert_eq!(inv.tables.len(), 1);
}

#[test]
fn unusable_inputs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("missing.yaml");
    match Inventory::load(&missing) {
        Err(LoadError::Unusable { path, reason }) => {
            assert_eq!(path, missing);
            assert!(reason.contains("no such file"), "{reason}");
        }
        other => panic!("expected unusable, got {other:?}"),
    }
    let empty_dir = dir.path().join("empty");
    std::fs::create_dir(&empty_dir).expect("mkdir");
    write(&empty_dir, "README.md", "no yaml here");
    match Inventory::load(&empty_dir) {
        Err(LoadError::Unusable { reason, .. }) => {
            assert!(reason.contains("no `*.yaml`"), "{reason}")
        }
        other => panic!("expected unusable, got {other:?}"),
    }
    let binary = dir.path().join("binary.yaml");
    std::fs::write(&binary, [0x6e, 0x61, 0xff, 0xfe]).expect("write");
    match Inventory::load(&binary) {
        Err(LoadError::Unusable { reason, .. }) => assert!(reason.contains("UTF-8"), "{reason}"),
        other => panic!("expected unusable, got {other:?}"),
    }
    match Inventory::load_paths(&[]) {
        Err(LoadError::Unusable { .. }) => {}
        other => panic!("expected unusable, got {other:?}"),
    }
}

#[test]
fn invalid_error_display_lists_every_problem() {
    let err = Inventory::parse(
        Path::new("x.yaml"),
        &yaml(&["name: a", "path: rel", "ownr: x"]),
    )
    .expect_err("invalid");
    let text = err.to_string();
    assert_eq!(err.problems().len(), 3, "{text}");
    for p in err.problems() {
        assert!(text.contains(&p.to_string()), "{text}");
    }
}

#[test]
fn overwrite_windows_are_read_and_checked() {
    let inv = valid(&table_with(&[
        "    writers:",
        "      overwrites: { schedule: \"0 1 * * *\", duration: 2h }",
    ]));
    let window = inv.tables[0].writers.overwrites.as_ref().expect("window");
    assert_eq!(window.schedule.as_str(), "0 1 * * *");
    assert_eq!(window.duration, Duration::from_secs(7200));
    assert!(valid(&table_with(&[])).tables[0]
        .writers
        .overwrites
        .is_none());

    let problems = problems_of(&table_with(&[
        "    writers:",
        "      overwrites:",
        "        schedule: \"0 1 * *\"",
        "        duraton: 2h",
    ]));
    expect(
        &problems,
        8,
        9,
        T,
        Some("writers.overwrites.duraton"),
        "did you mean `duration`",
    );
    expect(&problems, 7, 19, T, Some("writers.overwrites.schedule"), "");
    expect(
        &problems,
        7,
        9,
        T,
        Some("writers.overwrites.duration"),
        "missing `duration`",
    );

    let problems = problems_of(&table_with(&[
        "    writers:",
        "      overwrites: { schedule: \"@daily\", duration: 0s }",
    ]));
    expect(
        &problems,
        6,
        51,
        T,
        Some("writers.overwrites.duration"),
        "a window of 0 protects nothing",
    );
}

#[test]
fn auto_repair_defaults_on_and_can_be_switched_off() {
    assert!(valid(&table_with(&[])).tables[0].auto_repair);
    assert!(valid(&table_with(&[])).tables[0].operation_enabled(Operation::Repair));
    let off = valid(&table_with(&[
        "    maintenance:",
        "      auto_repair: false",
    ]));
    assert!(!off.tables[0].auto_repair);
    assert!(!off.tables[0].operation_enabled(Operation::Repair));
    let fleet_off = valid(&yaml(&[
        "defaults:",
        "  auto_repair: false",
        "tables:",
        "  - name: a",
        "    path: /data/a",
        "    owner: o",
        "  - name: b",
        "    path: /data/b",
        "    owner: o",
        "    maintenance: { auto_repair: true }",
    ]));
    assert!(!fleet_off.tables[0].auto_repair);
    assert!(fleet_off.tables[1].auto_repair);
    let problems = problems_of(&table_with(&[
        "    maintenance:",
        "      auto_repair: sometimes",
    ]));
    expect(&problems, 6, 20, T, Some("maintenance.auto_repair"), "");
}

#[test]
fn pins_clones_and_the_average_file_size_threshold() {
    let inv = valid(&table_with(&[
        "    layout: { min_average_file_size: 64MiB }",
        "    retention:",
        "      clones: [s3://lake/sandbox/events_test/, /data/clones/events]",
        "      pins:",
        "        - { version: 1482, until: 2027-03-01, reason: \"model run 88\" }",
        "        - { timestamp: 2026-11-01T12:00:00Z, until: 2027-01-01T00:00:00Z }",
    ]));
    let t = &inv.tables[0];
    assert_eq!(t.layout.min_average_file_size, 64 * 1024 * 1024);
    assert_eq!(
        t.retention.clones,
        ["s3://lake/sandbox/events_test", "/data/clones/events"],
        "normalized like `path`"
    );
    let until = |text: &str| text.parse::<chrono::DateTime<chrono::Utc>>().unwrap();
    assert_eq!(t.retention.pins[0].at, PinAt::Version(1482));
    assert_eq!(
        t.retention.pins[0].until,
        until("2027-03-02T00:00:00Z"),
        "a date holds through that day"
    );
    assert_eq!(t.retention.pins[0].reason, "model run 88");
    assert_eq!(
        t.retention.pins[1].at,
        PinAt::Timestamp(until("2026-11-01T12:00:00Z"))
    );
    assert_eq!(t.retention.pins[1].reason, "");
    // the default threshold: a quarter of the compaction target
    let inv = valid(&table_with(&[
        "    maintenance: { compaction: { target_file_size: 256MiB } }",
    ]));
    assert_eq!(inv.tables[0].layout.min_average_file_size, 64 * 1024 * 1024);

    let problems = problems_of(&table_with(&[
        "    layout: { min_average_file_size: big }",
        "    retention:",
        "      clones: [s3a://lake/x, s3://lake/silver/events]",
        "      pins:",
        "        - { version: 1, timestamp: 2026-01-01, until: 2027-01-01 }",
        "        - { version: 2 }",
        "        - { versoin: 3, until: 2027-01-01 }",
        "        - { version: 4, until: next week }",
        "        - { until: 2027-01-01 }",
    ]));
    let at = |field: &str| {
        problems
            .iter()
            .find(|p| p.field.as_deref() == Some(field))
            .unwrap_or_else(|| panic!("no problem at `{field}`: {problems:#?}"))
            .clone()
    };
    assert_eq!(at("layout.min_average_file_size").line, 5);
    let clone = at("retention.clones[0]");
    assert_eq!(clone.line, 7);
    assert!(clone.message.contains("s3a"), "{}", clone.message);
    assert!(at("retention.pins[0]").message.contains("not both"));
    assert!(at("retention.pins[1].until")
        .message
        .contains("missing required key `until`"));
    let typo = at("retention.pins[2].versoin");
    assert_eq!(typo.line, 11);
    assert!(
        typo.message.contains("did you mean `version`"),
        "{}",
        typo.message
    );
    let date = at("retention.pins[3].until");
    assert_eq!(date.line, 12);
    assert!(date.message.contains("not a date"), "{}", date.message);
    assert!(at("retention.pins[4]")
        .message
        .contains("missing `version`"));

    let problems = problems_of(&table_with(&[
        "    retention: { clones: [\"s3://lake/silver/events/\"] }",
    ]));
    expect(
        &problems,
        5,
        26,
        T,
        Some("retention.clones"),
        "this table's own path",
    );
}

#[test]
fn max_task_bytes_defaults_to_8gib_and_is_a_positive_size() {
    let inv = valid(&table_with(&[]));
    assert_eq!(inv.tables[0].max_task_bytes, 8 * 1024 * 1024 * 1024);
    let inv = valid(&table_with(&["    maintenance: { max_task_bytes: 2GiB }"]));
    assert_eq!(inv.tables[0].max_task_bytes, 2 * 1024 * 1024 * 1024);
    let fleet = valid(&yaml(&[
        "defaults:",
        "  max_task_bytes: 512MiB",
        "tables:",
        "  - { name: a, path: /data/a, owner: o }",
        "  - { name: b, path: /data/b, owner: o, maintenance: { max_task_bytes: 1GiB } }",
    ]));
    assert_eq!(fleet.tables[0].max_task_bytes, 512 * 1024 * 1024);
    assert_eq!(fleet.tables[1].max_task_bytes, 1024 * 1024 * 1024);
    let problems = problems_of(&table_with(&[
        "    maintenance:",
        "      max_task_bytes: 0",
    ]));
    expect(
        &problems,
        6,
        23,
        T,
        Some("maintenance.max_task_bytes"),
        "0 bytes",
    );
    let problems = problems_of(&table_with(&[
        "    maintenance:",
        "      max_task_bytes: lots",
    ]));
    expect(
        &problems,
        6,
        23,
        T,
        Some("maintenance.max_task_bytes"),
        "size",
    );
    let problems = problems_of(&table_with(&[
        "    maintenance:",
        "      max_task_byte: 1GiB",
    ]));
    expect(
        &problems,
        6,
        7,
        T,
        Some("maintenance.max_task_byte"),
        "max_task_bytes",
    );
}

#[test]
fn layout_compression_names_a_codec_and_a_level_in_its_range() {
    use tablekeeper_vocab::{Codec, Compression};
    let default = valid(&table_with(&[]));
    assert_eq!(default.tables[0].layout.compression, Compression::DEFAULT);
    assert_eq!(default.tables[0].layout.compression.to_string(), "zstd-4");
    let codec_only = valid(&table_with(&["    layout: { compression: snappy }"]));
    assert_eq!(
        codec_only.tables[0].layout.compression,
        Compression::new(Codec::Snappy, None).unwrap()
    );
    let leveled = valid(&table_with(&[
        "    layout:",
        "      compression: { codec: gzip, level: 9 }",
    ]));
    assert_eq!(leveled.tables[0].layout.compression.to_string(), "gzip-9");
    let default_level = valid(&table_with(&[
        "    layout: { compression: { codec: zstd } }",
    ]));
    assert_eq!(
        default_level.tables[0].layout.compression.to_string(),
        "zstd-4"
    );

    let problems = problems_of(&table_with(&["    layout: { compression: zsdt }"]));
    expect(
        &problems,
        5,
        28,
        T,
        Some("layout.compression"),
        "did you mean `zstd`?",
    );
    let problems = problems_of(&table_with(&[
        "    layout:",
        "      compression:",
        "        codec: zstd",
        "        level: 23",
    ]));
    expect(
        &problems,
        8,
        16,
        T,
        Some("layout.compression.level"),
        "`zstd` level 23 is out of range: use a level from 1 to 22",
    );
    let problems = problems_of(&table_with(&[
        "    layout: { compression: { codec: snappy, level: 2 } }",
    ]));
    expect(
        &problems,
        5,
        52,
        T,
        Some("layout.compression.level"),
        "has no compression levels",
    );
    let problems = problems_of(&table_with(&[
        "    layout: { compression: { level: 2, kodec: zstd } }",
    ]));
    expect(
        &problems,
        5,
        40,
        T,
        Some("layout.compression.kodec"),
        "did you mean `codec`?",
    );
    expect(
        &problems,
        5,
        28,
        T,
        Some("layout.compression.codec"),
        "`codec` is required",
    );
    let problems = problems_of(&table_with(&["    layout: { compression: 4 }"]));
    expect(
        &problems,
        5,
        28,
        T,
        Some("layout.compression"),
        "expected a codec",
    );
}

// ---- budget and importance ----

/// Two tables (owners `data-platform` and `finance`), then `budget:` with `lines` under it
/// (indented 2 spaces): line 8 is `budget:`, `lines[0]` is line 9.
fn budget_with(lines: &[&str]) -> String {
    let mut all = vec![
        "tables:",
        "  - name: silver.events",
        "    path: s3://lake/silver/events",
        "    owner: data-platform",
        "  - name: gold.ledger",
        "    path: /data/gold/ledger",
        "    owner: finance",
        "budget:",
    ];
    all.extend_from_slice(lines);
    yaml(&all)
}

#[test]
fn a_budget_is_read_with_its_defaults() {
    let inv = valid(&budget_with(&[
        "  window: 30m",
        "  cpu_seconds: 1800.5",
        "  owners: { finance: 600, data-platform: 0.25 }",
        "  mode: enforce",
    ]));
    let budget = inv.budget.expect("a budget");
    assert_eq!(budget.window, Duration::from_secs(30 * 60));
    assert_eq!(budget.cpu_seconds, 1800.5);
    assert_eq!(
        budget.owners.into_iter().collect::<Vec<_>>(),
        [
            ("data-platform".to_string(), 0.25),
            ("finance".to_string(), 600.0)
        ]
    );
    assert_eq!(budget.mode, BudgetMode::Enforce);

    let only_cpu = valid(&budget_with(&["  cpu_seconds: 3600"]));
    let budget = only_cpu.budget.expect("a budget");
    assert_eq!(
        budget.window,
        Duration::from_secs(3600),
        "default window 1h"
    );
    assert_eq!(budget.cpu_seconds, 3600.0);
    assert!(budget.owners.is_empty());
    assert_eq!(budget.mode, BudgetMode::Shadow, "default mode");
    assert_eq!(budget.mode.as_str(), "shadow");

    assert_eq!(valid(&table_with(&[])).budget, None, "no budget by default");
}

#[test]
fn a_budget_needs_cpu_seconds_and_positive_figures() {
    let problems = problems_of(&budget_with(&["  window: 1h"]));
    expect(
        &problems,
        9,
        3,
        None,
        Some("budget.cpu_seconds"),
        "missing required key `cpu_seconds`",
    );
    assert_eq!(problems.len(), 1, "{problems:#?}");
    let problems = problems_of(&budget_with(&[
        "  cpu_seconds: 0",
        "  owners: { finance: -5 }",
    ]));
    expect(
        &problems,
        9,
        16,
        None,
        Some("budget.cpu_seconds"),
        "0 is not positive",
    );
    expect(
        &problems,
        10,
        22,
        None,
        Some("budget.owners.finance"),
        "-5 is not positive",
    );
    let problems = problems_of(&budget_with(&["  cpu_seconds: \"3600\"", "  window: 30s"]));
    expect(
        &problems,
        9,
        16,
        None,
        Some("budget.cpu_seconds"),
        "without quotes",
    );
    expect(
        &problems,
        10,
        11,
        None,
        Some("budget.window"),
        "at least `1m`",
    );
    // the YAML reader refuses `.inf` and `.nan` itself, at the value
    let problems = problems_of(&budget_with(&["  cpu_seconds: .inf"]));
    expect(&problems, 9, 16, None, None, "non-finite");
}

#[test]
fn an_owner_cap_above_the_fleet_budget_names_both_figures() {
    let problems = problems_of(&budget_with(&[
        "  cpu_seconds: 600",
        "  owners:",
        "    finance: 900",
    ]));
    let p = expect(
        &problems,
        11,
        14,
        None,
        Some("budget.owners.finance"),
        "900 CPU-seconds",
    );
    assert!(p.message.contains("(600)"), "{p}");
    assert_eq!(
        p.to_string(),
        format!(
            "inv.yaml:11:14: error: `budget.owners.finance`: {}",
            p.message
        )
    );
    assert_eq!(problems.len(), 1, "{problems:#?}");
    // a cap equal to the fleet budget is allowed
    valid(&budget_with(&[
        "  cpu_seconds: 600",
        "  owners: { finance: 600 }",
    ]));
}

#[test]
fn unknown_keys_in_a_budget_with_did_you_mean() {
    let problems = problems_of(&budget_with(&[
        "  cpu_second: 3600",
        "  colour: blue",
        "  importance: high",
    ]));
    expect(
        &problems,
        9,
        3,
        None,
        Some("budget.cpu_second"),
        "did you mean `cpu_seconds`?",
    );
    expect(
        &problems,
        10,
        3,
        None,
        Some("budget.colour"),
        "allowed keys are window, cpu_seconds, owners, mode",
    );
    expect(
        &problems,
        11,
        3,
        None,
        Some("budget.importance"),
        "under a table's `maintenance:`",
    );
    let problems = problems_of(&table_with(&["    budget: { cpu_seconds: 1 }"]));
    expect(&problems, 5, 5, T, Some("budget"), "fleet-wide");
}

#[test]
fn a_budget_owner_must_own_a_table() {
    let problems = problems_of(&budget_with(&[
        "  cpu_seconds: 3600",
        "  owners:",
        "    finanse: 600",
        "    marketing: 60",
        "    finance: 60",
    ]));
    expect(
        &problems,
        11,
        5,
        None,
        Some("budget.owners.finanse"),
        "no table of the inventory has owner `finanse`",
    );
    expect(
        &problems,
        11,
        5,
        None,
        Some("budget.owners.finanse"),
        "did you mean `finance`?",
    );
    let far = expect(
        &problems,
        12,
        5,
        None,
        Some("budget.owners.marketing"),
        "no table of the inventory has owner `marketing`",
    );
    assert!(!far.message.contains("did you mean"), "{far}");
    assert_eq!(problems.len(), 2, "{problems:#?}");
}

#[test]
fn a_bad_budget_mode_lists_the_modes() {
    let problems = problems_of(&budget_with(&["  cpu_seconds: 3600", "  mode: enforced"]));
    let p = expect(
        &problems,
        10,
        9,
        None,
        Some("budget.mode"),
        "did you mean `enforce`?",
    );
    assert!(
        p.message.contains("allowed values are shadow, enforce"),
        "{p}"
    );
}

#[test]
fn a_second_budget_block_names_both_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = write(
        dir.path(),
        "a.yaml",
        &yaml(&[
            "budget: { cpu_seconds: 3600 }",
            "tables:",
            "  - { name: t, path: /data/t, owner: o }",
        ]),
    );
    // a file may hold only `budget:`, as it may hold only `defaults:`
    let b = write(
        dir.path(),
        "b.yaml",
        &yaml(&["# the fleet budget", "budget:", "  cpu_seconds: 60"]),
    );
    let problems = match Inventory::load_paths(&[a.clone(), b.clone()]) {
        Err(LoadError::Invalid(problems)) => problems,
        other => panic!("expected problems, got {other:?}"),
    };
    assert_eq!(problems.len(), 1, "{problems:#?}");
    let p = &problems[0];
    assert_eq!((p.file.as_path(), p.line, p.column), (b.as_path(), 2, 1));
    assert_eq!(p.field.as_deref(), Some("budget"));
    assert!(p.message.contains(&format!("{}:1:1", a.display())), "{p}");
    assert!(p.message.contains("second `budget:` block"), "{p}");
}

#[test]
fn a_budget_in_a_file_without_tables_caps_owners_of_other_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "a.yaml",
        &yaml(&["name: ledger", "path: /data/ledger", "owner: finance"]),
    );
    write(
        dir.path(),
        "b.yaml",
        &yaml(&["budget: { cpu_seconds: 3600, owners: { finance: 600 } }"]),
    );
    let inv = Inventory::load(dir.path()).expect("valid");
    let budget = inv.budget.expect("a budget");
    assert_eq!(budget.owners.get("finance"), Some(&600.0));
    assert_eq!(inv.tables.len(), 1);
}

#[test]
fn importance_comes_from_the_table_then_defaults_then_normal() {
    assert_eq!(
        valid(&table_with(&[])).tables[0].importance,
        Importance::Normal
    );
    let own = valid(&table_with(&["    maintenance: { importance: high }"]));
    assert_eq!(own.tables[0].importance, Importance::High);
    let fleet = valid(&yaml(&[
        "defaults:",
        "  importance: low",
        "tables:",
        "  - { name: a, path: /data/a, owner: o }",
        "  - { name: b, path: /data/b, owner: o, maintenance: { importance: high } }",
    ]));
    assert_eq!(fleet.tables[0].importance, Importance::Low, "from defaults");
    assert_eq!(
        fleet.tables[1].importance,
        Importance::High,
        "the table wins"
    );
    assert_eq!(fleet.tables[0].importance.to_string(), "low");
}

#[test]
fn a_bad_importance_lists_the_levels() {
    let problems = problems_of(&table_with(&[
        "    maintenance:",
        "      importance: urgent",
    ]));
    let p = expect(
        &problems,
        6,
        19,
        T,
        Some("maintenance.importance"),
        "unknown value `urgent`",
    );
    assert!(
        p.message.contains("allowed values are high, normal, low"),
        "{p}"
    );
    let problems = problems_of(&yaml(&["defaults: { importance: hihg }", "tables: []"]));
    expect(
        &problems,
        1,
        25,
        None,
        Some("defaults.importance"),
        "did you mean `high`?",
    );
    let problems = problems_of(&table_with(&["    importance: high"]));
    expect(
        &problems,
        5,
        5,
        T,
        Some("importance"),
        "under `maintenance:`",
    );
    let problems = problems_of(&table_with(&[
        "    maintenance:",
        "      compaction: { importance: low }",
    ]));
    expect(
        &problems,
        6,
        21,
        T,
        Some("maintenance.compaction.importance"),
        "not per operation",
    );
}
