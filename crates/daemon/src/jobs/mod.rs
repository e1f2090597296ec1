//! Running jobs: the worker pool ([`pool`]) claims jobs and tasks from the job table, each
//! attempt gets its inputs ([`inputs`]), runs through the [`executor`] under a lease watch
//! ([`lease_watch`]) and ends in the job table ([`attempt`]); a rewrite too large for one
//! worker is split into tasks ([`split`]) that any replica runs ([`tasks`]). [`enqueue`] is
//! the one way a job enters the job table; [`budget`] writes its estimate there and runs the
//! budget rounds that decide, under an enforced budget, which queued jobs may be claimed.
//!
//! Nothing here decides whether a job should exist (that is `policy::planner`, asked by the
//! schedules, the API and the probes' findings) or probes a table (a finished attempt is
//! reported to the replica, `Shared::job_finished`).

pub(crate) mod attempt;
pub(crate) mod budget;
pub(crate) mod enqueue;
pub(crate) mod executor;
pub(crate) mod inputs;
pub(crate) mod lease_watch;
pub(crate) mod pool;
pub(crate) mod split;
pub(crate) mod stops;
pub(crate) mod tasks;
