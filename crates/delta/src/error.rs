//! The one error type of this crate and its classification.
//!
//! Owns [`DeltaError`] and the mapping from deltalake's errors to an [`ErrorClass`] the worker
//! acts on: `Conflict` (another writer won a commit race; counted and retried), `Transient`
//! (storage or network trouble; retried with backoff) and `Permanent` (retrying cannot help until
//! a person changes the table, the inventory or the environment). Every message names the table
//! uri and says what to do. This module must never decide retries itself: it only classifies.

use deltalake::kernel::transaction::TransactionError;
use deltalake::{DeltaTableError, ObjectStoreError};

use tablekeeper_vocab::Operation;

/// How the worker should treat a failed operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    /// A concurrent commit conflicted with ours and the in-operation retries ran out.
    Conflict,
    /// Storage I/O, network or timeout trouble: a later attempt may succeed unchanged.
    Transient,
    /// Retrying cannot help until someone changes the table, the inventory or the environment.
    Permanent,
}

/// Everything that can go wrong while probing or maintaining a Delta table.
#[derive(Debug, thiserror::Error)]
pub enum DeltaError {
    /// The uri does not name a Delta table root.
    #[error(
        "no _delta_log found at `{table}`: is this the table root? point the inventory `path` at \
         the directory that contains `_delta_log`"
    )]
    NotADeltaTable { table: String },

    /// The uri cannot be used at all (relative path, unknown scheme, unparsable).
    #[error(
        "invalid table uri `{table}`: {reason}; use an absolute path or a file://, s3://, gs://, \
         az:// or abfss:// uri"
    )]
    InvalidUri { table: String, reason: String },

    /// The table's protocol uses features this crate cannot rewrite or delete files of safely.
    #[error(
        "refusing to {operation} `{table}`: {reason} (features: {features:?}); tablekeeper leaves \
         this table untouched, maintain it with an engine that supports these features or disable \
         `{operation}` for it in the inventory"
    )]
    UnsupportedProtocol {
        table: String,
        operation: Operation,
        features: Vec<String>,
        reason: String,
    },

    /// The requested VACUUM retention is below the 168h floor and short retention is not allowed.
    #[error(
        "refusing to vacuum `{table}` with retention {requested_hours}h: below the 168h safety \
         floor; set `retention.allow_short_retention: true` or raise \
         `retention.deleted_file_retention` to at least 168h"
    )]
    RetentionTooShort { table: String, requested_hours: u64 },

    /// A table property this crate relies on cannot be parsed.
    #[error(
        "table `{table}` has an unparsable property `{key}` = `{value}`: {reason}; fix it with \
         ALTER TABLE ... SET TBLPROPERTIES ('{key}' = 'interval 7 days')"
    )]
    BadTableProperty {
        table: String,
        key: String,
        value: String,
        reason: String,
    },

    /// Options handed in by the caller make no sense for this table.
    #[error("invalid {operation} options for `{table}`: {reason}")]
    InvalidOptions {
        table: String,
        operation: Operation,
        reason: String,
    },

    /// The VACUUM dry run listed files that a version inside the retention window still needs.
    #[error(
        "refusing to vacuum `{table}`: {} file(s) on the deletion list are still referenced by a \
         version inside the retention window (first: {}); nothing was deleted; a writer probably \
         recorded removes with a wrong deletion timestamp or the log lost tombstones: investigate \
         before vacuuming this table again",
        files.len(),
        files.first().map(String::as_str).unwrap_or("-")
    )]
    UnsafeVacuum { table: String, files: Vec<String> },

    /// A pinned version cannot be loaded, so the files it needs are unknown.
    #[error(
        "refusing to vacuum `{table}`: pin {pin} cannot be loaded ({reason}); nothing was \
         deleted; check the pin's version or timestamp in `retention.pins` or the pins API and \
         remove a pin whose version is already gone"
    )]
    PinUnloadable {
        table: String,
        pin: String,
        reason: String,
    },

    /// A table that may reference this table's files (a shallow clone) has a log that cannot
    /// be read, so VACUUM cannot know which files it still needs.
    #[error(
        "refusing to vacuum `{table}`: the log of `{referrer}`, which may reference its files \
         (a shallow clone or a table over its files), cannot be read: {source}; nothing was \
         deleted; restore access to it, or remove it from the inventory or `retention.clones` \
         if it is gone"
    )]
    ReferrerUnreadable {
        table: String,
        referrer: String,
        source: Box<DeltaError>,
    },

    /// A compaction or Z-order commit removed files that were no longer active: rows are now
    /// duplicated (deltalake 1.1.x does not detect concurrent rewrites, see DESIGN.md).
    #[error(
        "duplicate rewrite on `{table}` at version {version}: the commit removed {} file(s) that \
         were no longer active (first: {}), so their rows now exist twice; another engine or \
         replica compacted the same files concurrently; stop all maintenance on this table, check \
         the history, and RESTORE it to version {} if nothing else committed since",
        files.len(),
        files.first().map(String::as_str).unwrap_or("-"),
        version - 1
    )]
    DuplicateRewrite {
        table: String,
        version: i64,
        files: Vec<String>,
    },

    /// A rewrite commit's added files do not hold the rows its removed files held (their
    /// records minus their deletion vectors'): rows were lost, or deleted rows came back.
    #[error(
        "data-safety violation on `{table}` at version {version}: the rewrite removed files \
         holding {expected} live row(s) (records minus deletion vectors) but added files holding \
         {found}, so {}; stop all maintenance on this table and RESTORE it to version {} if \
         nothing else committed since",
        if found > expected { "deleted rows came back or rows were duplicated" } else { "rows were lost" },
        version - 1
    )]
    RowsChanged {
        table: String,
        version: i64,
        expected: u64,
        found: u64,
    },

    /// The content guard refused a rewrite before its commit: the files it wrote do not hold
    /// what it read (a column's values, a partition value, or their statistics differ).
    #[error(
        "refusing to commit the rewrite of `{table}` (partition {partition}): {what}; nothing was \
         committed, the table is unchanged and the files written are left for VACUUM; this is a \
         bug in tablekeeper or deltalake: please report it with this message"
    )]
    ContentChanged {
        table: String,
        partition: String,
        what: String,
    },

    /// tablekeeper's code or a dependency's panicked during a probe or an operation: the panic
    /// ended that step only, and the job fails like any failure (retried).
    #[error(
        "{operation} on `{table}` panicked: {message}; the step stopped there (commits made \
         before it stand, each guarded) and the job is retried like any failure; this is a bug \
         in tablekeeper or a library it runs (deltalake, the Delta kernel): please report it \
         with this message"
    )]
    Panicked {
        table: String,
        operation: String,
        message: String,
    },

    /// Commit conflicts persisted after every retry the caller allowed.
    #[error(
        "{operation} on `{table}` lost {attempts} commit race(s) to concurrent writers: {source}; \
         it will be retried later; if this repeats, schedule it away from the table's busy hours"
    )]
    Conflict {
        table: String,
        operation: Operation,
        attempts: u32,
        #[source]
        source: Box<DeltaTableError>,
    },

    /// The caller cancelled the operation (its lease could not be renewed) before it finished.
    #[error(
        "{operation} on `{table}` was cancelled before it committed; any Parquet files it had \
         written are unreferenced and a `full` vacuum will reclaim them"
    )]
    Cancelled { table: String, operation: Operation },

    /// A fresh load after writing a checkpoint did not read back the same table.
    #[error(
        "checkpoint canary failed on `{table}` at version {version}: {reason}; readers may fail \
         to open this table: inspect `_delta_log/_last_checkpoint` and the newest checkpoint file"
    )]
    CheckpointCanary {
        table: String,
        version: i64,
        reason: String,
    },

    /// The log has gaps: versions that should load do not.
    #[error(
        "the transaction log of `{table}` is damaged: {}; tablekeeper writes no checkpoint and \
         deletes no log file until it is repaired: restore the missing files from a backup or \
         the writer's storage versioning",
        gaps.join("; ")
    )]
    DamagedLog { table: String, gaps: Vec<String> },
    /// Log cleanup's proof failed: deleting what it planned would break the log.
    #[error(
        "refusing to clean up the log of `{table}`: {reason}; nothing was deleted; check the \
         table's checkpoints and `_last_checkpoint`"
    )]
    UnsafeLogCleanup { table: String, reason: String },
    /// A stale write cannot be repaired exactly; nothing was written for it.
    #[error("cannot repair the stale write at version {stale_write} of `{table}`: {reason}")]
    RepairRefused {
        table: String,
        stale_write: i64,
        reason: String,
    },
    /// VACUUM would delete files a pending repair needs.
    #[error(
        "refusing to vacuum `{table}`: stale write(s) at version(s) {versions:?} wait for their \
         repair, which adds back files this VACUUM could delete; run `tablekeeper repair` (or let \
         the daemon's repair job run) first"
    )]
    RepairPending { table: String, versions: Vec<i64> },
    /// The log references data files (or the deletion-vector files they read) that storage
    /// no longer holds: the table is damaged.
    #[error(
        "table `{table}` is damaged: {} file(s) its {active} active data file(s) need are \
         missing from storage (first: {}); readers fail on them and tablekeeper will not \
         maintain the table until it reads again: restore the files, or RESTORE the table to a \
         version that does not reference them",
        files.len(),
        files.first().map(String::as_str).unwrap_or("-")
    )]
    MissingDataFiles {
        table: String,
        active: usize,
        files: Vec<String>,
    },

    /// The transaction log is missing a commit or checkpoint this crate needs to decide safely.
    #[error("transaction log of `{table}` is incomplete: {reason}; check `_delta_log` for deleted files")]
    IncompleteLog { table: String, reason: String },

    /// A commit, checkpoint, sidecar, deletion vector or table property does not hold what
    /// the Delta protocol asks of it.
    #[error(
        "`{table}` holds something the Delta protocol does not allow: {reason}; nothing was \
         changed: the engine that wrote it has to correct it, and tablekeeper leaves the table \
         alone until then"
    )]
    MalformedLog { table: String, reason: String },

    /// A UniForm table's Iceberg metadata could not be read, so what it references is unknown.
    #[error(
        "refusing to vacuum `{table}`: its Iceberg metadata ({file}) cannot be read: {reason}; \
         VACUUM must keep every file Iceberg readers are still given, so nothing was deleted: \
         repair or remove the Iceberg metadata under `metadata/` (its writer's next commit \
         rewrites it)"
    )]
    IcebergUnreadable {
        table: String,
        file: String,
        reason: String,
    },

    /// A fact a safe rewrite needs is absent (a file's row count, its row ids).
    #[error(
        "cannot rewrite `{table}` safely: {reason}; nothing was committed: rewrite these files \
         with a writer that records it, or disable the operation for this table in the inventory"
    )]
    MissingFacts { table: String, reason: String },

    /// The table moved on while the operation ran (a file it planned with is gone).
    #[error(
        "`{table}` changed while tablekeeper worked on it: {reason}; nothing was committed and \
         the next attempt plans again from the new version"
    )]
    TableMoved { table: String, reason: String },

    /// The rewrite guard could not check a commit (it stands, unchecked).
    #[error(
        "the rewrite guard could not check a commit of `{table}`: {reason}; compare the table's \
         rows with the version before that commit by hand"
    )]
    Unverified { table: String, reason: String },

    /// A tablekeeper bug: something that cannot happen did.
    #[error(
        "tablekeeper bug while working on `{table}`: {reason}; please report it with this \
         message and the log lines around it"
    )]
    Internal { table: String, reason: String },

    /// Any other error from deltalake or the object store, classified by its cause.
    #[error("{context} on `{table}` failed: {source}")]
    Delta {
        table: String,
        context: &'static str,
        #[source]
        source: Box<DeltaTableError>,
    },
}

