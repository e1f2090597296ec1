//! Turning an inventory path into a loaded [`DeltaTable`].
//!
//! Owns uri validation, the one-time registration of deltalake's cloud storage handlers, and
//! building every table on a [`LogKeepingStore`], so that no commit made through a table opened
//! here can delete a log file ([`crate::log::guard`]). Only [`unguarded_log_store`] hands out the
//! plain store, for the checkpoint operation's proven log cleanup. Under both, [`SharedReads`]
//! answers repeated reads of a commit file from memory ([`crate::log::shared_reads`]), and
//! under that, while a meter is current, a [`MeteredStore`] counts every request that goes out
//! ([`crate::cost`]).
//! Credentials come only from the environment (or the platform identity) through deltalake's
//! object-store configuration; this module must never take credentials as parameters or log them.

use std::collections::HashMap;
use std::sync::{Arc, Once, OnceLock};

use deltalake::logstore::LogStoreRef;
use deltalake::{DeltaTable, DeltaTableBuilder, DeltaTableError, ObjectStore};
use url::Url;

use crate::cost::{self, store::MeteredStore};
use crate::error::DeltaError;
use crate::log::guard::LogKeepingStore;
use crate::log::shared_reads::SharedReads;

static REGISTER_HANDLERS: Once = Once::new();

/// Object-store settings every table is opened with (timeouts, retries; never credentials).
static STORAGE_OPTIONS: OnceLock<HashMap<String, String>> = OnceLock::new();

/// Sets the object-store options every table of this process is opened with, such as
/// `timeout`, `connect_timeout`, `max_retries`, `retry_timeout` (deltalake's storage option
/// names). Credentials stay in the environment. The first call wins; later calls report
/// whether they asked for the same.
pub fn set_storage_options(options: HashMap<String, String>) -> bool {
    let wanted = options.clone();
    STORAGE_OPTIONS.get_or_init(|| options) == &wanted
}

fn builder(uri: &str, url: Url) -> Result<DeltaTableBuilder, DeltaError> {
    let builder = DeltaTableBuilder::from_url(url).map_err(|err| map_open_error(uri, err))?;
    Ok(match STORAGE_OPTIONS.get() {
        Some(options) if !options.is_empty() => builder.with_storage_options(options.clone()),
        _ => builder,
    })
}

/// Registers the s3, gcs and azure object stores with deltalake, once per process.
///
/// deltalake also registers them from a constructor when its cloud features are on; calling the
/// registration here as well keeps the crate correct if that ever changes, and it is idempotent.
pub fn register_handlers() {
    REGISTER_HANDLERS.call_once(|| {
        deltalake::aws::register_handlers(None);
        deltalake::gcp::register_handlers(None);
        deltalake::azure::register_handlers(None);
    });
}

/// Url schemes accepted for table paths, besides plain absolute local paths.
const ACCEPTED_SCHEMES: &[&str] = &["file", "s3", "s3a", "gs", "az", "abfs", "abfss"];

/// Parses an inventory path into the url deltalake loads from, without touching storage.
pub fn table_url(uri: &str) -> Result<Url, DeltaError> {
    let invalid = |reason: String| DeltaError::InvalidUri {
        table: uri.to_owned(),
        reason,
    };
    if uri.is_empty() {
        return Err(invalid("the path is empty".into()));
    }
    let url = if uri.starts_with('/') {
        Url::from_directory_path(uri).map_err(|()| invalid("not a valid absolute path".into()))?
    } else {
        let url = Url::parse(uri).map_err(|err| {
            if err == url::ParseError::RelativeUrlWithoutBase {
                invalid("relative paths are not allowed".into())
            } else {
                invalid(err.to_string())
            }
        })?;
        if !ACCEPTED_SCHEMES.contains(&url.scheme()) {
            return Err(invalid(format!("unsupported scheme `{}`", url.scheme())));
        }
        if url.scheme() == "file" && url.to_file_path().is_err() {
            return Err(invalid("file:// uri does not name a local path".into()));
        }
        url
    };
    Ok(url)
}

/// Opens the table at `uri` at its latest version.
///
/// Accepts absolute local paths, `file://`, `s3://`, `gs://`, `az://` and `abfss://` uris. A
/// location without a `_delta_log` is a permanent [`DeltaError::NotADeltaTable`].
pub async fn open_table(uri: &str) -> Result<DeltaTable, DeltaError> {
    let mut table = build_table(uri).await?;
    load_latest(uri, &mut table).await?;
    Ok(table)
}

