//! Integration tests of tablekeeper-delta on real Delta tables written by deltalake in temp dirs.
//!
//! One test binary (modules below) because every binary links deltalake and DataFusion.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod aged;
mod common;

mod checkpoint;
mod clustering;
mod column_mapping;
mod compact;
mod concurrency;
mod copy_path;
mod damage;
mod deletion_vectors;
mod duplicate;
mod feature_rules;
mod features;
mod log_history;
mod probe;
mod repair_features;
mod row_tracking;
mod stale;
mod uniform;
mod vacuum;
mod zorder;