impl DeltaError {
    /// Wraps a deltalake error with the table and what was being done.
    pub(crate) fn delta(table: &str, context: &'static str, source: DeltaTableError) -> Self {
        DeltaError::Delta {
            table: table.to_owned(),
            context,
            source: Box::new(source),
        }
    }

    /// Wraps an object store error with the table and what was being done.
    pub(crate) fn store(table: &str, context: &'static str, source: ObjectStoreError) -> Self {
        Self::delta(table, context, DeltaTableError::ObjectStore { source })
    }

    /// How a worker should treat this error.
    pub fn class(&self) -> ErrorClass {
        match self {
            DeltaError::Conflict { .. } => ErrorClass::Conflict,
            // the worker cancelled on purpose; the table is fine and the job can run again
            DeltaError::Cancelled { .. } => ErrorClass::Transient,
            // the next attempt plans on the new version
            DeltaError::TableMoved { .. } => ErrorClass::Transient,
            // a panic may be a race or an input that changes; retried like any failure
            DeltaError::Panicked { .. } => ErrorClass::Transient,
            DeltaError::Delta { source, .. } => classify(source),
            // a clone's storage that flickers is retried; a gone or damaged one needs a person
            DeltaError::ReferrerUnreadable { source, .. } => match source.class() {
                ErrorClass::Transient => ErrorClass::Transient,
                _ => ErrorClass::Permanent,
            },
            DeltaError::NotADeltaTable { .. }
            | DeltaError::InvalidUri { .. }
            | DeltaError::UnsupportedProtocol { .. }
            | DeltaError::RetentionTooShort { .. }
            | DeltaError::BadTableProperty { .. }
            | DeltaError::InvalidOptions { .. }
            | DeltaError::UnsafeVacuum { .. }
            | DeltaError::PinUnloadable { .. }
            | DeltaError::DuplicateRewrite { .. }
            | DeltaError::RowsChanged { .. }
            | DeltaError::ContentChanged { .. }
            | DeltaError::CheckpointCanary { .. }
            | DeltaError::MissingDataFiles { .. }
            | DeltaError::DamagedLog { .. }
            | DeltaError::UnsafeLogCleanup { .. }
            | DeltaError::RepairRefused { .. }
            | DeltaError::RepairPending { .. }
            | DeltaError::IncompleteLog { .. }
            | DeltaError::MalformedLog { .. }
            | DeltaError::IcebergUnreadable { .. }
            | DeltaError::MissingFacts { .. }
            | DeltaError::Unverified { .. }
            | DeltaError::Internal { .. } => ErrorClass::Permanent,
        }
    }

