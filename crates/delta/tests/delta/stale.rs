//! Stale commits over earlier rewrites: a writer whose snapshot predates a compaction overwrites
//! the table, or another engine (python deltalake) compacts from such a snapshot; the probe
//! finds it, repair restores exactly what the writer meant.
//! Every case checks the rows against a model of what the writer intended, read by deltalake
//! and by python deltalake.

use std::collections::BTreeSet;

use deltalake::protocol::SaveMode;
use deltalake::DeltaTable;
use tablekeeper_delta::{
    optimize, repair, vacuum, CompactOptions, DeltaError, Optimize, Probe, ProbeOptions, Prober,
    RepairOptions, StaleKind, VacuumMode, VacuumOptions, ZorderOptions,
};
use tokio_util::sync::CancellationToken;

use crate::common::{batch, create_table, rows, Row, TestTable};

fn compact_options(target: u64) -> CompactOptions {
    CompactOptions {
        target_file_size: target,
        min_small_files: 2,
        small_file_factor: 1.0,
        compression: Default::default(),
        dry_run: false,
        max_conflict_retries: 0,
    }
}

async fn run_compact(t: &TestTable, target: u64) -> tablekeeper_delta::OpReport {
    optimize(
        &t.uri,
        Optimize::Compact(&compact_options(target)),
        &CancellationToken::new(),
    )
    .await
    .expect("compaction")
}

async fn probe(t: &TestTable) -> Probe {
    Prober::new()
        .probe(&t.uri, &ProbeOptions::for_target(1 << 30))
        .await
        .expect("probe")
}

/// A writer that took its snapshot earlier overwrites the table with `new`.
async fn stale_overwrite(snapshot: DeltaTable, new: &[Row]) {
    snapshot
        .write(vec![batch(new)])
        .with_save_mode(SaveMode::Overwrite)
        .await
        .expect("the stale overwrite commits: deltalake's conflict checker ignores dataChange=false removes");
}

fn ids(rows: &[Row]) -> Vec<i64> {
    let mut ids: Vec<i64> = rows.iter().map(|r| r.0).collect();
    ids.sort_unstable();
    ids
}

/// The table's ids as python deltalake reads them.
fn python_ids(t: &TestTable) -> Vec<i64> {
    let lines = tablekeeper_delta::fixtures::peers::python_rows(&t.uri, None)
        .expect("python deltalake reads the table");
    let mut ids: Vec<i64> = lines
        .iter()
        .map(|line| {
            let row: serde_json::Value = serde_json::from_str(line).expect("json row");
            row["id"].as_i64().expect("id")
        })
        .collect();
    ids.sort_unstable();
    ids
}

/// Both readers see exactly `expected`.
async fn assert_rows(t: &TestTable, expected: &[i64], context: &str) {
    let mut expected = expected.to_vec();
    expected.sort_unstable();
    assert_eq!(ids(&t.rows().await), expected, "deltalake, {context}");
    assert_eq!(python_ids(t), expected, "python deltalake, {context}");
}

async fn run_repair(t: &TestTable, dry_run: bool) -> tablekeeper_delta::OpReport {
    repair(
        &t.uri,
        &RepairOptions {
            dry_run,
            ..RepairOptions::default()
        },
        &CancellationToken::new(),
    )
    .await
    .expect("repair")
}

