//! The plain types a rewrite is planned in and run from: which partitions ([`PartitionScope`]),
//! what one attempt rewrites ([`Plan`], made by each kind's plan step: `compact.rs`,
//! `zorder.rs`, `purge.rs`), and what one scoped run needs ([`RewriteSpec`]). Every module of
//! the rewrite imports these and this module imports none of them, so planning and running
//! never import each other.

use std::collections::HashMap;
use std::num::NonZeroU64;

use serde_json::Value;
use tablekeeper_vocab::Operation;

/// One partition to work on: its key and its raw values in partition-column order.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct PartitionScope {
    pub key: String,
    pub values: Vec<(String, Option<String>)>,
}

/// What one attempt rewrites, or why nothing.
#[derive(Debug)]
pub(crate) enum Plan {
    /// Nothing to do, and why (becomes the report's `skipped`).
    Nothing(String),
    /// The partitions to rewrite, and what a dry run reports for them.
    Rewrite {
        scopes: Vec<PartitionScope>,
        /// Files and bytes the rewrite would read (an estimate: deltalake also bins files up
        /// to the target size with the small ones).
        files: u64,
        bytes: u64,
    },
}

/// What kind of rewrite to run.
#[derive(Debug, Clone)]
pub(crate) enum Rewrite {
    /// Built by [`crate::rewrite::bins`]: the files under `small_below` bytes, bin-packed.
    Compact { small_below: u64 },
    /// Built by [`crate::rewrite::cluster`]: every selected file sorted on `columns`; with
    /// `clustering`, the rewrite of a clustered table by its clustering columns, which takes
    /// only the files no clustering implementation has clustered yet and marks what it writes
    /// as clustered.
    ZOrder {
        columns: Vec<String>,
        clustering: bool,
    },
    /// Built by [`crate::rewrite::purge`] from deltalake's parts, not by OPTIMIZE.
    Purge,
}

/// Everything one scoped OPTIMIZE needs besides the table and its filters.
#[derive(Debug, Clone)]
pub(crate) struct RewriteSpec {
    pub operation: Operation,
    pub rewrite: Rewrite,
    pub target_size: NonZeroU64,
    /// Commit metadata: the run marker, plus `operationParameters` for Z-order.
    pub marker: HashMap<String, Value>,
    /// deltalake's OPTIMIZE may rewrite the table (it writes every feature the table has);
    /// otherwise every bin goes through tablekeeper's own rewrite and commit.
    pub deltalake_rewrites: bool,
}
