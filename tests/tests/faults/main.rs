//! Fault injection on the real binary, real Postgres and real Delta tables: replicas killed
//! mid-job, Postgres restarted, writers racing maintenance, a worker cut off from the job
//! table, many replicas under random kills, bad input and damaged tables.
//!
//! One test binary (every binary links deltalake and DataFusion); the scenarios take
//! [`tablekeeper_tests::setup::serial`] so they run one at a time: each races timers, and
//! two at once on a small CI machine would measure the machine. Each scenario fails when
//! the property it names breaks; README "Guarantees" maps properties to scenarios.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod bad_input;
mod chaos;
mod damaged_table;
mod half_open;
mod lease_takeover;
mod postgres_restart;
mod replica_killed;
mod tasks;
mod writer_race;