#[tokio::test]
async fn an_overwrite_planned_before_a_compaction_is_found_and_repaired() {
    let t = create_table(false, &[]).await;
    for i in 0..10 {
        t.append(&rows(i * 10..i * 10 + 10, "2026-01-01")).await;
    }
    let writer = t.open().await; // the writer's snapshot, taken before maintenance
    let compacted = run_compact(&t, 1 << 30).await;
    assert!(!compacted.commits.is_empty(), "{compacted:?}");
    let new = rows(1000..1005, "2026-01-02");
    stale_overwrite(writer, &new).await;
    // the hazard, reproduced: every old row survived the overwrite
    assert_eq!(t.rows().await.len(), 105);

    let p = probe(&t).await;
    assert_eq!(
        p.history.stale_writes.len(),
        1,
        "{:?}",
        p.history.stale_writes
    );
    let w = &p.history.stale_writes[0];
    assert!(w.pending());
    assert_eq!(w.files, 10);
    assert_eq!(
        w.rows,
        Some(100),
        "rows the writer meant to remove, from the log's statistics"
    );
    assert_eq!(w.rewrite_versions, compacted.commits);
    assert_eq!(w.operation.as_deref(), Some("WRITE"));

    let before = t.version().await;
    let plan = run_repair(&t, true).await;
    assert_eq!(t.version().await, before, "a dry run writes nothing");
    assert_eq!(plan.repairs.len(), 1);
    let planned = &plan.repairs[0];
    assert_eq!(planned.stale_write, w.version);
    assert_eq!(
        planned.re_add.len(),
        0,
        "the writer removed every input of the bin"
    );
    assert_eq!(planned.stale_rows, Some(100));
    assert_eq!(planned.refused, None);

    let done = run_repair(&t, false).await;
    assert_eq!(done.commits.len(), 1, "{done:?}");
    assert_rows(
        &t,
        &ids(&new),
        "after the repair: exactly the writer's rows",
    )
    .await;
    let p = probe(&t).await;
    assert_eq!(p.history.stale_writes[0].repaired_by, Some(done.commits[0]));
    assert!(p.pending_stale_writes().next().is_none());
    // nothing left to do
    let again = run_repair(&t, false).await;
    assert!(again.commits.is_empty(), "{again:?}");
}

#[tokio::test]
async fn only_the_bins_the_writer_touched_are_undone() {
    let t = create_table(false, &[]).await;
    for i in 0..5 {
        t.append(&rows(i * 10..i * 10 + 10, "2026-01-01")).await;
    }
    let writer = t.open().await; // sees the first five files only
    for i in 5..10 {
        t.append(&rows(i * 10..i * 10 + 10, "2026-01-01")).await;
    }
    // bins of five files: a target a little over five files' size
    let size = t
        .open()
        .await
        .snapshot()
        .expect("snapshot")
        .snapshot()
        .log_data()
        .into_iter()
        .map(|f| u64::try_from(f.size()).expect("size"))
        .max()
        .expect("files");
    let compacted = run_compact(&t, size * 5 + size / 2).await;
    assert_eq!(
        compacted.commits.len(),
        2,
        "two bins, one commit each: {compacted:?}"
    );
    let new = rows(1000..1005, "2026-01-02");
    stale_overwrite(writer, &new).await;

    let done = run_repair(&t, false).await;
    let plan = &done.repairs[0];
    assert_eq!(
        plan.rewrites.len(),
        1,
        "only the bin holding the writer's files: {plan:?}"
    );
    assert_eq!(plan.remove.len(), 1);
    // the writer's rows, plus the rows appended after its snapshot (it never saw them)
    let mut expected = ids(&new);
    expected.extend(50..100);
    assert_rows(&t, &expected, "after repairing one of two bins").await;
    // the untouched bin stays compacted
    assert_eq!(t.active_paths().await.len(), 2);
}

/// Which snapshot the stale writer of [`overwrite_around_two_compactions`] holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WriterSaw {
    /// The five appended files, before either compaction.
    Originals,
    /// The first compaction's output.
    FirstCompaction,
}

/// Five appends, a compaction, a sixth append, a second compaction (taking the first's output
/// and the sixth file), and an overwrite of three new rows from the snapshot `saw`; returns
/// the table and the writer's rows.
async fn overwrite_around_two_compactions(saw: WriterSaw) -> (TestTable, Vec<Row>) {
    let t = create_table(false, &[]).await;
    for i in 0..5 {
        t.append(&rows(i * 10..i * 10 + 10, "2026-01-01")).await;
    }
    let originals = t.open().await;
    run_compact(&t, 1 << 30).await;
    let writer = match saw {
        WriterSaw::Originals => originals,
        WriterSaw::FirstCompaction => t.open().await,
    };
    t.append(&rows(50..60, "2026-01-01")).await;
    run_compact(&t, 1 << 30).await;
    let new = rows(1000..1003, "2026-01-02");
    stale_overwrite(writer, &new).await;
    (t, new)
}

