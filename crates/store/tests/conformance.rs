//! One conformance suite for every backend: each case is written once against
//! `&JobStore` and run on a fresh Postgres database and a fresh SQLite file.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

/// Generates one `#[tokio::test]` per (backend, case).
macro_rules! conformance {
    ($($case:ident),+ $(,)?) => {
        mod postgres {
            $(
                #[tokio::test]
                async fn $case() {
                    let harness = crate::common::Harness::postgres().await;
                    crate::suite::$case(harness.store.as_ref()).await;
                    harness.finish().await;
                }
            )+
        }
        mod sqlite {
            $(
                #[tokio::test]
                async fn $case() {
                    let harness = crate::common::Harness::sqlite().await;
                    crate::suite::$case(harness.store.as_ref()).await;
                    harness.finish().await;
                }
            )+
        }
    };
}

conformance!(
    migrate_is_idempotent_and_ping_works,
    enqueue_coalesces_per_table_and_operation,
    manual_trigger_pulls_a_scheduled_job_forward,
    enqueue_refuses_bad_input,
    claim_respects_concurrency_keys_and_reports_key_waits,
    future_run_at_is_not_claimed,
    claim_order_is_priority_then_run_at_then_id,
    heartbeat_extends_the_lease_and_reports_loss,
    complete_is_fenced_by_the_lease_token,
    fail_retries_with_backoff_then_stays_failed,
    conflicts_are_recorded_as_conflict,
    reaper_requeues_expired_leases_and_records_lost_lease,
    reaper_fails_a_job_out_of_attempts,
    release_gives_the_attempt_back,
    requeue_coalesces_into_a_newer_queued_job,
    cancel_only_cancels_queued_jobs,
    counts_cover_every_state,
    last_success_counts_only_successes,
    list_filters_newest_first,
    job_json_has_rfc3339_times_and_no_token,
    defer_gives_the_attempt_back_due_later,
    repair_and_purge_are_operations,
    history_coalesces_and_pages_newest_first,
    recorded_range_stops_at_the_first_hole_and_gaps_name_it,
    stale_writes_coalesce_and_fill_in_what_was_missing,
    foreign_rewrites_count_other_engines_rewrites_only,
    failure_streaks_count_every_replicas_failures_since_the_last_success,
    one_cron_tick_makes_one_job_even_after_it_started,
    pauses_are_shared_and_last_write_wins,
    pins_are_kept_per_version_replaced_and_removed,
    replicas_beat_leave_and_age_out,
    probes_are_shared_newest_first_and_keep_the_last_good_facts,
    figures_keep_changes_and_an_hourly_row_and_stay_bounded,
    fleet_health_keeps_the_first_replicas_hour_and_ages_out,
    tasks_are_added_under_the_jobs_lease_and_claimed_once_each,
    task_ends_are_fenced_and_failures_retry_then_fail,
    tasks_run_only_while_their_job_runs,
    reaper_requeues_expired_tasks_and_cancels_those_of_ended_jobs,
    task_counts_and_progress_cover_running_jobs,
    what_an_attempt_spent_is_fenced_and_carried_to_the_next,
    probe_costs_add_up_per_table_and_day,
    budget_rounds_gate_claims_and_count_the_windows_spend,
);

mod suite {
    use std::time::{Duration, Instant};

    use chrono::Utc;
    use serde_json::json;
    use tablekeeper_store::{
        AttemptOutcome, ClaimedJob, CommitRow, FailOutcome, FailureKind, JobFilter, JobId,
        JobState, JobStore, Lease, NewJob, Operation, Progress, RetryPolicy, StaleWriteRow,
        StoreError, TaskEnd, TaskEnded, TaskLease, TaskState, Trigger,
    };
    use tablekeeper_vocab::StaleKind;
    use uuid::Uuid;

    const LEASE: Duration = Duration::from_secs(60);

    fn job(table: &str, operation: &str) -> NewJob {
        NewJob::new(table, operation.parse().unwrap(), Trigger::Schedule)
    }

    async fn claim(store: &JobStore, worker: &str) -> Option<ClaimedJob> {
        store.claim(worker, LEASE).await.unwrap().job
    }

    async fn state_of(store: &JobStore, id: JobId) -> JobState {
        store.get_job(id).await.unwrap().expect("job exists").state
    }

    /// No backoff: a failed job is due again at once.
    fn immediate() -> RetryPolicy {
        RetryPolicy {
            base: Duration::ZERO,
            cap: Duration::ZERO,
        }
    }

    pub async fn migrate_is_idempotent_and_ping_works(store: &JobStore) {
        store.migrate().await.unwrap();
        store.migrate().await.unwrap();
        store.ping().await.unwrap();
    }

    pub async fn enqueue_coalesces_per_table_and_operation(store: &JobStore) {
        let first = store.enqueue(job("a", "compact")).await.unwrap();
        assert!(first.created);
        assert_eq!(first.job.state, JobState::Queued);
        assert_eq!(first.job.concurrency_key, "table:a");
        assert_eq!(first.job.attempt, 0);

        let again = store.enqueue(job("a", "compact")).await.unwrap();
        assert!(!again.created, "a second tick joins the queued job");
        assert_eq!(again.job.id, first.job.id);

        let other_op = store.enqueue(job("a", "vacuum")).await.unwrap();
        assert!(other_op.created);
        let other_table = store.enqueue(job("b", "compact")).await.unwrap();
        assert!(other_table.created);

        // Once the queued job is running, a new request queues a new job.
        let claimed = claim(store, "w").await.unwrap();
        assert_eq!(claimed.job.id, first.job.id);
        let next = store.enqueue(job("a", "compact")).await.unwrap();
        assert!(next.created);
        assert_ne!(next.job.id, first.job.id);
    }

    pub async fn manual_trigger_pulls_a_scheduled_job_forward(store: &JobStore) {
        let later = Utc::now() + chrono::Duration::hours(1);
        let scheduled = store
            .enqueue(job("a", "compact").with_run_at(later))
            .await
            .unwrap();
        // A schedule tick does not move it (it may be waiting out a retry backoff).
        let tick = store.enqueue(job("a", "compact")).await.unwrap();
        assert!(!tick.created);
        assert_eq!(tick.job.run_at, scheduled.job.run_at);
        assert_eq!(tick.job.trigger, Trigger::Schedule);
        assert!(claim(store, "w").await.is_none());

        let before = Utc::now() - chrono::Duration::seconds(1);
        let manual = store
            .enqueue(NewJob::new("a", Operation::Compact, Trigger::Manual).with_priority(5))
            .await
            .unwrap();
        assert!(!manual.created);
        assert_eq!(manual.job.id, scheduled.job.id);
        assert_eq!(manual.job.trigger, Trigger::Manual);
        assert_eq!(manual.job.priority, 5);
        assert!(manual.job.run_at < later && manual.job.run_at >= before);
        assert_eq!(claim(store, "w").await.unwrap().job.id, scheduled.job.id);
    }

