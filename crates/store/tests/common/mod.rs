//! Backends for the integration tests: a fresh Postgres database (real server on
//! 127.0.0.1:5432 or `TABLEKEEPER_TEST_DATABASE_URL`) or a fresh SQLite file.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use tablekeeper_store::testing::TestDatabase;
use tablekeeper_store::{connect, JobStore, StoreOptions};

/// Keeps the database alive for the test and removes it afterwards.
pub enum Backing {
    Postgres(TestDatabase),
    Sqlite(tempfile::TempDir),
}

pub struct Harness {
    pub store: Arc<JobStore>,
    pub url: String,
    backing: Backing,
}

impl Harness {
    pub async fn postgres() -> Self {
        let db = TestDatabase::create().await.expect("create test database");
        let store = db.connect_store().await.expect("connect and migrate");
        Self {
            store,
            url: db.url.clone(),
            backing: Backing::Postgres(db),
        }
    }

    pub async fn sqlite() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        // A directory that does not exist yet: the store creates it.
        let url = format!("sqlite://{}/data/tablekeeper.db", dir.path().display());
        let store = connect(&url, StoreOptions::default())
            .await
            .expect("open sqlite");
        store.migrate().await.expect("migrate sqlite");
        Self {
            store,
            url,
            backing: Backing::Sqlite(dir),
        }
    }

    /// Another, independent connection pool on the same database (a "replica").
    pub async fn replica(&self, max_connections: u32) -> Arc<JobStore> {
        let opts = StoreOptions {
            max_connections,
            ..StoreOptions::default()
        };
        connect(&self.url, opts).await.expect("connect replica")
    }

    pub async fn finish(self) {
        self.store.close().await;
        match self.backing {
            Backing::Postgres(db) => db.drop_db().await.expect("drop test database"),
            Backing::Sqlite(dir) => drop(dir),
        }
    }
}