#[tokio::test]
async fn chains_of_compactions_are_followed() {
    // f1..f5 -> o1, then o1 + f6 -> o2; the writer saw f1..f5
    let (t, new) = overwrite_around_two_compactions(WriterSaw::Originals).await;
    let done = run_repair(&t, false).await;
    let plan = &done.repairs[0];
    assert_eq!(
        plan.rewrites.len(),
        2,
        "both compactions are undone: {plan:?}"
    );
    assert_eq!(
        plan.re_add.len(),
        1,
        "the file appended after the snapshot comes back"
    );
    let mut expected = ids(&new);
    expected.extend(50..60);
    assert_rows(&t, &expected, "after repairing a chain").await;
}

#[tokio::test]
async fn partitioned_tables_and_z_order_are_repaired() {
    let t = create_table(true, &[]).await;
    for i in 0..4 {
        t.append(&rows(i * 10..i * 10 + 5, "2026-01-01")).await;
        t.append(&rows(i * 10 + 5..i * 10 + 10, "2026-01-02")).await;
    }
    let writer = t.open().await;
    optimize(
        &t.uri,
        Optimize::ZOrder(&ZorderOptions {
            columns: vec!["event_type".into()],
            target_file_size: 1 << 30,
            since_version: None,
            compression: Default::default(),
            dry_run: false,
            max_conflict_retries: 0,
        }),
        &CancellationToken::new(),
    )
    .await
    .expect("z-order");
    // the overwrite also adds rows to both partitions
    let mut new = rows(1000..1004, "2026-01-01");
    new.extend(rows(2000..2004, "2026-01-02"));
    stale_overwrite(writer, &new).await;
    let p = probe(&t).await;
    assert_eq!(p.pending_stale_writes().count(), 1);

    run_repair(&t, false).await;
    assert_rows(&t, &ids(&new), "after repairing a Z-order").await;
}

#[tokio::test]
async fn a_repair_that_cannot_be_exact_is_refused_and_changes_nothing() {
    let t = create_table(false, &[]).await;
    for i in 0..4 {
        t.append(&rows(i * 10..i * 10 + 10, "2026-01-01")).await;
    }
    let writer = t.open().await;
    run_compact(&t, 1 << 30).await;
    // another writer, up to date, deletes rows from the compacted file: it rewrites it
    t.delete("id < 5").await;
    stale_overwrite(writer, &rows(1000..1002, "2026-01-02")).await;
    let before = t.version().await;
    let err = repair(&t.uri, &RepairOptions::default(), &CancellationToken::new())
        .await
        .expect_err("refused");
    assert!(matches!(err, DeltaError::RepairRefused { .. }), "{err}");
    assert!(err.to_string().contains("changed data"), "{err}");
    assert_eq!(t.version().await, before);
}

#[tokio::test]
async fn vacuum_waits_for_a_pending_repair() {
    let t = create_table(false, &[]).await;
    for i in 0..4 {
        t.append(&rows(i * 10..i * 10 + 10, "2026-01-01")).await;
    }
    let writer = t.open().await;
    run_compact(&t, 1 << 30).await;
    stale_overwrite(writer, &rows(1000..1002, "2026-01-02")).await;
    let before: BTreeSet<String> = t.parquet_on_disk();
    let options = VacuumOptions {
        inventory_retention: std::time::Duration::ZERO,
        allow_short_retention: true,
        mode: VacuumMode::Lite,
        dry_run: false,
        stale_watch: tablekeeper_delta::DEFAULT_STALE_WATCH,
        keep: Default::default(),
    };
    let err = vacuum(&t.uri, &options, &CancellationToken::new())
        .await
        .expect_err("refused while the repair waits");
    assert!(matches!(err, DeltaError::RepairPending { .. }), "{err}");
    assert_eq!(t.parquet_on_disk(), before, "nothing deleted");
    run_repair(&t, false).await;
    vacuum(&t.uri, &options, &CancellationToken::new())
        .await
        .expect("vacuum after the repair");
    assert_rows(&t, &[1000, 1001], "after repair and vacuum").await;
}

