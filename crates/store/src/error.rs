//! The one error type of the job store.
//!
//! Owns the mapping from driver errors (sqlx) to what a caller can act on: retry later
//! (`Unavailable`, `Contention`), fix the input or the configuration (`InvalidInput`,
//! `Config`, `Migration`), or report (`Constraint`, `Database`, `Corrupt`). It must never
//! put a database password into a message.

use sqlx::migrate::MigrateError;

/// Everything a job store call can fail with. No store method panics on a database error.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database cannot be reached right now: connection refused or reset, pool
    /// acquire timed out, the server is starting up or shutting down, too many
    /// connections. Retryable: the pool reconnects by itself once the database is back.
    #[error("job store unavailable: {source}")]
    Unavailable {
        #[source]
        source: sqlx::Error,
    },

    /// Concurrent transactions got in each other's way (Postgres deadlock or
    /// serialization failure, SQLite busy beyond its busy timeout). Retryable.
    #[error("job store contention: {detail}")]
    Contention { detail: String },

    /// The database refused a change with a constraint: one of the job table invariants
    /// (`jobs_one_running_per_key`, `jobs_one_queued_per_table_operation`) or a CHECK.
    #[error("the database refused the change (constraint `{constraint}`): {message}")]
    Constraint { constraint: String, message: String },

    /// The job does not exist.
    #[error("job {id} not found")]
    NotFound { id: tablekeeper_vocab::JobId },

    /// An argument was out of range; the message says what is accepted.
    #[error("invalid input: {0}")]
    InvalidInput(String),

    /// Applying the embedded migrations failed.
    #[error("migrating the job store failed: {source}{}", migration_hint(source))]
    Migration {
        #[source]
        source: MigrateError,
    },

    /// The database URL (or another store setting) cannot be used.
    #[error(
        "invalid database_url `{url}`: {reason}; use postgres://USER@HOST:5432/DB, \
         sqlite://PATH or sqlite::memory:"
    )]
    Config {
        /// The URL with any password replaced by `***`.
        url: String,
        reason: String,
    },

    /// A row holds a value tablekeeper does not know (e.g. an unknown state written by
    /// hand or by a newer version).
    #[error("unexpected value in the job table: {0}")]
    Corrupt(String),

    /// Any other database error (a bug, or a schema tablekeeper did not create).
    #[error("job store database error: {source}")]
    Database {
        #[source]
        source: sqlx::Error,
    },
}

impl StoreError {
    /// A call that got no answer within `limit` (the database or the network to it went
    /// silent). Retryable, like any other outage.
    pub(crate) fn no_answer(limit: std::time::Duration) -> Self {
        Self::Unavailable {
            source: sqlx::Error::Io(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!(
                    "no answer within {limit:?}: the database or the network to it is not responding"
                ),
            )),
        }
    }

    /// True when the same call may succeed later without anyone changing anything.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Unavailable { .. } | Self::Contention { .. })
    }

    /// The name of the constraint a `Constraint` error hit.
    pub fn constraint(&self) -> Option<&str> {
        match self {
            Self::Constraint { constraint, .. } => Some(constraint),
            _ => None,
        }
    }

    pub(crate) fn config(url: &str, reason: impl Into<String>) -> Self {
        Self::Config {
            url: redact_url(url),
            reason: reason.into(),
        }
    }
}

fn migration_hint(source: &MigrateError) -> &'static str {
    match source {
        MigrateError::VersionMismatch(_) => {
            "; migrations are append-only: a released migration file was edited, restore it \
             and put the change in a new migration"
        }
        MigrateError::VersionMissing(_) | MigrateError::VersionTooNew(..) => {
            "; the database was migrated by a newer tablekeeper: run that version or newer"
        }
        MigrateError::Dirty(_) => {
            "; a previous migration failed half-way: fix the database by hand and delete \
             the dirty row from _sqlx_migrations"
        }
        _ => "",
    }
}

/// Postgres SQLSTATEs meaning "the server cannot serve you right now".
/// Class 08 = connection exception; 57P01..57P03 = admin/crash shutdown and
/// "cannot connect now" (starting up); 53300 = too many connections
/// (https://www.postgresql.org/docs/current/errcodes-appendix.html).
fn pg_code_is_unavailable(code: &str) -> bool {
    code.starts_with("08") || matches!(code, "57P01" | "57P02" | "57P03" | "53300")
}