    /// The table uri this error is about.
    pub fn table(&self) -> &str {
        match self {
            DeltaError::NotADeltaTable { table }
            | DeltaError::InvalidUri { table, .. }
            | DeltaError::UnsupportedProtocol { table, .. }
            | DeltaError::RetentionTooShort { table, .. }
            | DeltaError::BadTableProperty { table, .. }
            | DeltaError::InvalidOptions { table, .. }
            | DeltaError::UnsafeVacuum { table, .. }
            | DeltaError::PinUnloadable { table, .. }
            | DeltaError::ReferrerUnreadable { table, .. }
            | DeltaError::DuplicateRewrite { table, .. }
            | DeltaError::RowsChanged { table, .. }
            | DeltaError::ContentChanged { table, .. }
            | DeltaError::Panicked { table, .. }
            | DeltaError::Conflict { table, .. }
            | DeltaError::Cancelled { table, .. }
            | DeltaError::CheckpointCanary { table, .. }
            | DeltaError::MissingDataFiles { table, .. }
            | DeltaError::DamagedLog { table, .. }
            | DeltaError::UnsafeLogCleanup { table, .. }
            | DeltaError::RepairRefused { table, .. }
            | DeltaError::RepairPending { table, .. }
            | DeltaError::IncompleteLog { table, .. }
            | DeltaError::MalformedLog { table, .. }
            | DeltaError::IcebergUnreadable { table, .. }
            | DeltaError::MissingFacts { table, .. }
            | DeltaError::TableMoved { table, .. }
            | DeltaError::Unverified { table, .. }
            | DeltaError::Internal { table, .. }
            | DeltaError::Delta { table, .. } => table,
        }
    }
}