/// Another engine, python deltalake, compacts the table as it was at `version`: its snapshot
/// predates what was committed since, and deltalake lets its OPTIMIZE commit over files an
/// earlier rewrite already replaced (removes marked `dataChange: false` are not checked).
fn python_compaction_from(t: &TestTable, version: u64) {
    tablekeeper_delta::fixtures::peers::run_python(
        "import sys\nfrom deltalake import DeltaTable\n\
         DeltaTable(sys.argv[1], version=int(sys.argv[2])).optimize.compact()\n",
        &[&t.uri, &version.to_string()],
    )
    .expect("python deltalake compacts from its old snapshot");
}

async fn run_zorder(t: &TestTable) -> tablekeeper_delta::OpReport {
    optimize(
        &t.uri,
        Optimize::ZOrder(&ZorderOptions {
            columns: vec!["event_type".into()],
            target_file_size: 1 << 30,
            since_version: None,
            compression: Default::default(),
            dry_run: false,
            max_conflict_retries: 0,
        }),
        &CancellationToken::new(),
    )
    .await
    .expect("z-order")
}

/// The one pending stale commit the probe finds: a rewrite, by `engine`, over `over`.
async fn the_stale_rewrite(
    t: &TestTable,
    engine: &str,
    over: &[i64],
) -> tablekeeper_delta::StaleWrite {
    let p = probe(t).await;
    let pending: Vec<_> = p.pending_stale_writes().cloned().collect();
    assert_eq!(pending.len(), 1, "{:?}", p.history.stale_writes);
    let w = pending.into_iter().next().expect("one");
    assert_eq!(w.kind, Some(StaleKind::Rewrite), "{w:?}");
    assert!(
        w.engine_info.as_deref().is_some_and(|e| e.contains(engine)),
        "{w:?}"
    );
    assert_eq!(w.rewrite_versions, over, "{w:?}");
    w
}

#[tokio::test]
async fn another_engines_compaction_from_before_a_compaction_is_found_and_undone() {
    let t = create_table(false, &[]).await;
    for i in 0..10 {
        t.append(&rows(i * 10..i * 10 + 10, "2026-01-01")).await;
    }
    let snapshot = t.version().await;
    let compacted = run_compact(&t, 1 << 30).await;
    python_compaction_from(&t, snapshot);
    // the hazard, reproduced: both compactions committed, every row is visible twice
    assert_eq!(t.rows().await.len(), 200);

    let w = the_stale_rewrite(&t, "delta-rs", &compacted.commits).await;
    assert_eq!(w.operation.as_deref(), Some("OPTIMIZE"));
    assert_eq!(w.files, 10);
    assert_eq!(
        w.rows,
        Some(100),
        "the rows it duplicated, from the statistics"
    );

    let before = t.version().await;
    let plan = run_repair(&t, true).await;
    assert_eq!(t.version().await, before, "a dry run writes nothing");
    let planned = &plan.repairs[0];
    assert_eq!(planned.stale_write, w.version);
    assert_eq!(
        planned.rewrites,
        vec![w.version],
        "the stale rewrite itself is undone"
    );
    assert_eq!(planned.remove.len(), 1, "its output: {planned:?}");
    assert_eq!(
        planned.re_add.len(),
        0,
        "every file it removed was stale: {planned:?}"
    );
    assert_eq!(planned.stale_rows, Some(100));

    let done = run_repair(&t, false).await;
    assert_eq!(done.commits.len(), 1, "{done:?}");
    assert_rows(&t, &(0..100).collect::<Vec<_>>(), "every row once").await;
    let p = probe(&t).await;
    assert_eq!(p.history.stale_writes[0].repaired_by, Some(done.commits[0]));
    assert!(p.pending_stale_writes().next().is_none());
}

