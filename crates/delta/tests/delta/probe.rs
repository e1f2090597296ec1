use std::time::Duration;

use tablekeeper_delta::{
    checkpoint, optimize, vacuum, CheckpointOptions, CompactOptions, DeltaError, Optimize,
    ProbeOptions, Prober, VacuumMode, VacuumOptions, ZorderOptions,
};
use tokio_util::sync::CancellationToken;

use crate::common::{create_table, forced_checkpoint, rows, zorder_on};

const TARGET: u64 = 64 * 1024 * 1024;

#[tokio::test]
async fn probe_reads_files_partitions_and_maintenance_history_from_the_log() {
    let t = create_table(true, &[]).await;
    for i in 0..3 {
        t.append(&rows(i * 10..i * 10 + 10, "2024-08-01")).await;
    }
    t.append(&rows(100..110, "2024-08-02")).await;
    let prober = Prober::new();
    let options = ProbeOptions::for_target(TARGET);

    let p = prober.probe(&t.uri, &options).await.expect("probe");
    assert_eq!(p.version, 4);
    assert_eq!(p.files, 4);
    assert_eq!(p.small_files, 4);
    assert_eq!(p.small_file_threshold_bytes, TARGET * 3 / 4);
    assert_eq!(
        p.small_files_by_partition.into_iter().collect::<Vec<_>>(),
        vec![
            ("event_date=2024-08-01".to_owned(), 3),
            ("event_date=2024-08-02".to_owned(), 1)
        ]
    );
    assert_eq!(p.commits_since_checkpoint, 5);
    assert_eq!(p.history.commits_per_hour, 5);
    assert_eq!(p.history.history_from_version, Some(0));
    assert!(p.history.created_at.is_some() && p.history.last_commit_at >= p.history.created_at);
    assert_eq!(p.partition_columns, vec!["event_date".to_owned()]);
    assert!(
        p.history.last_optimize_at.is_none()
            && p.history.last_zorder_at.is_none()
            && p.history.last_vacuum_at.is_none()
    );
    assert!(p.last_checkpoint_at.is_none());
    assert!(!p.deletion_vectors_enabled);
    let size: u64 = t
        .active_paths()
        .await
        .iter()
        .map(|f| std::fs::metadata(t.path().join(f)).unwrap().len())
        .sum();
    assert_eq!(p.size_bytes, size);

    let cancel = CancellationToken::new();
    optimize(
        &t.uri,
        Optimize::Compact(&CompactOptions {
            target_file_size: TARGET,
            min_small_files: 2,
            small_file_factor: 0.75,
            compression: Default::default(),
            dry_run: false,
            max_conflict_retries: 0,
        }),
        &cancel,
    )
    .await
    .expect("compact");
    let z = optimize(
        &t.uri,
        Optimize::ZOrder(&ZorderOptions {
            columns: vec!["event_type".into()],
            target_file_size: TARGET,
            since_version: None,
            compression: Default::default(),
            dry_run: false,
            max_conflict_retries: 0,
        }),
        &cancel,
    )
    .await
    .expect("zorder");
    vacuum(
        &t.uri,
        &VacuumOptions {
            inventory_retention: Duration::ZERO,
            allow_short_retention: true,
            mode: VacuumMode::Lite,
            dry_run: false,
            stale_watch: tablekeeper_delta::DEFAULT_STALE_WATCH,
            keep: Default::default(),
        },
        &cancel,
    )
    .await
    .expect("vacuum");
    checkpoint(
        &t.uri,
        &CheckpointOptions {
            max_commits_since_checkpoint: 1,
            log_retention: Duration::from_secs(30 * 86_400),
            force: false,
            log_cleanup: tablekeeper_delta::LogCleanup::Unrecorded,
            pins: Vec::new(),
        },
        &cancel,
    )
    .await
    .expect("checkpoint");

    let p = prober.probe(&t.uri, &options).await.expect("re-probe");
    let version = t.version().await as i64;
    assert_eq!(p.version, version);
    assert_eq!(p.files as usize, t.active_paths().await.len());
    assert_eq!(
        p.files, 2,
        "one file per partition after compaction and z-order"
    );
    assert!(p.history.last_optimize_at.is_some());
    assert!(p.history.last_zorder_at.is_some());
    assert_eq!(p.history.last_zorder_version, z.version_after);
    assert!(p.history.last_vacuum_at.is_some());
    assert!(p.last_checkpoint_at.is_some());
    assert_eq!(p.last_checkpoint_version, Some(version));
    assert_eq!(p.commits_since_checkpoint, 0);
    assert_eq!(p.history.commits_per_hour as i64, version + 1);
}