/// How a worker should treat a raw deltalake error (for code that calls deltalake directly).
pub fn classify_delta_error(err: &DeltaTableError) -> ErrorClass {
    classify(err)
}

/// Whether a deltalake error is a lost commit race this crate may retry.
pub(crate) fn is_commit_conflict(err: &DeltaTableError) -> bool {
    classify(err) == ErrorClass::Conflict
}

/// Classifies a deltalake error by its variant, then by the causes it wraps.
///
/// Unknown errors count as transient: the job table bounds retries with `max_attempts`, while a
/// wrongly permanent classification would leave a table unmaintained until the next schedule.
pub(crate) fn classify(err: &DeltaTableError) -> ErrorClass {
    match err {
        DeltaTableError::Transaction { source } => match source {
            TransactionError::CommitConflict(_)
            | TransactionError::MaxCommitAttempts(_)
            | TransactionError::VersionAlreadyExists(_) => ErrorClass::Conflict,
            TransactionError::UnsupportedTableFeatures(_)
            | TransactionError::TableFeaturesRequired(_)
            | TransactionError::DeltaTableAppendOnly
            | TransactionError::SerializeLogJson { .. } => ErrorClass::Permanent,
            TransactionError::ObjectStore { source } => classify_store(source),
            TransactionError::LogStoreError { .. } => ErrorClass::Transient,
        },
        DeltaTableError::VersionAlreadyExists(_) | DeltaTableError::VersionMismatch(..) => {
            ErrorClass::Conflict
        }
        DeltaTableError::ObjectStore { source } => classify_store(source),
        DeltaTableError::NotATable(_)
        | DeltaTableError::InvalidTableLocation(_)
        | DeltaTableError::MissingFeature { .. }
        | DeltaTableError::SchemaMismatch { .. }
        | DeltaTableError::NoSchema
        | DeltaTableError::MetadataError(_)
        | DeltaTableError::UnsupportedColumnMapping { .. }
        | DeltaTableError::InvalidPartitionFilter { .. }
        | DeltaTableError::PartitionError { .. }
        | DeltaTableError::InvalidJsonLog { .. }
        | DeltaTableError::InvalidStatsJson { .. } => ErrorClass::Permanent,
        DeltaTableError::Io { .. } => ErrorClass::Transient,
        other => classify_by_cause(other),
    }
}

