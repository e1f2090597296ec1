//! The plain types a rewrite is planned in and run from: which partitions ([`PartitionScope`]),
//! what one attempt rewrites ([`Plan`], made by each kind's plan step: `compact.rs`,
//! `zorder.rs`, `purge.rs`), and what one scoped run needs ([`RewriteSpec`]). Every module of
//! the rewrite imports these and this module imports none of them, so planning and running
//! never import each other.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use deltalake::kernel::LogicalFileView;
use serde_json::Value;
use tablekeeper_vocab::Operation;

use crate::rewrite::shape::FileShape;

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

impl Rewrite {
    /// Whether this rewrite takes `file` as an input. The one rule both the rewrite and the
    /// planning of a job's tasks (`tasks.rs`) select by.
    pub(crate) fn takes(&self, file: &LogicalFileView) -> bool {
        match self {
            Rewrite::Compact { small_below } => {
                u64::try_from(file.size()).unwrap_or(u64::MAX) < *small_below
            }
            Rewrite::ZOrder {
                clustering: true, ..
            } => {
                #[allow(deprecated)] // the only public way to a file's `clusteringProvider`
                let provider = file.add_action().clustering_provider;
                unclustered(provider.as_deref())
            }
            Rewrite::ZOrder { .. } => true,
            Rewrite::Purge => file.deletion_vector_descriptor().is_some(),
        }
    }
}

/// Whether a file with this `clusteringProvider` is still to be clustered: only files no
/// clustering implementation has clustered (another implementation's stay as they are).
pub(crate) fn unclustered(provider: Option<&str>) -> bool {
    provider.is_none()
}

/// Everything one scoped OPTIMIZE needs besides the table and its filters.
#[derive(Debug, Clone)]
pub(crate) struct RewriteSpec {
    pub operation: Operation,
    pub rewrite: Rewrite,
    /// The size and encoding of the files written.
    pub output: FileShape,
    /// Commit metadata: the run marker, plus `operationParameters` for Z-order.
    pub marker: HashMap<String, Value>,
    /// When the rewrite is one task of a job: exactly the files the task was planned with
    /// (those still active); a file outside it is never read or removed.
    pub only: Option<Arc<BTreeSet<String>>>,
}

impl RewriteSpec {
    /// Whether this run takes `file` as an input: its kind's rule, within the task's files.
    pub(crate) fn takes(&self, file: &LogicalFileView) -> bool {
        self.rewrite.takes(file)
            && self
                .only
                .as_ref()
                .is_none_or(|only| only.contains(file.path().as_ref()))
    }
}