#[tokio::test]
async fn a_re_probe_reads_only_new_commits() {
    let t = create_table(false, &[]).await;
    for i in 0..3 {
        t.append(&rows(i * 10..i * 10 + 10, "2024-08-01")).await;
    }
    checkpoint(&t.uri, &forced_checkpoint(), &CancellationToken::new())
        .await
        .expect("checkpoint");
    let prober = Prober::new();
    let options = ProbeOptions::for_target(TARGET);
    let first = prober.probe(&t.uri, &options).await.expect("probe");
    assert_eq!(first.history.history_from_version, Some(0));

    // log cleanup removes the oldest commits behind the prober's back
    for v in 0..2u64 {
        std::fs::remove_file(t.path().join("_delta_log").join(format!("{v:020}.json"))).unwrap();
    }
    t.append(&rows(100..105, "2024-08-01")).await;

    let again = prober.probe(&t.uri, &options).await.expect("re-probe");
    assert_eq!(again.version, first.version + 1);
    assert_eq!(again.files, first.files + 1);
    assert_eq!(
        again.history.commits_per_hour,
        first.history.commits_per_hour + 1
    );
    assert_eq!(again.commits_since_checkpoint, 1);
    // the tracked history was not re-read from disk
    assert_eq!(again.history.created_at, first.history.created_at);
    assert_eq!(again.history.history_from_version, Some(0));

    let fresh = Prober::new()
        .probe(&t.uri, &options)
        .await
        .expect("fresh probe");
    assert_eq!(fresh.history.history_from_version, Some(2));
    assert_eq!(fresh.version, again.version);
    assert_eq!(fresh.files, again.files);
}

#[tokio::test]
async fn past_the_snapshot_cap_the_smallest_tables_are_reopened_and_keep_their_history() {
    // tables of 1, 2, 3 and 4 files; the prober keeps two loaded
    let mut tables = Vec::new();
    for n in 1..=4 {
        let t = create_table(false, &[]).await;
        for i in 0..n {
            t.append(&rows(i * 10..i * 10 + 10, "2024-08-01")).await;
        }
        checkpoint(&t.uri, &forced_checkpoint(), &CancellationToken::new())
            .await
            .expect("checkpoint");
        tables.push(t);
    }
    let prober = Prober::with_loaded_snapshots(2);
    let options = ProbeOptions::for_target(TARGET);
    let mut first = Vec::new();
    for t in &tables {
        first.push(prober.probe(&t.uri, &options).await.expect("probe"));
        assert!(prober.loaded_snapshots() <= 2);
    }
    assert_eq!(prober.loaded_snapshots(), 2);

    // cleanup removes the oldest commit of every table (the checkpoint stands in for it): a
    // reopened table that re-read its history from disk would report a later creation and
    // history start
    for t in &tables {
        std::fs::remove_file(t.path().join("_delta_log").join(format!("{:020}.json", 0))).unwrap();
        t.append(&rows(500..505, "2024-08-01")).await;
    }
    for (t, before) in tables.iter().zip(&first) {
        let again = prober.probe(&t.uri, &options).await.expect("re-probe");
        assert_eq!(again.version, before.version + 1, "{}", t.uri);
        assert_eq!(again.files, before.files + 1, "{}", t.uri);
        assert_eq!(
            again.history.commits_per_hour,
            before.history.commits_per_hour + 1,
            "{}",
            t.uri
        );
        assert_eq!(
            again.history.created_at, before.history.created_at,
            "{}",
            t.uri
        );
        assert_eq!(again.history.history_from_version, Some(0), "{}", t.uri);
    }
    assert_eq!(prober.loaded_snapshots(), 2);
    prober.forget(&tables[3].uri);
    assert_eq!(prober.loaded_snapshots(), 1);
}

#[tokio::test]
async fn an_unchanged_version_reuses_the_checkpoint_hint_until_expired() {
    let t = create_table(false, &[]).await;
    for i in 0..3 {
        t.append(&rows(i * 10..i * 10 + 10, "2024-08-01")).await;
    }
    let prober = Prober::new();
    let options = ProbeOptions::for_target(TARGET);
    let before = prober.probe(&t.uri, &options).await.expect("probe");
    assert_eq!(before.last_checkpoint_version, None);
    checkpoint(&t.uri, &forced_checkpoint(), &CancellationToken::new())
        .await
        .expect("checkpoint");
    // same version: the probe does not read `_last_checkpoint` again
    let cached = prober.probe(&t.uri, &options).await.expect("probe");
    assert_eq!(cached.version, before.version);
    assert_eq!(cached.last_checkpoint_version, None);
    // after maintenance the daemon expires it; a new version would too
    prober.expire_cached_reads(&t.uri).await;
    let fresh = prober.probe(&t.uri, &options).await.expect("probe");
    assert_eq!(fresh.last_checkpoint_version, Some(before.version));
    assert_eq!(fresh.commits_since_checkpoint, 0);
}