/// Loads a handle from [`build_table`] at the latest version. Apart from [`open_table`] for
/// a caller that reads the log through the handle's stores while the snapshot loads.
pub(crate) async fn load_latest(uri: &str, table: &mut DeltaTable) -> Result<(), DeltaError> {
    table.load().await.map_err(|err| map_open_error(uri, err))
}

/// Opens the table at `uri` as of `version` (time travel).
pub(crate) async fn open_table_at(uri: &str, version: u64) -> Result<DeltaTable, DeltaError> {
    let mut table = build_table(uri).await?;
    table
        .load_version(version)
        .await
        .map_err(|err| map_open_error(uri, err))?;
    Ok(table)
}

/// Builds an unloaded table handle and checks that `_delta_log` exists.
pub(crate) async fn build_table(uri: &str) -> Result<DeltaTable, DeltaError> {
    register_handlers();
    let url = table_url(uri)?;
    if url.scheme() == "file" {
        // a missing local directory is the commonest inventory typo; say so plainly
        let exists = url
            .to_file_path()
            .map(|path| path.join("_delta_log").is_dir())
            .unwrap_or(false);
        if !exists {
            return Err(DeltaError::NotADeltaTable {
                table: uri.to_owned(),
            });
        }
    }
    let root = layered(
        builder(uri, url.clone())?
            .build_storage()
            .map_err(|err| map_open_error(uri, err))?
            .root_object_store(None),
        &url,
    );
    let guarded: Arc<dyn ObjectStore> = Arc::new(LogKeepingStore::new(root));
    let table = builder(uri, url.clone())?
        .with_storage_backend(guarded, url)
        .build()
        .map_err(|err| map_open_error(uri, err))?;
    let is_table = table
        .verify_deltatable_existence()
        .await
        .map_err(|err| DeltaError::delta(uri, "checking for _delta_log", err))?;
    if !is_table {
        return Err(DeltaError::NotADeltaTable {
            table: uri.to_owned(),
        });
    }
    Ok(table)
}

/// The table's log store without the [`LogKeepingStore`]: deletes reach storage. Only the
/// checkpoint operation's log cleanup may use it, after proving what it deletes is not needed.
pub(crate) fn unguarded_log_store(uri: &str) -> Result<LogStoreRef, DeltaError> {
    register_handlers();
    let url = table_url(uri)?;
    let root = builder(uri, url.clone())?
        .build_storage()
        .map_err(|err| map_open_error(uri, err))?
        .root_object_store(None);
    builder(uri, url.clone())?
        .with_storage_backend(layered(root, &url), url)
        .build_storage()
        .map_err(|err| map_open_error(uri, err))
}

/// `root` under the layers every table's store has: the process's shared reads of log files
/// (unless turned off), over the current meter's count of requests when work runs under one
/// ([`crate::cost`]).
fn layered(root: Arc<dyn ObjectStore>, url: &Url) -> Arc<dyn ObjectStore> {
    let counted: Arc<dyn ObjectStore> = match cost::scope::current() {
        Some(meter) => Arc::new(MeteredStore::new(root, meter)),
        None => root,
    };
    if !crate::log::shared_reads::enabled() {
        return counted;
    }
    Arc::new(SharedReads::new(counted, url))
}

fn map_open_error(uri: &str, err: DeltaTableError) -> DeltaError {
    match err {
        DeltaTableError::NotATable(_) => DeltaError::NotADeltaTable {
            table: uri.to_owned(),
        },
        DeltaTableError::InvalidTableLocation(reason) => DeltaError::InvalidUri {
            table: uri.to_owned(),
            reason,
        },
        other => DeltaError::delta(uri, "loading the table", other),
    }
}

/// The version of a loaded table; a table handed around unloaded is a bug, said plainly.
pub(crate) fn loaded_version(uri: &str, table: &DeltaTable) -> Result<u64, DeltaError> {
    table.version().ok_or_else(|| DeltaError::Internal {
        table: uri.to_owned(),
        reason: "the table was not loaded before its version was read".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_absolute_paths_and_cloud_schemes() {
        assert_eq!(
            table_url("/data/t").expect("abs").as_str(),
            "file:///data/t/"
        );
        for uri in [
            "file:///data/t",
            "s3://lake/silver/events",
            "gs://lake/t",
            "az://container/t",
            "abfss://c@account.dfs.core.windows.net/t",
        ] {
            assert!(table_url(uri).is_ok(), "{uri}");
        }
    }

    #[test]
    fn refuses_relative_paths_and_unknown_schemes() {
        let err = table_url("data/t").expect_err("relative");
        assert!(err.to_string().contains("relative"), "{err}");
        let err = table_url("hdfs://nn/t").expect_err("scheme");
        assert!(err.to_string().contains("hdfs"), "{err}");
        assert!(table_url("").is_err());
    }
}