fn classify_store(err: &ObjectStoreError) -> ErrorClass {
    match err {
        // a data or log file the table references is gone, or the credentials from the
        // environment are refused: retrying the same request cannot help
        ObjectStoreError::NotFound { .. }
        | ObjectStoreError::PermissionDenied { .. }
        | ObjectStoreError::Unauthenticated { .. }
        | ObjectStoreError::InvalidPath { .. }
        | ObjectStoreError::NotSupported { .. }
        | ObjectStoreError::NotImplemented { .. } => ErrorClass::Permanent,
        other if access_denied(other) => ErrorClass::Permanent,
        _ => ErrorClass::Transient,
    }
}

/// What stores answer a refused credential or permission with: the HTTP status line as the
/// object store client prints it, and the error codes of S3 (and S3-compatible servers),
/// Azure Blob Storage and GCS. object_store reports most of these as a generic error (a
/// 403 on a LIST, for one) with the store's own words in its text, not as
/// `PermissionDenied`; matched there, a rotated secret makes the table `unreadable` (and
/// pages its owner) instead of `unknown` for as long as nobody looks.
const ACCESS_DENIED: &[&str] = &[
    "401 Unauthorized",
    "403 Forbidden",
    "AccessDenied",
    "SignatureDoesNotMatch",
    "InvalidAccessKeyId",
    "ExpiredToken",
    "InvalidToken",
    "AuthorizationFailure",
    "AuthorizationPermissionMismatch",
    "AuthenticationFailed",
    "InvalidAuthenticationInfo",
];

