//! The rewriting operation: compaction, Z-order and purge are kinds of one [`optimize`]
//! (delta-rs's `OptimizeType`), planned and run in layers that import only downwards:
//!
//! - [`optimize`]: the operation — preparation, the conflict-retry loop, the dry run;
//! - the kinds' plan steps, which say which partitions need work: [`compact`] (on a clustered
//!   table [`liquid`]), [`zorder`], [`purge`] (purge also holds its rewrite step, since OPTIMIZE cannot select files by their
//!   deletion vectors);
//! - [`execute`]: one scoped rewrite per filter set, every commit read back and guarded
//!   ([`guard`]); before any commit, the files each partition's rewrite wrote are checked
//!   against what it read ([`content`]: partition values verbatim, column fingerprints,
//!   statistics);
//! - the rewrites themselves: compaction's bins ([`bins`]) by the column-chunk copy path
//!   ([`splice`], statistics in [`merged_stats`]) or by decoding ([`decode`]); Z-order's sort
//!   ([`cluster`], its key in [`zkey`], bounded memory in [`external_sort`]); all of them under
//!   the process's memory [`budget`], writing a column-mapped table's physical names
//!   ([`column_mapping`]), carrying row ids where row tracking keeps them ([`row_ids`]), and
//!   writing columns of unique values without a dictionary ([`dictionary`]);
//! - [`tasks`]: one job's rewrite cut into tasks any replica runs, each committing its own
//!   files through the same scoped rewrite;
//! - at the bottom, the plain types every layer shares ([`plan`]), the file selection
//!   ([`select`]) and the rewrite scan ([`scan`]; on a table with type widening, which
//!   deltalake's scan refuses, [`widened`]).
//!
//! This module only declares; the items live in the files.

pub(crate) mod bins;
pub(crate) mod budget;
pub(crate) mod cluster;
pub(crate) mod column_mapping;
pub(crate) mod compact;
pub(crate) mod content;
#[cfg(test)]
mod content_faults;
pub(crate) mod decode;
pub(crate) mod dictionary;
pub(crate) mod execute;
pub(crate) mod external_sort;
pub(crate) mod guard;
pub(crate) mod liquid;
pub(crate) mod merged_stats;
pub(crate) mod optimize;
pub(crate) mod plan;
pub(crate) mod purge;
pub(crate) mod row_ids;
pub(crate) mod scan;
pub(crate) mod select;
pub(crate) mod shape;
pub(crate) mod splice;
pub(crate) mod tasks;
pub(crate) mod widened;
pub(crate) mod zkey;
pub(crate) mod zorder;
