//! The Postgres dialect: the production database, shared by every replica.
//!
//! Row locks make the claim scalable: `FOR UPDATE SKIP LOCKED` lets replicas claim in
//! parallel, and the partial unique indexes settle the races that remain (the driver retries
//! them). Timestamps come from `clock_timestamp()` (the database clock when the statement
//! runs, not the transaction start). This module maps the driver's arguments and records to
//! Postgres types; the statements are in `sql.rs`.

mod sql;

use std::str::FromStr;

use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions, PgRow};
use sqlx::types::Json;
use sqlx::{Column, Postgres, Row, TypeInfo, ValueRef};

use crate::dialect::Backend;
use crate::dialect::{Arg, Record, Value};
use crate::error::StoreError;
use crate::options::StoreOptions;

/// The migrations in `migrations/postgres`, embedded at compile time.
pub static MIGRATOR: Migrator = sqlx::migrate!("../../migrations/postgres");

/// A store transaction is a few statements lasting milliseconds. A session idle inside one
/// for a minute is a hung client, and its row locks would block claims and reaping, so
/// Postgres ends it.
const IDLE_IN_TRANSACTION_TIMEOUT: &str = "60s";

#[derive(Debug, Clone)]
pub(crate) struct PostgresDialect {
    pool: PgPool,
}

impl PostgresDialect {
    /// Opens a pool for `url` (`postgres://` or `postgresql://`).
    pub(crate) async fn connect(url: &str, opts: &StoreOptions) -> Result<Self, StoreError> {
        let connect_options = PgConnectOptions::from_str(url)
            .map_err(|err| StoreError::config(url, err.to_string()))?
            .application_name("tablekeeper")
            .options([(
                "idle_in_transaction_session_timeout",
                IDLE_IN_TRANSACTION_TIMEOUT,
            )]);
        let pool_options = PgPoolOptions::new()
            .max_connections(opts.max_connections.max(1))
            .acquire_timeout(opts.acquire_timeout)
            // A connection that died with a database restart is replaced before use instead
            // of failing the caller's statement.
            .test_before_acquire(true);
        let pool = if opts.connect_lazily {
            pool_options.connect_lazy_with(connect_options)
        } else {
            pool_options
                .connect_with(connect_options)
                .await
                .map_err(|err| connect_error(url, err))?
        };
        Ok(Self { pool })
    }
}

/// Errors of the first connection: reachability problems stay `Unavailable` (retryable);
/// anything else (bad credentials, missing database) is configuration.
fn connect_error(url: &str, err: sqlx::Error) -> StoreError {
    match StoreError::from(err) {
        err @ StoreError::Unavailable { .. } => err,
        other => StoreError::config(url, other.to_string()),
    }
}

/// Postgres takes every argument as it is.
fn store_as(arg: Arg) -> Arg {
    arg
}

/// Reads every column by its Postgres type.
fn record(row: &PgRow) -> Result<Record, StoreError> {
    let mut columns = Vec::with_capacity(row.columns().len());
    for column in row.columns() {
        let i = column.ordinal();
        let value = if row.try_get_raw(i)?.is_null() {
            Value::Null
        } else {
            match column.type_info().name() {
                "INT8" => Value::Int(row.try_get(i)?),
                "INT4" => Value::Int(row.try_get::<i32, _>(i)?.into()),
                "INT2" => Value::Int(row.try_get::<i16, _>(i)?.into()),
                "BOOL" => Value::Bool(row.try_get(i)?),
                "TIMESTAMPTZ" => Value::Time(row.try_get(i)?),
                "UUID" => Value::Uuid(row.try_get(i)?),
                "JSONB" | "JSON" => Value::Json(row.try_get::<Json<_>, _>(i)?.0),
                "FLOAT8" => Value::Real(row.try_get(i)?),
                _ => Value::Text(row.try_get(i)?),
            }
        };
        columns.push((column.name().to_owned(), value));
    }
    Ok(Record::new(columns))
}

crate::dialect::sqlx_dialect!(PostgresDialect, Postgres, PgTx, backend: Backend::Postgres, begin: "BEGIN", store_as: store_as);