/// A credential the object store client cannot use at all, so no request is even sent: a
/// GCS service-account file that is missing, is not JSON, or holds no usable key (object_store's
/// words). Like a refused one, it fails every time until someone replaces it.
const CREDENTIAL_UNUSABLE: &[&str] = &[
    "Unable to open service account file",
    "Unable to decode service account file",
    "No RSA key found in pem file",
    "Invalid RSA key",
    "Unsupported key encoding",
    "Error reading pem file",
];

/// Throttling that some stores answer with 403 (GCS project quotas) or with an access-like
/// code: it passes, so it stays transient.
const THROTTLED: &[&str] = &["rateLimitExceeded", "userRateLimitExceeded", "SlowDown"];

/// Whether `err` or any error it wraps says the store refused the credentials, or that the
/// client could not use them.
fn access_denied(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut text = String::new();
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(current) = cause {
        text.push_str(&current.to_string());
        text.push('\n');
        cause = current.source();
    }
    ACCESS_DENIED
        .iter()
        .chain(CREDENTIAL_UNUSABLE)
        .any(|word| text.contains(word))
        && !THROTTLED.iter().any(|word| text.contains(word))
}

/// Walks the `source()` chain looking for an object store or I/O error.
fn classify_by_cause(err: &DeltaTableError) -> ErrorClass {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(err);
    while let Some(current) = cause {
        if let Some(store) = current.downcast_ref::<ObjectStoreError>() {
            return classify_store(store);
        }
        if current.downcast_ref::<std::io::Error>().is_some() {
            return ErrorClass::Transient;
        }
        cause = current.source();
    }
    // errors deltalake turned into text (the kernel's, `Generic`) keep the store's words
    if access_denied(err) {
        ErrorClass::Permanent
    } else {
        ErrorClass::Transient
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use deltalake::kernel::transaction::CommitConflictError;

    #[test]
    fn commit_conflicts_are_conflicts() {
        let err = DeltaTableError::Transaction {
            source: TransactionError::CommitConflict(CommitConflictError::ConcurrentDeleteRead),
        };
        assert_eq!(classify(&err), ErrorClass::Conflict);
        assert!(is_commit_conflict(&err));
        assert_eq!(
            classify(&DeltaTableError::VersionAlreadyExists(3)),
            ErrorClass::Conflict
        );
    }

    #[test]
    fn missing_table_is_permanent_and_network_is_transient() {
        assert_eq!(
            classify(&DeltaTableError::NotATable("x".into())),
            ErrorClass::Permanent
        );
        let network = DeltaTableError::ObjectStore {
            source: ObjectStoreError::Generic {
                store: "S3",
                source: "connection reset".into(),
            },
        };
        assert_eq!(classify(&network), ErrorClass::Transient);
        let missing = DeltaTableError::ObjectStore {
            source: ObjectStoreError::NotFound {
                path: "part-1.parquet".into(),
                source: "gone".into(),
            },
        };
        assert_eq!(classify(&missing), ErrorClass::Permanent);
    }

    /// A store's refusal as object_store reports a 403 on a LIST: a generic error whose text
    /// holds the status and the store's code (seen with moto and a wrong secret).
    fn generic(text: &str) -> DeltaTableError {
        DeltaTableError::ObjectStore {
            source: ObjectStoreError::Generic {
                store: "S3",
                source: text.to_owned().into(),
            },
        }
    }

    #[test]
    fn refused_credentials_are_permanent_whatever_the_store_calls_them() {
        let moto = "Error performing list request: Error performing GET http://127.0.0.1:5056/bucket?list-type=2 in 5ms - Server returned non-2xx status code: 403 Forbidden: <?xml version=\"1.0\"?><Error><Code>InvalidAccessKeyId</Code></Error>";
        assert_eq!(classify(&generic(moto)), ErrorClass::Permanent);
        for code in [
            "SignatureDoesNotMatch",
            "AccessDenied",
            "ExpiredToken",
            "AuthorizationFailure",
            "AuthenticationFailed",
            "401 Unauthorized",
        ] {
            assert_eq!(classify(&generic(code)), ErrorClass::Permanent, "{code}");
        }
        // deltalake's own text errors keep the store's words too
        assert_eq!(
            classify(&DeltaTableError::Generic(format!(
                "Failed to read delta log object: {moto}"
            ))),
            ErrorClass::Permanent
        );
        // a GCS service-account file whose key cannot be used fails before any request
        assert_eq!(
            classify(&DeltaTableError::Generic(
                "Failed to read delta log object: Generic GCS error: Invalid RSA key: InvalidEncoding"
                    .into()
            )),
            ErrorClass::Permanent
        );
        // throttling that answers 403 passes; so does a store that does not answer
        let quota = "403 Forbidden: {\"error\":{\"errors\":[{\"reason\":\"rateLimitExceeded\"}]}}";
        assert_eq!(classify(&generic(quota)), ErrorClass::Transient);
        assert_eq!(
            classify(&generic("503 Service Unavailable: SlowDown")),
            ErrorClass::Transient
        );
        assert_eq!(
            classify(&generic("connection refused")),
            ErrorClass::Transient
        );
    }

    #[test]
    fn safety_refusals_are_permanent_and_name_the_table() {
        let err = DeltaError::UnsafeVacuum {
            table: "s3://lake/t".into(),
            files: vec!["a.parquet".into()],
        };
        assert_eq!(err.class(), ErrorClass::Permanent);
        assert_eq!(err.table(), "s3://lake/t");
        assert!(err.to_string().contains("s3://lake/t"));
        assert!(err.to_string().contains("a.parquet"));
        let err = DeltaError::RetentionTooShort {
            table: "/t".into(),
            requested_hours: 1,
        };
        assert!(err.to_string().contains("allow_short_retention"));
        let err = DeltaError::DuplicateRewrite {
            table: "/t".into(),
            version: 5,
            files: vec!["x".into()],
        };
        assert!(err.to_string().contains("version 4"));
    }

    #[test]
    fn each_log_cause_has_its_own_kind_class_and_advice() {
        let reason = || "r".to_owned();
        let table = || "/t".to_owned();
        let cases = [
            (
                DeltaError::IncompleteLog {
                    table: table(),
                    reason: reason(),
                },
                ErrorClass::Permanent,
                "deleted files",
            ),
            (
                DeltaError::MalformedLog {
                    table: table(),
                    reason: reason(),
                },
                ErrorClass::Permanent,
                "the engine that wrote it",
            ),
            (
                DeltaError::MissingFacts {
                    table: table(),
                    reason: reason(),
                },
                ErrorClass::Permanent,
                "disable the operation",
            ),
            (
                DeltaError::TableMoved {
                    table: table(),
                    reason: reason(),
                },
                ErrorClass::Transient,
                "plans again",
            ),
            (
                DeltaError::Unverified {
                    table: table(),
                    reason: reason(),
                },
                ErrorClass::Permanent,
                "by hand",
            ),
            (
                DeltaError::Internal {
                    table: table(),
                    reason: reason(),
                },
                ErrorClass::Permanent,
                "please report it",
            ),
        ];
        for (err, class, advice) in cases {
            assert_eq!(err.class(), class, "{err}");
            assert_eq!(err.table(), "/t");
            assert!(err.to_string().contains(advice), "{err}");
        }
    }
}