#[tokio::test]
async fn probing_a_directory_without_a_log_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("typo").to_str().unwrap().to_owned();
    let err = Prober::new()
        .probe(&uri, &ProbeOptions::for_target(TARGET))
        .await
        .expect_err("not a table");
    assert!(matches!(err, DeltaError::NotADeltaTable { .. }), "{err}");
    assert!(err.to_string().contains(&uri));
}

/// A re-probe applies the new commits to the files it keeps instead of reloading the
/// snapshot: on tables other engines wrote (deletion vectors, column mapping, v2 and classic
/// checkpoints, change data, in-commit timestamps), replaying the log commit by commit gives
/// at every version the figures a fresh load gives.
#[tokio::test]
async fn a_re_probe_applying_other_engines_commits_matches_a_fresh_load() {
    let mut covered = Vec::new();
    for name in [
        "simple_table",
        "simple_table_with_checkpoint",
        "table_with_deletion_logs",
        "table-with-dv-small",
        "checkpoint-v2-table",
        "cdc_ict_table",
        "delta-live-table",
    ] {
        let dir = crate::aged::reference_table(name);
        let log = dir.path().join("_delta_log");
        if !log.join(format!("{:020}.json", 0)).exists() {
            continue;
        }
        // everything after version 0 moves aside, then comes back one version at a time
        let aside = tempfile::tempdir().expect("temp dir");
        let mut later: Vec<(u64, Vec<std::path::PathBuf>)> = Vec::new();
        for entry in std::fs::read_dir(&log).expect("log") {
            let path = entry.expect("entry").path();
            let Some(file) = path.file_name().and_then(|n| n.to_str()).map(str::to_owned) else {
                continue;
            };
            if file == "_last_checkpoint" {
                std::fs::rename(&path, aside.path().join(&file)).expect("move aside");
                continue;
            }
            let Some(version) = file.get(..20).and_then(|d| d.parse::<u64>().ok()) else {
                continue;
            };
            if version == 0 {
                continue;
            }
            let moved = aside.path().join(&file);
            std::fs::rename(&path, &moved).expect("move aside");
            match later.iter_mut().find(|(v, _)| *v == version) {
                Some((_, files)) => files.push(moved),
                None => later.push((version, vec![moved])),
            }
        }
        later.sort_by_key(|(v, _)| *v);
        let uri = dir.path().to_str().expect("utf-8").to_owned();
        let options = ProbeOptions::for_target(TARGET);
        let prober = Prober::new();
        // a table whose first commit alone is not a table deltalake loads (its metadata comes
        // later) cannot start the replay at version 0
        if let Err(err) = prober.probe(&uri, &options).await {
            eprintln!("{name}: version 0 alone does not load ({err}); not replayed");
            continue;
        }
        for (version, files) in &later {
            // checkpoint files first: a commit never lands before the files it needs
            let mut files = files.clone();
            files.sort_by_key(|f| f.extension().is_some_and(|e| e == "json"));
            for file in files {
                std::fs::rename(&file, log.join(file.file_name().expect("name")))
                    .expect("move back");
            }
            let kept = prober
                .probe(&uri, &options)
                .await
                .unwrap_or_else(|e| panic!("{name}: re-probe at {version}: {e}"));
            let fresh = Prober::new()
                .probe(&uri, &options)
                .await
                .unwrap_or_else(|e| panic!("{name}: fresh probe at {version}: {e}"));
            assert_eq!(kept.version, fresh.version, "{name}");
            let figures = |p: &tablekeeper_delta::Probe| {
                (
                    p.files,
                    p.size_bytes,
                    p.small_files,
                    p.small_files_by_partition.clone(),
                    p.files_with_deletion_vectors,
                    p.rows_in_files_with_deletion_vectors,
                    p.deleted_rows,
                    p.external_files,
                    p.partition_columns.clone(),
                    p.history.erasure_pending_version,
                )
            };
            assert_eq!(
                figures(&kept),
                figures(&fresh),
                "{name} at version {version}: the re-probe's figures differ from a fresh load's"
            );
        }
        covered.push(name);
    }
    assert!(
        covered.len() >= 4,
        "reference tables with a whole log: {covered:?}"
    );
}