    pub async fn enqueue_refuses_bad_input(store: &JobStore) {
        // an unknown operation cannot be built: the vocabulary refuses it before the store
        let err = "optimize".parse::<Operation>().unwrap_err();
        assert!(err
            .to_string()
            .contains("compact, zorder, vacuum, checkpoint"));
        let err = store.enqueue(job("", "compact")).await.unwrap_err();
        assert!(matches!(err, StoreError::InvalidInput(_)), "{err}");
        let err = store
            .enqueue(job("a", "compact").with_max_attempts(0))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("max_attempts"), "{err}");
        assert_eq!(store.counts_by_state().await.unwrap()[&JobState::Queued], 0);
    }

    pub async fn claim_respects_concurrency_keys_and_reports_key_waits(store: &JobStore) {
        // a and b share a key on purpose; c has its own.
        let a = store
            .enqueue(job("a", "compact").with_concurrency_key("shared"))
            .await
            .unwrap()
            .job;
        let b = store
            .enqueue(job("b", "compact").with_concurrency_key("shared"))
            .await
            .unwrap()
            .job;
        let c = store.enqueue(job("c", "compact")).await.unwrap().job;

        let first = store.claim("w1", LEASE).await.unwrap();
        let held = first.job.unwrap();
        assert_eq!(held.job.id, a.id);
        assert_eq!(held.job.state, JobState::Running);
        assert_eq!(held.job.attempt, 1);
        assert_eq!(held.job.worker_id.as_deref(), Some("w1"));
        assert_eq!(held.job.lease_token, Some(held.lease.token));
        assert!(first.key_waits.is_empty());

        // b is older than c but its key is held: c is claimed, b reported.
        let second = store.claim("w2", LEASE).await.unwrap();
        assert_eq!(second.job.unwrap().job.id, c.id);
        assert_eq!(second.key_waits.len(), 1);
        assert_eq!(second.key_waits[0].job_id, b.id);
        assert_eq!(second.key_waits[0].table_name, "b");
        assert_eq!(second.key_waits[0].operation, Operation::Compact);
        assert_eq!(second.key_waits[0].concurrency_key, "shared");

        let third = store.claim("w3", LEASE).await.unwrap();
        assert!(third.job.is_none());
        assert_eq!(third.key_waits.len(), 1);

        let attempts = store.attempts(a.id).await.unwrap();
        assert_eq!(attempts.len(), 1);
        assert_eq!(attempts[0].outcome, None, "an open attempt has no outcome");
        assert_eq!(attempts[0].finished_at, None);
        assert_eq!(attempts[0].worker_id, "w1");

        assert!(store
            .complete(&Lease::new(a.id, held.lease.token), json!({}))
            .await
            .unwrap());
        let fourth = store.claim("w3", LEASE).await.unwrap();
        assert_eq!(fourth.job.unwrap().job.id, b.id);
        assert!(fourth.key_waits.is_empty());
    }

    pub async fn future_run_at_is_not_claimed(store: &JobStore) {
        let later = Utc::now() + chrono::Duration::minutes(10);
        store
            .enqueue(job("a", "compact").with_run_at(later))
            .await
            .unwrap();
        let outcome = store.claim("w", LEASE).await.unwrap();
        assert!(outcome.job.is_none());
        assert!(outcome.key_waits.is_empty(), "not due is not a key wait");

        let past = Utc::now() - chrono::Duration::minutes(10);
        let due = store
            .enqueue(job("b", "compact").with_run_at(past))
            .await
            .unwrap()
            .job;
        assert_eq!(claim(store, "w").await.unwrap().job.id, due.id);
    }

    pub async fn claim_order_is_priority_then_run_at_then_id(store: &JobStore) {
        let now = Utc::now() - chrono::Duration::seconds(5);
        let low_old = store
            .enqueue(job("low-old", "compact").with_run_at(now - chrono::Duration::seconds(30)))
            .await
            .unwrap()
            .job;
        let low_new = store
            .enqueue(job("low-new", "compact").with_run_at(now))
            .await
            .unwrap()
            .job;
        let high = store
            .enqueue(job("high", "compact").with_priority(10).with_run_at(now))
            .await
            .unwrap()
            .job;
        let low_same_time = store
            .enqueue(job("low-same", "compact").with_run_at(now))
            .await
            .unwrap()
            .job;
        let mut order = Vec::new();
        while let Some(claimed) = claim(store, "w").await {
            order.push(claimed.job.id);
        }
        assert_eq!(order, [high.id, low_old.id, low_new.id, low_same_time.id]);
    }

    pub async fn heartbeat_extends_the_lease_and_reports_loss(store: &JobStore) {
        store.enqueue(job("a", "compact")).await.unwrap();
        let claimed = store
            .claim("w", Duration::from_secs(30))
            .await
            .unwrap()
            .job
            .unwrap();
        let id = claimed.job.id;
        let extended = store
            .heartbeat(
                &Lease::new(id, claimed.lease.token),
                Duration::from_secs(600),
            )
            .await
            .unwrap()
            .expect("the lease is held");
        assert!(extended > claimed.lease_expires_at + chrono::Duration::seconds(500));
        assert_eq!(
            store.get_job(id).await.unwrap().unwrap().lease_expires_at,
            Some(extended)
        );
        assert_eq!(
            store
                .heartbeat(&Lease::new(id, Uuid::new_v4()), LEASE)
                .await
                .unwrap(),
            None,
            "a foreign token does not renew"
        );
        assert!(store
            .complete(&Lease::new(id, claimed.lease.token), json!({}))
            .await
            .unwrap());
        assert_eq!(
            store
                .heartbeat(&Lease::new(id, claimed.lease.token), LEASE)
                .await
                .unwrap(),
            None,
            "a finished job has no lease"
        );
    }

    pub async fn complete_is_fenced_by_the_lease_token(store: &JobStore) {
        store.enqueue(job("a", "compact")).await.unwrap();
        let claimed = claim(store, "w").await.unwrap();
        let id = claimed.job.id;

        let stale = Uuid::new_v4();
        assert!(!store
            .complete(&Lease::new(id, stale), json!({"stale": true}))
            .await
            .unwrap());
        let untouched = store.get_job(id).await.unwrap().unwrap();
        assert_eq!(untouched.state, JobState::Running);
        assert_eq!(untouched.result, None);
        assert_eq!(
            store
                .fail(
                    &Lease::new(id, stale),
                    FailureKind::Failed,
                    "stale",
                    &immediate()
                )
                .await
                .unwrap(),
            FailOutcome::LeaseLost
        );
        assert!(!store
            .release(&Lease::new(id, stale), "stale")
            .await
            .unwrap());
        assert_eq!(store.get_job(id).await.unwrap().unwrap(), untouched);

        let result = json!({"files_rewritten": 12, "bytes_rewritten": 1_048_576});
        assert!(store
            .complete(&Lease::new(id, claimed.lease.token), result.clone())
            .await
            .unwrap());
        let done = store.get_job(id).await.unwrap().unwrap();
        assert_eq!(done.state, JobState::Succeeded);
        assert_eq!(done.result, Some(result));
        assert_eq!(done.lease_token, None);
        assert_eq!(done.lease_expires_at, None);
        assert_eq!(done.error, None);
        let finished_at = done.finished_at.expect("finished_at set");
        assert!(finished_at >= done.started_at.unwrap());

        // Retrying a completion whose reply was lost: still true, nothing changes.
        assert!(store
            .complete(&Lease::new(id, claimed.lease.token), json!({"again": true}))
            .await
            .unwrap());
        assert_eq!(store.get_job(id).await.unwrap().unwrap(), done);
        // But the completed lease cannot fail or release the job any more.
        assert_eq!(
            store
                .fail(
                    &Lease::new(id, claimed.lease.token),
                    FailureKind::Failed,
                    "late",
                    &immediate()
                )
                .await
                .unwrap(),
            FailOutcome::LeaseLost
        );
        let attempts = store.attempts(id).await.unwrap();
        assert_eq!(attempts.len(), 1);
        assert_eq!(attempts[0].outcome, Some(AttemptOutcome::Succeeded));
        assert!(attempts[0].finished_at.is_some());
    }

    pub async fn what_an_attempt_spent_is_fenced_and_carried_to_the_next(store: &JobStore) {
        let mut first = job("a", "compact");
        first.max_attempts = 2;
        store.enqueue(first).await.unwrap();
        let claimed = claim(store, "w").await.unwrap();
        let id = claimed.job.id;
        let spent = json!({"cost": {"cpu_seconds": 1.5}, "owner": "data-eng"});
        assert!(!store
            .keep_spent(&Lease::new(id, Uuid::new_v4()), spent.clone())
            .await
            .unwrap());
        assert_eq!(store.get_job(id).await.unwrap().unwrap().result, None);
        assert!(store
            .keep_spent(&claimed.lease, spent.clone())
            .await
            .unwrap());
        let outcome = store
            .fail(&claimed.lease, FailureKind::Failed, "boom", &immediate())
            .await
            .unwrap();
        assert!(
            matches!(outcome, FailOutcome::Retrying { .. }),
            "{outcome:?}"
        );
        // the next attempt finds what the first spent
        let again = claim(store, "w").await.unwrap();
        assert_eq!(again.job.id, id);
        assert_eq!(again.job.result, Some(spent));
        let more = json!({"cost": {"cpu_seconds": 4.0}, "owner": "data-eng"});
        assert!(store.keep_spent(&again.lease, more.clone()).await.unwrap());
        let outcome = store
            .fail(&again.lease, FailureKind::Failed, "boom", &immediate())
            .await
            .unwrap();
        assert_eq!(outcome, FailOutcome::Failed);
        // a failed job keeps it, and the lease that ended cannot change it
        let failed = store.get_job(id).await.unwrap().unwrap();
        assert_eq!(failed.state, JobState::Failed);
        assert_eq!(failed.result, Some(more));
        assert!(!store.keep_spent(&again.lease, json!({})).await.unwrap());
    }

    pub async fn budget_rounds_gate_claims_and_count_the_windows_spend(store: &JobStore) {
        use tablekeeper_store::{Deferral, JobVerdict, RoundVerdicts, RoundWindow};
        let a = store.enqueue(job("a", "compact")).await.unwrap().job.id;
        let b = store.enqueue(job("b", "compact")).await.unwrap().job.id;
        let estimate =
            |cpu: f64| json!({"cost": {"cpu_seconds": cpu}, "benefit": 1.0, "owner": "o"});
        store.set_estimate(a, estimate(2.0)).await.unwrap();
        store.set_estimate(b, estimate(3.0)).await.unwrap();
        let now = Utc::now();
        let window = RoundWindow {
            start: now - chrono::Duration::minutes(1),
            end: now + chrono::Duration::minutes(59),
            limit_cpu_seconds: 2.5,
            mode: "enforce",
        };
        // under an enforced budget nothing a round has not admitted is claimed
        assert!(store
            .claim_admitted("w", LEASE, true)
            .await
            .unwrap()
            .job
            .is_none());
        let written = store
            .budget_round(&window, |queued, spend| {
                assert_eq!(queued.len(), 2);
                assert_eq!(
                    queued[1].estimate.as_ref().unwrap()["cost"]["cpu_seconds"],
                    3.0
                );
                assert_eq!(spend.total, 0.0);
                RoundVerdicts {
                    verdicts: vec![
                        JobVerdict {
                            id: a.0,
                            class: Some("budget".into()),
                            reason: None,
                            note: "within the budget".into(),
                        },
                        JobVerdict {
                            id: b.0,
                            class: None,
                            reason: Some("budget".into()),
                            note: "deferred: budget".into(),
                        },
                    ],
                    deferrals: vec![Deferral {
                        id: b.0,
                        table: "b".into(),
                        operation: "compact".into(),
                        reason: "budget".into(),
                        rank: 2,
                        ranked: 2,
                    }],
                }
            })
            .await
            .unwrap();
        assert_eq!(written.verdicts.len(), 2);
        let queue = store.budget_queue().await.unwrap();
        let deferred = queue.iter().find(|q| q.table_name == "b").unwrap();
        assert_eq!(deferred.reason.as_deref(), Some("budget"));
        assert!(deferred.deferred_at.is_some());
        // only the admitted job is claimed; its estimate counts while it runs
        let claimed = store
            .claim_admitted("w", LEASE, true)
            .await
            .unwrap()
            .job
            .unwrap();
        assert_eq!(claimed.job.id, a);
        assert!(store
            .claim_admitted("w", LEASE, true)
            .await
            .unwrap()
            .job
            .is_none());
        let spend = store.budget_spent(window.start, window.end).await.unwrap();
        assert!((spend.total - 2.0).abs() < 1e-6, "{spend:?}");
        assert!((spend.by_owner["o"] - 2.0).abs() < 1e-6);
        // finished, its measured cost replaces the estimate
        store
            .complete(&claimed.lease, json!({"cost": {"cpu_seconds": 1.25}}))
            .await
            .unwrap();
        let spend = store.budget_spent(window.start, window.end).await.unwrap();
        assert!((spend.total - 1.25).abs() < 1e-6, "{spend:?}");
        let report = store
            .budget_report(window.start - chrono::Duration::seconds(1))
            .await
            .unwrap();
        assert_eq!(report.len(), 1);
        assert_eq!(report[0].mode, "enforce");
        assert_eq!(report[0].runs, 1);
        assert_eq!(report[0].deferrals, 1);
        assert_eq!(report[0].would_defer, 0);
        assert!((report[0].spent_cpu_seconds - 1.25).abs() < 1e-6);
        assert!((report[0].limit_cpu_seconds - 2.5).abs() < 1e-6);
        assert!(report[0].longest_wait_seconds.is_some());
        let pairs = store
            .estimates_and_costs(window.start - chrono::Duration::seconds(1))
            .await
            .unwrap();
        assert_eq!(pairs, vec![(Operation::Compact, 2.0, 1.25)]);
        // without the gate, the deferred job is claimed as before; a job that runs without
        // an admission (an ungated claim) spends the window too
        assert_eq!(claim(store, "w").await.unwrap().job.id, b);
        let spend = store.budget_spent(window.start, window.end).await.unwrap();
        assert!((spend.total - 4.25).abs() < 1e-6, "{spend:?}");
    }

    pub async fn probe_costs_add_up_per_table_and_day(store: &JobStore) {
        let day = |d: u32| {
            chrono::NaiveDate::from_ymd_opt(2026, 12, d)
                .unwrap()
                .and_hms_opt(0, 0, 0)
                .unwrap()
                .and_utc()
        };
        let cost = |cpu: f64, gets: u64| tablekeeper_vocab::Cost {
            cpu_seconds: cpu,
            requests: tablekeeper_vocab::Requests {
                get: gets,
                ..Default::default()
            },
            ..Default::default()
        };
        for (replica, d, gets) in [("r1", 1, 2), ("r2", 1, 3), ("r1", 2, 5), ("r1", 2, 1)] {
            store
                .record_probe_costs(replica, day(d), "t", "data-eng", &cost(0.25, gets))
                .await
                .unwrap();
        }
        let rows = store.probe_costs(day(1)).await.unwrap();
        let by_day: Vec<_> = rows
            .iter()
            .map(|r| {
                (
                    r.table.as_str(),
                    r.day,
                    r.cost.requests.get,
                    r.cost.cpu_seconds,
                )
            })
            .collect();
        assert_eq!(
            by_day,
            vec![("t", day(1), 5, 0.5), ("t", day(2), 6, 0.5)],
            "summed over replicas, a row per day"
        );
        let later = store
            .probe_costs(day(2) + chrono::Duration::hours(5))
            .await
            .unwrap();
        assert_eq!(later.len(), 1, "from the day of `since` on: {later:?}");
    }

    pub async fn fail_retries_with_backoff_then_stays_failed(store: &JobStore) {
        // Backoff moves run_at into the future: the job is not claimable meanwhile.
        let slow = RetryPolicy {
            base: Duration::from_secs(3600),
            cap: Duration::from_secs(3600),
        };
        let waiting = store.enqueue(job("slow", "vacuum")).await.unwrap().job;
        let claimed = claim(store, "w").await.unwrap();
        let before = Utc::now() - chrono::Duration::seconds(1);
        let outcome = store
            .fail(
                &Lease::new(waiting.id, claimed.lease.token),
                FailureKind::Failed,
                "s3 timeout",
                &slow,
            )
            .await
            .unwrap();
        let FailOutcome::Retrying { run_at } = outcome else {
            panic!("expected a retry, got {outcome:?}");
        };
        assert!(run_at > before && run_at <= Utc::now() + chrono::Duration::seconds(3601));
        let requeued = store.get_job(waiting.id).await.unwrap().unwrap();
        assert_eq!(requeued.state, JobState::Queued);
        assert_eq!(requeued.run_at, run_at);
        assert_eq!(requeued.attempt, 1);
        assert_eq!(requeued.error.as_deref(), Some("s3 timeout"));
        assert_eq!(requeued.lease_token, None);

        // With no backoff the job comes straight back until attempts run out.
        let id = store
            .enqueue(job("flaky", "compact").with_max_attempts(3))
            .await
            .unwrap()
            .job
            .id;
        let mut outcomes = Vec::new();
        for n in 1..=3 {
            let claimed = claim(store, "w").await.expect("due again");
            assert_eq!(claimed.job.id, id);
            assert_eq!(claimed.job.attempt, n);
            outcomes.push(
                store
                    .fail(
                        &Lease::new(id, claimed.lease.token),
                        FailureKind::Failed,
                        &format!("boom {n}"),
                        &immediate(),
                    )
                    .await
                    .unwrap(),
            );
        }
        assert!(matches!(outcomes[0], FailOutcome::Retrying { .. }));
        assert!(matches!(outcomes[1], FailOutcome::Retrying { .. }));
        assert_eq!(outcomes[2], FailOutcome::Failed);
        let failed = store.get_job(id).await.unwrap().unwrap();
        assert_eq!(failed.state, JobState::Failed);
        assert_eq!(failed.attempt, 3);
        assert_eq!(failed.error.as_deref(), Some("boom 3"));
        assert!(failed.finished_at.is_some());
        assert!(
            claim(store, "w").await.is_none(),
            "a failed job stays failed"
        );
        let attempts = store.attempts(id).await.unwrap();
        let numbers: Vec<i32> = attempts.iter().map(|a| a.attempt).collect();
        assert_eq!(numbers, [1, 2, 3]);
        assert!(attempts
            .iter()
            .all(|a| a.outcome == Some(AttemptOutcome::Failed)));
        assert_eq!(attempts[1].error.as_deref(), Some("boom 2"));
    }

    pub async fn conflicts_are_recorded_as_conflict(store: &JobStore) {
        let id = store.enqueue(job("a", "zorder")).await.unwrap().job.id;
        let claimed = claim(store, "w").await.unwrap();
        let outcome = store
            .fail(
                &Lease::new(id, claimed.lease.token),
                FailureKind::Conflict,
                "concurrent commit",
                &immediate(),
            )
            .await
            .unwrap();
        assert!(matches!(outcome, FailOutcome::Retrying { .. }));
        let attempts = store.attempts(id).await.unwrap();
        assert_eq!(attempts[0].outcome, Some(AttemptOutcome::Conflict));
        assert_eq!(attempts[0].error.as_deref(), Some("concurrent commit"));
    }

    /// Polls `reap_expired(grace 0)` until it reaps something (a zero lease expires
    /// at once, but the database clock must move past it).
    async fn reap_until_some(store: &JobStore) -> Vec<tablekeeper_store::ReapedJob> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let reaped = store.reap_expired(Duration::ZERO).await.unwrap();
            if !reaped.is_empty() {
                return reaped;
            }
            assert!(Instant::now() < deadline, "nothing reaped within 10s");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    pub async fn reaper_requeues_expired_leases_and_records_lost_lease(store: &JobStore) {
        let id = store.enqueue(job("a", "compact")).await.unwrap().job.id;
        let lost = store
            .claim("crashed-worker", Duration::ZERO)
            .await
            .unwrap()
            .job
            .unwrap();
        // Not expired by more than an hour's grace: nothing to do.
        assert!(store
            .reap_expired(Duration::from_secs(3600))
            .await
            .unwrap()
            .is_empty());

        let reaped = reap_until_some(store).await;
        assert_eq!(reaped.len(), 1);
        assert_eq!(reaped[0].job_id, id);
        assert_eq!(reaped[0].worker_id, "crashed-worker");
        assert_eq!(reaped[0].attempt, 1);
        assert!(reaped[0].requeued);
        assert_eq!(reaped[0].superseded_by, None);
        assert_eq!(reaped[0].lease_expires_at, lost.lease_expires_at);
        // Reaping again finds nothing: each expiry is handled once.
        assert!(store.reap_expired(Duration::ZERO).await.unwrap().is_empty());

        let job = store.get_job(id).await.unwrap().unwrap();
        assert_eq!(job.state, JobState::Queued);
        assert_eq!(job.attempt, 1, "a lost lease consumes the attempt");
        assert!(job.run_at <= Utc::now() + chrono::Duration::seconds(1));
        let attempts = store.attempts(id).await.unwrap();
        assert_eq!(attempts[0].outcome, Some(AttemptOutcome::LostLease));
        let why = attempts[0].error.clone().unwrap();
        assert!(
            why.contains("crashed-worker") && why.contains("expired at"),
            "{why}"
        );

        // The old owner can no longer write.
        assert!(!store
            .complete(&Lease::new(id, lost.lease.token), json!({"stale": true}))
            .await
            .unwrap());
        assert_eq!(
            store
                .heartbeat(&Lease::new(id, lost.lease.token), LEASE)
                .await
                .unwrap(),
            None
        );

        let retaken = claim(store, "healthy-worker").await.unwrap();
        assert_eq!(retaken.job.id, id);
        assert_eq!(retaken.job.attempt, 2);
        assert!(!store
            .complete(&Lease::new(id, lost.lease.token), json!({"stale": true}))
            .await
            .unwrap());
        assert!(store
            .complete(&Lease::new(id, retaken.lease.token), json!({"ok": true}))
            .await
            .unwrap());
        assert_eq!(
            store.get_job(id).await.unwrap().unwrap().result,
            Some(json!({"ok": true}))
        );
    }

    pub async fn reaper_fails_a_job_out_of_attempts(store: &JobStore) {
        let id = store
            .enqueue(job("a", "checkpoint").with_max_attempts(1))
            .await
            .unwrap()
            .job
            .id;
        store.claim("w", Duration::ZERO).await.unwrap().job.unwrap();
        let reaped = reap_until_some(store).await;
        assert!(!reaped[0].requeued);
        let job = store.get_job(id).await.unwrap().unwrap();
        assert_eq!(job.state, JobState::Failed);
        assert!(job
            .error
            .unwrap()
            .contains("no attempts left (1 of 1 used)"));
        assert!(job.finished_at.is_some());
    }

    pub async fn release_gives_the_attempt_back(store: &JobStore) {
        let id = store.enqueue(job("a", "compact")).await.unwrap().job.id;
        let claimed = claim(store, "w").await.unwrap();
        assert!(store
            .release(&Lease::new(id, claimed.lease.token), "shutting down")
            .await
            .unwrap());
        let job = store.get_job(id).await.unwrap().unwrap();
        assert_eq!(job.state, JobState::Queued);
        assert_eq!(job.attempt, 0);
        assert_eq!(job.lease_token, None);
        let attempts = store.attempts(id).await.unwrap();
        assert_eq!(attempts[0].outcome, Some(AttemptOutcome::Cancelled));
        assert_eq!(attempts[0].error.as_deref(), Some("shutting down"));
        assert!(!store
            .release(&Lease::new(id, claimed.lease.token), "again")
            .await
            .unwrap());

        let again = claim(store, "w2").await.unwrap();
        assert_eq!(again.job.id, id);
        assert_eq!(
            again.job.attempt, 1,
            "the released attempt was not consumed"
        );
        let numbers: Vec<i32> = store
            .attempts(id)
            .await
            .unwrap()
            .iter()
            .map(|a| a.attempt)
            .collect();
        assert_eq!(numbers, [1, 1]);
    }

    pub async fn requeue_coalesces_into_a_newer_queued_job(store: &JobStore) {
        // A cron tick queued a new job while the first ran: the failing first job must
        // not become a second queued job for the same (table, operation).
        let first = store.enqueue(job("a", "compact")).await.unwrap().job;
        let claimed = claim(store, "w").await.unwrap();
        let newer = store.enqueue(job("a", "compact")).await.unwrap();
        assert!(newer.created);
        let outcome = store
            .fail(
                &Lease::new(first.id, claimed.lease.token),
                FailureKind::Failed,
                "boom",
                &immediate(),
            )
            .await
            .unwrap();
        assert_eq!(
            outcome,
            FailOutcome::Superseded {
                queued_job_id: newer.job.id
            }
        );
        let first_now = store.get_job(first.id).await.unwrap().unwrap();
        assert_eq!(first_now.state, JobState::Cancelled);
        assert_eq!(
            first_now.error,
            Some(format!("superseded by queued job {}", newer.job.id))
        );
        assert_eq!(state_of(store, newer.job.id).await, JobState::Queued);

        // Same rule for the reaper and for release.
        let taken = store.claim("w", Duration::ZERO).await.unwrap().job.unwrap();
        assert_eq!(taken.job.id, newer.job.id);
        let third = store.enqueue(job("a", "compact")).await.unwrap().job;
        let reaped = reap_until_some(store).await;
        assert_eq!(reaped[0].superseded_by, Some(third.id));
        assert!(!reaped[0].requeued);
        assert_eq!(state_of(store, newer.job.id).await, JobState::Cancelled);

        let running = claim(store, "w").await.unwrap();
        assert_eq!(running.job.id, third.id);
        let fourth = store.enqueue(job("a", "compact")).await.unwrap().job;
        assert!(store
            .release(&Lease::new(third.id, running.lease.token), "shutdown")
            .await
            .unwrap());
        assert_eq!(state_of(store, third.id).await, JobState::Cancelled);
        assert_eq!(state_of(store, fourth.id).await, JobState::Queued);
    }

    pub async fn cancel_only_cancels_queued_jobs(store: &JobStore) {
        let queued = store.enqueue(job("a", "vacuum")).await.unwrap().job;
        assert!(store.cancel(queued.id).await.unwrap());
        let cancelled = store.get_job(queued.id).await.unwrap().unwrap();
        assert_eq!(cancelled.state, JobState::Cancelled);
        assert!(cancelled.finished_at.is_some());
        assert!(!store.cancel(queued.id).await.unwrap(), "already cancelled");

        let running = store.enqueue(job("b", "vacuum")).await.unwrap().job;
        let claimed = claim(store, "w").await.unwrap();
        assert_eq!(claimed.job.id, running.id);
        assert!(
            !store.cancel(running.id).await.unwrap(),
            "running jobs are not cancelled here"
        );
        assert_eq!(state_of(store, running.id).await, JobState::Running);

        let err = store.cancel(JobId(999_999)).await.unwrap_err();
        assert!(
            matches!(err, StoreError::NotFound { id: JobId(999_999) }),
            "{err}"
        );
        let err = store.attempts(JobId(999_999)).await.unwrap_err();
        assert!(matches!(err, StoreError::NotFound { .. }), "{err}");
        assert!(store.get_job(JobId(999_999)).await.unwrap().is_none());
    }

    pub async fn counts_cover_every_state(store: &JobStore) {
        let counts = store.counts_by_state().await.unwrap();
        assert_eq!(counts.len(), 5);
        assert!(counts.values().all(|n| *n == 0));

        // One job in each state.
        let s = store.enqueue(job("s", "compact")).await.unwrap().job;
        let c = claim(store, "w").await.unwrap();
        store
            .complete(&Lease::new(s.id, c.lease.token), json!({}))
            .await
            .unwrap();
        let f = store
            .enqueue(job("f", "compact").with_max_attempts(1))
            .await
            .unwrap()
            .job;
        let c = claim(store, "w").await.unwrap();
        store
            .fail(
                &Lease::new(f.id, c.lease.token),
                FailureKind::Failed,
                "x",
                &immediate(),
            )
            .await
            .unwrap();
        let x = store.enqueue(job("x", "compact")).await.unwrap().job;
        store.cancel(x.id).await.unwrap();
        store.enqueue(job("r", "compact")).await.unwrap();
        claim(store, "w").await.unwrap();
        store.enqueue(job("q", "compact")).await.unwrap();
        store.enqueue(job("q2", "compact")).await.unwrap();

        let counts = store.counts_by_state().await.unwrap();
        let expected = [
            (JobState::Queued, 2),
            (JobState::Running, 1),
            (JobState::Succeeded, 1),
            (JobState::Failed, 1),
            (JobState::Cancelled, 1),
        ];
        assert_eq!(counts.into_iter().collect::<Vec<_>>(), expected);
    }

    pub async fn last_success_counts_only_successes(store: &JobStore) {
        assert!(store.last_success().await.unwrap().is_empty());
        let mut finishes = Vec::new();
        for (table, operation) in [
            ("a", "compact"),
            ("a", "compact"),
            ("a", "vacuum"),
            ("b", "compact"),
        ] {
            let id = store.enqueue(job(table, operation)).await.unwrap().job.id;
            let claimed = claim(store, "w").await.unwrap();
            assert_eq!(claimed.job.id, id);
            store
                .complete(&Lease::new(id, claimed.lease.token), json!({}))
                .await
                .unwrap();
            finishes.push(store.get_job(id).await.unwrap().unwrap());
        }
        // A failure does not count as a success.
        let failed = store
            .enqueue(job("b", "vacuum").with_max_attempts(1))
            .await
            .unwrap()
            .job;
        let claimed = claim(store, "w").await.unwrap();
        store
            .fail(
                &Lease::new(failed.id, claimed.lease.token),
                FailureKind::Failed,
                "x",
                &immediate(),
            )
            .await
            .unwrap();

        let last = store.last_success().await.unwrap();
        let keys: Vec<(&str, &str)> = last
            .iter()
            .map(|s| (s.table_name.as_str(), s.operation.as_str()))
            .collect();
        assert_eq!(keys, [("a", "compact"), ("a", "vacuum"), ("b", "compact")]);
        assert_eq!(last[0].finished_at, finishes[1].finished_at.unwrap());
    }

    pub async fn list_filters_newest_first(store: &JobStore) {
        let mut ids = Vec::new();
        for (table, operation) in [
            ("a", "compact"),
            ("b", "compact"),
            ("a", "vacuum"),
            ("a", "zorder"),
        ] {
            ids.push(store.enqueue(job(table, operation)).await.unwrap().job.id);
        }
        let claimed = claim(store, "w").await.unwrap();
        assert_eq!(claimed.job.id, ids[0]);

        let all = store.list_jobs(&JobFilter::default()).await.unwrap();
        let listed: Vec<JobId> = all.iter().map(|j| j.id).collect();
        assert_eq!(listed, [ids[3], ids[2], ids[1], ids[0]]);

        let table_a = JobFilter {
            table: Some("a".into()),
            ..JobFilter::default()
        };
        let listed: Vec<JobId> = store
            .list_jobs(&table_a)
            .await
            .unwrap()
            .iter()
            .map(|j| j.id)
            .collect();
        assert_eq!(listed, [ids[3], ids[2], ids[0]]);

        let queued_a = JobFilter {
            table: Some("a".into()),
            state: Some(JobState::Queued),
            operation: None,
            limit: 1,
        };
        let listed: Vec<JobId> = store
            .list_jobs(&queued_a)
            .await
            .unwrap()
            .iter()
            .map(|j| j.id)
            .collect();
        assert_eq!(listed, [ids[3]]);

        let running = JobFilter {
            state: Some(JobState::Running),
            ..JobFilter::default()
        };
        let listed = store.list_jobs(&running).await.unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].id, ids[0]);

        let vacuums_of_a = JobFilter {
            table: Some("a".into()),
            operation: Some(Operation::Vacuum),
            ..JobFilter::default()
        };
        let listed: Vec<JobId> = store
            .list_jobs(&vacuums_of_a)
            .await
            .unwrap()
            .iter()
            .map(|j| j.id)
            .collect();
        assert_eq!(listed, [ids[2]]);
    }

    pub async fn job_json_has_rfc3339_times_and_no_token(store: &JobStore) {
        store.enqueue(job("a", "compact")).await.unwrap();
        let claimed = claim(store, "w").await.unwrap();
        let value = serde_json::to_value(&claimed.job).unwrap();
        assert_eq!(value["state"], "running");
        assert_eq!(value["trigger"], "schedule");
        assert_eq!(value["operation"], "compact");
        assert!(value.get("lease_token").is_none(), "{value}");
        let started = value["started_at"].as_str().unwrap();
        chrono::DateTime::parse_from_rfc3339(started).expect("RFC 3339");
        assert!(started.ends_with('Z'), "{started}");
        let parsed: tablekeeper_store::Job = serde_json::from_value(value).unwrap();
        assert_eq!(parsed.id, claimed.job.id);
    }

    pub async fn defer_gives_the_attempt_back_due_later(store: &JobStore) {
        let id = store.enqueue(job("a", "compact")).await.unwrap().job.id;
        let claimed = claim(store, "w").await.unwrap();
        assert!(store
            .defer(
                &Lease::new(id, claimed.lease.token),
                "overwrite window",
                Duration::from_secs(3600)
            )
            .await
            .unwrap());
        let deferred = store.get_job(id).await.unwrap().unwrap();
        assert_eq!(deferred.state, JobState::Queued);
        assert_eq!(deferred.attempt, 0, "a deferral consumes no attempt");
        assert!(deferred.run_at > Utc::now() + chrono::Duration::minutes(55));
        assert!(
            claim(store, "w").await.is_none(),
            "not due before the window closes"
        );
        let attempts = store.attempts(id).await.unwrap();
        assert_eq!(attempts[0].outcome, Some(AttemptOutcome::Cancelled));
        assert_eq!(attempts[0].error.as_deref(), Some("overwrite window"));
        assert!(!store
            .defer(
                &Lease::new(id, claimed.lease.token),
                "again",
                Duration::ZERO
            )
            .await
            .unwrap());
    }

    pub async fn repair_and_purge_are_operations(store: &JobStore) {
        // purge is in the database's CHECK already (migration 0003); the vocabulary gains it
        // with the purge operation itself, and an unknown operation cannot be written at all
        let enqueued = store.enqueue(job("a", "repair")).await.unwrap();
        assert!(enqueued.created);
        assert_eq!(enqueued.job.operation, Operation::Repair);
    }

    fn commit(version: i64, operation: &str) -> CommitRow {
        CommitRow {
            version,
            // commit times are milliseconds in a Delta log
            timestamp: chrono::DateTime::from_timestamp_millis(
                Utc::now().timestamp_millis() - (100 - version) * 86_400_000,
            )
            .unwrap(),
            operation: Some(operation.to_owned()),
            operation_parameters: Some(json!({"mode": "Append"})),
            operation_metrics: Some(json!({"numFiles": "1"})),
            engine_info: Some("Apache-Spark/3.5.0 Delta-Lake/3.1.0".into()),
            user_name: None,
            is_blind_append: Some(true),
            rewrite: Some(false),
            tablekeeper_operation: None,
        }
    }

    pub async fn history_coalesces_and_pages_newest_first(store: &JobStore) {
        let commits: Vec<CommitRow> = (0..5).map(|v| commit(v, "WRITE")).collect();
        assert_eq!(store.record_commits("t", &commits).await.unwrap(), 5);
        // a second replica records the same commits, and one more
        let mut again = commits.clone();
        again.push(commit(5, "OPTIMIZE"));
        assert_eq!(store.record_commits("t", &again).await.unwrap(), 1);
        // a replica that read something else for a recorded version changes nothing
        let mut other = commit(0, "SOMETHING ELSE");
        other.user_name = Some("x".into());
        assert_eq!(store.record_commits("t", &[other]).await.unwrap(), 0);

        let page = store.history("t", None, 3).await.unwrap();
        assert_eq!(
            page.iter().map(|c| c.version).collect::<Vec<_>>(),
            [5, 4, 3]
        );
        let older = store.history("t", Some(3), 100).await.unwrap();
        assert_eq!(
            older.iter().map(|c| c.version).collect::<Vec<_>>(),
            [2, 1, 0]
        );
        assert_eq!(
            older[2], commits[0],
            "stored as recorded first, every field"
        );
        assert!(store.history("other", None, 10).await.unwrap().is_empty());
        let value = serde_json::to_value(&page[0]).unwrap();
        chrono::DateTime::parse_from_rfc3339(value["timestamp"].as_str().unwrap())
            .expect("RFC 3339");
    }

    pub async fn recorded_range_stops_at_the_first_hole_and_gaps_name_it(store: &JobStore) {
        assert_eq!(store.recorded_range("t").await.unwrap(), None);
        assert!(store.history_gaps("t").await.unwrap().is_empty());
        // versions 0..=2 were cleaned up before anyone recorded them; 8 is missing too
        let commits: Vec<CommitRow> = [3, 4, 5, 6, 7, 9, 10]
            .into_iter()
            .map(|v| commit(v, "WRITE"))
            .collect();
        store.record_commits("t", &commits).await.unwrap();
        assert_eq!(store.recorded_range("t").await.unwrap(), Some((3, 7)));
        assert_eq!(store.history_gaps("t").await.unwrap(), [(0, 2), (8, 8)]);
        store
            .record_commits("t", &[commit(8, "WRITE")])
            .await
            .unwrap();
        assert_eq!(store.recorded_range("t").await.unwrap(), Some((3, 10)));
        assert_eq!(store.history_gaps("t").await.unwrap(), [(0, 2)]);
    }

    fn stale(version: i64) -> StaleWriteRow {
        StaleWriteRow {
            table_name: "t".into(),
            version,
            committed_at: Some(Utc::now()),
            operation: Some("WRITE".into()),
            engine_info: Some("delta-rs:py-1.6.6".into()),
            kind: Some(StaleKind::Overwrite),
            rewrite_versions: vec![version - 1],
            files: 10,
            sample_files: vec!["part-0.parquet".into()],
            rows: None,
            over_repair: false,
            repaired_by: None,
            detected_at: None,
        }
    }

    pub async fn foreign_rewrites_count_other_engines_rewrites_only(store: &JobStore) {
        let rewrite = |version: i64, by_tablekeeper: Option<&str>, engine: &str| {
            let mut c = commit(version, "OPTIMIZE");
            c.rewrite = Some(true);
            c.tablekeeper_operation = by_tablekeeper.map(str::to_owned);
            c.engine_info = Some(engine.into());
            c
        };
        let commits = vec![
            commit(1, "WRITE"),
            rewrite(2, Some("compact"), "delta-rs:1.1.2"),
            rewrite(3, None, "delta-rs:py-1.6.6"),
            commit(4, "WRITE"),
            rewrite(5, None, "Apache-Spark/3.5.0 Delta-Lake/3.1.0"),
            // recorded before rewrites were told apart
            CommitRow {
                rewrite: None,
                ..commit(6, "OPTIMIZE")
            },
        ];
        store.record_commits("t", &commits).await.unwrap();
        store
            .record_commits("u", &[rewrite(1, Some("zorder"), "delta-rs:1.1.2")])
            .await
            .unwrap();
        let found = store.foreign_rewrites().await.unwrap();
        assert_eq!(
            found.len(),
            1,
            "tablekeeper's own rewrites do not count: {found:?}"
        );
        let t = &found[0];
        assert_eq!(t.table_name, "t");
        assert_eq!(t.rewrites, 2);
        assert_eq!(t.last_version, 5);
        assert_eq!(t.last_operation.as_deref(), Some("OPTIMIZE"));
        assert_eq!(
            t.last_engine_info.as_deref(),
            Some("Apache-Spark/3.5.0 Delta-Lake/3.1.0")
        );
        // the history route reads the new columns back
        let history = store.history("t", None, 10).await.unwrap();
        assert_eq!(history[1].rewrite, Some(true));
        assert_eq!(history[1].tablekeeper_operation, None);
        assert_eq!(history[0].rewrite, None);
    }

    pub async fn stale_writes_coalesce_and_fill_in_what_was_missing(store: &JobStore) {
        assert_eq!(store.record_stale_writes(&[stale(12)]).await.unwrap(), 1);
        // another replica saw the same write with its rows counted, later repaired
        let mut counted = stale(12);
        counted.rows = Some(100);
        assert_eq!(
            store.record_stale_writes(&[counted.clone()]).await.unwrap(),
            0
        );
        let mut repaired = counted.clone();
        repaired.repaired_by = Some(14);
        repaired.rows = Some(999);
        store
            .record_stale_writes(&[repaired, stale(20)])
            .await
            .unwrap();
        let rows = store.stale_writes(Some("t")).await.unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].version, 12);
        assert_eq!(rows[0].rows, Some(100), "a known count is kept");
        assert_eq!(rows[0].repaired_by, Some(14));
        assert_eq!(rows[0].rewrite_versions, [11]);
        assert_eq!(rows[0].sample_files, ["part-0.parquet"]);
        assert_eq!(rows[0].kind, Some(StaleKind::Overwrite));
        assert!(rows[0].detected_at.is_some());
        assert_eq!(rows[1].repaired_by, None);
        let mut rewrite = stale(30);
        rewrite.kind = Some(StaleKind::Rewrite);
        rewrite.operation = Some("OPTIMIZE".into());
        let mut unknown = stale(31);
        unknown.kind = None;
        store
            .record_stale_writes(&[rewrite, unknown])
            .await
            .unwrap();
        let rows = store.stale_writes(Some("t")).await.unwrap();
        assert_eq!(rows[2].kind, Some(StaleKind::Rewrite));
        assert_eq!(
            rows[3].kind, None,
            "rows recorded before kinds were told apart"
        );
        assert_eq!(store.stale_writes(None).await.unwrap().len(), 4);
        assert!(store.stale_writes(Some("other")).await.unwrap().is_empty());
        // what the replicas' gauges read: one row per table, each write counted once
        let counts = store.stale_write_counts().await.unwrap();
        assert_eq!(counts.len(), 1);
        assert_eq!(
            (counts[0].table_name.as_str(), counts[0].stale_writes),
            ("t", 4)
        );
        assert_eq!(
            counts[0].last_detected_at,
            rows.iter().filter_map(|r| r.detected_at).max()
        );
    }

    async fn fail_once(store: &JobStore, worker: &str, kind: FailureKind, error: &str) {
        let claimed = claim(store, worker).await.expect("a due job");
        store
            .fail(
                &Lease::new(claimed.job.id, claimed.lease.token),
                kind,
                error,
                &immediate(),
            )
            .await
            .unwrap();
    }

    pub async fn failure_streaks_count_every_replicas_failures_since_the_last_success(
        store: &JobStore,
    ) {
        assert!(store.failure_streaks().await.unwrap().is_empty());
        let id = store
            .enqueue(job("a", "compact").with_max_attempts(5))
            .await
            .unwrap()
            .job
            .id;
        // attempts on two replicas
        fail_once(store, "replica-1/0", FailureKind::Failed, "first").await;
        fail_once(store, "replica-2/0", FailureKind::Conflict, "second").await;
        let streaks = store.failure_streaks().await.unwrap();
        assert_eq!(streaks.len(), 1, "{streaks:?}");
        assert_eq!(streaks[0].table_name, "a");
        assert_eq!(streaks[0].operation, Operation::Compact);
        assert_eq!(streaks[0].failures, 2);
        assert_eq!(streaks[0].last_error.as_deref(), Some("second"));
        // a released attempt (shutdown) is no failure
        let claimed = claim(store, "replica-1/0").await.unwrap();
        store
            .release(&Lease::new(id, claimed.lease.token), "shutdown")
            .await
            .unwrap();
        assert_eq!(store.failure_streaks().await.unwrap()[0].failures, 2);
        // a success on any replica ends the streak
        let claimed = claim(store, "replica-1/0").await.unwrap();
        store
            .complete(&Lease::new(id, claimed.lease.token), json!({}))
            .await
            .unwrap();
        assert!(store.failure_streaks().await.unwrap().is_empty());
        store.enqueue(job("a", "compact")).await.unwrap();
        store.enqueue(job("b", "vacuum")).await.unwrap();
        fail_once(store, "replica-2/0", FailureKind::Permanent, "third").await;
        fail_once(store, "replica-2/0", FailureKind::Permanent, "other table").await;
        let streaks = store.failure_streaks().await.unwrap();
        let summary: Vec<(&str, &str, i64, Option<&str>)> = streaks
            .iter()
            .map(|s| {
                (
                    s.table_name.as_str(),
                    s.operation.as_str(),
                    s.failures,
                    s.last_error.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                ("a", "compact", 1, Some("third")),
                ("b", "vacuum", 1, Some("other table"))
            ]
        );
    }

    pub async fn one_cron_tick_makes_one_job_even_after_it_started(store: &JobStore) {
        let tick = chrono::DateTime::from_timestamp_millis(Utc::now().timestamp_millis()).unwrap();
        let first = store
            .enqueue(job("a", "compact").for_tick(tick))
            .await
            .unwrap();
        assert!(first.created);
        let claimed = claim(store, "replica-1/0").await.unwrap();
        assert_eq!(claimed.job.id, first.job.id);
        // another replica's firing of the same tick, while the job runs
        let again = store
            .enqueue(job("a", "compact").for_tick(tick))
            .await
            .unwrap();
        assert!(!again.created, "a second job for one tick");
        assert_eq!(again.job.id, first.job.id);
        // and after it finished
        store
            .complete(&Lease::new(first.job.id, claimed.lease.token), json!({}))
            .await
            .unwrap();
        let late = store
            .enqueue(job("a", "compact").for_tick(tick))
            .await
            .unwrap();
        assert!(!late.created);
        assert_eq!(late.job.id, first.job.id);
        // the next tick is a new job
        let next = store
            .enqueue(job("a", "compact").for_tick(tick + chrono::Duration::seconds(5)))
            .await
            .unwrap();
        assert!(next.created);
        // a manual request has no tick and joins the queued job as before
        let manual = store
            .enqueue(NewJob::new("a", Operation::Compact, Trigger::Manual))
            .await
            .unwrap();
        assert!(!manual.created);
        assert_eq!(manual.job.id, next.job.id);
    }

    pub async fn pauses_are_shared_and_last_write_wins(store: &JobStore) {
        assert!(store.paused_overrides().await.unwrap().is_empty());
        store.set_paused("b", true).await.unwrap();
        store.set_paused("a", true).await.unwrap();
        store.set_paused("a", false).await.unwrap();
        let overrides = store.paused_overrides().await.unwrap();
        assert_eq!(
            overrides.into_iter().collect::<Vec<_>>(),
            [("a".to_owned(), false), ("b".to_owned(), true)],
            "one override per table, the last one written, by table name"
        );
    }

    pub async fn pins_are_kept_per_version_replaced_and_removed(store: &JobStore) {
        use chrono::TimeZone;
        assert!(store.pins(None).await.unwrap().is_empty());
        let march = Utc.with_ymd_and_hms(2027, 3, 1, 0, 0, 0).unwrap();
        let april = Utc.with_ymd_and_hms(2027, 4, 1, 12, 30, 0).unwrap();
        let first = store
            .add_pin("orders", 1482, march, "model run 88", "alice")
            .await
            .unwrap();
        assert_eq!((first.version, first.until), (1482, march));
        store.add_pin("orders", 7, march, "", "bob").await.unwrap();
        store
            .add_pin("events", 3, march, "audit", "carol")
            .await
            .unwrap();
        // pinning a version again replaces its end, reason and author
        let again = store
            .add_pin("orders", 1482, april, "model run 89", "dave")
            .await
            .unwrap();
        assert_eq!(again.until, april);
        let orders = store.pins(Some("orders")).await.unwrap();
        assert_eq!(
            orders
                .iter()
                .map(|p| (p.version, p.until, p.reason.as_str(), p.created_by.as_str()))
                .collect::<Vec<_>>(),
            [(7, march, "", "bob"), (1482, april, "model run 89", "dave")],
            "one pin per version, by version"
        );
        assert_eq!(store.pins(None).await.unwrap().len(), 3);
        assert!(store.remove_pin("orders", 7).await.unwrap());
        assert!(
            !store.remove_pin("orders", 7).await.unwrap(),
            "already gone"
        );
        assert_eq!(store.pins(Some("orders")).await.unwrap().len(), 1);
        assert_eq!(store.pins(Some("events")).await.unwrap().len(), 1);
    }

    pub async fn replicas_beat_leave_and_age_out(store: &JobStore) {
        let live = Duration::from_secs(30);
        assert_eq!(store.beat_replica("r2", live).await.unwrap(), ["r2"]);
        assert_eq!(store.beat_replica("r1", live).await.unwrap(), ["r1", "r2"]);
        // a beat again changes nothing but the time
        assert_eq!(store.beat_replica("r1", live).await.unwrap(), ["r1", "r2"]);
        store.leave_replica("r2").await.unwrap();
        assert_eq!(store.beat_replica("r1", live).await.unwrap(), ["r1"]);
        store.beat_replica("r3", live).await.unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        // r3 has not beaten within the last 200 ms: no longer live; r1 just did
        assert_eq!(
            store
                .beat_replica("r1", Duration::from_millis(200))
                .await
                .unwrap(),
            ["r1"]
        );
    }

    pub async fn figures_keep_changes_and_an_hourly_row_and_stay_bounded(store: &JobStore) {
        use tablekeeper_store::TableFigures;
        let base = Utc::now() - chrono::Duration::hours(10);
        let at = |minutes: i64| base + chrono::Duration::minutes(minutes);
        let figures = |minutes: i64, files: i64, erasure| TableFigures {
            probed_at: at(minutes),
            version: 3,
            files,
            small_files: files / 2,
            size_bytes: files * 1000,
            erasure_pending_since: erasure,
        };
        let record = |f: TableFigures, keep: u32| async move {
            store.record_figures("t", &f, keep).await.unwrap()
        };
        assert!(record(figures(0, 40, None), 100).await, "the first row");
        assert!(
            !record(figures(5, 40, None), 100).await,
            "unchanged within the hour"
        );
        assert!(record(figures(10, 4, None), 100).await, "files changed");
        assert!(
            record(figures(20, 4, Some(at(15))), 100).await,
            "a deletion is pending"
        );
        assert!(
            !record(figures(25, 4, Some(at(15))), 100).await,
            "unchanged"
        );
        assert!(
            !record(figures(19, 9, None), 100).await,
            "older than the newest row"
        );
        assert!(
            record(figures(81, 4, Some(at(15))), 100).await,
            "an hour later"
        );
        // another table's rows are its own
        assert!(store
            .record_figures("u", &figures(5, 40, None), 100)
            .await
            .unwrap());
        let rows = store.figures("t", base).await.unwrap();
        let seen: Vec<(chrono::DateTime<Utc>, i64, i64)> = rows
            .iter()
            .map(|r| (r.probed_at, r.files, r.average_file_bytes()))
            .collect();
        let ms = |t: chrono::DateTime<Utc>| t.timestamp_millis();
        assert_eq!(
            seen.iter()
                .map(|(t, f, a)| (ms(*t), *f, *a))
                .collect::<Vec<_>>(),
            [(0, 40), (10, 4), (20, 4), (81, 4)]
                .map(|(m, f)| (ms(at(m)), f, 1000))
                .to_vec()
        );
        assert_eq!(rows[2].erasure_pending_since.map(ms), Some(ms(at(15))));
        assert_eq!(rows[1].erasure_pending_since, None);
        assert_eq!(store.figures("t", at(15)).await.unwrap().len(), 2, "since");
        // bounded: a new row drops the oldest beyond the bound
        assert!(record(figures(90, 5, None), 3).await);
        let kept: Vec<i64> = store
            .figures("t", base)
            .await
            .unwrap()
            .iter()
            .map(|r| r.files)
            .collect();
        assert_eq!(kept, [4, 4, 5], "the newest three");
        assert_eq!(store.figures("u", base).await.unwrap().len(), 1);
    }

    pub async fn fleet_health_keeps_the_first_replicas_hour_and_ages_out(store: &JobStore) {
        use chrono::{DurationRound, TimeDelta};
        let hour =
            |h: i64| Utc::now().duration_trunc(TimeDelta::hours(1)).unwrap() - TimeDelta::hours(h);
        let counts = |healthy: i64, failing: i64| {
            [
                ("healthy".to_owned(), healthy),
                ("failing".to_owned(), failing),
            ]
            .into_iter()
            .collect::<tablekeeper_store::HealthCounts>()
        };
        assert!(store
            .record_fleet_health(hour(3), &counts(9, 1), hour(48))
            .await
            .unwrap());
        assert!(
            !store
                .record_fleet_health(hour(3), &counts(8, 2), hour(48))
                .await
                .unwrap(),
            "another replica's row for the same hour"
        );
        assert!(store
            .record_fleet_health(hour(1), &counts(10, 0), hour(48))
            .await
            .unwrap());
        let rows = store.fleet_health(hour(24)).await.unwrap();
        assert_eq!(
            rows,
            vec![(hour(3), counts(9, 1)), (hour(1), counts(10, 0))]
        );
        assert_eq!(store.fleet_health(hour(2)).await.unwrap().len(), 1, "since");
        // a new hour deletes the hours before the span kept
        assert!(store
            .record_fleet_health(hour(0), &counts(7, 3), hour(2))
            .await
            .unwrap());
        let hours: Vec<_> = store
            .fleet_health(hour(24))
            .await
            .unwrap()
            .into_iter()
            .map(|(h, _)| h)
            .collect();
        assert_eq!(hours, vec![hour(1), hour(0)]);
    }

    pub async fn probes_are_shared_newest_first_and_keep_the_last_good_facts(store: &JobStore) {
        use tablekeeper_store::ProbeRow;
        use tablekeeper_vocab::ProbeFailureKind;
        assert!(store
            .probes_since(None, None, Some("reader"), 100)
            .await
            .unwrap()
            .is_empty());
        let base = Utc::now() - chrono::Duration::seconds(100);
        let at = |s: i64| base + chrono::Duration::seconds(s);
        let row = |table: &str, replica: &str, probed_at, probe, error: Option<&str>| ProbeRow {
            table_name: table.to_owned(),
            replica_id: replica.to_owned(),
            probed_at,
            probe,
            error: error.map(str::to_owned),
            error_kind: error.map(|_| ProbeFailureKind::Transient),
            updated_at: Utc::now(),
        };
        store
            .record_probe(&row("a", "r1", at(1), Some(json!({"version": 1})), None))
            .await
            .unwrap();
        store
            .record_probe(&row("b", "r2", at(2), Some(json!({"version": 7})), None))
            .await
            .unwrap();
        let all = store
            .probes_since(None, None, Some("reader"), 100)
            .await
            .unwrap();
        assert_eq!(
            all.iter()
                .map(|r| r.table_name.as_str())
                .collect::<Vec<_>>(),
            ["a", "b"],
            "oldest update first"
        );
        let others = store
            .probes_since(None, None, Some("r1"), 100)
            .await
            .unwrap();
        assert_eq!(
            others
                .iter()
                .map(|r| r.table_name.as_str())
                .collect::<Vec<_>>(),
            ["b"],
            "a replica reads only the others' probes"
        );
        let everyone = store.probes_since(None, None, None, 100).await.unwrap();
        assert_eq!(
            everyone
                .iter()
                .map(|r| (r.table_name.as_str(), r.replica_id.as_str()))
                .collect::<Vec<_>>(),
            [("a", "r1"), ("b", "r2")],
            "a replica that starts reads its own probes too"
        );
        // pages: the last row of one page is where the next starts
        let first = store
            .probes_since(None, None, Some("reader"), 1)
            .await
            .unwrap();
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].table_name, "a");
        let second = store
            .probes_since(Some(first[0].updated_at), Some("a"), Some("reader"), 1)
            .await
            .unwrap();
        assert_eq!(second.len(), 1);
        assert_eq!(second[0].table_name, "b");
        assert!(store
            .probes_since(Some(second[0].updated_at), Some("b"), Some("reader"), 1)
            .await
            .unwrap()
            .is_empty());
        let watermark = all[1].updated_at;
        assert!(store
            .probes_since(Some(watermark), None, Some("reader"), 100)
            .await
            .unwrap()
            .is_empty());
        // a failed probe of `a` keeps its facts and records why (a few ms later: SQLite
        // keeps milliseconds, and the reader re-reads an overlap for rows within one)
        tokio::time::sleep(Duration::from_millis(5)).await;
        store
            .record_probe(&row("a", "r2", at(3), None, Some("timed out")))
            .await
            .unwrap();
        let newer = store
            .probes_since(Some(watermark), None, Some("reader"), 100)
            .await
            .unwrap();
        assert_eq!(newer.len(), 1, "{newer:?}");
        let a = &newer[0];
        assert_eq!((a.table_name.as_str(), a.replica_id.as_str()), ("a", "r2"));
        assert_eq!(
            a.probe,
            Some(json!({"version": 1})),
            "the last good facts stay"
        );
        assert_eq!(a.error.as_deref(), Some("timed out"));
        assert_eq!(a.error_kind, Some(ProbeFailureKind::Transient));
        assert_eq!(a.probed_at.timestamp_millis(), at(3).timestamp_millis());
        // an older probe arriving late is ignored; a newer success clears the error
        store
            .record_probe(&row("a", "r1", at(2), Some(json!({"version": 0})), None))
            .await
            .unwrap();
        let a = store
            .probes_since(None, None, Some("reader"), 100)
            .await
            .unwrap();
        let a = a.iter().find(|r| r.table_name == "a").unwrap();
        assert_eq!(
            a.probe,
            Some(json!({"version": 1})),
            "an older probe never wins"
        );
        store
            .record_probe(&row("a", "r1", at(4), Some(json!({"version": 2})), None))
            .await
            .unwrap();
        let a = store
            .probes_since(None, None, Some("reader"), 100)
            .await
            .unwrap();
        let a = a.iter().find(|r| r.table_name == "a").unwrap();
        assert_eq!(a.probe, Some(json!({"version": 2})));
        assert_eq!((a.error.as_deref(), a.error_kind), (None, None));
    }

    // ------------------------------------------------------------------ tasks

    fn input(partition: &str, bytes: u64) -> serde_json::Value {
        json!({"partition": partition, "values": [], "files": [format!("{partition}.parquet")], "bytes": bytes, "version": 3})
    }

    async fn running_job(store: &JobStore, table: &str) -> ClaimedJob {
        store
            .enqueue(NewJob::new(table, Operation::Compact, Trigger::Manual))
            .await
            .unwrap();
        claim(store, "coordinator").await.expect("a job to claim")
    }

    pub async fn tasks_are_added_under_the_jobs_lease_and_claimed_once_each(store: &JobStore) {
        let job = running_job(store, "a").await;
        let tasks = store
            .add_tasks(&job.lease, 2, &[input("d=1", 10), input("d=2", 20)])
            .await
            .unwrap()
            .expect("the lease holds");
        assert_eq!(tasks.iter().map(|t| t.task).collect::<Vec<_>>(), vec![0, 1]);
        assert!(tasks
            .iter()
            .all(|t| t.state == TaskState::Queued && t.attempt == 0));
        assert_eq!(tasks[1].bytes(), 20);
        // more tasks (a re-plan) are numbered after the existing ones
        let more = store
            .add_tasks(&job.lease, 2, &[input("d=3", 5)])
            .await
            .unwrap()
            .unwrap();
        assert_eq!(more.len(), 3);
        assert_eq!(more[2].task, 2);
        // a stale lease adds nothing
        let stale = Lease::new(job.job.id, Uuid::new_v4());
        assert!(store
            .add_tasks(&stale, 2, &[input("x", 1)])
            .await
            .unwrap()
            .is_none());
        assert_eq!(store.tasks(job.job.id).await.unwrap().len(), 3);

        // every task is claimed once, in order, and then there is none
        let mut claimed = Vec::new();
        while let Some(task) = store.claim_task("w", LEASE, None).await.unwrap() {
            assert_eq!(task.job.id, job.job.id);
            assert_eq!(task.task.state, TaskState::Running);
            assert_eq!(task.task.attempt, 1);
            assert_eq!(task.task.worker_id.as_deref(), Some("w"));
            assert_eq!(task.task.lease_expires_at, Some(task.lease_expires_at));
            claimed.push(task.lease.task);
        }
        assert_eq!(claimed, vec![0, 1, 2]);
        // claiming one job's tasks only
        let other = running_job(store, "b").await;
        store
            .add_tasks(&other.lease, 1, &[input("e", 1)])
            .await
            .unwrap()
            .unwrap();
        assert!(store
            .claim_task("w", LEASE, Some(job.job.id))
            .await
            .unwrap()
            .is_none());
        let theirs = store
            .claim_task("w", LEASE, Some(other.job.id))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(theirs.job.id, other.job.id);
    }

    pub async fn task_ends_are_fenced_and_failures_retry_then_fail(store: &JobStore) {
        let job = running_job(store, "a").await;
        store
            .add_tasks(&job.lease, 2, &[input("d=1", 10), input("d=2", 10)])
            .await
            .unwrap()
            .unwrap();
        let first = store.claim_task("w1", LEASE, None).await.unwrap().unwrap();
        // a heartbeat extends the task's lease
        let renewed = store
            .heartbeat_task(&first.lease, LEASE * 2)
            .await
            .unwrap()
            .unwrap();
        assert!(renewed > first.lease_expires_at);
        // a stale token neither renews nor ends the task
        let stale = TaskLease {
            token: Uuid::new_v4(),
            ..first.lease
        };
        assert_eq!(store.heartbeat_task(&stale, LEASE).await.unwrap(), None);
        assert_eq!(
            store
                .end_task(&stale, TaskEnd::Succeeded(json!({})))
                .await
                .unwrap(),
            TaskEnded::LeaseLost
        );
        let result = json!({"worker_id": "w1", "report": {"commits": [4]}});
        assert_eq!(
            store
                .end_task(&first.lease, TaskEnd::Succeeded(result.clone()))
                .await
                .unwrap(),
            TaskEnded::Done(TaskState::Succeeded)
        );
        // ending it again changes nothing
        assert_eq!(
            store
                .end_task(&first.lease, TaskEnd::Failed("late".into()))
                .await
                .unwrap(),
            TaskEnded::LeaseLost
        );
        let done = &store.tasks(job.job.id).await.unwrap()[0];
        assert_eq!(done.state, TaskState::Succeeded);
        assert_eq!(done.result.as_ref(), Some(&result));
        assert!(done.finished_at.is_some() && done.lease_expires_at.is_none());

        // a failure with attempts left is queued again; on the last attempt it fails
        let second = store.claim_task("w1", LEASE, None).await.unwrap().unwrap();
        assert_eq!(second.lease.task, 1);
        assert_eq!(
            store
                .end_task(&second.lease, TaskEnd::Failed("disk full".into()))
                .await
                .unwrap(),
            TaskEnded::Retrying
        );
        let again = store.claim_task("w2", LEASE, None).await.unwrap().unwrap();
        assert_eq!((again.lease.task, again.task.attempt), (1, 2));
        assert_eq!(again.task.error.as_deref(), Some("disk full"));
        assert_eq!(
            store
                .end_task(&again.lease, TaskEnd::Failed("disk still full".into()))
                .await
                .unwrap(),
            TaskEnded::Done(TaskState::Failed)
        );
        let failed = &store.tasks(job.job.id).await.unwrap()[1];
        assert_eq!(failed.state, TaskState::Failed);
        assert_eq!(failed.worker_id.as_deref(), Some("w2"));
        assert_eq!(failed.error.as_deref(), Some("disk still full"));

        // a release gives the attempt back; a re-plan is terminal
        let job2 = running_job(store, "b").await;
        store
            .add_tasks(&job2.lease, 1, &[input("e", 1)])
            .await
            .unwrap()
            .unwrap();
        let task = store
            .claim_task("w", LEASE, Some(job2.job.id))
            .await
            .unwrap()
            .unwrap();
        assert!(store
            .release_task(&task.lease, "shutting down")
            .await
            .unwrap());
        assert!(!store.release_task(&task.lease, "again").await.unwrap());
        let back = store
            .claim_task("w", LEASE, Some(job2.job.id))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            back.task.attempt, 1,
            "a release does not consume the attempt"
        );
        assert_eq!(
            store
                .end_task(&back.lease, TaskEnd::Replanned("inputs gone".into()))
                .await
                .unwrap(),
            TaskEnded::Done(TaskState::Replanned)
        );
        assert!(store
            .claim_task("w", LEASE, Some(job2.job.id))
            .await
            .unwrap()
            .is_none());
    }

    pub async fn tasks_run_only_while_their_job_runs(store: &JobStore) {
        let job = running_job(store, "a").await;
        store
            .add_tasks(&job.lease, 3, &[input("d=1", 1), input("d=2", 1)])
            .await
            .unwrap()
            .unwrap();
        let task = store.claim_task("w", LEASE, None).await.unwrap().unwrap();
        // the job goes back to the queue (its worker shut down): its tasks pause
        assert!(store.release(&job.lease, "shutdown").await.unwrap());
        assert!(store.claim_task("w", LEASE, None).await.unwrap().is_none());
        assert_eq!(
            store.heartbeat_task(&task.lease, LEASE).await.unwrap(),
            None,
            "a task's lease is not renewed while its job is not running"
        );
        // the job's next claim finds its tasks and they go on
        let resumed = claim(store, "coordinator-2").await.unwrap();
        assert_eq!(resumed.job.id, job.job.id);
        assert_eq!(store.tasks(job.job.id).await.unwrap().len(), 2);
        let next = store.claim_task("w", LEASE, None).await.unwrap().unwrap();
        assert_eq!(next.lease.task, 1);
        assert!(store
            .heartbeat_task(&task.lease, LEASE)
            .await
            .unwrap()
            .is_some());
    }

    pub async fn reaper_requeues_expired_tasks_and_cancels_those_of_ended_jobs(store: &JobStore) {
        let job = running_job(store, "a").await;
        store
            .add_tasks(
                &job.lease,
                2,
                &[input("d=1", 1), input("d=2", 1), input("d=3", 1)],
            )
            .await
            .unwrap()
            .unwrap();
        let lost = store
            .claim_task("crashed", Duration::ZERO, None)
            .await
            .unwrap()
            .unwrap();
        assert!(store
            .reap_tasks(Duration::from_secs(3600))
            .await
            .unwrap()
            .is_empty());
        let deadline = Instant::now() + Duration::from_secs(10);
        let reaped = loop {
            let reaped = store.reap_tasks(Duration::ZERO).await.unwrap();
            if !reaped.is_empty() {
                break reaped;
            }
            assert!(Instant::now() < deadline, "nothing reaped within 10s");
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        assert_eq!(reaped.len(), 1);
        assert_eq!(
            (reaped[0].task, reaped[0].worker_id.as_str()),
            (0, "crashed")
        );
        assert_eq!(reaped[0].state, TaskState::Queued);
        assert!(store.reap_tasks(Duration::ZERO).await.unwrap().is_empty());
        // the crashed worker's token is dead
        assert_eq!(
            store
                .end_task(&lost.lease, TaskEnd::Succeeded(json!({})))
                .await
                .unwrap(),
            TaskEnded::LeaseLost
        );
        let taken = store.claim_task("w2", LEASE, None).await.unwrap().unwrap();
        assert_eq!((taken.lease.task, taken.task.attempt), (0, 2));
        let error = taken.task.error.clone().unwrap();
        assert!(error.contains("crashed"), "{error}");

        // out of attempts, an expired task fails
        let last = store
            .claim_task("crashed", Duration::ZERO, None)
            .await
            .unwrap()
            .unwrap();
        assert!(
            store
                .end_task(&last.lease, TaskEnd::Failed("x".into()))
                .await
                .unwrap()
                == TaskEnded::Retrying
        );
        let last = store
            .claim_task("crashed", Duration::ZERO, None)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(last.task.attempt, 2);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let reaped = store.reap_tasks(Duration::ZERO).await.unwrap();
            if let Some(r) = reaped.iter().find(|r| r.task == last.lease.task) {
                assert_eq!(r.state, TaskState::Failed);
                break;
            }
            assert!(Instant::now() < deadline, "nothing reaped within 10s");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // the job ends: its queued task is cancelled, its running one too once it expires
        let running = taken;
        assert!(store.complete(&job.lease, json!({})).await.unwrap());
        assert_eq!(
            store.heartbeat_task(&running.lease, LEASE).await.unwrap(),
            None
        );
        store.reap_tasks(Duration::ZERO).await.unwrap();
        let tasks = store.tasks(job.job.id).await.unwrap();
        assert_eq!(tasks[2].state, TaskState::Cancelled);
        assert_eq!(
            tasks[2].error.as_deref(),
            Some(tablekeeper_store::JOB_ENDED)
        );
        assert_eq!(
            tasks[0].state,
            TaskState::Running,
            "its lease has not expired yet"
        );
    }

    pub async fn task_counts_and_progress_cover_running_jobs(store: &JobStore) {
        let counts = store.task_counts().await.unwrap();
        assert_eq!(counts.len(), TaskState::ALL.len());
        assert!(counts.values().all(|n| *n == 0));
        let job = running_job(store, "a").await;
        store
            .add_tasks(
                &job.lease,
                2,
                &[input("d=1", 100), input("d=2", 300), input("d=3", 600)],
            )
            .await
            .unwrap()
            .unwrap();
        let one = store.claim_task("w", LEASE, None).await.unwrap().unwrap();
        store
            .end_task(&one.lease, TaskEnd::Succeeded(json!({})))
            .await
            .unwrap();
        let _two = store.claim_task("w", LEASE, None).await.unwrap().unwrap();
        let counts = store.task_counts().await.unwrap();
        assert_eq!(counts[&TaskState::Succeeded], 1);
        assert_eq!(counts[&TaskState::Running], 1);
        assert_eq!(counts[&TaskState::Queued], 1);
        let progress = Progress::of(&store.tasks(job.job.id).await.unwrap());
        assert_eq!(
            progress,
            Progress {
                tasks_total: 3,
                tasks_done: 1,
                tasks_running: 1,
                tasks_failed: 0,
                bytes_total: 1000,
                bytes_done: 100,
            }
        );
        // a job that ended leaves the counts
        assert!(store.complete(&job.lease, json!({})).await.unwrap());
        assert!(store.task_counts().await.unwrap().values().all(|n| *n == 0));
    }
}
