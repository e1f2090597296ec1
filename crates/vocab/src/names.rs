//! The closed sets, each with its string form and parser, written once by [`closed_set!`].

#[cfg(test)]
use std::{fmt, str::FromStr};

#[cfg(test)]
use serde::Serialize;

/// A string that is not a member of one of the closed sets.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {set} `{value}`: use one of {expected}")]
pub struct UnknownName {
    /// What was being parsed: `operation`, `job state`, ...
    pub set: &'static str,
    pub value: String,
    /// The accepted strings, comma-separated.
    pub expected: String,
}

/// Declares a closed set: the enum, `ALL`, `as_str`, `Display`, `FromStr` and serde, all
/// using the one string per variant, and its JSON Schema (the inventory's schema and the
/// API's OpenAPI document). Exported for other closed sets of label values (the store's
/// call names); the caller needs `serde` and `schemars` as dependencies.
#[macro_export]
macro_rules! closed_set {
    (
        $(#[$meta:meta])*
        pub enum $name:ident as $set:literal {
            $($(#[$vmeta:meta])* $variant:ident => $text:literal,)+
        }
    ) => {
        $(#[$meta])*
        #[derive(
            Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash,
            ::serde::Serialize, ::serde::Deserialize, ::schemars::JsonSchema,
        )]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $($(#[$vmeta])* $variant,)+ }

        impl $name {
            /// Every member, in declaration order.
            pub const ALL: [$name; [$($text),+].len()] = [$($name::$variant,)+];

            /// The form stored in the job table and used in metric labels, JSON and the CLI.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text,)+ }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = $crate::UnknownName;

            fn from_str(s: &str) -> Result<Self, $crate::UnknownName> {
                match s {
                    $($text => Ok($name::$variant),)+
                    other => Err($crate::UnknownName {
                        set: $set,
                        value: other.to_owned(),
                        expected: [$($text),+].join(", "),
                    }),
                }
            }
        }
    };
}

closed_set! {
    /// A maintenance operation: `jobs.operation`, the `operation` label, the CLI's
    /// `--operation` and the API's `{"operation": …}`.
    pub enum Operation as "operation" {
        /// OPTIMIZE: rewrite small files into files near `compaction.target_file_size`.
        Compact => "compact",
        /// OPTIMIZE ZORDER BY `layout.zorder`.
        Zorder => "zorder",
        /// VACUUM: delete files no version inside the retention window references.
        Vacuum => "vacuum",
        /// Write a checkpoint so readers need not replay many JSON commits.
        Checkpoint => "checkpoint",
        /// REORG TABLE … APPLY (PURGE): rewrite every file carrying a deletion vector, so the
        /// rows it marks deleted leave the live files (VACUUM later deletes the old files).
        Purge => "purge",
        /// Repair a stale write: a writer's commit planned on a snapshot older than one of
        /// tablekeeper's rewrites. Not scheduled: queued when a probe finds one.
        Repair => "repair",
    }
}

impl Operation {
    /// The operations that run on a cron schedule (and so have a staleness).
    pub const SCHEDULED: [Operation; 5] = [
        Operation::Compact,
        Operation::Zorder,
        Operation::Vacuum,
        Operation::Checkpoint,
        Operation::Purge,
    ];

    /// The block under a table's `maintenance:` (and under `defaults:`) that configures
    /// this operation. Compaction's block is `compaction`, not `compact`.
    pub fn inventory_key(self) -> &'static str {
        match self {
            Operation::Compact => "compaction",
            Operation::Zorder => "zorder",
            Operation::Vacuum => "vacuum",
            Operation::Checkpoint => "checkpoint",
            Operation::Purge => "purge",
            Operation::Repair => "auto_repair",
        }
    }

    /// Whether the operation rewrites data files (and so races writers' snapshots).
    pub fn rewrites(self) -> bool {
        matches!(
            self,
            Operation::Compact | Operation::Zorder | Operation::Purge
        )
    }
}

closed_set! {
    /// `jobs.state`. Terminal states: succeeded, failed, cancelled.
    pub enum JobState as "job state" {
        /// Waiting to be claimed once `run_at` has passed and its key is free.
        Queued => "queued",
        /// Claimed by a worker holding a lease.
        Running => "running",
        Succeeded => "succeeded",
        /// Out of attempts (or failed by the reaper after its last attempt).
        Failed => "failed",
        /// Cancelled while queued, or superseded by a newer queued job for the same
        /// (table, operation) when it would have been requeued.
        Cancelled => "cancelled",
    }
}

impl JobState {
    /// True for succeeded, failed and cancelled.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed | Self::Cancelled)
    }
}

closed_set! {
    /// `job_tasks.state`: a rewrite job's task. Terminal states: succeeded, failed,
    /// replanned, cancelled.
    pub enum TaskState as "task state" {
        /// Waiting for any replica to claim it while its job runs.
        Queued => "queued",
        /// Claimed by a worker holding the task's lease.
        Running => "running",
        /// Its files were rewritten and committed.
        Succeeded => "succeeded",
        /// Out of attempts; its job fails, naming what the other tasks committed.
        Failed => "failed",
        /// Its inputs were no longer all active when it ran: it committed nothing and its
        /// job planned the rest again.
        Replanned => "replanned",
        /// Its job ended before the task ran.
        Cancelled => "cancelled",
    }
}

impl TaskState {
    /// True for every state but queued and running.
    pub fn is_terminal(self) -> bool {
        !matches!(self, Self::Queued | Self::Running)
    }
}

closed_set! {
    /// `jobs.trigger`: who asked for the job.
    pub enum Trigger as "trigger" {
        Schedule => "schedule",
        Manual => "manual",
    }
}

closed_set! {
    /// `job_attempts.outcome` and the `outcome` label. An open attempt has no outcome.
    pub enum AttemptOutcome as "attempt outcome" {
        Succeeded => "succeeded",
        Failed => "failed",
        /// The Delta commit met a concurrent commit.
        Conflict => "conflict",
        /// The worker stopped renewing its lease and the reaper took the job back.
        LostLease => "lost_lease",
        /// Released on shutdown (the attempt was given back) or closed by hand.
        Cancelled => "cancelled",
    }
}

closed_set! {
    /// Kinds of drift between the inventory and the live table (the `kind` label of
    /// `tablekeeper_drift`).
    pub enum DriftKind as "drift kind" {
        Retention => "retention",
        Protocol => "protocol",
        Partitioning => "partitioning",
        /// A UniForm table's Iceberg metadata reflects an older Delta version than the table's
        /// (or there is none yet): Iceberg readers see the older version.
        IcebergMetadata => "iceberg_metadata",
    }
}

closed_set! {
    /// Why a probe of a table failed (the `kind` label of
    /// `tablekeeper_table_probe_failures_total`): storage trouble that passes, or a table that
    /// cannot be read until someone acts.
    pub enum ProbeFailureKind as "probe failure kind" {
        /// Timeouts, connection errors, 5xx and throttling.
        Transient => "transient",
        /// Missing log or data files, a damaged log, an unsupported protocol, denied access.
        Unreadable => "unreadable",
    }
}

closed_set! {
    /// What a stale commit meant to do (`stale_writes.kind`). A stale commit removed files
    /// that were no longer active at the version before it; its kind decides its exact repair.
    pub enum StaleKind as "stale commit kind" {
        /// Replaced rows: a full overwrite, or a MERGE or UPDATE that rewrote files.
        Overwrite => "overwrite",
        /// Removed files and added none: a DELETE of whole files.
        Delete => "delete",
        /// Changed no data: a compaction, Z-order or purge, by any engine (tablekeeper too).
        Rewrite => "rewrite",
    }
}

closed_set! {
    /// A Parquet compression codec, as `layout.compression` names it.
    pub enum Codec as "compression codec" {
        /// Zstandard, levels 1–22; the default.
        Zstd => "zstd",
        /// Snappy (Spark's default); no level.
        Snappy => "snappy",
        /// LZ4 in Parquet's raw framing (`LZ4_RAW`); no level.
        Lz4 => "lz4",
        /// Gzip, levels 0–9.
        Gzip => "gzip",
        /// Brotli, levels 0–11.
        Brotli => "brotli",
        /// No compression.
        Uncompressed => "uncompressed",
    }
}

impl Codec {
    /// The levels the codec accepts, `None` for a codec without levels.
    pub fn levels(self) -> Option<(u32, u32)> {
        match self {
            Codec::Zstd => Some((1, 22)),
            Codec::Gzip => Some((0, 9)),
            Codec::Brotli => Some((0, 11)),
            Codec::Snappy | Codec::Lz4 | Codec::Uncompressed => None,
        }
    }

    /// The level used when none is given: zstd 4 (deltalake's OPTIMIZE), gzip 6 (zlib's),
    /// brotli 1 (arrow-rs's).
    pub fn default_level(self) -> Option<u32> {
        match self {
            Codec::Zstd => Some(4),
            Codec::Gzip => Some(6),
            Codec::Brotli => Some(1),
            Codec::Snappy | Codec::Lz4 | Codec::Uncompressed => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_round_trips_through_text_and_json() {
        fn check<T>(all: &[T])
        where
            T: Copy + fmt::Debug + PartialEq + fmt::Display + FromStr + Serialize,
            T::Err: fmt::Debug,
        {
            for value in all {
                let text = value.to_string();
                assert_eq!(text.parse::<T>().unwrap(), *value);
                assert_eq!(serde_json::to_string(value).unwrap(), format!("\"{text}\""));
            }
        }
        check(&Operation::ALL);
        check(&JobState::ALL);
        check(&Trigger::ALL);
        check(&AttemptOutcome::ALL);
        check(&DriftKind::ALL);
        check(&ProbeFailureKind::ALL);
        check(&TaskState::ALL);
    }

    #[test]
    fn the_stored_strings_are_the_contract() {
        let names = |all: &[&'static str]| all.join(",");
        assert_eq!(
            names(&Operation::ALL.map(Operation::as_str)),
            "compact,zorder,vacuum,checkpoint,purge,repair"
        );
        assert_eq!(
            names(&JobState::ALL.map(JobState::as_str)),
            "queued,running,succeeded,failed,cancelled"
        );
        assert_eq!(
            names(&AttemptOutcome::ALL.map(AttemptOutcome::as_str)),
            "succeeded,failed,conflict,lost_lease,cancelled"
        );
    }

    #[test]
    fn an_unknown_name_says_what_is_accepted() {
        let err = "optimize".parse::<Operation>().unwrap_err().to_string();
        assert_eq!(
            err,
            "unknown operation `optimize`: use one of compact, zorder, vacuum, checkpoint, purge, repair"
        );
        let err = "paused".parse::<JobState>().unwrap_err().to_string();
        assert!(err.contains("queued, running"), "{err}");
    }
}