/// The probe as JSON without what differs between two probes of one version by design: when
/// each ran and what each still waits for.
fn settled(probe: &tablekeeper_delta::Probe) -> serde_json::Value {
    let mut json = serde_json::to_value(probe).expect("probe as JSON");
    if let Some(fields) = json.as_object_mut() {
        for moving in ["probed_at", "damage_check_pending", "history_pending"] {
            fields.remove(moving);
        }
    }
    json
}

/// Probes until neither first-sight read runs beside the probes any more.
async fn probe_until_settled(
    prober: &Prober,
    uri: &str,
    options: &ProbeOptions,
) -> tablekeeper_delta::Probe {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let probe = prober.probe(uri, options).await.expect("probe");
        if !probe.history_pending && !probe.damage_check_pending {
            return probe;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{uri}: the first-sight reads never ended"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The daemon's first probe of a table with a long log does not wait for the history read
/// of every JSON commit: it answers with the files, protocol and checkpoint (what deltalake's
/// load reads, from the checkpoint on), says the history is pending and leaves it empty; the
/// probe after the read ends reports everything a probe that waited for it reports. The same
/// holds for tables other engines wrote.
#[tokio::test]
async fn a_history_read_beside_the_first_probe_ends_in_what_a_waiting_probe_reads() {
    let t = create_table(true, &[]).await;
    for i in 0..4 {
        t.append(&rows(i * 10..i * 10 + 10, "2024-08-01")).await;
    }
    let cancel = CancellationToken::new();
    optimize(
        &t.uri,
        Optimize::ZOrder(&zorder_on(&["event_type"])),
        &cancel,
    )
    .await
    .expect("zorder");
    // a long log after it, then a checkpoint: the load reads one checkpoint, the history
    // every commit
    let log = t.path().join("_delta_log");
    let from = t.version().await + 1;
    let now_ms = chrono::Utc::now().timestamp_millis();
    for version in from..from + 4000 {
        let line = format!(
            r#"{{"commitInfo":{{"timestamp":{now_ms},"operation":"SET TBLPROPERTIES","operationParameters":{{}},"engineInfo":"padding"}}}}"#
        );
        std::fs::write(log.join(format!("{version:020}.json")), line).expect("commit");
    }
    checkpoint(&t.uri, &forced_checkpoint(), &cancel)
        .await
        .expect("checkpoint");

    let beside = ProbeOptions {
        first_sight_beside: true,
        ..ProbeOptions::for_target(TARGET)
    };
    let waiting = ProbeOptions::for_target(TARGET);
    let complete = Prober::new()
        .probe(&t.uri, &waiting)
        .await
        .expect("a probe that waits for the history");
    assert!(!complete.history_pending);
    assert!(
        complete.history.created_at.is_some() && complete.history.last_zorder_version.is_some()
    );

    let prober = Prober::new();
    let first = prober.probe(&t.uri, &beside).await.expect("first probe");
    assert!(
        first.history_pending,
        "4,000 commits read one by one outlast a load from the checkpoint"
    );
    assert_eq!(
        (first.version, first.files, first.size_bytes),
        (complete.version, complete.files, complete.size_bytes)
    );
    assert_eq!(
        first.small_files_by_partition,
        complete.small_files_by_partition
    );
    assert_eq!(
        first.last_checkpoint_version,
        complete.last_checkpoint_version
    );
    assert_eq!(
        (
            first.history.created_at,
            first.history.last_commit_at,
            first.history.history_from_version
        ),
        (None, None, None),
        "nothing of the history is reported before it is read"
    );
    assert_eq!(
        (first.history.last_zorder_at, first.history.commits_per_hour),
        (None, 0)
    );
    assert!(first.restore_drill.is_none());

    let settled_probe = probe_until_settled(&prober, &t.uri, &beside).await;
    assert_eq!(settled(&settled_probe), settled(&complete));

    for name in [
        "simple_table_with_checkpoint",
        "table-with-dv-small",
        "checkpoint-v2-table",
        "cdc_ict_table",
        "delta-live-table",
    ] {
        let dir = crate::aged::reference_table(name);
        let uri = dir.path().to_str().expect("utf-8").to_owned();
        let complete = Prober::new()
            .probe(&uri, &waiting)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let settled_probe = probe_until_settled(&Prober::new(), &uri, &beside).await;
        assert_eq!(settled(&settled_probe), settled(&complete), "{name}");
    }
}
