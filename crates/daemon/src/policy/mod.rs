//! The rules, as pure functions of the inventory, a probe and a clock: whether an operation
//! may and should run ([`planner`]), what it would cost and buy ([`estimate`]), which due
//! operations a budget window admits ([`select`]), when other writers overwrite a table
//! ([`overwrite_window`]), when deleted rows are physically gone ([`erasure`]) and what VACUUM
//! and log cleanup keep for others ([`keep`]).
//!
//! Nothing here does I/O: no job store, no table, no metrics. Callers bring the facts.

pub(crate) mod erasure;
pub(crate) mod estimate;
pub(crate) mod keep;
pub(crate) mod overwrite_window;
pub(crate) mod planner;
pub(crate) mod select;
#[cfg(test)]
mod simulation;
