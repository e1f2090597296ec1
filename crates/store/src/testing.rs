//! Test support for every crate: a fresh, uniquely named Postgres database per test.
//!
//! Always compiled (it is small) so other crates' integration tests and the end-to-end
//! tests can use it without a feature flag. It must never touch a database it did not
//! create: it only creates and drops `tk_test_<random>` databases.
//!
//! ```no_run
//! # async fn example() -> Result<(), tablekeeper_store::StoreError> {
//! use tablekeeper_store::testing::TestDatabase;
//! let db = TestDatabase::create().await?;
//! let store = db.connect_store().await?; // connected and migrated
//! // ... use `store`, or hand `db.url` to the daemon under test ...
//! store.close().await;
//! db.drop_db().await?;
//! # Ok(()) }
//! ```
//!
//! `Drop` cannot be async: a `TestDatabase` dropped without [`TestDatabase::drop_db`]
//! (a failed assertion unwinding) drops its database from a helper thread on a
//! throwaway runtime, best effort. Leftovers, if any, are named `tk_test_*`.

use std::str::FromStr;
use std::sync::Arc;

use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection, PgConnection};

use crate::connect::connect;
use crate::error::StoreError;
use crate::options::StoreOptions;
use crate::store::JobStore;

/// Environment variable naming the Postgres server for tests (any database on it; the
/// user must be allowed to create databases).
pub const TEST_DATABASE_URL_ENV: &str = "TABLEKEEPER_TEST_DATABASE_URL";

/// The local test server of the team brief: trust auth, user postgres.
pub const DEFAULT_TEST_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// Prefix of every database this module creates.
pub const TEST_DATABASE_PREFIX: &str = "tk_test_";

/// A Postgres database created for one test.
#[derive(Debug)]
pub struct TestDatabase {
    /// URL of the new database (same server and credentials as the base URL).
    pub url: String,
    /// Its name, `tk_test_<32 hex digits>`.
    pub name: String,
    admin_url: String,
    dropped: bool,
}

/// The base URL: `TABLEKEEPER_TEST_DATABASE_URL` or [`DEFAULT_TEST_DATABASE_URL`].
pub fn base_url() -> String {
    std::env::var(TEST_DATABASE_URL_ENV).unwrap_or_else(|_| DEFAULT_TEST_DATABASE_URL.to_owned())
}

impl TestDatabase {
    /// Creates an empty database with a random name on the base server.
    pub async fn create() -> Result<Self, StoreError> {
        let admin_url = base_url();
        let name = format!("{TEST_DATABASE_PREFIX}{}", uuid::Uuid::new_v4().simple());
        let mut url = url::Url::parse(&admin_url).map_err(|err| {
            StoreError::config(&admin_url, format!("{err} (set {TEST_DATABASE_URL_ENV})"))
        })?;
        url.set_path(&format!("/{name}"));

        let mut conn = admin_connection(&admin_url).await?;
        // CREATE DATABASE copies template1 and fails if another session is copying it at
        // that moment (SQLSTATE 55006, tests creating databases in parallel): retry a
        // few times, each after the competing copy had time to finish.
        let mut tries = 0;
        loop {
            tries += 1;
            match sqlx::query(&format!("CREATE DATABASE \"{name}\""))
                .execute(&mut conn)
                .await
            {
                Ok(_) => break,
                Err(sqlx::Error::Database(db))
                    if db.code().as_deref() == Some("55006") && tries < 10 =>
                {
                    tokio::time::sleep(std::time::Duration::from_millis(50 * tries)).await;
                }
                Err(err) => return Err(err.into()),
            }
        }
        let _ = conn.close().await;
        Ok(Self {
            url: url.to_string(),
            name,
            admin_url,
            dropped: false,
        })
    }

    /// A store on this database, migrated.
    pub async fn connect_store(&self) -> Result<Arc<JobStore>, StoreError> {
        self.connect_store_with(StoreOptions::default()).await
    }

    /// A store on this database with `opts`, migrated.
    pub async fn connect_store_with(
        &self,
        opts: StoreOptions,
    ) -> Result<Arc<JobStore>, StoreError> {
        let store = connect(&self.url, opts).await?;
        store.migrate().await?;
        Ok(store)
    }

    /// Drops the database, disconnecting any session still using it.
    pub async fn drop_db(mut self) -> Result<(), StoreError> {
        self.dropped = true;
        drop_database(&self.admin_url, &self.name).await
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        if self.dropped {
            return;
        }
        let admin_url = self.admin_url.clone();
        let name = self.name.clone();
        // A separate thread with its own runtime works whether or not we are inside a
        // tokio runtime (block_on inside one would panic).
        let handle = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build();
            match runtime {
                Ok(runtime) => runtime.block_on(drop_database(&admin_url, &name)),
                Err(err) => Err(StoreError::InvalidInput(format!("no runtime: {err}"))),
            }
        });
        match handle.join() {
            Ok(Ok(())) => {}
            Ok(Err(err)) => eprintln!(
                "warning: dropping test database {} failed: {err}",
                self.name
            ),
            Err(_) => eprintln!("warning: dropping test database {} panicked", self.name),
        }
    }
}

async fn admin_connection(admin_url: &str) -> Result<PgConnection, StoreError> {
    let options = PgConnectOptions::from_str(admin_url)
        .map_err(|err| {
            StoreError::config(admin_url, format!("{err} (set {TEST_DATABASE_URL_ENV})"))
        })?
        .disable_statement_logging();
    Ok(options.connect().await?)
}

async fn drop_database(admin_url: &str, name: &str) -> Result<(), StoreError> {
    let mut conn = admin_connection(admin_url).await?;
    // FORCE (Postgres 13+) ends sessions still connected, e.g. a daemon under test.
    sqlx::query(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
        .execute(&mut conn)
        .await?;
    let _ = conn.close().await;
    Ok(())
}
