//! The embedded SQLite dialect: one replica (quickstart, small fleets), same semantics as
//! Postgres (the conformance suite runs against both).
//!
//! SQLite has one writer at a time: every transaction takes the write lock up front (`BEGIN
//! IMMEDIATE`), which replaces `FOR UPDATE SKIP LOCKED` and rules out the races the driver
//! retries on Postgres. Times, uuids and JSON are stored as text. The database must never be
//! shared by several replicas on a network filesystem: SQLite locking is not reliable there.
//! This module maps the driver's arguments and records to SQLite values; the statements are
//! in `sql.rs`.

mod sql;

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use sqlx::migrate::Migrator;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow,
    SqliteSynchronous,
};
use sqlx::{Column, Row, Sqlite, TypeInfo, ValueRef};

use crate::dialect::Backend;
use crate::dialect::{Arg, Record, Value};
use crate::error::StoreError;
use crate::options::StoreOptions;

/// The migrations in `migrations/sqlite`, embedded at compile time.
pub static MIGRATOR: Migrator = sqlx::migrate!("../../migrations/sqlite");

/// How long a writer waits for SQLite's write lock before failing with `Contention`. Store
/// transactions hold it for milliseconds; 5 s is sqlx's default and matches the pool acquire
/// timeout.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, Clone)]
pub(crate) struct SqliteDialect {
    pool: SqlitePool,
}

impl SqliteDialect {
    /// Opens `url` (`sqlite://PATH`, `sqlite:PATH` or `sqlite::memory:`). A file database is
    /// created if missing (with its directory) and put in WAL mode.
    pub(crate) async fn connect(url: &str, opts: &StoreOptions) -> Result<Self, StoreError> {
        let in_memory = url.contains(":memory:") || url.contains("mode=memory");
        let mut connect_options = SqliteConnectOptions::from_str(url)
            .map_err(|err| StoreError::config(url, err.to_string()))?
            .create_if_missing(true)
            .foreign_keys(true)
            .busy_timeout(BUSY_TIMEOUT);
        if !in_memory {
            // WAL: readers (API, dashboard) never block the writer and vice versa.
            // synchronous=NORMAL is the documented safe pairing with WAL (a power loss may
            // drop the last commits, never corrupt the file).
            connect_options = connect_options
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Normal);
            create_parent_dir(url, connect_options.get_filename())?;
        }
        let mut pool_options = SqlitePoolOptions::new()
            .acquire_timeout(opts.acquire_timeout)
            .test_before_acquire(true);
        pool_options = if in_memory {
            // Every connection to `sqlite::memory:` would open its own database, and the
            // database vanishes with its last connection: one connection, kept forever.
            pool_options
                .max_connections(1)
                .min_connections(1)
                .idle_timeout(None)
                .max_lifetime(None)
        } else {
            pool_options.max_connections(opts.max_connections.max(1))
        };
        let pool = if opts.connect_lazily && !in_memory {
            pool_options.connect_lazy_with(connect_options)
        } else {
            pool_options
                .connect_with(connect_options)
                .await
                .map_err(|err| StoreError::config(url, err.to_string()))?
        };
        Ok(Self { pool })
    }
}

/// `create_if_missing` creates the file, not its directory; the embedded default path usually
/// lives in a data directory that may not exist yet.
fn create_parent_dir(url: &str, file: &Path) -> Result<(), StoreError> {
    match file.parent() {
        Some(dir) if !dir.as_os_str().is_empty() && !dir.exists() => std::fs::create_dir_all(dir)
            .map_err(|err| {
                StoreError::config(
                    url,
                    format!("cannot create directory `{}`: {err}", dir.display()),
                )
            }),
        _ => Ok(()),
    }
}

/// The canonical stored form of a time: UTC, milliseconds, `Z`.
fn timestamp(time: DateTime<Utc>) -> String {
    time.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// SQLite stores times (as [`timestamp`]), uuids and JSON as text.
fn store_as(arg: Arg) -> Arg {
    match arg {
        Arg::Time(v) => Arg::Text(v.map(timestamp)),
        Arg::Uuid(v) => Arg::Text(Some(v.to_string())),
        Arg::Json(v) => Arg::Text(v.map(|json| json.to_string())),
        other => other,
    }
}

/// Reads every value by its storage class; the driver's accessors read text as times, uuids
/// or JSON where it expects them.
fn record(row: &SqliteRow) -> Result<Record, StoreError> {
    let mut columns = Vec::with_capacity(row.columns().len());
    for column in row.columns() {
        let i = column.ordinal();
        let raw = row.try_get_raw(i)?;
        let value = if raw.is_null() {
            Value::Null
        } else {
            match raw.type_info().name() {
                "INTEGER" | "BOOLEAN" => Value::Int(row.try_get(i)?),
                "REAL" => Value::Real(row.try_get(i)?),
                _ => Value::Text(row.try_get(i)?),
            }
        };
        columns.push((column.name().to_owned(), value));
    }
    Ok(Record::new(columns))
}

// A write transaction takes SQLite's write lock from the start: a deferred transaction that
// reads first and writes later can fail to upgrade its lock (SQLITE_BUSY without waiting);
// IMMEDIATE waits up to the busy timeout instead.
crate::dialect::sqlx_dialect!(SqliteDialect, Sqlite, SqliteTx, backend: Backend::Sqlite, begin: "BEGIN IMMEDIATE", store_as: store_as);