/// 40001 serialization_failure, 40P01 deadlock_detected.
fn pg_code_is_contention(code: &str) -> bool {
    matches!(code, "40001" | "40P01")
}

/// SQLite primary result codes (extended codes keep them in the low byte):
/// 5 = SQLITE_BUSY, 6 = SQLITE_LOCKED (https://www.sqlite.org/rescode.html).
fn sqlite_code_is_contention(code: &str) -> bool {
    code.parse::<i64>().is_ok_and(|c| matches!(c & 0xff, 5 | 6))
}

impl From<sqlx::Error> for StoreError {
    fn from(err: sqlx::Error) -> Self {
        match err {
            sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::Protocol(_)
            | sqlx::Error::WorkerCrashed => Self::Unavailable { source: err },
            sqlx::Error::Migrate(source) => Self::Migration { source: *source },
            sqlx::Error::Database(ref db) => {
                let code = db.code().map(|c| c.into_owned()).unwrap_or_default();
                let is_pg = db
                    .try_downcast_ref::<sqlx::postgres::PgDatabaseError>()
                    .is_some();
                if is_pg && pg_code_is_unavailable(&code) {
                    return Self::Unavailable { source: err };
                }
                if (is_pg && pg_code_is_contention(&code))
                    || (!is_pg && sqlite_code_is_contention(&code))
                {
                    return Self::Contention {
                        detail: db.message().to_owned(),
                    };
                }
                match db.kind() {
                    sqlx::error::ErrorKind::UniqueViolation
                    | sqlx::error::ErrorKind::ForeignKeyViolation
                    | sqlx::error::ErrorKind::NotNullViolation
                    | sqlx::error::ErrorKind::CheckViolation => Self::Constraint {
                        // SQLite does not name the constraint; its message names the
                        // columns ("UNIQUE constraint failed: jobs.concurrency_key").
                        constraint: db
                            .constraint()
                            .map(str::to_owned)
                            .unwrap_or_else(|| db.message().to_owned()),
                        message: db.message().to_owned(),
                    },
                    _ => Self::Database { source: err },
                }
            }
            other => Self::Database { source: other },
        }
    }
}

impl From<MigrateError> for StoreError {
    fn from(source: MigrateError) -> Self {
        Self::Migration { source }
    }
}

/// `url` with its password (if any) replaced by `***`; unparsable input is returned
/// with everything between `://` and `@` hidden.
pub(crate) fn redact_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            // set_password only fails for URLs that cannot have credentials, and this
            // one already has some.
            let _ = parsed.set_password(Some("***"));
            parsed.to_string()
        }
        Ok(_) => url.to_owned(),
        Err(_) => match (url.find("://"), url.rfind('@')) {
            (Some(start), Some(at)) if at > start => {
                format!("{}://***@{}", &url[..start], &url[at + 1..])
            }
            _ => url.to_owned(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_passwords() {
        assert_eq!(
            redact_url("postgres://tk:s3cret@db:5432/tk"),
            "postgres://tk:***@db:5432/tk"
        );
        assert_eq!(redact_url("postgres://tk@db/tk"), "postgres://tk@db/tk");
        assert_eq!(redact_url("weird://a:b@c d"), "weird://***@c d");
    }

    #[test]
    fn config_error_hides_password_and_says_what_works() {
        let err = StoreError::config("mysql://u:pw@h/db", "unsupported scheme `mysql`");
        let text = err.to_string();
        assert!(!text.contains("pw"), "{text}");
        assert!(text.contains("postgres://"), "{text}");
        assert!(!err.is_retryable());
    }

    #[test]
    fn io_and_pool_timeouts_are_retryable() {
        let io = StoreError::from(sqlx::Error::Io(std::io::Error::from(
            std::io::ErrorKind::ConnectionRefused,
        )));
        assert!(io.is_retryable());
        assert!(StoreError::from(sqlx::Error::PoolTimedOut).is_retryable());
        assert!(!StoreError::from(sqlx::Error::RowNotFound).is_retryable());
    }

    #[test]
    fn sqlite_busy_codes_are_contention() {
        assert!(sqlite_code_is_contention("5"));
        assert!(sqlite_code_is_contention("517")); // SQLITE_BUSY_SNAPSHOT
        assert!(sqlite_code_is_contention("6"));
        assert!(!sqlite_code_is_contention("2067")); // SQLITE_CONSTRAINT_UNIQUE
    }
}
