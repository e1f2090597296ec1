//! Opening a job store: the URL scheme picks the dialect, the driver is the same.

use std::sync::Arc;

use crate::dialect::Backend;
use crate::dialect::Dialect;
use crate::error::StoreError;
use crate::options::StoreOptions;
use crate::postgres::PostgresDialect;
use crate::sqlite::SqliteDialect;
use crate::store::JobStore;

/// Opens the store named by `url`:
/// `postgres://...` or `postgresql://...` → Postgres;
/// `sqlite://PATH` (created if missing, WAL mode) or `sqlite::memory:` → SQLite.
///
/// Does not migrate: call [`JobStore::migrate`]. Every call of the returned store is timed
/// and reported to `opts.observer`.
pub async fn connect(url: &str, opts: StoreOptions) -> Result<Arc<JobStore>, StoreError> {
    let dialect: Box<dyn Dialect> = match scheme_of(url)? {
        Backend::Postgres => Box::new(PostgresDialect::connect(url, &opts).await?),
        Backend::Sqlite => Box::new(SqliteDialect::connect(url, &opts).await?),
    };
    Ok(Arc::new(JobStore::new(
        dialect,
        opts.observer,
        opts.call_timeout,
    )))
}

/// The backend a URL names, or a `Config` error saying which URLs work.
pub fn scheme_of(url: &str) -> Result<Backend, StoreError> {
    let url = url.trim();
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Backend::Postgres)
    } else if url.starts_with("sqlite:") {
        Ok(Backend::Sqlite)
    } else {
        let scheme = url.split_once(':').map_or("", |(scheme, _)| scheme);
        let reason = if scheme.is_empty() {
            "no scheme".to_owned()
        } else {
            format!("unsupported scheme `{scheme}`")
        };
        Err(StoreError::config(url, reason))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemes_pick_the_backend() {
        for url in ["postgres://u@h/db", "postgresql://u:p@h:5432/db"] {
            assert_eq!(scheme_of(url).unwrap(), Backend::Postgres);
        }
        for url in [
            "sqlite://tk.db",
            "sqlite:///var/lib/tk.db",
            "sqlite::memory:",
        ] {
            assert_eq!(scheme_of(url).unwrap(), Backend::Sqlite);
        }
        let err = scheme_of("mysql://u:secret@h/db").unwrap_err().to_string();
        assert!(err.contains("unsupported scheme `mysql`"), "{err}");
        assert!(!err.contains("secret"), "{err}");
        assert!(scheme_of("/var/lib/tk.db")
            .unwrap_err()
            .to_string()
            .contains("no scheme"));
    }
}