#[tokio::test]
async fn only_the_stale_bin_of_another_engines_compaction_is_undone() {
    let t = create_table(true, &[]).await;
    for i in 0..6 {
        t.append(&rows(i * 10..i * 10 + 10, "2026-01-01")).await;
    }
    for i in 6..10 {
        t.append(&rows(i * 10..i * 10 + 10, "2026-01-02")).await;
    }
    let snapshot = t.version().await;
    // tablekeeper compacts the first day only (six small files; the second has four)
    let mut options = compact_options(1 << 30);
    options.min_small_files = 5;
    let compacted = optimize(
        &t.uri,
        Optimize::Compact(&options),
        &CancellationToken::new(),
    )
    .await
    .expect("compaction");
    assert_eq!(
        compacted.partitions_touched,
        ["event_date=2026-01-01"],
        "{compacted:?}"
    );
    // the other engine compacts both days from before: one of its two bins is stale
    python_compaction_from(&t, snapshot);
    assert_eq!(t.rows().await.len(), 160, "the first day's rows twice");

    let w = the_stale_rewrite(&t, "delta-rs", &compacted.commits).await;
    assert_eq!(w.files, 6);
    let done = run_repair(&t, false).await;
    let planned = &done.repairs[0];
    assert_eq!(
        planned.remove.len(),
        1,
        "the stale bin's output only: {planned:?}"
    );
    assert_eq!(planned.re_add.len(), 0, "{planned:?}");
    assert_rows(
        &t,
        &(0..100).collect::<Vec<_>>(),
        "after undoing one of two bins",
    )
    .await;
    // the second day keeps the other engine's compaction, the first tablekeeper's
    assert_eq!(t.active_paths().await.len(), 2);
}

#[tokio::test]
async fn another_engines_compaction_from_before_a_z_order_and_a_chain_is_undone() {
    for chain in [false, true] {
        let t = create_table(true, &[]).await;
        for i in 0..4 {
            t.append(&rows(i * 10..i * 10 + 5, "2026-01-01")).await;
            t.append(&rows(i * 10 + 5..i * 10 + 10, "2026-01-02")).await;
        }
        let snapshot = t.version().await;
        let compacted = if chain {
            run_compact(&t, 1 << 30).await.commits
        } else {
            Vec::new()
        };
        let zordered = run_zorder(&t).await;
        assert!(!zordered.commits.is_empty(), "{zordered:?}");
        python_compaction_from(&t, snapshot);
        assert_eq!(t.rows().await.len(), 80, "chain {chain}: every row twice");
        // the files it removed were removed first by the first of tablekeeper's rewrites
        let first = if chain { &compacted } else { &zordered.commits };
        let w = the_stale_rewrite(&t, "delta-rs", first).await;
        assert_eq!(w.files, 8);
        run_repair(&t, false).await;
        assert_rows(&t, &(0..40).collect::<Vec<_>>(), &format!("chain {chain}")).await;
    }
}

#[tokio::test]
async fn a_stale_rewrite_rewritten_again_is_undone_through_the_chain() {
    let t = create_table(false, &[]).await;
    for i in 0..5 {
        t.append(&rows(i * 10..i * 10 + 10, "2026-01-01")).await;
    }
    let snapshot = t.version().await;
    run_compact(&t, 1 << 30).await; // f1..f5 -> X
    python_compaction_from(&t, snapshot); // f1..f5 -> Y, every row twice
    t.append(&rows(50..60, "2026-01-01")).await;
    // a later compaction (tablekeeper's, run by hand past the planner) folds X, Y and the new
    // file into one: the duplicates now live inside one file
    run_compact(&t, 1 << 30).await;
    assert_eq!(t.rows().await.len(), 110);

    let done = run_repair(&t, false).await;
    let planned = &done.repairs[0];
    assert_eq!(
        planned.rewrites.len(),
        2,
        "the stale rewrite and the one over it: {planned:?}"
    );
    assert_eq!(planned.remove.len(), 1, "{planned:?}");
    assert_eq!(
        planned.re_add.len(),
        2,
        "X and the appended file come back: {planned:?}"
    );
    assert_rows(&t, &(0..60).collect::<Vec<_>>(), "after undoing the chain").await;
}

