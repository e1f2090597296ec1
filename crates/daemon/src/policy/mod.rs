//! The rules, as pure functions of the inventory, a probe and a clock: whether an operation
//! may and should run ([`planner`]), when other writers overwrite a table
//! ([`overwrite_window`]), when deleted rows are physically gone ([`erasure`]) and what VACUUM
//! and log cleanup keep for others ([`keep`]).
//!
//! Nothing here does I/O: no job store, no table, no metrics. Callers bring the facts.

pub(crate) mod erasure;
pub(crate) mod keep;
pub(crate) mod overwrite_window;
pub(crate) mod planner;