#[tokio::test]
async fn tablekeepers_own_stale_rewrite_is_found_and_undone() {
    let t = create_table(false, &[]).await;
    for i in 0..6 {
        t.append(&rows(i * 10..i * 10 + 10, "2026-01-01")).await;
    }
    // a replica that loaded the table, lost its lease and committed anyway: its compaction
    // commits from the snapshot it held, with tablekeeper's marker
    let held = t.open().await;
    let compacted = run_compact(&t, 1 << 30).await;
    let marker = serde_json::json!({"operation": "compact", "runId": "lost-lease-replica"});
    held.optimize()
        .with_commit_properties(
            deltalake::kernel::transaction::CommitProperties::default()
                .with_metadata([("tablekeeper".to_owned(), marker)]),
        )
        .await
        .expect("the stale compaction commits");
    assert_eq!(t.rows().await.len(), 120);

    let w = the_stale_rewrite(&t, "delta-rs", &compacted.commits).await;
    assert_eq!(w.files, 6);
    run_repair(&t, false).await;
    assert_rows(
        &t,
        &(0..60).collect::<Vec<_>>(),
        "after undoing our own stale rewrite",
    )
    .await;
}

#[tokio::test]
async fn an_overwrite_planned_between_two_compactions_keeps_only_what_it_did_not_see_removed() {
    // f1..f5 -> X, then X + f6 -> Y; the writer saw X
    let (t, new) = overwrite_around_two_compactions(WriterSaw::FirstCompaction).await;
    let done = run_repair(&t, false).await;
    let planned = &done.repairs[0];
    assert_eq!(
        planned.rewrites.len(),
        1,
        "only the compaction after its snapshot: {planned:?}"
    );
    assert_eq!(
        planned.re_add.len(),
        1,
        "the file appended after its snapshot: {planned:?}"
    );
    // the rows of X, which it meant to remove, do not come back
    let mut expected = ids(&new);
    expected.extend(50..60);
    assert_rows(
        &t,
        &expected,
        "after repairing an overwrite between compactions",
    )
    .await;
}

#[tokio::test]
async fn another_engines_compaction_from_a_fresh_snapshot_is_reported_not_stale() {
    let t = create_table(false, &[]).await;
    for i in 0..5 {
        t.append(&rows(i * 10..i * 10 + 10, "2026-01-01")).await;
    }
    run_compact(&t, 1 << 30).await;
    for i in 5..10 {
        t.append(&rows(i * 10..i * 10 + 10, "2026-01-01")).await;
    }
    let latest = t.version().await;
    python_compaction_from(&t, latest); // no race: it sees tablekeeper's compaction
    let p = probe(&t).await;
    assert!(
        p.history.stale_writes.is_empty(),
        "{:?}",
        p.history.stale_writes
    );
    assert_eq!(
        p.history.recent_foreign_rewrites.len(),
        1,
        "{:?}",
        p.history.recent_foreign_rewrites
    );
    let foreign = &p.history.recent_foreign_rewrites[0];
    assert_eq!(foreign.version, i64::try_from(latest + 1).expect("version"));
    assert_eq!(foreign.operation.as_deref(), Some("OPTIMIZE"));
    assert!(
        foreign
            .engine_info
            .as_deref()
            .is_some_and(|e| e.contains("py-")),
        "python deltalake is named: {foreign:?}"
    );
    assert_rows(&t, &(0..100).collect::<Vec<_>>(), "nothing lost or doubled").await;
}
